"""Converse systems for the STS tests (``python:tests.suites.sts.fakes:NAME``): they stand at
the edge, in place of a model; the runner, scoring and report under test are real."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from voxassay.systems.converse import Reply

MADE: list[Any] = []
"""Every reference cascade built here, so a test can read what its responder was given."""


def _tone(seconds: float, sr: int = 16_000) -> np.ndarray:
    t = np.arange(round(seconds * sr)) / sr
    return (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


class IgnoresAudio:
    """Answers the same whatever it hears or reads (a chat model deaf to the audio)."""

    def converse(self, turn: Any, history: list[Any], mode: str) -> Reply:
        n = len(history)
        return Reply(f"I can help with that. Shall I go ahead? ({n})", _tone(0.6), 16_000)


def ignores_audio() -> IgnoresAudio:
    return IgnoresAudio()


class Flaky:
    """Fails in every way a system can, by the words of the turn."""

    def converse(self, turn: Any, history: list[Any], mode: str) -> Any:
        words = turn.transcript.lower()
        if "crushed" in words:
            raise RuntimeError("model server returned 500")
        if "medicine" in words:
            return Reply("", None)  # nothing at all
        if "send another" in words:
            return Reply("a very long answer", np.zeros(16_000 * 601, np.float32), 16_000)
        if "useless" in words:
            time.sleep(5)  # past the test's timeout
        return {"text": "Here is what I can do. Would you like that?"}  # text only


def flaky() -> Flaky:
    return Flaky()


def reference(prosody_aware: str = "0") -> Any:
    from voxassay.reference.sts import ReferenceSts

    MADE.append(ReferenceSts(prosody_aware=prosody_aware == "1"))
    return MADE[-1]


def judge() -> Any:
    """A judge (understand) that scores an answer by its length: 5 for a long answer."""

    def rate(parts: list[Any], prompt: str) -> str:
        assert len(parts) == 2 and "caller" in prompt and "Score: N" in prompt
        seconds = len(parts[1].samples) / parts[1].sr
        return f"Score: {5 if seconds > 3.0 else 2}\nBecause."

    return rate


def text_only() -> Any:
    """Answers in writing only."""
    return lambda turn, history, mode: "I will block your card now."
