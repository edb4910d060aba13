"""Confidence intervals: cluster bootstrap for ratio-of-sums metrics, Wilson for rates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_BOOT = 1000


def _cluster_sums(
    num: np.ndarray, den: np.ndarray, clusters: Sequence[object] | None
) -> tuple[np.ndarray, np.ndarray]:
    if clusters is None:
        return num, den
    keys: dict[object, int] = {}
    idx = np.array([keys.setdefault(c, len(keys)) for c in clusters], dtype=np.int64)
    k = len(keys)
    return np.bincount(idx, weights=num, minlength=k), np.bincount(idx, weights=den, minlength=k)


def bootstrap_ratio_ci(
    num: Sequence[float] | np.ndarray,
    den: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | None = None,
    *,
    n_boot: int = DEFAULT_BOOT,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``sum(num) / sum(den)``, resampling whole clusters.

    Clusters are speakers for WER (so one talker's many utterances count once per draw);
    with ``clusters=None`` each unit (utterance) is its own cluster. A resampling interval
    needs at least 2 clusters: from one it is not estimable (NaN), never the point estimate
    printed as an interval; zero denominators give NaN too.
    """
    n = np.asarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    if n.size == 0 or d.sum() <= 0:
        return (math.nan, math.nan)
    cn, cd = _cluster_sums(n, d, clusters)
    k = cn.size
    if k < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_boot, k))
    bn = cn[draws].sum(axis=1)
    bd = cd[draws].sum(axis=1)
    ok = bd > 0
    ratios = bn[ok] / bd[ok]
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


@dataclass(frozen=True)
class PairedDiff:
    """``a - b`` for a ratio-of-sums metric on the same units, with a paired bootstrap CI.

    ``p_value``: with at most ``EXACT_MAX_UNITS`` resampling units, the exact two-sided
    permutation p (every one of the 2**k swaps of A and B within units; the share whose
    |difference| reaches the observed one), ``p_min`` the smallest p that k units can give
    (2 / 2**k); with more, the two-sided bootstrap p (share of resampled differences on the
    other side of zero, doubled, capped at 1). ``n`` is the number of paired items, ``units``
    the number of resampling units (clusters). Fewer than two units: no CI and no p (NaN).
    """

    a: float
    b: float
    diff: float
    ci_lo: float
    ci_hi: float
    p_value: float
    n: int
    units: int = 0
    p_method: str = "bootstrap"
    p_min: float | None = None


def paired_bootstrap_ratio_diff(
    num_a: Sequence[float] | np.ndarray,
    den_a: Sequence[float] | np.ndarray,
    num_b: Sequence[float] | np.ndarray,
    den_b: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | None = None,
    *,
    n_boot: int = DEFAULT_BOOT,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedDiff:
    """Difference of two ratio-of-sums metrics measured on the same units (paired).

    Each bootstrap draw resamples units (or clusters) once and applies the same draw to
    both arms, so item difficulty cancels: CI of ``sum(na)/sum(da) - sum(nb)/sum(db)``.
    """
    na, da = np.asarray(num_a, float), np.asarray(den_a, float)
    nb, db = np.asarray(num_b, float), np.asarray(den_b, float)
    if not (na.size == da.size == nb.size == db.size):
        raise ValueError("paired arrays must have the same length")
    if na.size == 0 or da.sum() <= 0 or db.sum() <= 0:
        nan = math.nan
        return PairedDiff(nan, nan, nan, nan, nan, nan, int(na.size))
    a = float(na.sum() / da.sum())
    b = float(nb.sum() / db.sum())
    if clusters is not None:
        keys: dict[object, int] = {}
        idx = np.array([keys.setdefault(c, len(keys)) for c in clusters], dtype=np.int64)
        k = len(keys)
        sums = [np.bincount(idx, weights=x, minlength=k) for x in (na, da, nb, db)]
    else:
        k = na.size
        sums = [na, da, nb, db]
    if k < 2:
        nan = math.nan
        return PairedDiff(a, b, a - b, nan, nan, nan, int(na.size), k, "not estimable (one unit)")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_boot, k))
    bna, bda, bnb, bdb = (s[draws].sum(axis=1) for s in sums)
    ok = (bda > 0) & (bdb > 0)
    diffs = bna[ok] / bda[ok] - bnb[ok] / bdb[ok]
    lo, hi = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    diff = a - b
    if k <= EXACT_MAX_UNITS:
        p = exact_swap_p(*sums)
        return PairedDiff(
            a, b, diff, float(lo), float(hi), p, int(na.size), k, "exact permutation", 2.0 / 2**k
        )
    if diff == 0 and np.all(diffs == 0):
        p = 1.0
    else:
        p = float(min(1.0, 2 * min(np.mean(diffs <= 0), np.mean(diffs >= 0))))
    return PairedDiff(a, b, diff, float(lo), float(hi), p, int(na.size), k)


EXACT_MAX_UNITS = 12
"""Up to this many resampling units a paired p is exact (2**12 = 4096 swaps)."""


def exact_swap_p(na: np.ndarray, da: np.ndarray, nb: np.ndarray, db: np.ndarray) -> float:
    """Exact two-sided permutation p of ``sum(na)/sum(da) - sum(nb)/sum(db)`` over units:
    under no difference, A and B are exchangeable within each unit, so each of the 2**k
    swap patterns is equally likely; p = share of patterns whose |difference| is at least
    the observed one (the observed pattern and its mirror included, so p >= 2 / 2**k)."""
    k = len(na)
    flips = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)
    sa_n = np.where(flips, nb, na).sum(axis=1)
    sa_d = np.where(flips, db, da).sum(axis=1)
    sb_n = np.where(flips, na, nb).sum(axis=1)
    sb_d = np.where(flips, da, db).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = sa_n / sa_d - sb_n / sb_d
    observed = abs(float(stats[0]))
    valid = np.isfinite(stats)
    return float(np.mean(np.abs(stats[valid]) >= observed - 1e-12))


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial rate ``successes / n`` (NaN when ``n == 0``)."""
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_diff(
    k1: int, n1: int, k2: int, n2: int, z: float = 1.959963984540054
) -> tuple[float, float, float]:
    """``d = k1/n1 - k2/n2`` of two independent proportions with Newcombe's hybrid score
    interval (his method 10), built from the two Wilson intervals ``(l, u)``::

        lower = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)
        upper = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)

    ``(d, lower, upper)``, the bounds kept within [-1, 1] (they are, but for rounding);
    NaN for all three when either n is 0."""
    if n1 <= 0 or n2 <= 0:
        return (math.nan, math.nan, math.nan)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, z)
    l2, u2 = wilson_interval(k2, n2, z)
    d = p1 - p2
    lower = max(-1.0, d - math.hypot(p1 - l1, u2 - p2))
    return (d, lower, min(1.0, d + math.hypot(u1 - p1, p2 - l2)))
