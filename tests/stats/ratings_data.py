"""Readers for the real rating sets in ../shared/data/ratings (skip when absent).

Nothing is copied into the repo: tests read the shared files and write any derived CSV to
their own temporary folders.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import DATA

RATINGS = DATA / "ratings"


def ratings_dir(name: str) -> Path:
    folder = RATINGS / name
    if not folder.is_dir():
        pytest.skip(f"real ratings {name!r} not found at {folder} (../shared/data beside the repo)")
    return folder


def bvcc(split: str = "TRAINSET") -> dict[str, list[Any]]:
    """BVCC listener-level rows: ``listenerinfo`` is ``{}_AGE_RATERID_GENDER_x_x_HEARING``."""
    out: dict[str, list[Any]] = {k: [] for k in ("score", "system", "rater", "item", "age")}
    with open(ratings_dir("bvcc_listener_level") / split, encoding="utf-8") as fh:
        for row in csv.reader(fh):
            info = row[4].split("_")
            out["system"].append(row[0])
            out["item"].append(row[1])
            out["score"].append(float(row[2]))
            out["rater"].append(info[2])
            out["age"].append(info[1])
    return out


def mushra() -> dict[str, list[Any]]:
    """Codec MUSHRA: item = signal, system = condition, kept = in the authors' filtered set."""
    out: dict[str, list[Any]] = {k: [] for k in ("score", "system", "rater", "item", "kept")}
    with open(ratings_dir("neural_codec_mushra") / "ratings_long.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            out["score"].append(float(r["score"]))
            out["system"].append(r["system_id"])
            out["rater"].append(r["rater_id"])
            out["item"].append(r["item_id"])
            out["kept"].append(r["rater_kept_in_filtered"] == "1")
    return out


def write_long_csv(
    path: Path, data: dict[str, list[Any]], eval_id: str, **extra: list[Any]
) -> Path:
    """The analysis' long format from one of the readers above."""
    cols = ["rater", "item", "system", "eval", "score", *extra]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for i in range(len(data["score"])):
            w.writerow(
                [
                    data["rater"][i],
                    data["item"][i],
                    data["system"][i],
                    eval_id,
                    f"{data['score'][i]:g}",
                    *[extra[c][i] for c in extra],
                ]
            )
    return path


VMC_LINE = re.compile(
    r"^(\S+)\s+\S+\s+\S+\s+\(1:(\d+),2:(\d+),3:(\d+),4:(\d+),5:(\d+),total: (\d+)\)"
)


def vmc_vote_counts() -> np.ndarray:
    """VMC2024 sarulab MOS table: per utterance the number of votes for 1..5."""
    rows = []
    with open(ratings_dir("vmc2024_sarulab") / "VMC2024_MOS.txt", encoding="utf-8") as fh:
        for line in fh:
            m = VMC_LINE.match(line)
            if m:
                counts = [int(m.group(k)) for k in range(2, 7)]
                assert sum(counts) == int(m.group(7))
                rows.append(counts)
    return np.array(rows)


def crema_voice_counts() -> np.ndarray:
    """CREMA-D crowd emotion votes on the voice-only presentation (ids 1xxxxx, whose means
    match ``summaryTable.csv``'s VoiceLevel): counts per file over A, D, F, H, N, S."""
    rows = []
    with open(ratings_dir("crema_d") / "tabulatedVotes.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r[""].startswith("1"):
                rows.append([int(r[c]) for c in "ADFHNS"])
    return np.array(rows)
