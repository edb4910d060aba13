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
