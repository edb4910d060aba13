"""An STS run exported as a blind study, rated, and merged back: stimuli hold the caller and
the answer; AO and TO answers are separate blind arms with >= 3 raters each; gold items are
given to every rater; the exported items also import into ``voxassay study create``; ratings
(a rater who is harsher than the others included) come back as a rater-controlled ``human``
source whose AO - TO block stands apart from the proxies."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.reference.test_fault_injection import _needs_speech_stack
from voxassay.cli.main import cli
from voxassay.study.format import load_study
from voxassay.suites.sts.runner import run_sts
from voxassay.suites.sts.study import export_study

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sts")]


def test_export_rate_merge(tmp_path: Path) -> None:
    _needs_speech_stack()
    store = run_sts(
        ["python:tests.suites.sts.fakes:ignores_audio"], tmp_path / "runs", only=("parcel",),
        cache_dir=tmp_path / "cache", judge="python:tests.suites.sts.fakes:judge",
    )  # fmt: skip
    study_dir = export_study(store)
    study = load_study(study_dir)
    assert study.raters_per_item >= 3
    arms = {it.system for it in study.items}
    system = "python:tests.suites.sts.fakes:ignores_audio"
    assert {f"{system}|ao", f"{system}|to"} <= arms
    gold = [it for it in study.items if it.gold]
    assert len(gold) == 2
    regular = [it for it in study.items if not it.gold]
    assert len(regular) == 8
    # the exported items import into `voxassay study create` as they are
    base = store.path / "study"
    res = CliRunner().invoke(
        cli, ["study", "create", "--from", str(base / "items.jsonl"), "--questions",
              str(base / "questions.yaml"), "--out", str(tmp_path / "again")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    # raters: AO answers about a point better; rater r4 rates everything two points lower
    rng = random.Random(3)
    rows = []
    for it in regular:
        ao = it.system.endswith("|ao")
        for rater in ("r1", "r2", "r3", "r4"):
            score = (4 if ao else 3) + rng.choice((-1, 0, 0, 1)) - (2 if rater == "r4" else 0)
            rows.append({"rater": rater, "item": it.id, "system": it.system, "eval": "answer",
                         "score": min(5, max(1, score))})  # fmt: skip
    ratings = tmp_path / "ratings.csv"
    with open(ratings, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["rater", "item", "system", "eval", "score"])
        w.writeheader()
        w.writerows(rows)
    res = CliRunner().invoke(cli, ["sts", "report", str(store.path), "--human", str(ratings)])
    assert res.exit_code == 0, res.output
    human = json.loads((store.path / "human.json").read_text())
    assert len(human["answers"]) == 8 and all(a["raters"] == 4 for a in human["answers"].values())
    arms = human["arms"]  # the study tool's rater-controlled model, per blind arm
    assert (
        arms[f"{system}|ao"]["rater_controlled_mean"]
        > arms[f"{system}|to"]["rater_controlled_mean"]
    )
    assert (store.path / "human_analysis.json").is_file()
    report = json.loads((store.path / "report.json").read_text())
    assert report["sources"]["human"]["kind"] == "people"
    (block,) = report["systems"]
    d = block["ao_minus_to"]["human"]["overall"]
    assert d["n"] == 4 and d["mean"] > 0.5  # people heard the difference (z units)
    assert block["ao_minus_to"]["checklist"]["overall"]["mean"] == 0.0  # the proxy did not
    assert "people rated the answers" in (store.path / "report.md").read_text().lower()
    # the judge heard caller and answer and rated on the same scale; its agreement with people
    judged = [r.output["judge"] for r in store.load_records().records]
    assert all(j["status"] == "ok" and j["score"] == 2.0 for j in judged)
    assert report["sources"]["judge"]["kind"] == "judge"
    assert block["ao_minus_to"]["judge"]["overall"]["mean"] == 0.0
    assert set(block["judge_vs_human"]) >= {"overall", "emotion_alignment"}
    assert block["judge_vs_human"]["overall"]["n"] == 8
