"""The flags every run command shares (issue 14, part 2): --format/--columns with the
detection printed, --limit, --sample/--seed recorded in run.json, --dry-run, --json, --quiet,
NAME=SPEC; and a truncated file in a manifest becomes an error record, never a score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_manifest
from voxassay.cli.main import main

READ_CSV = "audio=path,text=transcript_or_label,duration=duration_s"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    code = exc.value.code
    return (int(code) if code is not None else 0), out.out, out.err


def test_csv_manifest_with_columns_limit_and_the_detection_printed(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = data_dir / "read_speech/manifest.csv"
    argv = ["asr", "run", "-m", str(manifest), "--columns", READ_CSV, "-s", "mock:silence"]
    code, out, err = _run([*argv, "--limit", "2", "--out", str(tmp_path)], capsys)
    assert code == 0
    assert "read 2 items (limit 2) from" in err and "(csv, detected)" in err
    run_dir = Path(out.strip().splitlines()[-1])
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["format"] == "csv" and info["config"]["subset"] == {"limit": 2}
    records = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(records) == 2
    # a column the file lacks is exit 2, naming what the header has
    code, _, err = _run([*argv[:4], "--columns", "audio=wav", "-s", "mock:silence"], capsys)
    assert code == 2 and "no column 'wav'; the header has path, transcript_or_label" in err


def test_sample_is_reproducible_and_dry_run_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = make_manifest(tmp_path / "m.jsonl")
    base = ["asr", "run", "-m", str(manifest), "-s", "mock:silence", "--sample", "4"]
    code, out, _ = _run([*base, "--seed", "3", "--dry-run", "--out", str(tmp_path / "r")], capsys)
    assert code == 0 and "dry run: 4 items (jsonl, detected) x 1 system(s) x 1 repeat(s)" in out
    assert not (tmp_path / "r").exists()
    ids = []
    for _ in range(2):
        code, out, _ = _run([*base, "--seed", "3", "--json", "--out", str(tmp_path / "r")], capsys)
        summary = json.loads(out)  # stdout is exactly one JSON object
        run_dir = Path(summary["run_dir"])
        ids.append(
            sorted(
                json.loads(x)["id"] for x in (run_dir / "records.jsonl").read_text().splitlines()
            )
        )
        assert json.loads((run_dir / "run.json").read_text())["config"]["subset"] == {
            "sample": 4,
            "seed": 3,
        }
    assert ids[0] == ids[1] and len(ids[0]) == 4
    code, out, _ = _run([*base, "--seed", "4", "--dry-run", "--json"], capsys)
    plan = json.loads(out)
    assert plan["calls"] == 4 and plan["format"] == "jsonl"
    assert sorted(x["id"] for x in plan["first"]) != ids[0]


def test_json_and_quiet_on_failure_and_named_systems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = make_manifest(tmp_path / "m.jsonl", limit=2)
    argv = ["asr", "run", "-m", str(manifest), "-s", "broken=mock:fail", "-s", "mock:silence"]
    code, out, err = _run([*argv, "--json", "--out", str(tmp_path / "r")], capsys)
    summary = json.loads(out)
    assert code == 1 and summary["exit_code"] == 1
    by = {s["system"]: s for s in summary["systems"]}
    assert by["broken"]["failed"] == 2 and by["mock:silence"]["failed"] == 0
    assert "broken: 2/2 failed" in err
    code, out, err = _run(
        [
            "asr",
            "run",
            "-m",
            str(manifest),
            "-s",
            "mock:silence",
            "-q",
            "--out",
            str(tmp_path / "q"),
        ],
        capsys,
    )
    assert code == 0 and err == "" and out.strip().splitlines() == [out.strip()]
    assert Path(out.strip()).is_dir()


def test_a_truncated_file_is_an_error_record_of_kind_truncated(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = (data_dir / "read_speech/ljspeech/LJ001-0001.wav").read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(src[: len(src) // 3])
    short = tmp_path / "short.wav"
    short.write_bytes((data_dir / "read_speech/ljspeech/LJ001-0002.wav").read_bytes())
    lines = [
        {"id": "cut", "audio_filepath": str(cut), "text": "printing"},
        {"id": "short", "audio_filepath": str(short), "duration": 3.88, "text": "in being"},
        {"id": "fine", "audio_filepath": str(short), "duration": 1.9, "text": "in being"},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, _ = _run(
        ["asr", "run", "-m", str(manifest), "-s", "mock:silence", "--out", str(tmp_path / "r")],
        capsys,
    )
    assert code == 0
    recs = {
        json.loads(x)["id"]: json.loads(x)
        for x in (Path(out.strip()) / "records.jsonl").read_text().splitlines()
    }
    assert recs["cut"]["status"] == "error" and recs["cut"]["error"]["kind"] == "truncated"
    assert recs["short"]["status"] == "error" and recs["short"]["error"]["kind"] == "truncated"
    assert recs["fine"]["status"] == "ok"


def test_tts_run_dry_run_and_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        [
            "tts",
            "run",
            "-s",
            "espeak-ng",
            "--asr",
            "none",
            "--items",
            "demo",
            "--limit",
            "3",
            "--dry-run",
        ],
        capsys,
    )
    assert code == 0 and out.startswith("dry run: 3 items x 1 system(s) x 1 repeat(s) = 3 call(s)")


def test_duplex_run_dry_run_samples_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["duplex", "run", "--agent", "reference:careful", "--agent", "echo", "--sample", "3"]
    code, out, _ = _run([*argv, "--seed", "5", "--dry-run", "--json"], capsys)
    plan = json.loads(out)
    assert code == 0 and plan["scenarios"] == 3 and plan["calls"] == 6
    code, again, _ = _run([*argv, "--seed", "5", "--dry-run", "--json"], capsys)
    assert json.loads(again)["first"] == plan["first"]
    code, _, err = _run([*argv, "--agent", "python:no_such_module:make", "--dry-run"], capsys)
    assert code == 2 and "cannot import module 'no_such_module'" in err


def test_a_named_system_is_its_name_in_records_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = make_manifest(tmp_path / "m.jsonl", limit=2)
    argv = [
        "asr",
        "run",
        "-m",
        str(manifest),
        "-s",
        "quiet=mock:silence",
        "-s",
        "mock:fixed?text=hi",
    ]
    code, out, _ = _run([*argv, "--json", "--out", str(tmp_path / "r")], capsys)
    run_dir = Path(json.loads(out)["run_dir"])
    assert code == 0
    systems = {
        json.loads(x)["system"] for x in (run_dir / "records.jsonl").read_text().splitlines()
    }
    assert systems == {"quiet", "mock:fixed?text=hi"}
    report = json.loads((run_dir / "report.json").read_text())
    assert [s["system"] for s in report["systems"]] == ["quiet", "mock:fixed?text=hi"]
    # resume knows the named system's records
    code, out, _ = _run([*argv, "--resume", "--json", "--out", str(tmp_path / "r")], capsys)
    assert json.loads(out)["run_dir"] == str(run_dir)
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 4
    code, _, err = _run(
        ["asr", "run", "-m", str(manifest), "-s", "a=mock:silence", "-s", "a=mock:fail"], capsys
    )
    assert code == 2 and "both named 'a'" in err
