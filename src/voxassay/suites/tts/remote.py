"""TTS units on a distributed executor (``--executor ray``).

A worker (:class:`UnitWorker`, one per actor) holds what the local runner holds once per run:
the system's synthesizer and the run-wide models (round-trip ASR, speaker encoder, judge).
It synthesizes (or reads) a unit and measures it, and hands back the record with the audio.
The driver alone writes: the WAV where the record's ``audio_path`` says, then the record. The
records are those of :func:`~voxassay.suites.tts.runner.run_units` (outputs and metrics;
timings are the worker's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxassay.core.audio import Audio
from voxassay.core.executor import Executor
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import RunStore
from voxassay.core.specs import spec_resources
from voxassay.suites.tts.runner import (
    Consumer,
    Models,
    SynthSlot,
    Unit,
    note_load,
    read_unit_audio,
)


@dataclass
class Measured:
    """One finished unit away from the run folder."""

    record: Record
    audio: Audio | None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds this unit spent in each measure (``run.json`` ``measure_seconds``)."""
    models: dict[str, Any] | None = None
    """The worker's model information, on its first unit only."""


class UnitWorker:
    """Synthesize-and-measure in one process; models load on the first unit."""

    def __init__(
        self,
        asr: str | None,
        judge: str | None,
        evals: Mapping[str, Any],
        measures: Sequence[str] | None,
        timeout: float | None,
    ) -> None:
        self.models = Models(asr, judge)
        self.measures = measures
        self.consumer = Consumer(None, self.models, evals, measures)
        self.timeout = timeout
        self.slots: dict[str, SynthSlot] = {}
        self._loaded = False

    def __call__(self, unit: Unit) -> Measured:
        first = not self._loaded
        if first:
            want = self.measures
            self.models.load(need_encoder=want is None or bool({"speaker", "longform"} & set(want)))
            self._loaded = True
        if unit.audio_file is not None:
            produced = read_unit_audio(unit)
        else:
            slot = self.slots.get(unit.system)
            if slot is None:
                slot = self.slots[unit.system] = SynthSlot(unit.system, self.timeout)
            produced = slot.produce(unit)
        before = dict(self.consumer.timings)
        record, audio = self.consumer.measure(produced)
        spent = {
            k: round(v - before.get(k, 0.0), 6)
            for k, v in self.consumer.timings.items()
            if v != before.get(k, 0.0)
        }
        if produced.compute_s is not None:
            spent["synthesis"] = produced.compute_s
        return Measured(record, audio, spent, dict(self.models.info) if first else None)


def _lost(unit: Unit, reason: str) -> Measured:
    return Measured(
        error_record(unit.item.id, unit.system, unit.repeat, "worker_lost", reason), None
    )


def run_units_on(
    executor: Executor[Any, Any],
    store: RunStore,
    units: Sequence[Unit],
    asr: str | None,
    judge: str | None,
    evals: Mapping[str, Any],
    *,
    timeout: float | None,
    measures: Sequence[str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> dict[str, Any]:
    """What :func:`~voxassay.suites.tts.runner.run_units` does, on ``executor``'s workers:
    each system's units on workers with that system's resources (``num_cpus``/``num_gpus``
    of its spec). Returns the same summary."""
    systems = list(dict.fromkeys(u.system for u in units))
    if on_start:
        for s in systems:
            on_start(s, sum(u.system == s for u in units))
    writer = Consumer(store, Models(asr, judge), evals, measures)
    factory = functools.partial(UnitWorker, asr, judge, evals, measures, timeout)
    info: dict[str, dict[str, Any]] = {s: {"loads": 0, "compute_s": 0.0} for s in systems}
    spent: dict[str, float] = {}
    models: dict[str, Any] = {}
    for system in systems:
        mine = [u for u in units if u.system == system]
        results = executor.map_unordered(
            factory, mine, lost=_lost, resources=spec_resources(system)
        )
        for m in results:
            rec = m.record
            if m.audio is not None:
                writer.write(rec, m.audio)
            for k, v in m.timings.items():
                spent[k] = spent.get(k, 0.0) + v
            if m.models and not models:
                models = m.models
            si = info[rec.system]
            compute = rec.timing.get("compute_s")
            if compute is not None:
                si["compute_s"] = round(si["compute_s"] + compute, 6)
            note_load(si, rec)
            store.append(rec)
            if on_record:
                on_record(rec)
    synthesis = spent.pop("synthesis", 0.0)
    spent.update(writer.timings)
    return {
        "systems": info,
        "measure_seconds": {k: round(v, 4) for k, v in sorted(spent.items())},
        "models": models,
        "synthesis_s": round(synthesis, 4),
    }
