"""Score evidence bundles end to end: ``voxeval duplex score BUNDLE_DIR [BUNDLE_DIR ...]``.

A bundle (DESIGN.md, "Full-duplex ledger and bundle") is one session. Each is scored on its
own; a bundle that cannot be scored becomes an error record with its reasons and the run goes
on. Per bundle:

1. **Validation** (``validate.validate_bundle``): every problem is kept in the record as
   ``file:line: severity: message``. Most problems do not stop scoring (a malformed ledger
   line is skipped, an unknown event type is kept and ignored by the scorers); the bundle is
   an error record only when something scoring needs is unusable (see ``BundleError``): no or
   an invalid ``manifest.json``, no ledger or no valid event in it, audio that cannot be read,
   a mono ``mixed.wav`` where it is the only audio (the two sides cannot be told apart), or
   audio that ends before the ledger's last event (more than
   ``validate.AUDIO_SPAN_TOLERANCE_MS``): acoustic truth would be missing for the rest.
2. **Evidence level** from the manifest's provenance facts (``schema.derive_evidence_level``
   with the bundle folder, so missing or altered files do not count); never self-declared.
3. **Acoustic segments** of ``input.wav`` (user side) and ``output.wav`` (agent side), as for
   recordings (``acoustic.detect_segments``; a redacted bundle brings its stored segments in
   ``features.json``), and the derived ``acoustic.speech_started/stopped`` events on the
   session clock: ``t_session = audio_origin_ns + t_audio`` (``manifest.clock.audio_origin_ns``,
   else the first ledger event). ``acoustic.*`` events already in the ledger are replaced by
   these, so every bundle of a run uses one detector. A user-side segment whose onset lies
   within ``ALIGN_TOLERANCE_S`` of a scenario truth onset (``user.speech_started`` with
   ``data.segment_id``) is aligned to that segment: it takes its ``segment_id`` (and so its
   intents), which is how the ledger metrics know which acoustic
   onsets are interruptions and which user ends are not respondable (backchannels).
4. **Ledger latencies** (``metrics.MetricAccumulator`` with ``DEFAULT_PAIRS``): the ledger's
   valid events of this session plus the derived acoustic events, in causal order, with the
   session's clock records; ``SessionMeta`` from the manifest (route, device, language,
   system version) and the scenario (category, per-segment intents). A start whose end never
   came is censored: counted in n and in n_censored, never zero.
5. **Behaviour** (``turns.analyze_call``) from the two sides' segments with the scenario's
   labels: each segment's ``expected_actions`` and ``intents`` placed at its actual start,
   the time of its ``user.speech_started`` truth event (end: its ``user.speech_stopped``).
   A scenario segment without a truth event gets no label (counted in ``labels_missing``).
6. **Task and side effects** (``task.score_task``) from ``scenario.yaml``,
   ``final-state.json``, ``tool-audit.json`` and the ledger.
7. **Causal slices**: every failed task check (``task.task_failure_slice``, kind ``task``),
   every wrong turn decision (``behaviour_slice``, kind ``behaviour``), every failed history
   consistency case (``recovery.history_slice``, kind ``history``) and every failed recovery
   accuracy case (``recovery.recovery_slice``, kind ``recovery``) is walked back to its input
   with the first failing gate, the last gate that passed before it, and the layer of the
   first failing one.
   Agent utterances are linked to the scenario segments they heard by id or by time overlap
   (``task.UtteranceLinks``), so a live agent's own utterance ids do not break the chain.

The record keeps what the report needs to recompute everything without the audio: segments,
labels, compact pairs, the task result, the slices, the evidence level and its reasons, and
the problems.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxeval.core.errors import AudioError, InputError, VoxevalError
from voxeval.core.items import Item
from voxeval.core.records import Record, error_record
from voxeval.core.runstore import RunStore, utc_now
from voxeval.suites.duplex.schema import (
    Event,
    Problem,
    ProducerClock,
    Scenario,
)

if TYPE_CHECKING:
    from voxeval.suites.duplex.task import UtteranceLink, UtteranceLinks

__all__ = [
    "ALIGN_TOLERANCE_S",
    "BUNDLE_METRICS_VERSION",
    "FEATURES_FILE",
    "PAIR_FIELDS",
    "BundleError",
    "BundleRef",
    "BundleScore",
    "analysis_of",
    "behaviour_slice",
    "find_bundles",
    "pairs_of",
    "plan_bundles",
    "score_bundle_folder",
    "score_bundles",
    "session_meta_of",
]

BUNDLE_METRICS_VERSION = "duplex-bundle/1"
FEATURES_FILE = "features.json"
"""Derived audio features kept by a redacted bundle (see ``redact.py``)."""
ALIGN_TOLERANCE_S = 0.3
"""A user acoustic onset this close to a truth onset belongs to that scenario segment."""
FAILURE_WINDOW_S = 2.0
"""Ledger events this long after a wrong decision are read by its causal slice."""
MAX_MARKERS = 400
"""Ledger events kept per session for the timeline."""
PAIR_FIELDS = (
    "metric",
    "key",
    "start_ns",
    "end_ns",
    "censored_after_ms",
    "start_event_id",
    "end_event_id",
    "source",
    "route",
)
"""Column order of ``output.pairs.rows`` (one latency pair per row)."""
MARKER_TYPES = (
    "user.",
    "vad.",
    "asr.final",
    "turn.decision",
    "history.",
    "response.",
    "playback.",
    "tool.",
    "task.state",
    "session.",
    "network.",
    "fault.",
)
_WAVS = ("input.wav", "output.wav", "mixed.wav")
_ANALYSIS_SR = 16_000


class BundleError(VoxevalError):
    """A bundle that cannot be scored: ``kind`` (short), message, and the problems found."""

    def __init__(self, kind: str, message: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.problems = list(problems)


# --------------------------------------------------------------------------- discovery


def find_bundles(paths: Iterable[str | Path]) -> list[Path]:
    """Bundle folders named by ``paths``, in order, without duplicates.

    A folder holding ``manifest.json`` is a bundle; a ``manifest.json`` file names its folder;
    any other folder is searched recursively for ``manifest.json`` (folders starting with
    ``.`` or ``__`` are skipped). A folder named explicitly that holds ``events.jsonl`` but no
    manifest is kept, so that it is reported (as an error) rather than silently skipped.
    Raises ``InputError`` for a path that does not exist or holds no bundle.
    """
    found: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            found.append(p)

    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_file():
            if p.name != "manifest.json":
                raise InputError(f"{p}: not a bundle (give a bundle folder or its manifest.json)")
            add(p.parent)
            continue
        if (p / "manifest.json").is_file() or (p / "events.jsonl").is_file():
            add(p)
            continue
        hits = sorted(
            m.parent
            for m in p.rglob("manifest.json")
            if not any(part.startswith((".", "__")) for part in m.relative_to(p).parts)
        )
        if not hits:
            raise InputError(f"{p}: no bundle found (no manifest.json below it)")
        for h in hits:
            add(h)
    return found


_KEY_SAFE = re.compile(r"[^A-Za-z0-9_.:@+=-]+")


def _safe_key(text: str) -> str:
    """A session key usable in refs (``<key>/<id>``) and folder names: no ``/`` or spaces."""
    return _KEY_SAFE.sub("_", text).strip("._") or "session"


@dataclass
class BundleRef:
    """One bundle of a run: where it is, its unique key (the session id, made safe), the
    system it scores, its scenario and its repeat index among that system's bundles of the
    same scenario (ordered by ``created_at``, then path)."""

    path: Path
    key: str
    system: str
    session_id: str | None = None
    scenario_id: str | None = None
    scenario_version: int | None = None
    created_at: str | None = None
    repeat: int = 0
    stored: str | None = None
    """Where the run keeps it (relative to the run folder) when it was copied (``--redact``)."""

    @property
    def unit(self) -> str:
        """The key that pairs this session with a baseline run's: scenario id and repeat."""
        return f"{self.scenario_id}#{self.repeat}" if self.scenario_id else self.key

    def to_item(self) -> Item:
        where = self.stored or str(self.path)
        return Item(
            id=self.key,
            labels={"input": "bundle", "scenario": self.scenario_id or "unknown"},
            meta={
                "bundle": where,
                "source": str(self.path),
                "repeat": self.repeat,
                "session_id": self.session_id,
                "scenario_version": self.scenario_version,
                "unit": self.unit,
                "system": self.system,
            },
        )


def _peek_manifest(folder: Path) -> dict[str, Any]:
    """The manifest as plain JSON, or {} when it is missing or not JSON (scoring says why)."""
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def plan_bundles(paths: Iterable[str | Path], system: str | None = None) -> list[BundleRef]:
    """``find_bundles`` with keys, systems and repeat indices assigned (see ``BundleRef``).

    ``system`` overrides the system name the manifests give (``name@version``).
    """
    refs: list[BundleRef] = []
    used: set[str] = set()
    for folder in find_bundles(paths):
        m = _peek_manifest(folder)
        sid = m.get("session_id") if isinstance(m.get("session_id"), str) else None
        base = _safe_key(sid or folder.name)
        key, i = base, 2
        while key in used:
            key, i = f"{base}~{i}", i + 1
        used.add(key)
        sc: dict[str, Any] = m["scenario"] if isinstance(m.get("scenario"), dict) else {}
        sysinfo: dict[str, Any] = m["system"] if isinstance(m.get("system"), dict) else {}
        name = sysinfo.get("name") if isinstance(sysinfo.get("name"), str) else None
        version = sysinfo.get("version")
        spec = system or (f"{name}@{version}" if name and version else (name or "unknown-system"))
        version_num = sc.get("version")
        refs.append(
            BundleRef(
                path=folder,
                key=key,
                system=spec,
                session_id=sid,
                scenario_id=str(sc["id"]) if sc.get("id") is not None else None,
                scenario_version=version_num if isinstance(version_num, int) else None,
                created_at=str(m.get("created_at")) if m.get("created_at") else None,
            )
        )
    groups: dict[tuple[str, str], list[BundleRef]] = {}
    for r in refs:
        groups.setdefault((r.system, r.scenario_id or r.key), []).append(r)
    for members in groups.values():
        for n, r in enumerate(sorted(members, key=lambda r: (r.created_at or "", str(r.path)))):
            r.repeat = n
    return refs


# --------------------------------------------------------------------------- one bundle


@dataclass
class BundleScore:
    """What one bundle gives its record."""

    output: dict[str, Any]
    metrics: dict[str, Any]
    audio_s: float


@dataclass
class _Ledger:
    events: list[Event]
    lines: dict[str, int]
    malformed: int = 0
    foreign: int = 0
    unknown: Counter[str] = field(default_factory=Counter)


def _problem_dict(p: Problem) -> dict[str, Any]:
    return {"file": p.file, "line": p.line, "severity": p.severity, "message": p.message}


def _read_ledger(path: Path, session_id: str) -> _Ledger:
    """Valid events of ``session_id`` with their line numbers; other lines are counted (the
    validator lists each one with its line)."""
    from voxeval.suites.duplex.ledger import read_events

    led = _Ledger([], {})
    for line, item in read_events(path):
        if isinstance(item, Problem):
            led.malformed += 1
            continue
        if item.session_id != session_id:
            led.foreign += 1
            continue
        if not item.known_type:
            led.unknown[item.event_type] += 1
        led.events.append(item)
        led.lines.setdefault(item.event_id, line)
    return led


def _load_features(folder: Path) -> dict[str, Any]:
    path = folder / FEATURES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError("invalid-features", f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        msg = f"{path}:{exc.lineno}: malformed JSON: {exc.msg}"
        raise BundleError("invalid-features", msg) from None
    segs = data.get("segments") if isinstance(data, dict) else None
    if not isinstance(segs, dict) or not all(
        isinstance(segs.get(side), list) for side in ("user", "agent")
    ):
        raise BundleError("invalid-features", f"{path}: no segments.user / segments.agent lists")
    if not isinstance(data.get("duration_s"), int | float):
        raise BundleError("invalid-features", f"{path}: duration_s missing")
    return data


def _load_sides(folder: Path) -> tuple[Any, Any, int, list[Problem]]:
    """User and agent samples at 16 kHz on one clock, from input.wav + output.wav, else from
    the two channels of mixed.wav (left input, right output)."""
    import numpy as np
    import soundfile as sf

    from voxeval.core.audio import Audio, load_audio, resample

    notes: list[Problem] = []
    inp, outp, mixed = folder / "input.wav", folder / "output.wav", folder / "mixed.wav"
    try:
        if inp.is_file() and outp.is_file():
            sides = []
            for p in (inp, outp):
                try:
                    channels = int(sf.info(str(p)).channels)
                except Exception as exc:
                    raise AudioError(f"{p}: audio not readable: {exc}", kind="unreadable") from None
                if channels > 1:
                    msg = f"{channels} channels where one side (mono) is expected: downmixed"
                    notes.append(Problem(str(p), None, None, "warning", msg))
                sides.append(resample(load_audio(p, sr=None), _ANALYSIS_SR).samples)
            user, agent = sides
        elif mixed.is_file():
            try:
                data, sr = sf.read(str(mixed), dtype="float32", always_2d=True)
            except Exception as exc:
                raise AudioError(f"{mixed}: audio not readable: {exc}", "unreadable") from None
            if data.shape[1] < 2:
                raise AudioError(
                    f"{mixed}: mono where stereo is expected (left: input, right: output), and "
                    "input.wav/output.wav are absent: the user side cannot be told from the agent",
                    kind="mono",
                )
            user = resample(Audio(data[:, 0].copy(), int(sr)), _ANALYSIS_SR).samples
            agent = resample(Audio(data[:, 1].copy(), int(sr)), _ANALYSIS_SR).samples
            notes.append(
                Problem(
                    str(mixed),
                    None,
                    None,
                    "warning",
                    "input.wav/output.wav absent: sides taken from mixed.wav (left input, right "
                    "output)",
                )
            )
        else:
            missing = [p.name for p in (inp, outp) if not p.is_file()]
            raise AudioError(
                f"{folder}: no audio to score ({', '.join(missing)} missing and no mixed.wav)",
                kind="no-audio",
            )
    except AudioError as exc:
        raise BundleError(exc.kind, str(exc)) from None
    n = max(len(user), len(agent))
    user = np.pad(user, (0, n - len(user)))
    agent = np.pad(agent, (0, n - len(agent)))
    return user, agent, _ANALYSIS_SR, notes


def _segments_from_audio(folder: Path, detector: str) -> tuple[dict[str, Any], list[Problem]]:
    """Both sides' segments (``include_noise=True``) and the audio length, as recordings."""
    user, agent, sr, notes = _load_sides(folder)
    return _segments_of(user, agent, sr, detector), notes


def _segments_of(user: Any, agent: Any, sr: int, detector: str) -> dict[str, Any]:
    """Segments as plain JSON values (gaps as lists), as a record or features.json holds them."""
    from voxeval.suites.duplex.acoustic import detect_segments

    def plain(seg: Any) -> dict[str, Any]:
        d = asdict(seg)
        d["gaps"] = [list(g) for g in d["gaps"]]
        return d

    segs = {
        side: [
            plain(s)
            for s in detect_segments(x, sr, channel=c, detector=detector, include_noise=True)
        ]
        for c, (side, x) in enumerate((("user", user), ("agent", agent)))
    }
    return {"segments": segs, "duration_s": len(user) / sr, "detector": detector}


def _truth_times(
    events: Sequence[Event],
    clocks: Mapping[str, ProducerClock],
    origin: int,
    seg_ids: set[str],
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """Per scenario segment: first truth start and stop (audio seconds), and its utterance id.

    A truth event names its segment in ``data.segment_id``, or by an ``utterance_id`` equal to
    a segment id (the convention of ``task.py``).
    """
    from voxeval.suites.duplex.ledger import session_ns

    starts: dict[str, float] = {}
    stops: dict[str, float] = {}
    utt: dict[str, str] = {}
    utt_seg: dict[str, str] = {}
    for e in events:
        if e.event_type not in ("user.speech_started", "user.speech_stopped"):
            continue
        sid = e.data.get("segment_id")
        if not isinstance(sid, str):
            sid = utt_seg.get(e.utterance_id or "") or (
                e.utterance_id if e.utterance_id in seg_ids or not seg_ids else None
            )
        if not isinstance(sid, str):
            continue
        t = (session_ns(e, dict(clocks)) - origin) / 1e9
        if e.event_type == "user.speech_started":
            if sid not in starts:
                starts[sid] = t
                utt[sid] = e.utterance_id or sid
                if e.utterance_id:
                    utt_seg[e.utterance_id] = sid
        elif sid not in stops and (sid not in starts or t >= starts[sid]):
            stops[sid] = t
    return starts, stops, utt


def _labels(
    scenario: Scenario | None,
    starts: Mapping[str, float],
    stops: Mapping[str, float],
    user_segments: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Scenario labels placed at the segments' truth onsets; segments without one listed."""
    if scenario is None:
        return [], []
    labels: list[dict[str, Any]] = []
    missing: list[str] = []
    for seg in scenario.segments:
        if seg.id not in starts:
            missing.append(seg.id)
            continue
        start = starts[seg.id]
        end = stops.get(seg.id)
        if end is None:  # no truth end: the acoustic segment that starts near the onset
            near = [
                float(s["end_s"])
                for s in user_segments
                if abs(float(s["start_s"]) - start) <= ALIGN_TOLERANCE_S
            ]
            end = max(near) if near else start
        labels.append(
            {
                "id": seg.id,
                "start_s": round(start, 6),
                "end_s": round(max(end, start), 6),
                "expected_actions": [str(a) for a in seg.expected_actions],
                "intents": [str(i) for i in seg.intents],
                "role": str(seg.role),
            }
        )
    return labels, missing


def _acoustic_events(
    segments: Mapping[str, Sequence[Mapping[str, Any]]],
    origin: int,
    session_id: str,
    detector: str,
    starts: Mapping[str, float],
    utterances: Mapping[str, str],
) -> tuple[list[Event], dict[str, str]]:
    """``acoustic.speech_started/stopped`` per speech segment, on the session clock, with user
    segments aligned to the nearest truth onset within ``ALIGN_TOLERANCE_S`` (each truth
    segment aligned at most once). An aligned event names its scenario segment in
    ``data.segment_id`` (and the truth's utterance in ``data.utterance_id``), which is what the
    ledger metrics read its intents by; it carries no ``utterance_id`` field, so causal
    ordering keeps it at its measured time instead of after the truth event (a detector edge
    a millisecond before the truth onset is not a causality violation). Returns the events and
    ``{segment_id: acoustic_id}``."""
    from voxeval.suites.duplex.acoustic import PRODUCER

    events: list[Event] = []
    alignment: dict[str, str] = {}
    taken: set[str] = set()
    for channel, role in enumerate(("user", "agent")):
        speech = [s for s in segments.get(role, []) if s.get("kind", "speech") == "speech"]
        for k, seg in enumerate(speech):
            aid = f"{role}-{channel}-{k}"
            data: dict[str, Any] = {
                "channel": channel,
                "role": role,
                "level_dbfs": seg.get("level_dbfs"),
                "segment_id": aid,
                "acoustic_id": aid,
                "detector": detector,
            }
            if role == "user":
                s0 = float(seg["start_s"])
                near = [
                    (abs(t - s0), sid)
                    for sid, t in starts.items()
                    if sid not in taken and abs(t - s0) <= ALIGN_TOLERANCE_S
                ]
                if near:
                    sid = min(near)[1]
                    taken.add(sid)
                    alignment[sid] = aid
                    data["segment_id"] = sid
                    data["utterance_id"] = utterances.get(sid, sid)
            for kind, t in (("started", seg["start_s"]), ("stopped", seg["end_s"])):
                events.append(
                    Event.new(
                        f"acoustic.speech_{kind}",
                        session_id=session_id,
                        producer=PRODUCER,
                        monotonic_ns=origin + round(float(t) * 1e9),
                        event_id=f"acoustic-{aid}-{kind}",
                        data=dict(data),
                    )
                )
    events.sort(key=lambda e: (e.monotonic_ns, e.event_type != "acoustic.speech_stopped"))
    return events, alignment


def _excused(p: Problem, features: bool) -> bool:
    """Problems that a redacted bundle (features.json instead of audio) is allowed to have."""
    if not features:
        return False
    name = Path(p.file).name
    return name in _WAVS and "missing" in p.message


def score_bundle_folder(
    folder: str | Path, *, key: str | None = None, detector: str = "silero"
) -> BundleScore:
    """Score one bundle folder (see the module docstring); raises ``BundleError``."""
    from voxeval.suites.duplex.ledger import order_by_causality, producer_clocks, session_ns
    from voxeval.suites.duplex.metrics import (
        DEFAULT_PAIRS,
        MetricAccumulator,
        NonMonotonicTimestampWarning,
        SessionMeta,
    )
    from voxeval.suites.duplex.schema import derive_evidence_level
    from voxeval.suites.duplex.validate import (
        AUDIO_SPAN_TOLERANCE_MS,
        DuplexInputError,
        load_scenario,
        validate_bundle,
        validate_manifest,
    )

    folder = Path(folder)
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise BundleError(
            "no-manifest",
            f"{mpath}: required bundle file missing (provenance, hashes and the session id "
            "come from it)",
        )
    manifest, mprobs = validate_manifest(mpath)
    if manifest is None:
        errors = [p for p in mprobs if p.severity == "error"]
        text = "; ".join(p.format() for p in errors[:5])
        raise BundleError("invalid-manifest", f"invalid manifest: {text}", mprobs)
    sid = manifest.session_id
    key = key or _safe_key(sid)
    has_features = (folder / FEATURES_FILE).is_file() and not (
        (folder / "input.wav").is_file() and (folder / "output.wav").is_file()
    )
    problems = [p for p in validate_bundle(folder) if not _excused(p, has_features)]
    lpath = folder / "events.jsonl"
    if not lpath.is_file():
        raise BundleError("no-ledger", f"{lpath}: required bundle file missing", problems)
    ledger = _read_ledger(lpath, sid)
    if not ledger.events:
        why = (
            f"{ledger.malformed} malformed line(s)"
            if ledger.malformed
            else f"{ledger.foreign} event(s) of other sessions"
            if ledger.foreign
            else "no events"
        )
        raise BundleError("empty-ledger", f"{lpath}: no valid event of session {sid!r} ({why})")

    clocks = producer_clocks(ledger.events)
    timed = [(session_ns(e, clocks), e) for e in ledger.events if e.event_type != "clock.producer"]
    if not timed:
        raise BundleError("empty-ledger", f"{lpath}: only clock records, no events to score")
    origin = (
        manifest.clock.audio_origin_ns
        if manifest.clock.audio_origin_ns is not None
        else min(t for t, _ in timed)
    )

    # ---- audio: segments of both sides
    features: dict[str, Any] | None = None
    if has_features:
        features = _load_features(folder)
        seg_out: dict[str, Any] = {
            "segments": features["segments"],
            "duration_s": float(features["duration_s"]),
            "detector": str((features.get("detector") or {}).get("name") or detector),
        }
        segments_source = FEATURES_FILE
    else:
        seg_out, notes = _segments_from_audio(folder, detector)
        problems += notes
        segments_source = "audio"
    duration_s = float(seg_out["duration_s"])
    last_ns, last_event = max(timed, key=lambda x: x[0])
    span_s = (last_ns - origin) / 1e9
    if span_s * 1000 > duration_s * 1000 + AUDIO_SPAN_TOLERANCE_MS:
        where = f"{lpath}:{ledger.lines.get(last_event.event_id, '?')}"
        audio = (
            str(folder / FEATURES_FILE)
            if features is not None
            else f"{folder}: the audio (input.wav, output.wav)"
        )
        raise BundleError(
            "audio-short",
            f"{audio} lasts {duration_s:.3f} s but the ledger reaches "
            f"{span_s:.3f} s after the audio origin ({where}: {last_event.event_type}); the "
            "acoustic truth does not cover the events",
            problems,
        )

    # ---- scenario and truth
    scenario: Scenario | None = None
    notes_out: list[str] = []
    if (folder / "scenario.yaml").is_file():
        try:
            scenario = load_scenario(folder / "scenario.yaml")
        except DuplexInputError:
            notes_out.append(
                "scenario.yaml has errors (listed in problems): no scenario labels, category "
                "or task scoring for this session"
            )
    else:
        notes_out.append("no scenario.yaml: expected actions come from the acoustic rules")
    seg_ids = {s.id for s in scenario.segments} if scenario else set()
    starts, stops, utts = _truth_times(ledger.events, clocks, origin, seg_ids)
    labels, labels_missing = _labels(scenario, starts, stops, seg_out["segments"]["user"])
    if labels_missing:
        notes_out.append(
            f"{len(labels_missing)} scenario segment(s) without a user.speech_started truth "
            f"event: {', '.join(labels_missing)} (no label placed)"
        )

    # ---- derived acoustic events and ledger latencies
    ac_events, alignment = _acoustic_events(
        seg_out["segments"], origin, sid, str(seg_out["detector"]), starts, utts
    )
    ledger_acoustic = [e for e in ledger.events if e.event_type.startswith("acoustic.")]
    if ledger_acoustic:
        notes_out.append(
            f"{len(ledger_acoustic)} acoustic.* event(s) of the ledger replaced by the ones "
            "derived here from the audio (one detector for every bundle of the run)"
        )
    base_events = [e for e in ledger.events if not e.event_type.startswith("acoustic.")]
    stream = order_by_causality([*base_events, *ac_events])
    meta = SessionMeta.from_manifest(manifest, scenario)
    acc = MetricAccumulator(DEFAULT_PAIRS)
    acc.open_session(sid, meta, producer_clocks(stream))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonMonotonicTimestampWarning)
        pairs = list(acc.feed(stream))
    diag = acc.diagnostics()
    for w in caught:
        if issubclass(w.category, NonMonotonicTimestampWarning):
            problems.append(Problem(str(lpath), None, None, "warning", str(w.message)))

    # ---- behaviour
    output: dict[str, Any] = {
        **seg_out,
        "session_id": sid,
        "segments_source": segments_source,
        "origin_ns": origin,
        "labels": labels,
        "labels_missing": labels_missing,
        "alignment": alignment,
        "agent_cuts_s": sorted(
            round((session_ns(e, clocks) - origin) / 1e9, 6)
            for e in ledger.events
            if e.event_type == "playback.interrupted"
        ),
    }
    analysis = analysis_of(key, output)

    # ---- task and side effects
    task_dict: dict[str, Any] | None = None
    slices: list[dict[str, Any]] = []
    redaction = (features or {}).get("redaction") or {}
    masked = redaction.get("transcripts") in ("mask", "drop")
    dropped_lines = int((redaction.get("ledger") or {}).get("dropped_lines") or 0)
    if dropped_lines:
        problems.append(
            Problem(
                str(lpath),
                None,
                None,
                "warning",
                f"{dropped_lines} ledger line(s) that were not JSON objects were dropped by the "
                "redaction (they could not be checked for transcripts)",
            )
        )
    if scenario is not None:
        from voxeval.suites.duplex.task import (
            load_final_state,
            load_tool_audit,
            score_task,
            task_failure_slice,
        )

        state = audit = None
        if (folder / "final-state.json").is_file():
            try:
                state, _ = load_final_state(folder / "final-state.json")
            except InputError as exc:
                problems.append(
                    Problem(str(folder / "final-state.json"), None, None, "error", str(exc))
                )
        if (folder / "tool-audit.json").is_file():
            try:
                audit = load_tool_audit(folder / "tool-audit.json")
            except InputError as exc:
                problems.append(
                    Problem(str(folder / "tool-audit.json"), None, None, "error", str(exc))
                )
        result = score_task(scenario, state, audit, base_events)
        task_dict = result.to_dict()
        for check in result.failures:
            sl = task_failure_slice(check, base_events)
            sl["kind"] = "task"
            sl["time_s"] = _slice_time(sl, check.details, origin)
            if masked:
                _masked_transcripts(sl)
            slices.append(sl)
    else:
        notes_out.append("task and side effects not scored: no valid scenario.yaml")

    from voxeval.suites.duplex.recovery import history_slice, recovery_slice
    from voxeval.suites.duplex.task import UtteranceLinks

    rel = [(e, (session_ns(e, clocks) - origin) / 1e9) for e in base_events]
    links = UtteranceLinks(rel)
    for d in analysis.decisions:
        if not d.correct:
            slices.append(behaviour_slice(asdict(d), analysis, rel, links=links))
    after_break = _after_break(rel, seg_out, analysis, scenario, starts, labels, task_dict, origin)
    task_slices = {str(s["check"]): s for s in slices if s.get("kind") == "task"}
    for case in after_break["history_consistency"]["cases"]:
        if case.get("passed") is False:
            slices.append(history_slice(case, rel, links=links))
    for case in after_break["recovery_accuracy"]["cases"]:
        if case.get("passed") is False:
            slices.append(recovery_slice(case, rel, task_slices=task_slices, links=links))

    level, reasons = derive_evidence_level(manifest, folder)
    if features is not None:
        red = features.get("redaction") or {}
        reasons.append(
            "raw audio dropped by redaction"
            + (f" on {red.get('at')}" if red.get("at") else "")
            + f": segments and loudness come from {FEATURES_FILE}"
            + (
                f" (derived from the audio when the bundle was at {red.get('source_level')})"
                if red.get("source_level")
                else ""
            )
            + "; the level is that of the evidence the features were derived from, when the "
            + "redaction record is consistent (see the evidence reasons)"
        )
    severities = {p.severity for p in problems}
    output.update(
        {
            "bundle": str(folder),
            "scenario": (
                {
                    "id": scenario.id,
                    "version": scenario.version,
                    "category": str(scenario.category),
                }
                if scenario
                else (
                    {"id": manifest.scenario.id, "version": manifest.scenario.version}
                    if manifest.scenario
                    else None
                )
            ),
            "meta": {
                "route": meta.route,
                "category": meta.category,
                "device": meta.device,
                "language": meta.language,
                "system_version": meta.system_version,
                "scenario": meta.scenario,
            },
            "system": manifest.system.model_dump(mode="json") if manifest.system else None,
            "evidence": {
                "level": level,
                "reasons": reasons,
                "redacted": manifest.privacy.redacted,
                "raw_audio": "dropped" if features is not None else "present",
                "privacy": manifest.privacy.model_dump(mode="json"),
            },
            "pairs": {
                "fields": list(PAIR_FIELDS),
                "rows": [
                    [
                        p.metric,
                        p.key,
                        p.start_ns,
                        p.end_ns,
                        p.censored_after_ms,
                        p.start_event_id,
                        p.end_event_id,
                        p.source,
                        p.route,
                    ]
                    for p in pairs
                ],
            },
            "pair_diagnostics": diag.get("metrics", {}),
            "task": task_dict,
            **after_break,
            "slices": slices,
            "ledger": {
                "events": len(ledger.events),
                "malformed_lines": ledger.malformed,
                "foreign_session_lines": ledger.foreign,
                "unknown_types": dict(ledger.unknown),
                "nonmonotonic": int(diag.get("nonmonotonic", 0)),
                "producers": sorted({e.producer for e in ledger.events}),
                "clock_offsets_ms": {p: c.offset_ns / 1e6 for p, c in sorted(clocks.items())},
                "replaced_acoustic_events": len(ledger_acoustic),
            },
            "markers": _markers(rel),
            "notes": notes_out,
            "problems": [_problem_dict(p) for p in problems],
            "integrity": "errors"
            if "error" in severities
            else "warnings"
            if severities
            else "clean",
        }
    )
    headline = _headline(analysis, pairs, task_dict, level, slices)
    for name, block in after_break.items():
        cases = block["cases"]
        headline["rates"][name] = {
            "k": sum(1 for c in cases if c.get("passed") is True),
            "n": sum(1 for c in cases if c.get("passed") is not None),
            "not_assessable": sum(1 for c in cases if c.get("passed") is None),
        }
    return BundleScore(output, headline, duration_s)


def _after_break(
    rel: Sequence[tuple[Event, float]],
    seg_out: Mapping[str, Any],
    analysis: Any,
    scenario: Scenario | None,
    starts: Mapping[str, float],
    labels: Sequence[Mapping[str, Any]],
    task: Mapping[str, Any] | None,
    origin: int,
) -> dict[str, Any]:
    """``history_consistency`` and ``recovery_accuracy`` cases of the session (``recovery.py``:
    definitions, denominators, tolerance), as the record keeps them."""
    from voxeval.suites.duplex.recovery import (
        HISTORY_DEFINITION,
        HISTORY_TOLERANCE_MS,
        RECOVERY_DEFINITION,
        RECOVERY_VERSION,
        agent_cuts,
        decisions_by_segment,
        history_consistency,
        recovery_accuracy,
    )

    expected = {
        s.id: str(s.expected_history_action)
        for s in (scenario.segments if scenario else [])
        if s.expected_history_action is not None
    }
    history = history_consistency(
        rel,
        seg_out["segments"]["agent"],
        cuts=agent_cuts(analysis),
        expected=expected,
        onsets=starts,
    )
    recovery = recovery_accuracy(
        rel,
        labels,
        decisions_by_segment(analysis),
        task_checks=list(task.get("checks") or []) if task else None,
        origin_ns=origin,
    )
    return {
        "history_consistency": {
            "version": RECOVERY_VERSION,
            "tolerance_ms": HISTORY_TOLERANCE_MS,
            "definition": HISTORY_DEFINITION,
            "cases": history,
        },
        "recovery_accuracy": {
            "version": RECOVERY_VERSION,
            "definition": RECOVERY_DEFINITION,
            "cases": recovery,
        },
    }


def _slice_time(sl: Mapping[str, Any], details: Mapping[str, Any], origin: int) -> float | None:
    trig = sl.get("trigger") or details.get("trigger") or {}
    ns = trig.get("ns") if isinstance(trig, Mapping) else None
    if ns is None:
        calls = details.get("calls") or []
        ns = calls[0].get("requested_ns") if calls and isinstance(calls[0], Mapping) else None
    return None if ns is None else round((int(ns) - origin) / 1e9, 3)


def _masked_transcripts(sl: dict[str, Any]) -> None:
    """A redacted bundle's transcripts are masks: a perception gate that judged the text is
    not assessable; the first failing gate is recomputed without it."""
    changed = False
    for g in sl.get("gates") or []:
        if (
            g.get("gate") == "heard"
            and g.get("passed") is False
            and "asr.final " in str(g.get("note"))
        ):
            g["passed"] = None
            g["note"] = "transcript masked by redaction: what was heard cannot be judged"
            changed = True
    if not changed:
        return
    gates = sl["gates"]
    stop = next((i for i, g in enumerate(gates) if g.get("passed") is False), len(gates))
    passing = [g for g in gates[:stop] if g.get("passed") is True]
    failing = next((g for g in gates if g.get("passed") is False), None)
    sl["last_passing_gate"] = passing[-1]["gate"] if passing else None
    if failing is None:
        sl.update(
            first_failing_gate=None,
            layer="unknown",
            root_cause="unknown root cause",
            reason="no gate failed once masked transcripts are set aside",
        )
    else:
        sl.update(
            first_failing_gate=failing["gate"],
            layer=failing["layer"],
            root_cause=failing["layer"],
            reason=failing["note"],
        )


def _markers(rel: Sequence[tuple[Event, float]]) -> list[list[Any]]:
    """``[t_s, event_type, event_id, short label]`` of the ledger events a timeline shows."""
    out: list[list[Any]] = []
    for e, t in sorted(rel, key=lambda x: x[1]):
        if not e.event_type.startswith(MARKER_TYPES) or e.event_type == "tts.chunk":
            continue
        bits = [
            str(e.data.get(k))
            for k in ("action", "status", "segment_id")
            if e.data.get(k) is not None
        ]
        if e.reason:
            bits.append(e.reason)
        out.append([round(t, 4), e.event_type, e.event_id, " ".join(bits)])
        if len(out) >= MAX_MARKERS:
            break
    return out


def _headline(
    analysis: Any,
    pairs: Sequence[Any],
    task: Mapping[str, Any] | None,
    level: str,
    slices: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Per-session headline numbers (the report recomputes everything from the output)."""
    d = analysis.to_dict()
    by_metric: dict[str, list[float | None]] = {}
    for p in pairs:
        by_metric.setdefault(p.metric, []).append(p.value_ms)
    pair_summary = {
        m: {
            "n": len(v),
            "n_censored": sum(1 for x in v if x is None),
            "median_ms": _median([x for x in v if x is not None]),
        }
        for m, v in by_metric.items()
    }
    acc = d["rates"]["behaviour_accuracy"]
    return {
        "evidence_level": level,
        "rates": {k: {"k": v["k"], "n": v["n"]} for k, v in d["rates"].items()},
        "behaviour_accuracy": acc["value"],
        "latency_p50_ms": {k: v.get("summary", {}).get("p50") for k, v in d["latencies"].items()},
        "pairs": pair_summary,
        "task_passed": task.get("passed") if task else None,
        "task_failures": [
            c["name"] for c in (task or {}).get("checks", []) if c["passed"] is False
        ],
        "failures": len(slices),
    }


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# --------------------------------------------------------------------------- recompute


def analysis_of(key: str, output: Mapping[str, Any]) -> Any:
    """``turns.analyze_call`` of a record's stored segments and labels (pure)."""
    from voxeval.suites.duplex.turns import analyze_call

    segs = output["segments"]
    return analyze_call(
        segs["user"],
        segs["agent"],
        labels=list(output.get("labels") or []) or None,
        call_id=key,
        duration_s=output.get("duration_s"),
        agent_cuts_s=output.get("agent_cuts_s") or (),
    )


def session_meta_of(output: Mapping[str, Any]) -> Any:
    """The ``metrics.SessionMeta`` of a record (split fields only)."""
    from voxeval.suites.duplex.metrics import SessionMeta

    m = output.get("meta") or {}
    return SessionMeta(
        route=m.get("route"),
        category=m.get("category"),
        device=m.get("device"),
        language=m.get("language"),
        system_version=m.get("system_version"),
        scenario=m.get("scenario"),
    )


def pairs_of(key: str, output: Mapping[str, Any]) -> list[Any]:
    """The record's latency pairs as ``metrics.LatencyPair`` (session id = the run key)."""
    from voxeval.suites.duplex.metrics import LatencyPair

    block = output.get("pairs") or {}
    fields = list(block.get("fields") or PAIR_FIELDS)
    meta = session_meta_of(output)
    out = []
    for row in block.get("rows") or []:
        r = dict(zip(fields, row, strict=False))
        out.append(
            LatencyPair(
                metric=str(r["metric"]),
                session_id=key,
                key=str(r["key"]),
                start_ns=int(r["start_ns"]),
                end_ns=None if r.get("end_ns") is None else int(r["end_ns"]),
                censored_after_ms=r.get("censored_after_ms"),
                route=r.get("route"),
                meta=meta,
                start_event_id=str(r["start_event_id"]),
                end_event_id=r.get("end_event_id"),
                source="fallback" if r.get("source") == "fallback" else "primary",
            )
        )
    return out


# --------------------------------------------------------------------------- behaviour slices

_STOP_ACTIONS = frozenset({"interrupt", "pause"})
_KEEP_ACTIONS = frozenset({"continue", "ignore", "backchannel"})
_HEARD_TYPES = ("vad.speech_started", "asr.partial", "asr.final")
_CANCEL_TYPES = ("response.cancelled", "playback.stopped", "playback.interrupted")


def _failure_kind(expected: str, observed: str, point: str) -> str:
    """``missed_stop`` | ``false_stop`` | ``no_response`` | ``unwanted_response`` | ``other``."""
    if observed == "continue" and (
        expected in _STOP_ACTIONS or (expected == "listen" and point == "overlap")
    ):
        return "missed_stop"
    if expected in _KEEP_ACTIONS and observed in _STOP_ACTIONS:
        return "false_stop"
    if expected == "respond" and observed == "listen":
        return "no_response"
    if expected in ("listen", "ignore") and observed == "respond":
        return "unwanted_response"
    return "other"


def _is_cancel(e: Event) -> bool:
    return e.event_type in _CANCEL_TYPES or (
        e.event_type == "response.done" and str(e.data.get("status")) == "cancelled"
    )


def behaviour_slice(
    decision: Mapping[str, Any],
    analysis: Any,
    events: Sequence[tuple[Event, float]],
    *,
    links: UtteranceLinks | None = None,
) -> dict[str, Any]:
    """Causal slice of a wrong turn decision, from the outcome back to the input audio.

    ``decision``: a ``turns.Decision`` as a dict; ``events``: the ledger's events with their
    time in audio seconds; ``links``: a ``task.UtteranceLinks`` of the same events (built
    here when not given). The chain is: the outcome (the decision point), the scenario
    segment labelled there (if any), the agent utterance(s) that heard that segment (linked
    by the rule of ``task.UtteranceLinks``: by id, else by time overlap of the agent
    utterance's VAD/ASR span with the segment's truth span; the step says which and the
    overlap), the user sound (input audio span), the agent burst it met, and the ledger
    events in the window ``[t - 0.2 s, t + FAILURE_WINDOW_S]`` (to the censoring time for an
    unanswered turn). Where a gate reads VAD, ASR or decision events, those of the linked
    utterance(s) are preferred; *heard* is judged by the link itself when it can be (the
    segment has a truth span and the agent's VAD/ASR events carry utterance ids), else by
    any such event in the window. Gates, in order, each ``True``/``False``/``None``
    (not assessable from this ledger):

    - the agent should have stopped (``missed_stop``): *heard* (a ``vad.speech_started`` or
      ``asr.*`` event in the window; perception), *decided* (a ``turn.decision`` with a
      yielding action; decision), *acted* (``response.cancelled``, ``response.done``
      cancelled, ``playback.stopped/interrupted``; control), *silent* (the agent's audio
      stopped; false by the outcome; playback);
    - the agent should have kept talking (``false_stop``): *decided* (no ``turn.decision`` to
      interrupt or pause), *not cancelled* (no cancel or stop event), *audio kept* (false by
      the outcome: the audio stopped with nothing in the ledger asking for it; playback;
      not assessable when ``playback.completed`` shows the response simply ended);
    - the agent should have answered (``no_response``): *heard* (``vad.speech_stopped``),
      *decided* (``turn.decision`` respond or ``response.created``), *acted*
      (``playback.started``), *audible* (false by the outcome);
    - the agent should have waited (``unwanted_response``): *decided to wait* (false when a
      ``response.created`` or a ``turn.decision`` to respond falls in the window).

    The layer is that of the first failing gate; with none failing the root cause is
    unknown.
    """
    from voxeval.suites.duplex.task import UNKNOWN_ROOT_CAUSE, UtteranceLinks

    if links is None:
        links = UtteranceLinks(events)
    point, ref = str(decision["point"]), str(decision["ref"])
    expected, observed = str(decision["expected"]), str(decision["observed"])
    t0 = float(decision["time_s"])
    kind = _failure_kind(expected, observed, point)
    chain: list[dict[str, Any]] = [
        {
            "step": "outcome",
            "id": decision["id"],
            "note": f"{point} at {t0:.3f} s: expected {expected}, observed {observed}",
        }
    ]
    sound = label = burst = None
    t_end = t0 + FAILURE_WINDOW_S
    ev = next((e for e in analysis.events if e.id == ref), None)
    if ev is not None:
        sound = next((s for s in analysis.sounds if s.id == ev.sound), None)
        if ev.agent_burst:
            burst = next((b for b in analysis.bursts if b.id == ev.agent_burst), None)
    pause = next((p for p in analysis.pauses if p.id == ref), None)
    take = next((t for t in analysis.takeovers if t.id == ref), None)
    turn = next((t for t in analysis.turns if t.id == ref), None)
    if pause is not None and pause.takeover:
        take = next((t for t in analysis.takeovers if t.id == pause.takeover), None)
    if take is not None:
        burst = next((b for b in analysis.bursts if b.id == take.burst), None)
        t_end = max(t_end, take.agent_onset_s + 0.2)
    if turn is not None:
        last = next((s for s in analysis.sounds if s.id == turn.sounds[-1]), None)
        sound = last
        if turn.censored_after_ms is not None:
            t_end = max(t_end, turn.end_s + turn.censored_after_ms / 1000.0)
    if sound is not None and sound.label:
        label = sound.label
    linked: list[UtteranceLink] = []
    if label:
        chain.append({"step": "segment", "id": label, "note": "scenario segment (label)"})
        linked = links.utterances_for(label)
        if linked:
            note = linked[0].note()
            if len(linked) > 1:
                note += "; also " + ", ".join(
                    f"{lk.utterance_id} ({lk.overlap_ms or 0:.0f} ms)" for lk in linked[1:]
                )
            chain.append(
                {
                    "step": "utterance",
                    "id": linked[0].utterance_id,
                    "link": linked[0].how,
                    "overlap_ms": linked[0].overlap_ms,
                    "also": [lk.to_dict() for lk in linked[1:]],
                    "note": note,
                }
            )
        elif links.segment_span(label) is not None and links.spans:
            chain.append(
                {
                    "step": "utterance",
                    "id": None,
                    "note": f"no agent utterance overlaps segment {label}'s truth span",
                }
            )
    heard_by = {lk.utterance_id for lk in linked}
    # the link decides *heard* when the segment is timed and the agent's VAD/ASR carry ids
    link_judges = (
        label is not None and links.segment_span(str(label)) is not None and bool(links.spans)
    )
    if sound is not None:
        chain.append(
            {
                "step": "input",
                "id": sound.id,
                "start_s": sound.start_s,
                "end_s": sound.end_s,
                "note": f"user-side {sound.kind} ({sound.kind_source})",
            }
        )
    if burst is not None:
        chain.append(
            {
                "step": "agent",
                "id": burst.id,
                "start_s": burst.start_s,
                "end_s": burst.end_s,
                "note": f"agent burst ({burst.role})",
            }
        )
    t_start = t0 - 0.2
    if pause is not None:
        t_start = pause.start_s - 0.2
    win = [(e, t) for e, t in events if t_start <= t <= t_end]
    for e, t in win:
        if e.event_type.startswith(MARKER_TYPES) and e.event_type != "tts.chunk":
            chain.append(
                {"step": "ledger", "id": e.event_id, "type": e.event_type, "t_s": round(t, 4)}
            )
    types = {e.event_type for e, _ in events}
    has_decisions = "turn.decision" in types

    def find(pred: Callable[[Event], bool]) -> Event | None:
        """The first window event matching, those of the linked utterance(s) first."""
        if heard_by:
            own = next((e for e, _ in win if pred(e) and e.utterance_id in heard_by), None)
            if own is not None:
                return own
        return next((e for e, _ in win if pred(e)), None)

    def heard_gate(pred: Callable[[Event], bool], kinds: set[str], missing: str) -> None:
        if link_judges:
            ev = next(
                (e for e, _ in events if pred(e) and e.utterance_id in heard_by),
                None,
            )
            if ev is not None:
                note = f"{ev.event_type} {ev.event_id} of {ev.utterance_id} ({linked[0].note()})"
            elif heard_by:
                note = f"{linked[0].note()}, but it has no {' / '.join(sorted(kinds))}"
            else:
                note = f"no agent utterance overlaps segment {label}'s truth span: {missing}"
                nxt = links.next_after(str(label))
                if nxt is not None:
                    note += f" (the next one, {nxt[0]}, starts {nxt[1]:.3f} s after its end)"
            gates.append(("heard", "perception", ev is not None, note))
            return
        ev = find(pred)
        gates.append(
            (
                "heard",
                "perception",
                ev is not None if types & kinds else None,
                f"{ev.event_type} {ev.event_id}" if ev else missing,
            )
        )

    gates: list[tuple[str, str, bool | None, str]] = []
    if kind == "missed_stop":
        heard_gate(
            lambda e: e.event_type in _HEARD_TYPES,
            set(_HEARD_TYPES),
            "no VAD/ASR event after the onset",
        )
        dec = find(lambda e: e.event_type == "turn.decision")
        if not has_decisions:
            gates.append(("decided", "decision", None, "the ledger has no turn.decision events"))
        else:
            action = str(dec.data.get("action")) if dec else None
            ok = action in _STOP_ACTIONS | {"listen"}
            gates.append(
                (
                    "decided",
                    "decision",
                    ok,
                    f"turn.decision {action!r}" if dec else "no turn.decision",
                )
            )
        cancel = find(_is_cancel)
        gates.append(
            (
                "acted",
                "control",
                cancel is not None,
                f"{cancel.event_type} {cancel.event_id}"
                if cancel
                else "no cancel or playback stop",
            )
        )
        gates.append(("silent", "playback", False, "the agent's audio kept going (acoustic)"))
    elif kind == "false_stop":
        dec = find(lambda e: e.event_type == "turn.decision")
        if dec is None:
            gates.append(
                (
                    "decided",
                    "decision",
                    None if not has_decisions else True,
                    "no turn.decision in the window",
                )
            )
        else:
            action = str(dec.data.get("action"))
            gates.append(
                ("decided", "decision", action not in _STOP_ACTIONS, f"turn.decision {action!r}")
            )
        cancel = find(_is_cancel)
        gates.append(
            (
                "not_cancelled",
                "control",
                cancel is None,
                f"{cancel.event_type} {cancel.event_id}" if cancel else "no cancel or stop event",
            )
        )
        done = find(lambda e: e.event_type == "playback.completed")
        gates.append(
            (
                "audio_kept",
                "playback",
                None if done is not None else False,
                "playback.completed: the response ended by itself"
                if done is not None
                else "the agent's audio stopped (acoustic)",
            )
        )
    elif kind == "no_response":
        heard_gate(
            lambda e: e.event_type == "vad.speech_stopped",
            {"vad.speech_stopped"},
            "no end of speech detected",
        )
        dec = find(
            lambda e: (
                e.event_type == "response.created"
                or (e.event_type == "turn.decision" and str(e.data.get("action")) == "respond")
            )
        )
        gates.append(
            (
                "decided",
                "decision",
                dec is not None,
                f"{dec.event_type} {dec.event_id}" if dec else "no response.created or decision",
            )
        )
        play = find(lambda e: e.event_type == "playback.started")
        gates.append(
            (
                "acted",
                "control",
                play is not None,
                f"playback.started {play.event_id}" if play else "no playback.started",
            )
        )
        gates.append(("audible", "playback", False, "no agent audio (acoustic)"))
    elif kind == "unwanted_response":
        dec = find(
            lambda e: (
                e.event_type == "response.created"
                or (e.event_type == "turn.decision" and str(e.data.get("action")) == "respond")
            )
        )
        gates.append(
            (
                "decided_wait",
                "decision",
                False if dec is not None else None,
                f"{dec.event_type} {dec.event_id} while the user held the turn"
                if dec
                else "no decision event in the window",
            )
        )
    stop = next((i for i, g in enumerate(gates) if g[2] is False), len(gates))
    passing = [g for g in gates[:stop] if g[2] is True]
    failing = next((g for g in gates if g[2] is False), None)
    out: dict[str, Any] = {
        "kind": "behaviour",
        "check": f"behaviour:{kind}",
        "decision": dict(decision),
        "time_s": round(t0, 4),
        "window_s": [round(t_start, 4), round(t_end, 4)],
        "trigger": {
            "segment_id": label,
            "sound": sound.id if sound else None,
            "utterances": [lk.utterance_id for lk in linked],
        },
        "chain": chain,
        "event_ids": [c["id"] for c in chain if c["step"] == "ledger"],
        "gates": [{"gate": g[0], "layer": g[1], "passed": g[2], "note": g[3]} for g in gates],
        "last_passing_gate": passing[-1][0] if passing else None,
        "first_failing_gate": failing[0] if failing else None,
        "layer": failing[1] if failing else "unknown",
        "root_cause": failing[1] if failing else UNKNOWN_ROOT_CAUSE,
        "reason": failing[3] if failing else "no gate failed: the ledger does not explain it",
    }
    return out


# --------------------------------------------------------------------------- a run


def scoring_config(detector: str) -> dict[str, Any]:
    """What decides how bundles are scored (part of every bundle run's config and its resume
    fingerprint): the detector and the versions of every scorer."""
    from voxeval.suites.duplex.acoustic import detector_info
    from voxeval.suites.duplex.metrics import METRICS_VERSION as LEDGER_METRICS_VERSION
    from voxeval.suites.duplex.task import TASK_METRICS_VERSION
    from voxeval.suites.duplex.turns import TURNS_VERSION

    return {
        "detector": detector_info(detector),
        "metrics_version": BUNDLE_METRICS_VERSION,
        "versions": {
            "ledger_metrics": LEDGER_METRICS_VERSION,
            "turns": TURNS_VERSION,
            "task": TASK_METRICS_VERSION,
        },
    }


def score_ref(
    ref: BundleRef,
    store: RunStore,
    *,
    detector: str = "silero",
    redact: Mapping[str, Any] | None = None,
) -> Record:
    """The record of one bundle of a run: scored, or an error record with its reasons (the
    bundle is first redacted into the run when ``redact`` is given and ``ref.stored`` set)."""
    started = utc_now()
    t0 = time.perf_counter()
    folder = ref.path
    try:
        if redact is not None and ref.stored:
            from voxeval.suites.duplex.redact import redact_bundle

            folder = store.path / ref.stored
            redact_bundle(ref.path, folder, detector=detector, **dict(redact))
        scored = score_bundle_folder(folder, key=ref.key, detector=detector)
        scored.output["repeat"] = ref.repeat
        scored.output["unit"] = ref.unit
        if ref.stored:
            scored.output["bundle"] = ref.stored
        rec = Record(
            id=ref.key,
            system=ref.system,
            repeat=ref.repeat,
            output=scored.output,
            metrics=scored.metrics,
        )
        rec.timing = {
            "compute_s": round(time.perf_counter() - t0, 4),
            "audio_s": round(scored.audio_s, 4),
        }
    except BundleError as exc:
        rec = error_record(ref.key, ref.system, ref.repeat, exc.kind, exc.message)
        rec.output = {
            "bundle": ref.stored or str(ref.path),
            "source": str(ref.path),
            "repeat": ref.repeat,
            "unit": ref.unit,
            "problems": [_problem_dict(p) for p in exc.problems],
        }
    rec.started_at, rec.ended_at = started, utc_now()
    return rec


def _manifest_sha(folder: Path) -> str | None:
    """sha256 of a bundle's manifest.json (it holds the hashes of every other file)."""
    from voxeval.core.items import file_sha256

    path = Path(folder) / "manifest.json"
    return file_sha256(path) if path.is_file() else None


def score_bundles(
    refs: Sequence[BundleRef],
    out: str | Path,
    *,
    detector: str = "silero",
    redact: Mapping[str, Any] | None = None,
    baseline: str | Path | None = None,
    inputs: Sequence[str] = (),
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
    resume: bool = False,
    on_plan: Callable[[int], None] | None = None,
) -> RunStore:
    """Score every bundle into ``out/<run_id>/``: one record per bundle (id = session key,
    repeat = its repeat index); a bundle that cannot be scored is an error record with its
    reasons in ``error`` and the problems in ``output.problems``.

    ``resume``: continue the newest run under ``out`` with the same configuration (bundle
    paths and the hashes of their manifests, detector, versions, redaction, baseline);
    bundles it already recorded are not scored again. ``on_plan`` hears how many bundles
    will be scored (after resuming).

    ``redact``: options of ``redact.redact_bundle`` (``retention_days``, ``purpose``,
    ``transcripts``); each bundle is then redacted into ``bundles/<key>/<repeat>/`` of the run
    and scored from that copy, so the run holds no raw audio. ``baseline``: a previous duplex
    run whose differences the report lists ("what changed").
    """

    if redact is not None:
        for r in refs:
            r.stored = f"bundles/{r.key}/{r.repeat}"
    config = {
        "mode": "bundles",
        "systems": sorted({r.system for r in refs}),
        **scoring_config(detector),
        "inputs": list(inputs) or sorted({str(r.path) for r in refs}),
        "bundles": [str(r.path) for r in refs],
        "manifest_sha256": [_manifest_sha(r.path) for r in refs],
        "redact": dict(redact) if redact is not None else None,
        "baseline": str(Path(baseline).resolve()) if baseline else None,
    }
    store, done, _ = RunStore.start_or_resume(
        out, "duplex", config, [r.to_item() for r in refs], resume
    )
    todo = [r for r in refs if (r.key, r.system, r.repeat) not in done]
    if on_plan:
        on_plan(len(todo))
    for ref in todo:
        rec = score_ref(ref, store, detector=detector, redact=redact)
        store.append(rec)
        if on_record:
            on_record(rec)
    from voxeval.report import finish_run

    return finish_run(store, write_reports)
