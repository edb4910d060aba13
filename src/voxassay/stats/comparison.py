"""Differences between two runs, one method per kind of figure.

The duplex report's "what changed" and the gates' baseline check both call these, so the
same two runs give the same interval in both places.

- ``quantile_difference``: ``P_q(current) - P_q(baseline)`` of latency values grouped by
  session (``+inf`` = a censored pair: the end never came). 95 % percentile bootstrap over
  sessions: when both runs hold the same sessions (at least two) one draw of session indices
  serves both runs (paired: the scenarios' difficulty cancels); otherwise each run's sessions
  are drawn on their own, and a run of one session draws its values. Quantiles are
  ``stats.percentiles.censored_quantile``. A draw in which either quantile falls among
  censored values has no difference; such draws sit below every difference for the lower
  bound and above every difference for the upper one, so a bound that lands on them is not
  estimable (None) rather than optimistic.
- ``rate_difference``: ``k1/n1 - k2/n2``. Paired bootstrap of the ratio of sums over shared
  sessions (``stats.intervals.paired_bootstrap_ratio_diff``) when both runs list every
  opportunity by session and hold the same sessions (at least two); otherwise the Newcombe
  hybrid score interval for independent proportions (``stats.intervals.newcombe_diff``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from voxassay.stats.intervals import DEFAULT_BOOT, newcombe_diff, paired_bootstrap_ratio_diff
from voxassay.stats.percentiles import censored_quantile

__all__ = ["Difference", "quantile_difference", "rate_difference"]

ALPHA = 0.05


@dataclass(frozen=True)
class Difference:
    """``current - baseline`` with its 95 % interval. ``current``/``baseline``/``diff`` are
    None where a quantile falls among censored values (or a side has no data); a bound is
    None where it cannot be estimated. ``paired`` says whether sessions were paired."""

    current: float | None
    baseline: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    method: str
    paired: bool = False


def _finite(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else float(x)


def _bounds(diffs: np.ndarray) -> tuple[float | None, float | None]:
    """Order-statistic bounds of the draws (NaN draws: no difference, see module docstring)."""
    n = diffs.size
    if n == 0:
        return None, None
    finite = np.sort(diffs[~np.isnan(diffs)])
    bad = n - finite.size
    i_lo = math.floor(ALPHA / 2 * (n - 1))
    i_hi = math.ceil((1 - ALPHA / 2) * (n - 1))
    lo = float(finite[i_lo - bad]) if i_lo >= bad else None
    hi = float(finite[i_hi]) if i_hi < finite.size else None
    return lo, hi


def _pooled_quantiles(groups: Sequence[np.ndarray], draws: np.ndarray, q: float) -> np.ndarray:
    """Quantile q of the pooled values of each draw's groups (``draws``: rows of indices)."""
    codes = np.concatenate([np.full(g.size, i) for i, g in enumerate(groups)])
    values = np.concatenate(groups)
    order = np.argsort(values, kind="stable")
    sorted_vals, sorted_codes = values[order], codes[order]
    out = np.empty(draws.shape[0])
    for i, row in enumerate(draws):
        counts = np.bincount(row, minlength=len(groups))
        pooled = np.repeat(sorted_vals, counts[sorted_codes])
        out[i] = censored_quantile(pooled, q) if pooled.size else math.nan
    return out


def quantile_difference(
    current: Mapping[str, Sequence[float]],
    baseline: Mapping[str, Sequence[float]],
    q: float,
    *,
    n_boot: int = DEFAULT_BOOT,
    seed: int = 0,
) -> Difference | None:
    """See the module docstring. ``current``/``baseline``: session -> values in ms (+inf for
    censored). None when either run has no values."""
    cur = {k: np.asarray(v, dtype=float) for k, v in current.items() if len(v)}
    base = {k: np.asarray(v, dtype=float) for k, v in baseline.items() if len(v)}
    if not cur or not base:
        return None
    pc = censored_quantile(np.sort(np.concatenate(list(cur.values()))), q)
    pb = censored_quantile(np.sort(np.concatenate(list(base.values()))), q)
    rng = np.random.default_rng(seed)
    keys = sorted(cur)
    paired = keys == sorted(base) and len(keys) >= 2
    if paired:
        draws = rng.integers(0, len(keys), size=(n_boot, len(keys)))
        qc = _pooled_quantiles([cur[k] for k in keys], draws, q)
        qb = _pooled_quantiles([base[k] for k in keys], draws, q)
        method = f"paired percentile bootstrap over {len(keys)} shared sessions"
    else:

        def one_run(groups: dict[str, np.ndarray]) -> np.ndarray:
            units = [groups[k] for k in sorted(groups)]
            if len(units) < 2:  # one session: its values are the resampling units
                units = [np.array([v]) for v in np.concatenate(units)]
            return _pooled_quantiles(units, rng.integers(0, len(units), (n_boot, len(units))), q)

        qc, qb = one_run(cur), one_run(base)
        method = "percentile bootstrap over sessions, each run resampled independently"
    with np.errstate(invalid="ignore"):
        diffs = np.where(np.isinf(qc) | np.isinf(qb), math.nan, qc - qb)
    lo, hi = _bounds(diffs)
    fc, fb = _finite(pc), _finite(pb)
    diff = fc - fb if fc is not None and fb is not None else None
    return Difference(fc, fb, diff, lo, hi, method, paired)


def rate_difference(
    current: tuple[int, int],
    baseline: tuple[int, int],
    *,
    current_sessions: Mapping[str, tuple[int, int]] | None = None,
    baseline_sessions: Mapping[str, tuple[int, int]] | None = None,
    n_boot: int = DEFAULT_BOOT,
    seed: int = 0,
) -> Difference | None:
    """See the module docstring. ``current``/``baseline``: (k, n) totals; the session maps
    hold (k, n) per session when every opportunity is listed. None when an n is 0."""
    (k1, n1), (k2, n2) = current, baseline
    if n1 <= 0 or n2 <= 0:
        return None
    complete = (
        current_sessions is not None
        and baseline_sessions is not None
        and sum(n for _, n in current_sessions.values()) == n1
        and sum(n for _, n in baseline_sessions.values()) == n2
    )
    if complete and current_sessions and baseline_sessions:
        keys = sorted(current_sessions)
        if keys == sorted(baseline_sessions) and len(keys) >= 2:
            d = paired_bootstrap_ratio_diff(
                [current_sessions[k][0] for k in keys],
                [current_sessions[k][1] for k in keys],
                [baseline_sessions[k][0] for k in keys],
                [baseline_sessions[k][1] for k in keys],
                n_boot=n_boot,
                seed=seed,
            )
            return Difference(
                k1 / n1,
                k2 / n2,
                k1 / n1 - k2 / n2,
                _finite(d.ci_lo),
                _finite(d.ci_hi),
                f"paired bootstrap over {len(keys)} shared sessions",
                True,
            )
    diff, lo, hi = newcombe_diff(k1, n1, k2, n2)
    return Difference(
        k1 / n1,
        k2 / n2,
        diff,
        _finite(lo),
        _finite(hi),
        "Newcombe hybrid score interval (independent proportions)",
    )
