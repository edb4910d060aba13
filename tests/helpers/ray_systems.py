"""Systems for the Ray tests, built in the actors through ``python:tests.helpers.ray_systems``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def dies_on_long_audio(seconds: str = "5") -> Any:
    """A transcriber whose process exits (as an out-of-memory kill would) on audio longer
    than ``seconds``, and answers ``"short"`` otherwise."""
    limit = float(seconds)

    def transcribe(audio: np.ndarray, sample_rate: int) -> str:
        if audio.size / sample_rate > limit:
            os._exit(3)
        return "short"

    return transcribe


def opened_files(watch: str) -> Any:
    """A transcriber that reports how many files under the folders ``watch`` (comma-separated)
    its process has opened so far, seen by an audit hook installed when it is built (before
    any item reaches the worker): ``"opened:<n>"``."""
    import sys

    folders = tuple(w.rstrip("/") + "/" for w in watch.split(",") if w)
    seen: list[str] = []

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and args and isinstance(args[0], str | bytes):
            path = os.fsdecode(os.path.abspath(args[0]))
            if path.startswith(folders):
                seen.append(path)

    sys.addaudithook(hook)

    def transcribe(audio: np.ndarray, sample_rate: int) -> str:
        return f"opened:{len(seen)}"

    return transcribe
