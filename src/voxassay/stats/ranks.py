"""Rank agreement between two orderings of the same systems."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


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
