"""Conformance checks for adapters: ``check_transcriber``, ``check_synthesizer`` and
``check_understander``, each ``(system) -> problems`` (an empty list means it conforms).

Use them in an adapter's own tests::

    from voxassay.systems.testing import check_synthesizer, check_transcriber
    assert check_transcriber("python:my_pkg.asr:make") == []
    assert check_synthesizer("python:my_pkg.tts:make") == []
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from voxassay.systems.base import Transcript, Word

__all__ = ["check_synthesizer", "check_transcriber", "check_understander", "speechlike_signal"]

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

    ``system`` is a Transcriber, a spec string (built through the registry), or anything
    the ``python:`` backend accepts from a factory (an object with ``transcribe(audio)``, a
    callable ``f(audio, sample_rate)``), wrapped the same way. The check
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
        try:
            system = _build("transcribe", system)
        except Exception as exc:
            return [f"building {system!r} failed: {type(exc).__name__}: {exc}"]
    declared = getattr(system, "sample_rate", None)  # before a wrapper defaults it
    system = _as_system(system, "transcribe")
    for attr in ("load", "transcribe", "describe"):
        if not callable(getattr(system, attr, None)):
            problems.append(f"missing method {attr}()")
    rate = getattr(system, "sample_rate", None) if declared is None else declared
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


def _as_system(system: Any, capability: str) -> Any:
    """``system`` as the ``python:`` backend would wrap it: an object or a plain callable
    that lacks the protocol's ``load``/``describe`` (a ``transcribe(audio)`` object, an
    ``f(audio, sample_rate)`` function) is wrapped like a factory's result; a full adapter,
    or something the wrapper refuses, is returned as it is (its problems are then listed)."""
    if all(callable(getattr(system, a, None)) for a in ("load", capability, "describe")):
        return system
    from voxassay.core.errors import InputError
    from voxassay.systems import python_callable as pc

    wrapper = {
        "transcribe": pc.CallableTranscriber,
        "synthesize": pc.CallableSynthesizer,
        "understand": pc.CallableUnderstander,
    }[capability]
    try:
        return wrapper(system, target=type(system).__name__, spec="python object")
    except InputError:
        return system


def _build(capability: str, spec: str) -> Any:
    from voxassay.core.registry import REGISTRY

    return REGISTRY.build(capability, spec)


def _build_and_load(system: Any, capability: str) -> tuple[Any, list[str]]:
    """``system`` (built from a spec string) after its ``load()``, or the problems that stop
    the check: the build or ``load()`` raised, or one of ``load``, the capability's method and
    ``describe`` is missing."""
    if isinstance(system, str):
        try:
            system = _build(capability, system)
        except Exception as exc:
            return system, [f"building {system!r} failed: {type(exc).__name__}: {exc}"]
    system = _as_system(system, capability)
    problems = [
        f"missing method {a}()"
        for a in ("load", capability, "describe")
        if not callable(getattr(system, a, None))
    ]
    if problems:
        return system, problems
    try:
        system.load()
    except Exception as exc:
        return system, [f"load() raised {type(exc).__name__}: {exc}"]
    return system, []


CHECK_TEXT = "Please call me back at five five five, one two three four, before noon."
_MAX_SECONDS_PER_CHAR = 0.5  # a very slow reader: 0.5 s per character is far beyond speech
_MIN_RATE, _MAX_RATE = 8_000, 192_000
_SILENT_DBFS = -60.0


def check_synthesizer(
    system: Any, text: str = CHECK_TEXT, *, voice: str | None = None, check_repeat: bool = False
) -> list[str]:
    """Exercise a synthesizer and return the problems found (an empty list means it conforms).

    ``system`` is a Synthesizer or a spec string (built through the registry). The check
    calls ``load()``, then ``synthesize(text, voice)`` and ``synthesize(text, voice,
    instructions=...)``, and checks each answer: a ``core.audio.Audio`` of mono float32
    samples, non-empty, all finite, within [-1, 1], not silent (RMS above -60 dBFS), at an
    integer rate in 8-192 kHz equal to ``system.sample_rate`` after the call, and lasting
    between 0.2 s and 0.5 s per character of ``text``; an empty text must raise (any
    exception), not return audio; ``describe()`` must be a JSON-serialisable dict without
    secret environment values. With ``check_repeat`` the plain call is made twice and must
    give identical samples (deterministic backends).
    """
    from voxassay.core.audio import Audio, rms_dbfs

    system, problems = _build_and_load(system, "synthesize")
    if problems:
        return problems
    calls: list[tuple[str, dict[str, Any]]] = [
        ("plain", {"voice": voice}),
        ("instructed", {"voice": voice, "instructions": "Say it calmly and slowly."}),
    ]
    if check_repeat:
        calls.append(("repeat", {"voice": voice}))
    outputs: dict[str, Any] = {}
    for name, kwargs in calls:
        try:
            audio = system.synthesize(text, **kwargs)
        except Exception as exc:
            problems.append(f"synthesize({name}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(audio, Audio):
            problems.append(f"synthesize({name}) returned {type(audio).__name__}, not Audio")
            continue
        outputs[name] = audio
        samples = np.asarray(audio.samples)
        sr = audio.sr
        if isinstance(sr, bool) or not isinstance(sr, int) or not _MIN_RATE <= sr <= _MAX_RATE:
            problems.append(f"synthesize({name}) sample rate {sr!r} is not an int in 8-192 kHz")
            continue
        declared = getattr(system, "sample_rate", None)
        if declared != sr:
            problems.append(
                f"synthesize({name}) audio is {sr} Hz but system.sample_rate is {declared!r}"
            )
        if samples.ndim != 1 or samples.dtype != np.float32:
            problems.append(
                f"synthesize({name}) samples are {samples.dtype} {samples.shape}, not mono float32"
            )
            continue
        if samples.size == 0:
            problems.append(f"synthesize({name}) returned no samples")
            continue
        if not np.all(np.isfinite(samples)):
            problems.append(f"synthesize({name}) returned NaN or infinite samples")
            continue
        peak = float(np.max(np.abs(samples)))
        if peak > 1.0:
            problems.append(f"synthesize({name}) peak {peak:.3f} exceeds full scale (1.0)")
        level = rms_dbfs(samples)
        if level < _SILENT_DBFS:
            problems.append(f"synthesize({name}) is silent ({level:.1f} dBFS RMS)")
        seconds = samples.size / sr
        low, high = 0.2, _MAX_SECONDS_PER_CHAR * len(text)
        if not low <= seconds <= high:
            problems.append(
                f"synthesize({name}) lasts {seconds:.2f} s for {len(text)} characters "
                f"(expected {low}-{high:.0f} s)"
            )
    if check_repeat and "plain" in outputs and "repeat" in outputs:
        a, b = outputs["plain"].samples, outputs["repeat"].samples
        if a.shape != b.shape or not np.array_equal(a, b):
            problems.append("synthesize(repeat) gave different samples for the same input")
    try:
        empty = system.synthesize("   ", voice=voice)
    except Exception:
        pass
    else:
        problems.append(
            f"synthesize(empty text) returned {type(empty).__name__} instead of raising"
        )
    problems.extend(_check_describe(system))
    return problems


CHECK_PROMPT = "How many audio clips did you receive? Answer with a number."


def check_understander(
    system: Any, audio_parts: list[Any] | None = None, prompt: str = CHECK_PROMPT
) -> list[str]:
    """Exercise an understander and return the problems found (empty list = conforms).

    ``system`` is an Understander or a spec string. The check calls ``load()``, then
    ``understand`` with one clip and with two clips (``audio_parts``, default: the
    speech-like test signal at 16 kHz and a 24 kHz copy of it), and checks each answer is a
    ``str``, the caller's clips are not modified, and ``describe()`` is a JSON-serialisable
    dict without secret environment values.
    """
    from voxassay.core.audio import Audio

    system, problems = _build_and_load(system, "understand")
    if problems:
        return problems
    if audio_parts is None:
        audio_parts = [
            Audio(speechlike_signal(16_000), 16_000),
            Audio(speechlike_signal(24_000, seconds=1.0), 24_000),
        ]
    for name, parts in (("one clip", audio_parts[:1]), ("all clips", list(audio_parts))):
        copies = [np.array(p.samples, copy=True) for p in parts]
        try:
            answer = system.understand(parts, prompt)
        except Exception as exc:
            problems.append(f"understand({name}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(answer, str):
            problems.append(f"understand({name}) returned {type(answer).__name__}, not str")
        if any(not np.array_equal(c, p.samples) for c, p in zip(copies, parts, strict=True)):
            problems.append(f"understand({name}) modified its input audio")
    problems.extend(_check_describe(system))
    return problems
