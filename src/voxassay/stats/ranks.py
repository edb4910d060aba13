"""Rank agreement between two orderings of the same systems."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankAgreement:
    """Kendall's tau-b and Spearman's rho between two score maps over shared systems."""

    kendall_tau: float
    spearman_rho: float
    n_systems: int


def rank_agreement(a: Mapping[str, float], b: Mapping[str, float]) -> RankAgreement:
    """Correlate scores of the systems present (and finite) in both maps.

    Fewer than 2 shared systems, or a constant side, gives NaN (no ranking to compare).
    """
    from scipy import stats

    keys = [k for k in a if k in b and math.isfinite(a[k]) and math.isfinite(b[k])]
    if len(keys) < 2:
        return RankAgreement(math.nan, math.nan, len(keys))
    xa = [a[k] for k in keys]
    xb = [b[k] for k in keys]
    if len(set(xa)) < 2 or len(set(xb)) < 2:
        return RankAgreement(math.nan, math.nan, len(keys))
    tau = stats.kendalltau(xa, xb).statistic
    rho = stats.spearmanr(xa, xb).statistic
    return RankAgreement(float(tau), float(rho), len(keys))


RatioUnit = tuple[float, float, object]
"""One item of one system: (numerator, denominator, resampling cluster), e.g. word errors,
reference words and the speaker for WER."""

RANK_METHOD = (
    "cluster bootstrap (1000 draws): each condition's shared items resampled by cluster, the "
    "same draw for every system; percentile interval of Kendall's tau-b; a rank shift's share "
    "is the fraction of draws in which the system's rank differs between the two conditions"
)


@dataclass(frozen=True)
class RankChange:
    """Kendall's tau-b between two conditions' rankings of the same systems (lower is better),
    with its bootstrap interval, and each system's rank shift with the share of draws that
    show a change. ``units``: the fewer resampling clusters of the two conditions; below 2 the
    interval and shares are not estimable (NaN / empty)."""

    kendall_tau: float
    ci_lo: float
    ci_hi: float
    units: int
    shift: dict[str, int]
    shift_share: dict[str, float]
    n_systems: int
    method: str = RANK_METHOD


def _cluster_table(
    rows: Mapping[str, Mapping[str, RatioUnit]], systems: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per system, numerator and denominator sums per cluster of the items every system has:
    two arrays of shape (systems, clusters)."""
    shared = sorted(set.intersection(*(set(rows[s]) for s in systems)))
    keys: dict[object, int] = {}
    idx = np.array([keys.setdefault(rows[systems[0]][i][2], len(keys)) for i in shared], int)
    num = np.zeros((len(systems), len(keys)))
    den = np.zeros((len(systems), len(keys)))
    for r, s in enumerate(systems):
        if shared:
            num[r] = np.bincount(idx, [rows[s][i][0] for i in shared], len(keys))
            den[r] = np.bincount(idx, [rows[s][i][1] for i in shared], len(keys))
    return num, den


def _tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of the columns of x and y (shape: systems, draws); NaN where a side
    is constant."""
    s = x.shape[0]
    prod = np.zeros(x.shape[1])
    tx = np.zeros(x.shape[1])
    ty = np.zeros(x.shape[1])
    for i in range(s):
        for j in range(i + 1, s):
            sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            prod += sx * sy
            tx += sx == 0
            ty += sy == 0
    pairs = s * (s - 1) / 2
    den = np.sqrt((pairs - tx) * (pairs - ty))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, prod / np.where(den > 0, den, 1), np.nan)


def _rank_rows(values: np.ndarray) -> np.ndarray:
    """1-based ranks down each column (lowest value first; ties in system order)."""
    return np.argsort(np.argsort(values, axis=0, kind="stable"), axis=0, kind="stable") + 1


def rank_change(
    reference: Mapping[str, Mapping[str, RatioUnit]],
    condition: Mapping[str, Mapping[str, RatioUnit]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> RankChange:
    """Rank agreement of ``reference[system][item]`` and ``condition[system][item]`` (ratio of
    sums per system over the items all systems share in that condition), with uncertainty."""
    systems = sorted(
        s
        for s in reference
        if s in condition
        and sum(u[1] for u in reference[s].values()) > 0
        and sum(u[1] for u in condition[s].values()) > 0
    )
    nan = math.nan
    if len(systems) < 2:
        return RankChange(nan, nan, nan, 0, {}, {}, len(systems))
    (rn, rd), (cn, cd) = _cluster_table(reference, systems), _cluster_table(condition, systems)
    if rd.sum(axis=1).min() <= 0 or cd.sum(axis=1).min() <= 0:
        return RankChange(nan, nan, nan, 0, {}, {}, len(systems))
    ref_pt = (rn.sum(1) / rd.sum(1))[:, None]
    cond_pt = (cn.sum(1) / cd.sum(1))[:, None]
    tau = float(_tau_b(ref_pt, cond_pt)[0])
    shift_pt = (_rank_rows(cond_pt) - _rank_rows(ref_pt))[:, 0]
    shift = {s: int(v) for s, v in zip(systems, shift_pt, strict=True)}
    units = min(rn.shape[1], cn.shape[1])
    if units < 2:
        return RankChange(tau, nan, nan, units, shift, {}, len(systems))
    rng = np.random.default_rng(seed)
    ratios = []
    for num, den in ((rn, rd), (cn, cd)):
        draws = rng.integers(0, num.shape[1], size=(n_boot, num.shape[1]))
        bn, bd = num[:, draws].sum(axis=2), den[:, draws].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios.append(np.where(bd > 0, bn / np.where(bd > 0, bd, 1), np.inf))
    taus = _tau_b(ratios[0], ratios[1])
    taus = taus[np.isfinite(taus)]
    lo, hi = (float(q) for q in np.quantile(taus, [0.025, 0.975])) if taus.size else (nan, nan)
    moved = _rank_rows(ratios[1]) != _rank_rows(ratios[0])
    share = {s: float(moved[r].mean()) for r, s in enumerate(systems)}
    return RankChange(tau, lo, hi, units, shift, share, len(systems))
