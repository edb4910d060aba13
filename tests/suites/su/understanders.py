"""In-process understanders for the SU tests (``python:tests.suites.su.understanders:NAME``).

They answer from measurements of the clips they get (no truth leaks in): ``louder`` picks
the louder clip, ``by_length`` calls two clips the same speaker when their durations are
close, ``rater`` rates by level; the rest script failures (garbage, raise, hang) and
``logged`` appends one line per call to a file, so a resumed run can be checked for redone
work.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _rms(a: Any) -> float:
    return float(np.sqrt(np.mean(np.square(a.samples, dtype=np.float64))))


def louder() -> Callable[[list[Any], str], str]:
    """Emotion comparison: the louder clip "expresses more" (answers in the strict format)."""

    def answer(parts: list[Any], prompt: str) -> str:
        if len(parts) == 1:
            return "I can only hear one recording, so I cannot compare."
        return "Clip A is more intense.\nANSWER: " + (
            "A" if _rms(parts[0]) > _rms(parts[1]) else "B"
        )

    return answer


def fixed(text: str = "ANSWER: same") -> Callable[[list[Any], str], str]:
    return lambda parts, prompt: text


def lenient_same() -> Callable[[list[Any], str], str]:
    return lambda parts, prompt: "These are clearly not the same speaker, I think."


def garbage() -> Callable[[list[Any], str], str]:
    return lambda parts, prompt: "The weather is nice today."


def not_text() -> Callable[[list[Any], str], Any]:
    return lambda parts, prompt: 42


class Flaky:
    """Raises on every clip shorter than ``min_s`` seconds, else answers ``same``."""

    def __init__(self, min_s: str = "3.0") -> None:
        self.min_s = float(min_s)

    def understand(self, parts: list[Any], prompt: str) -> str:
        if min(p.duration for p in parts) < self.min_s:
            raise RuntimeError("model crashed on a short clip")
        return "ANSWER: same"


def hang(seconds: str = "30") -> Callable[[list[Any], str], str]:
    def answer(parts: list[Any], prompt: str) -> str:
        time.sleep(float(seconds))
        return "ANSWER: same"

    return answer


def rater() -> Callable[[list[Any], str], str]:
    """A 1-5 rating from the clip level: -20 dBFS or louder = 5, each 6 dB lower one less."""

    def answer(parts: list[Any], prompt: str) -> str:
        db = 20 * np.log10(max(_rms(parts[0]), 1e-9))
        return f"My rating is {int(np.clip(5 + (db + 20) // 6, 1, 5))} out of 5."

    return answer


def logged(log: str, sleep: str = "0.0") -> Callable[[list[Any], str], str]:
    """Answers ``same``; appends ``<n clips> <total samples>`` to ``log`` per call."""

    def answer(parts: list[Any], prompt: str) -> str:
        time.sleep(float(sleep))
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{len(parts)} {sum(p.samples.size for p in parts)}\n")
            fh.flush()
            os.fsync(fh.fileno())
        return "ANSWER: same"

    return answer
