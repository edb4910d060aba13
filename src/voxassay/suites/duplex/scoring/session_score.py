"""``SessionScore``: one scored session, the object every later stage reads.

``score(bundle)`` (``scoring/score.py``) and the two-channel scorer (``evidence/stereo.py``)
make one per session; the run's record stores its dump, and the report, the gates and the
views read it back with ``SessionScore.of(record)``. The turn analysis and the latency pairs
are recomputed from what it holds (``analysis()``, ``latency_pairs()``), never stored twice.
Fields a mode does not produce stay at their defaults (a recording has no ledger, no pairs,
no task); blocks that only views read are kept as they were written (extra fields).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from voxassay.core.records import Record
    from voxassay.suites.duplex.scoring.latency_table import LatencyPair, SessionMeta
    from voxassay.suites.duplex.scoring.turn_types import CallAnalysis

__all__ = ["PAIR_FIELDS", "PairsBlock", "SessionEvidence", "SessionScore"]

PAIR_FIELDS = (
    "metric",
    "key",
    "start_ns",
    "end_ns",
    "censored_after_ms",
    "start_event_id",
    "end_event_id",
    "source",
    "route",
)
"""Column order of ``pairs.rows`` (one latency pair per row)."""


class SessionEvidence(BaseModel):
    """The session's derived evidence level and why (``contracts.duplex.evidence``); for a
    recording with a ``provenance.json`` sidecar also the level its declared facts give
    (``contracts.duplex.provenance``)."""

    model_config = ConfigDict(extra="allow")

    level: str | None = None
    reasons: list[str] = Field(default_factory=list)
    redacted: bool = False
    raw_audio: str | None = None
    basis: str | None = None
    """derived, or declared when ``declared_level`` rests on a sidecar."""
    declared_level: str | None = None
    declared_by: str | None = None
    sidecar: str | None = None


class PairsBlock(BaseModel):
    """The session's latency pairs as rows of ``fields`` (compact in records.jsonl)."""

    fields: list[str] = Field(default_factory=lambda: list(PAIR_FIELDS))
    rows: list[list[Any]] = Field(default_factory=list)


class SessionScore(BaseModel):
    """One scored session. ``segments``: ``{"user": [...], "agent": [...]}`` speech segments
    (seconds) from one detector; ``labels``: expected turn actions; ``meta``: the split
    fields (route, category, device, language, system_version, scenario); ``task``: the task
    checks (``scoring/task.py``); ``slices``: causal slices of its failures."""

    model_config = ConfigDict(extra="allow")

    session_id: str | None = None
    unit: str | None = None
    bundle: str | None = None
    duration_s: float | int | None = None
    detector: str | None = None
    segments: dict[str, Any] = Field(default_factory=dict)
    segments_source: str | None = None
    labels: list[dict[str, Any]] = Field(default_factory=list)
    agent_cuts_s: list[float] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    scenario: dict[str, Any] | None = None
    evidence: SessionEvidence | None = None
    pairs: PairsBlock | None = None
    task: dict[str, Any] | None = None
    slices: list[dict[str, Any]] = Field(default_factory=list)
    problems: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def of(cls, source: Record | Mapping[str, Any]) -> SessionScore:
        """The score a record holds (or a record's ``output`` mapping)."""
        output = source if isinstance(source, Mapping) else (source.output or {})
        return cls.model_validate(output)

    def to_output(self) -> dict[str, Any]:
        """What the record stores: the fields that were set, as JSON values."""
        return self.model_dump(mode="json", exclude_unset=True)

    def block(self, name: str) -> Any:
        """A block written by a scorer beyond the typed fields (None when absent)."""
        return (self.model_extra or {}).get(name)

    # ------------------------------------------------------------------ derived views
    def analysis(self, key: str, labels: Sequence[Mapping[str, Any]] | None = None) -> CallAnalysis:
        """``turns.analyze_call`` of the stored segments and labels (pure; ``labels`` replaces
        the stored ones, as a recording's labels come from its item)."""
        from voxassay.suites.duplex.scoring.turns import analyze_call

        chosen = list(labels) if labels is not None else list(self.labels)
        return analyze_call(
            self.segments["user"],
            self.segments["agent"],
            labels=chosen or None,
            call_id=key,
            duration_s=self.duration_s,
            agent_cuts_s=self.agent_cuts_s or (),
        )

    def session_meta(self) -> SessionMeta:
        """The split fields as ``latency.SessionMeta``."""
        from voxassay.suites.duplex.scoring.latency_table import SessionMeta

        m = self.meta
        return SessionMeta(
            route=m.get("route"),
            category=m.get("category"),
            device=m.get("device"),
            language=m.get("language"),
            system_version=m.get("system_version"),
            scenario=m.get("scenario"),
        )

    def latency_pairs(self, key: str) -> list[LatencyPair]:
        """The stored pairs as ``latency.LatencyPair`` (session id = the run key)."""
        from voxassay.suites.duplex.scoring.latency_table import LatencyPair

        if self.pairs is None:
            return []
        meta = self.session_meta()
        out = []
        for row in self.pairs.rows:
            r = dict(zip(self.pairs.fields, row, strict=False))
            out.append(
                LatencyPair(
                    metric=str(r["metric"]),
                    session_id=key,
                    key=str(r["key"]),
                    start_ns=int(r["start_ns"]),
                    end_ns=None if r.get("end_ns") is None else int(r["end_ns"]),
                    censored_after_ms=r.get("censored_after_ms"),
                    route=r.get("route"),
                    meta=meta,
                    start_event_id=str(r["start_event_id"]),
                    end_event_id=r.get("end_event_id"),
                    source="fallback" if r.get("source") == "fallback" else "primary",
                )
            )
        return out
