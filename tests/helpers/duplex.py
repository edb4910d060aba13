"""Shared test pieces for live duplex sessions: real speech clips and a cut-in scenario."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import SHARED
from voxeval.suites.duplex.schema import Scenario

SR = 16_000
ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
needs_speech = pytest.mark.skipif(
    not ARCTIC.is_dir(), reason=f"needs ../shared/data read speech ({ARCTIC})"
)


def arctic_clip(name: str, seconds: float | None = None) -> np.ndarray:
    """A CMU ARCTIC recording at 16 kHz float32, optionally cut to ``seconds``."""
    import soxr

    x, sr = sf.read(ARCTIC / name, dtype="float32")
    y = soxr.resample(x, sr, SR).astype(np.float32)
    return y[: int(seconds * SR)] if seconds else y


def cut_in_scenario(scenario_id: str, at_ms: int, **over: Any) -> Scenario:
    """An ask at ``at_ms`` and an interruption 1 s after the answer starts playing."""
    doc: dict[str, Any] = {
        "id": scenario_id,
        "version": 1,
        "category": "interruption",
        "segments": [
            {"id": "ask", "role": "user", "audio": "a.wav", "at_ms": at_ms, "intents": ["start"]},
            {
                "id": "cut",
                "role": "user",
                "audio": "b.wav",
                "after": {"event": "playback.started", "ref": "ask", "offset_ms": 1000},
                "intents": ["interrupt"],
                "expected_actions": ["interrupt"],
            },
        ],
    }
    doc.update(over)
    return Scenario.model_validate(doc)
