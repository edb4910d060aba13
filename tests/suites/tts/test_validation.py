"""Quality metrics vs the real MUSHRA listening test (128 stimuli, 21 listeners)."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import shared_data
from voxassay.measures.quality import dnsmos_unavailable
from voxassay.suites.tts.validation import render_validation_markdown, validate_quality_metrics

# one xdist worker for the modules that score the same real audio (the MUSHRA stimuli's DNSMOS scores, computed once per worker)
pytestmark = pytest.mark.xdist_group("dnsmos-mushra")


SIGNALS = 8
"""Half of the 16 signals, every condition (64 stimuli): DNSMOS costs about a CPU-second per
stimulus, and the whole corpus was the suite's largest single cost. The whole corpus's figures
are printed by ``benchmarks/bench_quality_validation.py``."""


@pytest.mark.slow
def test_validation_on_the_real_mushra_set() -> None:
    if dnsmos_unavailable():
        pytest.skip(str(dnsmos_unavailable()))
    res = validate_quality_metrics(
        shared_data() / "ratings" / "neural_codec_mushra", n_boot=400, max_signals=SIGNALS
    )
    print("\n" + render_validation_markdown(res))
    json.dumps(res)  # plain JSON-able
    assert res["errors"] == []
    assert res["n_stimuli"] == SIGNALS * 8 and res["n_signals"] == SIGNALS
    assert res["n_conditions"] == 8
    # every listener rated 8 of the 16 signals: the ratings of the first 8, counted here
    with open(shared_data() / "ratings" / "neural_codec_mushra" / "ratings_long.csv") as fh:
        rows = list(csv.DictReader(fh))
    first = sorted({r["item_id"] for r in rows})[:SIGNALS]
    assert res["n_ratings"] == sum(r["item_id"] in first and bool(r["audio_path"]) for r in rows)
    by = {m["metric"]: m for m in res["metrics"]}
    assert {"dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808", "bandwidth_hz",
            "loudness_lufs", "clipping_fraction"} <= set(by)  # fmt: skip
    assert by["clipping_fraction"]["constant"] is True  # no codec clips
    for m in res["metrics"]:
        if m["constant"] is False:
            assert m["stimulus"]["n"] == SIGNALS * 8 and m["condition"]["n"] == 8
            lo, hi = m["condition"]["ci"]
            assert lo <= hi
    # measured on these 8 signals: best DNSMOS condition-level rho +0.76, OVRL's CI
    # [0.24, 0.88], bandwidth +0.95 (condition) and +0.65 (stimulus); on all 16: OVRL +0.62,
    # SIG +0.57, P.808 +0.52, BAK +0.19 (CI spans 0), bandwidth +0.95
    best = max(by[k]["condition"]["spearman"] for k in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_p808"))
    assert best > 0.4
    assert by["dnsmos_ovrl"]["condition"]["ci"][0] > 0
    assert by["bandwidth_hz"]["condition"]["spearman"] > 0.8
    assert by["bandwidth_hz"]["stimulus"]["spearman"] > 0.4
    ref = next(c for c in res["conditions"] if c["condition"] == "Reference")
    assert ref["human_mean"] > 95
