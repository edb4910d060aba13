"""Latency percentiles with censored values, and their cluster-bootstrap intervals.

A latency is a pair of events (start -> end). A pair whose end never came is *censored*: it is
counted in ``n`` and ranked above every observed value (it took at least as long as the wait),
never treated as zero and never dropped. A percentile that falls among censored values is
withheld (it is only known to exceed the censoring time).

Percentile: linear interpolation between order statistics (numpy's default): with the ``n``
values sorted ascending (censored last), ``h = (n - 1) q`` and
``P_q = v[floor(h)] + (v[ceil(h)] - v[floor(h)]) (h - floor(h))``; the denominator is every
pair, censored ones included.

Intervals: percentile bootstrap that resamples whole clusters (calls, sessions) with
replacement, so the many pairs of one session count as one unit per draw; with a single
cluster the pairs themselves are resampled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MIN_N_P99",
    "SOFT_N_P95",
    "LatencyValue",
    "percentile_summary",
    "summarize_values",
]

MIN_N_P99 = 100
"""P99 is reported only from 100 values on (see ``percentile_summary``)."""
SOFT_N_P95 = 20
"""Below this n, P95 is reported with a note: it lies near the sample maximum."""

_QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
_CI_QUANTILES = (("p50", 0.5), ("p95", 0.95))
_CELLS_PER_CHUNK = 1 << 20
"""Bootstrap draws are evaluated in blocks of about this many (draw, value) cells."""


@dataclass
class LatencyValue:
    """One latency pair; ``censored`` pairs have no end (``value_ms`` is None)."""

    ref: str
    value_ms: float | None
    censored: bool
    censored_after_ms: float | None = None


def censored_quantile(sorted_vals: Sequence[float] | np.ndarray, q: float) -> float:
    """Linear-interpolated quantile (numpy's default: ``h = (n - 1) q``, between the order
    statistics ``floor(h)`` and ``ceil(h)``) of sorted values whose censored ones are +inf;
    +inf when either neighbouring order statistic is censored."""
    h = (len(sorted_vals) - 1) * q
    lo, hi = math.floor(h), math.ceil(h)
    a, b = float(sorted_vals[lo]), float(sorted_vals[hi])
    if math.isinf(a) or math.isinf(b):
        return math.inf
    return a + (b - a) * (h - lo)


def quantile_bounds(
    sorted_vals: Sequence[float] | np.ndarray, q: float, confidence: float = 0.95
) -> tuple[float, float]:
    """Distribution-free bounds of the q-quantile from order statistics: ``[x_(l), x_(u)]``
    with ``P(x_(l) <= xi_q) >= 1 - a/2`` and ``P(x_(u) >= xi_q) >= 1 - a/2`` (a = 1 -
    confidence; the count of values below xi_q is Binomial(n, q)). Censored values are +inf
    and sort last. A bound the sample cannot give is -inf (lower) or +inf (upper)."""
    n = len(sorted_vals)
    half = (1.0 - confidence) / 2.0
    cdf, total = [], 0.0
    log_q, log_p = math.log(q), math.log1p(-q)
    for k in range(n + 1):  # P(B <= k), B ~ Binomial(n, q); log space keeps large n finite
        log_pmf = (
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * log_q
            + (n - k) * log_p
        )
        total += math.exp(log_pmf)
        cdf.append(total)
    lower = max((r for r in range(1, n + 1) if cdf[r - 1] <= half), default=None)
    upper = min((r for r in range(1, n + 1) if cdf[r - 1] >= 1.0 - half), default=None)
    lo = float(sorted_vals[lower - 1]) if lower is not None else -math.inf
    hi = float(sorted_vals[upper - 1]) if upper is not None else math.inf
    return lo, hi


def _order_stat(sorted_vals: Sequence[float] | np.ndarray, q: float) -> float | None:
    """:func:`censored_quantile`, None when it depends on a censored value."""
    v = censored_quantile(sorted_vals, q)
    return None if math.isinf(v) else v


def percentile_summary(
    values: Sequence[LatencyValue],
    clusters: Sequence[str] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """P50/P95/P99 of latency pairs, censored pairs ranked above every observed value.

    Returns ``n`` (all pairs), ``n_observed``, ``n_censored``, ``p50``/``p95``/``p99`` (ms; None
    with a reason in ``withheld`` when the percentile falls among censored pairs or n is too
    small), ``min``/``max`` of the observed values and, with ``clusters`` (one label per value),
    95 % bootstrap intervals ``p50_ci``/``p95_ci`` resampling whole clusters (calls).

    Rule for P99: withheld when ``n < 100``. A percentile q estimates something beyond the sample
    maximum only when about ``1 / (1 - q)`` values are available (100 for P99): with fewer, the
    interpolated P99 lies between the two largest values and merely restates the maximum. The same
    arithmetic makes P95 near-maximum below n = 20; it is still reported, with a note.
    """
    arr = np.fromiter(
        (math.inf if v.censored or v.value_ms is None else float(v.value_ms) for v in values),
        dtype=np.float64,
        count=len(values),
    )
    return summarize_values(arr, clusters, n_boot=n_boot, seed=seed)


def summarize_values(
    values_ms: Sequence[float] | np.ndarray,
    clusters: Sequence[Any] | np.ndarray | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    unit: str = "calls",
) -> dict[str, Any]:
    """``percentile_summary`` on a plain array: one latency per pair, ``inf`` (or NaN) = censored.

    The array form keeps large summaries cheap: no object per pair, and the bootstrap works on
    per-cluster counts (see ``_bootstrap_ci``). ``unit`` names the clusters in ``ci_method``.
    """
    raw = np.asarray(values_ms, dtype=np.float64)
    vals = np.sort(np.where(np.isnan(raw), math.inf, raw))
    n = int(vals.size)
    observed = vals[np.isfinite(vals)]
    out: dict[str, Any] = {
        "n": n,
        "n_observed": int(observed.size),
        "n_censored": n - int(observed.size),
        "min": float(observed[0]) if observed.size else None,
        "max": float(observed[-1]) if observed.size else None,
        "mean_observed": float(np.mean(observed)) if observed.size else None,
        "withheld": {},
        "notes": [],
    }
    for name, q in _QUANTILES:
        if n == 0:
            out[name] = None
            out["withheld"][name] = "no values"
            continue
        if name == "p99" and n < MIN_N_P99:
            out[name] = None
            out["withheld"][name] = (
                f"n = {n} < {MIN_N_P99}: below 100 values P99 only restates the sample maximum"
            )
            continue
        v = _order_stat(vals, q)
        out[name] = v
        if v is None:
            out["withheld"][name] = (
                "falls among censored pairs (no end event): at least the censoring time"
            )
    if 0 < n < SOFT_N_P95:
        out["notes"].append(f"n = {n} < {SOFT_N_P95}: P95 lies near the sample maximum")
    if clusters is not None and n:
        cl = np.asarray(clusters)
        if cl.shape != raw.shape:
            raise ValueError("clusters needs one label per value")
        raw_c = np.where(np.isnan(raw), math.inf, raw)
        out.update(_bootstrap_ci(raw_c, cl, n_boot=n_boot, seed=seed, unit=unit))
    return out


def _block_quantiles(
    block: np.ndarray, sorted_vals: np.ndarray, sorted_codes: np.ndarray
) -> dict[str, np.ndarray]:
    """P50 and P95 of the resample of each row of ``block`` (cluster indices, one row per
    draw). A function of its own so that one block's large temporaries are freed before the
    next block is built."""
    b, k = block.shape
    n = sorted_vals.size
    counts = np.bincount((block + (np.arange(b) * k)[:, None]).ravel(), minlength=b * k)
    # one running sum over the draws laid end to end: row i's cumulative counts, lifted by the
    # totals of the rows before it, so the whole block stays sorted for searchsorted
    flat = np.cumsum(np.take(counts.reshape(b, k), sorted_codes, axis=1).ravel())
    ends = flat[n - 1 :: n]
    base = np.concatenate(([0], ends[:-1]))
    total = ends - base
    start = np.arange(b) * n
    out = {}
    for name, q in _CI_QUANTILES:
        h = (total - 1) * q
        r_lo, r_hi = np.floor(h), np.ceil(h)
        a = sorted_vals[np.searchsorted(flat, base + r_lo.astype(np.int64), "right") - start]
        c = sorted_vals[np.searchsorted(flat, base + r_hi.astype(np.int64), "right") - start]
        with np.errstate(invalid="ignore"):
            s = a + (c - a) * (h - r_lo)
        s[np.isinf(a) | np.isinf(c)] = math.inf
        out[name] = s
    return out


def _bootstrap_ci(
    values: np.ndarray, clusters: np.ndarray, *, n_boot: int, seed: int, unit: str
) -> dict[str, Any]:
    """95 % percentile-bootstrap intervals of P50 and P95, resampling clusters.

    Each draw picks ``k`` clusters with replacement (k = number of clusters; with one cluster
    the values themselves are the units). The pooled resample is the sorted values, each
    repeated as often as its cluster was drawn, so its order statistic of rank ``r`` is the
    first sorted value whose cumulative repeat count exceeds ``r``: O(n) per draw without
    building the resample. Draws whose percentile falls among censored values count as +inf;
    an interval end at +inf is reported as None.
    """
    keys, codes = np.unique(clusters, return_inverse=True)
    codes = codes.reshape(-1)
    if len(keys) > 1:
        k = len(keys)
    else:
        k = int(values.size)
        codes = np.arange(k)
    if k < 2:
        return {"p50_ci": None, "p95_ci": None, "ci_clusters": len(keys)}
    rng = np.random.default_rng(seed)
    order = np.argsort(values, kind="stable")
    sorted_vals = values[order]
    sorted_codes = codes[order]
    stats = {name: np.empty(n_boot) for name, _ in _CI_QUANTILES}
    chunk = max(1, _CELLS_PER_CHUNK // max(1, values.size + k))
    for lo in range(0, n_boot, chunk):
        # drawn block by block: the same numbers as one (n_boot, k) draw, in bounded memory
        block = rng.integers(0, k, size=(min(chunk, n_boot - lo), k))
        for name, s in _block_quantiles(block, sorted_vals, sorted_codes).items():
            stats[name][lo : lo + len(s)] = s
    out: dict[str, Any] = {
        "ci_clusters": len(keys),
        "ci_method": f"percentile bootstrap over {unit}",
    }
    for name, _ in _CI_QUANTILES:
        st = np.sort(stats[name])
        lo_v = float(st[math.floor(0.025 * (n_boot - 1))])
        hi_v = float(st[math.ceil(0.975 * (n_boot - 1))])
        out[f"{name}_ci"] = [
            None if math.isinf(lo_v) else lo_v,
            None if math.isinf(hi_v) else hi_v,
        ]
    return out
