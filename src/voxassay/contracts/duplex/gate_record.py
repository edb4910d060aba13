"""``GateRecord``: gate.json, the GateReport as a file (and as ``report.json``'s ``gate``).

What CI and people read of a gated run: the one recommendation and its exit code, the reasons,
and per gate its status with the value, n and evidence level it was decided on, the
preconditions, and the comparison with a baseline. Typed where a reader decides; the detail
blocks (groups, metric rows, trade-offs) are kept as written. ``voxassay duplex schema gate``
prints the JSON Schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GATE_RECORD_SCHEMA_VERSION", "GateEntry", "GateRecord"]

GATE_RECORD_SCHEMA_VERSION = 1

Recommendation = Literal["roll_back", "keep_in_shadow", "collect_more_data", "ship"]
GateStatus = Literal["pass", "fail", "insufficient_n", "insufficient_evidence", "unknown"]


class GateEntry(BaseModel):
    """One gate: the matrix's rule, what was measured, and the decision."""

    model_config = ConfigDict(extra="allow")

    id: str
    metric: str
    statistic: str
    comparator: str
    threshold: float | int
    min_evidence: str
    on_fail: str
    mitigation: str = ""
    status: GateStatus
    reasons: list[str] = Field(default_factory=list)
    value: float | int | None = None
    n: int | None = None
    evidence_level: str | None = None
    source: str | None = None
    baseline: dict[str, Any] | None = None
    decisive_regression: bool | None = None


class GateRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: Literal["duplex-gate"] = "duplex-gate"
    matrix: str
    run_id: str | None = None
    system: str | None = None
    baseline_run_id: str | None = None
    recommendation: Recommendation
    reasons: list[str] = Field(default_factory=list)
    exit_code: int
    allow_incomplete: bool = False
    status_counts: dict[str, int] = Field(default_factory=dict)
    gates: list[GateEntry] = Field(default_factory=list)

    def dump(self) -> dict[str, Any]:
        """gate.json: what was recorded, as JSON values."""
        return self.model_dump(mode="json", exclude_unset=True)
