"""Paired differences of per-item scores: ``a - b`` over the items both arms scored.

``paired_difference(a, b)``: the mean of the per-item differences with a paired bootstrap
CI (``intervals.paired_bootstrap_ratio_diff`` with unit denominators: one resampling of
items applied to both arms), and the two-sided Wilcoxon signed-rank p of the differences
(zero differences dropped, as Wilcoxon's original test; exact for small n without ties,
normal approximation otherwise, scipy). Fewer than two pairs: no CI and no p, said so.
``holm(ps)``: Holm's step-down adjustment of a family of p values (NaN stays NaN and is not
counted in the family).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxassay.stats.intervals import paired_bootstrap_ratio_diff

__all__ = ["PairedScores", "holm", "paired_difference", "wilcoxon_p"]


@dataclass(frozen=True)
class PairedScores:
    """``mean`` = mean(a_i - b_i) over ``n`` pairs; ``ci_low``/``ci_high`` its paired
    bootstrap 95 % CI; ``p`` the Wilcoxon signed-rank p; ``p_holm`` filled in by the caller's
    family (``holm``). None where not estimable (``note`` says why)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    p: float | None
    p_holm: float | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "p": self.p,
            "p_holm": self.p_holm,
        }
        if self.note:
            out["note"] = self.note
        return out

    @property
    def excludes_zero(self) -> bool:
        return (
            self.ci_low is not None
            and self.ci_high is not None
            and (self.ci_low > 0 or self.ci_high < 0)
        )


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def wilcoxon_p(diffs: Sequence[float] | np.ndarray) -> float | None:
    """Two-sided Wilcoxon signed-rank p of ``diffs`` (zeros dropped); None with no nonzero
    difference... except that all-zero differences give p = 1 (nothing differs)."""
    d = np.asarray(diffs, float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    if not np.any(d != 0):
        return 1.0
    from scipy.stats import wilcoxon

    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_difference(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    seed: int = 0,
    n_boot: int = 2000,
) -> PairedScores:
    """``a - b`` per item (same order, same length; pairs with a missing side dropped)."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    if x.shape != y.shape:
        raise ValueError("paired scores must have the same length")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n == 0:
        return PairedScores(None, None, None, 0, None, note="no item scored in both arms")
    mean = float(np.mean(x - y))
    if n < 2:
        return PairedScores(mean, None, None, n, None, note="one pair: no interval, no test")
    ones = np.ones(n)
    d = paired_bootstrap_ratio_diff(x, ones, y, ones, n_boot=n_boot, seed=seed)
    return PairedScores(mean, _num(d.ci_lo), _num(d.ci_hi), n, wilcoxon_p(x - y))


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p values, in the order given: the k-th smallest of m p values becomes
    max over j <= k of min(1, (m - j + 1) * p_(j))."""
    idx = [i for i, p in enumerate(ps) if p is not None and math.isfinite(p)]
    m = len(idx)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: float(ps[i] or 0.0))):
        p = float(ps[i] or 0.0)
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
