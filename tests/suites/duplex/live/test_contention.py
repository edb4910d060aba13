"""Load changes no verdict silently (issue 32, item 11): a session whose process waited for a
CPU over a tenth of its CPU time, while the agent's compute was charged to the clock, is
marked contended; its latencies are reported apart and feed no headline and no gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.reference.test_fault_injection import _needs_speech_stack
from voxassay.cli.main import cli
from voxassay.core.cpu import CpuMeter

pytestmark = [pytest.mark.live]

HOG = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"


@contextmanager
def cpu_hogs() -> Iterator[None]:
    """One busy process per CPU this process may run on (so every core is taken, whatever
    the machine), killed on the way out."""
    n = len(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def test_the_meter_sees_a_thread_wait_for_a_cpu_beside_hogs() -> None:
    """Computing beside one busy process per CPU, this thread waits for a CPU about half the
    time it computes (three runnable tasks per two CPUs): contended; the machine's CPU
    pressure grew too where the kernel reports it."""
    with cpu_hogs(), CpuMeter() as meter:
        _spin(1.0)
    use = meter.use
    assert use is not None and use.cpu_s is not None and use.wait_s is not None
    assert use.cpu_s > 0.1 and use.contended is True, use
    assert use.pressure_s is None or use.pressure_s > 0
    assert use.to_dict()["contended"] is True


@pytest.mark.slow
def test_a_run_beside_cpu_hogs_keeps_its_decisions_or_says_it_was_contended(
    tmp_path: Path,
) -> None:
    """The same scenario with the agent's compute charged, alone and beside one busy process
    per CPU: the loaded session either reaches the unloaded run's turn decisions or is marked
    contended, and a contended session's latencies are in the report apart, not in its
    headline latencies, and report.md says so."""
    _needs_speech_stack()
    args = ["duplex", "run", "--scenarios", "default", "--only", "normal-turns-pause-600ms"]
    args += ["--agent", "reference:careful", "--compute", "charged", "--no-progress"]

    def run(out: Path) -> tuple[Any, Any, Path]:
        res = CliRunner().invoke(cli, [*args, "--out", str(out)])
        assert res.exit_code == 0, res.output
        folder = Path(res.stdout.strip().splitlines()[-1])
        (line,) = (folder / "records.jsonl").read_text().splitlines()
        return json.loads(line), json.loads((folder / "report.json").read_text()), folder

    alone, _, _ = run(tmp_path / "alone")
    with cpu_hogs():
        loaded, report, folder = run(tmp_path / "loaded")
    stats = loaded["output"]["session_stats"]
    assert stats["cpu"]["cpu_s"] > 0 and "contended" in stats
    same = loaded["metrics"]["rates"] == alone["metrics"]["rates"]
    assert same or stats["contended"] is True
    if stats["contended"]:
        (system,) = report["systems"]
        block = system["overall"]["contended"]
        assert block["n_sessions"] == 1 and block["sessions"] == [loaded["id"]]
        assert block["latencies"]  # reported apart ...
        headline = system["overall"]["latencies"].get("response_first_audio_ms") or {}
        assert not headline.get("n")  # ... and not in the headline (nor any gate)
        assert "ran contended" in (folder / "report.md").read_text()
