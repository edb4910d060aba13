"""Statistics shared by all suites: bootstrap CIs, Wilson intervals, paired tests, ranks,
latency percentiles with censoring."""

from __future__ import annotations

from voxassay.stats.intervals import (
    bootstrap_ratio_ci,
    paired_bootstrap_ratio_diff,
    wilson_interval,
)
from voxassay.stats.percentiles import (
    MIN_N_P99,
    SOFT_N_P95,
    LatencyValue,
    percentile_summary,
    summarize_values,
)
from voxassay.stats.ranks import rank_agreement

__all__ = [
    "MIN_N_P99",
    "SOFT_N_P95",
    "LatencyValue",
    "bootstrap_ratio_ci",
    "paired_bootstrap_ratio_diff",
    "percentile_summary",
    "rank_agreement",
    "summarize_values",
    "wilson_interval",
]
