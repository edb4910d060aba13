"""A ``voxassay reference serve`` process for live tests: its URL and its session log lines."""

from __future__ import annotations

import re
import subprocess
import sys
import threading

from tests.conftest import REPO


class Served:
    """One ``voxassay reference serve`` process and the session lines it logs."""

    def __init__(self, transport: str, policy: str = "careful") -> None:
        cmd = [sys.executable, "-m", "voxassay.cli.main", "reference", "serve"]
        cmd += ["--transport", transport, "--port", "0", "--policy", policy]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"reference serve --transport {transport} failed: {err[-800:]}")
        self.url = line.split()[0]
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.strip())

    def session_pids(self) -> list[int]:
        return [
            int(m.group(1)) for m in map(re.compile(r"ended \(pid (\d+)\)").search, self.lines) if m
        ]

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Terminate, and kill after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
