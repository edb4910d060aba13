"""User turns as audio: the shipped renders (constructed prosody) or the user's recordings.

A render is constructed, and the report says so: piper (joe, generator noise off) speaks the
words phrase by phrase (split at , . ? !); the style (``STYLE_PROSODY``) sets the speaking
rate (piper ``length_scale``), the pitch (a resampling shift of ``pitch_st`` semitones,
its duration change undone by the length scale), the active speech level (``level_db``
dBFS) and the pause between phrases (``pause_ms``, on top of 120 ms; hesitant speech also
waits before it starts). Degradation stressors are applied after, seeded by the item id:
``degraded_noise`` (speech-shaped noise at 8 dB SNR through ``asr.conditions.mix_at_snr``),
``degraded_codec`` (``asr.conditions.telephone``: 8 kHz band-pass and G.711 mu-law),
``degraded_packet_loss`` (12 % of 20 ms frames zeroed, in bursts of one to three), and
``degraded_reverb`` (an exponentially decaying noise impulse response, RT60 0.7 s).
``neutral=True`` renders every item in the neutral style with the same degradations (the
control that shows a prosody-aware system answers the voice, not the words).

``--clips DIR``: ``DIR/<item id>.wav`` (and ``DIR/<scenario>.earlier-<k>.wav`` for scripted
turns) replace the renders one by one; degradations are not added to a recording.
Renders are cached by content (text, style, stressors, version) in ``cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR, Audio, load_audio, resample, write_wav
from voxassay.core.errors import InputError

__all__ = ["RENDER_VERSION", "STYLE_PROSODY", "RenderedTurn", "TurnRenderer"]

RENDER_VERSION = "sts-render-1"
VOICE = "piper?noise_scale=0&noise_w=0"


@dataclass(frozen=True)
class Prosody:
    rate: float  # > 1 faster
    pitch_st: float
    level_db: float  # active speech level, dBFS
    pause_ms: float  # added between phrases
    lead_ms: float = 0.0  # silence before the first word


STYLE_PROSODY: dict[str, Prosody] = {
    "neutral": Prosody(1.0, 0.0, -26.0, 0.0),
    "hesitant": Prosody(0.72, -1.0, -33.0, 650.0, lead_ms=500.0),
    "afraid": Prosody(1.12, 3.5, -31.0, 300.0),
    "upset": Prosody(0.95, -1.0, -28.0, 250.0),
    "angry": Prosody(1.18, 2.0, -19.0, 0.0),
    "urgent": Prosody(1.35, 2.0, -21.0, 0.0),
    "sad": Prosody(0.8, -3.0, -34.0, 450.0),
}
"""Constructed prosody per style: what a render changes (not a model of emotional speech)."""

PHRASE_GAP_MS = 120.0
_PHRASES = re.compile(r"[^,.?!;]+[,.?!;]*")


@dataclass(frozen=True)
class RenderedTurn:
    audio: np.ndarray  # float32 mono at TARGET_SR
    source: str  # "render" | "recording"
    info: dict[str, Any]


def _phrases(text: str) -> list[str]:
    return [p.strip() for p in _PHRASES.findall(text) if p.strip(" ,.?!;")]


def _shift_pitch(x: np.ndarray, sr: int, st: float) -> np.ndarray:
    """Raise the pitch by ``st`` semitones by resampling (shortens by the same factor)."""
    if st == 0:
        return x
    factor = 2.0 ** (st / 12.0)
    return resample(Audio(x, sr), round(sr / factor)).samples


def _set_level(x: np.ndarray, level_db: float) -> np.ndarray:
    from voxassay.suites.asr.conditions import active_speech_level

    now = active_speech_level(x, TARGET_SR)
    y = x * (10.0 ** ((level_db - now) / 20.0))
    peak = float(np.max(np.abs(y))) if y.size else 0.0
    return y * (0.89 / peak) if peak > 0.89 else y  # -1 dBFS ceiling


def _noise_like(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Stationary noise with the long-term spectrum of ``x`` (random phases)."""
    spec = np.abs(np.fft.rfft(x))
    phases = np.exp(2j * np.pi * rng.random(spec.size))
    return np.fft.irfft(spec * phases, n=x.size).astype(np.float32)


def _degrade(x: np.ndarray, stressors: tuple[str, ...], key: str) -> tuple[np.ndarray, list[str]]:
    from voxassay.suites.asr.conditions import item_rng, mix_at_snr, telephone

    applied: list[str] = []
    rng = item_rng(0, key)
    if "degraded_reverb" in stressors:
        n = round(0.7 * TARGET_SR)
        t = np.arange(n) / TARGET_SR
        ir = rng.standard_normal(n) * 10.0 ** (-3.0 * t / 0.7)  # -60 dB at RT60
        ir[0] = 1.0
        y = np.convolve(x, ir / np.sqrt(np.sum(ir**2)))[: x.size]
        x = y.astype(np.float32)
        applied.append("reverb RT60 0.7 s (synthetic impulse response)")
    if "degraded_noise" in stressors:
        noise = Audio(_noise_like(x, rng), TARGET_SR)
        x = mix_at_snr(Audio(x, TARGET_SR), noise, 8.0, rng).samples
        applied.append("speech-shaped noise at 8 dB SNR")
    if "degraded_codec" in stressors:
        x = telephone(Audio(x, TARGET_SR), "mulaw").samples
        applied.append("telephone band and G.711 mu-law")
    if "degraded_packet_loss" in stressors:
        frame = TARGET_SR // 50
        y = x.copy()
        k = 0
        while k * frame < y.size:
            if rng.random() < 0.12 / 2.0:  # bursts of 1-3 frames: 12 % of frames on average
                burst = int(rng.integers(1, 4))
                y[k * frame : (k + burst) * frame] = 0.0
                k += burst
            k += 1
        x = y
        applied.append("12 % of 20 ms frames lost in bursts")
    return x.astype(np.float32), applied


class TurnRenderer:
    """Renders (and caches) user turns; recordings from ``clips`` win (module docstring)."""

    def __init__(self, cache_dir: str | Path | None = None, clips: str | Path | None = None):
        self.cache = Path(cache_dir) if cache_dir else None
        self.clips = Path(clips) if clips else None
        if self.clips is not None and not self.clips.is_dir():
            raise InputError(f"--clips {self.clips}: not a folder")
        self._tts: Any = None

    def _voice(self) -> Any:
        if self._tts is None:
            from voxassay.core.registry import REGISTRY

            self._tts = REGISTRY.build("synthesize", VOICE)
            self._tts.load()
        return self._tts

    def _speak(self, text: str, prosody: Prosody) -> np.ndarray:
        factor = 2.0 ** (prosody.pitch_st / 12.0)
        scale = factor / prosody.rate  # the pitch shift shortens by ``factor``: pre-lengthen
        tts = self._voice().with_length_scale(scale)
        parts: list[np.ndarray] = [np.zeros(round(prosody.lead_ms * TARGET_SR / 1000), np.float32)]
        gap = np.zeros(round((PHRASE_GAP_MS + prosody.pause_ms) * TARGET_SR / 1000), np.float32)
        for i, phrase in enumerate(_phrases(text) or [text]):
            a = tts.synthesize(phrase)
            y = _shift_pitch(a.samples, a.sr, prosody.pitch_st)
            y = resample(Audio(y, a.sr), TARGET_SR).samples
            if i:
                parts.append(gap)
            parts.append(y.astype(np.float32))
        parts.append(np.zeros(TARGET_SR // 5, np.float32))
        return _set_level(np.concatenate(parts), prosody.level_db)

    def render(
        self,
        key: str,
        text: str,
        style: str,
        stressors: tuple[str, ...] = (),
        *,
        neutral: bool = False,
    ) -> RenderedTurn:
        """The turn ``key`` (an item id, or ``<scenario>.earlier-<k>``)."""
        if self.clips is not None:
            rec = self.clips / f"{key}.wav"
            if rec.is_file():
                a = load_audio(rec, sr=TARGET_SR)
                return RenderedTurn(a.samples, "recording", {"file": rec.name})
        used = "neutral" if neutral else style
        prosody = STYLE_PROSODY[used]
        spec = {"v": RENDER_VERSION, "text": text, "style": used, "stressors": sorted(stressors)}
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]
        cached = self.cache / f"{digest}.wav" if self.cache else None
        if cached is not None and cached.is_file():
            x = load_audio(cached, sr=TARGET_SR).samples
            applied = json.loads(cached.with_suffix(".json").read_text())["degradations"]
        else:
            x, applied = _degrade(self._speak(text, prosody), stressors, key)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                write_wav(cached, Audio(x, TARGET_SR))
                cached.with_suffix(".json").write_text(json.dumps({"degradations": applied}))
        info = {
            "constructed": True,
            "voice": VOICE,
            "style": used,
            "prosody": prosody.__dict__,
            "degradations": applied,
            "render_version": RENDER_VERSION,
        }
        return RenderedTurn(x, "render", info)
