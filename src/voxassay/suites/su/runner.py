"""Run understand systems over SU items, one record per (item, system, repeat).

Models (``openai-compat``, ``python:``) get the eval's prompt and the clips (two audio
inputs for segmented variants, one merged input for merged variants) and answer in free
text, which ``parse.py`` turns into an answer or ``unparseable``. Specialists
(``systems/su_specialist.py``) give a continuous score; their answer text is formatted from
it and parsed the same way. Specialists also run the calibration split: for the
speaker-match evals the decision threshold is the one that maximises accuracy on the
calibration records (stored ones included, so ``--resume`` finds the same threshold), then
the test items are answered with it; calibration records are held in memory until the
threshold is known (a kill during calibration redoes only calibration). Models skip
calibration items.

Per-item failures (unreadable audio, missing truth, a system that raises or hangs) become
records with a status and reason. ``compute_s`` is the time inside the backend call only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxassay.core.audio import TARGET_SR, Audio, decode_audio_bytes, load_audio
from voxassay.core.errors import InputError, SystemOutputError, VoxassayError
from voxassay.core.execution import make_executor
from voxassay.core.executor import CallTimedOut, Executor, call_with_timeout
from voxassay.core.items import Item, item_audio_bytes, load_item_audio
from voxassay.core.records import Record, error_record
from voxassay.core.registry import REGISTRY
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import spec_resources, system_key
from voxassay.suites.su.parse import Parsed, parse_answer
from voxassay.suites.su.prompts import PROMPTS_VERSION, merge_clips, render_prompt
from voxassay.suites.su.scoring import FIXED_RATING_THRESHOLD, best_threshold
from voxassay.suites.su.tasks import EVALS, Vocabulary, get_vocabulary
from voxassay.systems.su_specialist import is_specialist

DEFAULT_TIMEOUT_S = 600.0
POSITIVE = {"speaker_match": "same", "synthetic_detection": "human"}


@dataclass
class Task:
    item: Item
    repeat: int
    audio: list[Any] | None = None
    """With ``--ship-audio``: each clip's encoded bytes (a handle in the object store), in
    the order of :func:`clip_paths`."""


def is_calibration(item: Item) -> bool:
    return str(item.labels.get("split", "test")) == "calibration"


def expand_items(items: Sequence[Item], evals: Sequence[str]) -> list[Item]:
    """Run items: each manifest item once per requested eval of its family.

    An item whose ``labels.su_task`` names a family none of ``evals`` belongs to becomes one
    run item for ``evals[0]`` (it will be an ``input`` error record, not silently dropped).
    Ids gain ``#segmented`` / ``#merged`` when an item expands to both variants.
    """
    out: list[Item] = []
    for it in items:
        family = it.labels.get("su_task")
        mine = [e for e in evals if family is None or EVALS[e].family == family]
        if not mine:
            mine = [evals[0]]
        for e in mine:
            labels = {**it.labels, "task": e, "source_id": it.id}
            new_id = it.id if len(mine) == 1 else f"{it.id}#{EVALS[e].variant}"
            out.append(
                Item(
                    id=new_id,
                    audio_filepath=it.audio_filepath,
                    audio=list(it.audio) if it.audio else None,
                    duration=it.duration,
                    text=it.text,
                    speaker=it.speaker,
                    labels=labels,
                    meta=dict(it.meta),
                    problem=it.problem,
                )
            )
    return out


def truth_of(item: Item, vocabulary: Vocabulary) -> str:
    """The item's truth for its eval, or ``InputError`` saying what is missing."""
    task = str(item.labels.get("task"))
    spec = EVALS[task]
    family = item.labels.get("su_task")
    if family is not None and family != spec.family:
        raise InputError(f"item was built for {family}, not for {task}")
    if spec.family == "emotion":
        raw = item.labels.get("truth") or item.labels.get("emotion")
        if not raw:
            raise InputError("item has no labels.emotion")
        label = vocabulary.lookup(str(raw))
        if label is None:
            raise InputError(f"truth {raw!r} is not a label of vocabulary {vocabulary.name}")
        return label
    if spec.family == "synthetic_detection":
        syn = item.labels.get("synthetic")
        if isinstance(syn, bool):
            return "synthetic" if syn else "human"
        t = item.labels.get("truth")
        if t in ("synthetic", "human"):
            return str(t)
        raise InputError("item has no boolean labels.synthetic")
    t = item.labels.get("truth")
    valid = ("A", "B") if spec.family == "emotion_compare" else ("same", "different")
    if t not in valid:
        raise InputError(f"labels.truth must be one of {', '.join(valid)}, got {t!r}")
    if spec.family == "emotion_compare" and not item.labels.get("target_emotion"):
        raise InputError("emotion comparison item has no labels.target_emotion")
    return str(t)


def clip_paths(item: Item) -> list[str]:
    """The item's clip paths, checked against its eval's clip count."""
    n = EVALS[str(item.labels["task"])].n_clips
    paths = list(item.audio) if item.audio else []
    if not paths and item.audio_filepath:
        paths = [item.audio_filepath]
    if len(paths) != n:
        raise InputError(f"{item.labels['task']} needs {n} clip(s), the item has {len(paths)}")
    return paths


class UnderstandWorker:
    """One system instance per worker; a hang poisons it and the next item gets a new one.

    ``thresholds`` maps eval -> decision threshold for specialists (None: not yet known,
    the record carries the score and no answer; the runner completes it).
    """

    def __init__(
        self,
        spec: str,
        timeout: float | None,
        vocabulary: str,
        thresholds: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.spec = spec
        self.key = system_key(spec)  # the system's name in records
        self.timeout = timeout
        self.vocabulary = get_vocabulary(vocabulary)
        self.thresholds = thresholds or {}
        self.system: Any = None
        self.load_error: Exception | None = None
        self.pending_load: dict[str, Any] | None = None

    def _ensure_loaded(self) -> None:
        if self.system is not None or self.load_error is not None:
            return
        try:
            t0 = time.perf_counter()
            system = REGISTRY.build("understand", self.spec)
            call_with_timeout(system.load, self.timeout)
            self.system = system
            try:
                described = system.describe()
            except Exception as exc:  # informative only
                described = {"error": str(exc)}
            self.pending_load = {
                "load_s": round(time.perf_counter() - t0, 4),
                "system_info": described,
            }
        except CallTimedOut:
            self.load_error = TimeoutError(f"system load exceeded {self.timeout} s")
        except Exception as exc:
            self.load_error = exc

    def __call__(self, task: Task) -> Record:
        started = utc_now()
        rec = self._run(task)
        rec.started_at, rec.ended_at = started, utc_now()
        rec.output.setdefault("task", task.item.labels.get("task"))
        return rec

    def _err(self, task: Task, kind: str, message: str, status: str = "error") -> Record:
        return error_record(task.item.id, self.key, task.repeat, kind, message, status)

    def _run(self, task: Task) -> Record:
        item = task.item
        if item.problem:
            return self._err(task, "text_encoding", item.problem)
        eval_name = str(item.labels.get("task"))
        if eval_name not in EVALS:
            return self._err(task, "input", f"unknown task {eval_name!r}")
        spec = EVALS[eval_name]
        try:
            truth = truth_of(item, self.vocabulary)
            paths = clip_paths(item)
        except InputError as exc:
            return self._err(task, "input", str(exc))
        wall0 = time.perf_counter()
        try:
            if task.audio is not None:  # shipped: decoded from bytes, nothing opened
                from voxassay.core.ray_executor import fetch

                if item.audio:
                    parts = [
                        decode_audio_bytes(fetch(d), TARGET_SR, where=p)
                        for d, p in zip(task.audio, paths, strict=True)
                    ]
                else:
                    parts = [load_item_audio(item, TARGET_SR, data=fetch(task.audio[0]))]
            elif item.audio:
                parts = [load_audio(p, TARGET_SR) for p in paths]
            else:  # one clip: it may be a segment or a table cell
                parts = [load_item_audio(item, TARGET_SR)]
        except VoxassayError as exc:
            return self._err(task, exc.kind, str(exc))
        self._ensure_loaded()
        if self.load_error is not None:
            kind = getattr(self.load_error, "kind", "system_load")
            return self._err(task, kind, f"system failed to load: {self.load_error}")
        system = self.system
        output: dict[str, Any] = {"task": eval_name, "truth": truth}
        specialist = is_specialist(system)
        score: float | None = None
        t0 = time.perf_counter()
        try:
            if specialist:
                output["input_mode"] = "separate clips (specialist)"
                score = float(
                    call_with_timeout(lambda: system.score(eval_name, parts), self.timeout)
                )
                answer_text: Any = None
            else:
                prompt = render_prompt(
                    eval_name,
                    vocabulary=self.vocabulary,
                    target_emotion=item.labels.get("target_emotion"),
                )
                inputs: list[Audio] = [merge_clips(parts)] if spec.variant == "merged" else parts
                output["input_mode"] = (
                    "merged" if spec.variant == "merged" else f"{len(inputs)} inputs"
                )
                output["prompt"] = prompt
                answer_text = call_with_timeout(
                    lambda: system.understand(inputs, prompt), self.timeout
                )
        except CallTimedOut:
            self.system = None  # the hung call may still hold it; build a fresh one next time
            return self._err(task, "timeout", f"no answer within {self.timeout} s", "timeout")
        except SystemOutputError as exc:
            rec = self._err(task, "unparseable", str(exc), "unparseable")
            rec.output.update(output)
            return rec
        except InputError as exc:
            return self._err(task, exc.kind, str(exc))
        except Exception as exc:
            return self._err(task, "system", f"{type(exc).__name__}: {exc}")
        compute = time.perf_counter() - t0
        rec = Record(id=item.id, system=self.key, repeat=task.repeat, output=output)
        rec.timing = {
            "compute_s": round(compute, 6),
            "audio_s": round(sum(p.duration for p in parts), 6),
            "wall_s": round(time.perf_counter() - wall0, 6),
        }
        if self.pending_load is not None:
            rec.timing["load_s"] = self.pending_load["load_s"]
            rec.output["system_info"] = self.pending_load["system_info"]
            self.pending_load = None
        if specialist:
            assert score is not None
            output["score"] = score
            thr = self.thresholds.get(eval_name)
            if thr is None and system.default_threshold(eval_name) is None:
                thr = {"value": None, "source": "none (the score is the answer)"}
            if thr is None:
                output["answer_pending"] = True  # calibration: completed by the runner
                return rec
            finish_specialist(rec, system, thr, self.vocabulary)
            return rec
        if not isinstance(answer_text, str):
            rec.status = "unparseable"
            rec.error = {
                "kind": "unparseable",
                "message": f"system returned {type(answer_text).__name__}, not text",
            }
            return rec
        output["answer_text"] = answer_text
        output["prompt_version"] = PROMPTS_VERSION
        apply_parse(rec, self.vocabulary)
        return rec


def finish_specialist(
    rec: Record, system: Any, threshold: dict[str, Any], vocabulary: Vocabulary
) -> None:
    """Answer text from the score and the threshold, then parse it like a model's answer."""
    task = str(rec.output["task"])
    rec.output.pop("answer_pending", None)
    rec.output["threshold"] = threshold.get("value")
    rec.output["threshold_source"] = threshold.get("source")
    rec.output["answer_text"] = system.answer(
        task, float(rec.output["score"]), threshold.get("value")
    )
    apply_parse(rec, vocabulary)


def apply_parse(rec: Record, vocabulary: Vocabulary) -> None:
    """Parse ``output.answer_text``; set ``parsed``, ``parse_mode``, status and metrics."""
    task = str(rec.output["task"])
    parsed = parse_answer(task, rec.output["answer_text"], vocabulary)
    if not isinstance(parsed, Parsed):
        rec.status = "unparseable"
        rec.error = {"kind": "unparseable", "message": parsed.reason}
        return
    rec.output["parsed"] = parsed.value
    rec.output["parse_mode"] = parsed.mode
    truth = rec.output["truth"]
    if EVALS[task].answer == "rating":
        rating = float(parsed.value)
        rec.output.setdefault("score", rating)
        rec.metrics = {
            "rating": rating,
            "positive": truth == "human",
            "correct_fixed": (rating >= FIXED_RATING_THRESHOLD) == (truth == "human"),
        }
    else:
        rec.metrics = {"correct": parsed.value == truth}


def _calibrate(
    spec: str, system: Any, task: str, scores: list[tuple[float, str]]
) -> dict[str, Any]:
    """Threshold of a specialist for ``task``: option > calibration split > default."""
    fixed = getattr(system, "fixed_threshold", None)
    if fixed is not None:
        return {"value": float(fixed), "source": "option", "n_calibration": len(scores)}
    positive = POSITIVE.get(EVALS[task].family)
    classes = {t for _, t in scores}
    if scores and positive and len(classes) == 2:
        thr = best_threshold([s for s, _ in scores], [t == positive for _, t in scores])
        return {
            "value": thr,
            "source": "calibration split (max accuracy)",
            "n_calibration": len(scores),
        }
    default = system.default_threshold(task)
    return {
        "value": default,
        "source": "default (no usable calibration split)" if default is not None else "none",
        "n_calibration": len(scores),
    }


def run_systems(
    store: RunStore,
    items: Sequence[Item],
    systems: Sequence[str],
    *,
    vocabulary: str,
    repeats: int = 1,
    workers: int = 1,
    executor: str | Executor[Any, Any] = "thread",
    timeout: float | None = DEFAULT_TIMEOUT_S,
    done: set[tuple[str, str, int]] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    ship_audio: bool = False,
) -> dict[str, dict[str, Any]]:
    """Answer every pending (item, system, repeat); returns per-system run information
    (load seconds, ``describe()``, thresholds, evals not applicable to a specialist).
    ``executor``: a kind or an executor the caller opened (and closes). ``ship_audio``: the
    driver reads each item's clips and hands them to the workers through the executor."""
    pool = make_executor(executor, workers) if isinstance(executor, str) else executor
    prepare = _shipper(pool) if ship_audio else None
    try:
        return _run_systems(
            pool,
            store,
            items,
            systems,
            vocabulary,
            repeats,
            timeout,
            done,
            on_start,
            on_record,
            prepare,
        )
    finally:
        if isinstance(executor, str):
            pool.close()


def _shipper(ex: Executor[Any, Any]) -> Callable[[Task], Task]:
    """``prepare`` for ``--ship-audio``: the task with each clip's bytes shared (an item
    whose clips cannot be read is left to the worker, whose error record names it)."""

    def ship(task: Task) -> Task:
        item = task.item
        try:
            if item.audio:
                clips = [Path(p).read_bytes() for p in clip_paths(item)]
            else:
                clips = [item_audio_bytes(item)]
        except (VoxassayError, OSError, KeyError):
            return task
        return Task(item, task.repeat, [ex.share(c) for c in clips])

    return ship


def _lost(key: str) -> Callable[[Task, str], Record]:
    """The record of a task a distributed executor gave up on (its worker kept dying)."""

    def record(task: Task, reason: str) -> Record:
        return error_record(task.item.id, key, task.repeat, "worker_lost", reason)

    return record


def _run_systems(
    pool: Executor[Any, Any],
    store: RunStore,
    items: Sequence[Item],
    systems: Sequence[str],
    vocabulary: str,
    repeats: int,
    timeout: float | None,
    done: set[tuple[str, str, int]] | None,
    on_start: Callable[[str, int], None] | None,
    on_record: Callable[[Record], None] | None,
    prepare: Callable[[Task], Task] | None = None,
) -> dict[str, dict[str, Any]]:
    done = done or set()
    info: dict[str, dict[str, Any]] = {}
    vocab = get_vocabulary(vocabulary)
    stored: dict[tuple[str, str, int], Record] = {}
    if done:
        stored = {r.key: r for r in store.load_records().records}
    for spec in systems:
        probe = REGISTRY.build("understand", spec)  # cheap: nothing is loaded here
        specialist = is_specialist(probe)
        sys_info: dict[str, Any] = {"kind": "specialist" if specialist else "model"}
        key = system_key(spec)
        info[key] = sys_info
        if specialist:
            mine = [it for it in items if it.labels.get("task") in probe.specialist_tasks]
            skipped = sorted(
                {str(it.labels.get("task")) for it in items} - set(probe.specialist_tasks)
            )
            if skipped:
                sys_info["not_applicable"] = skipped
            sys_info["score_meaning"] = probe.score_meaning
        else:
            mine = [it for it in items if not is_calibration(it)]
        calib = [it for it in mine if is_calibration(it)]
        test = [it for it in mine if not is_calibration(it)]
        pending_c = [
            Task(it, r) for r in range(repeats) for it in calib if (it.id, key, r) not in done
        ]
        pending_t = [
            Task(it, r) for r in range(repeats) for it in test if (it.id, key, r) not in done
        ]
        if on_start:
            on_start(key, len(pending_c) + len(pending_t))
        t0 = time.perf_counter()
        loads: list[float] = []

        def emit(
            rec: Record, loads: list[float] = loads, sys_info: dict[str, Any] = sys_info
        ) -> None:
            if "load_s" in rec.timing:
                loads.append(rec.timing["load_s"])
                sys_info.setdefault("load_s", rec.timing["load_s"])
                sys_info.setdefault("describe", rec.output.get("system_info"))
            store.append(rec)
            if on_record:
                on_record(rec)

        thresholds: dict[str, dict[str, Any]] = {}
        if specialist:
            held: list[Record] = []
            if pending_c:
                factory = functools.partial(UnderstandWorker, spec, timeout, vocabulary, {})
                held = list(
                    pool.map_unordered(
                        factory,
                        pending_c,
                        lost=_lost(key),
                        resources=spec_resources(spec),
                        prepare=prepare,
                    )
                )
            for task_name in sorted({str(it.labels["task"]) for it in mine}):
                if probe.default_threshold(task_name) is None:
                    continue
                scores = [
                    (float(r.output["score"]), str(r.output["truth"]))
                    for r in [*held, *(stored.get((it.id, key, 0)) for it in calib)]
                    if r is not None
                    and r.repeat == 0
                    and r.output.get("task") == task_name
                    and r.output.get("score") is not None
                ]
                thresholds[task_name] = _calibrate(spec, probe, task_name, scores)
            for rec in held:
                if rec.output.get("answer_pending"):
                    thr = thresholds.get(str(rec.output["task"])) or {"value": None}
                    finish_specialist(rec, probe, thr, vocab)
                emit(rec)
            sys_info["thresholds"] = thresholds
        if pending_t:
            factory = functools.partial(UnderstandWorker, spec, timeout, vocabulary, thresholds)
            results = pool.map_unordered(
                factory,
                pending_t,
                lost=_lost(key),
                resources=spec_resources(spec),
                prepare=prepare,
            )
            for rec in results:
                emit(rec)
        sys_info["loop_wall_s"] = round(time.perf_counter() - t0, 4)
        sys_info["loads"] = len(loads)
        sys_info["load_total_s"] = round(sum(loads), 4)
    return info
