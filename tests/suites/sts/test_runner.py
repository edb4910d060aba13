"""The STS runner and report with systems at the edge (``fakes.py``) on rendered turns:
every failure is a record with its reason and the run goes on; a system deaf to the audio
gives AO = TO (the control that keeps the ablation honest); run.json says the renders are
constructed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reference.test_fault_injection import _needs_speech_stack
from voxassay.suites.sts.runner import run_sts

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sts")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sts-render-cache")


def test_failures_are_records_and_the_run_goes_on(tmp_path: Path, cache: Path) -> None:
    _needs_speech_stack()
    store = run_sts(
        ["python:tests.suites.sts.fakes:flaky"], tmp_path, only=("parcel",), timeout=2.0,
        cache_dir=cache,
    )  # fmt: skip
    recs = {r.id: r for r in store.load_records().records}
    assert len(recs) == 8  # 4 items x 2 modes
    assert recs["parcel-eu#ao"].error == {
        "kind": "system",
        "message": "RuntimeError: model server returned 500",
    }
    assert recs["parcel-er#to"].error == {"kind": "empty", "message": "the system answered nothing"}
    assert "runaway" in recs["parcel-ea#ao"].error["message"]
    assert recs["parcel-ir#to"].status == "timeout"
    report = json.loads((store.path / "report.json").read_text())
    (system,) = report["systems"]
    assert system["status"] == {"error": 6, "timeout": 2} and system["empty"] == 2
    info = store.info()
    assert "constructed" in info["renders"]
    assert all(v["constructed"] for v in info["inputs"].values())
    assert (store.path / "inputs" / "parcel-ea.wav").is_file()
    # from the command line: a system that failed every item is exit 1
    from click.testing import CliRunner

    from voxassay.cli.main import cli

    res = CliRunner().invoke(
        cli, ["sts", "run", "-s", "python:tests.suites.sts.fakes:flaky", "--only", "parcel-eu",
              "-o", str(tmp_path / "cli"), "-q"],
    )  # fmt: skip
    assert res.exit_code == 1, res.output


def test_a_system_deaf_to_the_audio_scores_the_same_both_ways(tmp_path: Path, cache: Path) -> None:
    _needs_speech_stack()
    store = run_sts(
        ["python:tests.suites.sts.fakes:ignores_audio"], tmp_path,
        only=("parcel", "headphones-refund"), cache_dir=cache,
    )  # fmt: skip
    report = json.loads((store.path / "report.json").read_text())
    (system,) = report["systems"]
    assert system["status"] == {"ok": 18}
    ab = system["ao_minus_to"]["checklist"]["overall"]
    assert ab["n"] == 9 and ab["mean"] == 0.0
    assert ab["ci_low"] <= 0.0 <= ab["ci_high"] and ab["p"] == 1.0
    assert report["k_of_n"]["checklist"]["overall"] == {"n": 1, "k_point": 0, "k_ci": 0}
    md = (store.path / "report.md").read_text()
    assert "Audio vs transcript" in md and "k of n" in md


def test_resume_finishes_a_cut_run_without_redoing_or_duplicating(
    tmp_path: Path, cache: Path
) -> None:
    _needs_speech_stack()
    spec = ["python:tests.suites.sts.fakes:ignores_audio"]
    kw = {"only": ("parcel",), "cache_dir": cache}
    store = run_sts(spec, tmp_path, **kw)  # type: ignore[arg-type]
    lines = (store.path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 8
    kept = lines[:5]
    (store.path / "records.jsonl").write_text(
        "\n".join(kept) + "\n" + lines[5][:40]
    )  # cut mid-line
    again = run_sts(spec, tmp_path, resume=True, **kw)  # type: ignore[arg-type]
    assert again.path == store.path
    records = again.load_records().records
    assert len(records) == 8 and len({r.key for r in records}) == 8
    assert [json.loads(x)["id"] for x in kept] == [r.id for r in records[:5]]  # not redone


def test_workers_and_clips(tmp_path: Path, cache: Path) -> None:
    """Dialogues side by side give the same answers; a user's recording replaces the render
    of its item (and says so), the others stay rendered."""
    _needs_speech_stack()
    from tests.conftest import shared_data
    from voxassay.core.audio import load_audio, write_wav

    spec = ["python:tests.suites.sts.fakes:ignores_audio"]
    only = ("parcel", "headphones-refund")
    one = run_sts(spec, tmp_path / "one", only=only, cache_dir=cache)
    two = run_sts(spec, tmp_path / "two", only=only, cache_dir=cache, workers=2)
    texts = [{r.id: r.output["text"] for r in s.load_records().records} for s in (one, two)]
    assert texts[0] == texts[1] and len(texts[0]) == 18
    assert two.info()["execution"]["workers"] == 2
    clips = tmp_path / "clips"
    recording = load_audio(shared_data() / "read_speech/ljspeech/LJ001-0002.wav", sr=16_000)
    write_wav(clips / "parcel-ea.wav", recording)
    mine = run_sts(spec, tmp_path / "mine", only=("parcel",), cache_dir=cache, clips=clips)
    inputs = mine.info()["inputs"]
    assert inputs["parcel-ea"] == {"source": "recording", "file": "parcel-ea.wav"}
    assert inputs["parcel-eu"]["source"] == "render" and inputs["parcel-eu"]["constructed"]
    heard = load_audio(mine.path / "inputs" / "parcel-ea.wav", sr=16_000)
    assert heard.samples.size == recording.samples.size


def test_a_text_only_answer_is_unscored_on_the_audio_dimensions(
    tmp_path: Path, cache: Path
) -> None:
    _needs_speech_stack()
    store = run_sts(
        ["python:tests.suites.sts.fakes:text_only"], tmp_path, only=("card-sn",), cache_dir=cache
    )
    report = json.loads((store.path / "report.json").read_text())
    (block,) = report["systems"]
    assert block["status"] == {"ok": 2} and block["text_only"] == 2
    naturalness = block["profile"]["f0_range_st"]["ao"]["speech_naturalness"]
    assert naturalness["n"] == 0 and naturalness["mean"] is None  # unscored, not zero
    assert block["profile"]["checklist"]["ao"]["speech_naturalness"]["mean"] == 1.0  # words count
