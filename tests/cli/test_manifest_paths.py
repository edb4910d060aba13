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
from tests.helpers.typed import voxassay as _voxassay
from voxassay.cli.main import cli
from voxassay.core.items import load_manifest

ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
ENGINE = "python:tests.helpers.engines:slow?delay=0"
SU_ENGINE = "python:tests.suites.su.understanders:fixed"
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shared fixtures' own manifest.csv keeps its text in ``transcript_or_label``: asr run
    stops before any work (exit 2) naming the columns and the ``--columns`` to add; with it,
    the dry run prints the mapping and the columns left in meta, and the run scores WER."""
    out = tmp_path / "runs"
    base = ["asr", "run", "-m", str(READ_SPEECH_CSV), "-s", ENGINE, "--limit", "2", "-o", str(out)]
    code, said = _voxassay(base, capsys)
    assert code == 2, said
    assert "--columns text=transcript_or_label" in said and "path" in said
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


def test_the_folders_the_readme_documents_are_read_by_the_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Kaldi data dir (tab-separated, a path with a space), an audio folder and, for
    ``su run``, a folder: read by the command, never refused as a directory (issue 32 item 4)."""
    kaldi = tmp_path / "data" / "test"
    kaldi.mkdir(parents=True)
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", tmp_path / "my clip.wav")
    shutil.copy(ARCTIC / "aew_arctic_a0002.wav", tmp_path / "b.wav")
    (kaldi / "wav.scp").write_text(f"u1\t{tmp_path / 'my clip.wav'}\nu2  {tmp_path / 'b.wav'}\n")
    (kaldi / "text").write_text("u1\tauthor of the danger trail\nu2 not at this particular case\n")
    out = tmp_path / "runs"
    res = CliRunner().invoke(cli, ["asr", "run", "-m", str(kaldi), "-s", ENGINE, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "(kaldi, detected)" in res.output
    (records,) = out.glob("*/records.jsonl")
    recs = {r["id"]: r for r in map(json.loads, records.read_text().splitlines())}
    assert set(recs) == {"u1", "u2"} and all(r["status"] == "ok" for r in recs.values())
    assert recs["u1"]["metrics"]["ref_words"] == 5
    # a piped command is still refused, with its line
    (kaldi / "wav.scp").write_text(
        f"u1\t{tmp_path / 'b.wav'}\nu2 sox {tmp_path / 'b.wav'} -t wav - |\n"
    )
    code, said = _voxassay(["asr", "run", "-m", str(kaldi), "-s", ENGINE, "-o", str(out)], capsys)
    assert code == 2 and "wav.scp:2: u2" in said and "is a command" in said, said
    clips = tmp_path / "my_clips"
    clips.mkdir()
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", clips / "a.wav")
    (clips / "metadata.csv").write_text("file_name,text\na.wav,author of the danger trail\n")
    for cmd in (
        ["asr", "run", "-m", f"{clips}/", "-s", ENGINE],
        ["su", "run", "-m", str(clips), "--task", "emotion", "-s", SU_ENGINE],
    ):
        dry = CliRunner().invoke(cli, [*cmd, "-o", str(out), "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert "(audiofolder, detected)" in dry.output and "id=a " in dry.output


def test_a_one_item_interval_is_not_estimable_in_every_view(tmp_path: Path) -> None:
    """A bootstrap interval from one unit is "not estimable" on the terminal, in report.md and
    report.json (bounds null), never the point estimate printed as an interval."""
    out = tmp_path / "runs"
    args = ["asr", "run", "-m", str(READ_SPEECH_CSV), "--columns", "text=transcript_or_label"]
    res = CliRunner().invoke(cli, [*args, "--limit", "1", "-s", ENGINE, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "not estimable" in res.output
    (run,) = out.glob("asr-*")
    overall = json.loads((run / "report.json").read_text())["systems"][0]["overall"]
    assert overall["n"] == 1 and overall["wer"] is not None
    assert overall["ci_lo"] is None or overall["ci_lo"] != overall["ci_lo"]  # null or NaN
    md = (run / "report.md").read_text()
    assert "not estimable" in md
    wer = f"{overall['wer']:.3f}"
    assert f"[{wer}, {wer}]" not in md and f"[{wer}, {wer}]" not in res.output


def test_an_audio_path_that_is_a_folder_is_an_error_record(tmp_path: Path) -> None:
    """The item is recorded with its reason and the run goes on (it used to abort with
    IsADirectoryError)."""
    (tmp_path / "clips").mkdir()
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", tmp_path / "a.wav")
    lines = [{"id": "dir", "audio_filepath": "clips", "text": "x"}]
    lines.append({"id": "ok", "audio_filepath": "a.wav", "text": "author of the danger trail"})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "runs"
    res = CliRunner().invoke(
        cli, ["asr", "run", "-m", str(tmp_path / "m.jsonl"), "-s", ENGINE, "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    (records,) = out.glob("*/records.jsonl")
    recs = {r["id"]: r for r in map(json.loads, records.read_text().splitlines())}
    assert recs["dir"]["status"] == "error" and "not a file" in recs["dir"]["error"]["message"]
    assert recs["ok"]["status"] == "ok"


@pytest.mark.live  # a second process holds the run
def test_a_run_folder_has_one_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """While a process writes a run, a second ``--resume`` of it is exit 2 naming that
    process; once the writer is gone (killed: the kernel drops its lock) the resume works
    (issue 32 item 9)."""
    import subprocess
    import sys

    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", tmp_path / "a.wav")
    line = {"id": "a", "audio_filepath": "a.wav", "text": "author of the danger trail"}
    (tmp_path / "m.jsonl").write_text(json.dumps(line) + "\n")
    out = tmp_path / "runs"
    args = ["asr", "run", "-m", str(tmp_path / "m.jsonl"), "-s", ENGINE, "-o", str(out)]
    assert _voxassay(args, capsys)[0] == 0
    (run,) = out.glob("asr-*")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from voxassay.core.runstore import RunStore\n"
            f"RunStore.open({str(run)!r}).claim()\n"
            "print('held', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, said = _voxassay([*args, "--resume"], capsys)
        assert code == 2 and f"PID {holder.pid}" in said, said
    finally:
        holder.kill()
        holder.wait()
    assert _voxassay([*args, "--resume"], capsys)[0] == 0


def test_subgroup_sections_show_the_table_they_announce(tmp_path: Path) -> None:
    """ "WER by gender" in report.md: its chart says "the table below", and the table is there,
    each cell a WER with its interval and n (issue 32 item 10)."""
    clips = sorted(ARCTIC.glob("*.wav"))[:2] * 2  # two real clips, each twice
    rows = [
        {"id": f"u{i}", "audio_filepath": str(c), "text": "x y z", "labels": {"gender": g}}
        for i, (c, g) in enumerate(zip(clips, ["f", "m", "f", "m"], strict=True))
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "runs"
    res = CliRunner().invoke(
        cli, ["asr", "run", "-m", str(tmp_path / "m.jsonl"), "-s", ENGINE, "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    md = next(out.glob("*/report.md")).read_text()
    section = md.split("WER by gender", 1)[1].split("\n## ", 1)[0]
    assert "| system | f | m |" in section
    assert "n=2" in section
