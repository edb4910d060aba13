"""Shared fixtures: the real recordings in ../shared/data and manifests built from them."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"


def shared_data() -> Path:
    """The shared data folder, or skip the test with the reason."""
    if not (DATA / "read_speech" / "manifest.csv").exists():
        pytest.skip(f"real recordings not found at {DATA} (../shared/data beside the repo)")
    return DATA


def csv_rows(folder: str) -> list[dict[str, str]]:
    with open(shared_data() / folder / "manifest.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def accent_of(notes: str) -> str:
    """Accent from the shared manifest's notes (VCTK region, or "Indian" for CMU axb)."""
    if "Indian" in notes:
        return "Indian"
    if "accent/region:" in notes:
        parts = [p.strip() for p in notes.split(":", 1)[1].split("(")[0].split(",")]
        return parts[-1]
    return "unknown"


def make_manifest(
    path: Path, folders: tuple[str, ...] = ("read_speech",), limit: int | None = None
) -> Path:
    """Write a voxeval manifest (absolute audio paths) from shared folders with transcripts."""
    lines = []
    for folder in folders:
        for row in csv_rows(folder):
            if not row["path"].endswith((".wav", ".flac")) or not row["transcript_or_label"]:
                continue
            labels = {"condition": "clean" if folder == "read_speech" else "accent"}
            if folder == "accented":
                labels["accent"] = accent_of(row["notes"])
            lines.append(
                {
                    "id": f"{folder}/{Path(row['path']).stem}",
                    "audio_filepath": str(DATA / folder / row["path"]),
                    "duration": float(row["duration_s"]),
                    "text": row["transcript_or_label"],
                    "speaker": row["speaker"],
                    "labels": labels,
                }
            )
    if limit:
        lines = lines[:limit]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def data_dir() -> Path:
    return shared_data()


# --------------------------------------------------------------------------- tiers
TIERS = ("slow", "live", "browser", "ray")
UNMARKED_LIMIT_S = 3.0
"""A test in no tier that takes longer than this is listed at the end of the run: the fast
tier (``make test-fast``) must stay within 3 minutes, so such a test belongs in a tier."""
_unmarked_slow: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" or report.duration <= UNMARKED_LIMIT_S:
        return
    if not any(t in report.keywords for t in TIERS):
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _unmarked_slow:
        terminalreporter.section("tests in no tier that took longer than 3 s")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda x: -x[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}  (mark it slow or live)")
