"""Capability protocols shared by all backends."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from voxassay.core.errors import SystemOutputError


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


@runtime_checkable
class Synthesizer(Protocol):
    """The ``synthesize`` capability: text (and an optional voice and style instruction) to
    audio at ``sample_rate``. Backends that cannot follow instructions say so in ``describe()``.
    """

    sample_rate: int

    def load(self) -> None: ...

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Any: ...

    def describe(self) -> dict[str, Any]: ...


@runtime_checkable
class Understander(Protocol):
    """The ``understand`` capability: one or more audio clips (``core.audio.Audio``, any
    rate) and a text prompt in, the model's free-text answer out. Parsing the answer is the
    suite's job, never the adapter's. ``describe()`` records the decoding settings
    (temperature 0 where the backend has one)."""

    def load(self) -> None: ...

    def understand(self, audio_parts: list[Any], prompt: str) -> str: ...

    def describe(self) -> dict[str, Any]: ...


def coerce_transcript(value: Any, where: str = "system") -> Transcript:
    """Turn a ``Transcript``, ``str`` or ``{"text"|"pred_text", "words"?}`` dict into a Transcript.

    Raises :class:`SystemOutputError` (naming ``where``) for anything else.
    """
    if isinstance(value, Transcript):
        if not isinstance(value.text, str):
            raise SystemOutputError(
                f"{where} returned a Transcript whose text is {type(value.text).__name__}"
            )
        words = None if value.words is None else _coerce_words(value.words, where)
        return Transcript(value.text, words, value.language, dict(value.extra))
    if isinstance(value, str):
        return Transcript(value)
    if isinstance(value, Mapping):
        text = value.get("text", value.get("pred_text"))
        if not isinstance(text, str):
            raise SystemOutputError(
                f"{where} returned a dict without a string 'text' or 'pred_text' "
                f"(keys: {', '.join(map(str, value))})"
            )
        raw_words = value.get("words")
        words = None if raw_words is None else _coerce_words(raw_words, where)
        language = value.get("language")
        return Transcript(text, words, language if isinstance(language, str) else None)
    raise SystemOutputError(
        f"{where} returned {type(value).__name__} ({_excerpt(value)}); expected a Transcript, "
        "a str or a dict with 'text'"
    )


def _coerce_words(raw: Any, where: str) -> list[Word]:
    if not isinstance(raw, list | tuple):
        raise SystemOutputError(f"{where} returned words as {type(raw).__name__}, not a list")
    out: list[Word] = []
    for i, w in enumerate(raw):
        word: Any
        start: Any
        end: Any
        prob: Any
        if isinstance(w, Word):
            word, start, end, prob = w.word, w.start, w.end, w.prob
        elif isinstance(w, Mapping):
            word = w.get("word", w.get("text"))
            start, end = w.get("start"), w.get("end")
            prob = w.get("prob", w.get("probability"))
        else:
            raise SystemOutputError(f"{where} returned word {i} as {type(w).__name__}")
        if not isinstance(word, str):
            raise SystemOutputError(f"{where} returned word {i} without a string 'word'")
        try:
            fstart, fend = float(start), float(end)
            fprob = None if prob is None else float(prob)
        except (TypeError, ValueError):
            raise SystemOutputError(
                f"{where} returned word {i} ({word!r}) without numeric start/end"
            ) from None
        if not (math.isfinite(fstart) and math.isfinite(fend)):
            raise SystemOutputError(f"{where} returned word {i} ({word!r}) with non-finite times")
        out.append(Word(word, fstart, fend, fprob))
    return out


def _excerpt(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
