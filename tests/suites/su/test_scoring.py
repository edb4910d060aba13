from __future__ import annotations

import math

import numpy as np
import pytest

from voxassay.suites.su.scoring import (
    accuracy,
    best_threshold,
    confusion,
    eer,
    paired_accuracy_diff,
    roc_auc,
    threshold_accuracy,
)


def test_accuracy_wilson() -> None:
    a = accuracy([True] * 8 + [False] * 2)
    assert a["accuracy"] == 0.8 and a["n"] == 10 and a["k"] == 8
    # Wilson 95 % for 8/10 (textbook value 0.490-0.943)
    assert a["ci_lo"] == pytest.approx(0.4902, abs=1e-3)
    assert a["ci_hi"] == pytest.approx(0.9433, abs=1e-3)
    assert math.isnan(accuracy([])["accuracy"])


def test_auc_and_eer() -> None:
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == 1.0
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 0.0
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5
    assert roc_auc([1, 2, 3, 4, 5], [False, True, False, True, True]) == pytest.approx(5 / 6)
    assert eer([0.9, 0.8, 0.2, 0.1], [True, True, False, False])["eer"] == 0.0
    rng = np.random.default_rng(0)
    s = rng.normal(size=4000)
    y = rng.random(4000) < 0.5
    assert eer(s, y)["eer"] == pytest.approx(0.5, abs=0.03)
    # two Gaussians at d' = 2: EER = Phi(-1) = 0.1587
    s2 = np.concatenate([rng.normal(1, 1, 20000), rng.normal(-1, 1, 20000)])
    y2 = np.arange(40000) < 20000
    assert eer(s2, y2)["eer"] == pytest.approx(0.1587, abs=0.01)
    assert eer(s2, y2)["threshold"] == pytest.approx(0.0, abs=0.05)
    assert math.isnan(eer([1, 2], [True, True])["eer"])


def test_thresholds() -> None:
    s = [1, 2, 3, 4, 5, 2.5]
    y = [False, False, True, True, True, False]
    t = best_threshold(s, y)
    assert 2.5 < t < 3
    assert threshold_accuracy(s, y, t)["accuracy"] == 1.0
    assert threshold_accuracy(s, y, 3.0)["k"] == 6
    assert threshold_accuracy(s, y, 4.0)["k"] == 5


def test_confusion() -> None:
    c = confusion(["a", "a", "b"], ["a", "b", "b"], ["a", "b"])
    assert c["matrix"] == [[1, 1], [0, 1]]
    assert c["per_class"][0]["recall"] == 0.5 and c["per_class"][1]["precision"] == 0.5
    c2 = confusion(["a"], ["z"], ["a"])  # an answer outside the listed labels still counts
    assert c2["labels"] == ["a", "z"]


def test_paired_diff() -> None:
    a = {f"p{i}": True for i in range(30)}
    b = {f"p{i}": i % 2 == 0 for i in range(30)}
    d = paired_accuracy_diff(a, b)
    assert d["n"] == 30 and d["diff"] == pytest.approx(0.5)
    assert 0.3 < d["ci_lo"] < 0.5 < d["ci_hi"] < 0.7
    assert paired_accuracy_diff({"x": True}, {"y": True})["n"] == 0
