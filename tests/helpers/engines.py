"""Small user engines for ``python:`` specs in tests (real callables, not mocks of voxassay)."""

from __future__ import annotations

import hashlib
import time

import numpy as np

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
]


class SlowHashEngine:
    """Transcribes deterministically from the audio bytes, slowly (to be killed mid-run)."""

    def __init__(self, delay: str = "0.2") -> None:
        self.delay = float(delay)

    def transcribe(self, audio: np.ndarray) -> str:
        time.sleep(self.delay)
        digest = hashlib.sha1(np.asarray(audio, np.float32).tobytes()).digest()
        return " ".join(WORDS[b % len(WORDS)] for b in digest[:4])


def slow(delay: str = "0.2") -> SlowHashEngine:
    return SlowHashEngine(delay)


def energy_words(audio: np.ndarray, sample_rate: int) -> str:
    """A plain callable engine: one word per 0.5 s of audio above -40 dBFS."""
    hop = sample_rate // 2
    out = []
    for i in range(0, len(audio), hop):
        chunk = audio[i : i + hop]
        if chunk.size and np.sqrt(np.mean(chunk**2)) > 0.01:
            out.append(WORDS[(i // hop) % len(WORDS)])
    return " ".join(out)


def plain(**_: str) -> object:
    return energy_words
