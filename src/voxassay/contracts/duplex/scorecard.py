"""``Scorecard``: a duplex run's scores, as report.json holds them.

The chain: ``score(bundle) -> SessionScore`` (``scoring/``), ``[SessionScore] -> Scorecard``
(``report.py`` builds it: per system the pooled metrics and their splits, the sessions, the
evidence), ``evaluate(matrix, Scorecard, baseline) -> GateReport`` (``gates.py``, which reloads a
report.json with ``Scorecard.model_validate`` and reads these fields, never the raw JSON).
The keys every suite's report shares stay: ``suite``, ``metrics_version``, ``systems[].overall``,
``groups``; a gated run embeds its GateReport under ``gate``. Blocks that only views read
(timelines, key failures, composition, ...) are kept as written (extra fields); ``voxassay duplex
schema scorecard`` prints the JSON Schema.

Metric entries hold what a gate needs to recompute and pair: latency ``values`` (one per pair,
``censored`` when the end never came), rate and check ``events`` and ``denominator`` refs
(``<session>/<id>``), count ``sessions`` and ``events``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from voxassay.contracts.duplex.gate_record import GateRecord

__all__ = [
    "CheckEntry",
    "CountEntry",
    "EvidenceCard",
    "GroupCard",
    "LatencyEntry",
    "LatencyValueRow",
    "Overall",
    "RateEntry",
    "Scorecard",
    "SessionCard",
    "SystemCard",
    "TaskBlock",
    "ValueEntry",
]

SCORECARD_SCHEMA_VERSION = 1

Number = float | int


class _Open(BaseModel):
    """Typed where the chain reads, open for what views alone read."""

    model_config = ConfigDict(extra="allow")


class LatencyValueRow(_Open):
    ref: str = ""
    session: str | None = None
    value_ms: Number | None = None
    censored: bool = False


class LatencyEntry(_Open):
    """One latency metric: n pairs (censored ones included), percentiles (None: withheld,
    see ``withheld``), 95 % CIs over sessions, every pair in ``values``, strata in ``by``."""

    n: int = 0
    n_censored: int = 0
    p50: Number | None = None
    p95: Number | None = None
    p99: Number | None = None
    p50_ci: list[Number | None] | None = None
    p95_ci: list[Number | None] | None = None
    withheld: dict[str, str] = Field(default_factory=dict)
    values: list[LatencyValueRow] = Field(default_factory=list)
    by: dict[str, dict[str, LatencyEntry]] = Field(default_factory=dict)
    definition: str = ""
    evidence_level: str | None = None


class RateEntry(_Open):
    """k of n opportunities (Wilson CI); ``events`` are the counted opportunities."""

    n: int = 0
    k: int | None = None
    value: Number | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None
    events: list[str] = Field(default_factory=list)
    denominator: list[str] = Field(default_factory=list)
    by: dict[str, dict[str, RateEntry]] = Field(default_factory=dict)
    definition: str = ""
    evidence_level: str | None = None


class CheckEntry(_Open):
    """A task check pooled over sessions: ``passed`` of ``n`` scored sessions."""

    n: int = 0
    passed: int | None = None
    rate: Number | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None
    events: list[str] = Field(default_factory=list)
    denominator: list[str] = Field(default_factory=list)
    definition: str = ""
    evidence_level: str | None = None


class CountEntry(_Open):
    """Events summed over the ``sessions_counted`` sessions that could show them."""

    total: Number | None = None
    sessions_counted: int = 0
    sessions: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)
    definition: str = ""
    evidence_level: str | None = None


class ValueEntry(_Open):
    """A plain figure over ``n`` opportunities."""

    value: Number | None = None
    n: int = 0
    k: int | None = None
    events: list[str] = Field(default_factory=list)
    denominator: list[str] = Field(default_factory=list)
    definition: str = ""
    evidence_level: str | None = None


class TaskBlock(_Open):
    checks: dict[str, CheckEntry] = Field(default_factory=dict)
    counts: dict[str, CountEntry] = Field(default_factory=dict)


class Overall(_Open):
    latencies: dict[str, LatencyEntry] = Field(default_factory=dict)
    rates: dict[str, RateEntry] = Field(default_factory=dict)
    counts: dict[str, CountEntry] = Field(default_factory=dict)
    values: dict[str, ValueEntry] = Field(default_factory=dict)
    task: TaskBlock | None = None
    hours: Number | None = None


class GroupCard(_Open):
    """The metrics of one split value (``group`` = route, category, ...; ``name`` = value)."""

    group: str
    name: str
    latencies: dict[str, LatencyEntry] = Field(default_factory=dict)
    rates: dict[str, RateEntry] = Field(default_factory=dict)
    counts: dict[str, CountEntry] = Field(default_factory=dict)
    values: dict[str, ValueEntry] = Field(default_factory=dict)


class SystemCard(_Open):
    system: str
    overall: Overall = Field(default_factory=Overall)
    groups: list[GroupCard] = Field(default_factory=list)
    failures: list[dict[str, Any]] = Field(default_factory=list)
    gate: GateRecord | None = None
    """This system checked against the run's acceptance matrix (``duplex run`` applies the
    example matrix unless given another): its one recommendation and every gate."""


class SessionCard(_Open):
    """One session (a bundle) or call (a recording) of the run; ``bundle`` or ``audio`` is
    where it can be replayed from (relative to the run folder)."""

    id: str
    system: str | None = None
    duration_s: Number | None = None
    evidence_level: str | None = None
    """The derived level (a recording: L2, fixed audio)."""
    declared_level: str | None = None
    """A recording's level from its ``provenance.json`` (None: no declaration)."""
    bundle: str | None = None
    audio: str | list[str] | None = None


class EvidenceCard(_Open):
    """The run's evidence: ``level`` the weakest session's derived level (None: not
    derived), ``declared_level`` the weakest counting recordings' declared provenance, why."""

    level: str | None = None
    declared_level: str | None = None
    status: str | None = None
    note: str | None = None


class Scorecard(_Open):
    suite: str = "duplex"
    mode: str | None = None
    metrics_version: str = ""
    run_id: str | None = None
    evidence: EvidenceCard = Field(default_factory=EvidenceCard)
    systems: list[SystemCard] = Field(default_factory=list)
    sessions: list[SessionCard] = Field(default_factory=list)
    gate: GateRecord | None = None

    def system(self, name: str | None = None) -> SystemCard:
        """The system ``name``, or the only one (``InputError`` otherwise)."""
        from voxassay.core.errors import InputError

        names = [s.system for s in self.systems]
        if name is not None:
            if name not in names:
                raise InputError(f"system {name!r} not in this run (it has: {', '.join(names)})")
            return self.systems[names.index(name)]
        if len(self.systems) == 1:
            return self.systems[0]
        if not self.systems:
            raise InputError("the report lists no systems: nothing was measured")
        raise InputError(f"the run has several systems; choose one of: {', '.join(names)}")

    def dump(self) -> dict[str, Any]:
        """report.json: what was built, as JSON values (fields never set are left out)."""
        return self.model_dump(mode="json", exclude_unset=True)
