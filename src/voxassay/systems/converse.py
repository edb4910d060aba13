"""The ``converse`` capability: one user turn in, one spoken (or written) reply out.

``converse(turn, history, mode) -> Reply``. ``mode`` ``"ao"``: the system hears the user's
audio (``turn.audio``); ``"to"``: it reads the transcript only (``turn.transcript``), the
same system otherwise. ``history``: the dialogue so far (scripted scenarios give earlier user
turns; the system's own earlier replies stay in it). ``turn.stressors`` say how the turn was
made (degradations, a hostile or hesitant speaker); a system under test is not meant to read
them, and the reference cascade does not (tested).

A ``Reply`` without audio is a text-only answer: scored on text, ``unscored`` on the audio
dimensions (never zero). ``first_audio_ms`` / ``total_ms``: the system's own timing, when it
can say (streaming APIs); the runner measures wall time itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from voxassay.core.errors import SystemOutputError

__all__ = ["MODES", "Conversant", "HistoryTurn", "Mode", "Reply", "Turn", "coerce_reply"]

Mode = Literal["ao", "to"]
MODES: tuple[Mode, ...] = ("ao", "to")

MAX_REPLY_S = 120.0
"""A reply longer than this is recorded as an error (a runaway generation), not scored."""


@dataclass(frozen=True)
class Turn:
    """The user's turn: mono float32 ``audio`` at ``sample_rate`` (what AO hears), the
    reference ``transcript`` (what TO reads: words only, fillers are words) and the
    ``stressors`` it was made with (for the record; not for the system)."""

    audio: np.ndarray
    sample_rate: int
    transcript: str
    stressors: tuple[str, ...] = ()


@dataclass(frozen=True)
class HistoryTurn:
    """An earlier turn: ``role`` user or assistant, its text, and its audio when spoken."""

    role: Literal["user", "assistant"]
    text: str
    audio: np.ndarray | None = None
    sample_rate: int | None = None


@dataclass
class Reply:
    """What the system answered: ``text`` (its transcript or written answer), ``audio`` (mono
    float32 at ``sample_rate``; None for a text-only answer), the system's own timings and
    anything else it reports (``info``)."""

    text: str
    audio: np.ndarray | None = None
    sample_rate: int | None = None
    first_audio_ms: float | None = None
    total_ms: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        if self.audio is None or not self.sample_rate:
            return 0.0
        return float(self.audio.size) / float(self.sample_rate)


@runtime_checkable
class Conversant(Protocol):
    """A system with the ``converse`` capability."""

    def load(self) -> None: ...

    def converse(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> Reply: ...

    def describe(self) -> dict[str, Any]: ...


def coerce_reply(value: Any, where: str = "system") -> Reply:
    """A ``Reply`` from what a system returned (a Reply, a str, or a dict with ``text`` and
    optionally ``audio``/``sample_rate``), checked: finite audio, a rate with audio, not
    longer than ``MAX_REPLY_S``."""
    if isinstance(value, str):
        return Reply(text=value)
    if isinstance(value, dict):
        value = Reply(
            text=str(value.get("text") or ""),
            audio=value.get("audio"),
            sample_rate=value.get("sample_rate"),
            first_audio_ms=value.get("first_audio_ms"),
            total_ms=value.get("total_ms"),
            info=dict(value.get("info") or {}),
        )
    if not isinstance(value, Reply):
        raise SystemOutputError(f"{where}: converse returned {type(value).__name__}, not a Reply")
    if value.audio is not None:
        audio = np.asarray(value.audio)
        if audio.dtype.kind == "i":
            audio = audio.astype(np.float32) / 32768.0
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        if not value.sample_rate or int(value.sample_rate) <= 0:
            raise SystemOutputError(f"{where}: a reply with audio needs its sample_rate")
        if audio.size and not np.all(np.isfinite(audio)):
            raise SystemOutputError(f"{where}: the reply's audio has NaN or infinite samples")
        value.audio = audio if audio.size else None
        value.sample_rate = int(value.sample_rate)
        if value.duration_s > MAX_REPLY_S:
            raise SystemOutputError(
                f"{where}: a {value.duration_s:.0f} s reply (over {MAX_REPLY_S:.0f} s): runaway"
            )
    value.text = str(value.text or "")
    return value


class CallableConversant:
    """A user object with ``.converse(turn, history, mode)`` (``load()``/``describe()`` used
    when present) or a callable ``f(turn, history, mode)``; answers go through
    ``coerce_reply``."""

    def __init__(
        self, obj: Any, target: str = "", options: dict[str, str] | None = None, spec: str = ""
    ) -> None:
        from voxassay.core.errors import InputError

        method = getattr(obj, "converse", None)
        if callable(method):
            self._call: Any = method
            self.kind = "object"
        elif callable(obj):
            self._call = obj
            self.kind = "callable"
        else:
            raise InputError(
                f"{target or 'factory'} returned {type(obj).__name__}, which has no converse() "
                "method and is not callable"
            )
        self.obj, self.target, self.spec = obj, target, spec
        self.options = dict(options or {})

    def load(self) -> None:
        loader = getattr(self.obj, "load", None) if self.kind == "object" else None
        if callable(loader):
            loader()

    def converse(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> Reply:
        return coerce_reply(self._call(turn, list(history), mode), self.target or "python system")

    def describe(self) -> dict[str, Any]:
        own = getattr(self.obj, "describe", None) if self.kind == "object" else None
        info: dict[str, Any] = {"backend": "python", "target": self.target, **self.options}
        if callable(own):
            extra = own()
            if isinstance(extra, dict):
                info.update(extra)
        return info
