"""Benchmark: the sparse crossed rater x item model (``voxassay.stats.raters.fit_crossed``).

(a) the real BVCC listener-level TRAINSET (../shared/data/ratings/bvcc_listener_level beside
    the repo; 39,792 ratings, 288 raters, 4,974 items, 175 systems): model time against a
    plain per-system mean (the baseline of the ratio). Target: < 60 s.
(b) 100,000 generated ratings (50 systems, 1,000 raters, 10,000 items, 10 raters per item):
    time and peak traced memory (tracemalloc) and the process's peak RSS. Target: peak
    traced memory < 500 MB (nothing of size n x (raters + items) is dense).
(c) statsmodels' crossed ``mixedlm`` (the reference definition) on a BVCC subset it can
    finish, against ours: time ratio and the largest absolute differences of the system
    means and variance components (skipped when statsmodels is not installed).
(d) simulated known-bias data with raters confounded with systems (harsh raters mostly rate
    the good systems): Spearman of estimated vs true system order for raw means vs the model.
    Target: model >= 0.95 where raw means are below 0.5.

Run: ``python benchmarks/bench_rater_model.py [--skip-statsmodels]``. Prints the figures and
exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.stats.raters import fit_crossed, simulate_ratings  # noqa: E402

BVCC = ROOT.parent / "shared" / "data" / "ratings" / "bvcc_listener_level" / "TRAINSET"
TARGET_BVCC_S = 60.0
TARGET_PEAK_MB = 500.0


def load_bvcc() -> tuple[list[float], list[str], list[str], list[str]] | None:
    if not BVCC.exists():
        return None
    scores, systems, raters, items = [], [], [], []
    with open(BVCC, encoding="utf-8") as fh:
        for row in csv.reader(fh):
            systems.append(row[0])
            items.append(row[1])
            scores.append(float(row[2]))
            raters.append(row[4].split("_")[2])
    return scores, systems, raters, items


def per_system_mean(scores: list[float], systems: list[str]) -> dict[str, float]:
    codes, inverse = np.unique(np.asarray(systems), return_inverse=True)
    y = np.asarray(scores)
    sums = np.bincount(inverse, weights=y, minlength=codes.size)
    return dict(zip(codes.tolist(), (sums / np.bincount(inverse)).tolist(), strict=True))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy import stats

    return float(stats.spearmanr(a, b).statistic)


def bench_bvcc(data: tuple[list[float], list[str], list[str], list[str]]) -> bool:
    scores, systems, raters, items = data
    start = time.perf_counter()
    per_system_mean(scores, systems)
    base_s = time.perf_counter() - start
    start = time.perf_counter()
    fit = fit_crossed(scores, systems, raters, items)
    model_s = time.perf_counter() - start
    vc = fit.variance_components()
    print(
        f"(a) BVCC TRAINSET {fit.n:,} ratings, {fit.n_raters} raters, {fit.n_items:,} items, "
        f"{len(fit.systems)} systems"
    )
    print(
        f"    model {model_s:.2f} s ({fit.iterations} iterations, {fit.evaluations} deviance "
        f"evaluations, converged {fit.converged}, {fit.method}); per-system mean "
        f"{base_s * 1000:.1f} ms; ratio {model_s / base_s:,.0f}x"
    )
    print(
        f"    variance components: rater {vc['rater']:.4f}, item {vc['item']:.4f}, "
        f"residual {vc['residual']:.4f}"
    )
    ok = model_s < TARGET_BVCC_S and fit.converged
    print(f"    target < {TARGET_BVCC_S:.0f} s: {'OK' if ok else 'MISSED'}")
    return ok


def bench_100k() -> bool:
    sim = simulate_ratings(
        n_systems=50, n_raters=1000, items_per_system=200, raters_per_item=10, seed=0
    )
    tracemalloc.start()
    start = time.perf_counter()
    fit = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
    secs = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    truth = np.array([sim.quality[s] for s in fit.systems])
    dense_mb = len(sim) * (fit.n_raters + fit.n_items) * 8 / 1e6
    print(
        f"(b) generated {len(sim):,} ratings, {fit.n_raters} raters, {fit.n_items:,} items, "
        f"{len(fit.systems)} systems"
    )
    print(
        f"    model {secs:.2f} s, converged {fit.converged}; peak traced memory "
        f"{peak / 1e6:.1f} MB (a dense n x (raters + items) design alone: {dense_mb:,.0f} MB); "
        f"process peak RSS {rss_mb:.0f} MB"
    )
    print(f"    Spearman(model, truth) {spearman(fit.beta, truth):.4f}")
    ok = peak / 1e6 < TARGET_PEAK_MB and fit.converged
    print(f"    target peak < {TARGET_PEAK_MB:.0f} MB: {'OK' if ok else 'MISSED'}")
    return ok


def bench_statsmodels(data: tuple[list[float], list[str], list[str], list[str]]) -> bool:
    try:
        import pandas as pd
        import statsmodels.formula.api as smf
    except ImportError:
        print("(c) statsmodels not installed: skipped")
        return True
    scores, systems, raters, items = data
    keep_sys = set(sorted(set(systems))[:6])
    idx = [i for i, s in enumerate(systems) if s in keep_sys]
    df = pd.DataFrame(
        {
            "score": [scores[i] for i in idx],
            "system": [systems[i] for i in idx],
            "rater": [raters[i] for i in idx],
            "item": [items[i] for i in idx],
        }
    )
    start = time.perf_counter()
    ref = smf.mixedlm(
        "score ~ 0 + C(system)",
        df,
        groups=np.ones(len(df)),
        re_formula="0",
        vc_formula={"rater": "0 + C(rater)", "item": "0 + C(item)"},
    ).fit()
    sm_s = time.perf_counter() - start
    start = time.perf_counter()
    fit = fit_crossed(df["score"], df["system"], df["rater"], df["item"])
    ours_s = time.perf_counter() - start
    # statsmodels orders variance components by name: item, rater
    vc_ref = dict(zip(["item", "rater"], np.asarray(ref.vcomp).tolist(), strict=True))
    vc = fit.variance_components()
    d_beta = float(np.max(np.abs(np.asarray(ref.fe_params) - fit.beta)))
    d_se = float(np.max(np.abs(np.asarray(ref.bse_fe) / fit.se - 1)))
    d_vc = max(abs(vc_ref["item"] - vc["item"]), abs(vc_ref["rater"] - vc["rater"]))
    d_vc = max(d_vc, abs(float(ref.scale) - vc["residual"]))
    print(
        f"(c) statsmodels mixedlm on a BVCC subset ({len(df):,} ratings, "
        f"{df['rater'].nunique()} raters, {df['item'].nunique()} items, 6 systems)"
    )
    print(
        f"    statsmodels {sm_s:.2f} s, ours {ours_s:.3f} s: ratio {sm_s / ours_s:,.0f}x; "
        f"max |d system mean| {d_beta:.2e}, max |d variance component| {d_vc:.2e}, "
        f"max relative SE difference {d_se:.2e}"
    )
    ok = d_beta < 1e-4 and d_vc < 1e-3 and d_se < 1e-2
    print(f"    agreement (1e-4 means, 1e-3 variances, 1% SE): {'OK' if ok else 'MISSED'}")
    return ok


def bench_simulated() -> bool:
    print(
        "(d) simulated rater biases confounded with systems (10 systems, 40 raters, 1,000 ratings)"
    )
    ok = True
    for confound in (0.0, 2.0, 3.0):
        raw_rhos, model_rhos = [], []
        for seed in range(5):
            sim = simulate_ratings(confound=confound, seed=seed, likert=True)
            fit = fit_crossed(sim.score, sim.system, sim.rater, sim.item)
            raw = per_system_mean(sim.score.tolist(), sim.system.tolist())
            truth = np.array([sim.quality[s] for s in fit.systems])
            raw_rhos.append(spearman(np.array([raw[s] for s in fit.systems]), truth))
            model_rhos.append(spearman(fit.beta, truth))
        raw_m, model_m = float(np.mean(raw_rhos)), float(np.mean(model_rhos))
        print(
            f"    confound {confound:.0f}: Spearman with the true order, mean of 5 seeds: "
            f"raw means {raw_m:+.3f}, model {model_m:+.3f} (worst seed {min(model_rhos):+.3f})"
        )
        if confound >= 2.0:
            ok = ok and raw_m < 0.5 and model_m >= 0.95
    print(f"    target (model >= 0.95 where raw < 0.5): {'OK' if ok else 'MISSED'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-statsmodels", action="store_true")
    args = parser.parse_args()
    results = []
    data = load_bvcc()
    if data is None:
        print(f"(a) BVCC not found at {BVCC}: skipped")
    else:
        results.append(bench_bvcc(data))
    results.append(bench_100k())
    if data is not None and not args.skip_statsmodels:
        results.append(bench_statsmodels(data))
    results.append(bench_simulated())
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
