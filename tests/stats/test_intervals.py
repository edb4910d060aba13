from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from voxassay.stats.intervals import (
    bootstrap_ratio_ci,
    paired_bootstrap_ratio_diff,
    wilson_interval,
)
from voxassay.stats.ranks import rank_agreement


def test_wilson_known_values() -> None:
    lo, hi = wilson_interval(8, 10)
    assert math.isclose(lo, 0.4901624, abs_tol=1e-6) and math.isclose(hi, 0.9433178, abs_tol=1e-6)
    assert wilson_interval(0, 10)[0] == 0.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_bootstrap_ratio_contains_point_and_clusters_widen() -> None:
    rng = np.random.default_rng(1)
    # 6 speakers with very different error rates, 20 utterances each
    rates = np.repeat([0.02, 0.05, 0.1, 0.2, 0.3, 0.5], 20)
    den = rng.integers(5, 20, size=rates.size).astype(float)
    num = np.round(den * rates)
    speakers = np.repeat(list("abcdef"), 20)
    point = num.sum() / den.sum()
    lo_u, hi_u = bootstrap_ratio_ci(num, den)
    lo_s, hi_s = bootstrap_ratio_ci(num, den, list(speakers))
    assert lo_u < point < hi_u and lo_s < point < hi_s
    assert (hi_s - lo_s) > 1.5 * (hi_u - lo_u)  # speaker clustering is honest about few talkers
    # one cluster (one speaker): a resampling interval is not estimable, never [0.15, 0.15]
    assert all(math.isnan(b) for b in bootstrap_ratio_ci([1, 2], [10, 10], ["x", "x"]))
    assert all(math.isnan(b) for b in bootstrap_ratio_ci([3], [10]))
    assert all(math.isnan(v) for v in bootstrap_ratio_ci([], []))


def test_paired_diff_detects_consistent_improvement() -> None:
    rng = np.random.default_rng(2)
    den = rng.integers(8, 30, size=200).astype(float)
    na = np.round(den * rng.uniform(0.1, 0.4, size=200))
    nb = np.maximum(na - 1, 0)  # B makes one error fewer almost everywhere
    d = paired_bootstrap_ratio_diff(na, den, nb, den)
    assert d.diff > 0 and d.ci_lo > 0 and d.p_value < 0.01 and d.n == 200
    same = paired_bootstrap_ratio_diff(na, den, na, den)
    assert same.diff == 0 and same.p_value == 1.0


def test_rank_agreement() -> None:
    a = {"x": 0.1, "y": 0.2, "z": 0.3}
    assert rank_agreement(a, {"x": 0.2, "y": 0.3, "z": 0.5}).kendall_tau == 1.0
    assert rank_agreement(a, {"x": 0.5, "y": 0.3, "z": 0.2}).spearman_rho == -1.0
    assert math.isnan(rank_agreement(a, {"x": 0.1}).kendall_tau)


def test_newcombe_diff_is_the_one_interval_report_gate_and_audit_use() -> None:
    from voxassay.stats.intervals import newcombe_diff

    # Newcombe (1998), Stat Med 17:873, example (a): 56/70 vs 48/80, method 10
    d, lo, hi = newcombe_diff(56, 70, 48, 80)
    assert d == pytest.approx(0.2) and lo == pytest.approx(0.0524, abs=5e-4)
    assert hi == pytest.approx(0.3339, abs=5e-4)
    assert all(math.isnan(x) for x in newcombe_diff(1, 0, 1, 2))
    d, lo, hi = newcombe_diff(10, 10, 0, 10)
    assert d == 1.0 and -1.0 <= lo < 1.0 and hi == 1.0


def test_censored_quantile_is_infinite_only_where_it_touches_a_censored_value() -> None:
    from voxassay.stats.percentiles import censored_quantile

    vals = [100.0, 200.0, 300.0, math.inf]
    assert censored_quantile(vals, 0.5) == pytest.approx(250.0)
    assert censored_quantile(vals, 2 / 3) == pytest.approx(300.0)
    assert censored_quantile(vals, 0.9) == math.inf


def _units(wers: dict[str, float], speakers: int = 12, seed: int = 0, noise: float = 0.0) -> Any:
    """Per system, 3 items per speaker of 20 words at about the given WER."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, tuple[float, float, object]]] = {}
    for s, w in wers.items():
        out[s] = {}
        for i in range(speakers * 3):
            errs = max(0.0, round(20 * w + rng.normal(0, noise)))
            out[s][f"u{i}"] = (errs, 20.0, f"spk{i // 3}")
    return out


def test_rank_change_states_its_uncertainty() -> None:
    from scipy import stats as sps

    from voxassay.stats.ranks import _tau_b, rank_change

    # clearly separated systems in the same order: tau 1 in every draw, no shift anywhere
    ref = _units({"a": 0.1, "b": 0.3, "c": 0.5})
    same = rank_change(ref, _units({"a": 0.2, "b": 0.4, "c": 0.6}))
    assert same.kendall_tau == 1.0 and (same.ci_lo, same.ci_hi) == (1.0, 1.0)
    assert same.shift == {"a": 0, "b": 0, "c": 0} and max(same.shift_share.values()) == 0.0
    assert same.units == 12 and same.n_systems == 3
    # b and c nearly tied under the condition, their point order swapped: a shift of one
    # place that many draws do not show, and an interval of tau that reaches below 1
    close = rank_change(ref, _units({"a": 0.1, "b": 0.42, "c": 0.40}, noise=3.0, seed=2))
    assert close.shift["b"] == 1 and close.shift["c"] == -1
    assert 0.05 < close.shift_share["b"] < 0.95
    assert close.ci_lo < close.kendall_tau < 1.0 or close.ci_hi == 1.0
    # one speaker: the point stands, the interval and shares are not estimable
    one = rank_change(_units({"a": 0.1, "b": 0.3}, speakers=1), _units({"a": 0.3, "b": 0.1}))
    assert one.kendall_tau == -1.0 and math.isnan(one.ci_lo) and one.shift_share == {}
    # the vectorised tau-b is scipy's, ties included
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, size=(5, 40)).astype(float)
    y = rng.integers(0, 3, size=(5, 40)).astype(float)
    ours = _tau_b(x, y)
    for k in range(40):
        want = sps.kendalltau(x[:, k], y[:, k]).statistic
        assert (math.isnan(want) and math.isnan(ours[k])) or ours[k] == pytest.approx(want)
