"""A process-executor worker that records its PID (a file named by it in ``$SLEEPY_PIDS``) and
sleeps per task: something to kill its driver under."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def _sleep(task: Any) -> Any:
    time.sleep(0.5)
    return task


def make() -> Any:
    (Path(os.environ["SLEEPY_PIDS"]) / str(os.getpid())).touch()
    return _sleep
