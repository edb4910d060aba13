"""End-to-end SU runs with in-process understanders on real LibriSpeech clips."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from voxassay.core.errors import InputError
from voxassay.core.items import load_manifest, write_manifest
from voxassay.core.runstore import RunStore
from voxassay.suites.su.pairs import build_pairs
from voxassay.suites.su.run import run_su

H = "python:tests.suites.su.understanders:"


@pytest.fixture(scope="module")
def pairs(speaker_manifest: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    write_manifest(build_pairs(load_manifest(speaker_manifest), "speaker_match", n=12, seed=0), p)
    return p


def _report(store: RunStore) -> dict:
    return json.loads((store.path / "report.json").read_text())


def test_fixed_answer_scores_half_and_skips_calibration(pairs: Path, tmp_path: Path) -> None:
    store = run_su(pairs, ["speaker_match_segmented"], [H + "fixed"], tmp_path)
    rep = _report(store)
    block = rep["systems"][0]["tasks"]["speaker_match_segmented"]
    n_test = sum(1 for it in load_manifest(pairs) if it.labels["split"] == "test")
    assert block["n"] == n_test and block["n_unparseable"] == 0
    truths = Counter(
        it.labels["truth"] for it in load_manifest(pairs) if it.labels["split"] == "test"
    )
    assert block["k"] == truths["same"]  # "same" is right exactly on same-speaker pairs
    assert block["confusion"]["matrix"] == [[truths["same"], 0], [truths["different"], 0]]
    recs = [json.loads(x) for x in (store.path / "records.jsonl").read_text().splitlines()]
    assert len(recs) == n_test  # models do not spend calls on calibration items
    assert all(r["output"]["prompt"].startswith("You are given two audio clips") for r in recs)
    assert rep["tasks"][0]["no_real_system"] is True
    assert "harness" in " ".join(rep["tasks"][0]["notes"])
    assert "suite" in rep and rep["suite"] == "su" and rep["systems"][0]["groups"]


def test_unparseable_counted_not_scored(pairs: Path, tmp_path: Path) -> None:
    store = run_su(
        pairs, ["speaker_match"], [H + "garbage", H + "lenient_same", H + "not_text"], tmp_path
    )
    rep = _report(store)
    by = {s["system"]: s for s in rep["systems"]}
    g = by[H + "garbage"]["tasks"]["speaker_match_merged"]
    assert g["n"] == 0 and g["n_unparseable"] == g["n_items"] > 0
    assert by[H + "garbage"]["unparseable_examples"][0]["answer_text"].startswith("The weather")
    le = by[H + "lenient_same"]["tasks"]["speaker_match_segmented"]
    assert le["n_lenient"] == le["n"] == le["n_items"]  # "not the same" parsed as different
    assert (
        by[H + "not_text"]["overall"]["n_unparseable"] == by[H + "not_text"]["overall"]["n_records"]
    )
    # both variants ran on the same pairs: a paired comparison per system
    pv = {p["system"]: p for p in rep["paired_variants"]}
    assert pv[H + "lenient_same"]["n"] == le["n"] and pv[H + "lenient_same"]["diff"] == 0.0
    md = (store.path / "report.md").read_text()
    assert "Segmented vs merged" in md and "unparseable" in md
    assert "<table>" in (store.path / "report.html").read_text()


@pytest.mark.slow
def test_errors_and_timeouts_are_records(pairs: Path, tmp_path: Path) -> None:
    store = run_su(
        pairs,
        ["speaker_match_segmented"],
        [H + "Flaky?min_s=8", H + "hang?seconds=5"],
        tmp_path,
        timeout=0.5,
    )
    recs = store.load_records().records
    flaky = Counter(r.status for r in recs if "Flaky" in r.system)
    assert flaky["error"] > 0 and flaky["ok"] > 0
    err = next(r for r in recs if "Flaky" in r.system and r.status == "error")
    assert "crashed on a short clip" in err.error["message"]
    hang = [r for r in recs if "hang" in r.system]
    assert hang and all(r.status == "timeout" for r in hang)
    block = _report(store)["systems"][1]["tasks"]["speaker_match_segmented"]
    assert block["n"] == 0 and block["n_timeout"] == len(hang) and block["n_failed"] == len(hang)


def test_bad_items_become_error_records(pairs: Path, tmp_path: Path) -> None:
    items = load_manifest(pairs)[:3]
    items[0].audio = [items[0].audio[0], str(tmp_path / "missing.wav")]  # type: ignore[index]
    items[1].labels["truth"] = "maybe"
    items[2].audio = items[2].audio[:1]  # type: ignore[index]
    for it in items:
        it.labels["split"] = "test"
    bad = tmp_path / "bad.jsonl"
    write_manifest(items, bad)
    store = run_su(bad, ["speaker_match_segmented"], [H + "fixed"], tmp_path / "runs")
    recs = {r.id: r for r in store.load_records().records}
    assert recs[items[0].id].error["kind"] == "missing"
    assert "labels.truth" in recs[items[1].id].error["message"]
    assert "needs 2 clip(s)" in recs[items[2].id].error["message"]


def test_merged_input_and_louder_rule(loudness_manifest: Path, tmp_path: Path) -> None:
    pairs_path = tmp_path / "emo.jsonl"
    built = build_pairs(
        load_manifest(loudness_manifest),
        "emotion_compare",
        margin=1,
        seed=0,
        calibration_fraction=0,
    )
    write_manifest(built, pairs_path)
    store = run_su(pairs_path, ["emotion_compare"], [H + "louder"], tmp_path)
    rep = _report(store)
    blocks = rep["systems"][0]["tasks"]
    # the louder clip is the more intense one by construction: segmented is always right
    assert blocks["emotion_compare_segmented"]["accuracy"] == 1.0
    # merged: one input, the rule cannot compare -> every answer is unparseable, none guessed
    m = blocks["emotion_compare_merged"]
    assert m["n"] == 0 and m["n_unparseable"] == len(built)
    recs = store.load_records().records
    merged = next(r for r in recs if r.id.endswith("#merged"))
    assert merged.output["input_mode"] == "merged"
    assert "0.8 seconds of silence, a short 1 kHz beep" in merged.output["prompt"]
    assert "anger" in merged.output["prompt"]
    assert any("No offline specialist" in n for t in rep["tasks"] for n in t["notes"])


def test_resume_skips_done(pairs: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    spec = H + f"logged?log={log}"
    first = run_su(pairs, ["speaker_match_segmented"], [spec], tmp_path / "runs")
    n = len(log.read_text().splitlines())
    # drop the last two records as if the run had been killed, then resume
    path = first.path / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-2]) + lines[-2][:20])
    again = run_su(pairs, ["speaker_match_segmented"], [spec], tmp_path / "runs", resume=True)
    assert again.path == first.path
    assert len(log.read_text().splitlines()) == n + 2
    assert len(again.load_records().records) == n


def test_specialist_refuses_other_tasks(pairs: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="specialist for speaker_match"):
        run_su(pairs, ["synthetic_detection"], ["resemblyzer"], tmp_path)


def test_emotion_vocabulary_and_synonyms(loudness_manifest: Path, tmp_path: Path) -> None:
    store = run_su(
        loudness_manifest,
        ["emotion"],
        [H + "fixed?text=ANSWER: angry", H + "fixed?text=ANSWER: furious"],
        tmp_path,
        vocabulary="emotion-48",
    )
    rep = _report(store)
    by = {s["system"]: s["tasks"]["emotion"] for s in rep["systems"]}
    ok = by[H + "fixed?text=ANSWER: angry"]
    assert ok["accuracy"] == 1.0 and ok["n"] == 6  # a declared synonym counts as the label
    bad = by[H + "fixed?text=ANSWER: furious"]
    assert bad["n"] == 0 and bad["n_unparseable"] == 6  # not declared: never guessed
    assert len(rep["vocabulary"]["labels"]) == 48
    rec = store.load_records().records[0]
    assert "tiredness" in rec.output["prompt"]  # the 48 labels are offered
    # a truth outside the vocabulary is an input error, not a wrong answer
    items = load_manifest(loudness_manifest)
    items[0].labels["emotion"] = "grumpy"
    m = tmp_path / "m.jsonl"
    write_manifest(items, m)
    s2 = run_su(m, ["emotion"], [H + "fixed?text=ANSWER: anger"], tmp_path / "b")
    errs = [r for r in s2.load_records().records if r.status == "error"]
    assert len(errs) == 1 and "not a label of vocabulary crema-d-6" in errs[0].error["message"]


def test_synthetic_rating_from_model(loudness_manifest: Path, tmp_path: Path) -> None:
    items = load_manifest(loudness_manifest)
    for it in items:  # constructed: the quietest level plays "synthetic"
        it.labels = {"synthetic": it.labels["intensity"] == 1}
    m = tmp_path / "syn.jsonl"
    write_manifest(build_pairs(items, "synthetic_detection", calibration_fraction=0), m)
    store = run_su(m, ["synthetic_detection"], [H + "rater"], tmp_path)
    b = _report(store)["systems"][0]["tasks"]["synthetic_detection"]
    # rater: -38 dBFS -> 1 or 2 (at the step edge), -29 -> 4, -20 -> 5: perfect separation
    assert b["auc"] == 1.0 and b["eer"] == 0.0 and b["accuracy"] == 1.0
    assert b["n_lenient"] == 6 and b["mean_rating_synthetic"] <= 2.0


def test_compare_two_runs_paired(pairs: Path, tmp_path: Path) -> None:
    from voxassay.report.compare import compare_runs

    a = run_su(pairs, ["speaker_match_segmented"], [H + "fixed"], tmp_path / "a")
    b = run_su(
        pairs, ["speaker_match_segmented"], [H + "fixed?text=ANSWER: different"], tmp_path / "b"
    )
    result = compare_runs(a.path, b.path)
    c = result["comparisons"][0]
    assert result["metric"] == "accuracy" and result["lower_is_better"] is False
    assert c["n_shared"] > 0 and c["overall"]["a"] + c["overall"]["b"] == pytest.approx(1.0)
