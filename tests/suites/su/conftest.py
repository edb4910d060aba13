"""Fixtures: labelled manifests built from the real recordings in ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import csv_rows, shared_data


@pytest.fixture(scope="session")
def speaker_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LibriSpeech test-other: 9 speakers x 4 clips, with speaker and gender labels."""
    data = shared_data()
    path = tmp_path_factory.mktemp("su_spk") / "speakers.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for row in csv_rows("speaker"):
            gender = row["notes"].split(";")[0].split("=")[1]
            fh.write(
                json.dumps(
                    {
                        "id": Path(row["path"]).stem,
                        "audio_filepath": str(data / "speaker" / row["path"]),
                        "speaker": row["speaker"],
                        "labels": {"gender": gender},
                    }
                )
                + "\n"
            )
    return path


@pytest.fixture(scope="session")
def real_vs_synthetic_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LJ Speech originals (human) and vocoded copies + NSF ARCTIC clips (synthetic)."""
    data = shared_data()
    path = tmp_path_factory.mktemp("su_rvs") / "rvs.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for row in csv_rows("real_vs_synthetic"):
            label = row["transcript_or_label"].split("|")[0]
            fh.write(
                json.dumps(
                    {
                        "id": row["path"].replace("/", "_").rsplit(".", 1)[0],
                        "audio_filepath": str(data / "real_vs_synthetic" / row["path"]),
                        "speaker": row["speaker"],
                        "labels": {"synthetic": label != "real", "source": label.split(":")[-1]},
                    }
                )
                + "\n"
            )
    return path


@pytest.fixture(scope="session")
def loudness_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real LibriSpeech clips re-levelled to 3 intensity steps (-38/-29/-20 dBFS RMS),
    labelled ``emotion: anger`` with ``intensity`` 1/2/3 (constructed: loudness stands in
    for intensity so that a loudness rule is a known-correct answerer)."""
    data = shared_data()
    out = tmp_path_factory.mktemp("su_loud")
    lines = []
    rows = [r for r in csv_rows("speaker")][:6]
    for i, row in enumerate(rows):
        x, sr = sf.read(str(data / "speaker" / row["path"]), dtype="float32")
        x = x[: sr * 3]
        level = i % 3 + 1
        target = 10 ** ((-38 + 9 * (level - 1)) / 20)
        x = x * (target / float(np.sqrt(np.mean(x.astype(np.float64) ** 2))))
        p = out / f"loud{i}.wav"
        sf.write(str(p), np.clip(x, -1, 1), sr)
        lines.append(
            {
                "id": f"loud{i}",
                "audio_filepath": str(p),
                "speaker": row["speaker"],
                "labels": {"emotion": "anger", "intensity": level, "constructed": True},
            }
        )
    path = out / "loud.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path
