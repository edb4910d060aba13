"""A gate against a baseline run: the difference of the gate's statistic with its 95 % interval from ``stats.comparison`` (the same figures the report's what-changed shows), its direction, and whether it is a decisive regression."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.matrix import Gate, Statistic
from voxassay.stats.comparison import quantile_difference, rate_difference
from voxassay.suites.duplex.gate_types import (
    QUANTILE,
    BaselineDiff,
    Measurement,
    MetricRow,
    Unit,
)

__all__ = []


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
    if cur.kind == "latency" and gate.statistic in QUANTILE:
        if cur.units and base.units:
            lo, hi, method = _latency_diff(cur, base, QUANTILE[gate.statistic], n_boot, seed)
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
