"""Deterministic test-double transcriber: ``mock[:MODE][?...]``.

Every answer is a function of the audio and the options only, so runs are repeatable:

- ``silence`` (default): always ``""``.
- ``fixed``: the option ``text`` (default ``""``).
- ``table`` (``mock:table:PATH``, or ``mock:PATH.json``): the JSON file maps :func:`audio_key` (SHA-1 of the float32
  samples) to a text (or a ``{"text", "words"}`` dict); unknown audio gets option ``default``.
  Build such a table with :func:`write_table` to make the mock "echo" references.
- ``garble``: returns a dict without text (not a ``Transcript``), breaking the protocol on
  purpose; callers' output coercion (``coerce_transcript``) must raise ``SystemOutputError``.
- ``fail``: raises ``RuntimeError("mock failure")``.
- ``hang``: sleeps ``seconds`` (default 3600) and then answers ``text``.

``fail_every=N`` makes every Nth call (N, 2N, ... counted per instance, warm-up calls
included) raise ``RuntimeError`` whatever the mode, for error-accounting tests.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from voxassay.core.errors import InputError, SpecError
from voxassay.core.specs import SystemSpec
from voxassay.systems.base import Transcript, coerce_transcript

__all__ = ["MODES", "MockTranscriber", "audio_key", "build", "write_table"]

MODES = ("silence", "fixed", "table", "garble", "fail", "hang")
_OPTIONS = {
    "silence": (),
    "fixed": ("text",),
    "table": ("default",),
    "garble": (),
    "fail": (),
    "hang": ("seconds", "text"),
}
_COMMON = ("fail_every",)
GARBLED: dict[str, Any] = {"garbage": [0xDEAD, 0xBEEF]}


def build(spec: SystemSpec, capability: str) -> MockTranscriber:
    """Registry factory for the mock transcriber."""
    if capability != "transcribe":
        raise SpecError(f"mock provides 'transcribe', not {capability!r}")
    mode = spec.target or "silence"
    table_path: str | None = None
    if mode.startswith("table:"):
        mode, table_path = "table", mode.partition(":")[2]
    elif mode not in MODES:
        if not mode.endswith(".json"):
            raise SpecError(f"unknown mock mode {mode!r}; modes: {', '.join(MODES)}")
        mode, table_path = "table", spec.target  # ``mock:PATH.json`` shorthand
    if mode == "table" and not table_path:
        table_path = spec.option("path")
    allowed = set(_OPTIONS[mode]) | set(_COMMON) | ({"path"} if mode == "table" else set())
    spec.check_options(allowed, f"mock {mode}")
    fail_every = spec.int_option("fail_every", 0, lo=0)
    seconds = spec.float_option("seconds", 3600.0, lo=0.0)
    if mode == "table" and not table_path:
        raise SpecError("mock table mode needs a JSON file: mock:table:PATH or mock:PATH.json")
    return MockTranscriber(
        mode,
        text=spec.option("text", "") or "",
        default=spec.option("default", "") or "",
        seconds=seconds,
        fail_every=fail_every,
        table_path=table_path,
        spec=spec.raw or f"mock:{mode}",
    )


def audio_key(audio: np.ndarray) -> str:
    """SHA-1 of the samples as little-endian float32 bytes (what ``transcribe`` receives)."""
    data = np.ascontiguousarray(np.asarray(audio, dtype="<f4"))
    return hashlib.sha1(data.tobytes()).hexdigest()


def write_table(path: str | Path, entries: Mapping[str, Any]) -> Path:
    """Write a ``table`` mode file: ``{audio_key: text or {"text", "words"}}``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(entries), indent=1, sort_keys=True), encoding="utf-8")
    return out


def _read_table(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"mock table file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"mock table {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"mock table {path} must be a JSON object {{sha1: text}}")
    return data


class MockTranscriber:
    """Answers by mode (see module docstring); counts calls for ``fail_every``."""

    sample_rate = 16_000

    def __init__(
        self,
        mode: str = "silence",
        text: str = "",
        default: str = "",
        seconds: float = 3600.0,
        fail_every: int = 0,
        table_path: str | None = None,
        spec: str = "",
    ) -> None:
        if mode not in MODES:
            raise SpecError(f"unknown mock mode {mode!r}; modes: {', '.join(MODES)}")
        self.mode = mode
        self.text = text
        self.default = default
        self.seconds = seconds
        self.fail_every = fail_every
        self.table_path = None if table_path is None else Path(table_path).expanduser()
        self.spec = spec or f"mock:{mode}"
        self.calls = 0
        self._lock = threading.Lock()
        self._table: dict[str, Any] | None = None
        if self.table_path is not None:
            self._table = _read_table(self.table_path)  # fail at build time, not per item

    def load(self) -> None:
        """Re-read the table (so a loaded mock sees the file as it is now)."""
        if self.table_path is not None:
            self._table = _read_table(self.table_path)

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Answer according to the mode (``fail`` and ``fail_every`` raise RuntimeError)."""
        with self._lock:
            self.calls += 1
            call = self.calls
        if self.fail_every and call % self.fail_every == 0:
            raise RuntimeError(f"mock failure (call {call}, fail_every={self.fail_every})")
        if self.mode == "fail":
            raise RuntimeError("mock failure")
        if self.mode == "hang":
            time.sleep(self.seconds)
            return Transcript(self.text)
        if self.mode == "fixed":
            return Transcript(self.text)
        if self.mode == "garble":
            # Deliberately breaks the protocol: the caller's output coercion must turn this
            # into an ``unparseable`` record (SystemOutputError), as for a real broken adapter.
            return cast(Transcript, dict(GARBLED))
        if self.mode == "table":
            key = audio_key(audio)
            table = self._table or {}
            if key in table:
                out = coerce_transcript(table[key], where=f"mock table {self.table_path}")
                out.extra["mock_table_hit"] = True
                return out
            return Transcript(self.default, extra={"mock_table_hit": False})
        return Transcript("")

    def describe(self) -> dict[str, Any]:
        """Mode and options (no call counts: describe is the configuration)."""
        info: dict[str, Any] = {"backend": "mock", "spec": self.spec, "mode": self.mode}
        if self.fail_every:
            info["fail_every"] = self.fail_every
        if self.mode in ("fixed", "hang"):
            info["text"] = self.text
        if self.mode == "hang":
            info["seconds"] = self.seconds
        if self.mode == "table":
            info["table"] = str(self.table_path)
            info["table_entries"] = len(self._table or {})
            info["default"] = self.default
        return info
