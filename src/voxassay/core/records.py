"""Record: one JSON line of ``records.jsonl``, the outcome of one (item, system, repeat)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "unparseable", "unscored"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "unparseable", "unscored")


@dataclass
class Record:
    """Outcome of one item for one system and repeat.

    ``status`` other than ``ok`` carries ``error = {"kind": ..., "message": ...}``; such records
    are counted in reports and excluded from metric denominators, never scored as zero.
    ``timing`` holds ``compute_s`` (inside the backend call), ``audio_s`` and ``wall_s``.
    """

    id: str
    system: str
    repeat: int = 0
    status: str = "ok"
    error: dict[str, str] | None = None
    output: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    worker: dict[str, Any] | None = None
    """Where a distributed executor ran it (``executor``, ``node``, ``pid``); else None."""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.id, self.system, self.repeat)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (shallow: nested values are already JSON types)."""
        return {
            "id": self.id,
            "system": self.system,
            "repeat": self.repeat,
            "status": self.status,
            "error": self.error,
            "output": self.output,
            "metrics": self.metrics,
            "timing": self.timing,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            **({"worker": self.worker} if self.worker else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """Parse a record object; raises ``ValueError`` when a required field is missing."""
        if not isinstance(d, dict):
            raise ValueError("record is not a JSON object")
        for key in ("id", "system"):
            if key not in d:
                raise ValueError(f"record has no {key!r}")
        status = d.get("status", "ok")
        if status not in STATUSES:
            raise ValueError(f"unknown record status {status!r}")
        return cls(
            id=str(d["id"]),
            system=str(d["system"]),
            repeat=int(d.get("repeat", 0)),
            status=status,
            error=d.get("error"),
            output=d.get("output") or {},
            metrics=d.get("metrics") or {},
            timing=d.get("timing") or {},
            started_at=d.get("started_at"),
            ended_at=d.get("ended_at"),
            worker=d.get("worker") if isinstance(d.get("worker"), dict) else None,
        )


def error_record(
    item_id: str, system: str, repeat: int, kind: str, message: str, status: str = "error"
) -> Record:
    """A record for an item that did not produce a scorable output."""
    return Record(
        id=item_id,
        system=system,
        repeat=repeat,
        status=status,
        error={"kind": kind, "message": message[:2000]},
    )
