"""Side-effect checks of a session's business writes: duplicates, writes after the user said stop, cancellation and compensation (each ``check_*(ctx) -> TaskCheck``; the catalogue defines them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from voxassay.contracts.duplex.business import (
    CallStatus,
    ToolCall,
)
from voxassay.contracts.duplex.vocabulary import TaskAction
from voxassay.suites.duplex.scoring.task_context import (
    Onset,
    TaskCheck,
    TaskContext,
    _na,
    _unscored,
    call_summary,
)
from voxassay.suites.duplex.scoring.values import (
    canonical_value,
)

__all__ = [
    "check_cancellation",
    "check_compensation",
    "check_duplicate_side_effects",
    "check_write_after_stop",
]


def _duplicate_groups(calls: Sequence[ToolCall]) -> list[list[ToolCall]]:
    """Committed writes linked by the same idempotency key, or by the same task, tool and
    normalized arguments (transitively), each group in request order."""
    writes = [c for c in calls if c.is_write]
    parent = list(range(len(writes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, ...], int] = {}
    for i, c in enumerate(writes):
        keys: list[tuple[str, ...]] = [
            ("effect", c.task_id or "", c.tool, canonical_value(c.arguments))
        ]
        if c.idempotency_key:
            keys.append(("key", c.idempotency_key))
        for k in keys:
            if k in first:
                parent[root(i)] = root(first[k])
            else:
                first[k] = i
    groups: dict[int, list[ToolCall]] = defaultdict(list)
    for i, c in enumerate(writes):
        groups[root(i)].append(c)
    return [sorted(g, key=lambda c: c.requested_ns) for g in groups.values() if len(g) > 1]


def check_duplicate_side_effects(ctx: TaskContext) -> TaskCheck:
    """Duplicate side effects: the same write committed more than once.

    Two committed writes are the same effect when they share an idempotency key, or the same
    task, tool and normalized arguments (linked transitively). value = sum over groups of
    (group size - 1), compensated copies included (the write happened); passed = value <=
    ``max_duplicate_side_effects``. Applies when the scenario has a side-effect tool or the
    audit a side-effect call; unscored without ``tool-audit.json``.
    """
    name = "duplicate_side_effects"
    has_writes = any(t.side_effect for t in ctx.scenario.tools) or any(
        c.side_effect for c in ctx.calls
    )
    if not has_writes:
        return _na(name, "no side-effect tool")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    limit = ctx.scenario.business_truth.max_duplicate_side_effects
    groups = _duplicate_groups(ctx.calls)
    count = sum(len(g) - 1 for g in groups)
    extras = [c for g in groups for c in g[1:]]
    related = {c.call_id: call_summary(g[0]) for g in groups for c in g[1:]}
    return TaskCheck(
        name,
        count <= limit,
        value=count,
        expected=limit,
        evidence=[c.call_id for g in groups for c in g],
        reason=(
            f"{count} duplicate write(s) (allowed {limit})"
            + (
                ": "
                + "; ".join(" = ".join(c.call_id for c in g) + f" ({g[0].tool})" for g in groups)
                if groups
                else ""
            )
        ),
        details={
            "groups": [[c.call_id for c in g] for g in groups],
            "calls": [call_summary(c) for c in extras],
            "related": related,
        },
    )


def _in_window(c: ToolCall, stop: Onset) -> bool:
    if stop.ns is None or c.commit_ns <= stop.ns:
        return False
    if stop.until_ns is not None and c.commit_ns >= stop.until_ns:
        return False
    return stop.task_id is None or c.task_id in (None, stop.task_id)


def check_write_after_stop(ctx: TaskContext) -> TaskCheck:
    """Write after stop: a write committed after the user said stop, whatever the end state.

    Stop onsets: user segments with intent ``cancel``, task action ``cancel``/``compensate``,
    or an interruption that neither corrects nor keeps the task (time from the segment's
    ``user.speech_started``), and ``task.state`` cancel events (their task only). A stop holds
    until a later request re-authorizes writes. value = committed, non-compensating writes
    whose commit time (``completed_ns``, else ``requested_ns``) falls after an onset inside
    its window; passed = value == 0. Applies when ``forbidden_after_stop`` and a stop exists
    and the scenario or audit has side effects; unscored when no stop onset can be timed.
    """
    name = "write_after_stop"
    if not ctx.scenario.business_truth.forbidden_after_stop:
        return _na(name, "the scenario allows writes after stop")
    has_writes = any(t.side_effect for t in ctx.scenario.tools) or any(
        c.side_effect for c in ctx.calls
    )
    stops = ctx.stops()
    if not stops or not has_writes:
        return _na(name, "no stop in the session" if not stops else "no side-effect tool")
    timed = [s for s in stops if s.ns is not None]
    if not timed:
        return _unscored(
            name,
            "stop onset unknown: no user.speech_started for segment(s) "
            + ", ".join(str(s.segment_id) for s in stops),
        )
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    bad: dict[str, tuple[ToolCall, Onset]] = {}
    for c in ctx.calls:
        if not c.is_write or c.compensates is not None:
            continue
        for s in sorted(timed, key=lambda s: s.ns or 0):
            if _in_window(c, s):
                bad.setdefault(c.call_id, (c, s))
                break
    first = min(timed, key=lambda s: s.ns or 0)
    trigger = next(iter(bad.values()))[1] if bad else first
    return TaskCheck(
        name,
        not bad,
        value=len(bad),
        expected=0,
        evidence=[*(s.event_id for s in timed if s.event_id), *bad],
        reason=(
            "no write committed after a stop"
            if not bad
            else "; ".join(
                f"call {c.call_id} ({c.tool}) committed {(c.commit_ns - (s.ns or 0)) / 1e6:.0f} ms "
                f"after the stop at {(s.ns or 0) / 1e6:.0f} ms ({s.segment_id or s.event_id})"
                for c, s in bad.values()
            )
        ),
        details={
            "calls": [call_summary(c) for c, _ in bad.values()],
            "trigger": trigger.to_dict(),
            "stops": [s.to_dict() for s in timed],
        },
    )


def _cancel_scope(ctx: TaskContext, actions: set[TaskAction]) -> tuple[list[Onset], int | None]:
    """Segments with one of ``actions`` and the request-time bound of the calls they cover
    (None: every call)."""
    segs = [s for s in ctx.user_segments() if s.expected_task_action in actions]
    stops = {s.segment_id: s for s in ctx.stops() if s.source == "scenario"}
    onsets = [stops.get(s.id) or ctx.onset_of(s, "stop") for s in segs]
    bound: int | None = None
    if onsets and all(o.ns is not None for o in onsets):
        ends = [o.until_ns for o in onsets]
        bound = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
    return onsets, bound


def check_cancellation(ctx: TaskContext) -> TaskCheck:
    """Cancellation success: after a cancel, no committed write is left standing.

    Covered calls: requested before the cancel's window closes (a later request re-authorizes
    writes; every call when the cancel is not timed). value = covered writes that are
    committed, not compensations, and not undone (no committed compensating call, status not
    ``compensated``); passed = value == 0. Applies when a user segment's expected task action
    is ``cancel``; unscored without ``tool-audit.json``.
    """
    name = "cancellation"
    onsets, bound = _cancel_scope(ctx, {TaskAction.CANCEL})
    if not onsets:
        return _na(name, "no segment expects the task to be cancelled")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    standing = [
        c for c in ctx.calls if ctx.standing(c) and (bound is None or c.requested_ns < bound)
    ]
    requested = {c.call_id: bool(ctx.compensators(c)) for c in standing}
    trigger = onsets[-1]
    return TaskCheck(
        name,
        not standing,
        value=len(standing),
        expected=0,
        evidence=[*(o.event_id for o in onsets if o.event_id), *(c.call_id for c in standing)],
        reason=(
            "nothing committed stands after the cancel"
            if not standing
            else "still standing after the cancel: "
            + ", ".join(f"{c.call_id} ({c.tool})" for c in standing)
        ),
        details={
            "calls": [call_summary(c) for c in standing],
            "trigger": trigger.to_dict(),
            "compensation_requested": requested,
        },
    )


def check_compensation(ctx: TaskContext) -> TaskCheck:
    """Compensation: every committed write that had to be undone has a committed
    compensating call (``compensates`` = its call_id).

    Had to be undone: writes covered by a ``cancel``/``compensate`` segment (as in
    ``check_cancellation``), writes committed after a stop, and writes marked
    ``compensated``. value = those without a committed compensating call; passed = value ==
    0. Applies when such a write exists or a segment expects ``compensate``; also fails on a
    compensating call whose target never committed. Denominator: sessions with something to
    undo.
    """
    name = "compensation"
    onsets, bound = _cancel_scope(ctx, {TaskAction.CANCEL, TaskAction.COMPENSATE})
    expects = any(s.expected_task_action is TaskAction.COMPENSATE for s in ctx.user_segments())
    if ctx.audit is None:
        if onsets:
            return _unscored(name, "no tool-audit.json")
        return _na(name, "no tool-audit.json and nothing in the scenario to undo")
    timed_stops = [s for s in ctx.stops() if s.ns is not None]
    must: dict[str, ToolCall] = {}
    for c in ctx.calls:
        if not c.is_write or c.compensates is not None:
            continue
        if (
            (onsets and (bound is None or c.requested_ns < bound))
            or c.status is CallStatus.COMPENSATED
            or any(_in_window(c, s) for s in timed_stops)
        ):
            must[c.call_id] = c
    orphans = [
        c
        for c in ctx.calls
        if c.compensates is not None and c.committed and not ctx.audit.call(c.compensates).committed
    ]
    if not must and not expects and not orphans:
        return _na(name, "no committed write had to be undone")
    missing = [c for c in must.values() if not ctx.compensated(c)]
    problems = [f"{c.call_id} ({c.tool}) has no committed compensating call" for c in missing]
    problems += [f"{c.call_id} compensates {c.compensates}, which never committed" for c in orphans]
    requested = {c.call_id: bool(ctx.compensators(c)) for c in missing}
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected=0,
        evidence=[*(c.call_id for c in missing), *(c.call_id for c in orphans)],
        reason="; ".join(problems) or f"{len(must)} write(s) undone by a compensating call",
        details={
            "calls": [call_summary(c) for c in [*missing, *orphans]],
            "must_undo": sorted(must),
            "trigger": onsets[-1].to_dict() if onsets else None,
            "compensation_requested": requested,
        },
    )
