"""The gates' types: a metric as measured (``Measurement``: its statistics, the units behind it, per split), the table of one run's metrics (``MetricTable``), and the results (``GateResult`` per gate, ``GateReport`` with the one recommendation)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import numpy as np

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.evidence import EVIDENCE_LEVELS
from voxassay.contracts.duplex.gate_record import GateRecord
from voxassay.contracts.duplex.matrix import Gate, OnFail, Statistic
from voxassay.core.numbers import finite as _num
from voxassay.stats.intervals import wilson_interval

__all__ = [
    "GATES_VERSION",
    "PRECEDENCE",
    "BaselineDiff",
    "Check",
    "GateReport",
    "GateResult",
    "GateStatus",
    "GroupValue",
    "Measurement",
    "MetricKind",
    "MetricRow",
    "MetricTable",
    "Recommendation",
    "ReplaySource",
    "RowLabel",
    "RunProvenance",
    "StatValue",
    "Unit",
]


GATES_VERSION = "1"


MetricKind = Literal["latency", "rate", "count", "value"]


class GateStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INSUFFICIENT_N = "insufficient_n"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"
    UNKNOWN = "unknown"


class Recommendation(StrEnum):
    SHIP = "ship"
    ROLL_BACK = "roll_back"
    KEEP_IN_SHADOW = "keep_in_shadow"
    COLLECT_MORE_DATA = "collect_more_data"


class RowLabel(StrEnum):
    """DESIGN.md's claim labels for a metric row."""

    IMPLEMENTED = "IMPLEMENTED"
    VERIFIED = "VERIFIED"
    UNKNOWN = "UNKNOWN"


PRECEDENCE: tuple[Recommendation, ...] = (
    Recommendation.ROLL_BACK,
    Recommendation.KEEP_IN_SHADOW,
    Recommendation.COLLECT_MORE_DATA,
    Recommendation.SHIP,
)
"""Most severe first: when several actions apply, the first one in this order is recommended."""


LEVEL_RANK: dict[str, int] = {lvl: i for i, lvl in enumerate(EVIDENCE_LEVELS)}


QUANTILE = {Statistic.P50: 0.5, Statistic.P95: 0.95, Statistic.P99: 0.99}


@dataclass(frozen=True)
class Unit:
    """One item behind a metric: a latency pair, a rate opportunity or a counted instance.

    ``session`` is the call or session the item belongs to (the unit of replay and of the
    bootstrap); ``value_ms`` is None for a censored latency; ``event`` says whether a rate
    opportunity was counted in k (a count's instances are events).
    """

    ref: str
    session: str
    value_ms: float | None = None
    censored: bool = False
    event: bool | None = None


def session_of(ref: str) -> str:
    return ref.split("/", 1)[0]


@dataclass
class StatValue:
    """A statistic read from a measurement: ``value`` (+inf: censored tail; None: not
    available, with ``note`` saying why) and whether the statistic applies at all."""

    value: float | None
    note: str = ""
    applies: bool = True


@dataclass
class Measurement:
    """The measured statistics of one metric over one group (overall or a split value).

    ``n`` is the statistic's denominator: latency pairs (censored ones included), rate
    opportunities, sessions counted (counts) or opportunities (plain values). ``ci`` holds 95 %
    intervals by statistic name (``rate``, ``p50``, ``p95``).
    """

    kind: MetricKind
    n: int
    value: float | None = None
    k: int | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    n_censored: int = 0
    withheld: dict[str, str] = field(default_factory=dict)
    ci: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    units: list[Unit] = field(default_factory=list)

    # -- constructors (for hand-built tables and derived metrics) ---------------------------
    @classmethod
    def latency(
        cls,
        values_ms: Sequence[float | None],
        sessions: Sequence[str] | None = None,
    ) -> Measurement:
        """Latency pairs (None = censored); percentiles as ``stats.percentiles`` computes them."""
        from voxassay.stats.percentiles import summarize_values

        sess = list(sessions) if sessions is not None else [f"s{i}" for i in range(len(values_ms))]
        if len(sess) != len(values_ms):
            raise ValueError("sessions needs one label per value")
        arr = np.array([math.inf if v is None else float(v) for v in values_ms], dtype=float)
        summary = summarize_values(arr, sess if arr.size else None, unit="sessions")
        units = [
            Unit(f"{s}/{i}", s, None if v is None else float(v), v is None)
            for i, (v, s) in enumerate(zip(values_ms, sess, strict=True))
        ]
        return cls._from_latency_summary(summary, units)

    @classmethod
    def _from_latency_summary(cls, s: Mapping[str, Any], units: list[Unit]) -> Measurement:
        ci: dict[str, tuple[float | None, float | None]] = {}
        for name in ("p50", "p95"):
            bounds = s.get(f"{name}_ci")
            if isinstance(bounds, list | tuple) and len(bounds) == 2:
                ci[name] = (_num(bounds[0]), _num(bounds[1]))
        return cls(
            kind="latency",
            n=int(s.get("n") or 0),
            p50=_num(s.get("p50")),
            p95=_num(s.get("p95")),
            p99=_num(s.get("p99")),
            n_censored=int(s.get("n_censored") or 0),
            withheld={str(k): str(v) for k, v in (s.get("withheld") or {}).items()},
            ci=ci,
            units=units,
        )

    @classmethod
    def rate(cls, k: int, n: int, sessions: Sequence[str] | None = None) -> Measurement:
        """k of n with a Wilson interval; ``sessions`` (one per opportunity, events first)
        lets the baseline comparison pair sessions and locate failures."""
        if not 0 <= k <= n:
            raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
        sess = list(sessions) if sessions is not None else [f"s{i}" for i in range(n)]
        if len(sess) != n:
            raise ValueError("sessions needs one label per opportunity")
        units = [Unit(f"{s}/{i}", s, event=i < k) for i, s in enumerate(sess)]
        lo, hi = wilson_interval(k, n)
        return cls(
            kind="rate",
            n=n,
            k=k,
            value=k / n if n else None,
            ci={"rate": (lo, hi)} if n else {},
            units=units,
        )

    @classmethod
    def count(cls, total: float, n: int, refs: Sequence[str] = ()) -> Measurement:
        """A summed count over ``n`` sessions; ``refs`` locate the counted instances."""
        units = [Unit(r, session_of(r), event=True) for r in refs]
        return cls(kind="count", n=n, value=float(total), k=int(total), units=units)

    @classmethod
    def scalar(
        cls, value: float | None, n: int, k: int | None = None, units: Sequence[Unit] = ()
    ) -> Measurement:
        """A plain value (e.g. events per hour) over ``n`` opportunities."""
        return cls(kind="value", n=n, value=value, k=k, units=list(units))

    # -- reading ----------------------------------------------------------------------------
    def statistic(self, stat: Statistic) -> StatValue:
        """The gate statistic ``stat`` of this measurement."""
        if self.kind == "latency":
            if stat not in QUANTILE:
                return StatValue(None, f"{stat} does not apply to a latency", applies=False)
            value = getattr(self, str(stat))
            if value is not None:
                return StatValue(float(value))
            why = self.withheld.get(str(stat), "not reported")
            if "censor" in why:
                return StatValue(math.inf, f"{stat} {why}")
            return StatValue(None, f"{stat} withheld: {why}")
        if stat in QUANTILE:
            return StatValue(None, f"{stat} applies to latencies, not a {self.kind}", False)
        if self.kind == "rate" and stat == Statistic.COUNT:
            return StatValue(None if self.k is None else float(self.k))
        if self.value is None:
            return StatValue(None, "no value (n = 0)" if self.n == 0 else "no value reported")
        return StatValue(float(self.value))


@dataclass
class MetricRow:
    """One metric as the run measured it: overall, per split value, and at which level.

    ``name`` is the report's name; ``source`` says where it was read (or how it was derived);
    ``splits[key][value]`` holds per-split measurements (key: route, category, device, ...).
    ``evidence_level`` is L1..L4 as derived by voxassay, or None when it is unknown;
    ``declared_level`` is the level when recordings' declared provenance (``provenance.json``)
    counts (None: no session behind the row declares any).
    """

    name: str
    source: str
    overall: Measurement
    splits: dict[str, dict[str, Measurement]] = field(default_factory=dict)
    evidence_level: str | None = None
    evidence_note: str = ""
    definition: str = ""
    declared_level: str | None = None
    declared_note: str = ""


@dataclass
class ReplaySource:
    """Where a session can be replayed from (bundle folder or recording) and whether it exists."""

    session: str
    path: str | None
    exists: bool


@dataclass
class RunProvenance:
    """What ``run.json`` records about the run: system specs, versions, configuration."""

    run_id: str | None = None
    systems: list[str] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)
    voxassay_version: str | None = None
    config_recorded: bool = False

    @classmethod
    def from_run_info(cls, info: Mapping[str, Any]) -> RunProvenance:
        config = info.get("config")
        systems = config.get("systems") if isinstance(config, dict) else None
        packages = info.get("packages")
        return cls(
            run_id=info.get("run_id"),
            systems=[str(s) for s in systems] if isinstance(systems, list) else [],
            packages=dict(packages) if isinstance(packages, dict) else {},
            voxassay_version=info.get("voxassay_version"),
            config_recorded=isinstance(config, dict) and bool(config),
        )

    def problems(self) -> list[str]:
        """What is missing for the run to count as recorded (empty: all recorded)."""
        out = []
        if not self.systems:
            out.append("run.json names no system specs (config.systems)")
        if not self.packages:
            out.append("run.json records no package versions")
        if not self.voxassay_version:
            out.append("run.json records no voxassay version")
        if not self.config_recorded:
            out.append("run.json records no configuration")
        return out


@dataclass
class MetricTable:
    """The measured values a matrix is checked against (one system of one run).

    ``rows`` are keyed by report name; ``lookup`` resolves a matrix metric name through
    the metric catalogue (``catalogue.gate_sources``). ``replay`` maps session ids to their replay source; ``hours`` is the
    total session time (for per-hour metrics); ``provenance`` is None when there is no run.json.
    """

    rows: dict[str, MetricRow] = field(default_factory=dict)
    run_id: str | None = None
    system: str | None = None
    evidence_level: str | None = None
    evidence_note: str = ""
    replay: dict[str, ReplaySource] = field(default_factory=dict)
    provenance: RunProvenance | None = None
    hours: float | None = None
    errored_items: list[str] = field(default_factory=list)

    def lookup(self, metric: str) -> tuple[MetricRow | None, list[str]]:
        """The row measuring matrix metric ``metric`` (None if none), and the names tried."""
        tried = list(catalogue.gate_sources(metric))
        for name in tried:
            row = self._resolve(name)
            if row is not None:
                return row, tried
        return None, tried

    def _resolve(self, name: str) -> MetricRow | None:
        kind, _, base = name.partition(":")
        if not base:
            return self.rows.get(name)
        src = self.rows.get(base)
        if src is None:
            return None
        if kind == "per_hour" and src.overall.kind == "rate" and self.hours:
            hours = self.hours
            return _derived(src, f"per_hour({base})", lambda m: _per_hour(m, hours))
        if kind == "completed" and src.overall.kind == "latency":
            return _derived(src, f"completed({base})", _completed)
        return None

    def unreplayable(self, units: Iterable[Unit]) -> list[str]:
        """Sessions among ``units`` that cannot be replayed (no source, or it is missing)."""
        bad = []
        for s in sorted({u.session for u in units}):
            src = self.replay.get(s)
            if src is None or not src.exists:
                bad.append(s)
        return bad


def _derived(src: MetricRow, source: str, fn: Any) -> MetricRow:
    return MetricRow(
        name=source,
        source=f"derived: {source}",
        overall=fn(src.overall),
        splits={k: {v: fn(m) for v, m in vals.items()} for k, vals in src.splits.items()},
        evidence_level=src.evidence_level,
        evidence_note=src.evidence_note,
        definition=f"derived from {src.name}",
    )


def _per_hour(m: Measurement, hours: float) -> Measurement:
    """Events per hour of session time; n stays the opportunities (no opportunity: no value)."""
    k = m.k or 0
    return Measurement.scalar(
        k / hours if m.n else None, m.n, k=k, units=[u for u in m.units if u.event]
    )


def _completed(m: Measurement) -> Measurement:
    """Share of latency pairs that ended (not censored), as a rate."""
    units = [Unit(u.ref, u.session, event=not u.censored) for u in m.units]
    k = m.n - m.n_censored
    lo, hi = wilson_interval(k, m.n)
    return Measurement(
        kind="rate",
        n=m.n,
        k=k,
        value=k / m.n if m.n else None,
        ci={"rate": (lo, hi)} if m.n else {},
        units=units,
    )


@dataclass
class Check:
    """One precondition or check of a gate: ``ok`` is None when it was not checked."""

    name: str
    ok: bool | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class GroupValue:
    """The gate statistic in one group: overall (``split`` None) or one split value."""

    split: str | None
    name: str
    n: int
    value: float | None
    note: str
    passes: bool | None

    @property
    def where(self) -> str:
        """``overall`` or ``split=name``, as reasons name the group."""
        return "overall" if self.split is None else f"{self.split}={self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "name": self.name,
            "n": self.n,
            "value": self.value,
            "censored_tail": self.value is not None and math.isinf(self.value),
            "note": self.note,
            "passes": self.passes,
        }


@dataclass
class BaselineDiff:
    """``current - baseline`` of the gate statistic, with a 95 % CI when per-item values exist.

    ``regression`` / ``improved``: the CI lies entirely on the worse / better side of zero
    (None when no CI could be computed). ``comparable``: both runs measured the metric at the
    same evidence level (only then can a regression decide the recommendation).
    """

    current: float | None
    baseline: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    method: str
    n_current: int
    n_baseline: int
    direction: Literal["better", "worse", "same", "unknown"]
    regression: bool | None
    improved: bool | None
    comparable: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class GateResult:
    """One gate checked against a table: its status, why, and everything it looked at."""

    gate: Gate
    status: GateStatus
    reasons: list[str]
    label: RowLabel
    level: str | None
    source: str | None
    value: float | None
    n: int | None
    groups: list[GroupValue] = field(default_factory=list)
    preconditions: list[Check] = field(default_factory=list)
    evidence: Check | None = None
    threshold_met: bool | None = None
    baseline: BaselineDiff | None = None
    evidence_basis: str = "derived"
    """declared when the level counted rests on recordings' declared provenance."""

    @property
    def label_text(self) -> str:
        if self.label == RowLabel.VERIFIED:
            declared = " (declared)" if self.evidence_basis == "declared" else ""
            return f"VERIFIED at {self.level}{declared}"
        return str(self.label)

    @property
    def decisive_regression(self) -> bool:
        """A significant regression on a roll_back gate, at the same evidence level."""
        b = self.baseline
        return bool(
            b is not None
            and b.regression
            and b.comparable
            and self.gate.on_fail == OnFail.ROLL_BACK
        )

    def to_dict(self) -> dict[str, Any]:
        g = self.gate
        return {
            "id": g.id,
            "metric": g.metric,
            "statistic": str(g.statistic),
            "comparator": g.comparator,
            "threshold": g.threshold,
            "unit": g.unit,
            "min_evidence": g.min_evidence,
            "required_n": g.required_n,
            "on_fail": str(g.on_fail),
            "mitigation": g.mitigation,
            "split_by": [str(s) for s in g.split_by],
            "status": str(self.status),
            "reasons": list(self.reasons),
            "label": str(self.label),
            "label_text": self.label_text,
            "evidence_level": self.level,
            "evidence_basis": self.evidence_basis,
            "source": self.source,
            "value": self.value,
            "censored_tail": self.value is not None and math.isinf(self.value),
            "n": self.n,
            "groups": [x.to_dict() for x in self.groups],
            "preconditions": [c.to_dict() for c in self.preconditions],
            "evidence": self.evidence.to_dict() if self.evidence else None,
            "threshold_met": self.threshold_met,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "decisive_regression": self.decisive_regression,
        }


@dataclass
class GateReport:
    """Every gate's result, the metric row labels and the one recommendation with reasons."""

    matrix_id: str
    run_id: str | None
    system: str | None
    gates: list[GateResult]
    recommendation: Recommendation
    reasons: list[str]
    baseline_run_id: str | None = None
    tradeoffs: dict[str, list[str]] = field(default_factory=dict)
    generated_at: str = ""
    allow_incomplete: bool = False
    """The matrix's ``allow_incomplete``: gates that could not be decided do not fail CI."""

    @property
    def failed(self) -> bool:
        """A gate failed or a baseline regression was decisive."""
        return any(r.status == GateStatus.FAIL or r.decisive_regression for r in self.gates)

    @property
    def exit_code(self) -> int:
        """0 for ship; 1 otherwise (a gate failed, or a gate could not be decided), except
        that with ``allow_incomplete`` undecided gates alone give 0."""
        if self.recommendation == Recommendation.SHIP:
            return 0
        return 0 if self.allow_incomplete and not self.failed else 1

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in GateStatus}
        for r in self.gates:
            out[str(r.status)] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        from voxassay.report.writer import json_safe

        rows: dict[str, dict[str, Any]] = {}
        for r in self.gates:
            rows.setdefault(
                r.gate.metric,
                {
                    "metric": r.gate.metric,
                    "source": r.source,
                    "label": str(r.label),
                    "label_text": r.label_text,
                    "evidence_level": r.level,
                    "n": r.n,
                },
            )
        body = {
            "kind": "duplex-gate",
            "gates_version": GATES_VERSION,
            "matrix": self.matrix_id,
            "run_id": self.run_id,
            "system": self.system,
            "baseline_run_id": self.baseline_run_id,
            "generated_at": self.generated_at,
            "recommendation": str(self.recommendation),
            "reasons": list(self.reasons),
            "precedence": [str(p) for p in PRECEDENCE],
            "exit_code": self.exit_code,
            "allow_incomplete": self.allow_incomplete,
            "status_counts": self.counts(),
            "metric_rows": list(rows.values()),
            "tradeoffs": self.tradeoffs,
            "gates": [r.to_dict() for r in self.gates],
        }
        result: dict[str, Any] = json_safe(body)
        return result

    def to_record(self) -> GateRecord:
        """The GateReport as gate.json holds it (the ``GateRecord`` contract)."""
        return GateRecord.model_validate(self.to_dict())
