"""``voxassay demo``: run each registered suite's demo into one folder with one report.

The demo folder is itself a run directory (suite ``demo``): ``run.json`` lists the suite
runs inside it, and ``voxassay report DEMO_DIR`` rebuilds the combined report from them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.registry import REGISTRY, SuiteInfo
from voxassay.core.runstore import RunStore, utc_now


def failed_suites(demo_dir: str | Path) -> list[str]:
    """Names of the suites whose demo raised (recorded in the demo folder's run.json)."""
    runs = RunStore.open(Path(demo_dir)).info().get("runs") or {}
    return [name for name, run in runs.items() if run.get("error")]


def run_demo(
    out: str | Path,
    *,
    only: list[str] | None = None,
    workers: int = 1,
    progress: Any = None,
    full: bool = False,
    serial: bool = False,
) -> Path:
    """Run the demos, write ``report.{json,md,html}`` and return the demo folder.

    ``full``: each suite's larger demo set (``voxassay demo --full``) instead of the quick
    one that shows each capability once. By default the demos run side by side on two
    lanes: this process runs the ``demo_priority`` suites (whose numbers are wall-clock
    latencies) and then the longest other demos at normal priority, a second process runs
    the shortest ones at low priority (nice 10); so speed figures (RTFx, synthesis time) of
    every demo but the priority ones are measured under shared load.
    ``serial``: one demo after another in this process (``run.json`` ``schedule``).
    Each suite's wall time is recorded in ``run.json`` ``runs`` and stated in the report. A
    suite whose demo raises is recorded with its error (``run.json`` ``runs``, a section
    saying so in the report) and the other suites still run."""
    suites = [s for s in REGISTRY.suites() if s.demo is not None and s.name != "demo"]
    if only:
        unknown = set(only) - {s.name for s in suites}
        if unknown:
            raise InputError(f"no demo for suite(s) {', '.join(sorted(unknown))}")
        suites = [s for s in suites if s.name in only]
    size = "full" if full else "quick"
    schedule = "serial" if serial or len(suites) < 2 else "parallel"
    config = {"suites": [s.name for s in suites], "size": size, "schedule": schedule}
    store = RunStore.create(out, "demo", config, None)
    runs: dict[str, Any] = {}
    lock = threading.Lock()

    started = time.perf_counter()

    def record(name: str, result: dict[str, Any], t0: float, lane: str = "main") -> None:
        """Store one suite's result with its lane and its start (s after the demo's)."""
        result = {**result, "started_s": round(t0 - started, 1)}
        result.setdefault("lane", lane)
        with lock:
            runs[name] = result
            store.update_info(runs={s.name: runs[s.name] for s in suites if s.name in runs})
        if result.get("error") and progress is not None:
            progress.console.log(f"{name} demo failed: {result['error']}")

    if schedule == "serial":
        for suite in suites:
            t0 = time.perf_counter()
            record(suite.name, _run_suite_demo(suite.name, store.path, workers, progress, full), t0)
    else:
        _run_two_lanes(suites, store.path, workers, progress, full, record)
    store.update_info(seconds=round(time.perf_counter() - started, 1))
    from voxassay.report import finish_run

    return finish_run(store).path


def _run_suite_demo(
    name: str, out: Path, workers: int, progress: Any, full: bool
) -> dict[str, Any]:
    """One suite's demo into ``out``: ``{"run_dir", "seconds"}`` or ``{"error", "seconds"}``."""
    t0 = time.perf_counter()
    try:
        suite = REGISTRY.suite(name)
        assert suite.demo is not None
        sub = suite.demo(out, workers=workers, progress=progress, full=full)
    except Exception as exc:  # one suite's failure is recorded; the others still run
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": _since(t0)}
    return {"run_dir": sub.path.name, "seconds": _since(t0)}


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 1)


def _run_two_lanes(
    suites: list[SuiteInfo],
    out: Path,
    workers: int,
    progress: Any,
    full: bool,
    record: Callable[..., None],
) -> None:
    """The parallel schedule of ``run_demo``: the priority suites here, then the longest
    pending demos here too, while a low-priority process (fed one suite at a time by a
    thread here) takes the shortest ones: long work runs at normal priority, and the lane
    fills the cores the priority suites leave idle."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    pending = deque(
        sorted((s for s in suites if not s.demo_priority), key=lambda s: -s.demo_seconds)
    )
    mine = [s for s in suites if s.demo_priority]
    take = threading.Lock()

    def next_pending(longest: bool) -> SuiteInfo | None:
        with take:
            if not pending:
                return None
            return pending.popleft() if longest else pending.pop()

    ctx = mp.get_context("spawn")  # no fork of a process whose threads hold locks
    events: Any = ctx.Queue() if progress is not None else None
    relay = threading.Thread(target=apply_progress, args=(events, progress), daemon=True)
    if events is not None:
        relay.start()

    def background() -> None:
        with ProcessPoolExecutor(
            1, mp_context=ctx, initializer=_background_init, initargs=(events,)
        ) as pool:
            while (suite := next_pending(longest=False)) is not None:
                t0 = time.perf_counter()
                try:
                    result = pool.submit(_background_demo, suite.name, out, workers, full).result()
                except Exception as exc:  # the lane's process died: record, run the rest here
                    error = {"error": f"{type(exc).__name__}: {exc}", "seconds": _since(t0)}
                    record(suite.name, error, t0, "low priority")
                    return
                record(suite.name, result, t0)

    lane = threading.Thread(target=background, name="voxassay-demo-lane", daemon=True)
    lane.start()

    def run_here(suite: SuiteInfo) -> None:
        t0 = time.perf_counter()
        record(suite.name, _run_suite_demo(suite.name, out, workers, progress, full), t0)

    for own in mine:
        run_here(own)
    while (left := next_pending(longest=True)) is not None:
        run_here(left)
    lane.join()
    if events is not None:
        events.put(None)
        relay.join()


_EVENTS: Any = None
"""The low-priority lane's progress queue (set in that process by ``_background_init``)."""


def _background_init(events: Any) -> None:
    """The lane's process: it (and every process it starts) runs only on CPU time nothing
    else wants (``SCHED_IDLE`` where Linux has it, else the lowest nice)."""
    global _EVENTS
    os.nice(19)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    _EVENTS = events


def _background_demo(name: str, out: Path, workers: int, full: bool) -> dict[str, Any]:
    progress = ProgressRelay(_EVENTS, name) if _EVENTS is not None else None
    result = _run_suite_demo(name, out, workers, progress, full)
    idle = hasattr(os, "SCHED_IDLE") and os.sched_getscheduler(0) == os.SCHED_IDLE
    return {
        **result,
        "lane": "low priority (" + ("SCHED_IDLE" if idle else f"nice {os.nice(0)}") + ")",
    }


class _RelayConsole:
    def __init__(self, events: Any) -> None:
        self._events = events

    def log(self, *objects: Any) -> None:
        self._events.put(("log", "", 0, (" ".join(str(o) for o in objects),), {}))


class ProgressRelay:
    """The part of rich's ``Progress`` the suites' demos use (``add_task``, ``advance``,
    ``update``, ``console.log``), sent over a queue to the parent's real progress bars."""

    def __init__(self, events: Any, suite: str) -> None:
        self._events, self._suite, self._tasks = events, suite, 0
        self.console = _RelayConsole(events)

    def add_task(self, description: str, **fields: Any) -> int:
        self._tasks += 1
        self._events.put(("add", self._suite, self._tasks, (description,), fields))
        return self._tasks

    def advance(self, task: int, advance: float = 1) -> None:
        self._events.put(("advance", self._suite, task, (advance,), {}))

    def update(self, task: int, **fields: Any) -> None:
        self._events.put(("update", self._suite, task, (), fields))


def apply_progress(events: Any, progress: Any) -> None:
    """Replay the relayed progress events on ``progress`` until a ``None`` arrives."""
    tasks: dict[tuple[str, int], Any] = {}
    while (event := events.get()) is not None:
        kind, suite, task, args, fields = event
        if kind == "log":
            progress.console.log(*args)
        elif kind == "add":
            tasks[(suite, task)] = progress.add_task(*args, **fields)
        elif (suite, task) in tasks:
            getattr(progress, kind)(tasks[(suite, task)], *args, **fields)


def build_demo_report(store: RunStore, **_: Any) -> dict[str, Any]:
    """The combined report: each suite's report as a section."""
    info = store.info()
    sections = []
    for name, run in (info.get("runs") or {}).items():
        if run.get("error"):
            sections.append({"suite": name, "error": run["error"], **_timing(run), "report": {}})
            continue
        suite = REGISTRY.suite(name)
        sub = RunStore.open(store.path / run["run_dir"])
        assert suite.report is not None
        sections.append(
            {
                "suite": name,
                "run_dir": run["run_dir"],
                **_timing(run),
                "report": suite.report(sub),
            }
        )
    return {
        "suite": "demo",
        "metrics_version": "demo/1",
        "run_id": store.run_id,
        "generated_at": utc_now(),
        "size": info.get("config", {}).get("size", "full"),
        "schedule": info.get("config", {}).get("schedule", "serial"),
        "seconds": info.get("seconds"),
        "systems": sorted(
            {s["system"] for sec in sections for s in sec["report"].get("systems", [])}
        ),
        "sections": sections,
    }


def _timing(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run.get(k) for k in ("seconds", "started_s", "lane")}


TIMING_HEADER = ("section", "lane", "started", "wall time")


def timing_rows(report: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """``TIMING_HEADER`` rows of the demo's timing table (start in seconds after the demo's
    start), the total last."""
    rows = [
        (
            str(sec["suite"]),
            str(sec.get("lane") or "main"),
            f"{sec['started_s']} s" if sec.get("started_s") is not None else "",
            "failed" if sec.get("error") else f"{sec.get('seconds')} s",
        )
        for sec in report["sections"]
    ]
    total = report.get("seconds")
    rows.append(("total", "", "", f"{total} s" if total is not None else "not recorded"))
    return rows


SCHEDULES = {
    "serial": "The sections ran one after another.",
    "parallel": "The sections ran side by side on two lanes; the duplex agents ran at zero "
    "compute (their latencies are the policies' decisions, not this machine's speed), and the "
    "speed figures of the other sections (RTFx, synthesis time) are measured under shared load "
    "(`voxassay demo --serial` runs them one at a time).",
}
"""What each ``run_demo`` schedule means for the figures, as the report states it."""


def _schedule_note(report: dict[str, Any]) -> str:
    return SCHEDULES.get(str(report.get("schedule", "serial")), "")


def capability_profile(entries: list[Any]) -> tuple[Any, Any]:
    """The demo's first table and picture: every system that ran, every dimension it was
    measured on, with its 95 % interval and n. The picture shows the dimensions on [0, 1]
    (scores, rates, WER); latencies are in the table only."""
    from voxassay.report.document import Chart, Table
    from voxassay.report.html import bar_chart, fmt

    rows = [
        [
            e.domain,
            e.system,
            e.dimension,
            f"{fmt(e.value, 0 if e.unit == 'ms' else 3)}{' ms' if e.unit == 'ms' else ''}",
            "not estimable (n < 2)"
            if e.n is not None and e.n < 2
            else f"[{fmt(e.lo, 0 if e.unit == 'ms' else 3)}, {fmt(e.hi, 0 if e.unit == 'ms' else 3)}]",
            e.n,
            "higher" if e.higher_is_better else "lower",
        ]
        for e in entries
    ]
    table = Table(["domain", "system", "dimension", "value", "95% CI", "n", "better"], rows, left=3)
    unit = [e for e in entries if e.unit == "" and e.value is not None]
    cats = list(dict.fromkeys(f"{e.domain} · {e.dimension}" for e in unit))
    systems = list(dict.fromkeys(e.system for e in unit))
    by = {(f"{e.domain} · {e.dimension}", e.system): e for e in unit}
    series = [
        (
            sys_name,
            [
                (by[(c, sys_name)].value, by[(c, sys_name)].lo, by[(c, sys_name)].hi)
                if (c, sys_name) in by
                else (None, None, None)
                for c in cats
            ],
        )
        for sys_name in systems
    ]
    chart = (
        Chart(
            bar_chart(cats, series, x_label="score, rate or WER on [0, 1] (95 % CI)"),
            caption="Every [0, 1] dimension of every system (WER: lower is better)",
            text="the table above holds the numbers",
        )
        if cats
        else None
    )
    return table, chart


def document(report: dict[str, Any], store: RunStore) -> Any:
    """The combined demo report: the capability profile across domains first, the wall time
    per section, then each suite's report (its summary first) as a section."""
    from voxassay.report.document import Document, Section, Summary, Table, Text

    entries: list[Any] = []
    sections = []
    sentences = []
    verdicts: list[Any] = []
    for sec in report["sections"]:
        suite = REGISTRY.suite(sec["suite"])
        title = str(suite.extras.get("title", sec["suite"]))
        if sec.get("error"):
            sections.append(Section(title, [Text(f"This section failed: {sec['error']}", "note")]))
            sentences.append(f"{title}: failed ({sec['error']}).")
            continue
        sub = RunStore.open(store.path / sec["run_dir"])
        build = suite.extras.get("document")
        if build is None:
            continue
        doc = build(sec["report"], sub)
        if doc.summary.sentences:
            sentences.append(f"{title}: {doc.summary.sentences[0]}")
        verdicts += doc.summary.verdicts
        if suite.extras.get("profile"):
            entries += suite.extras["profile"](sec["report"])
        sections.append(
            doc.as_section(
                title,
                Text(f"run folder {sec['run_dir']}, {sec.get('seconds')} s", "muted"),
            )
        )
    table, chart = capability_profile(entries)
    combined = Document(
        title=f"voxassay demo · {report['run_id']}",
        summary=Summary(sentences[:5], table, verdicts, chart),
        meta=f"Demo size: {report.get('size', 'full')}. {_schedule_note(report)}",
    )
    combined.section("Wall time per section", Table(list(TIMING_HEADER), timing_rows(report)))
    combined.sections.extend(sections)
    return combined


DEMO_SUITE = SuiteInfo(
    name="demo",
    description="(internal) combined report of the suites' demos",
    report=build_demo_report,
    extras={
        "document": document,
        "hidden": True,
    },
)
