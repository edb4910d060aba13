"""The ledger event contract: one JSONL line, and the producer clock records."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from enum import StrEnum
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from voxassay.contracts.duplex.common import (
    EVENT_SCHEMA_VERSION,
    Strict,
    version_check,
)
from voxassay.contracts.duplex.vocabulary import (
    CLOCK_EVENT_TYPE,
    Route,
    is_known_event_type,
)

# --------------------------------------------------------------------------- ledger event


class ClockKind(StrEnum):
    MONOTONIC = "monotonic"
    WALL = "wall"
    VIRTUAL = "virtual"
    SAMPLE = "sample"


class ProducerClock(Strict):
    """The ``data`` of a ``clock.producer`` event: how a producer's clock maps to the session's.

    ``session_ns = producer monotonic_ns + offset_ns``, known to within ``uncertainty_ns``.
    """

    producer: str
    kind: ClockKind
    offset_ns: int = 0
    uncertainty_ns: int = Field(default=0, ge=0)
    method: str = "assumed"
    """How the offset was estimated: shared (same clock), ntp-style ping, audio alignment..."""

    def to_event(self, session_id: str, monotonic_ns: int, producer: str = "harness") -> Event:
        """A ledger line carrying this record (written by ``producer``, usually the harness)."""
        return Event.new(
            CLOCK_EVENT_TYPE,
            session_id=session_id,
            producer=producer,
            monotonic_ns=monotonic_ns,
            data=self.model_dump(mode="json"),
        )

    @classmethod
    def from_event(cls, event: Event) -> ProducerClock:
        return cls.model_validate(event.data)


class Event(BaseModel):
    """One ledger line. Unknown event types are kept (the validator warns)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    event_id: str = Field(min_length=1)
    trace_id: str | None = None
    session_id: str = Field(min_length=1)
    utterance_id: str | None = None
    response_id: str | None = None
    playback_id: str | None = None
    task_id: str | None = None
    event_type: str = Field(min_length=1)
    producer: str = Field(min_length=1)
    """Who wrote it (harness, agent, player, acoustic); each producer has its own clock."""
    monotonic_ns: int
    """The producer's clock; mapped to the session clock by its clock.producer record."""
    seq: int | None = None
    """Producer sequence number: orders a producer's events that share a timestamp."""
    wall_time: dt.datetime | None = None
    reason: str | None = None
    played_until_ms: float | None = Field(default=None, ge=0)
    """For playback stop/interrupt: how much of the response the user actually heard."""
    route: Route | None = None
    schema_version: int = Field(default=EVENT_SCHEMA_VERSION, ge=1)
    data: dict[str, Any] = Field(default_factory=dict)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return version_check(value, EVENT_SCHEMA_VERSION, "event")

    @model_validator(mode="after")
    def _clock_data(self) -> Self:
        if self.event_type == CLOCK_EVENT_TYPE:
            try:
                ProducerClock.model_validate(self.data)
            except ValidationError as exc:
                details = "; ".join(
                    f"{'.'.join(str(x) for x in e['loc']) or 'data'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                )
                raise ValueError(f"clock.producer data: {details}") from None
        return self

    @property
    def known_type(self) -> bool:
        return is_known_event_type(self.event_type)

    @classmethod
    def new(
        cls,
        event_type: str,
        *,
        session_id: str,
        producer: str,
        monotonic_ns: int,
        **fields: Any,
    ) -> Event:
        """An event with a fresh random ``event_id``."""
        return cls(
            event_id=fields.pop("event_id", None) or uuid.uuid4().hex,
            event_type=event_type,
            session_id=session_id,
            producer=producer,
            monotonic_ns=monotonic_ns,
            **fields,
        )

    def to_json(self) -> str:
        """One compact JSON line (unset optional ids left out)."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
