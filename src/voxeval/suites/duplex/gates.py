"""Acceptance gates and the release decision (DESIGN.md, "Full-duplex ledger and bundle").

A duplex run's report becomes a ``MetricTable`` (``metric_table_from_report``): per metric the
measured statistics, the items behind them (so a baseline comparison can resample them), the
evidence level they were measured at, per-split values and, per session, where it can be
replayed from. ``evaluate_matrix`` checks an ``AcceptanceMatrix`` against the table, gate by
gate, in a fixed order:

1. **Preconditions**, each listed with its result: the metric was measured at all (else the
   gate is ``unknown``); ``n >= gate.required_n`` overall and in every value of every
   ``split_by`` key the run records (else ``insufficient_n``: collect more data; a run that
   records no value for a split key counts as one group); every failure behind the metric is
   replayable (its session names a bundle folder or recording that exists) and the run's
   ``run.json`` records system specs, package versions and configuration (else
   ``insufficient_evidence``).
2. **Evidence**: the level the metric was measured at must be at least ``gate.min_evidence``;
   a metric measured below it, or with unknown provenance (recordings scored without a bundle
   manifest), cannot pass (``insufficient_evidence``).
3. **Threshold**: ``Gate.passes`` on the statistic, overall and in every split value; every
   group must pass. A percentile that falls among censored pairs (no end event) counts as
   +infinity: it fails an upper bound.

The first step that does not hold decides the status (``pass | fail | insufficient_n |
insufficient_evidence | unknown``); every blocker is listed in the gate's reasons, and the
threshold outcome is shown even when it is not decisive. Each gate's metric row is labelled
``VERIFIED`` at the level it was measured at, ``IMPLEMENTED`` (voxeval computes the metric, but
this run holds no evidence for it: absent, n = 0, or provenance unknown) or ``UNKNOWN``
(nothing in voxeval or the run measures it).

With a baseline run, every gate also gets ``current - baseline`` with a 95 % CI: latencies by
a percentile bootstrap over sessions (paired, i.e. the same session draw for both runs, when
both runs hold the same sessions; independent otherwise), rates by the paired bootstrap of
``stats.intervals`` (the engine of ``voxeval compare``) on identical session sets, else
Newcombe's hybrid score interval for two independent proportions. Counts and plain values get
the difference only. A difference whose CI lies entirely on the worse side (worse: above the
threshold side for ``<``/``<=`` gates, below it for ``>``/``>=``, away from the threshold for
``==``) is a ``regression``; improvements are flagged the same way, and the report lists
metrics that improved next to those that got worse (trade-offs).

The recommendation (one word, with reasons) follows ``PRECEDENCE``::

    roll_back > block > keep_in_shadow > collect_more_data > ship

``roll_back``: a failed gate whose ``on_fail`` is ``roll_back``, or a significant regression
against the baseline on such a gate measured at the same evidence level in both runs;
``block`` / ``keep_in_shadow`` / ``collect_more_data``: a failed gate with that ``on_fail``;
``collect_more_data`` also when nothing failed but a gate is ``insufficient_n``,
``insufficient_evidence`` or ``unknown``; ``ship`` only when every gate passes. The most severe
applicable action wins. ``voxeval duplex gate`` exits 0 only for ``ship``: ``collect_more_data``
exits 1 as well, since nothing was shown to pass.
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from voxeval.contracts.duplex import catalogue
from voxeval.contracts.duplex.evidence import EVIDENCE_LEVELS, evidence_at_least
from voxeval.contracts.duplex.matrix import AcceptanceMatrix, Gate, OnFail, Statistic
from voxeval.contracts.duplex.scorecard import (
    CheckEntry,
    CountEntry,
    GroupCard,
    LatencyEntry,
    Overall,
    RateEntry,
    Scorecard,
    SessionCard,
    ValueEntry,
)
from voxeval.stats.comparison import quantile_difference, rate_difference
from voxeval.stats.intervals import wilson_interval

__all__ = [
    "GATES_VERSION",
    "GATE_FILES",
    "PRECEDENCE",
    "BaselineDiff",
    "Check",
    "GateReport",
    "GateResult",
    "GateStatus",
    "GroupValue",
    "Measurement",
    "MetricRow",
    "MetricTable",
    "Recommendation",
    "ReplaySource",
    "RowLabel",
    "RunProvenance",
    "Unit",
    "evaluate_matrix",
    "metric_table_from_report",
    "metric_table_from_run",
    "recommend",
    "render_markdown",
    "render_text",
    "write_gate_files",
    "write_junit",
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
    BLOCK = "block"
    KEEP_IN_SHADOW = "keep_in_shadow"
    COLLECT_MORE_DATA = "collect_more_data"


class RowLabel(StrEnum):
    """DESIGN.md's claim labels for a metric row."""

    IMPLEMENTED = "IMPLEMENTED"
    VERIFIED = "VERIFIED"
    UNKNOWN = "UNKNOWN"


PRECEDENCE: tuple[Recommendation, ...] = (
    Recommendation.ROLL_BACK,
    Recommendation.BLOCK,
    Recommendation.KEEP_IN_SHADOW,
    Recommendation.COLLECT_MORE_DATA,
    Recommendation.SHIP,
)
"""Most severe first: when several actions apply, the first one in this order is recommended."""

_LEVEL_RANK: dict[str, int] = {lvl: i for i, lvl in enumerate(EVIDENCE_LEVELS)}
_QUANTILE = {Statistic.P50: 0.5, Statistic.P95: 0.95, Statistic.P99: 0.99}


def _implemented_names() -> set[str]:
    """Matrix names that resolve to something a voxeval scorer computes (IMPLEMENTED label):
    every computed metric, and every catalogue name or alias whose sources include one."""
    from voxeval.suites.duplex.scoring.implemented import implemented_metrics

    computed = {name for names in implemented_metrics().values() for name in names}
    names = set(computed)
    for m in catalogue.CATALOGUE:
        for candidate in (m.name, *m.aliases):
            sources = catalogue.gate_sources(candidate)
            if any(src.split(":", 1)[-1] in computed for src in sources):
                names.add(candidate)
    return names


# --------------------------------------------------------------------------- measurements


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


def _session_of(ref: str) -> str:
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
        from voxeval.stats.percentiles import summarize_values

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
        units = [Unit(r, _session_of(r), event=True) for r in refs]
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
            if stat not in _QUANTILE:
                return StatValue(None, f"{stat} does not apply to a latency", applies=False)
            value = getattr(self, str(stat))
            if value is not None:
                return StatValue(float(value))
            why = self.withheld.get(str(stat), "not reported")
            if "censor" in why:
                return StatValue(math.inf, f"{stat} {why}")
            return StatValue(None, f"{stat} withheld: {why}")
        if stat in _QUANTILE:
            return StatValue(None, f"{stat} applies to latencies, not a {self.kind}", False)
        if self.kind == "rate" and stat == Statistic.COUNT:
            return StatValue(None if self.k is None else float(self.k))
        if self.value is None:
            return StatValue(None, "no value (n = 0)" if self.n == 0 else "no value reported")
        return StatValue(float(self.value))


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class MetricRow:
    """One metric as the run measured it: overall, per split value, and at which level.

    ``name`` is the report's name; ``source`` says where it was read (or how it was derived);
    ``splits[key][value]`` holds per-split measurements (key: route, category, device, ...).
    ``evidence_level`` is L1..L4, or None when the provenance is unknown.
    """

    name: str
    source: str
    overall: Measurement
    splits: dict[str, dict[str, Measurement]] = field(default_factory=dict)
    evidence_level: str | None = None
    evidence_note: str = ""
    definition: str = ""


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
    voxeval_version: str | None = None
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
            voxeval_version=info.get("voxeval_version"),
            config_recorded=isinstance(config, dict) and bool(config),
        )

    def problems(self) -> list[str]:
        """What is missing for the run to count as recorded (empty: all recorded)."""
        out = []
        if not self.systems:
            out.append("run.json names no system specs (config.systems)")
        if not self.packages:
            out.append("run.json records no package versions")
        if not self.voxeval_version:
            out.append("run.json records no voxeval version")
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


# --------------------------------------------------------------------------- from a scorecard


def _level(x: Any) -> str | None:
    return x if isinstance(x, str) and x in _LEVEL_RANK else None


def _session_levels(card: Scorecard, sessions: Sequence[SessionCard]) -> dict[str, str | None]:
    """Each session's derived level: the run's ``evidence.sessions`` table, then the level
    listed with the session itself."""
    out: dict[str, str | None] = {}
    table = (card.evidence.model_extra or {}).get("sessions")
    if isinstance(table, dict):
        for sid, lvl in table.items():
            out[str(sid)] = _level(lvl.get("level") if isinstance(lvl, dict) else lvl)
    for s in sessions:
        if s.evidence_level is not None:
            out[s.id] = _level(s.evidence_level)
    return out


def _replay_source(session: SessionCard, run_dir: Path | None) -> ReplaySource:
    """Where a session can be replayed from: its bundle, else its recording's audio files,
    else ``bundles/<id>`` of the run."""

    def resolve(p: str) -> Path:
        path = Path(p)
        return path if path.is_absolute() or run_dir is None else run_dir / path

    if session.bundle:
        path = resolve(session.bundle)
        return ReplaySource(session.id, str(path), path.is_dir())
    audio = session.audio
    paths = [audio] if isinstance(audio, str) else list(audio or [])
    if paths:
        resolved = [resolve(str(p)) for p in paths]
        return ReplaySource(
            session.id, ", ".join(map(str, resolved)), all(p.is_file() for p in resolved)
        )
    if run_dir is not None:
        path = run_dir / "bundles" / session.id
        return ReplaySource(session.id, str(path), path.is_dir())
    return ReplaySource(session.id, None, False)


def _opportunity_units(events: Sequence[str], denominator: Sequence[str]) -> list[Unit]:
    hit = set(events)
    if denominator:
        return [Unit(r, _session_of(r), event=r in hit) for r in denominator]
    return [Unit(r, _session_of(r), event=True) for r in events]


Entry = LatencyEntry | RateEntry | CheckEntry | CountEntry | ValueEntry


def _measurement(e: Entry) -> Measurement:
    """One scorecard entry (latency, rate, task check, count or value) as a Measurement."""
    if isinstance(e, LatencyEntry):
        units = [
            Unit(
                v.ref,
                v.session or _session_of(v.ref),
                None if v.censored or _num(v.value_ms) is None else _num(v.value_ms),
                v.censored or _num(v.value_ms) is None,
            )
            for v in e.values
        ]
        summary = e.model_dump(include={"n", "p50", "p95", "p99", "n_censored", "withheld"})
        summary.update({"p50_ci": e.p50_ci, "p95_ci": e.p95_ci})
        return Measurement._from_latency_summary(summary, units)
    if isinstance(e, RateEntry | CheckEntry):
        k = e.k if isinstance(e, RateEntry) else e.passed
        value = e.value if isinstance(e, RateEntry) else e.rate
        lo, hi = _num(e.ci_low), _num(e.ci_high)
        return Measurement(
            kind="rate",
            n=e.n,
            k=None if k is None else int(k),
            value=_num(value),
            ci={"rate": (lo, hi)} if lo is not None or hi is not None else {},
            units=_opportunity_units(e.events, e.denominator),
        )
    if isinstance(e, CountEntry):
        total = _num(e.total)
        return Measurement(
            kind="count",
            n=e.sessions_counted,
            value=total,
            k=None if total is None else int(total),
            units=[Unit(r, _session_of(r), event=True) for r in e.events],
        )
    return Measurement(
        kind="value",
        n=e.n,
        value=_num(e.value),
        k=e.k,
        units=_opportunity_units(e.events, e.denominator),
    )


def _row_level(
    m: Measurement,
    stated: str | None,
    run_level: str | None,
    session_levels: Mapping[str, str | None],
) -> tuple[str | None, str]:
    """The level a metric was measured at: the weakest level among the sessions behind it
    (a sample is only as strong as its weakest part); unknown if any of them is unknown."""
    explicit = _level(stated)
    if explicit is not None:
        return explicit, "level stated by the scorer for this metric"
    sessions = {u.session for u in m.units}
    if sessions and session_levels:
        levels = [session_levels.get(s, run_level) for s in sorted(sessions)]
        if any(lv is None for lv in levels):
            unknown = sum(1 for lv in levels if lv is None)
            return None, f"{unknown} of {len(levels)} session(s) have no derived evidence level"
        weakest = min(levels, key=lambda lv: _LEVEL_RANK[str(lv)])
        return weakest, f"weakest level among {len(levels)} session(s)"
    if run_level is None:
        return None, "provenance unknown: the run has no derived evidence level"
    return run_level, "run-wide evidence level"


def _entries(block: Overall | GroupCard) -> list[tuple[str, str, Entry]]:
    """(name, source, entry) of every metric of an overall block or a split group."""
    out: list[tuple[str, str, Entry]] = []
    sections: tuple[tuple[str, Mapping[str, Entry]], ...] = (
        ("latencies", block.latencies),
        ("rates", block.rates),
        ("counts", block.counts),
        ("values", block.values),
    )
    for section, entries in sections:
        out += [(name, f"overall.{section}.{name}", e) for name, e in entries.items()]
    if isinstance(block, Overall) and block.task is not None:
        out += [(n, f"overall.task.checks.{n}", e) for n, e in block.task.checks.items()]
        out += [(n, f"overall.task.counts.{n}", e) for n, e in block.task.counts.items()]
    return out


def metric_table_from_report(
    report: Scorecard | Mapping[str, Any],
    *,
    run_dir: str | Path | None = None,
    run_info: Mapping[str, Any] | None = None,
    system: str | None = None,
) -> MetricTable:
    """The table of one system of a duplex run, read from its Scorecard (a report.json's
    content is validated into one first).

    Per metric: the overall entry (latencies, rates, counts, values, task checks and counts)
    and its splits (``by`` inside an entry, or the system's ``groups``), at the weakest
    evidence level of the sessions behind it; the sessions' replay sources (bundle, else
    the recording's audio, else ``bundles/<id>``); the run's hours. ``run_info``
    (``run.json``, read from ``run_dir`` when omitted) supplies the provenance. ``system``
    picks a system when the run has several.
    """
    card = report if isinstance(report, Scorecard) else Scorecard.model_validate(report)
    rdir = Path(run_dir) if run_dir is not None else None
    if run_info is None and rdir is not None and (rdir / "run.json").is_file():
        run_info = json.loads((rdir / "run.json").read_text(encoding="utf-8"))
    entry = card.system(system)
    spec = entry.system
    sessions = [s for s in card.sessions if (s.system or spec) == spec]
    replay = {src.session: src for src in (_replay_source(s, rdir) for s in sessions)}
    durations = [_num(s.duration_s) for s in sessions]
    hours = (
        sum(d for d in durations if d is not None) / 3600.0
        if durations and all(d is not None for d in durations)
        else None
    )
    run_level = _level(card.evidence.level)
    run_note = str(card.evidence.note or card.evidence.status or "")
    levels = _session_levels(card, sessions)

    rows: dict[str, MetricRow] = {}
    for name, source, item in _entries(entry.overall):
        m = _measurement(item)
        level, note = _row_level(m, item.evidence_level, run_level, levels)
        row = MetricRow(
            name=name,
            source=source,
            overall=m,
            evidence_level=level,
            evidence_note=note,
            definition=item.definition,
        )
        by: Mapping[str, Mapping[str, Entry]] = getattr(item, "by", {}) or {}
        for key, by_value in by.items():
            for value, sub in by_value.items():
                row.splits.setdefault(str(key), {})[str(value)] = _measurement(sub)
        rows[name] = row
    for g in entry.groups:
        for name, _, item in _entries(g):
            if name in rows:
                rows[name].splits.setdefault(g.group, {})[g.name] = _measurement(item)

    errored = [str(f.get("id")) for f in entry.failures if isinstance(f, dict)]
    return MetricTable(
        rows=rows,
        run_id=card.run_id or (run_info or {}).get("run_id"),
        system=spec,
        evidence_level=run_level,
        evidence_note=run_note,
        replay=replay,
        provenance=RunProvenance.from_run_info(run_info) if run_info is not None else None,
        hours=hours,
        errored_items=errored,
    )


def load_scorecard(run_dir: str | Path) -> tuple[Scorecard, dict[str, Any]]:
    """A duplex run's Scorecard (its report.json, or rebuilt in memory from the folder when
    the file is absent; nothing is written) and its run.json."""
    from voxeval.core.errors import InputError
    from voxeval.core.runstore import RunStore

    store = RunStore.open(run_dir)
    info = store.info()
    if info.get("suite") != "duplex":
        raise InputError(f"{run_dir} is a {info.get('suite')!r} run, not a duplex run")
    path = store.path / "report.json"
    if not path.is_file():
        from voxeval.suites.duplex.report import build_scorecard

        return build_scorecard(store), info
    try:
        return Scorecard.model_validate_json(path.read_bytes()), info
    except ValidationError as exc:
        raise InputError(
            f"{path}: not a duplex scorecard: {exc.errors()[0]['msg']} at "
            f"{'.'.join(map(str, exc.errors()[0]['loc']))}"
        ) from None


def metric_table_from_run(run_dir: str | Path, *, system: str | None = None) -> MetricTable:
    """``metric_table_from_report`` on a run folder (``load_scorecard``)."""
    card, info = load_scorecard(run_dir)
    return metric_table_from_report(card, run_dir=Path(run_dir), run_info=info, system=system)


# --------------------------------------------------------------------------- gate results


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

    @property
    def label_text(self) -> str:
        if self.label == RowLabel.VERIFIED:
            return f"VERIFIED at {self.level}"
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
            "split_by": [str(s) for s in g.split_by],
            "status": str(self.status),
            "reasons": list(self.reasons),
            "label": str(self.label),
            "label_text": self.label_text,
            "evidence_level": self.level,
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

    @property
    def exit_code(self) -> int:
        """0 for ship; 1 otherwise (a gate or check failed, or nothing was shown to pass)."""
        return 0 if self.recommendation == Recommendation.SHIP else 1

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in GateStatus}
        for r in self.gates:
            out[str(r.status)] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        from voxeval.report.writer import json_safe

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
            "status_counts": self.counts(),
            "metric_rows": list(rows.values()),
            "tradeoffs": self.tradeoffs,
            "gates": [r.to_dict() for r in self.gates],
        }
        result: dict[str, Any] = json_safe(body)
        return result


# --------------------------------------------------------------------------- evaluation


def _failing_units(gate: Gate, m: Measurement) -> tuple[list[Unit], int]:
    """The items behind a metric that count as failures for this gate, and how many failures
    the report counts but does not locate (no item refs)."""
    cmp, t = gate.comparator, gate.threshold
    if m.kind == "latency":
        bad = [
            u
            for u in m.units
            if u.censored or (u.value_ms is not None and not gate.passes(u.value_ms))
        ]
        unlocated = max(0, m.n_censored - sum(1 for u in m.units if u.censored))
        return bad, unlocated
    if m.kind == "rate":
        if cmp in ("<=", "<") or (cmp == "==" and t == 0):
            bad = [u for u in m.units if u.event]
            expected = m.k or 0
        elif cmp in (">=", ">") or (cmp == "==" and t == 1):
            bad = [u for u in m.units if u.event is False]
            expected = m.n - (m.k or 0)
        else:
            bad = list(m.units)
            expected = m.n
        return bad, max(0, expected - len(bad))
    bad = [u for u in m.units if u.event]  # counted instances / events behind a value
    return bad, max(0, int(m.k or 0) - len(bad))


def _fmt_value(v: float | None, unit: str = "") -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "censored"
    text = f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}".strip() if unit and unit not in ("fraction", "count") else text


def _evaluate_gate(gate: Gate, table: MetricTable, implemented: set[str]) -> GateResult:
    row, tried = table.lookup(gate.metric)
    need = gate.required_n
    if row is None:
        known = gate.metric in implemented
        why = (
            f"no metric in this run measures {gate.metric!r} (looked for: {', '.join(tried)})"
            if known
            else f"nothing measures {gate.metric!r}: no voxeval scorer and no metric of this "
            f"run has that name (looked for: {', '.join(tried)})"
        )
        return GateResult(
            gate=gate,
            status=GateStatus.UNKNOWN,
            reasons=[why],
            label=RowLabel.IMPLEMENTED if known else RowLabel.UNKNOWN,
            level=None,
            source=None,
            value=None,
            n=None,
            preconditions=[
                Check("measured", False, why),
                Check("sample_size", None, "not checked: nothing measured"),
                Check("replayable", None, "not checked: nothing measured"),
                Check("versions_recorded", None, "not checked: nothing measured"),
            ],
            evidence=Check("evidence", None, "not checked: nothing measured"),
        )

    m = row.overall
    reasons: list[str] = []
    stat = m.statistic(gate.statistic)
    measured_ok = stat.applies
    measured = Check(
        "measured",
        measured_ok,
        f"{row.source} ({m.kind}, n = {m.n})"
        + ("" if stat.applies else f"; but {stat.note}: the gate cannot read it"),
    )
    if not stat.applies:
        reasons.append(f"{gate.metric} is measured as {row.source}, but {stat.note}")

    # groups: overall plus every value of every split key the gate asks for
    groups = [GroupValue(None, "all", m.n, stat.value, stat.note, None)]
    split_notes: list[str] = []
    for key in gate.split_by:
        values = row.splits.get(str(key))
        if not values:
            split_notes.append(f"the run records no {key} split: the whole sample is one {key}")
            continue
        for name, sm in sorted(values.items()):
            sv = sm.statistic(gate.statistic)
            groups.append(GroupValue(str(key), name, sm.n, sv.value, sv.note, None))
    short = [g for g in groups if g.n < need]
    if short:
        detail = "; ".join(
            f"{'overall' if g.split is None else f'{g.split}={g.name}'}: n = {g.n} < {need}"
            for g in short
        )
        reasons.append(f"too few samples for a {gate.statistic} gate ({detail}): collect more data")
    else:
        detail = f"n >= {need} in {len(groups)} group(s)"
    if split_notes:
        detail += "; " + "; ".join(split_notes)
    sample = Check("sample_size", not short, detail)

    # every failure behind the metric replayable
    bad_units, unlocated = _failing_units(gate, m)
    missing = table.unreplayable(bad_units)
    replay_ok = not missing and unlocated == 0
    if not bad_units and unlocated == 0:
        replay_detail = "no failures behind this metric"
    elif replay_ok:
        n_sess = len({u.session for u in bad_units})
        replay_detail = f"{len(bad_units)} failure(s) in {n_sess} session(s), all replayable"
    else:
        parts = []
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            parts.append(f"{len(missing)} session(s) with failures cannot be replayed ({shown})")
        if unlocated:
            parts.append(f"{unlocated} failure(s) the report does not locate in any session")
        replay_detail = "; ".join(parts)
        reasons.append(f"failures not replayable: {replay_detail}")
    replayable = Check("replayable", replay_ok, replay_detail)

    prov_problems = (
        table.provenance.problems()
        if table.provenance is not None
        else ["no run.json: versions and configuration are not recorded"]
    )
    versions = Check(
        "versions_recorded",
        not prov_problems,
        "; ".join(prov_problems) or "system specs, package versions and configuration recorded",
    )
    if prov_problems:
        reasons.append("run not reproducible: " + "; ".join(prov_problems))

    # evidence
    level = row.evidence_level
    if level is None:
        ev_ok = False
        ev_detail = f"no evidence level ({row.evidence_note}); the gate needs {gate.min_evidence}"
    else:
        ev_ok = evidence_at_least(level, gate.min_evidence)
        ev_detail = f"measured at {level} ({row.evidence_note}); the gate needs {gate.min_evidence}"
    if not ev_ok:
        reasons.append(f"evidence too weak: {ev_detail}")
    evidence = Check("evidence", ev_ok, ev_detail)

    # threshold, per group
    for g in groups:
        g.passes = gate.passes(g.value) if g.value is not None and stat.applies else None
    verdicts = [g.passes for g in groups]
    if any(v is False for v in verdicts):
        threshold_met: bool | None = False
    elif verdicts and all(v is True for v in verdicts):
        threshold_met = True
    else:
        threshold_met = None
    failing = [g for g in groups if g.passes is False]
    unit = gate.unit
    bound = f"{gate.comparator} {_fmt_value(gate.threshold, unit)}"
    if threshold_met is False:
        where = ", ".join(
            f"{'overall' if g.split is None else f'{g.split}={g.name}'} {_fmt_value(g.value, unit)}"
            for g in failing
        )
        threshold_text = f"{gate.statistic} {where} not {bound}"
    elif threshold_met:
        threshold_text = f"{gate.statistic} {_fmt_value(stat.value, unit)} {bound}"
    else:
        missing_vals = [g for g in groups if g.value is None]
        threshold_text = "no value to compare: " + "; ".join(
            sorted({g.note or "not reported" for g in missing_vals})
        )

    if not measured_ok:
        status = GateStatus.UNKNOWN
    elif short:
        status = GateStatus.INSUFFICIENT_N
    elif not replay_ok or prov_problems or not ev_ok:
        status = GateStatus.INSUFFICIENT_EVIDENCE
    elif threshold_met is True:
        status = GateStatus.PASS
    elif threshold_met is False:
        status = GateStatus.FAIL
    else:
        status = GateStatus.INSUFFICIENT_N
        reasons.append(threshold_text)
    if status in (GateStatus.PASS, GateStatus.FAIL):
        reasons.insert(0, threshold_text)
    elif threshold_met is not None and measured_ok:
        verdict = "would pass" if threshold_met else "would fail"
        reasons.append(f"threshold (not decisive): {threshold_text} ({verdict})")

    label = RowLabel.VERIFIED if m.n > 0 and level is not None else RowLabel.IMPLEMENTED
    return GateResult(
        gate=gate,
        status=status,
        reasons=reasons,
        label=label,
        level=level,
        source=row.source,
        value=stat.value,
        n=m.n,
        groups=groups,
        preconditions=[measured, sample, replayable, versions],
        evidence=evidence,
        threshold_met=threshold_met,
    )


# --------------------------------------------------------------------------- baseline


def _latency_groups(units: Sequence[Unit]) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for u in units:
        value = math.inf if u.censored or u.value_ms is None else float(u.value_ms)
        groups.setdefault(u.session, []).append(value)
    return groups


def _rate_groups(m: Measurement) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for u in m.units:
        k, n = out.get(u.session, (0, 0))
        out[u.session] = (k + (1 if u.event else 0), n + 1)
    return out


def _latency_diff(
    cur: Measurement, base: Measurement, q: float, n_boot: int, seed: int
) -> tuple[float | None, float | None, str]:
    d = quantile_difference(
        _latency_groups(cur.units), _latency_groups(base.units), q, n_boot=n_boot, seed=seed
    )
    return (None, None, "no pairs") if d is None else (d.ci_low, d.ci_high, d.method)


def _rate_diff(
    cur: Measurement, base: Measurement, n_boot: int, seed: int
) -> tuple[float | None, float | None, str]:
    if cur.k is None or base.k is None:
        return None, None, "no k/n: difference only"
    d = rate_difference(
        (cur.k, cur.n),
        (base.k, base.n),
        current_sessions=_rate_groups(cur) if len(cur.units) == cur.n else None,
        baseline_sessions=_rate_groups(base) if len(base.units) == base.n else None,
        n_boot=n_boot,
        seed=seed,
    )
    return (None, None, "n = 0 in a run") if d is None else (d.ci_low, d.ci_high, d.method)


def _worse_sign(gate: Gate, kind: str) -> int:
    """+1 when a larger value is worse for this gate, -1 when a smaller one is: the gate's
    comparator says so; for ``==`` the metric catalogue's direction of the measured row's kind
    (a check's pass rate and the count of the same name point opposite ways)."""
    if gate.comparator in ("<=", "<"):
        return 1
    if gate.comparator in (">=", ">"):
        return -1
    return -1 if catalogue.higher_is_better(gate.metric, kind) else 1


def _compare(
    gate: Gate,
    cur_row: MetricRow | None,
    base_row: MetricRow | None,
    n_boot: int,
    seed: int,
) -> BaselineDiff:
    def nothing(vc: float | None, vb: float | None, nc: int, nb: int, why: str) -> BaselineDiff:
        return BaselineDiff(
            current=vc,
            baseline=vb,
            diff=None,
            ci_low=None,
            ci_high=None,
            method="none",
            n_current=nc,
            n_baseline=nb,
            direction="unknown",
            regression=None,
            improved=None,
            comparable=False,
            note=why,
        )

    if cur_row is None or base_row is None:
        who = (
            "neither run measures"
            if cur_row is None and base_row is None
            else "the current run does not measure"
            if cur_row is None
            else "the baseline does not measure"
        )
        return nothing(None, None, 0, 0, f"{who} {gate.metric}")
    cur, base = cur_row.overall, base_row.overall
    vc, vb = cur.statistic(gate.statistic).value, base.statistic(gate.statistic).value
    if vc is None or vb is None:
        where = "the current run" if vb is not None else "the baseline" if vc is not None else ""
        return nothing(vc, vb, cur.n, base.n, f"no {gate.statistic} in {where or 'either run'}")
    comparable = cur_row.evidence_level == base_row.evidence_level
    note = (
        ""
        if comparable
        else f"evidence levels differ ({cur_row.evidence_level} vs {base_row.evidence_level}): "
        "the difference cannot decide the recommendation"
    )
    if math.isinf(vc) and math.isinf(vb):
        diff: float | None = None
    else:
        diff = vc - vb
    lo: float | None = None
    hi: float | None = None
    method = "difference only (no per-item values)"
    if cur.kind == "latency" and gate.statistic in _QUANTILE:
        if cur.units and base.units:
            lo, hi, method = _latency_diff(cur, base, _QUANTILE[gate.statistic], n_boot, seed)
    elif cur.kind == "rate" and base.kind == "rate" and gate.statistic == Statistic.RATE:
        lo, hi, method = _rate_diff(cur, base, n_boot, seed)
    sign = _worse_sign(gate, cur.kind)
    if diff is None:
        direction: Literal["better", "worse", "same", "unknown"] = "unknown"
    elif diff * sign > 0:
        direction = "worse"
    elif diff * sign < 0:
        direction = "better"
    else:
        direction = "same"
    regression: bool | None = None
    improved: bool | None = None
    if lo is not None and hi is not None:
        worse_bound, better_bound = (lo, hi) if sign > 0 else (-hi, -lo)
        regression = worse_bound > 0
        improved = better_bound < 0
    elif cur.kind == "latency" and math.isinf(vc) != math.isinf(vb):
        note = (note + "; " if note else "") + "one run's statistic falls among censored pairs"
    return BaselineDiff(
        current=vc,
        baseline=vb,
        diff=diff,
        ci_low=lo,
        ci_high=hi,
        method=method,
        n_current=cur.n,
        n_baseline=base.n,
        direction=direction,
        regression=regression,
        improved=improved,
        comparable=comparable,
        note=note,
    )


# --------------------------------------------------------------------------- decision


def recommend(results: Sequence[GateResult]) -> tuple[Recommendation, list[str]]:
    """The one recommendation (``PRECEDENCE``: most severe applicable action) and its reasons,
    most severe first."""
    found: list[tuple[Recommendation, str]] = []
    for r in results:
        g = r.gate
        if r.status == GateStatus.FAIL:
            action = Recommendation(str(g.on_fail))
            found.append((action, f"{g.id}: failed ({r.reasons[0]}); on_fail {g.on_fail}"))
        elif r.status != GateStatus.PASS:
            why = "; ".join(r.reasons) or str(r.status)
            found.append((Recommendation.COLLECT_MORE_DATA, f"{g.id}: {r.status} ({why})"))
        b = r.baseline
        if b is not None and b.regression:
            text = (
                f"{g.id}: significant regression vs baseline ({_fmt_value(b.current, g.unit)} "
                f"vs {_fmt_value(b.baseline, g.unit)}, 95% CI of the difference "
                f"[{_fmt_value(b.ci_low)}, {_fmt_value(b.ci_high)}])"
            )
            if r.decisive_regression:
                found.append((Recommendation.ROLL_BACK, text + "; on_fail roll_back"))
            else:
                why = b.note if not b.comparable else f"on_fail is {g.on_fail}, not roll_back"
                found.append((Recommendation.SHIP, text + f"; noted, not decisive ({why})"))
    actions = {a for a, _ in found if a != Recommendation.SHIP}
    if not actions:
        rec = Recommendation.SHIP
        head = [f"all {len(results)} gate(s) pass"]
    else:
        rec = min(actions, key=PRECEDENCE.index)
        head = []
    ordered = sorted(found, key=lambda x: PRECEDENCE.index(x[0]))
    return rec, head + [text for _, text in ordered]


def evaluate_matrix(
    matrix: AcceptanceMatrix,
    table: MetricTable,
    *,
    baseline: MetricTable | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> GateReport:
    """Check every gate of ``matrix`` against ``table`` (preconditions, evidence, threshold),
    compare with ``baseline`` when given, and recommend one action (module docstring)."""
    from voxeval.core.runstore import utc_now

    implemented = _implemented_names()
    results = [_evaluate_gate(g, table, implemented) for g in matrix.gates]
    tradeoffs: dict[str, list[str]] = {}
    if baseline is not None:
        for r in results:
            cur_row, _ = table.lookup(r.gate.metric)
            base_row, _ = baseline.lookup(r.gate.metric)
            r.baseline = _compare(r.gate, cur_row, base_row, n_boot, seed)
        improved = [
            f"{r.gate.id} ({_fmt_value(r.baseline.diff, r.gate.unit)})"
            for r in results
            if r.baseline and r.baseline.improved
        ]
        worsened = [
            f"{r.gate.id} ({_fmt_value(r.baseline.diff, r.gate.unit)})"
            for r in results
            if r.baseline and r.baseline.regression
        ]
        tradeoffs = {"improved": improved, "worsened": worsened}
    rec, reasons = recommend(results)
    if tradeoffs.get("improved") and tradeoffs.get("worsened"):
        reasons.append(
            "trade-off vs baseline: improved "
            + ", ".join(tradeoffs["improved"])
            + " while worse "
            + ", ".join(tradeoffs["worsened"])
        )
    return GateReport(
        matrix_id=matrix.id,
        run_id=table.run_id,
        system=table.system,
        gates=results,
        recommendation=rec,
        reasons=reasons,
        baseline_run_id=baseline.run_id if baseline is not None else None,
        tradeoffs=tradeoffs,
        generated_at=utc_now(),
    )


# --------------------------------------------------------------------------- output


def _row_cells(r: GateResult) -> list[str]:
    g = r.gate
    need_level = g.min_evidence
    name = r.source.removeprefix("derived: ").split(".")[-1] if r.source else None
    return [
        g.id,
        g.metric if name in (None, g.metric) else f"{g.metric} = {name}",
        str(g.statistic),
        _fmt_value(r.value, g.unit),
        f"{g.comparator} {_fmt_value(g.threshold, g.unit)}",
        f"{'–' if r.n is None else r.n}/{g.required_n}",
        f"{r.level or 'none'}/{need_level}",
        str(r.status),
        r.label_text,
    ]


_HEADERS = [
    "gate",
    "metric",
    "stat",
    "measured",
    "threshold",
    "n/need",
    "level/need",
    "status",
    "row",
]


def render_text(report: GateReport) -> str:
    """The terminal view: a table of gates, then the one recommendation and its reasons."""
    rows = [_HEADERS] + [_row_cells(r) for r in report.gates]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines = [
        f"matrix {report.matrix_id} on run {report.run_id} (system {report.system})"
        + (f", baseline {report.baseline_run_id}" if report.baseline_run_id else "")
    ]
    for i, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if report.baseline_run_id:
        lines.append("")
        lines.append("vs baseline (current - baseline):")
        for r in report.gates:
            b = r.baseline
            if b is None:
                continue
            flag = " REGRESSION" if b.regression else " improved" if b.improved else ""
            ci = (
                f" [{_fmt_value(b.ci_low)}, {_fmt_value(b.ci_high)}]"
                if b.ci_low is not None or b.ci_high is not None
                else ""
            )
            lines.append(
                f"  {r.gate.id}: {_fmt_value(b.diff, r.gate.unit)}{ci} {b.direction}{flag}"
                + (f" ({b.note})" if b.note else "")
            )
    lines.append("")
    lines.append(f"recommendation: {report.recommendation}")
    lines += [f"  - {x}" for x in report.reasons]
    return "\n".join(lines)


def render_markdown(report: GateReport) -> str:
    """``gate.md``: the gate table, the recommendation, and each gate's checks."""
    from voxeval.report.markdown import md_table

    out = [
        f"# Acceptance gates: {report.matrix_id}\n",
        f"Run `{report.run_id}`, system `{report.system}`"
        + (f", baseline `{report.baseline_run_id}`" if report.baseline_run_id else "")
        + f". Generated {report.generated_at}.\n",
        f"**Recommendation: `{report.recommendation}`** (precedence "
        + " > ".join(str(p) for p in PRECEDENCE)
        + "; exit code "
        + str(report.exit_code)
        + ")\n",
    ]
    out += [f"- {x}" for x in report.reasons]
    out.append("")
    out.append(md_table(_HEADERS, [_row_cells(r) for r in report.gates]))
    if report.baseline_run_id:
        rows = []
        for r in report.gates:
            b = r.baseline
            if b is None:
                continue
            rows.append(
                [
                    r.gate.id,
                    _fmt_value(b.current, r.gate.unit),
                    _fmt_value(b.baseline, r.gate.unit),
                    _fmt_value(b.diff, r.gate.unit),
                    f"[{_fmt_value(b.ci_low)}, {_fmt_value(b.ci_high)}]",
                    b.direction,
                    "yes" if b.regression else "no" if b.regression is False else "–",
                    b.method + (f"; {b.note}" if b.note else ""),
                ]
            )
        out.append("\n## Against the baseline (current - baseline)\n")
        out.append(
            md_table(
                [
                    "gate",
                    "current",
                    "baseline",
                    "diff",
                    "95% CI",
                    "direction",
                    "regression",
                    "method",
                ],
                rows,
            )
        )
    out.append("\n## Gates\n")
    for r in report.gates:
        out.append(f"### {r.gate.id}: {r.status}\n")
        if r.gate.description:
            out.append(r.gate.description + "\n")
        for c in [*r.preconditions, *([r.evidence] if r.evidence else [])]:
            mark = "ok" if c.ok else "not checked" if c.ok is None else "NOT MET"
            out.append(f"- {c.name}: {mark}: {c.detail}")
        for reason in r.reasons:
            out.append(f"- reason: {reason}")
        out.append("")
    return "\n".join(out)


GATE_FILES = ("gate.json", "gate.md", "gate.txt", "gate.junit.xml")
"""What gating a run leaves in it, whichever command gated it (``duplex gate``, ``duplex run
--matrix``): the GateReport, its table for people, its text, and JUnit XML for CI."""


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_gate_files(report: GateReport, run_dir: str | Path) -> Path:
    """Write ``GATE_FILES`` into the gated run's folder and embed the GateReport under
    ``gate`` in its report.json (the Scorecard); returns the folder."""
    run = Path(run_dir)
    body = report.to_dict()
    _atomic_write(run / "gate.json", json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    _atomic_write(run / "gate.md", render_markdown(report))
    _atomic_write(run / "gate.txt", render_text(report) + "\n")
    write_junit(report, run / "gate.junit.xml")
    path = run / "report.json"
    if path.is_file():
        card = Scorecard.model_validate_json(path.read_bytes())
        card.gate = body
        _atomic_write(path, json.dumps(card.dump(), indent=1, ensure_ascii=False) + "\n")
    return run


def write_junit(report: GateReport, path: str | Path) -> Path:
    """JUnit XML for CI (Jenkins, GitLab): ``<testsuites>`` holding one ``<testsuite>`` named
    after the matrix, one ``<testcase>`` per gate. A failed gate (or a decisive regression) is
    a ``<failure>``; insufficient_n, insufficient_evidence and unknown are ``<skipped>`` with
    the reason as message; passes are empty testcases. The recommendation is a suite property
    and the suite's ``system-out``."""
    counts = {"failures": 0, "skipped": 0}
    suite_name = report.matrix_id
    cases = []
    for r in report.gates:
        case = ET.Element(
            "testcase",
            {"name": r.gate.id, "classname": f"voxeval.duplex.gate.{suite_name}", "time": "0"},
        )
        summary = "; ".join(r.reasons) or str(r.status)
        if r.status == GateStatus.FAIL or r.decisive_regression:
            counts["failures"] += 1
            kind = "fail" if r.status == GateStatus.FAIL else "regression"
            failure = ET.SubElement(case, "failure", {"message": summary, "type": kind})
            failure.text = "\n".join(
                [f"on_fail: {r.gate.on_fail}", *(f"{c.name}: {c.detail}" for c in r.preconditions)]
            )
        elif r.status != GateStatus.PASS:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": f"{r.status}: {summary}"})
        out = ET.SubElement(case, "system-out")
        out.text = f"{r.gate.metric} ({r.label_text}); " + "; ".join(
            f"{c.name}={'ok' if c.ok else 'not checked' if c.ok is None else 'NOT MET'}"
            for c in [*r.preconditions, *([r.evidence] if r.evidence else [])]
        )
        cases.append(case)
    attrs = {
        "tests": str(len(cases)),
        "failures": str(counts["failures"]),
        "errors": "0",
        "skipped": str(counts["skipped"]),
        "time": "0",
    }
    root = ET.Element("testsuites", {"name": "voxeval duplex gate", **attrs})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": suite_name, "timestamp": report.generated_at.rstrip("Z"), **attrs},
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("recommendation", str(report.recommendation)),
        ("run_id", report.run_id or ""),
        ("system", report.system or ""),
        ("baseline_run_id", report.baseline_run_id or ""),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    suite.extend(cases)
    sysout = ET.SubElement(suite, "system-out")
    sysout.text = "\n".join([f"recommendation: {report.recommendation}", *report.reasons])
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    ET.ElementTree(root).write(target, encoding="utf-8", xml_declaration=True)
    return target
