"""Helpers shared by the live benchmarks (run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import argparse
import os


def set_scheduling(mode: str) -> str:
    """``normal``, or ``fifo``: SCHED_FIFO for this process's threads (a diagnostic: it shows
    how much of the tail is other processes' work; children start with normal scheduling)."""
    if mode != "fifo":
        return "normal (CFS, shared with every other process)"
    try:
        policy = os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
        os.sched_setscheduler(0, policy, os.sched_param(10))
        return "SCHED_FIFO priority 10 (diagnostic; servers started from here run normal)"
    except (AttributeError, OSError) as exc:
        return f"normal (SCHED_FIFO refused: {exc})"


def add_sched_option(ap: argparse.ArgumentParser) -> None:
    """``--sched normal|fifo`` (see :func:`set_scheduling`)."""
    ap.add_argument(
        "--sched",
        choices=("normal", "fifo"),
        default="normal",
        help="fifo: run the driver with real-time scheduling (diagnostic; needs root)",
    )
