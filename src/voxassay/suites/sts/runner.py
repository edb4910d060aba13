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

Each dialogue is a task on an executor (``dialogue.py``): threads in this process by
default (one system shared), or ``executor="ray"`` (one system per actor, built there; the
rendered turns travel with the task and the answers come back as WAV bytes, so workers open
nothing of the run). This process alone writes the run folder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.audio import TARGET_SR, Audio, write_wav
from voxassay.core.errors import InputError
from voxassay.core.executor import Executor, ThreadExecutor
from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import check_unique_keys, spec_resources, system_key
from voxassay.suites.sts.dialogue import (
    Dialogue,
    DialogueWorker,
    Done,
    earlier_key,
    lost_dialogue,
)
from voxassay.suites.sts.items import (
    StsItem,
    StsScenario,
    item_set_version,
    load_items,
    select_items,
)
from voxassay.suites.sts.render import RENDER_VERSION, TurnRenderer
from voxassay.suites.sts.scoring import METRICS_VERSION
from voxassay.systems.converse import MODES, Turn

__all__ = ["SUITE_NAME", "run_sts"]

SUITE_NAME = "sts"
DEFAULT_TIMEOUT_S = 300.0


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
    executor: str = "thread",
    ray_address: str | None = None,
) -> RunStore:
    """Run ``systems`` over the items into ``out/<run_id>/`` (module docstring).
    ``executor``: ``thread`` (``workers`` dialogues side by side on one system) or another
    of ``core.execution`` (``ray``: ``workers`` actors per system, each with its own)."""
    from voxassay.core.registry import REGISTRY

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
    pool: Executor[Any, Any] | None = None
    if executor != "thread":
        from voxassay.core.execution import make_executor

        pool = make_executor(executor, workers, ray_address=ray_address)
    renderer = TurnRenderer(cache_dir or Path(out) / ".render-cache", clips)
    store, done, _ = RunStore.start_or_resume(
        Path(out), SUITE_NAME, config, run_items(scenarios, modes), resume
    )
    turns = _Turns(store, renderer, neutral)
    loads: dict[str, Any] = {}
    judged: dict[str, Any] = {}
    shared: DialogueWorker | None = None  # a local run's judge and proxies, loaded once
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
            worker = DialogueWorker(spec, key, timeout, judge, proxies)
            if pool is None and shared is not None:
                worker.rater, worker.extra = shared.rater, shared.extra
            loads[key] = _run_system(worker, todo, store, turns, on_record, pool, workers)
            if "judge" in loads[key]:
                judged = loads[key].pop("judge")
            if worker.load_error is None:
                shared = shared or worker
    finally:
        if pool is not None:
            pool.close()
        store.close()
    info = store.info()
    if judged:
        info["judge"] = judged
    sys_info = info.get("systems", {})
    for k, load in loads.items():
        sys_info.setdefault(k, {}).update(load)
    execution: dict[str, Any] = {"timeout_s": timeout, "workers": workers}
    if pool is not None:
        execution.update(executor=executor, **pool.describe())
    info.update(
        systems=sys_info,
        inputs=turns.info,
        renders=(
            "the shipped user turns are constructed: piper speech with constructed prosody "
            "and degradations (suites/sts/render.py); --clips recordings replace them"
        ),
        ended_at=utc_now(),
        execution=execution,
    )
    store.write_info(info)
    if write_reports:
        from voxassay.report import write_report

        write_report(store.path)
    return store


def _run_system(
    worker: DialogueWorker,
    todo: list[tuple[StsScenario, StsItem, str]],
    store: RunStore,
    turns: _Turns,
    on_record: Callable[[Record], None] | None,
    pool: Executor[Any, Any] | None,
    workers: int,
) -> dict[str, Any]:
    """One system's dialogues on ``pool`` (None: threads sharing ``worker``, loaded here)."""
    groups: dict[tuple[str, str], Dialogue] = {}
    for scenario, it, mode in todo:  # one dialogue per (scenario, mode): its history, then items
        d = groups.get((scenario.id, mode))
        if d is None:
            d = groups[(scenario.id, mode)] = Dialogue(scenario, mode, [], {})
            for k, text in enumerate(scenario.earlier):
                key = earlier_key(scenario, k)
                d.turns[key] = turns.get(key, text, "neutral", ())
        d.items.append(it)
        d.turns[it.id] = turns.get(it.id, it.say, it.style, it.stressors)
    info: dict[str, Any] = {}
    if pool is None:
        info = dict(worker.load())
        same: Callable[[], DialogueWorker] = lambda: worker  # noqa: E731
        results = ThreadExecutor(workers).map_unordered(same, list(groups.values()))
    else:
        factory = functools.partial(
            DialogueWorker, worker.spec, worker.key, worker.timeout, worker.judge, worker.proxies
        )
        results = pool.map_unordered(
            factory,
            list(groups.values()),
            lost=functools.partial(lost_dialogue, worker.key),
            resources=spec_resources(worker.spec),
        )
    for result in results:
        done: Done = result
        if done.loaded and not info:
            info = dict(done.loaded)
        for answer in done.answers:
            if answer.wav is not None:
                path = store.path / answer.record.output["audio_path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(answer.wav)
            store.append(answer.record)
            if on_record:
                on_record(answer.record)
    return info
