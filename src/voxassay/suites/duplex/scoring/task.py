"""Task and side-effect metrics against business truth (DESIGN.md, "Task and side effects").

Inputs (all read, never written, by the scoring core):

``tool-audit.json`` (``ToolAudit``), written by the driver or the reference agent, or assembled
by hand::

    {"schema_version": 1, "session_id": "s1", "calls": [
      {"call_id": "c1", "tool": "reschedule_appointment", "arguments": {"date": "2026-08-10"},
       "idempotency_key": "k1", "task_id": "t1", "task_version": 2, "response_id": "r2",
       "requested_ns": 3900000000, "completed_ns": 4300000000, "status": "ok",
       "side_effect": true, "committed": true, "result": {"status": "rescheduled"},
       "compensates": null, "delivered_ns": 4500000000, "delivered_task_version": 2}]}

Every ``*_ns`` is on the session clock of the ledger (``ledger.session_ns``: a producer's
``monotonic_ns`` plus its ``clock.producer`` offset). ``status`` is what happened to the
call (``ok | failed | cancelled | compensated``: committed and later undone); ``committed`` is
whether the write persisted at any point (a call that timed out may still have committed:
that is how retries duplicate bookings); ``compensates`` names the call a compensating call
undoes; ``delivered_ns`` is when the result was announced to the user (start of the
announcement's playback) and ``delivered_task_version`` the task version current at that
moment, as the driver saw it.

``final-state.json``: the system's business state as one free JSON object, plus an optional
``_meta`` object (``exported_ns``, ``source``) that is never compared.

Ledger conventions read here (see DESIGN.md for the event vocabulary):

- ``user.speech_started`` / ``user.speech_stopped`` (scenario truth) name the segment in
  ``data.segment_id`` (or use the segment id as ``utterance_id``);
- ``task.state`` carries ``task_id`` and ``data.version`` (int), ``data.fields`` (the task's
  parameters at that version), optionally ``data.status`` (``cancelled``, ``superseded``, ...)
  and ``data.action``;
- ``asr.final`` has ``data.text`` and the ``utterance_id`` it transcribes; ``turn.decision``
  has ``data.action`` and the ``utterance_id`` it is about; ``response.created`` names the
  ``utterance_id`` it answers; ``tool.requested``/``tool.completed`` carry ``data.call_id``,
  ``task_id`` and the ``response_id`` that issued the call; these utterance ids are the
  agent's own (a live agent never sees the scenario's segment ids): the causal slices link
  them to the scenario segments by id or by time overlap (``UtteranceLinks``);
- ``session.disconnected`` / ``session.resumed`` may carry a business-state snapshot in
  ``data.state``.

Every check returns a ``TaskCheck`` whose ``passed`` is True, False, or None (not applicable,
or applicable but ``unscored`` because the evidence it needs is missing: such sessions are
counted apart, never scored as failures). ``score_task`` runs them all; ``aggregate_tasks``
pools sessions with Wilson intervals; ``task_failure_slice`` walks back from a failure to the
input that caused it and names the layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.business import (
    ToolAudit,
    load_final_state,
    load_tool_audit,
)
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.stats.intervals import wilson_interval
from voxassay.suites.duplex.scoring.checks_side_effects import (
    check_cancellation,
    check_compensation,
    check_duplicate_side_effects,
    check_write_after_stop,
)
from voxassay.suites.duplex.scoring.checks_task import (
    check_delivery_correctness,
    check_goal_completion,
    check_parameter_consistency,
    check_reconnect_consistency,
    check_stale_results,
    check_tool_choice,
)
from voxassay.suites.duplex.scoring.task_context import (
    TASK_METRICS_VERSION,
    TaskCheck,
    TaskContext,
    TaskResult,
)

__all__ = [
    "CHECKS",
    "COUNT_NAMES",
    "MATRIX_RATE_NAMES",
    "aggregate_tasks",
    "score_bundle",
    "score_task",
]


# --------------------------------------------------------------------------- file formats


# --------------------------------------------------------------------------- value normalization


# --------------------------------------------------------------------------- results


# --------------------------------------------------------------------------- session context


# --------------------------------------------------------------------------- checks


CHECKS: dict[str, Callable[[TaskContext], TaskCheck]] = {
    "goal_completion": check_goal_completion,
    "parameter_consistency": check_parameter_consistency,
    "tool_choice": check_tool_choice,
    "duplicate_side_effects": check_duplicate_side_effects,
    "cancellation": check_cancellation,
    "compensation": check_compensation,
    "stale_result_interception": check_stale_results,
    "delivery_correctness": check_delivery_correctness,
    "reconnect_consistency": check_reconnect_consistency,
    "write_after_stop": check_write_after_stop,
}
"""Every task check, in report order."""


def score_task(
    scenario: Scenario,
    final_state: Mapping[str, Any] | None,
    tool_audit: ToolAudit | None,
    events: Iterable[Event] | None,
    *,
    required_tools: Sequence[str] | None = None,
) -> TaskResult:
    """Run every check of ``CHECKS`` on one session (inapplicable ones report passed=None)."""
    ctx = TaskContext.build(scenario, final_state, tool_audit, events)
    checks = []
    for name, fn in CHECKS.items():
        if name == "tool_choice":
            checks.append(check_tool_choice(ctx, required_tools))
        else:
            checks.append(fn(ctx))
    by_name = {c.name: c for c in checks}

    def count(name: str) -> int | None:
        c = by_name[name]
        if c.passed is None:
            return None if c.unscored or ctx.audit is None else 0
        return int(c.value)

    return TaskResult(
        scenario_id=scenario.id,
        session_id=tool_audit.session_id if tool_audit else _session_of(ctx.events),
        checks=checks,
        duplicate_side_effects=count("duplicate_side_effects"),
        stale_deliveries=count("stale_result_interception"),
        writes_after_stop=count("write_after_stop"),
    )


def _session_of(events: Sequence[Event]) -> str | None:
    return events[0].session_id if events else None


def score_bundle(folder: str | Path, scenario: Scenario | None = None) -> TaskResult:
    """``score_task`` on a bundle folder (``scenario.yaml``, ``final-state.json``,
    ``tool-audit.json``, ``events.jsonl``; the last three are optional)."""
    from voxassay.suites.duplex.evidence.ledger import iter_valid_events
    from voxassay.suites.duplex.evidence.validate import load_scenario

    root = Path(folder)
    sc = scenario if scenario is not None else load_scenario(root / "scenario.yaml")
    state = None
    if (root / "final-state.json").is_file():
        state, _ = load_final_state(root / "final-state.json")
    audit = (
        load_tool_audit(root / "tool-audit.json") if (root / "tool-audit.json").is_file() else None
    )
    events = (
        list(iter_valid_events(root / "events.jsonl")) if (root / "events.jsonl").is_file() else []
    )
    return score_task(sc, state, audit, events)


# --------------------------------------------------------------------------- aggregation

MATRIX_RATE_NAMES = (
    "grounded_completion",
    "parameter_consistency",
    "cancellation_success",
    "reconnect_consistency",
)
"""Acceptance-matrix names of check rates listed under ``metrics`` (each resolves to its check
through the catalogue's aliases)."""
COUNT_NAMES = ("duplicate_side_effects", "stale_deliveries", "writes_after_stop")
"""The side-effect counts summed over sessions (catalogue kind ``count``)."""


def _check_of(name: str) -> str:
    m = catalogue.get(name)
    if m is None or m.kind != "check":
        raise KeyError(f"{name!r} is not a task check of the metric catalogue")
    return m.name


def aggregate_tasks(results: Sequence[TaskResult]) -> dict[str, Any]:
    """Pool sessions: per check, rate = sessions passed / sessions scored, with a Wilson 95 %
    interval. Denominator n = sessions where the check applies and was scored;
    ``not_applicable`` and ``unscored`` are counted apart, never as failures. ``all_checks``:
    sessions whose every scored check passed / sessions with at least one scored check.
    Counts: duplicate side effects, stale deliveries and writes after stop summed over the
    sessions that have a tool audit (``sessions_counted``).
    """
    checks: dict[str, dict[str, Any]] = {}
    for name in CHECKS:
        rows = [r.check(name) for r in results if any(c.name == name for c in r.checks)]
        scored = [c for c in rows if c.passed is not None]
        k = sum(1 for c in scored if c.passed)
        n = len(scored)
        lo, hi = wilson_interval(k, n)
        checks[name] = {
            "n": n,
            "passed": k,
            "failed": n - k,
            "rate": k / n if n else None,
            "ci_low": lo if n else None,
            "ci_high": hi if n else None,
            "not_applicable": sum(1 for c in rows if c.passed is None and not c.unscored),
            "unscored": sum(1 for c in rows if c.unscored),
        }
    overall = [r.passed for r in results if r.passed is not None]
    k_all = sum(1 for p in overall if p)
    lo, hi = wilson_interval(k_all, len(overall))

    def total(attr: str) -> dict[str, Any]:
        values = [getattr(r, attr) for r in results]
        counted = [v for v in values if v is not None]
        return {
            "total": sum(counted),
            "sessions_with_any": sum(1 for v in counted if v > 0),
            "sessions_counted": len(counted),
        }

    counts = {
        "duplicate_side_effects": total("duplicate_side_effects"),
        "stale_deliveries": total("stale_deliveries"),
        "writes_after_stop": total("writes_after_stop"),
    }
    metrics: dict[str, Any] = {
        alias: checks[_check_of(alias)]["rate"] for alias in MATRIX_RATE_NAMES
    }
    metrics.update({k: v["total"] for k, v in counts.items()})
    return {
        "metrics_version": TASK_METRICS_VERSION,
        "sessions": len(results),
        "checks": checks,
        "all_checks": {
            "n": len(overall),
            "passed": k_all,
            "rate": k_all / len(overall) if overall else None,
            "ci_low": lo if overall else None,
            "ci_high": hi if overall else None,
        },
        "counts": counts,
        "metrics": metrics,
    }


# --------------------------------------------------------------------------- causal slice


# --------------------------------------------------------------------------- utterance links
