"""Statistics shared by all suites: bootstrap CIs, Wilson intervals, paired tests, ranks."""

from __future__ import annotations

from voxeval.stats.intervals import (
    bootstrap_ratio_ci,
    paired_bootstrap_ratio_diff,
    wilson_interval,
)
from voxeval.stats.ranks import rank_agreement

__all__ = [
    "bootstrap_ratio_ci",
    "paired_bootstrap_ratio_diff",
    "rank_agreement",
    "wilson_interval",
]
