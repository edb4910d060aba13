"""G.711 mu-law, the audio of a phone call (Twilio Media Streams: 8 kHz, one byte a sample).

Encoding as the reference coder (Sun's g711.c, which telephony stacks and CPython's audioop
follow): the sample is taken to 14 bits (``v = x >> 2``), its magnitude clipped to 8158 and
biased by 33; the segment ``s`` is the first of the ends 63, 127, ..., 8191 at or above it, the
mantissa ``(m >> (s + 1)) & 15``; the byte is ``(s << 4 | mantissa)`` inverted (all bits for
a positive sample, the low seven for a negative one). Decoding: ``((mantissa << 3) + 132) <<
s) - 132``, negated for the sign bit. Both are table lookups (65,536 and 256 entries).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["mulaw_decode", "mulaw_encode"]

_BIAS = 0x84
_CLIP = 32635
_SEGMENT_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])


@functools.lru_cache(maxsize=1)
def _decode_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


@functools.lru_cache(maxsize=1)
def _encode_table() -> np.ndarray:
    v = np.arange(-32768, 32768, dtype=np.int32) >> 2  # 14-bit, as in the reference coder
    negative = v < 0
    m = np.minimum(np.where(negative, -v, v), _CLIP >> 2) + (_BIAS >> 2)
    segment = np.searchsorted(_SEGMENT_ENDS, m)  # first segment whose end is >= m
    code = (np.minimum(segment, 7) << 4) | ((m >> (segment + 1)) & 0x0F)
    code = np.where(segment >= 8, 0x7F, code)
    return (code ^ np.where(negative, 0x7F, 0xFF)).astype(np.uint8)


def mulaw_encode(pcm: np.ndarray) -> bytes:
    """int16 PCM -> mu-law bytes (one per sample)."""
    x = np.asarray(pcm, dtype=np.int16).reshape(-1).astype(np.int32) + 32768
    return _encode_table()[x].tobytes()


def mulaw_decode(data: bytes) -> np.ndarray:
    """mu-law bytes -> int16 PCM."""
    return _decode_table()[np.frombuffer(data, dtype=np.uint8)]
