"""``--study`` export readable by the study tool, and human results merged back."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from voxassay.core.runstore import RunStore
from voxassay.study.format import load_study
from voxassay.suites.tts.study_export import merge_human
from voxassay.suites.tts.suite import run_tts

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def study_run(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    return run_tts(
        ["espeak-ng:en-us+f3", "espeak-ng:en-us+m7"],
        tmp_path_factory.mktemp("tts-study"),
        items=str(FIX / "mini_critical.yaml"),
        asr=None,
        study=True,
        measures=("quality", "rate"),
    )


def _study_dir(store: RunStore) -> Path:
    return store.path / store.info()["study"]["path"]


@pytest.mark.slow
def test_study_has_every_recording_with_its_question_and_three_raters(study_run: RunStore) -> None:
    study = load_study(_study_dir(study_run))
    assert study.raters_per_item >= 3 and study.n_raters >= 3
    regular = [i for i in study.items if not i.trap and not i.gold]
    assert len(regular) == 6  # 3 items x 2 systems
    assert {i.system for i in regular} == {"espeak-ng:en-us+f3", "espeak-ng:en-us+m7"}
    question = "Could you write down every number and code exactly as you heard it?"
    assert all(question in i.context for i in regular)
    assert all((_study_dir(study_run) / i.stimuli[0].audio).is_file() for i in regular)
    lines = (study_run.path / "study" / "items.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert {"id", "system", "audio", "eval", "dimension"} <= set(first)
    assert first["eval"] == "t_codes"


@pytest.mark.slow
def test_voxassay_study_create_reads_the_export(study_run: RunStore, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from voxassay.cli.main import cli

    base = study_run.path / "study"
    res = CliRunner().invoke(
        cli,
        [
            "study",
            "create",
            "--from",
            str(base / "items.jsonl"),
            "--questions",
            str(base / "questions.yaml"),
            "--out",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    made = Path(res.output.strip().splitlines()[-1])
    assert load_study(made).raters_per_item == 3


@pytest.mark.slow
def test_human_ratings_merge_into_human_json(study_run: RunStore, tmp_path: Path) -> None:
    study = load_study(_study_dir(study_run))
    rng = random.Random(1)
    rows = []
    for item in study.items:
        better = item.system.endswith("+f3")  # raters prefer f3 by about one point
        for rater in ("r1", "r2", "r3", "r4"):
            score = min(5, max(1, (4 if better else 3) + rng.choice((-1, 0, 0, 1))))
            rows.append(
                {
                    "rater": rater,
                    "item": item.id,
                    "system": item.system,
                    "eval": "answer",
                    "score": score,
                }
            )
    path = tmp_path / "ratings.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["rater", "item", "system", "eval", "score"])
        w.writeheader()
        w.writerows(rows)
    out = merge_human(study_run, path)
    human = json.loads(out.read_text())
    systems = human["evals"]["t_codes"]["systems"]
    assert systems["espeak-ng:en-us+f3"]["mean"] > systems["espeak-ng:en-us+m7"]["mean"]
    assert systems["espeak-ng:en-us+f3"]["n"] == 12
    assert human["judge"] == "no judge scores in this run"
    assert "critical_content" in human["dimensions"]
