"""A manifest's relative paths mean its own folder, whatever the current directory (issue 32,
item 2): a missing file is an error record, never a same-named file elsewhere; the data
builders write manifests that read the same files from any directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SHARED
from voxassay.cli.main import cli
from voxassay.core.items import load_manifest

ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
ENGINE = "python:tests.helpers.engines:slow?delay=0"
NOISE = SHARED / "data" / "noise" / "speech_commands" / "running_tap_10s.wav"
pytestmark = pytest.mark.skipif(
    not (ARCTIC.is_dir() and NOISE.exists()), reason=f"needs ../shared/data ({ARCTIC}, {NOISE})"
)


def test_a_missing_file_is_never_read_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", data / "b.wav")
    shutil.copy(ARCTIC / "aew_arctic_a0002.wav", tmp_path / "a.wav")  # the wrong a.wav
    lines = [{"id": "a", "audio_filepath": "a.wav", "text": "x"}]
    lines.append({"id": "b", "audio_filepath": "b.wav", "text": "x"})
    (data / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        cli,
        [*("asr", "run", "-m", "data/m.jsonl", "-o", "runs"), "-s", ENGINE],
    )
    (records,) = Path("runs").glob("*/records.jsonl")
    recs = {r["id"]: r for r in map(json.loads, records.read_text().splitlines())}
    assert recs["a"]["status"] == "error", recs["a"]
    assert (
        str(data / "a.wav") in recs["a"]["error"]["message"]
        or "data/a.wav" in (recs["a"]["error"]["message"])
    )
    assert recs["b"]["status"] == "ok"
    assert res.exit_code == 0, res.output  # one bad item is data, the system did not fail wholly


def test_a_built_manifest_reads_the_same_files_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", work / "a.wav")
    (work / "clean.jsonl").write_text(
        json.dumps({"id": "a", "audio_filepath": "a.wav", "text": "author of the danger trail"})
        + "\n"
    )
    monkeypatch.chdir(work)
    res = CliRunner().invoke(
        cli,
        [
            *("asr", "build-conditions", "-m", "clean.jsonl", "--noise", str(NOISE)),
            *("--snr", "10", "--no-babble", "--no-music", "--no-telephone", "-o", "conditions"),
        ],
    )
    assert res.exit_code == 0, res.output
    written = [
        json.loads(x) for x in (work / "conditions" / "conditions.jsonl").read_text().splitlines()
    ]
    # under the manifest's folder: relative to it, not to where the command ran
    assert written and all(not Path(w["audio_filepath"]).is_absolute() for w in written)
    assert all(not w["audio_filepath"].startswith("conditions/") for w in written)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    items = load_manifest(work / "conditions" / "conditions.jsonl")
    assert items and all(Path(it.audio_filepath or "").is_file() for it in items)


READ_SPEECH_CSV = SHARED / "data" / "read_speech" / "manifest.csv"


def test_a_table_without_a_known_text_column_is_a_usage_error_naming_the_fix(
    tmp_path: Path,
) -> None:
    """The shared fixtures' own manifest.csv keeps its text in ``transcript_or_label``: asr run
    stops before any work (exit 2) naming the columns and the ``--columns`` to add; with it,
    the dry run prints the mapping and the columns left in meta, and the run scores WER."""
    out = tmp_path / "runs"
    base = ["asr", "run", "-m", str(READ_SPEECH_CSV), "-s", ENGINE, "--limit", "2", "-o", str(out)]
    res = CliRunner().invoke(cli, base)
    assert res.exit_code == 2, res.output
    assert "--columns text=transcript_or_label" in res.output and "path" in res.output
    assert not out.exists()
    mapped = [*base, "--columns", "text=transcript_or_label"]
    dry = CliRunner().invoke(cli, [*mapped, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output.strip().splitlines()[-1])
    assert plan["columns"]["text"] == "transcript_or_label" and plan["columns"]["audio"] == "path"
    assert "license" in plan["unmapped"] and "transcript_or_label" not in plan["unmapped"]
    said = CliRunner().invoke(cli, [*mapped, "--dry-run"])
    assert "not mapped (kept in meta): source, license" in said.output
    run = CliRunner().invoke(cli, mapped)
    assert run.exit_code == 0, run.output
    (records,) = out.glob("*/records.jsonl")
    recs = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(recs) == 2 and all(r["metrics"]["ref_words"] > 0 for r in recs)
