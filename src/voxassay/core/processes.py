"""Stopping a child process the same way everywhere: terminate, then kill if it lingers."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[Any], wait_s: float = 5.0) -> None:
    """Terminate ``proc`` if it runs; kill it when it is not gone after ``wait_s``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(wait_s)
