"""Audit set builders from the CLI, then a run whose report carries the audits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import make_manifest
from voxassay.cli.main import cli
from voxassay.core.items import load_manifest


def _invoke(args: list[str]) -> str:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_masking_set_and_report(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech",), limit=4)
    masking = Path(_invoke(["asr", "build-masking", "-m", str(m), "--out", str(tmp_path / "mask")]))
    items = load_manifest(masking)
    masked = [i for i in items if i.labels.get("audit") == "masking"]
    assert len(items) - len(masked) == 4 and 1 <= len(masked) <= 4
    assert all(i.labels["masked_word"] and Path(i.audio_filepath or "").exists() for i in masked)
    run = Path(
        _invoke(
            [
                "asr",
                "run",
                "-m",
                str(masking),
                "-s",
                "faster-whisper",
                "--out",
                str(tmp_path / "r"),
                "--no-progress",
            ]
        )
    )
    report = json.loads((run / "report.json").read_text())
    assert report["n_audit_items"] == len(masked) and report["n_items"] == 4
    audit = report["audits"]["masking"]
    assert audit["status"] == "ok"
    (row,) = audit["systems"]
    assert row["system"] == "faster-whisper" and row["n"] == len(masked)
    assert "Audio masking" in (run / "report.md").read_text()


def test_synthetic_set_with_espeak(tmp_path: Path, data_dir: Path) -> None:
    import shutil

    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech",), limit=2)
    path = Path(
        _invoke(
            [
                "asr",
                "build-synthetic",
                "-m",
                str(m),
                "--tts",
                "espeak-ng:en-us",
                "--out",
                str(tmp_path / "syn"),
            ]
        )
    )
    items = load_manifest(path)
    synth = [i for i in items if i.labels.get("audit") == "synthetic"]
    assert len(synth) == 2 and {i.labels["source_item"] for i in synth} == {
        i.id for i in items if not i.labels.get("audit")
    }
    assert all(i.labels["tts"] == "espeak-ng:en-us" for i in synth)
