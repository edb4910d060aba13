"""stats.comparison: one difference method per figure for the report and the gates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voxassay.stats.comparison import quantile_difference, rate_difference
from voxassay.stats.intervals import newcombe_diff


def _sessions(rng: np.random.Generator, shift: float, n: int = 12) -> dict[str, list[float]]:
    return {f"s{i}": list(rng.normal(500 + 40 * i + shift, 30, size=5)) for i in range(n)}


def test_paired_sessions_give_a_narrower_interval_than_independent_draws() -> None:
    rng = np.random.default_rng(1)
    cur = _sessions(rng, 50.0)
    base = _sessions(rng, 0.0)
    paired = quantile_difference(cur, base, 0.5)
    renamed = {f"b{k}": v for k, v in base.items()}  # other sessions: no pairing possible
    apart = quantile_difference(cur, renamed, 0.5)
    assert paired is not None and apart is not None
    assert paired.paired and not apart.paired
    assert paired.diff == apart.diff and paired.diff is not None and paired.diff > 0
    assert paired.ci_low is not None and paired.ci_high is not None
    assert apart.ci_low is not None and apart.ci_high is not None
    assert paired.ci_high - paired.ci_low < apart.ci_high - apart.ci_low
    assert paired.ci_low <= paired.diff <= paired.ci_high


def test_a_bound_among_censored_draws_is_not_estimable() -> None:
    cur = {f"s{i}": [400.0, math.inf if i < 3 else 450.0] for i in range(8)}
    base = {f"s{i}": [380.0, 420.0] for i in range(8)}
    d = quantile_difference(cur, base, 0.95)
    assert d is not None
    assert d.current is None and d.diff is None  # P95 of the current run is censored
    assert d.ci_high is None  # draws with a censored P95 sit above every difference


def test_one_session_per_run_resamples_its_values() -> None:
    d = quantile_difference({"a": [100.0, 110.0, 120.0]}, {"b": [90.0, 95.0, 99.0]}, 0.5)
    assert d is not None and not d.paired
    assert d.diff == 15.0 and d.ci_low is not None and d.ci_high is not None


def test_rates_pair_shared_sessions_else_newcombe() -> None:
    cur = {"s1": (1, 4), "s2": (2, 4), "s3": (3, 4)}
    base = {"s1": (0, 4), "s2": (1, 4), "s3": (1, 4)}
    paired = rate_difference((6, 12), (2, 12), current_sessions=cur, baseline_sessions=base)
    assert paired is not None and paired.paired and "paired" in paired.method
    alone = rate_difference((6, 12), (2, 12))
    _, lo, hi = newcombe_diff(6, 12, 2, 12)
    assert alone is not None and not alone.paired
    assert (alone.ci_low, alone.ci_high) == (lo, hi)
    incomplete = rate_difference(
        (6, 12), (2, 12), current_sessions={"s1": (1, 4)}, baseline_sessions=base
    )
    assert incomplete is not None and not incomplete.paired  # sessions do not cover n
    assert rate_difference((0, 0), (1, 3)) is None


def test_quantile_bounds_hold_the_quantile_and_stay_finite_at_large_n() -> None:
    from voxassay.stats.percentiles import quantile_bounds

    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(200):  # a standard normal's median is 0
        lo, hi = quantile_bounds(np.sort(rng.normal(size=40)), 0.5)
        covered += lo <= 0.0 <= hi
    assert covered >= 180  # nominal 95 %; order-statistic bounds are conservative
    lo, hi = quantile_bounds(list(range(5000)), 0.95)  # would overflow in plain floats
    assert 4700 < lo < 4750 < hi < 4800
    lo5, hi5 = quantile_bounds([100.0, 200.0, math.inf, math.inf, math.inf], 0.5)
    assert lo5 == -math.inf and hi5 == math.inf  # five values cannot bound a median at 95 %


# --------------------------------------------------------------------------- exact paired p


def test_paired_p_is_exact_for_few_units_with_its_smallest_attainable_value() -> None:
    from voxassay.stats.intervals import paired_bootstrap_ratio_diff

    # four items, A always worse: the bootstrap said p = 0.008; 4 units can give p >= 2/16
    d = paired_bootstrap_ratio_diff([1, 2, 3, 4], [10] * 4, [0] * 4, [10] * 4)
    assert d.p_method == "exact permutation" and d.units == 4
    assert d.p_value == pytest.approx(2 / 16) and d.p_min == pytest.approx(2 / 16)
    # by hand: swapping one unit of six (A = 1 error in every unit of 10 words, B = 0)
    # every swap pattern with the same number of A-labelled units gives the same |diff|
    d6 = paired_bootstrap_ratio_diff([1] * 6, [10] * 6, [0] * 6, [10] * 6)
    assert d6.p_value == pytest.approx(2 / 64)
    # no difference at all: p = 1
    assert paired_bootstrap_ratio_diff([1, 2], [10, 10], [1, 2], [10, 10]).p_value == 1.0
    # one shared item: neither an interval nor a p, said so
    one = paired_bootstrap_ratio_diff([6], [10], [0], [10])
    assert math.isnan(one.ci_lo) and math.isnan(one.p_value) and one.diff == pytest.approx(0.6)
    assert one.p_method.startswith("not estimable")
    # above 12 units the bootstrap p is used
    many = paired_bootstrap_ratio_diff([1] * 13, [10] * 13, [0] * 13, [10] * 13)
    assert many.p_method == "bootstrap" and many.p_min is None
