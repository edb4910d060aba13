"""Paired per-item differences: the mean, its bootstrap CI, the Wilcoxon p and Holm's
adjustment, against scipy and hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

from voxassay.stats.paired import holm, paired_difference, wilcoxon_p


def test_a_shift_is_found_and_no_shift_is_not() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(3, 1, 60)
    moved = paired_difference(base + 0.5 + rng.normal(0, 0.3, 60), base)
    assert moved.mean == pytest.approx(0.5, abs=0.12)
    assert moved.excludes_zero and moved.ci_low is not None and moved.ci_low > 0.3
    assert moved.p is not None and moved.p < 1e-6
    same = paired_difference(base + rng.normal(0, 0.3, 60), base)
    assert not same.excludes_zero and same.p is not None and same.p > 0.05
    assert same.n == 60


def test_wilcoxon_matches_scipy_and_edge_cases_are_said() -> None:
    from scipy.stats import wilcoxon

    d = np.array([1.5, -0.5, 2.0, 0.0, 3.0, 1.0, -1.0, 2.5])
    assert wilcoxon_p(d) == pytest.approx(wilcoxon(d[d != 0]).pvalue)
    assert wilcoxon_p(np.zeros(5)) == 1.0
    assert wilcoxon_p([]) is None
    one = paired_difference([2.0], [1.0])
    assert one.mean == 1.0 and one.ci_low is None and one.p is None and one.note
    none = paired_difference([np.nan, 1.0], [1.0, np.nan])
    assert none.n == 0 and none.mean is None and none.note


def test_holm_by_hand() -> None:
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, max(0.04, 0.06), max(.., 0.06), 0.5
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([None, 0.2]) == [None, 0.2]
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
