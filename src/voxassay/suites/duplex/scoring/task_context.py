"""What every task check reads: the session's scenario, final state, tool audit and ledger pulled into one ``TaskContext`` (onsets of stops, changes and corrections, task states), and the check and session results (``TaskCheck``, ``TaskResult``)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from voxassay.contracts.duplex.business import (
    META_KEY,
    CallStatus,
    ToolAudit,
    ToolCall,
)
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.scenario import Scenario, Segment, Tool
from voxassay.contracts.duplex.vocabulary import Intent, Role, TaskAction
from voxassay.suites.duplex.evidence.ledger import order_by_causality, producer_clocks, session_ns

__all__ = ["TASK_METRICS_VERSION", "Onset", "TaskCheck", "TaskContext", "TaskResult", "TaskState"]


TASK_METRICS_VERSION = 1


@dataclass
class TaskCheck:
    """One check of one session.

    ``passed``: True / False, or None when the check does not apply (or cannot be scored:
    then ``unscored`` is True and ``reason`` names the missing evidence). ``evidence`` lists
    ledger event ids and tool call ids; ``details`` holds what ``task_failure_slice`` needs.
    """

    name: str
    passed: bool | None
    value: Any = None
    expected: Any = None
    evidence: list[str] = field(default_factory=list)
    reason: str = ""
    unscored: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def applicable(self) -> bool:
        return self.passed is not None or self.unscored

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "value": _plain(self.value),
            "expected": _plain(self.expected),
            "evidence": list(self.evidence),
            "reason": self.reason,
            "unscored": self.unscored,
            "details": _plain(self.details),
        }


@dataclass
class TaskResult:
    """Every task check of one session, plus the counts that are summed across sessions."""

    scenario_id: str
    session_id: str | None
    checks: list[TaskCheck]
    duplicate_side_effects: int | None = None
    stale_deliveries: int | None = None
    writes_after_stop: int | None = None
    metrics_version: int = TASK_METRICS_VERSION

    def check(self, name: str) -> TaskCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def failures(self) -> list[TaskCheck]:
        return [c for c in self.checks if c.passed is False]

    @property
    def passed(self) -> bool | None:
        """All scored checks passed (None: no check was scored)."""
        scored = [c.passed for c in self.checks if c.passed is not None]
        return all(scored) if scored else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "session_id": self.session_id,
            "metrics_version": self.metrics_version,
            "passed": self.passed,
            "duplicate_side_effects": self.duplicate_side_effects,
            "stale_deliveries": self.stale_deliveries,
            "writes_after_stop": self.writes_after_stop,
            "checks": [c.to_dict() for c in self.checks],
        }


def _plain(x: Any) -> Any:
    if isinstance(x, StrEnum):
        return str(x)
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_plain(v) for v in x]
    if isinstance(x, dt.date | dt.datetime):
        return x.isoformat()
    return x


def _na(name: str, reason: str) -> TaskCheck:
    return TaskCheck(name, None, reason=f"not applicable: {reason}")


def _unscored(name: str, reason: str) -> TaskCheck:
    return TaskCheck(name, None, reason=f"unscored: {reason}", unscored=True)


def call_summary(c: ToolCall) -> dict[str, Any]:
    return {
        "call_id": c.call_id,
        "tool": c.tool,
        "arguments": c.arguments,
        "idempotency_key": c.idempotency_key,
        "task_id": c.task_id,
        "task_version": c.task_version,
        "response_id": c.response_id,
        "requested_ns": c.requested_ns,
        "completed_ns": c.completed_ns,
        "committed": c.committed,
        "compensates": c.compensates,
        "delivered_ns": c.delivered_ns,
        "delivered_task_version": c.delivered_task_version,
        "delivered_response_id": c.delivered_response_id,
    }


@dataclass(frozen=True)
class Onset:
    """A moment of the conversation that changes what the task may do.

    ``kind``: ``stop`` (cancel/interrupt: no writes from here), ``correction`` (a parameter
    changed) or ``change`` (any change of the task: correction, cancel, compensate, topic
    change). ``ns`` is the onset on the session clock (None when the ledger does not show it);
    ``end_ns`` the end of the user's speech when known.
    """

    kind: str
    ns: int | None
    source: Literal["scenario", "task.state"]
    segment_id: str | None = None
    utterance_id: str | None = None
    event_id: str | None = None
    end_ns: int | None = None
    task_id: str | None = None
    say: str | None = None
    expected_actions: tuple[str, ...] = ()
    until_ns: int | None = None
    """For a stop: when a later request re-authorized writes (None: to the end)."""

    @property
    def settled_ns(self) -> int | None:
        """When the change is fully expressed: end of speech if known, else the onset."""
        return self.end_ns if self.end_ns is not None else self.ns

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ns": self.ns,
            "end_ns": self.end_ns,
            "until_ns": self.until_ns,
            "source": self.source,
            "segment_id": self.segment_id,
            "utterance_id": self.utterance_id,
            "event_id": self.event_id,
            "task_id": self.task_id,
            "say": self.say,
            "expected_actions": list(self.expected_actions),
        }


@dataclass(frozen=True)
class TaskState:
    """One ``task.state`` event."""

    task_id: str | None
    ns: int
    version: int | None
    fields: dict[str, Any]
    status: str | None
    action: str | None
    event_id: str
    utterance_id: str | None

    @property
    def is_cancel(self) -> bool:
        return (self.status or "").casefold() in {"cancelled", "canceled"} or (
            self.action or ""
        ).casefold() == "cancel"


_STOP_ACTIONS = {TaskAction.CANCEL, TaskAction.COMPENSATE}


GO_ACTIONS = {TaskAction.KEEP, TaskAction.MODIFY}


_CHANGE_ACTIONS = {TaskAction.MODIFY, TaskAction.CANCEL, TaskAction.COMPENSATE}


def is_stop(seg: Segment) -> bool:
    """Cancel intent, a cancel/compensate task action, or an interruption that is not a
    correction and does not keep or modify the task."""
    if seg.role is not Role.USER:
        return False
    if Intent.CANCEL in seg.intents or seg.expected_task_action in _STOP_ACTIONS:
        return True
    return (
        Intent.INTERRUPT in seg.intents
        and Intent.CORRECTION not in seg.intents
        and seg.expected_task_action is None
    )


def _reauthorizes(seg: Segment) -> bool:
    """A new or changed request after a stop: writes are allowed again from its onset."""
    if seg.role is not Role.USER or is_stop(seg):
        return False
    return seg.expected_task_action in GO_ACTIONS or bool(
        {Intent.START, Intent.CORRECTION} & set(seg.intents)
    )


def is_correction(seg: Segment) -> bool:
    return seg.role is Role.USER and (
        Intent.CORRECTION in seg.intents or seg.expected_task_action is TaskAction.MODIFY
    )


def _is_change(seg: Segment) -> bool:
    return is_correction(seg) or (
        seg.role is Role.USER and seg.expected_task_action in _CHANGE_ACTIONS
    )


@dataclass
class TaskContext:
    """Everything the checks read, indexed once: the scenario, the final state (without
    ``_meta``), the tool audit, the ledger in causal order with session-clock times."""

    scenario: Scenario
    final_state: dict[str, Any] | None
    audit: ToolAudit | None
    events: list[Event]
    time_ns: dict[str, int]
    seg_start: dict[str, Event]
    seg_stop: dict[str, Event]
    states: dict[str | None, list[TaskState]]

    @classmethod
    def build(
        cls,
        scenario: Scenario,
        final_state: Mapping[str, Any] | None,
        tool_audit: ToolAudit | None,
        events: Iterable[Event] | None,
    ) -> TaskContext:
        evs = order_by_causality(events or [])
        clocks = producer_clocks(evs)
        times = {e.event_id: session_ns(e, clocks) for e in evs}
        seg_ids = {s.id for s in scenario.segments}
        seg_start: dict[str, Event] = {}
        utt_to_seg: dict[str, str] = {}
        for e in evs:
            if e.event_type != "user.speech_started":
                continue
            sid = e.data.get("segment_id")
            if not isinstance(sid, str):
                sid = e.utterance_id if e.utterance_id in seg_ids else None
            if sid in seg_ids and sid not in seg_start:
                seg_start[sid] = e
                if e.utterance_id:
                    utt_to_seg[e.utterance_id] = sid
        seg_stop: dict[str, Event] = {}
        for e in evs:
            if e.event_type != "user.speech_stopped":
                continue
            sid = e.data.get("segment_id")
            if not isinstance(sid, str):
                sid = utt_to_seg.get(e.utterance_id or "")
            if sid in seg_ids and sid not in seg_stop:
                seg_stop[sid] = e
        states: dict[str | None, list[TaskState]] = defaultdict(list)
        for e in evs:
            if e.event_type != "task.state":
                continue
            version = e.data.get("version")
            fields = e.data.get("fields")
            status, action = e.data.get("status"), e.data.get("action")
            states[e.task_id].append(
                TaskState(
                    task_id=e.task_id,
                    ns=times[e.event_id],
                    version=version if isinstance(version, int) else None,
                    fields=dict(fields) if isinstance(fields, Mapping) else {},
                    status=status if isinstance(status, str) else None,
                    action=action if isinstance(action, str) else None,
                    event_id=e.event_id,
                    utterance_id=e.utterance_id,
                )
            )
        for lst in states.values():
            lst.sort(key=lambda s: s.ns)
        state = None
        if final_state is not None:
            state = {k: v for k, v in final_state.items() if k != META_KEY}
        return cls(scenario, state, tool_audit, evs, times, seg_start, seg_stop, dict(states))

    # -- helpers

    @property
    def calls(self) -> list[ToolCall]:
        return list(self.audit.calls) if self.audit else []

    def t(self, event: Event) -> int:
        return self.time_ns[event.event_id]

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.scenario.tools if t.name == name), None)

    def user_segments(self) -> list[Segment]:
        return [s for s in self.scenario.segments if s.role is Role.USER]

    def onset_of(self, seg: Segment, kind: str) -> Onset:
        start = self.seg_start.get(seg.id)
        stop = self.seg_stop.get(seg.id)
        return Onset(
            kind=kind,
            ns=self.t(start) if start else None,
            source="scenario",
            segment_id=seg.id,
            utterance_id=(start.utterance_id or seg.id) if start else None,
            event_id=start.event_id if start else None,
            end_ns=self.t(stop) if stop else None,
            say=seg.say,
            expected_actions=tuple(str(a) for a in seg.expected_actions),
        )

    def stops(self) -> list[Onset]:
        """Stop onsets: scenario stop segments (time from ``user.speech_started``) and
        ``task.state`` cancel events, each with the time writes are allowed again: the onset
        of the next re-authorizing user segment, or for a ``task.state`` cancel also a later,
        higher version of that task that is not cancelled."""
        out: list[Onset] = []
        go_times = sorted(
            self.t(self.seg_start[s.id])
            for s in self.user_segments()
            if _reauthorizes(s) and s.id in self.seg_start
        )
        for seg in self.user_segments():
            if not is_stop(seg):
                continue
            base = self.onset_of(seg, "stop")
            until = None
            if base.ns is not None:
                until = next((g for g in go_times if g > base.ns), None)
            out.append(replace(base, until_ns=until))
        for task_id, lst in self.states.items():
            for i, s in enumerate(lst):
                if not s.is_cancel:
                    continue
                ends = [
                    later.ns
                    for later in lst[i + 1 :]
                    if not later.is_cancel and (later.version or 0) > (s.version or 0)
                ]
                ends += [g for g in go_times if g > s.ns]
                until = min(ends) if ends else None
                out.append(
                    Onset(
                        kind="stop",
                        ns=s.ns,
                        source="task.state",
                        utterance_id=s.utterance_id,
                        event_id=s.event_id,
                        task_id=task_id,
                        until_ns=until,
                    )
                )
        return out

    def changes(self) -> list[Onset]:
        """Scenario segments that change the task (correction, cancel, compensate, modify)."""
        return [self.onset_of(s, "change") for s in self.user_segments() if _is_change(s)]

    def compensators(self, call: ToolCall) -> list[ToolCall]:
        return [c for c in self.calls if c.compensates == call.call_id]

    def compensated(self, call: ToolCall) -> bool:
        """A committed compensating call undoes ``call``."""
        return any(c.committed for c in self.compensators(call))

    def standing(self, call: ToolCall) -> bool:
        """A committed write, not itself a compensation, not undone at the end."""
        return (
            call.is_write
            and call.compensates is None
            and call.status is not CallStatus.COMPENSATED
            and not self.compensated(call)
        )

    def version_at(self, task_id: str | None, t: int, call: ToolCall | None = None) -> int | None:
        """The task's latest version known at ``t``: task.state versions, versions of calls
        requested by then, and the call's own ``delivered_task_version``."""
        vs = [
            s.version for s in self.states.get(task_id, []) if s.version is not None and s.ns <= t
        ]
        vs += [
            c.task_version
            for c in self.calls
            if c.task_id == task_id and c.task_version is not None and c.requested_ns <= t
        ]
        if call is not None and call.delivered_task_version is not None:
            vs.append(call.delivered_task_version)
        return max(vs) if vs else None

    def final_version(self, task_id: str | None) -> int | None:
        vs = [s.version for s in self.states.get(task_id, []) if s.version is not None]
        for c in self.calls:
            if c.task_id == task_id:
                vs += [v for v in (c.task_version, c.delivered_task_version) if v is not None]
        return max(vs) if vs else None
