"""Render a scenario's segments to audio, deterministically.

``render_segments(scenario, scenario_dir)`` returns one mono float32 array per segment id at
``sample_rate`` (the driver plays them into the agent's input). Sources:

* ``say`` + ``voice``: synthesized with the voice spec (``piper``, ``espeak-ng:en-gb+m3``)
  through the registry's ``synthesize`` backends, resampled with soxr, trimmed to its speech
  edges (10 ms frames within ``EDGE_MARGIN_DB`` of the loudest frame, ``EDGE_PAD_MS`` kept on
  each side, 5 ms fades) and scaled to an active speech level of ``REFERENCE_LEVEL_DBFS``.
* ``audio``: the file (relative to the scenario file) at its native rate, cut to
  ``[start_ms, end_ms)``, resampled; played as recorded (no level change).
* ``generate``: an ambient sound of exactly ``duration_ms`` (see :func:`generate_sound`),
  scaled to the same reference active level.
* ``clips``: the user's own recordings replace ``say`` (and ``generate``) segments: a folder
  holding ``<scenario_id>/<segment_id>.wav`` (any format ``load_audio`` reads) or a mapping
  ``{segment_id | "scenario_id/segment_id": path | Audio}``. A clip is trimmed and levelled
  like synthesized speech, so the scenario's ``gain_db`` keeps its meaning.

``gain_db`` is applied last: every say/clip/generate segment sits ``gain_db`` dB from a talker
at the reference level (a bystander at ``-18`` is 18 dB under the user).

Determinism. The same scenario gives bit-identical samples: piper is seeded per call by its
adapter, espeak-ng is deterministic, generated sounds draw from ``numpy`` generators seeded by
(kind, seed). With ``cache_dir`` the synthesized speech is kept as ``.npy`` under a key that
hashes the text, voice spec, synthesizer identity (versions, model size, settings), sample rate
and ``RENDER_VERSION``; a cache hit returns the samples that were stored.

A missing synthesizer raises ``BackendUnavailable`` naming the install step (and the clips
alternative). Generated TV, chatter and echo fall back to speech-shaped noise when their
synthesizer is missing; the segment's ``detail`` records the fallback.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.contracts.duplex.scenario import Generate, GenerateKind, Scenario, Segment
from voxassay.core.audio import Audio, load_audio, resample
from voxassay.core.errors import AudioError, BackendUnavailable, InputError

__all__ = [
    "AUDIO_EXTENSIONS",
    "REFERENCE_LEVEL_DBFS",
    "RENDER_VERSION",
    "RenderedSegment",
    "SpeechRenderer",
    "default_cache_dir",
    "generate_sound",
    "render_scenario",
    "render_segments",
    "render_to_folder",
]

RENDER_VERSION = "1"
"""Bumped whenever rendering changes the samples (part of every cache key and index)."""
REFERENCE_LEVEL_DBFS = -26.0
"""Active speech level of a say/clip/generate segment before its gain_db."""
EDGE_MARGIN_DB = 40.0
EDGE_FLOOR_DBFS = -70.0
EDGE_PAD_MS = 30
FADE_MS = 5
AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".mp3", ".m4a", ".opus")

Clips = str | Path | Mapping[str, str | Path | Audio]
_Made = tuple[np.ndarray, dict[str, Any]]


@dataclass
class RenderedSegment:
    """One rendered segment: samples at the render rate, where they came from, and how."""

    segment_id: str
    samples: np.ndarray
    source: str
    """say, audio, generate or clip."""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        rate = int(self.detail.get("sample_rate") or 0)
        return 1000.0 * self.samples.size / rate if rate else 0.0


# --------------------------------------------------------------------------- levels, edges


def _frame_power(x: np.ndarray, n: int) -> np.ndarray:
    frames = x[: (x.size // n) * n].astype(np.float64).reshape(-1, n)
    out: np.ndarray = np.mean(frames**2, axis=1)
    return out


def active_level_dbfs(x: np.ndarray, sr: int) -> float:
    """Active level: mean power of the 20 ms frames within 30 dB of the 95th percentile."""
    from voxassay.suites.asr.conditions import active_speech_level

    return float(active_speech_level(x, sr))


def _set_level(x: np.ndarray, sr: int, level_dbfs: float) -> np.ndarray:
    from voxassay.suites.asr.conditions import active_speech_power

    p = active_speech_power(x, sr)
    if p <= 0:
        raise AudioError("cannot level silent audio", kind="silent")
    out: np.ndarray = x * np.sqrt(10 ** (level_dbfs / 10.0) / p)
    return out


def _fade(x: np.ndarray, sr: int, ms: float = FADE_MS) -> np.ndarray:
    n = min(x.size // 2, round(ms * sr / 1000))
    if n > 1:
        ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, n))
        x = x.copy()
        x[:n] *= ramp
        x[-n:] *= ramp[::-1]
    return x


def trim_to_speech(x: np.ndarray, sr: int) -> np.ndarray:
    """Cut leading and trailing silence: keep from ``EDGE_PAD_MS`` before the first 10 ms frame
    within ``EDGE_MARGIN_DB`` of the loudest one (and above ``EDGE_FLOOR_DBFS``) to the same
    margin after the last; 5 ms raised-cosine fades. Silent input is returned unchanged."""
    n = max(1, sr // 100)
    if x.size < n:
        return x
    p = _frame_power(x, n)
    peak = float(p.max())
    if peak <= 0:
        return x
    threshold = max(peak * 10 ** (-EDGE_MARGIN_DB / 10), 10 ** (EDGE_FLOOR_DBFS / 10))
    idx = np.flatnonzero(p >= threshold)
    if idx.size == 0:
        return x
    pad = round(EDGE_PAD_MS * sr / 1000)
    start = max(0, int(idx[0]) * n - pad)
    end = min(x.size, (int(idx[-1]) + 1) * n + pad)
    return _fade(x[start:end], sr)


def _gain(x: np.ndarray, gain_db: float) -> np.ndarray:
    if gain_db == 0:
        return x
    out: np.ndarray = x * np.float64(10 ** (gain_db / 20.0))
    return out


# --------------------------------------------------------------------------- speech


def default_cache_dir() -> Path:
    """``$VOXASSAY_CACHE/render``, else ``$XDG_CACHE_HOME/voxassay/render`` (``~/.cache``)."""
    root = os.environ.get("VOXASSAY_CACHE")
    if root:
        return Path(root).expanduser() / "render"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "voxassay" / "render"


_SYNTHS: dict[str, Any] = {}
_UNSTABLE_DESCRIBE_KEYS = {"binary", "model_path", "spec"}


def _synthesizer(spec: str) -> Any:
    """A (process-wide, reused) synthesizer for ``spec``; missing ones raise with the hint."""
    if spec not in _SYNTHS:
        from voxassay.core.registry import REGISTRY

        _SYNTHS[spec] = REGISTRY.build("synthesize", spec)
    return _SYNTHS[spec]


def _synth_identity(synth: Any) -> dict[str, Any]:
    """What decides the samples besides the text: versions, model size, settings."""
    try:
        desc = dict(synth.describe())
    except Exception:  # a third-party synthesizer without describe()
        return {"class": type(synth).__qualname__}
    return {k: v for k, v in desc.items() if k not in _UNSTABLE_DESCRIBE_KEYS}


class SpeechRenderer:
    """Text + voice spec -> samples at ``sample_rate``, through a content-keyed cache."""

    def __init__(self, sample_rate: int = 16_000, cache_dir: str | Path | None = None) -> None:
        self.sample_rate = int(sample_rate)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self.hits = 0
        self.misses = 0

    def available(self, spec: str) -> bool:
        """True when ``spec`` can be synthesized here (the synthesizer builds)."""
        try:
            _synthesizer(spec)
        except (BackendUnavailable, InputError):
            return False
        return True

    def key(self, text: str, spec: str) -> tuple[str, dict[str, Any]]:
        ident = _synth_identity(_synthesizer(spec))
        body = {
            "render_version": RENDER_VERSION,
            "text": text,
            "voice": spec,
            "synthesizer": ident,
            "sample_rate": self.sample_rate,
        }
        blob = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest(), ident

    def speak(self, text: str, spec: str) -> tuple[np.ndarray, dict[str, Any]]:
        """Raw synthesized speech at ``sample_rate`` (untrimmed, unlevelled) and its detail."""
        key, ident = self.key(text, spec)
        detail: dict[str, Any] = {"voice": spec, "text": text, "cache_key": key[:16]}
        detail["synthesizer"] = ident.get("backend") or ident.get("class")
        path = self.cache_dir / key[:2] / f"{key}.npy" if self.cache_dir else None
        if path is not None and path.is_file():
            try:
                cached = np.load(path, allow_pickle=False)
                self.hits += 1
                return cached.astype(np.float32, copy=False), {**detail, "cache": "hit"}
            except (OSError, ValueError):
                pass  # a torn or foreign file: synthesize again and overwrite it
        audio = _synthesizer(spec).synthesize(text)
        samples = resample(Audio(audio.samples, int(audio.sr)), self.sample_rate).samples
        samples = np.ascontiguousarray(samples, dtype=np.float32)
        self.misses += 1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # one temporary name per process *and* thread: two runs of one process render
            # the same line at once (they used to share the name; one rename then failed)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.npy")
            np.save(tmp, samples, allow_pickle=False)
            os.replace(tmp, path)
        return samples, {**detail, "cache": "miss" if path is not None else "off"}


def _missing_voice(scenario: Scenario, seg: Segment, spec: str, exc: Exception) -> Exception:
    return BackendUnavailable(
        f"cannot render segment {seg.id!r} of scenario {scenario.id!r}: voice {spec!r} is "
        f"unavailable ({exc}). Install it, or record the segment yourself and pass it as a "
        f"clip (--clips DIR with DIR/{scenario.id}/{seg.id}.wav)"
    )


# --------------------------------------------------------------------------- generated sounds

TV_LINES = (
    "Good evening, and welcome to the news at six.",
    "Heavy rain is expected across the region this weekend.",
    "The city council approved the new budget on Tuesday night.",
    "After the break, our chef shows you three summer salads.",
    "Stay with us for the late movie, starting at eleven.",
    "Scores from tonight's game are coming up next.",
    "Traffic is slow on the bridge because of road works.",
    "And now, a look at the markets.",
)
CHATTER_LINES = (
    "Did you see the game last night?",
    "I think we should leave at five.",
    "She said the train was late again.",
    "Can you pass me the water?",
    "We ran out of milk this morning.",
    "That new place downtown is really good.",
    "I'll call my sister after lunch.",
    "Where did you put the car keys?",
    "It was much colder than I expected.",
    "He's bringing the kids on Sunday.",
)
ECHO_LINES = (
    "We are open Monday to Friday from eight in the morning to six in the evening.",
    "Our cancellation policy asks for twenty four hours notice.",
    "Let me check that for you.",
)
TV_VOICES = ("espeak-ng:en-gb+m7", "espeak-ng:en-us+f2", "espeak-ng:en-gb-x-rp+m4")
CHATTER_VOICES = (
    "espeak-ng:en-us+m3",
    "espeak-ng:en-gb+f4",
    "espeak-ng:en-us+m6",
    "espeak-ng:en-gb-scotland+f5",
)
ECHO_VOICE = "piper"


def _rng(gen: Generate, salt: int = 0) -> np.random.Generator:
    kind = zlib.crc32(str(gen.kind).encode()) & 0xFFFFFFFF
    return np.random.default_rng([int(gen.seed) & 0xFFFFFFFF, kind, salt])


def _bandpass(x: np.ndarray, sr: int, lo: float, hi: float, order: int = 2) -> np.ndarray:
    from scipy.signal import butter, sosfilt

    hi = min(hi, 0.45 * sr)
    sos = butter(order, [lo, hi], btype="bandpass", fs=sr, output="sos")
    out: np.ndarray = sosfilt(sos, x)
    return out


def _room(x: np.ndarray, sr: int, rng: np.random.Generator, rt_s: float, wet: float) -> np.ndarray:
    """A small room: an exponentially decaying noise impulse response mixed in (``wet``)."""
    from scipy.signal import fftconvolve

    n = max(1, int(rt_s * sr))
    ir = rng.standard_normal(n) * np.exp(-np.arange(n) / (rt_s * sr / 6.9))
    ir /= np.sqrt(np.sum(ir**2)) or 1.0
    out: np.ndarray = (1.0 - wet) * x + wet * fftconvolve(x, ir)[: x.size]
    return out


def _speech_shaped_noise(n: int, sr: int, rng: np.random.Generator, rate_hz: float) -> np.ndarray:
    """Noise with a long-term speech spectrum (-6 dB/oct above 500 Hz), syllable-modulated."""
    from scipy.signal import lfilter

    white = rng.standard_normal(n)
    pinkish = lfilter([1.0], [1.0, -0.95], white)
    shaped = _bandpass(pinkish, sr, 120.0, 5000.0)
    t = np.arange(n) / sr
    phase = rng.uniform(0, 2 * np.pi)
    wobble = 0.55 + 0.45 * np.sin(2 * np.pi * rate_hz * t + phase) ** 2
    out: np.ndarray = shaped * wobble
    return out


def _lines_to_length(
    speech: SpeechRenderer,
    lines: list[str],
    voices: list[str],
    n: int,
    sr: int,
    rng: np.random.Generator,
    gap_s: tuple[float, float],
) -> np.ndarray:
    """Sentences one after another (voices in turn, ``gap_s`` pauses) until ``n`` samples."""
    out = np.zeros(n)
    pos = int(rng.uniform(0.0, 0.3) * sr)
    k = 0
    while pos < n:
        text = lines[k % len(lines)]
        raw, _ = speech.speak(text, voices[k % len(voices)])
        clip = trim_to_speech(raw.astype(np.float64), sr)
        if clip.size and np.any(clip):
            clip = _set_level(clip, sr, REFERENCE_LEVEL_DBFS)
        seg = clip[: n - pos]
        out[pos : pos + seg.size] += seg
        pos += clip.size + int(rng.uniform(*gap_s) * sr)
        k += 1
    return out


def _spoken(
    gen: Generate,
    speech: SpeechRenderer | None,
    voices: tuple[str, ...],
) -> tuple[list[str], str | None]:
    """Voices to use, or the reason to fall back to speech-shaped noise."""
    wanted = [gen.voice] if gen.voice else list(voices)
    if speech is None:
        return [], "no speech renderer"
    usable = [v for v in wanted if speech.available(v)]
    if not usable:
        return [], f"no synthesizer for {', '.join(wanted)}"
    return usable, None


def _gen_tv(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    rng = _rng(gen)
    voices, why = _spoken(gen, speech, TV_VOICES)
    info: dict[str, Any] = {}
    if why or speech is None:
        talk = _speech_shaped_noise(n, sr, rng, 3.5)
        info["fallback"] = f"speech-shaped noise ({why})"
    else:
        lines = [gen.text] if gen.text else list(rng.permutation(TV_LINES))
        talk = _lines_to_length(speech, lines, voices, n, sr, rng, (0.25, 0.6))
        info["voices"] = voices
    from voxassay.suites.asr.music import render_music

    bed = render_music(n / sr + 0.05, sr, seed=gen.seed, style="strings", renderer="builtin")
    mix = talk + 10 ** (-20 / 20) * bed.samples[:n].astype(np.float64)
    # a TV loudspeaker across the room: band-limited, some room sound
    out = _room(_bandpass(mix, sr, 180.0, 6000.0), sr, rng, 0.35, 0.3)
    return out, info


def _gen_chatter(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    rng = _rng(gen)
    voices, why = _spoken(gen, speech, CHATTER_VOICES)
    info: dict[str, Any] = {}
    total = np.zeros(n)
    talkers = 3
    for i in range(talkers):
        sub = np.random.default_rng([int(gen.seed), 7919, i])
        if why or speech is None:
            stream = _speech_shaped_noise(n, sr, sub, 3.0 + i)
        else:
            order = [CHATTER_LINES[int(j)] for j in sub.permutation(len(CHATTER_LINES))]
            lines = [gen.text] if gen.text else order
            voice = [voices[(i + int(gen.seed)) % len(voices)]]
            stream = _lines_to_length(speech, lines, voice, n, sr, sub, (0.3, 1.2))
        total += stream
    if why:
        info["fallback"] = f"speech-shaped noise ({why})"
    else:
        info["voices"] = voices
    info["talkers"] = talkers
    return _room(total, sr, rng, 0.5, 0.35), info


def _gen_echo(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    """The agent's own voice coming back: loudspeaker band, 50-70 ms delay, a few reflections,
    a diffuse tail and slight loudspeaker saturation."""
    from scipy.signal import fftconvolve

    rng = _rng(gen)
    voices, why = _spoken(gen, speech, (ECHO_VOICE,))
    info: dict[str, Any] = {}
    if why or speech is None:
        dry = _speech_shaped_noise(n, sr, rng, 4.0)
        info["fallback"] = f"speech-shaped noise ({why})"
    else:
        text = gen.text or ECHO_LINES[gen.seed % len(ECHO_LINES)]
        raw, _ = speech.speak(text, voices[0])
        dry = np.zeros(n)
        clip = trim_to_speech(raw.astype(np.float64), sr)[:n]
        dry[: clip.size] = clip
        info["voice"], info["text"] = voices[0], text
    delay_ms = float(rng.uniform(50.0, 70.0))
    taps = [(delay_ms, 1.0), (delay_ms + rng.uniform(25, 40), 0.5), (delay_ms + 90, 0.3)]
    length = int((delay_ms + 260) * sr / 1000)
    ir = np.zeros(length)
    for ms, g in taps:
        ir[int(ms * sr / 1000)] += g
    tail_start = int((delay_ms + 20) * sr / 1000)
    tail = rng.standard_normal(length - tail_start) * np.exp(
        -np.arange(length - tail_start) / (0.05 * sr)
    )
    ir[tail_start:] += 0.03 * tail  # diffuse energy ~ 1/3 of the direct path
    band = np.tanh(2.0 * _bandpass(dry, sr, 300.0, 3400.0) / (np.max(np.abs(dry)) or 1.0))
    out: np.ndarray = fftconvolve(band, ir)[:n]
    info["delay_ms"] = round(delay_ms, 1)
    return out, info


def _gen_cough(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    """One to three coughs: a broadband burst (5 ms attack, fast decay) with two resonances and
    a weak voiced tail, 250-450 ms apart."""
    from scipy.signal import lfilter

    rng = _rng(gen)
    out = np.zeros(n)
    count = 1 + int(rng.integers(0, 3))
    pos = int(0.02 * sr)
    starts = []
    for _ in range(count):
        if pos >= n:
            break
        dur = rng.uniform(0.18, 0.32)
        m = int(dur * sr)
        t = np.arange(m) / sr
        attack = np.minimum(1.0, t / 0.005)
        env = attack * np.exp(-t / rng.uniform(0.045, 0.08))
        burst = _bandpass(rng.standard_normal(m), sr, 150.0, 7000.0)
        for f0, bw in ((rng.uniform(400, 700), 300.0), (rng.uniform(1400, 2200), 600.0)):
            r = np.exp(-np.pi * bw / sr)
            a = [1.0, -2 * r * np.cos(2 * np.pi * f0 / sr), r * r]
            burst = burst + 0.6 * lfilter([1.0 - r], a, burst)
        pitch = rng.uniform(130, 220)
        voiced = np.sign(np.sin(2 * np.pi * pitch * t)) * np.exp(-t / 0.12) * (t > 0.04)
        y = env * burst + 0.15 * _bandpass(voiced, sr, 100.0, 2500.0) * attack
        tail = min(y.size, int(0.02 * sr))
        y[y.size - tail :] *= np.linspace(1.0, 0.0, tail)
        seg = y[: n - pos]
        out[pos : pos + seg.size] += seg
        starts.append(round(1000 * pos / sr))
        pos += m + int(rng.uniform(0.06, 0.2) * sr)
    return out, {"coughs": len(starts), "onsets_ms": starts}


def _gen_keyboard(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    """Typing: key clicks (a sharp high-passed transient plus a damped 'thock'), a softer
    release click, 90-250 ms between keys, longer gaps between words."""
    from scipy.signal import lfilter

    rng = _rng(gen)
    out = np.zeros(n)
    pos = int(rng.uniform(0.02, 0.1) * sr)
    clicks = 0
    in_word = 0
    word_len = int(rng.integers(3, 8))
    while pos < n:
        m = int(0.03 * sr)
        t = np.arange(m) / sr
        level = 10 ** (rng.normal(0.0, 2.0) / 20)
        hi = _bandpass(rng.standard_normal(m), sr, 2000.0, 9000.0) * np.exp(-t / 0.002)
        f0 = rng.uniform(250, 700)
        r = np.exp(-np.pi * 150.0 / sr)
        body = lfilter([1.0 - r], [1.0, -2 * r * np.cos(2 * np.pi * f0 / sr), r * r], hi)
        click = level * (hi + 3.0 * body * np.exp(-t / 0.008))
        seg = click[: n - pos]
        out[pos : pos + seg.size] += seg
        rel = pos + int(rng.uniform(0.06, 0.1) * sr)
        if rel < n:
            seg = 0.35 * click[: n - rel]
            out[rel : rel + seg.size] += seg
        clicks += 1
        in_word += 1
        if in_word >= word_len:
            in_word, word_len = 0, int(rng.integers(3, 8))
            pos += int(rng.uniform(0.3, 0.6) * sr)
        else:
            pos += int(np.clip(rng.lognormal(np.log(0.15), 0.3), 0.09, 0.25) * sr)
    return out, {"clicks": clicks}


def _gen_music(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    """A composed piece (``voxassay.suites.asr.music``), always the built-in synthesizer so the
    samples do not depend on whether fluidsynth is installed."""
    from voxassay.suites.asr.music import STYLES, render_music_info

    styles = sorted(STYLES)
    style = styles[gen.seed % len(styles)]
    audio, info = render_music_info(n / sr, sr, seed=gen.seed, style=style, renderer="builtin")
    keep = ("style", "key", "tempo_bpm", "progression", "renderer", "version")
    return audio.samples[:n].astype(np.float64), {k: info[k] for k in keep if k in info}


def _gen_hum(gen: Generate, n: int, sr: int, speech: SpeechRenderer | None) -> _Made:
    """Mains hum (50 or 60 Hz by seed) with decaying odd-heavy harmonics, a slow wobble and a
    fan's low-passed noise 20 dB under it."""
    from scipy.signal import lfilter

    rng = _rng(gen)
    f0 = 50.0 if gen.seed % 2 == 0 else 60.0
    t = np.arange(n) / sr
    out = np.zeros(n)
    for k in range(1, 13):
        if k * f0 >= 0.45 * sr:
            break
        amp = (1.0 if k % 2 else 0.5) / k**1.1
        out += amp * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 2 * np.pi))
    out *= 1.0 + 0.05 * np.sin(2 * np.pi * 0.3 * t)
    fan = lfilter([1.0], [1.0, -0.98], rng.standard_normal(n))
    fan *= np.sqrt(np.mean(out**2) / (np.mean(fan**2) or 1.0)) * 0.1
    return out + fan, {"mains_hz": f0}


_GENERATORS: dict[GenerateKind, Callable[..., _Made]] = {
    GenerateKind.TV: _gen_tv,
    GenerateKind.CHATTER: _gen_chatter,
    GenerateKind.ECHO: _gen_echo,
    GenerateKind.COUGH: _gen_cough,
    GenerateKind.KEYBOARD: _gen_keyboard,
    GenerateKind.MUSIC: _gen_music,
    GenerateKind.HUM: _gen_hum,
}


def generate_sound(
    gen: Generate, sample_rate: int = 16_000, speech: SpeechRenderer | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Exactly ``gen.duration_ms`` of the sound ``gen.kind`` (float32, active level
    ``REFERENCE_LEVEL_DBFS``) and a description of what was made.

    tv: news lines by two or three espeak-ng voices over a quiet string bed, TV-speaker band,
    room; chatter: three talkers' unrelated lines summed, room; echo: an agent phrase (piper)
    through a loudspeaker band, 50-70 ms delay, reflections and tail; cough: broadband bursts;
    keyboard: key clicks; music: a composed piece; hum: mains hum and fan noise. The spoken
    kinds use speech-shaped noise when their voices are missing (``detail["fallback"]``).
    """
    sr = int(sample_rate)
    n = max(1, round(gen.duration_ms * sr / 1000))
    samples, info = _GENERATORS[gen.kind](gen, n, sr, speech)
    x = np.zeros(n)
    x[: min(n, samples.size)] = samples[:n]
    x = _fade(x, sr)
    x = _set_level(x, sr, REFERENCE_LEVEL_DBFS)
    detail = {"kind": str(gen.kind), "seed": gen.seed, "duration_ms": gen.duration_ms, **info}
    return x.astype(np.float32), detail


# --------------------------------------------------------------------------- clips


def _clip_table(clips: Clips | None, scenario: Scenario) -> dict[str, str | Path | Audio]:
    """The clips that belong to ``scenario``, keyed by segment id (unknown names refused)."""
    if clips is None:
        return {}
    ids = {s.id for s in scenario.segments}
    table: dict[str, str | Path | Audio] = {}
    if isinstance(clips, str | Path):
        folder = Path(clips).expanduser() / scenario.id
        if not folder.is_dir():
            return {}
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() not in AUDIO_EXTENSIONS:
                continue
            if path.stem not in ids:
                raise InputError(
                    f"clip {path} names no segment of scenario {scenario.id!r} "
                    f"(segments: {', '.join(sorted(ids))})"
                )
            if path.stem in table:
                raise InputError(f"two clips for segment {path.stem!r} in {folder}")
            table[path.stem] = path
        return table
    prefix = f"{scenario.id}/"
    for key, value in clips.items():
        if key.startswith(prefix):
            table[key[len(prefix) :]] = value
        elif "/" not in key and key in ids:
            table.setdefault(key, value)
    return table


def _load_clip(value: str | Path | Audio, sr: int) -> np.ndarray:
    if isinstance(value, Audio):
        return resample(value, sr).samples.astype(np.float64)
    return load_audio(value, sr=sr).samples.astype(np.float64)


# --------------------------------------------------------------------------- scenarios


def render_scenario(
    scenario: Scenario,
    scenario_dir: str | Path,
    sample_rate: int = 16_000,
    cache_dir: str | Path | None = None,
    clips: Clips | None = None,
    speech: SpeechRenderer | None = None,
) -> dict[str, RenderedSegment]:
    """Every segment of ``scenario`` rendered, with its source and detail (module docstring)."""
    sr = int(sample_rate)
    if sr < 8000:
        raise InputError(f"sample rate {sr} Hz is too low to render speech")
    base = Path(scenario_dir)
    speech = speech or SpeechRenderer(sr, cache_dir)
    if speech.sample_rate != sr:
        raise InputError(f"speech renderer runs at {speech.sample_rate} Hz, not {sr}")
    table = _clip_table(clips, scenario)
    out: dict[str, RenderedSegment] = {}
    for seg in scenario.segments:
        detail: dict[str, Any] = {"sample_rate": sr, "gain_db": seg.gain_db}
        if seg.id in table:
            if seg.audio is not None:
                raise InputError(
                    f"clip for segment {seg.id!r} of {scenario.id!r}: the segment already plays "
                    f"the file {seg.audio}; clips replace say and generate segments"
                )
            value = table[seg.id]
            x = trim_to_speech(_load_clip(value, sr), sr)
            x = _set_level(x, sr, REFERENCE_LEVEL_DBFS)
            source = "clip"
            detail["clip"] = str(value) if not isinstance(value, Audio) else "<Audio>"
            if seg.say is not None:
                detail["replaces"] = {"say": seg.say, "voice": seg.voice}
        elif seg.say is not None:
            spec = seg.voice or ""
            try:
                raw, info = speech.speak(seg.say, spec)
            except BackendUnavailable as exc:
                raise _missing_voice(scenario, seg, spec, exc) from None
            x = trim_to_speech(raw.astype(np.float64), sr)
            if not np.any(x):
                raise AudioError(f"voice {spec!r} produced silence for {seg.say!r}", kind="silent")
            x = _set_level(x, sr, REFERENCE_LEVEL_DBFS)
            source = "say"
            detail.update(info)
        elif seg.audio is not None:
            path = Path(seg.audio) if Path(seg.audio).is_absolute() else base / seg.audio
            native = load_audio(path, sr=None)
            lo = round((seg.start_ms or 0) * native.sr / 1000)
            hi = native.samples.size
            if seg.end_ms is not None:
                hi = min(hi, round(seg.end_ms * native.sr / 1000))
            if hi <= lo:
                raise InputError(
                    f"segment {seg.id!r} of {scenario.id!r}: {path} has nothing between "
                    f"start_ms and end_ms (it lasts {native.duration * 1000:.0f} ms)"
                )
            x = resample(Audio(native.samples[lo:hi], native.sr), sr).samples.astype(np.float64)
            source = "audio"
            detail.update({"audio": str(path), "start_ms": seg.start_ms, "end_ms": seg.end_ms})
        elif seg.generate is not None:
            x, info = generate_sound(seg.generate, sr, speech)
            source = "generate"
            detail.update(info)
        else:  # the schema makes this impossible; keep mypy and hand-built segments honest
            raise InputError(f"segment {seg.id!r} of {scenario.id!r} has no source")
        samples = _gain(np.asarray(x, dtype=np.float64), seg.gain_db).astype(np.float32)
        detail["level_dbfs"] = round(active_level_dbfs(samples, sr), 2) if samples.size else None
        out[seg.id] = RenderedSegment(seg.id, samples, source, detail)
    return out


def render_segments(
    scenario: Scenario,
    scenario_dir: str | Path,
    sample_rate: int = 16_000,
    cache_dir: str | Path | None = None,
    clips: Clips | None = None,
) -> dict[str, np.ndarray]:
    """Segment id -> mono float32 samples at ``sample_rate`` (see the module docstring)."""
    rendered = render_scenario(scenario, scenario_dir, sample_rate, cache_dir, clips)
    return {sid: r.samples for sid, r in rendered.items()}


def render_to_folder(
    scenarios: list[tuple[Scenario, Path]],
    out: str | Path,
    sample_rate: int = 16_000,
    cache_dir: str | Path | None = None,
    clips: Clips | None = None,
    on_scenario: Callable[[Scenario], None] | None = None,
) -> dict[str, Any]:
    """Write ``OUT/<scenario_id>/<segment_id>.wav`` (16-bit PCM) and ``OUT/index.json``.

    The index lists per scenario its file, version, category and per segment the wav, source,
    start rule (``at_ms`` or ``after``), role, gain, duration, active level and the sha256
    of the float32 samples (equal hashes = bit-identical renders). Returns the index.
    """
    import soundfile as sf

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    speech = SpeechRenderer(sample_rate, cache_dir)
    entries: list[dict[str, Any]] = []
    for scenario, path in scenarios:
        rendered = render_scenario(scenario, path.parent, sample_rate, None, clips, speech)
        folder = root / scenario.id
        folder.mkdir(parents=True, exist_ok=True)
        segs = []
        for seg in scenario.segments:
            r = rendered[seg.id]
            wav = folder / f"{seg.id}.wav"
            sf.write(str(wav), np.clip(r.samples, -1.0, 1.0), sample_rate, subtype="PCM_16")
            start: dict[str, Any] = (
                {"at_ms": seg.at_ms}
                if seg.after is None
                else {"after": seg.after.model_dump(exclude_none=True)}
            )
            segs.append(
                {
                    "id": seg.id,
                    "role": str(seg.role),
                    "file": wav.relative_to(root).as_posix(),
                    "source": r.source,
                    **start,
                    "duration_ms": round(r.duration_ms, 1),
                    "samples_sha256": hashlib.sha256(r.samples.tobytes()).hexdigest(),
                    **{k: v for k, v in r.detail.items() if k != "sample_rate"},
                }
            )
        entries.append(
            {
                "id": scenario.id,
                "version": scenario.version,
                "category": str(scenario.category),
                "scenario_file": str(path),
                "segments": segs,
            }
        )
        if on_scenario is not None:
            on_scenario(scenario)
    index = {
        "render_version": RENDER_VERSION,
        "sample_rate": sample_rate,
        "reference_level_dbfs": REFERENCE_LEVEL_DBFS,
        "cache_dir": str(cache_dir) if cache_dir is not None else None,
        "clips": str(clips) if isinstance(clips, str | Path) else None,
        "synthesis": {"cache_hits": speech.hits, "synthesized": speech.misses},
        "scenarios": entries,
    }
    (root / "index.json").write_text(
        json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return index
