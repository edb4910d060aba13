"""`voxassay su build-pairs|run` through the real CLI (subprocesses), on real clips."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REPO, csv_rows, shared_data

pytestmark = pytest.mark.live

H = "python:tests.suites.su.understanders:"


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxassay.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = shared_data()
    path = tmp_path_factory.mktemp("cli") / "speakers.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": Path(r["path"]).stem,
                    "audio_filepath": str(data / "speaker" / r["path"]),
                    "speaker": r["speaker"],
                }
            )
            + "\n"
            for r in csv_rows("speaker")
        )
    )
    return path


def test_build_pairs_and_run(labelled: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    p = _cli(
        "su",
        "build-pairs",
        "--task",
        "speaker_match",
        "--from",
        str(labelled),
        "--out",
        str(pairs),
        "--n",
        "12",
        "--seed",
        "2",
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == str(pairs)
    lines = [json.loads(x) for x in pairs.read_text().splitlines()]
    assert Counter(x["labels"]["truth"] for x in lines) == {"same": 6, "different": 6}
    r = _cli(
        "su",
        "run",
        "--task",
        "speaker_match_merged",
        "--manifest",
        str(pairs),
        "--system",
        H + "fixed",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    run_dir = Path(r.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path / "runs" and run_dir.name.startswith("su-")
    rep = json.loads((run_dir / "report.json").read_text())
    assert rep["suite"] == "su" and rep["tasks"][0]["task"] == "speaker_match_merged"
    assert "No real system" in r.stderr
    rr = _cli("report", str(run_dir))  # the report rebuilds from the folder alone
    assert rr.returncode == 0, rr.stderr
    again = json.loads((run_dir / "report.json").read_text())
    assert again["systems"][0]["tasks"] == rep["systems"][0]["tasks"]


def test_usage_errors_exit_2(labelled: Path, tmp_path: Path) -> None:
    bad_task = _cli(
        "su",
        "run",
        "--task",
        "speakr_match",
        "--manifest",
        str(labelled),
        "--system",
        "resemblyzer",
        "--out",
        str(tmp_path),
    )
    assert bad_task.returncode == 2 and "Did you mean" in bad_task.stderr
    wrong = _cli(
        "su",
        "run",
        "--task",
        "emotion",
        "--manifest",
        str(labelled),
        "--system",
        "resemblyzer",
        "--out",
        str(tmp_path),
    )
    assert wrong.returncode == 2 and "specialist for speaker_match" in wrong.stderr
    bp = _cli(
        "su",
        "build-pairs",
        "--task",
        "emotion_compare",
        "--from",
        str(labelled),
        "--out",
        str(tmp_path / "x.jsonl"),
    )
    assert bp.returncode == 2 and "margin" in bp.stderr


def test_resume_after_kill(labelled: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    assert (
        _cli(
            "su",
            "build-pairs",
            "--task",
            "speaker_match",
            "--from",
            str(labelled),
            "--out",
            str(pairs),
            "--n",
            "24",
        ).returncode
        == 0
    )
    log = tmp_path / "calls.log"
    args = [
        sys.executable,
        "-m",
        "voxassay.cli.main",
        "su",
        "run",
        "--task",
        "speaker_match_segmented",
        "--manifest",
        str(pairs),
        "--system",
        H + f"logged?log={log}&sleep=0.25",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
    ]
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.time() + 60
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 5):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run_dir = next((tmp_path / "runs").iterdir())
    done_before = len((run_dir / "records.jsonl").read_text().splitlines())
    assert 0 < done_before < 18
    calls_before = len(log.read_text().splitlines())
    r = subprocess.run([*args, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip().splitlines()[-1]) == run_dir
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(recs) == len({x["id"] for x in recs}) == 18  # 24 pairs - 6 calibration
    # finished items were not asked again (at most the one in flight at the kill)
    assert len(log.read_text().splitlines()) - calls_before <= 18 - done_before + 1
    assert len(json.loads((run_dir / "run.json").read_text())["resumed_at"]) == 1
