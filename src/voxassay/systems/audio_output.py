"""Checking the audio a synthesizer returns (shared by the python and openai-compat adapters).

:func:`coerce_audio` turns what user code or a server gives back into a mono float32
:class:`~voxassay.core.audio.Audio`, or raises :class:`EmptyAudioError` (no samples, NaN or
infinite samples; ``kind = "empty_audio"`` as the TTS contract asks) or
:class:`SystemOutputError` (anything else that is not usable audio).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.core.errors import SystemOutputError

__all__ = ["MAX_RATE", "MIN_RATE", "EmptyAudioError", "check_audio", "coerce_audio"]

MIN_RATE = 4_000
MAX_RATE = 192_000


class EmptyAudioError(SystemOutputError):
    """The synthesizer returned no samples, or samples that are NaN or infinite."""

    kind = "empty_audio"


def coerce_audio(value: Any, where: str = "system", default_rate: int | None = None) -> Audio:
    """Audio from an ``Audio``, a ``(samples, sample_rate)`` tuple, a dict with ``samples``
    (or ``audio``) and ``sample_rate`` (or ``sr``), or a bare array when ``default_rate`` is
    known. Integer PCM is scaled by its full scale (int16: /32768); a ``(n, channels)``
    array is averaged to mono. The result is checked by :func:`check_audio`.
    """
    samples: Any
    rate: Any
    if isinstance(value, Audio):
        samples, rate = value.samples, value.sr
    elif isinstance(value, tuple) and len(value) == 2:
        samples, rate = value
    elif isinstance(value, Mapping):
        samples = value.get("samples", value.get("audio"))
        rate = value.get("sample_rate", value.get("sr"))
        if samples is None or rate is None:
            keys = ", ".join(map(str, value)) or "(none)"
            raise SystemOutputError(
                f"{where} returned a dict without 'samples' (or 'audio') and 'sample_rate' "
                f"(keys: {keys})"
            )
    elif isinstance(value, np.ndarray) and default_rate:
        samples, rate = value, default_rate
    else:
        raise SystemOutputError(
            f"{where} returned {type(value).__name__}; expected voxassay.core.audio.Audio, a "
            "(samples, sample_rate) tuple or a dict {samples, sample_rate}"
        )
    if isinstance(rate, bool) or not isinstance(rate, int | np.integer):
        if isinstance(rate, float) and rate.is_integer():
            rate = int(rate)
        else:
            raise SystemOutputError(f"{where} returned sample rate {rate!r}, not an integer")
    try:
        array = np.asarray(samples)
    except Exception as exc:
        raise SystemOutputError(f"{where} returned samples that are not an array: {exc}") from None
    if array.dtype.kind in "iu":
        info = np.iinfo(array.dtype)
        scale = float(max(abs(info.min), info.max))
        offset = 0.0 if array.dtype.kind == "i" else (info.max + 1) / 2
        array = (array.astype(np.float64) - offset) / scale
    elif array.dtype.kind != "f":
        raise SystemOutputError(f"{where} returned samples of dtype {array.dtype}, not numbers")
    if array.ndim == 2 and array.shape[1] <= 8:
        array = array.mean(axis=1)
    if array.ndim != 1:
        raise SystemOutputError(f"{where} returned audio of shape {array.shape}, not mono 1-D")
    return check_audio(Audio(array.astype(np.float32), int(rate)), where)


def check_audio(audio: Audio, where: str = "system") -> Audio:
    """Raise unless ``audio`` has samples, all finite, at a rate in [4 kHz, 192 kHz]."""
    if not MIN_RATE <= audio.sr <= MAX_RATE:
        raise SystemOutputError(
            f"{where} returned sample rate {audio.sr} Hz, outside {MIN_RATE}..{MAX_RATE}"
        )
    if audio.samples.size == 0:
        raise EmptyAudioError(f"{where} returned empty audio (0 samples)")
    bad = int(np.count_nonzero(~np.isfinite(audio.samples)))
    if bad:
        raise EmptyAudioError(
            f"{where} returned {bad} NaN or infinite sample(s) of {audio.samples.size}"
        )
    return audio
