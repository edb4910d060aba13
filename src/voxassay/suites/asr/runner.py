"""Run transcribe systems over a manifest, one record per (item, system, repeat).

Per-item failures (unreadable audio, a system that raises, hangs or returns garbage) become
records with a status and reason; the run continues. ``compute_s`` is the time inside the
backend's ``transcribe`` call only: model load and a warm-up call on one second of silence
happen before the first item and are reported separately (``run.json`` ``systems``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR
from voxassay.core.errors import SystemOutputError, VoxassayError
from voxassay.core.execution import make_executor
from voxassay.core.executor import CallTimedOut, Executor, call_with_timeout
from voxassay.core.items import Item, item_audio_bytes, load_item_audio
from voxassay.core.ray_executor import fetch
from voxassay.core.records import Record, error_record
from voxassay.core.registry import REGISTRY
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import spec_resources, system_key
from voxassay.suites.asr.wer import score_text
from voxassay.systems.base import coerce_transcript

DEFAULT_TIMEOUT_S = 600.0


@dataclass
class Task:
    item: Item
    repeat: int
    audio: Any = None
    """The item's encoded audio as the executor shares it (``--ship-audio``), else None: the
    worker opens the item's file itself."""


class TranscribeWorker:
    """One system instance per worker. A hang poisons the instance: the next item gets a new one.

    The first record after each (re)load carries ``timing.load_s`` and ``timing.warmup_s``
    and ``output.system_info`` (the backend's ``describe()``), so load costs reach the run
    directory from thread and process workers alike.
    """

    def __init__(self, spec: str, normalizer: str, timeout: float | None) -> None:
        self.spec = spec
        self.key = system_key(spec)  # the system's name in records
        self.normalizer = normalizer
        self.timeout = timeout
        self.system: Any = None
        self.load_error: VoxassayError | Exception | None = None
        self.pending_load: dict[str, Any] | None = None

    def _ensure_loaded(self) -> None:
        if self.system is not None or self.load_error is not None:
            return
        try:
            t0 = time.perf_counter()
            system = REGISTRY.build("transcribe", self.spec)
            system.load()
            t1 = time.perf_counter()
            call_with_timeout(
                lambda: system.transcribe(np.zeros(TARGET_SR, np.float32)), self.timeout
            )
            t2 = time.perf_counter()
            self.system = system
            try:
                described = system.describe()
            except Exception as exc:  # describe is informative only
                described = {"error": str(exc)}
            self.pending_load = {
                "load_s": round(t1 - t0, 4),
                "warmup_s": round(t2 - t1, 4),
                "system_info": described,
            }
        except CallTimedOut:
            self.load_error = TimeoutError(f"system load/warm-up exceeded {self.timeout} s")
        except Exception as exc:
            self.load_error = exc

    def __call__(self, task: Task) -> Record:
        started = utc_now()
        rec = self._run(task)
        rec.started_at, rec.ended_at = started, utc_now()
        return rec

    def _run(self, task: Task) -> Record:
        item = task.item
        if item.problem:
            return error_record(item.id, self.key, task.repeat, "text_encoding", item.problem)
        if not item.audio_filepath:
            return error_record(
                item.id, self.key, task.repeat, "input", "item has no audio_filepath"
            )
        wall0 = time.perf_counter()
        try:
            shipped = None if task.audio is None else fetch(task.audio)
            audio = load_item_audio(item, TARGET_SR, data=shipped)
        except VoxassayError as exc:
            return error_record(item.id, self.key, task.repeat, exc.kind, str(exc))
        self._ensure_loaded()
        if self.load_error is not None:
            load_error = self.load_error
            kind = getattr(load_error, "kind", "system_load")
            return error_record(
                item.id, self.key, task.repeat, kind, f"system failed to load: {load_error}"
            )
        system = self.system
        t0 = time.perf_counter()
        try:
            result = call_with_timeout(lambda: system.transcribe(audio.samples), self.timeout)
            transcript = coerce_transcript(result, where=self.spec)
        except CallTimedOut:
            self.system = None  # the hung call may still hold it; build a fresh one next time
            return error_record(
                item.id,
                self.key,
                task.repeat,
                "timeout",
                f"no answer within {self.timeout} s",
                status="timeout",
            )
        except SystemOutputError as exc:
            return error_record(
                item.id, self.key, task.repeat, "unparseable", str(exc), "unparseable"
            )
        except Exception as exc:
            return error_record(
                item.id, self.key, task.repeat, "system", f"{type(exc).__name__}: {exc}"
            )
        compute = time.perf_counter() - t0
        rec = Record(id=item.id, system=self.key, repeat=task.repeat, output=transcript.to_output())
        rec.timing = {
            "compute_s": round(compute, 6),
            "audio_s": round(audio.duration, 6),
            "wall_s": round(time.perf_counter() - wall0, 6),
        }
        if self.pending_load is not None:
            rec.timing["load_s"] = self.pending_load["load_s"]
            rec.timing["warmup_s"] = self.pending_load["warmup_s"]
            rec.output["system_info"] = self.pending_load["system_info"]
            self.pending_load = None
        if item.text is None:
            rec.status = "unscored"
            rec.error = {"kind": "no_reference", "message": "item has no reference text"}
        else:
            rec.metrics = score_text(item.text, transcript.text, self.normalizer)
        return rec


def _shipper(ex: Executor[Any, Any]) -> Callable[[Task], Task]:
    """``prepare`` for ``--ship-audio``: the task with its item's audio bytes shared (an
    unreadable file is left to the worker, whose error record then names it)."""

    def ship(task: Task) -> Task:
        try:
            data = item_audio_bytes(task.item)
        except VoxassayError:
            return task
        return Task(task.item, task.repeat, ex.share(data))

    return ship


def _lost(key: str) -> Callable[[Task, str], Record]:
    """The record of a task a distributed executor gave up on (its worker kept dying)."""

    def record(task: Task, reason: str) -> Record:
        return error_record(task.item.id, key, task.repeat, "worker_lost", reason)

    return record


def run_systems(
    store: RunStore,
    items: Sequence[Item],
    systems: Sequence[str],
    *,
    normalizer: str,
    repeats: int = 1,
    workers: int = 1,
    executor: str | Executor[Any, Any] = "thread",
    ray_address: str | None = None,
    ship_audio: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    done: set[tuple[str, str, int]] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Transcribe every pending (item, system, repeat) and append its record to ``store``.

    ``done`` holds keys already in the store (``--resume``): they are not redone.
    ``executor``: a kind (``make_executor``) or an executor the caller opened and closes;
    ``ray`` runs the workers as Ray actors (``ray_address``, else a Ray started for the run),
    each with the ``num_cpus``/``num_gpus`` of its system's spec. ``ship_audio``: the driver
    reads each item's audio and hands it over through the executor (Ray's object store), so
    workers open no file of the manifest's.
    Returns per-system load information (load and warm-up seconds, ``describe()``).
    """
    done = done or set()
    info: dict[str, dict[str, Any]] = {}
    owned = isinstance(executor, str)
    ex: Executor[Any, Any] = (
        make_executor(executor, workers, ray_address=ray_address)
        if isinstance(executor, str)
        else executor
    )
    try:
        for spec in systems:
            key = system_key(spec)
            tasks = [
                Task(item, r)
                for r in range(repeats)
                for item in items
                if (item.id, key, r) not in done
            ]
            load_info: dict[str, Any] = {}
            info[key] = load_info
            if on_start:
                on_start(key, len(tasks))
            if not tasks:
                continue
            t0 = time.perf_counter()
            loads: list[float] = []
            factory = functools.partial(TranscribeWorker, spec, normalizer, timeout)  # picklable
            results = ex.map_unordered(
                factory,
                tasks,
                lost=_lost(key),
                resources=spec_resources(spec),
                prepare=_shipper(ex) if ship_audio else None,
            )
            for rec in results:
                if "load_s" in rec.timing:
                    loads.append(rec.timing["load_s"] + rec.timing.get("warmup_s", 0.0))
                    load_info.setdefault("load_s", rec.timing["load_s"])
                    load_info.setdefault("warmup_s", rec.timing.get("warmup_s"))
                    load_info.setdefault("describe", rec.output.get("system_info"))
                store.append(rec)
                if on_record:
                    on_record(rec)
            load_info["loop_wall_s"] = round(time.perf_counter() - t0, 4)
            load_info["loads"] = len(loads)
            load_info["load_total_s"] = round(sum(loads), 4)
    finally:
        if owned:
            ex.close()
    return info
