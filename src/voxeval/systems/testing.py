"""Conformance check for transcriber adapters: ``check_transcriber(system) -> problems``.

Use it in an adapter's own tests::

    from voxeval.systems.testing import check_transcriber
    assert check_transcriber("python:my_pkg.asr:make") == []
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from voxeval.systems.base import Transcript, Word

__all__ = ["check_transcriber", "speechlike_signal"]

_TIME_TOLERANCE_S = 0.05
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def speechlike_signal(sample_rate: int = 16_000, seconds: float = 1.5) -> np.ndarray:
    """A deterministic vowel-like test signal: a 110-140 Hz harmonic source shaped by three
    formant peaks, with 4 Hz syllable-rate amplitude modulation; peak 0.3 (about -24 dBFS RMS)."""
    t = np.arange(int(sample_rate * seconds)) / sample_rate
    f0 = 125.0 + 15.0 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    formants = ((700.0, 130.0), (1220.0, 70.0), (2600.0, 160.0))
    signal = np.zeros_like(t)
    for k in range(1, int(4000 / 140)):
        freq = k * 125.0
        gain = sum(1.0 / (1.0 + ((freq - fc) / bw) ** 2) for fc, bw in formants)
        signal += gain / k * np.sin(k * phase)
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 4.0 * t))
    signal *= envelope
    peak = float(np.max(np.abs(signal))) or 1.0
    return (0.3 * signal / peak).astype(np.float32)


def check_transcriber(
    system: Any, audio: np.ndarray | None = None, *, check_repeat: bool = False
) -> list[str]:
    """Exercise a transcriber and return the problems found (an empty list means it conforms).

    ``system`` is a Transcriber or a spec string (built through the registry). The check
    calls ``load()``, transcribes 1 s of digital silence and ``audio`` (mono float32 at the
    system's rate; a synthetic vowel-like signal when omitted), and checks: a
    :class:`Transcript` with ``str`` text, words with finite non-decreasing times inside the
    audio, JSON-serialisable output and ``describe()``, unmodified input arrays, and no
    value of a ``*KEY*``/``*TOKEN*``/``*SECRET*``/``*PASSWORD*`` environment variable in
    ``describe()``. With ``check_repeat`` each input is transcribed twice and must give the
    same output.
    """
    problems: list[str] = []
    if isinstance(system, str):
        from voxeval.core.registry import REGISTRY

        try:
            system = REGISTRY.build("transcribe", system)
        except Exception as exc:
            return [f"building {system!r} failed: {type(exc).__name__}: {exc}"]
    for attr in ("load", "transcribe", "describe"):
        if not callable(getattr(system, attr, None)):
            problems.append(f"missing method {attr}()")
    rate = getattr(system, "sample_rate", None)
    if not isinstance(rate, int) or isinstance(rate, bool) or rate <= 0:
        problems.append(f"sample_rate must be a positive int, got {rate!r}")
        rate = 16_000
    if problems:
        return problems
    try:
        system.load()
    except Exception as exc:
        return [f"load() raised {type(exc).__name__}: {exc}"]

    signals = {"silence_1s": np.zeros(rate, dtype=np.float32)}
    if audio is None:
        signals["speechlike"] = speechlike_signal(rate)
    else:
        given = np.asarray(audio)
        if given.ndim != 1 or given.dtype != np.float32:
            return [f"check audio must be mono float32, got {given.dtype} {given.shape}"]
        signals["audio"] = given
    for name, samples in signals.items():
        problems.extend(_check_one(system, name, samples, rate, check_repeat))
    problems.extend(_check_describe(system))
    return problems


def _check_one(system: Any, name: str, samples: np.ndarray, rate: int, repeat: bool) -> list[str]:
    problems: list[str] = []
    duration = samples.shape[0] / rate
    outputs: list[dict[str, Any]] = []
    for _ in range(2 if repeat else 1):
        arg = samples.copy()
        try:
            result = system.transcribe(arg)
        except Exception as exc:
            return [f"transcribe({name}) raised {type(exc).__name__}: {exc}"]
        if not np.array_equal(arg, samples):
            problems.append(f"transcribe({name}) modified its input array")
        if not isinstance(result, Transcript):
            return [f"transcribe({name}) returned {type(result).__name__}, not Transcript"]
        if not isinstance(result.text, str):
            return [f"transcribe({name}) text is {type(result.text).__name__}, not str"]
        if result.language is not None and not isinstance(result.language, str):
            problems.append(f"transcribe({name}) language is {type(result.language).__name__}")
        if result.words is not None:
            problems.extend(_check_words(name, result.words, duration))
        try:
            outputs.append(json.loads(json.dumps(result.to_output(), allow_nan=False)))
        except (TypeError, ValueError) as exc:
            problems.append(f"transcribe({name}) output is not JSON-serialisable: {exc}")
    if repeat and len(outputs) == 2:
        first, second = ({k: v for k, v in o.items() if k != "extra"} for o in outputs)
        if first != second:
            problems.append(f"transcribe({name}) gave different output on a repeat call")
    return problems


def _check_words(name: str, words: Any, duration: float) -> list[str]:
    if not isinstance(words, list):
        return [f"transcribe({name}) words is {type(words).__name__}, not a list"]
    problems: list[str] = []
    previous = 0.0
    for i, w in enumerate(words):
        if not isinstance(w, Word):
            problems.append(f"transcribe({name}) word {i} is {type(w).__name__}, not Word")
            continue
        if not isinstance(w.word, str):
            problems.append(f"transcribe({name}) word {i} text is not str")
        try:
            start, end = float(w.start), float(w.end)
        except (TypeError, ValueError):
            problems.append(f"transcribe({name}) word {i} ({w.word!r}) has non-numeric times")
            continue
        if not (math.isfinite(start) and math.isfinite(end)):
            problems.append(f"transcribe({name}) word {i} ({w.word!r}) has non-finite times")
            continue
        if end < start:
            problems.append(f"transcribe({name}) word {i} ({w.word!r}) ends before it starts")
        if start < previous:
            problems.append(
                f"transcribe({name}) word {i} ({w.word!r}) starts at {start:.3f}s, before the "
                f"previous word ({previous:.3f}s): times must be non-decreasing"
            )
        if start < 0 or end > duration + _TIME_TOLERANCE_S:
            problems.append(
                f"transcribe({name}) word {i} ({w.word!r}) at {start:.3f}-{end:.3f}s is outside "
                f"the audio (0-{duration:.3f}s)"
            )
        if w.prob is not None and not (isinstance(w.prob, int | float) and 0.0 <= w.prob <= 1.0):
            problems.append(
                f"transcribe({name}) word {i} ({w.word!r}) prob {w.prob!r} not in [0, 1]"
            )
        previous = max(previous, start)
    return problems


def _check_describe(system: Any) -> list[str]:
    try:
        info = system.describe()
    except Exception as exc:
        return [f"describe() raised {type(exc).__name__}: {exc}"]
    if not isinstance(info, dict):
        return [f"describe() returned {type(info).__name__}, not dict"]
    try:
        dumped = json.dumps(info, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return [f"describe() is not JSON-serialisable: {exc}"]
    leaked = [
        name
        for name, value in os.environ.items()
        if any(m in name.upper() for m in _SECRET_MARKERS) and len(value) >= 8 and value in dumped
    ]
    if leaked:
        return [
            f"describe() contains the value of secret environment variable(s) {', '.join(sorted(leaked))}"
        ]
    return []
