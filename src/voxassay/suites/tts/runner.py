"""Synthesize every (item, system, repeat), then measure it: one record per unit.

Two stages run as a pipeline on two threads: a *producer* synthesizes (one synthesizer
instance per system, loaded and warmed up once; each call under a watchdog) or, for
``score-audio``, reads the audio files; the *consumer* (the calling thread) writes the WAV,
runs the ASR round trip, the quality, prosody and speaker measures and the optional judge,
and appends the record (flushed). The ASR model, DNSMOS and the speaker encoder are loaded
once per run, while the producer already synthesizes.

Errors are data: a synthesizer that raises (kind ``synthesis``, or ``input`` for text it
refuses), returns empty, silent or non-finite audio (kind ``empty_audio``), something that
is not audio (status ``unparseable``), or does not answer within ``timeout`` (status
``timeout``; the hung instance is dropped and a fresh one is built for the next item)
becomes an error record, and the run goes on. ``timing.compute_s`` is the synthesis call
only; load and warm-up seconds travel on the first record after each load.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, write_wav
from voxassay.core.errors import SystemOutputError, VoxassayError
from voxassay.core.executor import CallTimedOut, call_with_timeout
from voxassay.core.items import Item
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.tts.metrics import audio_problem, item_metrics, text_problem, to_16k
from voxassay.systems.audio_output import EmptyAudioError, coerce_audio

DEFAULT_ASR = "faster-whisper"
DEFAULT_TIMEOUT_S = 300.0
WARMUP_TEXT = "Hello there."
_SENTINEL = object()


@dataclass
class Unit:
    """One (item, system, repeat) to produce."""

    item: Item
    system: str
    repeat: int = 0
    audio_file: str | None = None  # score-audio: the recording to read instead of synthesizing


@dataclass
class Produced:
    """What the producer hands to the consumer: audio, or an error record."""

    unit: Unit
    audio: Audio | None = None
    error: Record | None = None
    compute_s: float | None = None
    load: dict[str, Any] | None = None
    voice: str | None = None
    instructions_sent: bool = False
    wall0: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=utc_now)


def system_slug(spec: str) -> str:
    """A folder name for a system spec: safe characters, plus a short hash when the spec
    had to be changed (so two specs never share a folder)."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", spec).strip("_.") or "system"
    if slug != spec:
        slug = f"{slug[:60]}-{hashlib.sha1(spec.encode()).hexdigest()[:6]}"
    return slug


MAX_ID_CHARS = 100
"""Longer ids are cut and hashed (file systems refuse names over 255 bytes)."""


def item_filename(item_id: str, repeat: int) -> str:
    """``<item_id>.wav`` (repeat 0) or ``<item_id>.r<k>.wav``. An id that had to be changed
    (unsafe characters replaced), is longer than ``MAX_ID_CHARS``, ends like a repeat suffix
    (``x.r1``) or like a hashed name (``-`` and 8 hex digits) gets a short hash of the id, so
    two items never share a file (``a b`` and ``a_b``; ``x.r1`` and ``x`` repeat 1; an id
    spelt like another's hashed name) and no name is too long."""
    base = re.sub(r"[^A-Za-z0-9._+-]+", "_", item_id).strip(".") or "item"
    if (
        base != item_id
        or len(base) > MAX_ID_CHARS
        or re.search(r"\.r\d+$", base)
        or re.search(r"-[0-9a-f]{8}$", base)
    ):
        base = f"{base[:80]}-{hashlib.sha1(item_id.encode()).hexdigest()[:8]}"
    return f"{base}.wav" if repeat == 0 else f"{base}.r{repeat}.wav"


def _rate_of(system: Any) -> int | None:
    rate = getattr(system, "sample_rate", None)
    return int(rate) if isinstance(rate, int) and rate > 0 else None


class SynthSlot:
    """One system's synthesizer, built and warmed up on first use; a hang drops it."""

    def __init__(self, spec: str, timeout: float | None) -> None:
        self.spec = spec
        self.timeout = timeout
        self.system: Any = None
        self.load_error: Exception | None = None
        self.pending_load: dict[str, Any] | None = None
        self.describe: dict[str, Any] = {}

    def ensure(self) -> None:
        from voxassay.core.registry import REGISTRY

        if self.system is not None or self.load_error is not None:
            return
        try:
            t0 = time.perf_counter()
            system = REGISTRY.build("synthesize", self.spec)
            if hasattr(system, "load"):
                call_with_timeout(system.load, self.timeout)
            t1 = time.perf_counter()
            warm_error = None
            try:
                call_with_timeout(lambda: system.synthesize(WARMUP_TEXT), self.timeout)
            except CallTimedOut:
                raise
            except Exception as exc:  # a failing warm-up is noted; items will show it
                warm_error = f"{type(exc).__name__}: {exc}"[:300]
            t2 = time.perf_counter()
            try:
                described = dict(system.describe()) if hasattr(system, "describe") else {}
            except Exception as exc:
                described = {"error": f"describe() failed: {exc}"}
            self.system = system
            self.describe = described
            self.pending_load = {
                "load_s": round(t1 - t0, 4),
                "warmup_s": round(t2 - t1, 4),
                "system_info": described,
            }
            if warm_error:
                self.pending_load["warmup_error"] = warm_error
        except CallTimedOut:
            self.load_error = TimeoutError(f"load/warm-up exceeded {self.timeout} s")
        except Exception as exc:
            self.load_error = exc

    def produce(self, unit: Unit) -> Produced:
        p = Produced(unit)
        item = unit.item
        instructions = (item.meta or {}).get("instructions") or None
        if item.problem:
            p.error = error_record(item.id, self.spec, unit.repeat, "input", item.problem)
            return p
        bad_text = text_problem(item.text)
        if bad_text:
            p.error = error_record(item.id, self.spec, unit.repeat, "input", bad_text)
            return p
        self.ensure()
        if self.load_error is not None:
            kind = getattr(self.load_error, "kind", "system_load")
            p.error = error_record(
                item.id, self.spec, unit.repeat, kind, f"system failed to load: {self.load_error}"
            )
            return p
        system = self.system
        voice = self.describe.get("voice")
        p.voice = str(voice) if voice is not None else None
        p.instructions_sent = bool(instructions)
        text = item.text
        t0 = time.perf_counter()
        try:
            if instructions:
                result = call_with_timeout(
                    lambda: system.synthesize(text, instructions=instructions), self.timeout
                )
            else:
                result = call_with_timeout(lambda: system.synthesize(text), self.timeout)
            p.compute_s = time.perf_counter() - t0
            p.audio = coerce_audio(result, self.spec, _rate_of(system))
        except CallTimedOut:
            self.system = None  # the hung call may still hold it
            p.error = error_record(
                item.id,
                self.spec,
                unit.repeat,
                "timeout",
                f"no audio within {self.timeout} s",
                status="timeout",
            )
            return p
        except EmptyAudioError as exc:
            p.error = error_record(item.id, self.spec, unit.repeat, "empty_audio", str(exc))
            return p
        except SystemOutputError as exc:
            p.error = error_record(item.id, self.spec, unit.repeat, "unparseable", str(exc))
            p.error.status = "unparseable"
            return p
        except VoxassayError as exc:
            kind = "input" if exc.kind in ("input", "spec") else "synthesis"
            p.error = error_record(item.id, self.spec, unit.repeat, kind, f"{exc}")
            return p
        except Exception as exc:
            p.error = error_record(
                item.id, self.spec, unit.repeat, "synthesis", f"{type(exc).__name__}: {exc}"
            )
            return p
        problem = audio_problem(p.audio)
        if problem:
            p.error = error_record(item.id, self.spec, unit.repeat, "empty_audio", problem)
            p.audio = None
        if self.pending_load is not None:
            p.load, self.pending_load = self.pending_load, None
        return p


def read_unit_audio(unit: Unit) -> Produced:
    """score-audio producer: read the recording (any format, native rate)."""
    from voxassay.core.audio import load_audio

    p = Produced(unit)
    path = unit.audio_file or unit.item.audio_filepath
    if not path:
        p.error = error_record(unit.item.id, unit.system, unit.repeat, "input", "no audio_filepath")
        return p
    try:
        audio = load_audio(path, sr=None)
    except VoxassayError as exc:
        kind = "empty_audio" if exc.kind == "empty" else exc.kind
        p.error = error_record(unit.item.id, unit.system, unit.repeat, kind, str(exc))
        return p
    problem = audio_problem(audio)
    if problem:
        p.error = error_record(unit.item.id, unit.system, unit.repeat, "empty_audio", problem)
        return p
    p.audio = audio
    return p


@dataclass
class Models:
    """Run-wide models, loaded once: ASR, speaker encoder, judge (DNSMOS caches itself)."""

    asr_spec: str | None
    judge_spec: str | None = None
    asr: Any = None
    asr_reason: str | None = None
    encoder: Any = None
    encoder_reason: str | None = None
    judge: Any = None
    judge_reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def load(self, need_encoder: bool = True) -> None:
        from voxassay.core.registry import REGISTRY

        if self.asr_spec:
            t0 = time.perf_counter()
            try:
                asr = REGISTRY.build("transcribe", self.asr_spec)
                asr.load()
                asr.transcribe(np.zeros(16_000, np.float32))
                self.asr = asr
                try:
                    self.info["asr"] = {"spec": self.asr_spec, "describe": asr.describe()}
                except Exception as exc:
                    self.info["asr"] = {"spec": self.asr_spec, "describe_error": str(exc)}
            except Exception as exc:
                self.asr_reason = f"ASR {self.asr_spec!r} unavailable: {type(exc).__name__}: {exc}"
                self.info["asr"] = {"spec": self.asr_spec, "unavailable": self.asr_reason}
            self.info.setdefault("asr", {})["load_s"] = round(time.perf_counter() - t0, 4)
        else:
            self.asr_reason = "no ASR configured"
        if need_encoder:
            t0 = time.perf_counter()
            try:
                from voxassay.measures.speaker import SpeakerEncoder, speaker_unavailable

                reason = speaker_unavailable()
                if reason:
                    self.encoder_reason = str(reason)
                else:
                    enc = SpeakerEncoder(threads=1)
                    enc.load()
                    self.encoder = enc
            except Exception as exc:
                self.encoder_reason = f"{type(exc).__name__}: {exc}"[:300]
            self.info["speaker"] = {
                "load_s": round(time.perf_counter() - t0, 4),
                "unavailable": self.encoder_reason,
            }
        self._warm_measures()
        if self.judge_spec:
            try:
                from voxassay.suites.tts.judge import Judge

                self.judge = Judge(self.judge_spec)
            except Exception as exc:
                self.judge_reason = f"{type(exc).__name__}: {exc}"[:300]
            self.info["judge"] = {"spec": self.judge_spec, "unavailable": self.judge_reason}

    def _warm_measures(self) -> None:
        """One call of DNSMOS, prosody and the encoder on 1.5 s of a synthetic vowel, so
        their one-time costs (model load, numba compile) count as load, not per item."""
        sr = 16_000
        t = np.arange(int(1.5 * sr)) / sr
        vowel = sum(np.sin(2 * np.pi * 120 * k * t) / k for k in range(1, 12))
        probe = Audio((0.2 * vowel * (1 + 0.3 * np.sin(2 * np.pi * 4 * t))).astype(np.float32), sr)
        warm: dict[str, Any] = {}

        def dns() -> Any:
            from voxassay.measures.quality import dnsmos, dnsmos_unavailable

            return None if dnsmos_unavailable() else dnsmos(probe)

        def pros() -> Any:
            from voxassay.measures.prosody import prosody_features

            return prosody_features(probe, "ah")

        steps: list[tuple[str, Callable[[], Any]]] = [("dnsmos", dns), ("prosody", pros)]
        if self.encoder is not None:
            steps.append(("speaker", lambda: self.encoder.embed(probe)))
        for name, fn in steps:
            t0 = time.perf_counter()
            with contextlib.suppress(Exception):  # a failure shows (and is recorded) per item
                fn()
            warm[name] = round(time.perf_counter() - t0, 4)
        self.info["warmup_s"] = warm

    def transcribe(self, audio: Audio) -> tuple[str | None, str | None]:
        """(text, None) or (None, reason)."""
        if self.asr is None:
            return None, self.asr_reason
        try:
            from voxassay.systems.base import coerce_transcript

            tr = coerce_transcript(self.asr.transcribe(to_16k(audio).samples), self.asr_spec or "")
            return tr.text, None
        except Exception as exc:
            return None, f"ASR failed: {type(exc).__name__}: {exc}"[:300]


def _ev(ev: Any, key: str, default: Any = None) -> Any:
    if ev is None:
        return default
    if isinstance(ev, Mapping):
        return ev.get(key, default)
    return getattr(ev, key, default)


def judge_item(
    models: Models, item: Item, audio: Audio, evals: Mapping[str, Any]
) -> dict[str, Any]:
    """The judge's answer block for ``Record.output.judge`` (never raises)."""
    spec = models.judge_spec
    if models.judge is None:
        return {
            "spec": spec,
            "score": None,
            "status": "error",
            "raw": "",
            "reason": models.judge_reason,
        }
    ev = evals.get(str(item.labels.get("eval")))
    if ev is None or not _ev(ev, "question"):
        return {
            "spec": spec,
            "score": None,
            "status": "error",
            "raw": "",
            "reason": f"eval {item.labels.get('eval')!r} has no question",
        }
    try:
        out = models.judge.rate(
            audio,
            _ev(ev, "question"),
            _ev(ev, "scale") or {"min": 1, "max": 5},
            item.text,
            (item.meta or {}).get("instructions"),
        )
        block = dict(out) if isinstance(out, Mapping) else {"score": out}
    except Exception as exc:
        block = {
            "score": None,
            "status": "error",
            "raw": "",
            "reason": f"{type(exc).__name__}: {exc}",
        }
    block.setdefault("spec", spec)
    block.setdefault("status", "ok" if block.get("score") is not None else "unparseable")
    block["raw"] = str(block.get("raw") or "")[:500]
    return block


class Consumer:
    """Turns produced audio into a finished record (WAV, ASR, measures, judge)."""

    def __init__(
        self,
        store: RunStore | None,
        models: Models,
        evals: Mapping[str, Any],
        measures: Sequence[str] | None = None,
    ) -> None:
        self.store = store
        """Where ``finish`` writes (None: a worker that only measures)."""
        self.models = models
        self.evals = evals
        self.measures = measures
        self.timings: dict[str, float] = {}

    def _tick(self, name: str, t0: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0

    def finish(self, p: Produced) -> Record:
        """The unit's record, its audio written into the run folder."""
        rec, audio = self.measure(p)
        if audio is not None:
            self.write(rec, audio)
        return rec

    def write(self, rec: Record, audio: Audio) -> None:
        """Write a measured unit's audio where its record says (``output.audio_path``)."""
        assert self.store is not None, "a measuring-only consumer has no run folder"
        t0 = time.perf_counter()
        write_wav(self.store.path / rec.output["audio_path"], audio)
        self._tick("write_wav", t0)

    def measure(self, p: Produced) -> tuple[Record, Audio | None]:
        """The unit's record and the audio to write (None for an error record); nothing is
        written, so a remote worker can measure and the driver write."""
        unit = p.unit
        if p.error is not None:
            rec = p.error
            rec.started_at, rec.ended_at = p.started_at, utc_now()
            if p.load:
                rec.timing.update({k: p.load[k] for k in ("load_s", "warmup_s") if k in p.load})
                rec.output["system_info"] = p.load.get("system_info")
            return rec, None
        assert p.audio is not None
        audio = p.audio
        item = unit.item
        rel = Path("audio") / system_slug(unit.system) / item_filename(item.id, unit.repeat)
        output: dict[str, Any] = {
            "audio_path": rel.as_posix(),
            "sample_rate": int(audio.sr),
        }
        if unit.audio_file is None:
            output["voice"] = p.voice
            output["instructions_sent"] = p.instructions_sent
        else:
            output["source_audio"] = unit.audio_file
        want = set(self.measures) if self.measures is not None else None
        text: str | None = None
        reason: str | None = None
        if want is None or "round_trip" in want:
            t0 = time.perf_counter()
            text, reason = self.models.transcribe(audio)
            self._tick("asr", t0)
            output["asr_text"] = text
        metrics, extras = item_metrics(
            item,
            audio,
            text,
            encoder=self.models.encoder,
            encoder_reason=self.models.encoder_reason,
            measures=self.measures,
            timings=self.timings,
        )
        if reason and text is None:
            extras.setdefault("unavailable", {})["asr"] = reason
            extras["unavailable"].pop("round_trip", None)
        output.update(extras)
        if self.models.judge_spec:
            t0 = time.perf_counter()
            output["judge"] = judge_item(self.models, item, audio, self.evals)
            self._tick("judge", t0)
        rec = Record(id=item.id, system=unit.system, repeat=unit.repeat, output=output)
        rec.metrics = metrics
        rec.timing = {
            "compute_s": round(p.compute_s, 6) if p.compute_s is not None else None,  # type: ignore[dict-item]
            "audio_s": round(audio.duration, 6),
            "wall_s": round(time.perf_counter() - p.wall0, 6),
        }
        if p.compute_s is None:
            del rec.timing["compute_s"]
        if p.load:
            rec.timing["load_s"] = p.load["load_s"]
            rec.timing["warmup_s"] = p.load["warmup_s"]
            rec.output["system_info"] = p.load["system_info"]
            if p.load.get("warmup_error"):
                rec.output["warmup_error"] = p.load["warmup_error"]
        rec.started_at, rec.ended_at = p.started_at, utc_now()
        return rec, audio


def _pipeline(
    units: Sequence[Unit], produce: Callable[[Unit], Produced], depth: int = 3
) -> Iterator[Produced]:
    """Run ``produce`` on a background thread, ``depth`` results ahead of the consumer."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def worker() -> None:
        try:
            for u in units:
                if stop.is_set():
                    return
                try:
                    res = produce(u)
                except Exception as exc:  # never lose a unit to a producer bug
                    res = Produced(u)
                    res.error = error_record(
                        u.item.id, u.system, u.repeat, "internal", f"{type(exc).__name__}: {exc}"
                    )
                while not stop.is_set():
                    try:
                        q.put(res, timeout=0.2)
                        break
                    except queue.Full:
                        continue
        finally:
            while not stop.is_set():
                try:
                    q.put(_SENTINEL, timeout=0.2)
                    break
                except queue.Full:
                    continue

    t = threading.Thread(target=worker, daemon=True, name="voxassay-tts-producer")
    t.start()
    try:
        while True:
            got = q.get()
            if got is _SENTINEL:
                break
            yield got
    finally:
        stop.set()


def note_load(system_info: dict[str, Any], rec: Record) -> None:
    """Count a (re)load the record reports (``timing.load_s`` on the first record after each
    load) into the system's ``run.json`` entry; the first load's figures are kept."""
    if "load_s" in rec.timing:
        system_info["loads"] += 1
        system_info.setdefault("load_s", rec.timing["load_s"])
        system_info.setdefault("warmup_s", rec.timing.get("warmup_s"))
        system_info.setdefault("describe", rec.output.get("system_info"))


def run_units(
    store: RunStore,
    units: Sequence[Unit],
    models: Models,
    evals: Mapping[str, Any],
    *,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    measures: Sequence[str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    pipeline: bool = True,
) -> dict[str, Any]:
    """Produce (synthesize or read) and measure every unit, appending each record.

    Returns ``{"systems": {spec: load info}, "measure_seconds": {...}, "models": {...},
    "synthesis_s": float}``; per-system load info has ``load_s``, ``warmup_s``, ``describe``,
    ``loads`` (how many times the system was built) and ``compute_s`` (sum of synthesis).
    """
    systems: list[str] = []
    counts: dict[str, int] = {}
    for u in units:
        if u.system not in counts:
            systems.append(u.system)
            counts[u.system] = 0
        counts[u.system] += 1
    if on_start:
        for s in systems:
            on_start(s, counts[s])
    slots: dict[str, SynthSlot] = {}

    def produce(u: Unit) -> Produced:
        if u.audio_file is not None:
            return read_unit_audio(u)
        slot = slots.get(u.system)
        if slot is None:
            slot = slots[u.system] = SynthSlot(u.system, timeout)
        return slot.produce(u)

    consumer = Consumer(store, models, evals, measures)
    t_models = time.perf_counter()
    stream: Iterator[Produced]
    if pipeline:
        stream = _pipeline(units, produce)
        models.load(need_encoder=measures is None or bool({"speaker", "longform"} & set(measures)))
    else:
        models.load(need_encoder=measures is None or bool({"speaker", "longform"} & set(measures)))
        stream = (produce(u) for u in units)
    models.info["load_wall_s"] = round(time.perf_counter() - t_models, 4)
    info: dict[str, dict[str, Any]] = {s: {"loads": 0, "compute_s": 0.0} for s in systems}
    synth_total = 0.0
    for p in stream:
        rec = consumer.finish(p)
        si = info[rec.system]
        if p.compute_s is not None:
            si["compute_s"] = round(si["compute_s"] + p.compute_s, 6)
            synth_total += p.compute_s
        note_load(si, rec)
        store.append(rec)
        if on_record:
            on_record(rec)
    for s, slot in slots.items():
        if slot.describe and "describe" not in info[s]:
            info[s]["describe"] = slot.describe
    return {
        "systems": info,
        "measure_seconds": {k: round(v, 4) for k, v in sorted(consumer.timings.items())},
        "models": models.info,
        "synthesis_s": round(synth_total, 4),
    }


__all__ = [
    "DEFAULT_ASR",
    "DEFAULT_TIMEOUT_S",
    "Models",
    "Unit",
    "item_filename",
    "note_load",
    "run_units",
    "system_slug",
]
