"""The specialist baselines on real recordings (real resemblyzer and DNSMOS models)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxassay.core.items import load_manifest, write_manifest
from voxassay.suites.su.pairs import build_pairs
from voxassay.suites.su.run import run_su

# one xdist worker for the modules that score the same real audio (the real-vs-vocoded clips' DNSMOS scores, computed once per worker)
pytestmark = pytest.mark.xdist_group("dnsmos-lj")


@pytest.mark.slow
def test_resemblyzer_on_librispeech_pairs(speaker_manifest: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    write_manifest(build_pairs(load_manifest(speaker_manifest), "speaker_match", seed=0), pairs)
    store = run_su(pairs, ["speaker_match_segmented"], ["resemblyzer"], tmp_path)
    rep = json.loads((store.path / "report.json").read_text())
    b = rep["systems"][0]["tasks"]["speaker_match_segmented"]
    print(
        f"\nresemblyzer LibriSpeech test-other: accuracy {b['accuracy']:.3f} "
        f"[{b['ci_lo']:.3f}, {b['ci_hi']:.3f}] n={b['n']}, AUC {b['auc']:.3f}, "
        f"EER {b['eer']:.3f}, threshold {b['threshold']}"
    )
    assert b["n"] == 80 and b["n_failed"] == 0
    assert b["accuracy"] >= 0.9 and b["auc"] >= 0.95
    assert b["threshold"]["source"].startswith("calibration split")
    info = json.loads((store.path / "run.json").read_text())["systems"]["resemblyzer"]
    assert info["thresholds"]["speaker_match_segmented"]["n_calibration"] == 28
    rec = next(r for r in store.load_records().records)
    assert -1.0 <= rec.output["score"] <= 1.0 and rec.output["parse_mode"] == "strict"


@pytest.mark.slow
def test_dnsmos_human_on_real_vs_vocoded(real_vs_synthetic_manifest: Path, tmp_path: Path) -> None:
    items = build_pairs(load_manifest(real_vs_synthetic_manifest), "synthetic_detection", seed=0)
    manifest = tmp_path / "rvs.jsonl"
    write_manifest(items, manifest)
    store = run_su(manifest, ["synthetic_detection"], ["dnsmos-human"], tmp_path, workers=2)
    rep = json.loads((store.path / "report.json").read_text())
    b = rep["systems"][0]["tasks"]["synthetic_detection"]
    print(
        f"\ndnsmos-human real vs vocoded: AUC {b['auc']:.3f}, EER {b['eer']:.3f}, "
        f"acc@3 {b['accuracy']:.3f}, acc@best {b['best_threshold']['accuracy']:.3f} "
        f"(t={b['best_threshold']['threshold']:.2f}), mean P.808 human "
        f"{b['mean_rating_human']:.2f} vs synthetic {b['mean_rating_synthetic']:.2f}"
    )
    n_test = sum(1 for it in items if it.labels["split"] == "test")
    assert b["n"] == n_test and b["n_failed"] == 0
    assert 0.0 <= b["auc"] <= 1.0 and 0.0 <= b["eer"] <= 1.0
    assert b["best_threshold"]["accuracy"] >= b["accuracy"]  # best is optimistic by construction
    for r in store.load_records().records:
        assert 1.0 <= r.metrics["rating"] <= 5.0
    assert "quality, not humanness" in rep["systems"][0]["score_meaning"]
    # calibration records ran (specialist) and fit a threshold that is reported
    assert rep["systems"][0]["overall"]["n_calibration_records"] == len(items) - n_test
    assert "calibrated_threshold" in b
