"""``voxassay tts run|score-audio|report|items`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from voxassay.cli.main import cli, main

# one xdist worker for the modules that score the same real audio (the MUSHRA stimuli's DNSMOS scores, computed once per worker)
pytestmark = pytest.mark.xdist_group("dnsmos-mushra")

FIX = Path(__file__).resolve().parents[1] / "suites" / "tts" / "fixtures"


def test_items_lists_evals_with_counts() -> None:
    res = CliRunner().invoke(cli, ["tts", "items", "--only", "phone_numbers"])
    assert res.exit_code == 0, res.output
    assert "phone_numbers" in res.output and "critical_accuracy" in res.output


def test_unknown_system_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["tts", "run", "--system", "espeak-nx", "--out", str(tmp_path), "--no-progress"])
    assert exc.value.code == 2
    assert "espeak-ng" in capsys.readouterr().err  # the nearest name is suggested
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_run_then_report_with_human_csv(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "tts",
            "run",
            "--system",
            "espeak-ng:en-us+f3",
            "--items",
            "demo",
            "--only",
            "phone_numbers",
            "--asr",
            "none",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert (run_dir / "run.json").exists() and (run_dir / "report.json").exists()
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert recs and all(r["status"] == "ok" for r in recs)
    ratings = tmp_path / "ratings.csv"
    rows = ["rater,item,system,eval,score"]
    for i, r in enumerate(recs):
        for rater in ("a", "b", "c"):
            rows.append(f"{rater},{r['id']},{r['system']},phone_numbers,{2 + (i + len(rater)) % 3}")
    ratings.write_text("\n".join(rows) + "\n")
    res = runner.invoke(cli, ["tts", "report", str(run_dir), "--human", str(ratings)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().splitlines()[-1] == str(run_dir)
    human = json.loads((run_dir / "human.json").read_text())
    assert "espeak-ng:en-us+f3" in human["evals"]["phone_numbers"]["systems"]
    # the quality metrics validated against real listeners (MUSHRA, first 3 signals x 8
    # conditions), stored in the run and shown in its report
    from tests.conftest import shared_data

    mushra = shared_data() / "ratings" / "neural_codec_mushra"
    res = runner.invoke(
        cli,
        ["tts", "report", str(run_dir), "--validate-quality", str(mushra), "--max-signals", "3"],
    )
    assert res.exit_code == 0, res.output
    validation = json.loads((run_dir / "validation.json").read_text())
    assert validation["n_signals"] == 3 and validation["n_stimuli"] == 24
    by = {m["metric"]: m for m in validation["metrics"]}
    assert by["bandwidth_hz"]["condition"]["n"] == 8
    report = json.loads((run_dir / "report.json").read_text())
    assert report["validation"]["n_stimuli"] == 24
    assert "bandwidth_hz" in (run_dir / "report.md").read_text()


@pytest.mark.slow
def test_score_audio_cli_prints_run_path(tmp_path: Path) -> None:
    from tests.conftest import shared_data

    data = shared_data()
    wav = data / "read_speech" / "ljspeech" / "LJ001-0002.wav"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps(
            {"id": "lj2", "audio_filepath": str(wav), "text": "in being comparatively modern."}
        )
        + "\n"
    )
    res = CliRunner().invoke(
        cli,
        [
            "tts",
            "score-audio",
            "--manifest",
            str(manifest),
            "--out",
            str(tmp_path / "r"),
            "--system",
            "ljspeech",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    rec = json.loads((run_dir / "records.jsonl").read_text().splitlines()[0])
    assert rec["system"] == "ljspeech" and rec["status"] == "ok"
    assert rec["metrics"]["wer_errors"] <= 1
