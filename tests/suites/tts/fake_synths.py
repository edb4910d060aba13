"""In-process synthesizers for the TTS runner tests (``python:tests.suites.tts.fake_synths:NAME``).

They speak with the real espeak-ng; only their failure modes and style handling are scripted.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.systems.espeak import build as build_espeak


class Flaky:
    """Real speech, except for texts naming a failure: raise, silence, NaN, hang, garbage."""

    sample_rate = 22050

    def __init__(self) -> None:
        self.engine = build_espeak("espeak-ng:en-us")

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Any:
        if "explode" in text:
            raise RuntimeError("synthesizer crashed on purpose")
        if "silence" in text:
            return Audio(np.zeros(22050, np.float32), 22050)
        if "nan samples" in text:
            return Audio(np.full(22050, np.nan, np.float32), 22050)
        if "hang" in text:
            time.sleep(20)
        if "garbage" in text:
            return {"something": "else"}
        if "wrong rate" in text:
            return Audio(self.engine.synthesize(text).samples, 100)
        return self.engine.synthesize(text)

    def describe(self) -> dict[str, Any]:
        return {"voice": "flaky-en-us", "instructions": "ignored"}


class DeafToStyle:
    """espeak-ng that ignores style instructions (like every local voice here)."""

    sample_rate = 22050

    def __init__(self) -> None:
        self.engine = build_espeak("espeak-ng:en-us+m3")

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        return self.engine.synthesize(text)

    def describe(self) -> dict[str, Any]:
        return {"voice": "en-us+m3", "instructions": "ignored"}


class StyleFollower:
    """espeak-ng that maps excited/sad instructions to faster, higher, louder / slower,
    lower, quieter speech: the contrast metric must see it."""

    sample_rate = 22050

    def __init__(self) -> None:
        self.neutral = build_espeak("espeak-ng:en-us+m3")
        self.excited = build_espeak("espeak-ng:en-us+m3?speed=240&pitch=85&amplitude=190")
        self.sad = build_espeak("espeak-ng:en-us+m3?speed=110&pitch=15&amplitude=40")

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        style = (instructions or "").lower()
        if "excite" in style:
            return self.excited.synthesize(text)
        if "sad" in style:
            return self.sad.synthesize(text)
        return self.neutral.synthesize(text)

    def describe(self) -> dict[str, Any]:
        return {"voice": "en-us+m3", "instructions": "maps excited/sad to speed, pitch, level"}


def flaky() -> Flaky:
    return Flaky()


def deaf() -> DeafToStyle:
    return DeafToStyle()


def follower() -> StyleFollower:
    return StyleFollower()
