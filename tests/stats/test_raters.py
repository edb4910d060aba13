"""The crossed rater x item model against the truth, statsmodels and sureal."""

from __future__ import annotations

import csv
import io
import math
import time
import tracemalloc
from collections import defaultdict
from contextlib import redirect_stdout
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from tests.stats.ratings_data import bvcc, mushra, ratings_dir
from voxassay.stats.raters import (
    fit_crossed,
    plain_mos,
    rater_controlled_means,
    rater_zscores,
    simulate_ratings,
)

# -- z-scores and plain MOS -------------------------------------------------------------------


def test_zscores_use_sample_sd_and_report_unscorable_raters() -> None:
    raters = ["a", "a", "a", "b", "c", "c", "c"]
    scores = [1.0, 3.0, 5.0, 4.0, 2.0, 2.0, 2.0]
    zs = rater_zscores(raters, scores)
    assert np.allclose(zs.z[:3], [-1.0, 0.0, 1.0])  # mean 3, sd (ddof 1) 2
    assert zs.sd["a"] == pytest.approx(2.0)
    assert zs.excluded == {"b": "one rating", "c": "zero sd"}
    assert np.all(np.isnan(zs.z[3:])) and zs.n_excluded_rows == 4


def test_plain_mos_t_interval_and_cluster_bootstrap() -> None:
    rng = np.random.default_rng(3)
    systems = np.repeat(["x", "y"], 60)
    items = np.tile(np.repeat(np.arange(6), 10), 2)
    item_effect = rng.normal(0, 1.0, 6)[items]
    scores = np.where(systems == "x", 3.0, 2.0) + item_effect + rng.normal(0, 0.3, 120)
    est = {e.system: e for e in plain_mos(scores, systems)}
    x = scores[systems == "x"]
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    assert est["x"].mean == pytest.approx(x.mean())
    assert est["x"].ci_hi - est["x"].mean == pytest.approx(half)
    assert est["x"].n == 60
    boot = {e.system: e for e in plain_mos(scores, systems, method="bootstrap", clusters=items)}
    assert boot["x"].ci_lo < boot["x"].mean < boot["x"].ci_hi
    # 6 items carry most of the variance: resampling items is honest about it
    assert boot["x"].ci_hi - boot["x"].ci_lo > 2 * (est["x"].ci_hi - est["x"].ci_lo)


# -- known truth ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_model_recovers_order_that_confounded_raw_means_get_wrong(seed: int) -> None:
    sim = simulate_ratings(confound=3.0, seed=seed, likert=True)
    fit = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
    truth = np.array([sim.quality[s] for s in fit.systems])
    raw = {e.system: e.mean for e in plain_mos(sim.score, sim.system)}
    raw_rho = stats.spearmanr([raw[s] for s in fit.systems], truth).statistic
    model_rho = stats.spearmanr(fit.beta, truth).statistic
    assert raw_rho < 0.3  # harsh raters on the good systems flatten or invert raw means
    assert model_rho > 0.95
    assert fit.converged
    # the rater biases behind it are found too
    bias = [sim.rater_bias[r] for r in fit.rater_effects]
    assert stats.pearsonr(bias, list(fit.rater_effects.values())).statistic > 0.95


def test_variance_components_and_ci_coverage_on_continuous_data() -> None:
    covered, total = 0, 0
    vcs = []
    for seed in range(8):
        sim = simulate_ratings(
            n_systems=8, n_raters=60, items_per_system=40, raters_per_item=6, seed=seed
        )
        fit = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
        vcs.append(list(fit.variance_components().values()))
        # beta estimates quality + mean rater bias + mean item effect; compare differences
        truth = np.array([sim.quality[s] for s in fit.systems])
        for j in range(1, len(truth)):
            c = fit.contrast(j, 0)
            total += 1
            covered += c["ci_lo"] <= truth[j] - truth[0] <= c["ci_hi"]
    mean_vc = np.mean(vcs, axis=0)
    assert mean_vc == pytest.approx([0.49, 0.09, 0.25], rel=0.3)  # rater, item, residual
    assert covered / total >= 0.85


def test_sparse_lu_solver_matches_dense_schur() -> None:
    sim = simulate_ratings(n_systems=6, n_raters=30, items_per_system=15, seed=4)
    dense = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
    sparse = fit_crossed(sim.score, sim.system, sim.rater, sim.item, max_dense=0)
    assert dense.method == "schur-dense" and sparse.method == "sparse-lu"
    assert np.max(np.abs(dense.beta - sparse.beta)) < 1e-5
    assert np.max(np.abs(dense.se - sparse.se)) < 1e-5
    assert sparse.var_rater == pytest.approx(dense.var_rater, rel=1e-4)
    assert sparse.var_item == pytest.approx(dense.var_item, rel=1e-3, abs=1e-6)


def test_edge_cases() -> None:
    with pytest.raises(ValueError):
        fit_crossed([1.0, 2.0], ["a", "b"], ["r", "r"], ["i", "j"])
    # non-finite scores are dropped, not fatal
    sim = simulate_ratings(n_systems=3, n_raters=10, items_per_system=5, seed=1)
    y = sim.score.copy()
    y[:3] = np.nan
    fit = fit_crossed(y, sim.system, sim.rater, sim.item)
    assert fit.n == len(sim) - 3 and fit.converged
    # one-way model (no raters)
    one = fit_crossed(sim.score, sim.system, None, sim.item)
    assert one.n_raters == 0 and one.var_rater == 0.0 and one.var_item >= 0.0
    est, zfit, zs = rater_controlled_means(sim.score, sim.system, sim.rater, sim.item, scale="z")
    assert zs is not None and len(est) == 3 and zfit.var_rater < 0.05  # z removes rater means


# -- 100,000 generated ratings in bounded memory -------------------------------------------------


@pytest.mark.slow
def test_100k_ratings_bounded_memory() -> None:
    sim = simulate_ratings(
        n_systems=50, n_raters=1000, items_per_system=200, raters_per_item=10, seed=0
    )
    assert len(sim) == 100_000
    tracemalloc.start()
    start = time.perf_counter()
    fit = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
    secs = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # a dense n x (raters + items) design would be 8.8 GB; the fit stays far below
    assert peak < 300e6, f"peak {peak / 1e6:.0f} MB"
    assert secs < 120 and fit.converged
    truth = np.array([sim.quality[s] for s in fit.systems])
    assert stats.spearmanr(fit.beta, truth).statistic > 0.99


# -- real data: statsmodels on subsets, sureal on the full sets ---------------------------------


def _statsmodels_fit(score, system, rater, item):  # type: ignore[no-untyped-def]
    pd = pytest.importorskip("pandas")
    smf = pytest.importorskip("statsmodels.formula.api")
    df = pd.DataFrame({"score": score, "system": system, "rater": rater, "item": item})
    return smf.mixedlm(
        "score ~ 0 + C(system)",
        df,
        groups=np.ones(len(df)),
        re_formula="0",
        vc_formula={"rater": "0 + C(rater)", "item": "0 + C(item)"},
    ).fit()


def _assert_matches_statsmodels(score, system, rater, item) -> None:  # type: ignore[no-untyped-def]
    ref = _statsmodels_fit(score, system, rater, item)
    fit = fit_crossed(score, system, rater, item)
    assert fit.converged
    # statsmodels orders fixed effects like C(system) (sorted) and components by name
    assert np.max(np.abs(np.asarray(ref.fe_params) - fit.beta)) < 1e-4
    assert np.max(np.abs(np.asarray(ref.bse_fe) / fit.se - 1)) < 0.01
    vc_item, vc_rater = np.asarray(ref.vcomp)
    assert fit.var_item == pytest.approx(vc_item, rel=1e-3, abs=1e-5)
    assert fit.var_rater == pytest.approx(vc_rater, rel=1e-3, abs=1e-5)
    assert fit.var_resid == pytest.approx(float(ref.scale), rel=1e-3)


@pytest.mark.slow
def test_matches_statsmodels_on_bvcc_subset() -> None:
    d = bvcc()
    keep = set(sorted(set(d["system"]))[:6])
    idx = [i for i, s in enumerate(d["system"]) if s in keep]
    assert len(idx) == 1392  # 6 systems, 174 utterances x 8 listeners
    cols = [[d[k][i] for i in idx] for k in ("score", "system", "rater", "item")]
    _assert_matches_statsmodels(*cols)


def test_matches_statsmodels_on_mushra() -> None:
    d = mushra()
    stimulus = [f"{i}|{s}" for i, s in zip(d["item"], d["system"], strict=True)]
    _assert_matches_statsmodels(d["score"], d["system"], d["rater"], stimulus)


def test_bvcc_trainset_in_time() -> None:
    d = bvcc()
    start = time.perf_counter()
    fit = fit_crossed(d["score"], d["system"], d["rater"], d["item"])
    secs = time.perf_counter() - start
    assert (fit.n, fit.n_raters, fit.n_items, len(fit.systems)) == (39792, 288, 4974, 175)
    assert secs < 60 and fit.converged
    # with 8 ratings per utterance and raters spread over systems, the order barely moves
    mos = {e.system: e.mean for e in plain_mos(d["score"], d["system"])}
    assert stats.spearmanr([mos[s] for s in fit.systems], fit.beta).statistic > 0.99


def test_bvcc_published_mos_tables() -> None:
    """The listener-level ratings reproduce BVCC's own MOS tables: every utterance's mean is
    its line of ``train_mos_list.txt``; system means (ours plain and rater-controlled) rank
    the systems like the published ``mydata_system.csv`` (computed over all splits, so close
    but not equal)."""
    folder = ratings_dir("bvcc_listener_level")
    d = bvcc()
    per_item: dict[str, list[float]] = defaultdict(list)
    for item, y in zip(d["item"], d["score"], strict=True):
        per_item[item].append(y)
    published = {}
    for line in (folder / "train_mos_list.txt").read_text(encoding="utf-8").split():
        name, mos = line.rsplit(",", 1)
        published[name] = float(mos)
    assert set(published) == set(per_item)
    worst = max(abs(float(np.mean(per_item[k])) - v) for k, v in published.items())
    assert worst < 1e-6
    with open(folder / "mydata_system.csv", encoding="utf-8") as fh:
        table = {r["system_ID"]: float(r["mean"]) for r in csv.DictReader(fh)}
    fit = fit_crossed(d["score"], d["system"], d["rater"], d["item"])
    mos = {e.system: e.mean for e in plain_mos(d["score"], d["system"])}
    shared = [s for s in fit.systems if s in table]
    assert len(shared) == len(fit.systems) == 175
    ref = [table[s] for s in shared]
    beta = dict(zip(fit.systems, fit.beta, strict=True))
    assert stats.spearmanr(ref, [mos[s] for s in shared]).statistic > 0.97
    assert stats.spearmanr(ref, [beta[s] for s in shared]).statistic > 0.97


def _sureal_system_scores(score, system, rater, item, content):  # type: ignore[no-untyped-def]
    """System score = mean of sureal's per-stimulus quality over the system's stimuli, from
    its subject bias/inconsistency MLE (alternating-projection solver, MLE_CO_AP2)."""
    reader_mod = pytest.importorskip("sureal.dataset_reader")
    model_mod = pytest.importorskip("sureal.subjective_model")
    stim_os: dict[str, dict[str, float]] = defaultdict(dict)
    stim_sys: dict[str, str] = {}
    stim_content: dict[str, str] = {}
    for y, s, r, i, c in zip(score, system, rater, item, content, strict=True):
        stim_os[i][r] = float(y)
        stim_sys[i] = s
        stim_content[i] = c
    contents = sorted(set(stim_content.values()))
    cid = {c: k for k, c in enumerate(contents)}
    stims = sorted(stim_os)
    dataset = SimpleNamespace(
        dataset_name="voxassay-test",
        ref_videos=[{"content_id": cid[c], "content_name": c, "path": c} for c in contents],
        dis_videos=[
            {"content_id": cid[stim_content[s]], "asset_id": k, "os": stim_os[s], "path": s}
            for k, s in enumerate(stims)
        ],
    )
    model_cls = model_mod.MaximumLikelihoodEstimationModelContentObliviousAlternativeProjection2
    with redirect_stdout(io.StringIO()), np.errstate(all="ignore"):
        result = model_cls(reader_mod.RawDatasetReader(dataset)).run_modeling()
    acc: dict[str, list[float]] = defaultdict(list)
    for s, q in zip(stims, result["quality_scores"], strict=True):
        acc[stim_sys[s]].append(float(q))
    bias = dict(zip(result["observers"], result["observer_bias"], strict=True))
    return {s: float(np.mean(v)) for s, v in acc.items()}, bias


@pytest.mark.slow
def test_agrees_with_sureal_on_full_sets() -> None:
    d = bvcc()
    ref, ref_bias = _sureal_system_scores(d["score"], d["system"], d["rater"], d["item"], d["item"])
    fit = fit_crossed(d["score"], d["system"], d["rater"], d["item"])
    ours = [float(b) for b in fit.beta]
    assert stats.spearmanr(ours, [ref[s] for s in fit.systems]).statistic > 0.99
    raters = list(fit.rater_effects)
    r_bias = stats.pearsonr([ref_bias[r] for r in raters], [fit.rater_effects[r] for r in raters])
    assert r_bias.statistic > 0.9

    dev = bvcc("DEVSET")  # 296 raters with 16..177 ratings each
    ref_d, _ = _sureal_system_scores(
        dev["score"], dev["system"], dev["rater"], dev["item"], dev["item"]
    )
    fit_d = fit_crossed(dev["score"], dev["system"], dev["rater"], dev["item"])
    rho_d = stats.spearmanr(list(fit_d.beta), [ref_d[s] for s in fit_d.systems]).statistic
    assert rho_d > 0.98

    m = mushra()
    stim = [f"{i}|{s}" for i, s in zip(m["item"], m["system"], strict=True)]
    ref_m, _ = _sureal_system_scores(m["score"], m["system"], m["rater"], stim, m["item"])
    fit_m = fit_crossed(m["score"], m["system"], m["rater"], stim)
    rho = stats.spearmanr(list(fit_m.beta), [ref_m[s] for s in fit_m.systems]).statistic
    assert rho > 0.95
