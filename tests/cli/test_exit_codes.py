"""The README's exit-code table holds for every command: 2 for a usage or input error found
before any work (nothing written), 1 when a system failed wholly, 0 otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, make_manifest
from voxassay.cli.main import main


def _code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    code = exc.value.code
    return int(code) if code is not None else 0


def test_the_readme_table_states_the_three_codes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d) \| (.+?) \|$", readme, flags=re.M))
    assert set(rows) == {"0", "1", "2"}
    assert "gate or check failed" in rows["1"] and "failed wholly" in rows["1"]
    assert "before any work starts" in rows["2"] and "Nothing is written" in rows["2"]


def _usage_errors(tmp: Path) -> dict[str, list[str]]:
    manifest = make_manifest(tmp / "m.jsonl", limit=1)
    mono = tmp / "mono.wav"
    mono.write_bytes((REPO.parent / "shared/data/read_speech/ljspeech/LJ001-0002.wav").read_bytes())
    bad_csv = tmp / "r.csv"
    bad_csv.write_text("rater,item\n")
    out = str(tmp / "out")
    return {
        "asr run": [
            "asr",
            "run",
            "-m",
            str(manifest),
            "-s",
            "faster-whisper?beam_sise=5",
            "-o",
            out,
        ],
        "asr run --format": [
            "asr",
            "run",
            "-m",
            str(manifest),
            "--format",
            "kaldi",
            "-s",
            "mock:silence",
            "-o",
            out,
        ],
        "asr score": ["asr", "score", str(tmp / "missing.jsonl"), "-o", out],
        "asr build-conditions": [
            "asr",
            "build-conditions",
            "-m",
            str(tmp / "nope.jsonl"),
            "-o",
            out,
        ],
        "tts run": ["tts", "run", "-s", "piper?lenght_scale=1", "-o", out],
        "tts score-audio": ["tts", "score-audio", "-m", str(tmp / "nope.jsonl"), "-o", out],
        "su run": [
            "su",
            "run",
            "--task",
            "emotion",
            "-m",
            str(manifest),
            "-s",
            "mock:silence",
            "-o",
            out,
        ],
        "duplex run": ["duplex", "run", "--agent", "python:no_such_module:make", "-o", out],
        "duplex run --route": [
            "duplex",
            "run",
            "--agent",
            "reference:careful",
            "--route",
            "direct",
            "--route",
            "relay",
            "-o",
            out,
        ],
        "duplex score": ["duplex", "score", "--stereo", str(mono), "-o", out],
        "sts run": ["sts", "run", "-s", "python:no_such_module:make", "-o", out],
        "sts run --only": ["sts", "run", "-s", "reference-sts", "--only", "no-such-*", "-o", out],
        "study import": ["study", "import", str(bad_csv), "--out", out],
        "study analyze": ["study", "analyze", str(tmp / "nope.csv"), "--out", out],
        "study create": [
            "study",
            "create",
            "--from",
            str(tmp / "nope.jsonl"),
            "--questions",
            str(tmp / "q.yaml"),
            "--out",
            out,
        ],
        "report": ["report", str(tmp / "no-run")],
        "compare": ["compare", str(tmp / "a"), str(tmp / "b")],
        "demo": ["demo", "--no-such-flag"],
        "nearest command": ["asrr", "run"],
    }


COMMANDS = [
    "asr run",
    "asr run --format",
    "asr score",
    "asr build-conditions",
    "tts run",
    "tts score-audio",
    "su run",
    "duplex run",
    "duplex run --route",
    "duplex score",
    "sts run",
    "sts run --only",
    "study import",
    "study analyze",
    "study create",
    "report",
    "compare",
    "demo",
    "nearest command",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_or_input_error_is_exit_2_and_writes_nothing(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _usage_errors(tmp_path)[command]
    assert _code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # six real runs: 3.3 s
def test_a_system_that_fails_every_item_is_exit_1_in_every_run_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_systems.py").write_text(
        "def make(**kw):\n"
        "    def f(*args, **kwargs):\n"
        "        raise RuntimeError('broken on purpose')\n"
        "    return f\n"
    )
    monkeypatch.chdir(tmp_path)
    manifest = make_manifest(tmp_path / "m.jsonl", limit=2)
    spec = "python:broken_systems:make"
    asr = ["asr", "run", "-m", str(manifest), "-s", spec, "-o", "r1", "-q"]
    tts = [
        "tts",
        "run",
        "-s",
        spec,
        "--asr",
        "none",
        "--items",
        "demo",
        "--limit",
        "2",
        "-o",
        "r2",
        "-q",
    ]
    assert _code(asr) == 1
    assert _code(tts) == 1
    err = capsys.readouterr().err
    assert err.count("exit 1: a system failed every item") == 2
    assert "broken on purpose" in err


@pytest.mark.live  # a real run in a subprocess, stopped after about 1.5 s
def test_ctrl_c_is_exit_130_keeps_what_was_written_and_resume_finishes(tmp_path: Path) -> None:
    import json
    import signal
    import subprocess
    import sys
    import time

    manifest = make_manifest(tmp_path / "m.jsonl", limit=4)
    out = tmp_path / "runs"
    argv = [sys.executable, "-m", "voxassay.cli.main", "asr", "run", "-m", str(manifest), "-s",
            "mock:hang?seconds=0.3&text=x", "--repeats", "3", "--out", str(out),
            "--no-progress", "--workers", "2"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(out.glob("*/records.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.7)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"--resume continues" in err, err[-1000:]
    (records,) = out.glob("*/records.jsonl")
    before = records.read_text().splitlines()
    assert 0 < len(before) < 12 and all(json.loads(line) for line in before)
    done = subprocess.run([*argv, "--resume"], cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    after = records.read_text().splitlines()
    assert after[: len(before)] == before and len(after) == 12
    assert len({(json.loads(x)["id"], json.loads(x)["repeat"]) for x in after}) == 12
