"""Capability protocols shared by all backends."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass
class Word:
    """A recognised word with its time span in seconds (``prob`` when the engine gives one)."""

    word: str
    start: float
    end: float
    prob: float | None = None


@dataclass
class Transcript:
    """What a transcriber returns: the text, optional word timings, engine extras."""

    text: str
    words: list[Word] | None = None
    language: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_output(self) -> dict[str, Any]:
        """The record ``output`` block: ``pred_text`` and ``words`` when present."""
        out: dict[str, Any] = {"pred_text": self.text}
        if self.words is not None:
            out["words"] = [asdict(w) for w in self.words]
        if self.language:
            out["language"] = self.language
        if self.extra:
            out["extra"] = self.extra
        return out


@runtime_checkable
class Transcriber(Protocol):
    """The ``transcribe`` capability.

    ``load()`` does one-time work (model load) that is excluded from compute time;
    ``transcribe`` takes mono float32 samples at ``sample_rate`` (16 kHz) and must be
    safe to call from one worker thread at a time; ``describe()`` returns what goes into
    ``run.json`` (model name, path, decoding settings, versions).
    """

    sample_rate: int

    def load(self) -> None: ...

    def transcribe(self, audio: np.ndarray) -> Transcript: ...

    def describe(self) -> dict[str, Any]: ...
