"""TTS items whose ids would make bad file names: each is synthesized into its own file and
the run completes (issue 32 item 8: a 300-character id aborted the run, and an id spelt like
another's hashed file name overwrote its audio)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import soundfile as sf
from click.testing import CliRunner

from voxassay.cli.main import cli
from voxassay.suites.tts.runner import item_filename

pytestmark = [
    pytest.mark.slow,  # espeak-ng synthesizes three items
    pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="apt install espeak-ng"),
]


def test_long_and_look_alike_ids_get_their_own_files(tmp_path: Path) -> None:
    lookalike = item_filename("a b", 0).removesuffix(".wav")  # "a_b-<hash>": another's name
    texts = {
        "a b": "One.",
        lookalike: "Two words.",
        "x" * 300: "Three little words.",
    }
    manifest = tmp_path / "items.jsonl"
    labels = {"dimension": "audio_quality", "eval": "general_quality"}
    manifest.write_text(
        "".join(json.dumps({"id": i, "text": t, "labels": labels}) + "\n" for i, t in texts.items())
    )
    out = tmp_path / "runs"
    args = ["tts", "run", "--items", str(manifest), "-s", "espeak-ng:en-us", "--asr", "none"]
    res = CliRunner().invoke(cli, [*args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    (records,) = out.glob("*/records.jsonl")
    recs = [json.loads(x) for x in records.read_text().splitlines()]
    assert sorted(r["id"] for r in recs) == sorted(texts) and all(r["status"] == "ok" for r in recs)
    files = {r["id"]: records.parent / r["output"]["audio_path"] for r in recs}
    assert len(set(files.values())) == 3
    durations = {i: sf.info(str(f)).duration for i, f in files.items()}
    assert durations["a b"] < durations[lookalike] < durations["x" * 300]  # each its own audio
    assert all(len(f.name.encode()) < 255 for f in files.values())
