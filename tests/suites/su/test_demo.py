from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from voxeval.suites.su.suite import SUITE


@pytest.mark.slow
def test_su_demo_builds_voices_and_runs_baselines(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    assert SUITE.demo is not None
    store = SUITE.demo(tmp_path)
    seconds = time.perf_counter() - t0
    print(f"\nsu demo: {seconds:.1f} s")
    rep = json.loads((store.path / "report.json").read_text())
    by = {s["system"]: s for s in rep["systems"]}
    spk = by["resemblyzer"]["tasks"]["speaker_match_segmented"]
    assert spk["n"] > 0 and spk["n_failed"] == 0 and spk["accuracy"] >= 0.7
    syn = by["dnsmos-human"]["tasks"]["synthetic_detection"]
    assert syn["n"] > 0 and syn["auc"] is not None
    rows = {t["task"]: t for t in rep["tasks"]}
    assert rows["emotion"]["n_test_items"] == 0
    assert any("No offline specialist" in n for n in rows["emotion"]["notes"])
    assert any("Piper" in n for n in rows["synthetic_detection"]["notes"])
    assert [p["family"] for p in rep["paired_variants"]] == ["speaker_match"]
    assert seconds < 120
