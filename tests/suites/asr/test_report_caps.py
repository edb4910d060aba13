"""A huge reference text must not make a huge report: worst-item texts and alignments are
capped in report.json (records.jsonl keeps the full text)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from voxassay.suites.asr.report import MAX_ALIGNMENT_OPS, MAX_REPORT_CHARS
from voxassay.suites.asr.suite import run_asr


def test_a_long_reference_is_capped_in_the_report_not_in_the_records(
    data_dir: Path, tmp_path: Path
) -> None:
    rng = random.Random(0)
    text = " ".join(rng.choice(["alpha", "bravo", "charlie", "delta"]) for _ in range(100_000))
    audio = str(data_dir / "read_speech/ljspeech/LJ001-0002.wav")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "long", "audio_filepath": audio, "text": text}) + "\n")
    store = run_asr(manifest, ["mock:fixed?text=alpha bravo"], tmp_path / "runs")
    report_bytes = (store.path / "report.json").stat().st_size
    assert report_bytes < 100_000 < len(text)
    worst = json.loads((store.path / "report.json").read_text())["systems"][0]["worst_items"][0]
    assert (
        len(worst["text"]) < MAX_REPORT_CHARS + 80
        and "more characters in records.jsonl" in worst["text"]
    )
    assert len(worst["alignment"]) == MAX_ALIGNMENT_OPS and worst["alignment_steps"] == 100_000
    assert 99_998 <= worst["errors"] <= 100_000
    item = json.loads((store.path / "items.jsonl").read_text())
    assert item["text"] == text  # the run folder keeps everything
