"""The pure profile functions against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voxassay.stats.intervals import bootstrap_ratio_ci, wilson_interval
from voxassay.suites.tts import profile as pf


def test_item_score_follows_the_contract() -> None:
    assert pf.item_score("critical_accuracy", {"critical_ok": 2, "critical_total": 3}) == (2, 3)
    assert pf.item_score("critical_accuracy", {"critical_ok": 0, "critical_total": 0}) == (
        "item names no critical tokens"
    )
    assert pf.item_score("intelligibility", {"wer_errors": 1, "wer_words": 4}) == (0.75, 1.0)
    # more errors than words: clipped at 0, not negative
    assert pf.item_score("intelligibility", {"wer_errors": 9, "wer_words": 4}) == (0.0, 1.0)
    assert pf.item_score("quality", {"dnsmos_ovrl": 3.0}) == (0.5, 1.0)
    assert pf.item_score("quality", {"dnsmos_ovrl": 0.5}) == (0.0, 1.0)
    assert pf.item_score("quality", {"dnsmos_ovrl": 5.4}) == (1.0, 1.0)
    assert pf.item_score("longform_stability", {"longform_sim_min": -0.2}) == (0.0, 1.0)
    assert pf.item_score("identity", {}, anchor_cosine=0.81) == (0.81, 1.0)
    assert pf.item_score("identity", {}, anchor_cosine=-0.3) == (0.0, 1.0)
    assert isinstance(pf.item_score("quality", {"dnsmos_ovrl": float("nan")}), str)
    assert isinstance(pf.item_score("identity", {}), str)


def test_contrast_dead_band_and_directions() -> None:
    ref = {"f0_median_st": 10.0, "f0_range_st": 4.0, "energy_db": -20.0, "rate_sps": 4.0,
           "pause_ratio": 0.10}  # fmt: skip
    item = {"f0_median_st": 10.5, "f0_range_st": 5.5, "energy_db": -22.0, "rate_sps": 3.6,
            "pause_ratio": 0.13}  # fmt: skip
    expect = {"f0_median": "up", "f0_range": "up", "energy": "up", "rate": "down",
              "pause_ratio": "up"}  # fmt: skip
    oc = pf.contrast_outcome(expect, item, ref)
    f = oc.features
    assert f["f0_median"]["change"] == pytest.approx(0.5)
    assert not f["f0_median"]["met"]  # exactly at the band is no change
    assert f["f0_range"]["met"]  # +1.5 st > 1
    assert not f["energy"]["met"] and f["energy"]["moved"]  # -2 dB: moved the wrong way
    assert f["rate"]["change"] == pytest.approx(-0.1) and f["rate"]["met"]
    assert f["pause_ratio"]["met"]  # +0.03 > 0.02
    assert oc.n_expected == 5 and oc.n_met == 3 and oc.score == pytest.approx(0.6)
    # a feature missing on one side leaves the denominator
    oc2 = pf.contrast_outcome({"f0_median": "up", "energy": "up"}, {"f0_median_st": 12}, ref)
    assert oc2.missing == ["energy"] and oc2.n_expected == 1 and oc2.score == 1.0


def test_cosine() -> None:
    assert pf.cosine([1, 0], [0.8, 0.6]) == pytest.approx(0.8)
    assert pf.cosine([1, 0], [-2, 0]) == pytest.approx(-1.0)
    assert pf.cosine([0, 0], [1, 0]) is None
    assert pf.cosine([1, 0], [1, 0, 0]) is None


def test_eval_score_mean_and_corpus_ratio() -> None:
    units = [pf.Unit("a", 2, 2), pf.Unit("b", 1, 3), pf.Unit("c", 0, 1)]
    es = pf.eval_score(units, seed=3)
    assert es["score"] == pytest.approx(3 / 6)  # corpus ratio, not mean of 1, 1/3, 0
    assert es["n"] == 3
    assert (es["ci_lo"], es["ci_hi"]) == bootstrap_ratio_ci([2, 1, 0], [2, 3, 1], seed=3)
    # repeats of one item are one resampling unit
    rep = pf.eval_score([pf.Unit("a", 1, 1), pf.Unit("a", 0, 1), pf.Unit("b", 1, 1)])
    assert rep["n"] == 2 and rep["score"] == pytest.approx(2 / 3)
    assert math.isnan(pf.eval_score([])["score"])


def test_dimension_score_weights_evals_equally() -> None:
    ds = pf.dimension_score(
        {
            "e1": [pf.Unit("x", 1, 1)],
            "e2": [pf.Unit("y", 0, 1), pf.Unit("z", 0, 1), pf.Unit("w", 0, 1)],
            "empty": [],
        },
        seed=1,
    )
    assert ds["score"] == pytest.approx(0.5)  # (1 + 0) / 2, not 1/4
    assert ds["n"] == 4 and ds["evals"] == ["e1", "e2"]
    # one item per eval and constant values: no spread in the bootstrap
    assert ds["ci_lo"] == pytest.approx(0.5) and ds["ci_hi"] == pytest.approx(0.5)
    ds2 = pf.dimension_score({"e1": [pf.Unit(str(i), float(i % 2), 1) for i in range(20)]}, seed=1)
    assert ds2["score"] == pytest.approx(0.5) and ds2["ci_lo"] < 0.5 < ds2["ci_hi"]


def test_paired_diffs_use_shared_items_only() -> None:
    a = [pf.Unit("i1", 1, 1), pf.Unit("i2", 1, 1), pf.Unit("i3", 1, 1)]
    b = [pf.Unit("i1", 0, 1), pf.Unit("i2", 1, 1)]
    d = pf.paired_eval_diff(a, b, seed=0)
    assert d.n == 2 and d.a == 1.0 and d.b == 0.5 and d.diff == pytest.approx(0.5)
    assert d.ci_lo <= d.diff <= d.ci_hi
    dd = pf.paired_dimension_diff(
        {"e1": a, "e2": [pf.Unit("k", 0.2, 1)]},
        {"e1": b, "e2": [pf.Unit("k", 0.6, 1)]},
        seed=0,
    )
    # mean over evals of (a - b): (0.5 + (-0.4)) / 2
    assert dd["diff"] == pytest.approx(0.05) and dd["n"] == 3
    assert dd["a"] == pytest.approx((1.0 + 0.2) / 2) and dd["b"] == pytest.approx((0.5 + 0.6) / 2)
    assert dd["ci_lo"] <= dd["diff"] <= dd["ci_hi"]


def test_dimension_correlation() -> None:
    few = pf.dimension_correlation({"A": {"x": 1.0}, "B": {"x": 0.0}}, ["x"])
    assert few["status"] == "too_few_systems" and few["matrix"] == []
    scores = {
        "A": {"x": 0.5, "y": 0.45, "z": 0.65},
        "B": {"x": 1.0, "y": 0.75, "z": 0.275},
        "C": {"x": 0.333, "y": 0.75, "z": 0.5},
    }
    c = pf.dimension_correlation(scores, ["x", "y", "z"])
    assert c["status"] == "ok"
    m = {(a, b): c["matrix"][i][j]["rho"] for i, a in enumerate("xyz") for j, b in enumerate("xyz")}
    # ranks x = (2, 3, 1), y = (1, 2.5, 2.5), z = (3, 1, 2)
    assert m[("x", "x")] == 1.0
    assert m[("x", "y")] == pytest.approx(0.0, abs=1e-12)
    assert m[("x", "z")] == pytest.approx(-0.5)
    assert m[("x", "z")] == m[("z", "x")]


def test_top_k_ties_by_ci_overlap() -> None:
    scores = {
        f"s{i}": {"score": 1.0 - 0.1 * i, "ci_lo": 0.95 - 0.1 * i, "ci_hi": 1.05 - 0.1 * i}
        for i in range(8)
    }
    scores["s0"] = {"score": 1.0, "ci_lo": 0.8, "ci_hi": 1.0}
    t = pf.top_k(scores, k=5)
    assert t["ranked"][:5] == ["s0", "s1", "s2", "s3", "s4"]
    # the 5th (s4) has CI [0.55, 0.65]; s5's CI [0.45, 0.55] touches it; s6 does not
    assert t["top"] == ["s0", "s1", "s2", "s3", "s4", "s5"]
    # best CI [0.8, 1.0]: s1 [0.85, 0.95] and s2 [0.75, 0.85] reach it
    assert t["leaders"] == ["s0", "s1", "s2"]


def test_instruction_following_flags_no_change() -> None:
    ref = {"f0_median_st": 10.0, "energy_db": -20.0, "rate_sps": 4.0}
    still = [pf.contrast_outcome({"f0_median": "up", "energy": "up"}, dict(ref), ref)] * 3
    r = pf.instruction_following(still)
    assert r["ignores_instructions"] and r["met"] == 0 and r["expected"] == 6
    moved = pf.contrast_outcome(
        {"f0_median": "up", "rate": "down"}, {**ref, "f0_median_st": 11.0, "rate_sps": 3.0}, ref
    )
    r2 = pf.instruction_following([moved, pf.contrast_outcome({"energy": "up"}, ref, ref)])
    assert not r2["ignores_instructions"]
    assert r2["met"] == 2 and r2["expected"] == 3
    assert (r2["ci_lo"], r2["ci_hi"]) == wilson_interval(2, 3)
    assert r2["features"]["rate"]["mean_abs_change"] == pytest.approx(0.25)
    assert r2["features"]["energy"]["below_dead_band"]
    assert not pf.instruction_following([])["ignores_instructions"]


def test_mean_ci_and_infer_primary() -> None:
    m = pf.mean_ci([1.0, 2.0, float("nan"), 3.0])
    assert m["mean"] == 2.0 and m["n"] == 3
    assert np.isfinite(m["ci_lo"]) and m["ci_lo"] <= 2.0 <= m["ci_hi"]
    assert pf.infer_primary("critical_content", []) == "critical_accuracy"
    assert pf.infer_primary("performance", [{"contrast": {"reference": "x"}}]) is None
    assert pf.infer_primary("expressiveness", [{"contrast": {"reference": "x"}}]) == (
        "prosody_following"
    )
    assert pf.infer_primary("identity_stress", [{"group": "g"}]) == "identity"
    assert pf.infer_primary("expressiveness", [{}]) is None
