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

import datetime as dt
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from voxeval.contracts.duplex import catalogue
from voxeval.contracts.duplex.event import Event
from voxeval.contracts.duplex.scenario import Scenario, Segment, Tool
from voxeval.contracts.duplex.vocabulary import Intent, Role, TaskAction
from voxeval.core.errors import InputError
from voxeval.stats.intervals import wilson_interval
from voxeval.suites.duplex.evidence.ledger import order_by_causality, producer_clocks, session_ns

__all__ = [
    "CHECKS",
    "COUNT_NAMES",
    "FINAL_STATE_SCHEMA_VERSION",
    "MATRIX_RATE_NAMES",
    "META_KEY",
    "TASK_METRICS_VERSION",
    "TOOL_AUDIT_SCHEMA_VERSION",
    "UNKNOWN_ROOT_CAUSE",
    "CallStatus",
    "CorrectedField",
    "FinalStateMeta",
    "Onset",
    "TaskCheck",
    "TaskContext",
    "TaskResult",
    "ToolAudit",
    "ToolCall",
    "UtteranceLink",
    "UtteranceLinks",
    "aggregate_tasks",
    "check_cancellation",
    "check_compensation",
    "check_delivery_correctness",
    "check_duplicate_side_effects",
    "check_goal_completion",
    "check_parameter_consistency",
    "check_reconnect_consistency",
    "check_stale_results",
    "check_tool_choice",
    "check_write_after_stop",
    "corrected_fields",
    "export_task_schemas",
    "load_final_state",
    "load_tool_audit",
    "normalize_value",
    "score_bundle",
    "score_task",
    "task_failure_slice",
    "task_json_schema",
    "text_mentions",
    "values_equal",
]

TOOL_AUDIT_SCHEMA_VERSION = 1
FINAL_STATE_SCHEMA_VERSION = 1
TASK_METRICS_VERSION = 1
META_KEY = "_meta"


# --------------------------------------------------------------------------- file formats


class CallStatus(StrEnum):
    """What happened to a tool call."""

    OK = "ok"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPENSATED = "compensated"
    """Committed, then undone by a compensating call."""


class ToolCall(BaseModel):
    """One tool call of ``tool-audit.json``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    call_id: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = None
    task_id: str | None = None
    task_version: int | None = Field(default=None, ge=0)
    """The task version the call was made for."""
    response_id: str | None = None
    """The response that issued the call (links the call to the ledger)."""
    requested_ns: int
    completed_ns: int | None = None
    status: CallStatus
    side_effect: bool = False
    """The call writes (booking, payment); reads are false."""
    committed: bool = False
    """The write persisted at some point (even if the call reported failure or was undone)."""
    result: Any = None
    error: str | None = None
    compensates: str | None = None
    """call_id of the committed call this call undoes (a cancellation, a refund)."""
    delivered_ns: int | None = None
    """When the result was announced to the user (None: never announced)."""
    delivered_task_version: int | None = Field(default=None, ge=0)
    """The task version current when the result was announced."""
    delivered_response_id: str | None = None
    """The response whose playback announced the result."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Anything else the producer wants to keep (never scored)."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = []
        if self.completed_ns is not None and self.completed_ns < self.requested_ns:
            problems.append("completed_ns is before requested_ns")
        if self.delivered_ns is not None:
            if self.delivered_ns < self.requested_ns:
                problems.append("delivered_ns is before requested_ns")
            if self.completed_ns is not None and self.delivered_ns < self.completed_ns:
                problems.append("delivered_ns is before completed_ns")
        if self.delivered_task_version is not None and self.delivered_ns is None:
            problems.append("delivered_task_version without delivered_ns")
        if self.committed and not self.side_effect:
            problems.append("committed is only meaningful for a side_effect call")
        if self.status is CallStatus.COMPENSATED and not self.committed:
            problems.append("status compensated needs committed: true (only a write is undone)")
        if self.compensates == self.call_id:
            problems.append("a call cannot compensate itself")
        if problems:
            raise ValueError(f"call {self.call_id!r}: " + "; ".join(problems))
        return self

    @property
    def commit_ns(self) -> int:
        """When the write took effect: completion, else the request."""
        return self.completed_ns if self.completed_ns is not None else self.requested_ns

    @property
    def is_write(self) -> bool:
        return self.committed and self.side_effect


class ToolAudit(BaseModel):
    """``tool-audit.json``: every tool call of one session."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: int = Field(default=TOOL_AUDIT_SCHEMA_VERSION, ge=1)
    session_id: str = Field(min_length=1)
    calls: list[ToolCall] = Field(default_factory=list)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > TOOL_AUDIT_SCHEMA_VERSION:
            raise ValueError(
                f"tool-audit schema_version {value} is newer than this voxeval reads "
                f"({TOOL_AUDIT_SCHEMA_VERSION})"
            )
        return value

    @model_validator(mode="after")
    def _references(self) -> Self:
        seen: set[str] = set()
        problems = []
        for call in self.calls:
            if call.call_id in seen:
                problems.append(f"duplicate call_id {call.call_id!r}")
            seen.add(call.call_id)
        for call in self.calls:
            if call.compensates is not None and call.compensates not in seen:
                problems.append(
                    f"call {call.call_id!r} compensates unknown call {call.compensates!r}"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def call(self, call_id: str) -> ToolCall:
        for c in self.calls:
            if c.call_id == call_id:
                return c
        raise KeyError(call_id)


class FinalStateMeta(BaseModel):
    """``_meta`` of ``final-state.json`` (never compared with the truth)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    exported_ns: int | None = None
    """Session-clock time of the export."""
    source: str | None = None
    """Where the state came from: reference-sqlite, a probe command or URL, ..."""


TaskSchemaKind = Literal["tool-audit", "final-state"]


def task_json_schema(kind: TaskSchemaKind) -> dict[str, Any]:
    """JSON Schema of ``tool-audit.json`` or ``final-state.json`` with a versioned ``$id``.

    Cross-field rules (unique call ids, ``compensates`` naming a call, times in order) are
    enforced by the pydantic models, not the schema.
    """
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if kind == "tool-audit":
        body = ToolAudit.model_json_schema()
        body.pop("title", None)
        return {
            **head,
            "$id": f"urn:voxeval:duplex:tool-audit:v{TOOL_AUDIT_SCHEMA_VERSION}",
            "title": "voxeval full-duplex tool audit (every tool call of a session)",
            **body,
        }
    if kind == "final-state":
        meta = FinalStateMeta.model_json_schema()
        meta.pop("title", None)
        return {
            **head,
            "$id": f"urn:voxeval:duplex:final-state:v{FINAL_STATE_SCHEMA_VERSION}",
            "title": "voxeval full-duplex final business state (free object, optional _meta)",
            "type": "object",
            "properties": {META_KEY: meta},
            "additionalProperties": True,
        }
    raise ValueError(f"unknown task schema kind {kind!r} (tool-audit, final-state)")


def export_task_schemas(out_dir: Path) -> list[Path]:
    """Write ``tool-audit.json`` and ``final-state.json`` schemas into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    kinds: tuple[TaskSchemaKind, ...] = ("tool-audit", "final-state")
    for kind in kinds:
        path = out_dir / f"{kind}.json"
        text = json.dumps(task_json_schema(kind), indent=2, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def load_tool_audit(path: str | Path) -> ToolAudit:
    """Read ``tool-audit.json``; ``InputError`` naming the file and fields when invalid."""
    try:
        return ToolAudit.model_validate_json(Path(path).read_bytes())
    except ValidationError as exc:
        raise InputError(f"{path}: invalid tool audit: {_errors_text(exc)}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read tool audit: {exc}") from None


def load_final_state(path: str | Path) -> tuple[dict[str, Any], FinalStateMeta | None]:
    """Read ``final-state.json``: (the state without ``_meta``, the ``_meta`` or None)."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read final state: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: final state must be a JSON object")
    raw_meta = data.pop(META_KEY, None)
    meta = None
    if raw_meta is not None:
        try:
            meta = FinalStateMeta.model_validate(raw_meta)
        except ValidationError as exc:
            raise InputError(f"{path}: invalid {META_KEY}: {_errors_text(exc)}") from None
    return data, meta


def _errors_text(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    )


# --------------------------------------------------------------------------- value normalization

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _number_text(d: Decimal) -> str:
    if d.is_finite() and d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def normalize_value(value: Any) -> Any:
    """A canonical form for comparing business values.

    Numbers (and numeric strings) become their shortest decimal text (``10``, ``10.0`` and
    ``"10"`` are equal; ``"10.50"`` equals ``10.5``); dates and datetimes (objects or ISO
    text) become ISO text, aware datetimes in UTC; other strings are stripped and casefolded;
    booleans become ``"true"``/``"false"``; mappings and lists are normalized item by item.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        try:
            return _number_text(Decimal(str(value)))
        except InvalidOperation:
            return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text):
            try:
                return _number_text(Decimal(text))
            except InvalidOperation:
                pass
        if _ISO_DATE.match(text):
            return text
        if _ISO_DATETIME.match(text):
            try:
                return normalize_value(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
            except ValueError:
                pass
        return text.casefold()
    if isinstance(value, Mapping):
        return {str(k): normalize_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    return str(value)


def values_equal(a: Any, b: Any) -> bool:
    """``normalize_value(a) == normalize_value(b)``."""
    return bool(normalize_value(a) == normalize_value(b))


def _canonical(value: Any) -> str:
    return json.dumps(normalize_value(value), sort_keys=True, ensure_ascii=False)


def _same_field(a: str, b: str) -> bool:
    """Field names that denote the same parameter: equal, or one is the other with a prefix
    ending in ``_`` (``final_date`` ~ ``date``, ``new_date`` ~ ``date``)."""
    a, b = a.casefold(), b.casefold()
    return a == b or a.endswith("_" + b) or b.endswith("_" + a)


_SMALL_ORDINALS = [
    "zeroth",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
]
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


def _ordinal_word(n: int) -> str:
    if n < 20:
        return _SMALL_ORDINALS[n]
    tens, unit = divmod(n, 10)
    tens_word = {2: "twenty", 3: "thirty"}[tens]
    if unit == 0:
        return tens_word[:-1] + "ieth"
    return f"{tens_word} {_SMALL_ORDINALS[unit]}"


def _ordinal_digits(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _words(text: str) -> str:
    return " " + re.sub(r"[^0-9a-z]+", " ", text.casefold()).strip() + " "


def _mention_forms(value: Any) -> list[str]:
    norm = normalize_value(value)
    if not isinstance(norm, str):
        return [_canonical(norm)]
    forms = [norm]
    if _ISO_DATE.match(norm[:10]):
        month, day = int(norm[5:7]), int(norm[8:10])
        if 1 <= month <= 12 and 1 <= day <= 31:
            name = _MONTHS[month - 1]
            forms += [_ordinal_digits(day), _ordinal_word(day), f"{name} {day}", f"{day} {name}"]
    return forms


def text_mentions(text: str, value: Any) -> bool:
    """Whether ``text`` says ``value``: its normalized text as whole words, or for a date its
    day as an ordinal (``10th``, ``tenth``) or with the month name (``august 10``)."""
    haystack = _words(text)
    return any(_words(form) in haystack for form in _mention_forms(value) if _words(form).strip())


# --------------------------------------------------------------------------- results


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


def _call_summary(c: ToolCall) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- session context


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
_GO_ACTIONS = {TaskAction.KEEP, TaskAction.MODIFY}
_CHANGE_ACTIONS = {TaskAction.MODIFY, TaskAction.CANCEL, TaskAction.COMPENSATE}


def _is_stop(seg: Segment) -> bool:
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
    if seg.role is not Role.USER or _is_stop(seg):
        return False
    return seg.expected_task_action in _GO_ACTIONS or bool(
        {Intent.START, Intent.CORRECTION} & set(seg.intents)
    )


def _is_correction(seg: Segment) -> bool:
    return seg.role is Role.USER and (
        Intent.CORRECTION in seg.intents or seg.expected_task_action is TaskAction.MODIFY
    )


def _is_change(seg: Segment) -> bool:
    return _is_correction(seg) or (
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
            if not _is_stop(seg):
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


# --------------------------------------------------------------------------- checks


def check_goal_completion(ctx: TaskContext) -> TaskCheck:
    """Goal completion: the final state holds every key of ``expected_final_state``.

    value = matched keys / expected keys (values compared after ``normalize_value``; a
    missing key fails); passed = every key matches. Applies when the truth names at least one
    key; unscored without ``final-state.json``. Session denominator: sessions whose scenario
    has a non-empty expected final state.
    """
    name = "goal_completion"
    expected = ctx.scenario.business_truth.expected_final_state
    if not expected:
        return _na(name, "the scenario's expected_final_state is empty")
    if ctx.final_state is None:
        return _unscored(name, "no final-state.json")
    mismatches: dict[str, dict[str, Any]] = {}
    for key, want in expected.items():
        found, got = _lookup(ctx.final_state, key)
        if not found:
            mismatches[key] = {"expected": want, "got": None, "missing": True}
        elif not values_equal(got, want):
            mismatches[key] = {"expected": want, "got": got, "missing": False}
    matched = len(expected) - len(mismatches)
    writes = [c for c in ctx.calls if ctx.standing(c)]
    related = [
        c for c in writes if any(_same_field(k, a) for k in mismatches for a in c.arguments)
    ] or writes
    reason = (
        f"{matched}/{len(expected)} keys match"
        if not mismatches
        else "; ".join(
            f"{k}: missing"
            if m["missing"]
            else f"{k}: got {m['got']!r}, expected {m['expected']!r}"
            for k, m in mismatches.items()
        )
    )
    details: dict[str, Any] = {"mismatches": mismatches}
    if mismatches:
        details["calls"] = [_call_summary(c) for c in related]
        details["expected_values"] = {k: m["expected"] for k, m in mismatches.items()}
        details["trigger"] = _goal_trigger(ctx)
    return TaskCheck(
        name,
        not mismatches,
        value=matched / len(expected),
        expected=expected,
        evidence=[c.call_id for c in related] if mismatches else [],
        reason=reason,
        details=details,
    )


def _goal_trigger(ctx: TaskContext) -> dict[str, Any] | None:
    """The user input the final state depends on most: the last stop, else the last
    correction, else the first request."""
    segs = ctx.user_segments()
    for pick, kind in ((_is_stop, "stop"), (_is_correction, "correction")):
        chosen = [s for s in segs if pick(s)]
        if chosen:
            return ctx.onset_of(chosen[-1], kind).to_dict()
    return ctx.onset_of(segs[0], "request").to_dict() if segs else None


def _lookup(state: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    if key in state:
        return True, state[key]
    cur: Any = state
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


@dataclass(frozen=True)
class CorrectedField:
    """A corrected task field, its latest value, where that came from, and when."""

    field: str
    value: Any
    source: Literal["scenario", "task.state"]
    onset: Onset | None
    task_id: str | None = None


def corrected_fields(ctx: TaskContext) -> list[CorrectedField]:
    """Fields the user corrected, with their latest value.

    From the scenario: when a user segment is a correction (intent ``correction`` or task
    action ``modify``), every key of ``expected_final_state`` holds the latest value (the
    truth is written after all corrections). From the ledger: a ``task.state`` field whose
    value changed between versions; its latest value is the one at the highest version. The
    scenario wins where both name the same field (the agent's own state may be wrong).
    """
    out: list[CorrectedField] = []
    corrections = [s for s in ctx.user_segments() if _is_correction(s)]
    if corrections:
        onset = ctx.onset_of(corrections[-1], "correction")
        for key, value in ctx.scenario.business_truth.expected_final_state.items():
            out.append(CorrectedField(key, value, "scenario", onset))
    for task_id, lst in ctx.states.items():
        versioned = sorted(
            (s for s in lst if s.version is not None), key=lambda s: (s.version or 0, s.ns)
        )
        current: dict[str, tuple[Any, TaskState]] = {}
        changed: set[str] = set()
        for s in versioned:
            for key, value in s.fields.items():
                if key in current and not values_equal(current[key][0], value):
                    changed.add(key)
                if key not in current or not values_equal(current[key][0], value):
                    current[key] = (value, s)
        for key in sorted(changed):
            if any(_same_field(key, c.field) for c in out if c.source == "scenario"):
                continue
            value, s = current[key]
            onset = Onset(
                kind="correction",
                ns=s.ns,
                source="task.state",
                utterance_id=s.utterance_id,
                event_id=s.event_id,
                task_id=task_id,
            )
            out.append(CorrectedField(key, value, "task.state", onset, task_id))
    return out


def check_parameter_consistency(ctx: TaskContext) -> TaskCheck:
    """Parameter consistency: corrected fields hold their latest value everywhere it lands.

    For each corrected field (``corrected_fields``): the final state's matching key (exact, or
    ``_``-prefixed like ``final_date`` ~ ``date``) and every matching argument of the
    committed writes that stand at the end, restricted to the last standing write per
    (task, tool) plus every standing write requested after the correction (an earlier write
    that a later one replaced is not counted). value = comparisons that differ from the
    latest value; passed = none differ. Applies when a field was corrected; unscored when
    nothing carries the field. Denominator: sessions with a correction.
    """
    name = "parameter_consistency"
    fields_ = corrected_fields(ctx)
    if not fields_:
        return _na(name, "no field was corrected (no correction segment, no task.state change)")
    if ctx.audit is None and ctx.final_state is None:
        return _unscored(name, "neither tool-audit.json nor final-state.json")
    standing = [c for c in ctx.calls if ctx.standing(c)]
    last_per: dict[tuple[str | None, str], ToolCall] = {}
    for c in sorted(standing, key=lambda c: (c.commit_ns, c.requested_ns)):
        last_per[(c.task_id, c.tool)] = c
    mismatches: list[dict[str, Any]] = []
    failing: dict[str, ToolCall] = {}
    compared = 0
    evidence: list[str] = []
    for f in fields_:
        if f.onset and f.onset.event_id:
            evidence.append(f.onset.event_id)
        if ctx.final_state is not None:
            state = ctx.final_state
            looked: list[tuple[str, bool, Any]] = [
                (k, True, state[k]) for k in state if _same_field(k, f.field)
            ]
            if f.source == "scenario" and f.field not in state:
                # a dotted truth key (appointments.A1.date) is looked up by its path; a
                # missing truth key is a mismatch
                looked = [(f.field, *_lookup(state, f.field))]
            for k, present, got in looked:
                compared += 1
                if not present or not values_equal(got, f.value):
                    mismatches.append(
                        {
                            "field": f.field,
                            "where": f"final_state.{k}",
                            "got": got,
                            "expected": f.value,
                        }
                    )
        onset_ns = f.onset.ns if f.onset else None
        for c in standing:
            if f.task_id is not None and c.task_id not in (None, f.task_id):
                continue
            recent = onset_ns is not None and c.requested_ns >= onset_ns
            if last_per.get((c.task_id, c.tool)) is not c and not recent:
                continue
            for arg, got in c.arguments.items():
                if not _same_field(arg, f.field):
                    continue
                compared += 1
                if not values_equal(got, f.value):
                    mismatches.append(
                        {
                            "field": f.field,
                            "where": f"call {c.call_id}.arguments.{arg}",
                            "got": got,
                            "expected": f.value,
                            "call_id": c.call_id,
                        }
                    )
                    failing[c.call_id] = c
    if compared == 0:
        return _unscored(
            name,
            "no final-state key and no committed argument carries the corrected field(s) "
            + ", ".join(f.field for f in fields_),
        )
    evidence += list(failing)
    trigger = next((f.onset for f in fields_ if f.onset is not None), None)
    return TaskCheck(
        name,
        not mismatches,
        value=len(mismatches),
        expected={f.field: f.value for f in fields_},
        evidence=evidence,
        reason=(
            f"{compared} place(s) hold the latest value"
            if not mismatches
            else "; ".join(
                f"{m['where']} = {m['got']!r}, latest is {m['expected']!r}" for m in mismatches
            )
        ),
        details={
            "mismatches": mismatches,
            "calls": [_call_summary(c) for c in failing.values()],
            "expected_values": {f.field: f.value for f in fields_},
            "trigger": trigger.to_dict() if trigger else None,
            "sources": sorted({f.source for f in fields_}),
        },
    )


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _argument_problems(tool: Tool, args: Mapping[str, Any]) -> list[str]:
    """Arguments against the tool's schema: required keys, declared types, enums,
    ``format: date``, and unknown keys when ``additionalProperties`` is false."""
    schema = tool.arguments
    props = schema.get("properties") or {}
    out = [
        f"missing required argument {k!r}" for k in schema.get("required") or [] if k not in args
    ]
    for key, value in args.items():
        spec = props.get(key)
        if not isinstance(spec, Mapping):
            if schema.get("additionalProperties") is False:
                out.append(f"unexpected argument {key!r}")
            continue
        kinds = spec.get("type")
        kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
        if kinds and not any(_JSON_TYPES.get(k, lambda v: True)(value) for k in kinds):
            out.append(f"argument {key!r} is not {'/'.join(kinds)}")
        if "enum" in spec and value not in spec["enum"]:
            out.append(f"argument {key!r} = {value!r} is not one of {spec['enum']}")
        if (
            spec.get("format") == "date"
            and isinstance(value, str)
            and not _ISO_DATE.match(value.strip())
        ):
            out.append(f"argument {key!r} = {value!r} is not an ISO date")
    return out


def _write_expected(sc: Scenario) -> bool:
    """The scenario expects a write to go through: allowed side effects exist and the last
    task action is keep/modify (or no action is labelled and a final state is expected)."""
    if not sc.business_truth.allowed_side_effects:
        return False
    actions = [s.expected_task_action for s in sc.segments if s.expected_task_action is not None]
    if actions:
        return actions[-1] in _GO_ACTIONS
    return bool(sc.business_truth.expected_final_state)


def check_tool_choice(ctx: TaskContext, required_tools: Sequence[str] | None = None) -> TaskCheck:
    """Tool choice and arguments.

    Problems counted (value): a committed write to a tool outside ``allowed_side_effects``
    (compensating calls included); a call to a tool the scenario does not define (when it
    defines tools); arguments that break the tool's schema; a required tool never called
    successfully. Required tools: ``required_tools`` if given (each needs an ``ok`` call),
    else, when the scenario expects a write (``_write_expected``), at least one committed,
    non-compensating write to an allowed tool. passed = no problem. Applies when the scenario
    defines tools or the audit has calls; unscored without ``tool-audit.json``.
    """
    name = "tool_choice"
    sc = ctx.scenario
    if not sc.tools and not ctx.calls and not required_tools:
        return _na(name, "the scenario defines no tools and no call was made")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    allowed = set(sc.business_truth.allowed_side_effects)
    problems: list[str] = []
    failing: dict[str, ToolCall] = {}
    for c in ctx.calls:
        tool = ctx.tool(c.tool)
        if sc.tools and tool is None:
            problems.append(f"call {c.call_id}: tool {c.tool!r} is not in the scenario")
            failing[c.call_id] = c
        if c.is_write and c.tool not in allowed:
            problems.append(f"call {c.call_id}: committed write to {c.tool!r}, not allowed")
            failing[c.call_id] = c
        if tool is not None:
            for p in _argument_problems(tool, c.arguments):
                problems.append(f"call {c.call_id}: {p}")
                failing[c.call_id] = c
    required: list[str]
    if required_tools is not None:
        required = list(required_tools)
        for t in required:
            if not any(c.tool == t and c.status is CallStatus.OK for c in ctx.calls):
                problems.append(f"required tool {t!r} was never called successfully")
    elif _write_expected(sc):
        required = sorted(allowed)
        if not any(c.is_write and c.compensates is None and c.tool in allowed for c in ctx.calls):
            problems.append("no committed write to an allowed tool (" + ", ".join(required) + ")")
    else:
        required = []
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected={"allowed_side_effects": sorted(allowed), "required": required},
        evidence=list(failing),
        reason="; ".join(problems) or f"{len(ctx.calls)} call(s) to the right tools",
        details={"problems": problems, "calls": [_call_summary(c) for c in failing.values()]},
    )


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
        keys: list[tuple[str, ...]] = [("effect", c.task_id or "", c.tool, _canonical(c.arguments))]
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
    related = {c.call_id: _call_summary(g[0]) for g in groups for c in g[1:]}
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
            "calls": [_call_summary(c) for c in extras],
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
            "calls": [_call_summary(c) for c, _ in bad.values()],
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
            "calls": [_call_summary(c) for c in standing],
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
            "calls": [_call_summary(c) for c in [*missing, *orphans]],
            "must_undo": sorted(must),
            "trigger": onsets[-1].to_dict() if onsets else None,
            "compensation_requested": requested,
        },
    )


def check_stale_results(ctx: TaskContext) -> TaskCheck:
    """Stale-result interception: no result is announced after it was superseded.

    A delivery (``delivered_ns`` set) is stale when the call's ``task_version`` is below the
    task's latest version at delivery time (``TaskContext.version_at``), or when a scenario
    change of the task (correction, modify, cancel, compensate; taken as settled at the end
    of the user's speech) falls between the request and the delivery. value = stale
    deliveries; passed = value == 0. Applies when a result was delivered or a tool may go
    stale; unscored without ``tool-audit.json``.
    """
    name = "stale_result_interception"
    delivered = [c for c in ctx.calls if c.delivered_ns is not None]
    if not delivered and not any(t.may_go_stale for t in ctx.scenario.tools):
        return _na(name, "no result was delivered and no tool may go stale")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    changes = [o for o in ctx.changes() if o.settled_ns is not None]
    stale: dict[str, str] = {}
    trigger: Onset | None = None
    for c in delivered:
        at = c.delivered_ns or 0
        latest = ctx.version_at(c.task_id, at, c)
        if c.task_version is not None and latest is not None and c.task_version < latest:
            stale[c.call_id] = f"made for version {c.task_version}, delivered at version {latest}"
            newer = [
                s
                for s in ctx.states.get(c.task_id, [])
                if s.version is not None and s.version > c.task_version and s.ns <= at
            ]
            if newer and trigger is None:
                s = newer[0]
                trigger = Onset(
                    "change",
                    s.ns,
                    "task.state",
                    utterance_id=s.utterance_id,
                    event_id=s.event_id,
                    task_id=c.task_id,
                )
        for o in changes:
            if c.requested_ns < (o.settled_ns or 0) <= at:
                stale.setdefault(
                    c.call_id, f"requested before the user changed the task ({o.segment_id})"
                )
                if trigger is None or trigger.source == "task.state":
                    trigger = o
    calls = [c for c in delivered if c.call_id in stale]
    return TaskCheck(
        name,
        not stale,
        value=len(stale),
        expected=0,
        evidence=list(stale),
        reason="; ".join(f"{k}: {v}" for k, v in stale.items())
        or f"{len(delivered)} delivered result(s), none stale",
        details={
            "calls": [_call_summary(c) for c in calls],
            "trigger": trigger.to_dict() if trigger else None,
        },
    )


def check_delivery_correctness(ctx: TaskContext) -> TaskCheck:
    """Delivery correctness: the last result announced for each task is the final version's.

    Per task with a delivery: the last delivered call must be of the task's final version
    (highest version seen in task.state or the audit), its result must equal (normalized) the
    result of the last ``ok`` call at that version, and it must have been requested after the
    user's last change of the task (scenario). value = tasks whose last announcement is wrong;
    passed = value == 0. Applies when some result was delivered.
    """
    name = "delivery_correctness"
    delivered = [c for c in ctx.calls if c.delivered_ns is not None]
    if not delivered:
        if ctx.audit is None:
            return _unscored(name, "no tool-audit.json")
        return _na(name, "no result was delivered")
    changes = [o for o in ctx.changes() if o.settled_ns is not None]
    last_change = max(changes, key=lambda o: o.settled_ns or 0) if changes else None
    by_task: dict[str | None, list[ToolCall]] = defaultdict(list)
    for c in delivered:
        by_task[c.task_id].append(c)
    problems: dict[str, str] = {}
    wrong: list[ToolCall] = []
    for task_id, lst in by_task.items():
        last = max(lst, key=lambda c: c.delivered_ns or 0)
        final_v = ctx.final_version(task_id)
        finals = [
            c
            for c in ctx.calls
            if c.task_id == task_id
            and c.status is CallStatus.OK
            and (final_v is None or c.task_version == final_v)
        ]
        final_call = max(finals, key=lambda c: c.commit_ns) if finals else None
        why = []
        if final_v is not None and last.task_version is not None and last.task_version < final_v:
            why.append(f"announced version {last.task_version}, final version is {final_v}")
        if (
            final_call is not None
            and final_call is not last
            and not values_equal(final_call.result, last.result)
        ):
            why.append(f"result differs from the final call {final_call.call_id}")
        if last_change is not None and last.requested_ns < (last_change.settled_ns or 0):
            why.append(f"requested before the user's last change ({last_change.segment_id})")
        if why:
            problems[f"task {task_id}"] = f"{last.call_id}: " + "; ".join(why)
            wrong.append(last)
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected=0,
        evidence=[c.call_id for c in wrong],
        reason="; ".join(f"{k}: {v}" for k, v in problems.items())
        or f"{len(by_task)} task(s) ended on the final result",
        details={
            "calls": [_call_summary(c) for c in wrong],
            "trigger": last_change.to_dict() if last_change and wrong else None,
        },
    )


def check_reconnect_consistency(ctx: TaskContext) -> TaskCheck:
    """Consistency after reconnect: nothing lost, nothing replayed across a drop.

    For each ``session.disconnected`` followed by ``session.resumed`` (or
    ``session.connected``): (1) snapshots in ``data.state``, when both exist: every key
    that differs after the drop is explained by a write committed between the two events
    whose arguments or result hold that key with the new value; (2) ``task.state``: a task's
    first version after the resume is not below its last before the drop, and equal versions
    hold equal fields; (3) replays: a committed write requested after the drop that repeats
    (idempotency key, or task + tool + normalized arguments) a committed write requested
    before it. value = problems; passed = value == 0. Applies when a resumed drop exists;
    unscored when none of the three kinds of evidence is present.
    """
    name = "reconnect_consistency"
    ordered = sorted(ctx.events, key=ctx.t)
    windows: list[tuple[Event, Event]] = []
    for i, e in enumerate(ordered):
        if e.event_type != "session.disconnected":
            continue
        back = next(
            (
                r
                for r in ordered[i + 1 :]
                if r.event_type in ("session.resumed", "session.connected")
            ),
            None,
        )
        if back is not None:
            windows.append((e, back))
    if not windows:
        drops = any(e.event_type == "session.disconnected" for e in ordered)
        return _na(name, "disconnected and never resumed" if drops else "no reconnect")
    problems: list[str] = []
    failing: dict[str, ToolCall] = {}
    related: dict[str, dict[str, Any]] = {}
    evidence: list[str] = []
    judged = False
    for down, up in windows:
        t0, t1 = ctx.t(down), ctx.t(up)
        evidence += [down.event_id, up.event_id]
        before, after = down.data.get("state"), up.data.get("state")
        between = [c for c in ctx.calls if c.is_write and t0 <= c.commit_ns <= t1]
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            judged = True
            for key in sorted(set(before) | set(after)):
                if key == META_KEY:
                    continue
                if key in before and key in after and values_equal(before[key], after[key]):
                    continue
                if key not in after:
                    problems.append(f"{key!r} lost across the reconnect at {t1 / 1e6:.0f} ms")
                    continue
                if not any(_explains(c, key, after[key]) for c in between):
                    problems.append(
                        f"{key!r} changed across the reconnect ({before.get(key)!r} -> "
                        f"{after[key]!r}) without a write in between"
                    )
        for task_id, lst in ctx.states.items():
            pre = [s for s in lst if s.ns <= t0 and s.version is not None]
            post = [s for s in lst if s.ns >= t1 and s.version is not None]
            if not pre or not post:
                continue
            judged = True
            a, b = pre[-1], post[0]
            evidence += [a.event_id, b.event_id]
            if (b.version or 0) < (a.version or 0):
                problems.append(f"task {task_id} went back from version {a.version} to {b.version}")
            elif b.version == a.version and normalize_value(a.fields) != normalize_value(b.fields):
                problems.append(f"task {task_id} version {a.version} changed its fields")
        if ctx.audit is not None:
            judged = True
            writes = sorted((c for c in ctx.calls if c.is_write), key=lambda c: c.requested_ns)
            for b_call in writes:
                if b_call.requested_ns < t0:
                    continue
                for a_call in writes:
                    if a_call.requested_ns >= min(b_call.requested_ns, t1) or a_call is b_call:
                        continue
                    same_key = bool(a_call.idempotency_key) and (
                        a_call.idempotency_key == b_call.idempotency_key
                    )
                    same_effect = (a_call.task_id, a_call.tool, _canonical(a_call.arguments)) == (
                        b_call.task_id,
                        b_call.tool,
                        _canonical(b_call.arguments),
                    )
                    if (same_key or same_effect) and b_call.call_id not in failing:
                        problems.append(
                            f"call {b_call.call_id} replays {a_call.call_id} across the reconnect"
                        )
                        failing[b_call.call_id] = b_call
                        related[b_call.call_id] = _call_summary(a_call)
    if not judged:
        return _unscored(name, "no state snapshots, task.state versions or tool audit to compare")
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected=0,
        evidence=[*evidence, *failing],
        reason="; ".join(problems) or f"{len(windows)} reconnect(s) consistent",
        details={
            "calls": [_call_summary(c) for c in failing.values()],
            "related": related,
            "windows": [[d.event_id, u.event_id] for d, u in windows],
            "problems": problems,
        },
    )


def _explains(call: ToolCall, key: str, value: Any) -> bool:
    for source in (call.arguments, call.result):
        if isinstance(source, Mapping):
            for k, v in source.items():
                if _same_field(str(k), key) and values_equal(v, value):
                    return True
    return False


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
    from voxeval.suites.duplex.evidence.ledger import iter_valid_events
    from voxeval.suites.duplex.evidence.validate import load_scenario

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

Layer = Literal["perception", "decision", "control", "playback", "unknown"]
UNKNOWN_ROOT_CAUSE = "unknown root cause"


# --------------------------------------------------------------------------- utterance links

_UTT_END_TYPES = ("vad.speech_stopped", "asr.final", "asr.partial")
_AGENT_UTT_TYPES = ("vad.speech_started", "vad.speech_stopped", "asr.partial", "asr.final")
_TRUTH_TYPES = ("user.speech_started", "user.speech_stopped")


def _fmt_span(span: tuple[float, float]) -> str:
    end = "end" if math.isinf(span[1]) else f"{span[1]:.3f}"
    return f"{span[0]:.3f}-{end} s"


@dataclass(frozen=True)
class UtteranceLink:
    """One agent utterance linked to one scenario segment it heard.

    ``how``: ``id`` (a truth event carries the agent's utterance id) or ``time`` (the spans
    overlap); ``overlap_ms``: the overlap of the two spans (None when the agent utterance has
    no span); spans in seconds on the clock of the times the links were built from.
    """

    utterance_id: str
    segment_id: str
    how: Literal["id", "time"]
    overlap_ms: float | None
    utterance_span: tuple[float, float] | None
    segment_span: tuple[float, float] | None

    def note(self) -> str:
        if self.how == "id":
            return f"linked by id: the truth events of segment {self.segment_id} carry {self.utterance_id}"
        assert self.utterance_span is not None and self.segment_span is not None
        return (
            f"linked by time: agent utterance {self.utterance_id} "
            f"({_fmt_span(self.utterance_span)}) overlaps segment {self.segment_id}'s truth span "
            f"({_fmt_span(self.segment_span)}) by {self.overlap_ms:.0f} ms"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "utterance_id": self.utterance_id,
            "segment_id": self.segment_id,
            "link": self.how,
            "overlap_ms": self.overlap_ms,
        }


@dataclass(frozen=True)
class _TruthSpan:
    segment_id: str
    role: str | None
    utterance_id: str | None
    start: float
    end: float
    start_event: Event


class UtteranceLinks:
    """Agent utterances linked to the scenario segments they heard, by id or by time.

    A live agent names utterances by its own ids (``vad.speech_started``, ``asr.*``,
    ``turn.decision``, ``response.created`` carry ``utterance_id`` = ``u2``), the scenario
    truth (``user.speech_started/stopped``, producer harness) by the segment id (in
    ``data.segment_id``, else the ``utterance_id``). The rule:

    - **agent utterance span**: from its first ``vad.speech_started`` (else first
      ``asr.partial``) to its last ``vad.speech_stopped`` (else last ``asr.final``, else last
      ``asr.partial``; none: the end of the ledger). Without a start event it has no span;
    - **truth span** of a user segment: its first ``user.speech_started`` to the first
      ``user.speech_stopped`` after it (none: the next truth onset, else the end of the
      ledger). Only ``user`` segments are linked (``data.role`` user or absent);
    - **by id**: when a truth event carries the agent's utterance id (the convention of a
      harness that shares ids), that segment is the link, unless the agent utterance has a
      span that does not overlap it (ids that merely coincide: then the time rule decides);
    - **by time**: otherwise the user segments whose truth span overlaps the agent
      utterance's span (overlap > 0), largest overlap first (ties: the earlier segment).
      No overlap (or no span): no link, and the reason says why.

    Times are seconds on one clock (session seconds, or audio seconds), given with the events.
    """

    def __init__(self, timed: Iterable[tuple[Event, float]]) -> None:
        pairs = sorted(timed, key=lambda x: x[1])
        self.end = pairs[-1][1] if pairs else 0.0
        vad_starts: dict[str, list[float]] = defaultdict(list)
        partial_starts: dict[str, list[float]] = defaultdict(list)
        ends: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.agent_ids: set[str] = set()
        truth_start: dict[str, tuple[Event, float]] = {}
        truth_stop: dict[str, list[float]] = defaultdict(list)
        onsets: list[float] = []
        for e, t in pairs:
            if e.event_type in _TRUTH_TYPES:
                sid = e.data.get("segment_id")
                sid = sid if isinstance(sid, str) and sid else e.utterance_id
                if not sid:
                    continue
                if e.event_type == "user.speech_started":
                    onsets.append(t)
                    truth_start.setdefault(sid, (e, t))
                else:
                    truth_stop[sid].append(t)
                continue
            uid = e.utterance_id
            if not uid or e.event_type not in (*_AGENT_UTT_TYPES, "turn.decision"):
                continue
            self.agent_ids.add(uid)
            if e.event_type == "vad.speech_started":
                vad_starts[uid].append(t)
            elif e.event_type == "asr.partial":
                partial_starts[uid].append(t)
            if e.event_type in _UTT_END_TYPES:
                ends[uid][e.event_type].append(t)
        self.spans: dict[str, tuple[float, float]] = {}
        for uid in self.agent_ids:
            first = vad_starts.get(uid) or partial_starts.get(uid)
            if not first:
                continue
            a = min(first)
            end_of = ends.get(uid, {})
            closing = next((end_of[k] for k in _UTT_END_TYPES if end_of.get(k)), None)
            b = max(closing) if closing else self.end
            self.spans[uid] = (a, max(a, b))
        self.truth: dict[str, _TruthSpan] = {}
        self.truth_ids: dict[str, str] = {}
        for sid, (e, t) in truth_start.items():
            stop = min((x for x in truth_stop.get(sid, []) if x >= t), default=None)
            if stop is None:
                stop = min((x for x in onsets if x > t), default=max(self.end, t))
            role = e.data.get("role")
            self.truth[sid] = _TruthSpan(
                sid, str(role) if role is not None else None, e.utterance_id, t, stop, e
            )
            if e.utterance_id:
                self.truth_ids.setdefault(e.utterance_id, sid)

    @staticmethod
    def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
        return min(a[1], b[1]) - max(a[0], b[0])

    def _is_user(self, seg: _TruthSpan) -> bool:
        return seg.role in (None, "", str(Role.USER))

    def start_event(self, segment_id: str) -> Event | None:
        """The segment's first ``user.speech_started``."""
        seg = self.truth.get(segment_id)
        return seg.start_event if seg else None

    def segment_span(self, segment_id: str) -> tuple[float, float] | None:
        seg = self.truth.get(segment_id)
        return (seg.start, seg.end) if seg else None

    def _time_links(self, uid: str, span: tuple[float, float]) -> list[UtteranceLink]:
        out = []
        for seg in self.truth.values():
            if not self._is_user(seg):
                continue
            ov = self._overlap(span, (seg.start, seg.end))
            if ov > 0:
                out.append(
                    UtteranceLink(
                        uid, seg.segment_id, "time", round(ov * 1000, 1), span, (seg.start, seg.end)
                    )
                )
        out.sort(key=lambda lk: (-(lk.overlap_ms or 0.0), (lk.segment_span or (0.0, 0.0))[0]))
        return out

    def segments_for(self, utterance_id: str) -> tuple[list[UtteranceLink], str]:
        """The scenario segments an agent utterance heard, best first, and why there are none."""
        span = self.spans.get(utterance_id)
        by_time = self._time_links(utterance_id, span) if span is not None else []
        same = self.truth_ids.get(utterance_id)
        if same is not None:
            hit = next((lk for lk in by_time if lk.segment_id == same), None)
            if span is None or hit is not None:
                seg = self.truth[same]
                first = UtteranceLink(
                    utterance_id,
                    same,
                    "id",
                    hit.overlap_ms if hit else None,
                    span,
                    (seg.start, seg.end),
                )
                return [first, *(lk for lk in by_time if lk.segment_id != same)], ""
        if by_time:
            return by_time, ""
        if span is None:
            return [], (
                f"utterance {utterance_id} has no user.speech_started (input) carrying its id and "
                "no vad.speech_started or asr.partial to place it in time"
            )
        why = (
            f"utterance {utterance_id} ({_fmt_span(span)}) overlaps no user segment's truth span "
            "(user.speech_started..stopped)"
        )
        others = [
            f"{seg.role} segment {seg.segment_id}"
            for seg in self.truth.values()
            if not self._is_user(seg) and self._overlap(span, (seg.start, seg.end)) > 0
        ]
        if others:
            why += "; it overlaps only " + ", ".join(others)
        if same is not None:
            why += f"; truth segment {same} carries the same id but lies elsewhere in time"
        before = [s for s in self.truth.values() if self._is_user(s) and s.end <= span[0]]
        if before:
            last = max(before, key=lambda s: s.end)
            why += (
                f"; the latest user segment before it, {last.segment_id}, ended "
                f"{span[0] - last.end:.3f} s before it started (the agent's events may lag "
                "the audio)"
            )
        if not self.truth:
            why += "; the ledger has no user.speech_started truth events"
        return [], why

    def next_after(self, segment_id: str) -> tuple[str, float] | None:
        """The first agent utterance that starts after the segment's truth end, and how long
        after (s): where an agent that heard the segment late shows it."""
        seg = self.truth.get(segment_id)
        if seg is None or math.isinf(seg.end):
            return None
        later = [(span[0], uid) for uid, span in self.spans.items() if span[0] >= seg.end]
        if not later:
            return None
        t0, uid = min(later)
        return uid, t0 - seg.end

    def utterances_for(
        self, segment_id: str, truth_utterance_id: str | None = None
    ) -> list[UtteranceLink]:
        """The agent utterances that heard a segment, best first: the agent utterance with the
        segment's truth id (when its span, if any, overlaps the segment), then every agent
        utterance whose span overlaps the segment's truth span, largest overlap first."""
        seg = self.truth.get(segment_id)
        tid = truth_utterance_id or (seg.utterance_id if seg else None) or segment_id
        seg_span = (seg.start, seg.end) if seg else None
        out: list[UtteranceLink] = []
        if seg_span is not None:
            for uid, span in self.spans.items():
                ov = self._overlap(span, seg_span)
                if ov > 0:
                    out.append(
                        UtteranceLink(uid, segment_id, "time", round(ov * 1000, 1), span, seg_span)
                    )
            out.sort(key=lambda lk: (-(lk.overlap_ms or 0.0), (lk.utterance_span or (0.0, 0.0))[0]))
        for cand in dict.fromkeys((tid, segment_id)):
            if cand not in self.agent_ids:
                continue
            hit = next((lk for lk in out if lk.utterance_id == cand), None)
            if hit is not None or cand not in self.spans or seg_span is None:
                first = UtteranceLink(
                    cand,
                    segment_id,
                    "id",
                    hit.overlap_ms if hit else None,
                    self.spans.get(cand),
                    seg_span,
                )
                return [first, *(lk for lk in out if lk.utterance_id != cand)]
        return out


@dataclass
class _Ledger:
    events: list[Event]
    time_ns: dict[str, int]
    links: UtteranceLinks

    @classmethod
    def of(cls, events: Iterable[Event]) -> _Ledger:
        evs = order_by_causality(events)
        clocks = producer_clocks(evs)
        times = {e.event_id: session_ns(e, clocks) for e in evs}
        links = UtteranceLinks((e, times[e.event_id] / 1e9) for e in evs)
        return cls(evs, times, links)

    def t(self, e: Event) -> int:
        return self.time_ns[e.event_id]

    def find(self, event_type: str | None = None, **attrs: Any) -> list[Event]:
        out = []
        for e in self.events:
            if event_type is not None and e.event_type != event_type:
                continue
            if all(
                (e.data.get(k[5:]) if k.startswith("data_") else getattr(e, k, None)) == v
                for k, v in attrs.items()
            ):
                out.append(e)
        return out

    def has_type(self, event_type: str) -> bool:
        return any(e.event_type == event_type for e in self.events)


def _link(step: str, ident: str | None, event: Event | None, note: str = "") -> dict[str, Any]:
    return {
        "step": step,
        "id": ident,
        "event_id": event.event_id if event else None,
        "event_type": event.event_type if event else None,
        "note": note,
    }


def _walk_back(
    call: Mapping[str, Any], led: _Ledger, delivered: bool
) -> tuple[list[dict[str, Any]], str | None, str]:
    """Links from the outcome back to the input segment; (chain, utterance_id, break note)."""
    chain: list[dict[str, Any]] = []
    call_id = call.get("call_id")
    if delivered and call.get("delivered_response_id"):
        rid = call["delivered_response_id"]
        play = led.find("playback.started", response_id=rid)
        chain.append(_link("delivery", rid, play[0] if play else None, "the announcement"))
    done = led.find("tool.completed", data_call_id=call_id) or led.find(
        "tool.failed", data_call_id=call_id
    )
    req = led.find("tool.requested", data_call_id=call_id)
    outcome_events = done or req
    chain.append(
        _link("outcome", call_id, outcome_events[0] if outcome_events else None, "the tool call")
    )
    task_id = call.get("task_id") or (req[0].task_id if req else None)
    if task_id:
        states = led.find("task.state", task_id=task_id)
        chain.append(_link("task", task_id, states[-1] if states else (req[0] if req else None)))
    response_id = call.get("response_id") or (req[0].response_id if req else None)
    if not response_id and task_id:
        response_id = next(
            (e.response_id for e in led.find(None, task_id=task_id) if e.response_id), None
        )
    if not response_id:
        return (
            chain,
            None,
            f"call {call_id} names no response (no response_id on the call or its tool.requested)",
        )
    created = led.find("response.created", response_id=response_id)
    chain.append(_link("response", response_id, created[0] if created else None))
    utterance_id = next(
        (
            e.utterance_id
            for e in [
                *created,
                *led.find("turn.decision", response_id=response_id),
                *led.find(None, response_id=response_id),
            ]
            if e.utterance_id
        ),
        None,
    )
    if not utterance_id:
        return chain, None, f"response {response_id} names no utterance"
    decision = led.find("turn.decision", utterance_id=utterance_id)
    if decision:
        chain.append(_link("decision", utterance_id, decision[-1]))
    asr = led.find("asr.final", utterance_id=utterance_id)
    chain.append(_link("utterance", utterance_id, asr[-1] if asr else None))
    links, why = led.links.segments_for(utterance_id)
    if not links:
        return chain, utterance_id, why
    best = links[0]
    note = "scenario segment, " + best.note()
    if len(links) > 1:
        note += "; also overlaps " + ", ".join(
            f"{lk.segment_id} ({lk.overlap_ms:.0f} ms)" for lk in links[1:]
        )
    step = _link("input", best.segment_id, led.links.start_event(best.segment_id), note)
    step.update(
        link=best.how,
        overlap_ms=best.overlap_ms,
        also=[lk.to_dict() for lk in links[1:]],
    )
    chain.append(step)
    return chain, utterance_id, ""


Gate = tuple[str, Layer, bool | None, str]


def _heard_gate(
    trigger: Mapping[str, Any] | None, led: _Ledger, values: Mapping[str, Any] | None
) -> Gate:
    """The trigger utterance reached ASR (and, with ``values``, its text says one of them).

    A trigger that is a scenario segment is heard by the agent utterances linked to it
    (``UtteranceLinks.utterances_for``: by id, else by time overlap)."""
    if not trigger or not trigger.get("utterance_id"):
        return ("heard", "perception", None, "no user utterance to check")
    if not led.has_type("asr.final"):
        return ("heard", "perception", None, "the ledger has no asr.final events")
    utts, how = _trigger_utterances(trigger, led)
    finals = [e for e in led.find("asr.final") if e.utterance_id in utts]
    if not finals:
        sid = trigger.get("segment_id")
        if utts:
            what = f"utterance(s) {', '.join(utts)} ({how})"
        elif sid:
            what = f"segment {sid} (no agent utterance overlaps it in time"
            nxt = led.links.next_after(str(sid))
            if nxt is not None:
                what += f"; the next one, {nxt[0]}, starts {nxt[1]:.3f} s after its end"
            what += ")"
        else:
            what = f"utterance {trigger.get('utterance_id')}"
        return ("heard", "perception", False, f"no asr.final for {what}: missed")
    text = " ".join(str(e.data.get("text") or "") for e in finals)
    src = f" ({how})" if how else ""
    if not values:
        return ("heard", "perception", True, f"asr.final: {text!r}{src}")
    said = trigger.get("say")
    for v in values.values():
        if text_mentions(text, v):
            return ("heard", "perception", True, f"asr.final {text!r} says {v!r}{src}")
    if said and not any(text_mentions(str(said), v) for v in values.values()):
        return ("heard", "perception", None, f"the scenario text {said!r} does not name the value")
    wanted = ", ".join(repr(v) for v in values.values())
    return ("heard", "perception", False, f"asr.final {text!r} lacks {wanted}: misheard{src}")


def _trigger_utterances(trigger: Mapping[str, Any], led: _Ledger) -> tuple[list[str], str]:
    """The agent utterance ids that heard a trigger, best first, and how they were linked: a
    scenario segment through ``UtteranceLinks.utterances_for``; an agent event's own
    utterance id (a ``task.state`` trigger) as it is."""
    sid = trigger.get("segment_id")
    if sid and trigger.get("source", "scenario") == "scenario":
        links = led.links.utterances_for(str(sid), trigger.get("utterance_id"))
        if not links:
            return [], ""
        how = links[0].note()
        if len(links) > 1:
            how += "; also " + ", ".join(
                f"{lk.utterance_id} ({lk.overlap_ms:.0f} ms)" for lk in links[1:]
            )
        return [lk.utterance_id for lk in links], how
    utt = trigger.get("utterance_id")
    return ([str(utt)], "") if utt else ([], "")


def _decided_stop_gate(trigger: Mapping[str, Any] | None, led: _Ledger) -> Gate:
    """A ``turn.decision`` of the stop's utterance(s) in the expected set (any one of them:
    an agent that first interrupts and then answers the stop did decide to stop)."""
    if not trigger or not trigger.get("utterance_id"):
        return ("decided", "decision", None, "no user utterance")
    utts, how = _trigger_utterances(trigger, led)
    decisions = [e for e in led.find("turn.decision") if e.utterance_id in utts]
    if not decisions:
        return ("decided", "decision", None, "no turn.decision for the stop")
    ok = set(trigger.get("expected_actions") or []) or {"interrupt", "pause"}
    hit = next((e for e in decisions if str(e.data.get("action") or "") in ok), None)
    action = str((hit or decisions[-1]).data.get("action") or "")
    src = f" ({how})" if how else ""
    return (
        "decided",
        "decision",
        hit is not None,
        f"turn.decision {action!r} (expected {sorted(ok)}){src}",
    )


def _acted_gate(
    trigger: Mapping[str, Any] | None, led: _Ledger, call: Mapping[str, Any], requested: bool
) -> Gate:
    """The agent acted on the stop: a task.state cancel after it or a compensation request."""
    t0 = (trigger or {}).get("ns")
    cancels = [
        e
        for e in led.find("task.state")
        if (
            str(e.data.get("status") or "").casefold() in {"cancelled", "canceled"}
            or str(e.data.get("action") or "").casefold() == "cancel"
        )
        and (t0 is None or led.t(e) >= t0)
        and (call.get("task_id") is None or e.task_id in (None, call.get("task_id")))
    ]
    if cancels or requested:
        what = f"task.state cancel {cancels[0].event_id}" if cancels else "compensation requested"
        return ("acted", "decision", True, what)
    return ("acted", "decision", False, "no task.state cancel and no compensating call requested")


def task_failure_slice(check: TaskCheck, events: Iterable[Event]) -> dict[str, Any]:
    """Causal slice of a failed task check: from the bad outcome back to the input.

    Walks from the first failing call (or the announcement that delivered it) through its
    task_id, response_id and utterance_id to the input segment (``user.speech_started``),
    then runs the check's gates in order and names the layer of the first failing gate.

    Utterance to input: a live agent names utterances by its own ids, the scenario truth by
    the segment id, so the agent utterance is linked to the scenario segment it heard by the
    rule of ``UtteranceLinks``: by id when a truth event carries the agent's utterance id
    (and the times do not contradict it), else **by time**: the user segment whose truth span
    (``user.speech_started`` .. ``user.speech_stopped``) overlaps the agent utterance's span
    (its ``vad.speech_started`` .. ``vad.speech_stopped``, else .. ``asr.final``) the most;
    the input link says how it was made (``link``: ``id`` | ``time``, ``overlap_ms``, and the
    other overlapping segments in ``also``). No overlapping segment: the chain breaks with
    the reason. The same rule links a trigger segment to the agent utterances that heard it
    (the *heard* and *decided* gates). Layers:
    perception (the stop/correction/change utterance has no ``asr.final``, or its text lacks
    the corrected value), decision (wrong ``turn.decision``, no action on a cancel, wrong tool
    or arguments, a second decision to write), control (a cancel or correction not propagated:
    an in-flight call committed, a write after stop, a retry or replay without idempotency),
    playback (a superseded result was played). The last passing gate is the last one that
    passed before the first failing one (gates after it are not read as progress). When the
    chain breaks the layer is ``unknown`` (root cause: ``unknown root cause``).
    """
    out: dict[str, Any] = {
        "check": check.name,
        "passed": check.passed,
        "outcome": None,
        "trigger": check.details.get("trigger"),
        "chain": [],
        "event_ids": [],
        "gates": [],
        "last_passing_gate": None,
        "first_failing_gate": None,
        "layer": None,
        "root_cause": None,
        "reason": "",
    }
    if check.passed is not False:
        out["reason"] = "the check did not fail: nothing to slice"
        return out
    led = _Ledger.of(events)
    details = check.details
    calls = details.get("calls") or []
    if not calls:
        out.update(
            layer="unknown",
            root_cause=UNKNOWN_ROOT_CAUSE,
            reason="no tool call to walk back from",
        )
        return out
    call = calls[0]
    out["outcome"] = {"call_id": call.get("call_id"), "tool": call.get("tool")}
    delivered = check.name in ("stale_result_interception", "delivery_correctness")
    chain, _, broken = _walk_back(call, led, delivered)
    out["chain"] = chain
    out["event_ids"] = [link["event_id"] for link in chain if link["event_id"]]
    if broken:
        out.update(layer="unknown", root_cause=UNKNOWN_ROOT_CAUSE, reason=f"chain breaks: {broken}")
        return out
    gates = _gates(check, call, led)
    out["gates"] = [{"gate": g[0], "layer": g[1], "passed": g[2], "note": g[3]} for g in gates]
    stop = next((i for i, g in enumerate(gates) if g[2] is False), len(gates))
    passing = [g for g in gates[:stop] if g[2] is True]
    failing = next((g for g in gates if g[2] is False), None)
    out["last_passing_gate"] = passing[-1][0] if passing else None
    if failing is None:
        out.update(layer="unknown", root_cause=UNKNOWN_ROOT_CAUSE, reason="no gate failed")
        return out
    out.update(
        first_failing_gate=failing[0],
        layer=failing[1],
        root_cause=failing[1],
        reason=failing[3],
    )
    return out


def _gates(check: TaskCheck, call: Mapping[str, Any], led: _Ledger) -> list[Gate]:
    d = check.details
    trigger = d.get("trigger")
    name = check.name
    if name == "goal_completion":
        kind = (trigger or {}).get("kind")
        name = {"stop": "cancellation", "correction": "parameter_consistency"}.get(
            str(kind), "goal_completion"
        )
    if name == "parameter_consistency":
        values = d.get("expected_values") or {}
        gates: list[Gate] = [_heard_gate(trigger, led, values)]
        t0 = (trigger or {}).get("ns")
        later_states = [e for e in led.find("task.state") if t0 is None or led.t(e) >= t0]
        if later_states:
            held = any(
                text_mentions(_canonical(e.data.get("fields")), v)
                or any(values_equal(x, v) for x in (e.data.get("fields") or {}).values())
                for e in later_states
                for v in values.values()
            )
            gates.append(
                (
                    "understood",
                    "decision",
                    held,
                    "task.state after the correction "
                    + ("holds" if held else "does not hold")
                    + " the latest value",
                )
            )
        else:
            gates.append(("understood", "decision", None, "no task.state after the correction"))
        in_flight = t0 is not None and int(call.get("requested_ns") or 0) < t0
        gates.append(
            (
                "in_flight_cancelled",
                "control",
                not in_flight,
                "the call was requested before the correction and still committed"
                if in_flight
                else "the call was requested after the correction",
            )
        )
        gates.append(("arguments", "decision", False, "committed with the old value"))
        return gates
    if name == "write_after_stop":
        return [
            _heard_gate(trigger, led, None),
            _decided_stop_gate(trigger, led),
            ("propagated", "control", False, "a write was committed after the stop"),
        ]
    if name == "cancellation":
        requested = bool((d.get("compensation_requested") or {}).get(call.get("call_id")))
        return [
            _heard_gate(trigger, led, None),
            _decided_stop_gate(trigger, led),
            _acted_gate(trigger, led, call, requested),
            ("propagated", "control", False, "the write still stands"),
        ]
    if name == "compensation":
        requested = bool((d.get("compensation_requested") or {}).get(call.get("call_id")))
        return [
            _heard_gate(trigger, led, None),
            (
                "compensation_requested",
                "decision",
                requested,
                "a compensating call was requested"
                if requested
                else "no compensating call was requested",
            ),
            ("compensation_committed", "control", False, "no compensating call committed"),
        ]
    if name in ("duplicate_side_effects", "reconnect_consistency"):
        original = (d.get("related") or {}).get(call.get("call_id")) or {}
        r1, r2 = original.get("response_id"), call.get("response_id")
        if r1 and r2:
            same = r1 == r2
            note = (
                f"both writes come from response {r1}: a retry"
                if same
                else f"two responses ({r1}, {r2}) each decided to write"
            )
            one: Gate = ("single_decision", "decision", same, note)
        else:
            one = ("single_decision", "decision", None, "response of a copy unknown")
        what = "replayed after the reconnect" if name == "reconnect_consistency" else "retried"
        return [
            one,
            (
                "idempotent",
                "control",
                False,
                f"{what} without an idempotency key the backend honoured",
            ),
        ]
    if name in ("stale_result_interception", "delivery_correctness"):
        return [
            _heard_gate(trigger, led, None),
            ("intercepted", "playback", False, "a superseded result was played to the user"),
        ]
    if name == "tool_choice":
        return [("tool_choice", "decision", False, "; ".join(d.get("problems") or []))]
    values = d.get("expected_values") or {}
    return [
        _heard_gate(trigger, led, values),
        ("state", "decision", False, "the final state does not match the truth"),
    ]
