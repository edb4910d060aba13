"""``voxassay.study.analysis``: reading long-format ratings, the report, study folders."""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.stats.ratings_data import bvcc, mushra, ratings_dir, write_long_csv
from voxassay.core.errors import InputError
from voxassay.stats.raters import fit_crossed, simulate_ratings
from voxassay.study.format import RATING_COLUMNS
from voxassay.study.ratings import load_ratings_csv
from voxassay.study.study_report import run_analysis

HEADER = list(RATING_COLUMNS)


def _sim_rows(eval_id: str = "naturalness", seed: int = 0, **kw: int) -> list[list[str]]:
    sim = simulate_ratings(
        n_systems=kw.get("n_systems", 5),
        n_raters=kw.get("n_raters", 16),
        items_per_system=kw.get("items_per_system", 12),
        raters_per_item=kw.get("raters_per_item", 5),
        likert=True,
        seed=seed,
    )
    return [
        [r, i, s, eval_id, f"{y:g}", "", "5000", "", "quality", "likert", ""]
        for r, i, s, y in zip(sim.rater, sim.item, sim.system, sim.score, strict=True)
    ]


def _write(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


# -- bad input is data --------------------------------------------------------------------------


def test_malformed_rows_are_counted_with_line_numbers_and_reasons(tmp_path: Path) -> None:
    good = _sim_rows()
    bad = [
        ["", "i1", "sys0", "naturalness", "3", "", "", "", "", "", ""],
        ["r01", "i1", "sys0", "naturalness", "three", "", "", "", "", "", ""],
        ["r01", "i1", "sys0", "naturalness", "nan", "", "", "", "", "", ""],
        ["r01", "i1", "sys0", "naturalness", "3", "", "", "", "", "stars", ""],
        ["r01", "i1", "sys0", "pref", "1", "", "", "", "", "pairwise", ""],
        ["r01", "i1", "sys0", "pref", "0.7", "", "", "", "", "pairwise", "sys1"],
        ["r01", "i1", "sys0", "naturalness", "3", "", "-5", "", "", "", ""],
        ["r01", "i1", "sys0", "naturalness", "3", "yesterday", "", "", "", "", ""],
        ["r01", "i1", "sys0", "naturalness", "3"],
    ]
    rows = good[:40] + bad + good[40:]
    path = _write(tmp_path / "ratings.csv", rows)
    with open(path, "ab") as fh:  # one line that is not UTF-8
        fh.write(b"r01,i2,sys0,naturalness,\xff\xfe,,,,,,\n")
    loaded = load_ratings_csv(path)
    lines = dict(loaded.malformed)
    # header is line 1, the first 40 good rows are lines 2..41
    expected = {
        42: "empty rater",
        43: "not a number",
        44: "not a number",
        45: "is not likert or pairwise",
        46: "without system_b",
        47: "is not 0, 0.5 or 1",
        48: "negative response_ms",
        49: "not ISO 8601",
        50: "expected 11 fields, got 5",
        len(rows) + 2: "not UTF-8",
    }
    assert set(lines) == set(expected)
    for line, reason in expected.items():
        assert reason in lines[line], (line, lines[line])
    assert len(loaded.ratings) == len(good)
    assert loaded.rows_read == len(rows) + 1

    out = run_analysis(path, tmp_path / "runs")
    report = json.loads((out / "report.json").read_text())
    assert report["source"]["malformed_count"] == len(expected)
    assert report["source"]["rows_used"] == len(good)
    assert {m["line"] for m in report["source"]["malformed"]} == set(expected)
    assert "not UTF-8" in (out / "report.md").read_text()


def test_unusable_input_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        run_analysis(tmp_path / "missing.csv", tmp_path / "runs")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        load_ratings_csv(empty)
    no_score = _write(
        tmp_path / "cols.csv", [["a", "b", "c", "d"]], ["rater", "item", "system", "eval"]
    )
    with pytest.raises(InputError, match="lacks required column"):
        load_ratings_csv(no_score)
    all_bad = _write(tmp_path / "bad.csv", [["r", "i", "s", "e", "x", "", "", "", "", "", ""]] * 3)
    with pytest.raises(InputError, match=r"no usable ratings.*line 2: score"):
        run_analysis(all_bad, tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_revised_rating_keeps_the_newest(tmp_path: Path) -> None:
    rows = _sim_rows()[:30]
    first = ["r99", "i0", "sys0", "naturalness", "5", "2024-05-01T10:00:00Z", "", "", "", "", ""]
    older = ["r99", "i0", "sys0", "naturalness", "1", "2024-05-01T09:00:00Z", "", "", "", "", ""]
    newer = [
        "r99",
        "i0",
        "sys0",
        "naturalness",
        "2",
        "2024-05-01T11:00:00+02:00",
        "",
        "",
        "",
        "",
        "",
    ]
    loaded = load_ratings_csv(_write(tmp_path / "r.csv", [*rows, first, older]))
    assert loaded.revisions == 1
    got = [s for r, s in zip(loaded.ratings.rater, loaded.ratings.score, strict=True) if r == "r99"]
    assert got == [5.0]  # the later line is older: the first one stays
    loaded = load_ratings_csv(_write(tmp_path / "r2.csv", [*rows, first, newer]))
    got = [s for r, s in zip(loaded.ratings.rater, loaded.ratings.score, strict=True) if r == "r99"]
    assert got == [5.0]  # 11:00+02:00 is 09:00Z, older than 10:00Z


# -- reports on real data -----------------------------------------------------------------------


def _html_is_self_contained(html: str) -> None:
    assert "<svg" in html
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", html)
    assert "<script" not in html.lower()


def test_report_on_the_codec_mushra_ratings(tmp_path: Path) -> None:
    d = mushra()
    src = write_long_csv(tmp_path / "mushra.csv", d, "quality")
    out = run_analysis(src, tmp_path / "runs")
    assert out.parent == tmp_path / "runs" and re.match(r"study-\d{8}-\d{6}-[0-9a-f]{4}$", out.name)
    run = json.loads((out / "run.json").read_text())
    assert run["suite"] == "study" and run["ended_at"]
    report = json.loads((out / "report.json").read_text())
    assert report["suite"] == "study" and report["metrics_version"]
    assert report["counts"] == {
        "n_ratings": 1512,
        "n_raters": 21,
        "n_items": 16,
        "n_systems": 9,
        "n_evals": 1,
    }
    ev = report["evals"][0]
    order = [r["system"] for r in ev["systems"]]
    assert order[0] == "Reference" and order[-1] == "Anchor"
    for r in ev["systems"]:
        for block in ("mos", "rater_controlled", "rater_controlled_z"):
            assert r[block]["ci_lo"] < r[block]["mean"] < r[block]["ci_hi"]
    # matches the model fitted directly (unit = signal x condition)
    stim = [f"{i}\x1f{s}" for i, s in zip(d["item"], d["system"], strict=True)]
    fit = fit_crossed(d["score"], d["system"], d["rater"], stim)
    direct = dict(zip(fit.systems, fit.beta, strict=True))
    for r in ev["systems"]:
        assert r["rater_controlled"]["mean"] == pytest.approx(direct[r["system"]], abs=1e-9)
    rel = ev["reliability"]
    assert 0.3 < rel["alpha_interval"]["alpha"] < 0.8
    assert rel["icc"]["icc2_k"] > rel["icc"]["icc2_1"]
    assert ev["model"]["converged"] and ev["model_z"]["converged"]
    # the shared report shape: per system an overall block and groups with n and CI bounds
    for s in report["systems"]:
        assert {"score", "ci_lo", "ci_hi", "n"} <= set(s["overall"])
        assert all({"group", "name", "n", "ci_lo", "ci_hi"} <= set(g) for g in s["groups"])
    assert report["dimensions"]["quality"]["membership"][0]["passed"]
    _html_is_self_contained((out / "report.html").read_text())
    md = (out / "report.md").read_text()
    assert "| Reference |" in md
    assert "(descriptive: no interval is computed for these, so they claim no rank change" in md
    # the folder alone rebuilds the same numbers
    from voxassay.core.runstore import RunStore
    from voxassay.report.writer import json_safe
    from voxassay.study.study_report import build_report

    again = json_safe(build_report(RunStore.open(out)))
    assert again["systems"] == report["systems"]
    for ev_a, ev_b in zip(again["evals"], report["evals"], strict=True):
        assert ev_a["systems"] == ev_b["systems"] and ev_a["reliability"] == ev_b["reliability"]


@pytest.mark.slow
def test_bvcc_trainset_report_with_an_independent_panel_as_judge(tmp_path: Path) -> None:
    """VMC2024 (sarulab) re-rated BVCC utterances with another listener panel; its MOS plays
    the judge here (2,556 TRAINSET utterances of 86 systems). Measured: the two panels agree
    only moderately (item Spearman 0.42, system 0.55), so the check is on the plumbing and
    on the CIs: many items give a tight interval, 86 systems a wide one."""
    d = bvcc()
    src = write_long_csv(tmp_path / "bvcc.csv", d, "naturalness")
    vmc_rows = []
    train_items = set(d["item"])
    with open(ratings_dir("vmc2024_sarulab") / "VMC2024_MOS.txt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            utt = parts[0].split("/")[-1]
            if utt in train_items:
                vmc_rows.append([utt, "naturalness", parts[1]])
    judges = tmp_path / "judges.csv"
    _write(judges, vmc_rows, ["item", "eval", "score"])
    start = time.perf_counter()
    out = run_analysis(src, tmp_path / "runs", judges=judges)
    secs = time.perf_counter() - start
    assert secs < 60
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["n_ratings"] == 39792
    assert report["counts"]["n_raters"] == 288 and report["counts"]["n_systems"] == 175
    ev = report["evals"][0]
    assert ev["n_items"] == 4974 and ev["model"]["converged"]
    target = report["judges"]["targets"][0]
    item, system = target["item_level"], target["system_level"]
    assert item["n"] == len(vmc_rows) == 2556 and system["n"] == 86
    assert target["system_scores_from"] == "mean of the judge's item scores"
    assert 0.3 < item["ci_lo"] < item["spearman"] < item["ci_hi"] < 0.55
    assert system["ci_lo"] < system["spearman"] < system["ci_hi"]
    assert system["ci_hi"] - system["ci_lo"] > 2 * (item["ci_hi"] - item["ci_lo"])
    _html_is_self_contained((out / "report.html").read_text())


# -- study folders, exclusion, pairwise, judges ----------------------------------------------------


def _study_json(folder: Path) -> None:
    study = {
        "study_id": "s1",
        "evals": [
            {
                "id": "nat",
                "dimension": "quality",
                "kind": "likert",
                "question": "Natural?",
                "scale": {"min": 1, "max": 5},
            },
            {
                "id": "pleasant",
                "dimension": "quality",
                "kind": "likert",
                "question": "Pleasant?",
                "scale": {"min": 1, "max": 5},
            },
            {
                "id": "pref",
                "dimension": "preference",
                "kind": "pairwise",
                "question": "Which?",
                "scale": {"min": 0, "max": 1},
            },
        ],
        "gold": {"tolerance": 0},
    }
    (folder / "study.json").write_text(json.dumps(study))


def _study_rows() -> list[list[str]]:
    rows = _sim_rows("nat", seed=1) + _sim_rows("pleasant", seed=1)
    for r in rows:  # same items, same raters for both evals
        r[8] = ""
    # a straight-liner on both evals
    for k in range(30):
        for ev in ("nat", "pleasant"):
            rows.append(["lazy", f"i{k:02d}", f"sys{k // 12}", ev, "3", "", "4000", "", "", "", ""])
    # gold items: everyone gets "5" expected on a trap
    for r in sorted({row[0] for row in rows}):
        rows.append(
            [r, "trap1", "_trap", "nat", "5" if r != "lazy" else "3", "", "", "5", "", "", ""]
        )
    # pairwise: sys4 > sys3 > sys0 mostly
    rng = np.random.default_rng(0)
    strength = {"sys0": -1.0, "sys3": 0.0, "sys4": 1.0}
    names = list(strength)
    for k in range(120):
        a, b = rng.choice(3, 2, replace=False)
        p = 1 / (1 + np.exp(-(strength[names[a]] - strength[names[b]])))
        rows.append(
            [
                f"r{k % 16:02d}",
                f"p{k}",
                names[a],
                "pref",
                "1" if rng.random() < p else "0",
                "",
                "",
                "",
                "",
                "pairwise",
                names[b],
            ]
        )
    rows.append(["r01", "i00", "sys0", "nat", "7", "", "", "", "", "", ""])  # off the 1..5 scale
    return rows


def test_study_folder_with_exclusion_pairwise_and_judges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = tmp_path / "study"
    study.mkdir()
    _study_json(study)
    rows = _study_rows()
    _write(study / "ratings.csv", rows)

    def fake_export(study_dir: Path, dest: Path) -> int:  # the store's export, stood in
        shutil.copyfile(Path(study_dir) / "ratings.csv", dest)
        return len(rows)

    monkeypatch.setattr("voxassay.study.store.export_ratings_csv", fake_export)
    judges = _write(
        tmp_path / "judges.csv",
        [[f"sys{k}", "", "quality", str(k)] for k in range(5)]
        + [[f"sys{k}", "", "pref", str(k)] for k in range(5)],
        ["system", "item", "dimension", "score"],
    )
    out = run_analysis(study, tmp_path / "runs", exclude_flagged=True, judges=judges)
    report = json.loads((out / "report.json").read_text())
    assert report["source"]["kind"] == "study_dir"
    bad = report["source"]["malformed"]
    assert len(bad) == 1 and "outside the scale 1..5" in bad[0]["reason"]
    assert (out / "ratings.csv").is_file() and (out / "judges.csv").is_file()
    # QC: the straight-liner also fails the trap (tolerance 0 from study.json)
    flagged = {f["rater"]: " ".join(f["reasons"]) for f in report["rater_qc"]["flagged"]}
    assert set(flagged) == {"lazy"}
    assert "straight-lining" in flagged["lazy"] and "gold items: 0/1" in flagged["lazy"]
    assert report["exclusion"]["applied"] and report["exclusion"]["excluded_raters"] == ["lazy"]
    effect = report["exclusion"]["effect"]["nat"]
    assert effect["ratings_removed"] == 30
    assert {"spearman", "max_rank_change", "systems"} <= set(effect["rater_controlled"])
    evals = {e["id"]: e for e in report["evals"]}
    assert set(evals) == {"nat", "pleasant"}
    assert all(r["system"] != "_trap" for r in evals["nat"]["systems"])  # gold rows: QC only
    assert "lazy" not in {x["rater"] for x in evals["nat"]["z_excluded_raters"]}
    dims = report["dimensions"]
    assert set(dims["quality"]["evals"]) == {"nat", "pleasant"}
    assert all(m["passed"] for m in dims["quality"]["membership"])
    pw = report["pairwise"][0]
    bt = [s["system"] for s in pw["bradley_terry"]["strengths"]]
    assert bt == ["sys4", "sys3", "sys0"]
    assert {(p["first"], p["second"]) for p in pw["preferences"]} == {
        ("sys0", "sys3"),
        ("sys0", "sys4"),
        ("sys3", "sys4"),
    }
    targets = {t["target"]: t for t in report["judges"]["targets"]}
    assert targets["quality"]["level"] == "dimension"
    assert targets["quality"]["system_level"]["spearman"] > 0.8
    wr = targets["pref"]["win_rate_agreement"]
    assert wr["n"] > 0 and wr["agreement"] > 0.6 and wr["judge_basis"] == {"system": 120}
    _html_is_self_contained((out / "report.html").read_text())


def test_study_folder_made_by_study_import(tmp_path: Path) -> None:
    """End to end with the other half of the study code: ``study import`` makes a folder,
    the analysis reads it back through the store's export."""
    importer = pytest.importorskip("voxassay.study.importer")
    rows = _sim_rows("nat", seed=3)
    src = _write(tmp_path / "in.csv", rows)
    imported = importer.import_ratings(src, out_parent=tmp_path / "studies", scale=(1, 5))
    from voxassay.study.store import StudyStore

    store = StudyStore.for_study(imported.study_dir)
    try:  # two raters fill in the profile questionnaire
        for rater, band in (("r00", "18-24"), ("r01", "25-34")):
            store.set_profile(rater, {"age_band": band}, "2024-05-01T10:00:00Z")
    finally:
        store.close()
    out = run_analysis(imported.study_dir, tmp_path / "runs")
    direct = run_analysis(src, tmp_path / "runs")
    a = json.loads((out / "report.json").read_text())
    b = json.loads((direct / "report.json").read_text())
    assert a["source"]["kind"] == "study_dir" and a["source"]["rows_used"] == len(rows)
    means_a = {r["system"]: r["rater_controlled"]["mean"] for r in a["evals"][0]["systems"]}
    means_b = {r["system"]: r["rater_controlled"]["mean"] for r in b["evals"][0]["systems"]}
    assert means_a == pytest.approx(means_b, abs=1e-9)
    assert a["demographics"] == {
        "raters_with_profile": 2,
        "raters": 16,
        "fields": {"age_band": {"18-24": 1, "25-34": 1}},
    }
    assert b["demographics"] is None  # a bare CSV has no profiles
    assert "answered the profile" in (out / "report.md").read_text()

    # screening by profile: only r01 answered 25-34; the profiles travel with the run folder
    screened = run_analysis(imported.study_dir, tmp_path / "runs", screen={"age_band": "25-34"})
    c = json.loads((screened / "report.json").read_text())
    assert c["screening"]["raters_before"] == 16 and c["screening"]["raters_kept"] == 1
    assert "r00" in c["screening"]["excluded_raters"]
    kept = sum(1 for r in rows if r[0] == "r01")
    assert c["counts"]["n_ratings"] == kept and c["counts"]["n_raters"] == 1
    assert c["demographics"]["fields"] == {"age_band": {"25-34": 1}}
    from voxassay.report import write_report

    write_report(screened)  # `voxassay report` rebuilds it from the folder alone
    assert json.loads((screened / "report.json").read_text())["screening"] == c["screening"]
    with pytest.raises(InputError, match="needs a study folder"):
        run_analysis(src, tmp_path / "runs", screen={"age_band": "25-34"})
    with pytest.raises(InputError, match="no rater"):
        run_analysis(imported.study_dir, tmp_path / "runs", screen={"hearing": "x"})


# -- no made-up reliability, no silent typos (issue 14, part 4) ---------------------------------


def _analyze(tmp_path: Path, name: str, rows: list[list[str]]) -> dict:
    folder = run_analysis(_write(tmp_path / f"{name}.csv", rows), tmp_path / f"runs-{name}")
    return json.loads((Path(folder) / "report.json").read_text())


def _row(rater: str, item: str, system: str, score: float | str, ev: str = "mos") -> list[str]:
    return [rater, item, system, ev, f"{score}", "", "", "", "", "likert", ""]


def test_one_rater_gives_no_variance_components_or_icc(tmp_path: Path) -> None:
    rows = [_row("only", f"i{i}", f"s{i % 3}", 1 + (i * 7) % 5) for i in range(18)]
    ev = _analyze(tmp_path, "one", rows)["evals"][0]
    icc = ev["reliability"]["icc"]
    assert icc["icc1"] is None and icc["icc2_1"] is None and icc["icc3_1"] is None
    assert "one rater" in icc["note"]
    vc = ev["model"]["variance_components"]
    assert vc == {"rater": None, "item": None, "residual": None}
    assert ev["model"]["variance_note"] == "not estimable (one rater, one rating per item)"


def test_identical_scores_have_no_icc_and_tied_systems_share_a_rank(tmp_path: Path) -> None:
    rows = [_row(f"r{r}", f"i{i}", f"s{i % 2}", 3) for r in range(4) for i in range(8)]
    ev = _analyze(tmp_path, "same", rows)["evals"][0]
    assert ev["reliability"]["icc"]["icc2_1"] is None
    assert "every score is the same" in ev["reliability"]["icc"]["note"]
    assert {s["rank_mos"] for s in ev["systems"]} == {1}
    assert {s["rank_model"] for s in ev["systems"]} == {1}


@pytest.mark.live
def test_a_typo_score_is_refused_not_a_new_scale_and_repeats_are_announced(
    tmp_path: Path,
) -> None:
    rows = _sim_rows()[:60]
    typo = _row("r0", "i_extra", "sys0", 55, ev="naturalness")
    repeat = list(rows[3])
    repeat[4] = "1" if repeat[4] != "1" else "2"
    path = _write(tmp_path / "t.csv", [*rows, typo, repeat])
    folder = Path(run_analysis(path, tmp_path / "runs"))
    report = json.loads((folder / "report.json").read_text())
    malformed = {m["line"]: m["reason"] for m in report["source"]["malformed"]}
    assert "alone would stretch the likert scale" in malformed[62]
    scale = report["evals"][0]["scale"]
    others = [float(r[4]) for r in rows]
    assert (scale["min"], scale["max"]) == (min(others), max(others))  # not ..55
    assert report["source"]["revisions"] == [{"line": 63, "earlier_line": 5}]
    from tests.study.helpers import run_cli

    r = run_cli("study", "analyze", str(path), "--out", str(tmp_path / "cli"))
    assert r.returncode == 0
    assert f"{path}:62: skipped: score 55 alone would stretch" in r.stderr
    assert f"{path}:63: warning: repeats line 5" in r.stderr
