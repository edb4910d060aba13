"""Run converse systems over the STS items, each item once per mode (AO, TO).

Per system and mode, scenario by scenario: a scripted scenario's earlier user turns are
played first (AO: their audio; TO: their transcript) and the system's answers kept, so each
item continues the same dialogue; a natural item starts fresh. One record per (item, mode,
system): id ``<item>#<mode>``, ``output`` = the answer's text, its audio file
(``audio/<system>/<item>#<mode>.wav``), what the system reported; ``metrics`` =
``scoring.score_reply``. The user turns the systems heard are written once to
``inputs/<key>.wav`` (the report plays them). A system that raises, hangs past ``timeout``,
answers nothing or answers for longer than ``converse.MAX_REPLY_S`` gets an error record with
the reason; a failed earlier turn fails that scenario's items in that mode (reason
``history``). ``compute_s`` is the time inside ``converse``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxeval.core.audio import TARGET_SR, Audio, write_wav
from voxeval.core.errors import InputError, VoxevalError
from voxeval.core.executor import CallTimedOut, call_with_timeout
from voxeval.core.items import Item
from voxeval.core.records import Record, error_record
from voxeval.core.runstore import RunStore, utc_now
from voxeval.core.specs import check_unique_keys, system_key
from voxeval.suites.sts.items import (
    StsItem,
    StsScenario,
    item_set_version,
    load_items,
    select_items,
)
from voxeval.suites.sts.render import RENDER_VERSION, TurnRenderer
from voxeval.suites.sts.scoring import METRICS_VERSION, score_reply
from voxeval.systems.converse import MODES, HistoryTurn, Mode, Reply, Turn, coerce_reply

__all__ = ["SUITE_NAME", "run_sts"]

SUITE_NAME = "sts"
DEFAULT_TIMEOUT_S = 300.0


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "system"


def run_items(scenarios: Sequence[StsScenario], modes: Sequence[str]) -> list[Item]:
    return [
        Item(id=f"{it.id}#{m}", text=it.say, labels={**it.labels(), "item": it.id, "mode": m})
        for s in scenarios
        for it in s.items
        for m in modes
    ]


class _Turns:
    """Rendered user turns of the run, written once to ``inputs/``."""

    def __init__(self, store: RunStore, renderer: TurnRenderer, neutral: bool) -> None:
        self.store, self.renderer, self.neutral = store, renderer, neutral
        self.info: dict[str, Any] = {}
        self._audio: dict[str, Any] = {}

    def get(self, key: str, text: str, style: str, stressors: tuple[str, ...]) -> Turn:
        if key not in self._audio:
            r = self.renderer.render(key, text, style, stressors, neutral=self.neutral)
            write_wav(self.store.path / "inputs" / f"{key}.wav", Audio(r.audio, TARGET_SR))
            self._audio[key] = r.audio
            self.info[key] = {"source": r.source, **r.info}
        return Turn(self._audio[key], TARGET_SR, text, stressors)


def run_sts(
    systems: Sequence[str],
    out: str | Path,
    *,
    modes: Sequence[str] = MODES,
    only: Sequence[str] = (),
    clips: str | Path | None = None,
    neutral: bool = False,
    items_file: str | None = None,
    judge: str | None = None,
    proxies: str = "fast",
    workers: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    resume: bool = False,
    cache_dir: str | Path | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Run ``systems`` over the items into ``out/<run_id>/`` (module docstring)."""
    from voxeval.core.registry import REGISTRY

    if not systems:
        raise InputError("no system given")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"--mode takes ao and/or to, not {', '.join(bad) or 'nothing'}")
    check_unique_keys(systems)
    for spec in systems:
        REGISTRY.check("converse", spec)
    if judge:
        REGISTRY.check("understand", judge)
    if proxies not in ("fast", "all"):
        raise InputError(f"--proxies is fast or all, not {proxies!r}")
    scenarios = select_items(load_items(items_file), tuple(only))
    config = {
        "item_set": item_set_version(items_file),
        "systems": list(systems),
        "modes": list(modes),
        "only": list(only),
        "neutral_render": neutral,
        "clips": str(clips) if clips else None,
        "render_version": RENDER_VERSION,
        "metrics_version": METRICS_VERSION,
        "judge": judge,
        "proxies": proxies,
    }
    renderer = TurnRenderer(cache_dir or Path(out) / ".render-cache", clips)
    store, done, _ = RunStore.start_or_resume(
        Path(out), SUITE_NAME, config, run_items(scenarios, modes), resume
    )
    turns = _Turns(store, renderer, neutral)
    loads: dict[str, Any] = {}
    extra = None
    if proxies == "all":
        from voxeval.suites.sts.scoring import AudioProxies

        extra = AudioProxies()
    rater = None
    if judge:
        from voxeval.suites.sts.judge import StsJudge

        rater = StsJudge(judge)
        store.update_info(judge=rater.describe())
    try:
        for spec in systems:
            key = system_key(spec)
            todo = [
                (s, it, m)
                for m in modes
                for s in scenarios
                for it in s.items
                if (f"{it.id}#{m}", key, 0) not in done
            ]
            if on_start:
                on_start(key, len(todo))
            if not todo:
                continue
            loads[key] = _run_system(
                spec, key, todo, store, turns, timeout, on_record, rater, extra, workers
            )
    finally:
        store.close()
    info = store.info()
    sys_info = info.get("systems", {})
    for k, load in loads.items():
        sys_info.setdefault(k, {}).update(load)
    info.update(
        systems=sys_info,
        inputs=turns.info,
        renders=(
            "the shipped user turns are constructed: piper speech with constructed prosody "
            "and degradations (suites/sts/render.py); --clips recordings replace them"
        ),
        ended_at=utc_now(),
        execution={"timeout_s": timeout, "workers": workers},
    )
    store.write_info(info)
    if write_reports:
        from voxeval.report import write_report

        write_report(store.path)
    return store


def _run_system(
    spec: str,
    key: str,
    todo: list[tuple[StsScenario, StsItem, str]],
    store: RunStore,
    turns: _Turns,
    timeout: float | None,
    on_record: Callable[[Record], None] | None,
    rater: Any = None,
    extra: Any = None,
    workers: int = 1,
) -> dict[str, Any]:
    from voxeval.core.registry import REGISTRY

    t0 = time.perf_counter()
    try:
        system = REGISTRY.build("converse", spec)
        system.load()
        info = dict(system.describe())
    except VoxevalError as exc:
        for _, it, m in todo:
            rec = error_record(f"{it.id}#{m}", key, 0, "load", str(exc))
            store.append(rec)
            if on_record:
                on_record(rec)
        return {"load_error": str(exc)}
    load_s = time.perf_counter() - t0
    groups: dict[tuple[str, str], list[tuple[StsScenario, StsItem, str]]] = {}
    for task in todo:  # one dialogue per (scenario, mode): its history, then its items
        groups.setdefault((task[0].id, task[2]), []).append(task)
        turns.get(task[1].id, task[1].say, task[1].style, task[1].stressors)  # rendered first
        for k, text in enumerate(task[0].earlier):
            turns.get(f"{task[0].id}.earlier-{k}", text, "neutral", ())

    def dialogue(
        tasks: list[tuple[StsScenario, StsItem, str]], emit: Callable[[Record], None]
    ) -> None:
        scenario, _, mode = tasks[0]
        hist = _history(system, scenario, mode, turns, timeout)
        for _, it, _ in tasks:
            rid = f"{it.id}#{mode}"
            started = utc_now()
            if isinstance(hist, str):
                rec = error_record(rid, key, 0, "history", hist)
            else:
                turn = turns.get(it.id, it.say, it.style, it.stressors)
                rec = _one(system, spec, key, it, turn, hist, mode, store, timeout)  # type: ignore[arg-type]
                _score_more(rec, it, turn, store, rater, extra)
            rec.started_at, rec.ended_at = started, utc_now()
            emit(rec)

    def append(rec: Record) -> None:
        store.append(rec)
        if on_record:
            on_record(rec)

    if workers <= 1:
        for tasks in groups.values():
            dialogue(tasks, append)
    else:  # dialogues side by side; records reach the store from this thread only
        from concurrent.futures import ThreadPoolExecutor, as_completed

        def collect(tasks: list[tuple[StsScenario, StsItem, str]]) -> list[Record]:
            out: list[Record] = []
            dialogue(tasks, out.append)
            return out

        with ThreadPoolExecutor(workers, thread_name_prefix="voxeval-sts") as pool:
            for fut in as_completed([pool.submit(collect, t) for t in groups.values()]):
                for rec in fut.result():
                    append(rec)
    return {"system_info": info, "load_s": round(load_s, 3)}


def _score_more(
    rec: Record, it: StsItem, turn: Turn, store: RunStore, rater: Any, extra: Any
) -> None:
    """The slower proxies and the judge, for an answer that came."""
    if rec.status != "ok":
        return
    if extra is not None and rec.output.get("audio_path"):
        from voxeval.core.audio import load_audio

        a = load_audio(store.path / rec.output["audio_path"])
        more = extra.score(Reply(rec.output.get("text", ""), a.samples, a.sr))
        heard = more.pop("answer_heard", None)
        rec.metrics.update(more)
        if heard is not None:
            rec.output["answer_heard"] = heard
    if rater is not None:
        _judge(rater, it, turn, rec, store)


def _call(
    system: Any, turn: Turn, hist: list[HistoryTurn], mode: str, timeout: float | None, where: str
) -> tuple[Reply, float]:
    t0 = time.perf_counter()
    raw = call_with_timeout(lambda: system.converse(turn, list(hist), mode), timeout)
    return coerce_reply(raw, where), (time.perf_counter() - t0) * 1000.0


def _history(
    system: Any, scenario: StsScenario, mode: str, turns: _Turns, timeout: float | None
) -> list[HistoryTurn] | str:
    """The dialogue before the scenario's items (a reason string when a turn failed)."""
    hist: list[HistoryTurn] = []
    for k, text in enumerate(scenario.earlier):
        turn = turns.get(f"{scenario.id}.earlier-{k}", text, "neutral", ())
        try:
            reply, _ = _call(system, turn, hist, mode, timeout, f"{scenario.id} turn {k}")
        except CallTimedOut:
            return f"earlier turn {k} of {scenario.id} timed out after {timeout} s"
        except Exception as exc:
            return f"earlier turn {k} of {scenario.id}: {type(exc).__name__}: {exc}"
        hist.append(HistoryTurn("user", text, turn.audio if mode == "ao" else None, TARGET_SR))
        hist.append(HistoryTurn("assistant", reply.text, reply.audio, reply.sample_rate))
    return hist


def _one(
    system: Any,
    spec: str,
    key: str,
    it: StsItem,
    turn: Turn,
    hist: list[HistoryTurn],
    mode: Mode,
    store: RunStore,
    timeout: float | None,
) -> Record:
    rid = f"{it.id}#{mode}"
    try:
        reply, wall_ms = _call(system, turn, hist, mode, timeout, spec)
    except CallTimedOut:
        return error_record(rid, key, 0, "timeout", f"no answer within {timeout} s", "timeout")
    except VoxevalError as exc:
        return error_record(rid, key, 0, "output", str(exc))
    except Exception as exc:  # the system under test raised: recorded, the run goes on
        return error_record(rid, key, 0, "system", f"{type(exc).__name__}: {exc}")
    if not reply.text.strip() and reply.audio is None:
        return error_record(rid, key, 0, "empty", "the system answered nothing")
    output: dict[str, Any] = {"text": reply.text, "info": _jsonable(reply.info)}
    if reply.audio is not None and reply.sample_rate:
        rel = Path("audio") / _slug(key) / f"{_slug(rid)}.wav"
        write_wav(store.path / rel, Audio(reply.audio, int(reply.sample_rate)))
        output.update(audio_path=rel.as_posix(), sample_rate=int(reply.sample_rate))
    rec = Record(id=rid, system=key, output=output)
    rec.metrics = score_reply(it, reply, wall_ms)
    rec.timing = {"compute_s": round(wall_ms / 1000.0, 4), "audio_s": round(reply.duration_s, 3)}
    return rec


def _judge(rater: Any, it: StsItem, turn: Turn, rec: Record, store: RunStore) -> None:
    """The judge's score of an answer it can hear (a text-only answer: unscored)."""
    from voxeval.core.audio import load_audio

    if not rec.output.get("audio_path"):
        rec.output["judge"] = {"spec": rater.spec, "score": None, "status": "unscored",
                               "reason": "a text-only answer: nothing to hear"}  # fmt: skip
        return
    answer = load_audio(store.path / rec.output["audio_path"])
    block = rater.rate_answer(it, Audio(turn.audio, turn.sample_rate), answer)
    rec.output["judge"] = block
    if block.get("score") is not None:
        rec.metrics["judge"] = float(block["score"])


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value)
        return value
    except TypeError:
        return json.loads(json.dumps(value, default=str))
