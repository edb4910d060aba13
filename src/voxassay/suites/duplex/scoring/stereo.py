"""Score two-channel recordings of calls: acoustic segments per channel, then turn-taking.

``voxassay duplex score --stereo call.wav`` (or ``--user u.wav --agent a.wav``) writes a run
directory: ``items.jsonl`` (one item per call), ``records.jsonl`` (per call: the detected
segments of both channels, the analysis and its timing) and the report. The report re-runs
the turn-taking analysis from the stored segments, so it needs nothing but the run folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.contracts.duplex.provenance import (
    RecordingEvidence,
    read_sidecar,
    recording_evidence,
    sidecar_for,
)
from voxassay.core import jsonio
from voxassay.core.audio import Audio, channel_count, load_audio
from voxassay.core.audio import load_channels as read_channels
from voxassay.core.errors import AudioError, InputError
from voxassay.core.items import Item
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.duplex.scoring.session_score import SessionScore

SUITE_NAME = "duplex"
METRICS_VERSION = "duplex-stereo/2"
ANALYSIS_SR = 16_000


@dataclass
class CallInput:
    """One call: a stereo file (``user_channel`` says which side is the user) or two files."""

    id: str
    stereo: str | None = None
    user: str | None = None
    agent: str | None = None
    user_channel: int = 0
    labels: list[dict[str, Any]] = field(default_factory=list)
    sidecar: str | None = None
    """The ``provenance.json`` that declares how the recording was captured (None: unknown)."""

    @property
    def files(self) -> list[str]:
        return [self.stereo] if self.stereo else [str(self.user), str(self.agent)]

    def to_item(self) -> Item:
        meta: dict[str, Any] = {"user_channel": self.user_channel, "labels": self.labels}
        if self.sidecar:
            meta["provenance_sidecar"] = self.sidecar
        return Item(
            id=self.id,
            audio=self.files,
            labels={"input": "stereo" if self.stereo else "two_files"},
            meta=meta,
        )

    def evidence(self) -> RecordingEvidence:
        """The recording's evidence: L2 provenance unknown, or derived from its sidecar."""
        sidecar = Path(self.sidecar) if self.sidecar else None
        declared = read_sidecar(sidecar) if sidecar is not None else None
        return recording_evidence([Path(f) for f in self.files], declared, sidecar)

    @classmethod
    def from_item(cls, item: Item) -> CallInput:
        audio = item.audio or ([item.audio_filepath] if item.audio_filepath else [])
        stereo = audio[0] if len(audio) == 1 else None
        return cls(
            id=item.id,
            stereo=stereo,
            user=None if stereo else audio[0],
            agent=None if stereo else audio[1],
            user_channel=int(item.meta.get("user_channel", 0)),
            labels=list(item.meta.get("labels") or []),
            sidecar=item.meta.get("provenance_sidecar"),
        )


def load_channels(call: CallInput) -> tuple[np.ndarray, np.ndarray, int]:
    """User and agent samples at 16 kHz on one clock.

    A stereo file must have exactly two channels (mono is refused: there is no second side
    to score; more channels are refused: which two are the user and the agent is not
    known); it is read by the checked loader (truncated files and NaN samples are errors).
    Two files are aligned at their first sample and the shorter is padded with silence.
    """
    if call.stereo:
        path = Path(call.stereo)
        data, sr = read_channels(path)
        _check_two_channels(path, data.shape[1])
        if call.user_channel not in (0, 1):
            raise InputError(f"user channel must be 0 or 1, not {call.user_channel}")
        user = Audio(data[:, call.user_channel].copy(), int(sr))
        agent = Audio(data[:, 1 - call.user_channel].copy(), int(sr))
    else:
        user = load_audio(str(call.user), sr=None)
        agent = load_audio(str(call.agent), sr=None)
    from voxassay.core.audio import resample

    u = resample(user, ANALYSIS_SR).samples
    a = resample(agent, ANALYSIS_SR).samples
    n = max(len(u), len(a))
    u = np.pad(u, (0, n - len(u)))
    a = np.pad(a, (0, n - len(a)))
    return u, a, ANALYSIS_SR


def segment_call(call: CallInput, detector: str, transcriber: Any = None) -> dict[str, Any]:
    """Detect both channels' segments; returns the record ``output`` (segments, duration,
    each channel's acoustic report and the problems found, conditions outside what the stated
    accuracy was measured under among them). With a ``transcriber``, the short sounds are
    transcribed and their segments carry ``token`` (``evidence.backchannel_asr``; the cost in
    ``output["asr"]``)."""
    import soundfile as sf

    from voxassay.suites.duplex.evidence.acoustic_accuracy import outside_validated

    user, agent, sr = load_channels(call)
    out = segment_sides(user, agent, sr, detector, source=call.files[0])
    if transcriber is not None:
        from voxassay.suites.duplex.evidence.backchannel_asr import annotate_tokens

        out["asr"] = annotate_tokens(
            {"user": user, "agent": agent}, sr, out["segments"], transcriber
        )
    names = [Path(f).name for f in call.files]  # the full path where two share a name
    infos = {
        n if names.count(n) == 1 else f: sf.info(f) for n, f in zip(names, call.files, strict=True)
    }
    rate = min(int(i.samplerate) for i in infos.values())
    codecs = {name: str(i.subtype) for name, i in infos.items()}
    out["codecs"] = codecs
    out["problems"] += [
        {"file": call.files[0], "line": None, "column": None, "severity": "warning", "message": m}
        for m in outside_validated(out["acoustic"], rate, codecs)
    ]
    return out


def segment_sides(
    user: np.ndarray, agent: np.ndarray, sr: int, detector: str, source: str = "recording"
) -> dict[str, Any]:
    """Speech segments of the two sides of one call (same clock, same length), with the
    call's duration, the detector, each side's acoustic report (``acoustic.ChannelReport``:
    noise floor, digital silence, leakage from the other side, what refinement kept) and
    the problems those reports raise (warnings on ``source``): the record ``output`` of a
    recording. Each side is checked against the other, so echo and crosstalk are labelled."""
    from voxassay.suites.duplex.evidence.bundle_io import segments_of

    out = segments_of(user, agent, sr, detector)
    out["problems"] = [
        {"file": source, "line": None, "column": None, "severity": "warning", "message": m}
        for side, report in out["acoustic"].items()
        for m in (f"{side}: {p}" for p in report["problems"])
    ]
    return out


def score_calls(
    calls: Sequence[CallInput],
    out: str | Path,
    *,
    detector: str = "silero",
    system: str = "recordings",
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
    asr: str = "none",
) -> RunStore:
    """Segment and analyse every call into ``out/<run_id>/``; a bad call is an error record.
    ``asr``: a transcriber spec (``faster-whisper``) that hears the short sounds, or ``none``
    (backchannels then by duration, timing and level)."""
    from voxassay.suites.duplex.evidence.acoustic_accuracy import detector_info

    transcriber = None
    if asr != "none":
        from voxassay.core.registry import REGISTRY

        transcriber = REGISTRY.build("transcribe", asr)

    ids = [c.id for c in calls]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"duplicate call ids: {', '.join(dupes)} (name the files differently)")
    config = {
        "mode": "stereo",
        "systems": [system],
        "detector": detector_info(detector),
        "asr": asr if transcriber is None else {"spec": asr, **_describe(transcriber)},
        "metrics_version": METRICS_VERSION,
        "inputs": [c.to_item().audio for c in calls],
    }
    store = RunStore.create(out, SUITE_NAME, config, [c.to_item() for c in calls])
    for call in calls:
        started = utc_now()
        t0 = time.perf_counter()
        try:
            output = segment_call(call, detector, transcriber)
            output["evidence"] = call.evidence().to_dict()
            score = SessionScore.model_validate(output)
            analysis = score.analysis(call.id, call.labels)
            rec = Record(
                id=call.id, system=system, output=score.to_output(), metrics=_call_metrics(analysis)
            )
            rec.timing = {
                "compute_s": round(time.perf_counter() - t0, 4),
                "audio_s": round(float(output["duration_s"]), 4),
            }
        except AudioError as exc:
            rec = error_record(call.id, system, 0, exc.kind, str(exc))
        except InputError as exc:
            rec = error_record(call.id, system, 0, exc.kind, str(exc))
        except ValueError as exc:  # a sidecar changed or broke after the inputs were checked
            rec = error_record(call.id, system, 0, "provenance", str(exc))
        rec.started_at, rec.ended_at = started, utc_now()
        store.append(rec)
        if on_record:
            on_record(rec)
    from voxassay.report import finish_run

    return finish_run(store, write_reports)


def _describe(transcriber: Any) -> dict[str, Any]:
    describe = getattr(transcriber, "describe", None)
    return dict(describe()) if callable(describe) else {}


def _call_metrics(analysis: Any) -> dict[str, Any]:
    """Headline numbers of one call (the full analysis is recomputed by the report)."""
    d = analysis.to_dict()
    rates = {k: {"k": v["k"], "n": v["n"]} for k, v in d["rates"].items()}
    lat = {k: v.get("summary", {}).get("p50") for k, v in d["latencies"].items()}
    return {"rates": rates, "latency_p50_ms": lat, "labels": d["labels"]}


def _check_two_channels(path: Path, channels: int) -> None:
    if channels == 1:
        raise AudioError(
            f"{path} is mono: a two-channel recording (user and agent) is expected; "
            "pass --user and --agent for two separate files",
            kind="mono",
        )
    if channels != 2:
        raise AudioError(
            f"{path} has {channels} channels: a two-channel recording (user and agent) is "
            "expected; extract the two talkers' channels first",
            kind="channels",
        )


def calls_from_paths(
    stereo: Sequence[str | Path],
    user: str | Path | None,
    agent: str | Path | None,
    user_channel: int,
    labels_file: str | Path | None,
) -> list[CallInput]:
    """Calls from CLI arguments: each stereo file (or a folder of WAV/FLAC files) is a call."""
    calls: list[CallInput] = []
    for p in map(Path, stereo):
        files = (
            sorted(q for q in p.iterdir() if q.suffix.lower() in (".wav", ".flac"))
            if p.is_dir()
            else [p]
        )
        if not p.is_dir():  # a file named on the command line: checked before any work
            try:
                _check_two_channels(p, channel_count(p))
            except AudioError as exc:
                raise InputError(str(exc)) from None
        calls += [CallInput(id=f.stem, stereo=str(f), user_channel=user_channel) for f in files]
    if user or agent:
        if not (user and agent):
            raise InputError("--user and --agent go together")
        calls.append(CallInput(id=Path(user).stem, user=str(user), agent=str(agent)))
    if not calls:
        raise InputError("nothing to score: give --stereo FILE|DIR or --user and --agent")
    problems = []
    for c in calls:
        sidecar = sidecar_for(Path(c.files[0]))
        if sidecar is None:
            continue
        try:
            read_sidecar(sidecar)
        except ValueError as exc:
            problems.append(str(exc))
        c.sidecar = str(sidecar)
    if problems:
        raise InputError("invalid provenance sidecar(s):\n  " + "\n  ".join(sorted(set(problems))))
    if labels_file:
        by_call = _read_labels(Path(labels_file))
        for c in calls:
            c.labels = by_call.get(c.id, []) + (by_call.get("*", []) if len(calls) == 1 else [])
    return calls


def _read_labels(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Labels JSONL: ``{"call": ID, "start_s", "end_s", "expected_actions": [...], ...}``.

    ``call`` may be left out when one call is scored.
    """
    if not path.exists():
        raise InputError(f"labels file not found: {path}")
    out: dict[str, list[dict[str, Any]]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = jsonio.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict) or "start_s" not in obj or "end_s" not in obj:
            raise InputError(f"{path}:{lineno}: a label needs start_s and end_s")
        out.setdefault(str(obj.pop("call", "*")), []).append(obj)
    return out
