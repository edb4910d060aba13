"""eSpeak NG formant synthesis through its command-line binary: the ``synthesize`` capability.

Spec: ``espeak-ng[:VOICE][?speed=175&pitch=50&amplitude=100&word_gap=0&bin=PATH]``

* ``VOICE`` is an espeak-ng voice: a language (``en-us``, ``en-gb``, ``en-gb-scotland``)
  optionally with a variant (``en-us+f3``, ``en-us+m7``). Default ``en-us``. Variants
  change the voice (pitch, formants, breathiness) much more than the English regional
  voices do, which mostly change pronunciation rules.
* ``speed`` words per minute (80-450, default 175), ``pitch`` 0-99 (default 50),
  ``amplitude`` 0-200 (default 100), ``word_gap`` pause between words in 10 ms units.

The binary is run once per call (``--stdout`` WAV, text on standard input so text that
starts with ``-`` is not read as an option). Output is deterministic: the same text,
voice and options give the same samples. Missing binary -> ``BackendUnavailable`` with the
install hint. ``instructions`` are ignored (recorded in ``describe()``).
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import struct
import subprocess
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.core.errors import BackendUnavailable, InputError, SystemOutputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec, parse_spec

INSTALL_HINT = "apt-get install espeak-ng  (macOS: brew install espeak-ng)"
DEFAULT_VOICE = "en-us"
_TIMEOUT_S = 60.0


def find_espeak(binary: str | None = None) -> str | None:
    """Path of the espeak-ng binary (``binary``, ``$VOXASSAY_ESPEAK``, then PATH), or None."""
    for candidate in (binary, os.environ.get("VOXASSAY_ESPEAK"), "espeak-ng"):
        if not candidate:
            continue
        path = shutil.which(candidate)
        if path:
            return path
    return None


def require_espeak(binary: str | None = None) -> str:
    """Like :func:`find_espeak` but raises ``BackendUnavailable`` with the install hint."""
    path = find_espeak(binary)
    if path is None:
        where = f" ({binary!r} not found)" if binary else ""
        raise BackendUnavailable(f"espeak-ng binary not found{where}: {INSTALL_HINT}")
    return path


@functools.lru_cache(maxsize=8)
def espeak_version(binary: str) -> str:
    """The first line of ``espeak-ng --version`` (e.g. ``eSpeak NG text-to-speech: 1.51 ...``)."""
    out = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )
    line = (out.stdout or out.stderr).strip().splitlines()
    return line[0].split("  Data at:")[0].strip() if line else "unknown"


@functools.lru_cache(maxsize=8)
def list_voices(binary: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(voices, variants)`` known to this espeak-ng, lower-cased.

    Voices are language codes, voice names and voice file names; variants are the names
    usable after ``+`` (file names under ``!v/``).
    """

    def table(arg: str) -> list[list[str]]:
        out = subprocess.run(
            [binary, arg], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
        rows = [ln.split() for ln in out.stdout.splitlines()[1:]]
        return [r for r in rows if len(r) >= 5]

    voices: set[str] = set()
    for row in table("--voices"):
        voices.update({row[1].lower(), row[3].lower(), row[4].lower()})
        voices.add(row[4].rsplit("/", 1)[-1].lower())
    variants: set[str] = set()
    for row in table("--voices=variant"):
        file_name = " ".join(row[4:]).split("(")[0].strip()
        variants.add(file_name.removeprefix("!v/").lower())
        variants.add(row[3].lower())
    return frozenset(voices), frozenset(variants)


def parse_wav_stream(data: bytes) -> Audio:
    """Decode the 16-bit PCM WAV espeak-ng writes to stdout.

    When streaming, espeak-ng writes placeholder RIFF/data sizes (about 2 GiB), so the
    ``data`` chunk is taken to run to the end of the bytes actually received.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise SystemOutputError("espeak-ng did not write a WAV stream")
    pos, sr, channels, bits = 12, 0, 0, 0
    while pos + 8 <= len(data):
        chunk_id = data[pos : pos + 4]
        size = struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = pos + 8
        if chunk_id == b"fmt ":
            fmt, channels, sr = struct.unpack("<HHI", data[body : body + 8])
            bits = struct.unpack("<H", data[body + 14 : body + 16])[0]
            if fmt != 1 or bits != 16:
                raise SystemOutputError(f"espeak-ng WAV format {fmt}/{bits} bit is not PCM16")
        elif chunk_id == b"data":
            if not sr:
                raise SystemOutputError("espeak-ng WAV has no fmt chunk before data")
            payload = data[body : min(len(data), body + size)]
            payload = payload[: len(payload) - len(payload) % (2 * channels)]
            pcm = np.frombuffer(payload, dtype="<i2").astype(np.float32) / 32768.0
            if channels > 1:
                pcm = pcm.reshape(-1, channels).mean(axis=1)
            return Audio(pcm.astype(np.float32, copy=False), int(sr))
        pos = body + size + (size & 1)
    raise SystemOutputError("espeak-ng WAV stream has no data chunk")


class EspeakSynthesizer:
    """espeak-ng behind the ``synthesize`` capability (see the module docstring)."""

    def __init__(self, spec: SystemSpec) -> None:
        spec.check_options(options_of("espeak-ng", "synthesize"), "espeak-ng")
        self.spec = spec
        self.binary = require_espeak(spec.option("bin"))
        self.voice = (spec.target or DEFAULT_VOICE).strip()
        self.speed = spec.int_option("speed", 175, 80, 450)
        self.pitch = spec.int_option("pitch", 50, 0, 99)
        self.amplitude = spec.int_option("amplitude", 100, 0, 200)
        self.word_gap = spec.int_option("word_gap", 0, 0, 1000)
        self.sample_rate = 22050  # what espeak-ng writes; confirmed from each WAV header
        self.check_voice(self.voice)

    def check_voice(self, voice: str) -> None:
        """Raise ``InputError`` (with near names) when espeak-ng does not know ``voice``."""
        voices, variants = list_voices(self.binary)
        base, _, variant = voice.partition("+")
        if base.lower() not in voices:
            near = difflib.get_close_matches(base.lower(), sorted(voices), n=4, cutoff=0.6)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise InputError(f"espeak-ng has no voice {base!r}.{hint} (see espeak-ng --voices)")
        if variant and variant.lower() not in variants:
            near = difflib.get_close_matches(variant.lower(), sorted(variants), n=4, cutoff=0.5)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise InputError(
                f"espeak-ng has no variant {variant!r}.{hint} (see espeak-ng --voices=variant)"
            )

    def load(self) -> None:
        """Nothing to load; checks the binary still runs."""
        espeak_version(self.binary)

    def command(self, voice: str) -> list[str]:
        """The argument list run for one call (text goes to standard input)."""
        cmd = [self.binary, "--stdout", "--stdin", "-b", "1", "-v", voice]
        cmd += ["-s", str(self.speed), "-p", str(self.pitch), "-a", str(self.amplitude)]
        if self.word_gap:
            cmd += ["-g", str(self.word_gap)]
        return cmd

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        """Speak ``text`` with ``voice`` (default: the spec's voice); mono float32, 22,050 Hz.

        ``instructions`` are ignored.
        """
        del instructions
        if not text or not text.strip():
            raise InputError("espeak-ng: nothing to say (empty text)")
        use_voice = voice.strip() if voice else self.voice
        if use_voice != self.voice:
            self.check_voice(use_voice)
        proc = subprocess.run(
            self.command(use_voice),
            input=text.encode("utf-8"),
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise SystemOutputError(f"espeak-ng failed (exit {proc.returncode}): {err}")
        audio = parse_wav_stream(proc.stdout)
        if audio.samples.size == 0:
            raise SystemOutputError(f"espeak-ng produced no audio for {text!r}")
        return audio

    def describe(self) -> dict[str, Any]:
        """What goes into ``run.json``: binary, version, voice and settings."""
        return {
            "backend": "espeak-ng",
            "capability": "synthesize",
            "spec": self.spec.raw,
            "binary": self.binary,
            "version": espeak_version(self.binary),
            "voice": self.voice,
            "speed_wpm": self.speed,
            "pitch": self.pitch,
            "amplitude": self.amplitude,
            "word_gap_10ms": self.word_gap,
            "sample_rate": self.sample_rate,
            "deterministic": True,
            "instructions": "ignored: espeak-ng has no instruction control",
        }


def build(spec: SystemSpec | str, capability: str = "synthesize") -> EspeakSynthesizer:
    """Registry factory: ``build(spec, "synthesize")``; ``BackendUnavailable`` without espeak-ng."""
    if capability != "synthesize":
        raise InputError(f"espeak-ng provides 'synthesize', not {capability!r}")
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    return EspeakSynthesizer(parsed)


__all__ = [
    "DEFAULT_VOICE",
    "EspeakSynthesizer",
    "build",
    "espeak_version",
    "find_espeak",
    "list_voices",
    "parse_wav_stream",
    "require_espeak",
]
