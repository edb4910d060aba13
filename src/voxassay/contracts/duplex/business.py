"""Business files of a session (the contract an agent's backend fills in): the tool audit (every tool call with its status, arguments, result, timing) and the final business state, with their JSON Schemas and loaders."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from voxassay.core.errors import InputError

__all__ = [
    "FINAL_STATE_SCHEMA_VERSION",
    "META_KEY",
    "TOOL_AUDIT_SCHEMA_VERSION",
    "CallStatus",
    "FinalStateMeta",
    "TaskSchemaKind",
    "ToolAudit",
    "ToolCall",
    "export_task_schemas",
    "load_final_state",
    "load_tool_audit",
    "task_json_schema",
]


TOOL_AUDIT_SCHEMA_VERSION = 1


FINAL_STATE_SCHEMA_VERSION = 1


META_KEY = "_meta"


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
                f"tool-audit schema_version {value} is newer than this voxassay reads "
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
            "$id": f"urn:voxassay:duplex:tool-audit:v{TOOL_AUDIT_SCHEMA_VERSION}",
            "title": "voxassay full-duplex tool audit (every tool call of a session)",
            **body,
        }
    if kind == "final-state":
        meta = FinalStateMeta.model_json_schema()
        meta.pop("title", None)
        return {
            **head,
            "$id": f"urn:voxassay:duplex:final-state:v{FINAL_STATE_SCHEMA_VERSION}",
            "title": "voxassay full-duplex final business state (free object, optional _meta)",
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
