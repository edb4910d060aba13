"""Quality metrics vs the real MUSHRA listening test (128 stimuli, 21 listeners)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import shared_data
from voxassay.measures.quality import dnsmos_unavailable
from voxassay.suites.tts.validation import render_validation_markdown, validate_quality_metrics

# one xdist worker for the modules that score the same real audio (the MUSHRA stimuli's DNSMOS scores, computed once per worker)
pytestmark = pytest.mark.xdist_group("dnsmos-mushra")


@pytest.mark.slow
def test_validation_on_the_real_mushra_set() -> None:
    if dnsmos_unavailable():
        pytest.skip(str(dnsmos_unavailable()))
    res = validate_quality_metrics(shared_data() / "ratings" / "neural_codec_mushra", n_boot=400)
    print("\n" + render_validation_markdown(res))
    json.dumps(res)  # plain JSON-able
    assert res["errors"] == []
    assert res["n_stimuli"] == 128 and res["n_signals"] == 16 and res["n_conditions"] == 8
    assert res["n_ratings"] == 128 * 21 // 2  # each listener rated 8 of 16 signals: 1344
    by = {m["metric"]: m for m in res["metrics"]}
    assert {"dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808", "bandwidth_hz",
            "loudness_lufs", "clipping_fraction"} <= set(by)  # fmt: skip
    assert by["clipping_fraction"]["constant"] is True  # no codec clips
    for m in res["metrics"]:
        if m["constant"] is False:
            assert m["stimulus"]["n"] == 128 and m["condition"]["n"] == 8
            lo, hi = m["condition"]["ci"]
            assert lo <= hi
    # measured: condition-level rho OVRL +0.62, SIG +0.57, P.808 +0.52 (CIs above 0);
    # BAK +0.19 (CI spans 0); bandwidth +0.95
    best = max(by[k]["condition"]["spearman"] for k in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_p808"))
    assert best > 0.4
    assert by["dnsmos_ovrl"]["condition"]["ci"][0] > 0
    assert by["bandwidth_hz"]["condition"]["spearman"] > 0.8
    assert by["bandwidth_hz"]["stimulus"]["spearman"] > 0.4
    ref = next(c for c in res["conditions"] if c["condition"] == "Reference")
    assert ref["human_mean"] > 95
