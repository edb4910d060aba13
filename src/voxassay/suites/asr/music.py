"""Music beds that are music: composed from a seed, rendered with real instruments.

A short piece (chord progression, melody with a repeated motif, bass line and, for
``band``, drums) is composed deterministically from ``seed`` and ``style``. It is rendered
with ``fluidsynth`` and a General MIDI soundfont (Debian/Ubuntu ``fluid-soundfont-gm``:
``/usr/share/sounds/sf2/FluidR3_GM.sf2``) when both are installed: the piece is written as a
standard MIDI file by a small writer here and rendered by the fluidsynth command line.
Otherwise a built-in synthesizer renders the same notes (Karplus-Strong plucked strings,
additive piano, organ, bowed and wind tones, synthetic drums, a short reverb), so music
beds work with no system packages. Which renderer ran is returned by
:func:`render_music_info` and recorded in manifests.

Level: beds are scaled to an RMS level of -20 dBFS over the whole piece (0 dBFS = full
scale square wave).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR, Audio, load_audio, resample
from voxassay.core.errors import BackendUnavailable, InputError

MUSIC_VERSION = "1"
RMS_LEVEL_DBFS = -20.0
SOUNDFONT_CANDIDATES = (
    "/usr/share/sounds/sf2/FluidR3_GM.sf2",
    "/usr/share/sounds/sf2/default-GM.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2",
    "/usr/share/soundfonts/default.sf2",
    "/usr/local/share/soundfonts/default.sf2",
    "/opt/homebrew/share/soundfonts/default.sf2",
)
INSTALL_HINT = "apt-get install fluidsynth fluid-soundfont-gm"
TICKS = 480  # MIDI ticks per quarter note
DRUM_CHANNEL = 9

# (name, channel, GM program 0-based) per part; "drums" uses the percussion channel.
STYLES: dict[str, dict[str, tuple[int, str]]] = {
    "piano": {"chords": (0, "arpeggio"), "melody": (0, "lead"), "bass": (32, "bass")},
    "band": {
        "chords": (4, "offbeat"),
        "melody": (65, "lead"),
        "bass": (33, "walking"),
        "drums": (0, "rock"),
    },
    "strings": {"chords": (48, "pad"), "melody": (40, "lead"), "bass": (42, "bass")},
    "guitar": {"chords": (24, "arpeggio"), "melody": (73, "lead"), "bass": (32, "bass")},
    "organ": {"chords": (16, "block"), "melody": (56, "lead"), "bass": (33, "bass")},
}

MAJOR = (0, 2, 4, 5, 7, 9, 11)
# Progressions as scale degrees (0 = I) of the major scale, one chord per bar.
PROGRESSIONS = (
    (0, 4, 5, 3),  # I  V  vi IV
    (0, 5, 3, 4),  # I  vi IV V
    (5, 3, 0, 4),  # vi IV I  V
    (1, 4, 0, 0),  # ii V  I  I
    (0, 3, 0, 4),  # I  IV I  V
    (0, 3, 4, 3),  # I  IV V  IV
)
RHYTHMS = (  # melody rhythms for one bar, in beats (negative = rest)
    (1.0, 1.0, 1.0, 1.0),
    (1.5, 0.5, 1.0, 1.0),
    (2.0, 1.0, 1.0),
    (0.5, 0.5, 1.0, 2.0),
    (1.0, 0.5, 0.5, 2.0),
    (1.0, 1.0, 2.0),
    (3.0, -1.0),
)


@dataclass(frozen=True)
class Note:
    """One note: start and duration in beats, MIDI pitch and velocity, channel, program."""

    start: float
    dur: float
    pitch: int
    velocity: int
    channel: int
    program: int


@dataclass
class Piece:
    """A composed piece: notes plus what it was made from."""

    notes: list[Note]
    tempo_bpm: float
    beats: float
    key: int
    progression: tuple[int, ...]
    style: str
    seed: int

    @property
    def seconds(self) -> float:
        return self.beats * 60.0 / self.tempo_bpm

    def describe(self) -> dict[str, Any]:
        names = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
        numerals = ("I", "ii", "iii", "IV", "V", "vi", "vii")
        return {
            "style": self.style,
            "seed": self.seed,
            "key": f"{names[self.key % 12]} major",
            "tempo_bpm": self.tempo_bpm,
            "progression": "-".join(numerals[d] for d in self.progression),
            "instruments": {
                part: prog for part, (prog, _) in STYLES[self.style].items() if part != "drums"
            },
            "drums": "drums" in STYLES[self.style],
            "n_notes": len(self.notes),
        }


def _chord(key: int, degree: int, octave_base: int) -> list[int]:
    """Diatonic triad (plus seventh) on ``degree`` of ``key`` major, rooted near ``octave_base``."""
    pitches = []
    for step in (0, 2, 4, 6):
        d = degree + step
        pitches.append(octave_base + key + MAJOR[d % 7] + 12 * (d // 7))
    return pitches


def compose(duration_s: float, seed: int = 0, style: str = "piano") -> Piece:
    """Compose a piece of at least ``duration_s`` seconds (deterministic in ``seed``, ``style``).

    Four-bar progression repeated, melody built from a two-bar motif (A A' B A form) on
    chord tones with scale passing notes, bass on roots and fifths, style-specific
    accompaniment pattern.
    """
    if style not in STYLES:
        raise InputError(f"unknown music style {style!r}; known: {', '.join(STYLES)}")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, sum(map(ord, style))])
    key = int(rng.choice([0, 2, 3, 5, 7, 9, 10]))
    tempo = float(rng.choice([84, 92, 100, 108, 116]))
    prog = PROGRESSIONS[int(rng.integers(0, len(PROGRESSIONS)))]
    bars = int(np.ceil(duration_s * tempo / 60.0 / 4.0)) + 1
    parts = STYLES[style]
    notes: list[Note] = []

    def add(start: float, dur: float, pitch: int, vel: int, part: str) -> None:
        program, _ = parts[part]
        ch = {"chords": 0, "melody": 1, "bass": 2, "drums": DRUM_CHANNEL}[part]
        vel = int(np.clip(vel + rng.integers(-6, 7), 20, 127))
        notes.append(Note(round(start, 4), round(dur, 4), int(pitch), vel, ch, program))

    # melody motif: two bars of (rhythm, scale steps) reused with variation
    motifs = []
    for _ in range(2):
        bar_rhythms = [RHYTHMS[int(rng.integers(0, len(RHYTHMS)))] for _ in range(2)]
        steps = [int(rng.choice([-2, -1, 0, 1, 1, 2, 3])) for _ in range(16)]
        motifs.append((bar_rhythms, steps))
    scale = [key + 60 + MAJOR[i % 7] + 12 * (i // 7) for i in range(-7, 15)]
    scale_index = 7 + 4  # start on the fifth above middle tonic

    for bar in range(bars):
        degree = prog[bar % len(prog)]
        t0 = bar * 4.0
        chord = _chord(key, degree, 48)
        triad = chord[:3]
        # accompaniment
        kind = parts["chords"][1]
        if kind == "arpeggio":
            pattern = [0, 1, 2, 1, 0, 2, 1, 2]
            for i, idx in enumerate(pattern):
                add(t0 + 0.5 * i, 0.9, triad[idx] + 12 * (i >= 4 and idx == 0), 62, "chords")
        elif kind == "offbeat":
            for beat in (1.0, 3.0):
                for p in chord:
                    add(t0 + beat, 0.8, p + 12, 58, "chords")
        elif kind == "pad":
            for p in triad:
                add(t0, 4.0, p + 12, 55, "chords")
        else:  # block chords on beats 1 and 3
            for beat in (0.0, 2.0):
                for p in triad:
                    add(t0 + beat, 1.9, p + 12, 60, "chords")
        # bass
        root = 36 + key + MAJOR[degree]
        fifth = root + 7
        if parts["bass"][1] == "walking":
            nxt = 36 + key + MAJOR[prog[(bar + 1) % len(prog)]]
            line = [root, root + MAJOR[2], fifth, nxt - 1 if nxt > root else nxt + 1]
            for i, p in enumerate(line):
                add(t0 + i, 0.95, p, 80, "bass")
        else:
            add(t0, 1.9, root, 82, "bass")
            add(t0 + 2.0, 1.9, fifth if bar % 2 else root, 76, "bass")
        # melody: A A' B A over 8 bars
        section = (bar // 2) % 4
        rhythms, steps = motifs[1 if section == 2 else 0]
        beat = 0.0
        for k, length in enumerate(rhythms[bar % 2]):
            if length < 0:
                beat += -length
                continue
            step = steps[(k + 4 * (bar % 2)) % len(steps)]
            if section == 1 and k == len(rhythms[bar % 2]) - 1:
                step = -step  # the A' variation answers the motif
            scale_index = int(np.clip(scale_index + step, 4, len(scale) - 4))
            pitch = scale[scale_index]
            if beat in (0.0, 2.0):  # strong beats land on a chord tone
                pcs = {p % 12 for p in triad}
                while pitch % 12 not in pcs:
                    scale_index = int(np.clip(scale_index + 1, 4, len(scale) - 4))
                    pitch = scale[scale_index]
                    if scale_index == len(scale) - 4:
                        break
            add(t0 + beat, length * 0.95, pitch, 84 if beat in (0.0, 2.0) else 74, "melody")
            beat += length
        # drums
        if "drums" in parts:
            for i in range(8):
                add(t0 + 0.5 * i, 0.25, 42, 52 if i % 2 else 66, "drums")  # closed hi-hat
            add(t0, 0.5, 36, 96, "drums")
            add(t0 + 2.0, 0.5, 36, 88, "drums")
            add(t0 + 2.5, 0.5, 36, 70, "drums")
            add(t0 + 1.0, 0.5, 38, 90, "drums")
            add(t0 + 3.0, 0.5, 38, 92, "drums")
    return Piece(
        sorted(notes, key=lambda n: (n.start, n.channel, n.pitch)),
        tempo,
        bars * 4.0,
        key,
        prog,
        style,
        seed,
    )


# -- MIDI writer ----------------------------------------------------------------------------


def _vlq(value: int) -> bytes:
    """MIDI variable-length quantity."""
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(out))


def midi_bytes(piece: Piece, tail_s: float = 1.5) -> bytes:
    """A format-0 standard MIDI file for ``piece`` (tempo, programs, volumes, notes).

    A controller event ``tail_s`` after the last note keeps the player running so release
    and reverb tails are rendered.
    """
    events: list[tuple[int, int, bytes]] = []  # (tick, order, data); offs before ons
    tempo_us = round(60_000_000 / piece.tempo_bpm)
    events.append((0, 0, b"\xff\x51\x03" + tempo_us.to_bytes(3, "big")))
    events.append((0, 0, b"\xff\x58\x04\x04\x02\x18\x08"))
    channels = sorted({(n.channel, n.program) for n in piece.notes})
    for ch, program in channels:
        if ch != DRUM_CHANNEL:
            events.append((0, 1, bytes([0xC0 | ch, program & 0x7F])))
        volume = {0: 88, 1: 104, 2: 100, DRUM_CHANNEL: 84}.get(ch, 96)
        pan = {0: 52, 1: 72, 2: 64, DRUM_CHANNEL: 64}.get(ch, 64)
        events.append((0, 1, bytes([0xB0 | ch, 7, volume])))
        events.append((0, 1, bytes([0xB0 | ch, 10, pan])))
        events.append((0, 1, bytes([0xB0 | ch, 91, 40])))  # reverb send
    last = 0
    for n in piece.notes:
        on = round(n.start * TICKS)
        off = max(on + 1, round((n.start + n.dur) * TICKS))
        events.append((on, 3, bytes([0x90 | n.channel, n.pitch & 0x7F, n.velocity & 0x7F])))
        events.append((off, 2, bytes([0x80 | n.channel, n.pitch & 0x7F, 0])))
        last = max(last, off)
    tail = last + round(tail_s * piece.tempo_bpm / 60.0 * TICKS)
    events.append((tail, 4, bytes([0xB0, 121, 0])))  # reset controllers: a harmless end marker
    events.sort(key=lambda e: (e[0], e[1]))
    track = bytearray()
    now = 0
    for tick, _, data in events:
        track += _vlq(tick - now) + data
        now = tick
    track += b"\x00\xff\x2f\x00"
    header = b"MThd" + struct.pack(">IHHH", 6, 0, 1, TICKS)
    return header + b"MTrk" + struct.pack(">I", len(track)) + bytes(track)


# -- renderers ------------------------------------------------------------------------------


def find_soundfont(soundfont: str | Path | None = None) -> Path | None:
    """The GM soundfont to use: ``soundfont``, ``$VOXASSAY_SOUNDFONT``, then system paths."""
    for cand in (soundfont, os.environ.get("VOXASSAY_SOUNDFONT"), *SOUNDFONT_CANDIDATES):
        if cand and Path(cand).is_file():
            return Path(cand).resolve()
    return None


def music_renderer(soundfont: str | Path | None = None) -> dict[str, Any]:
    """Which renderer ``renderer="auto"`` would use here, with versions and paths."""
    binary = shutil.which("fluidsynth")
    sf2 = find_soundfont(soundfont)
    if binary and sf2:
        return {
            "renderer": "fluidsynth",
            "fluidsynth": binary,
            "fluidsynth_version": _fluidsynth_version(binary),
            "soundfont": str(sf2),
            "soundfont_bytes": sf2.stat().st_size,
        }
    missing = [w for w, ok in (("fluidsynth", binary), ("a GM soundfont", sf2)) if not ok]
    return {
        "renderer": "builtin",
        "reason": f"{' and '.join(missing)} not found ({INSTALL_HINT} for sampled instruments)",
    }


def _fluidsynth_version(binary: str) -> str:
    out = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    first = (out.stdout or "").strip().splitlines()
    return first[0] if first else "unknown"


def _render_fluidsynth(piece: Piece, sr: int, binary: str, sf2: Path) -> np.ndarray:
    render_sr = 22050 if sr <= 22050 else 44100
    with tempfile.TemporaryDirectory(prefix="voxassay-music-") as tmp:
        mid = Path(tmp) / "piece.mid"
        wav = Path(tmp) / "piece.wav"
        mid.write_bytes(midi_bytes(piece))
        cmd = [
            binary, "-n", "-i", "-q",
            "-r", str(render_sr), "-g", "0.5",
            "-o", "synth.chorus.active=0",
            "-o", "synth.reverb.active=1",
            "-o", "synth.cpu-cores=1",
            "-F", str(wav), "-T", "wav", "-O", "s16",
            str(sf2), str(mid),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0 or not wav.exists() or wav.stat().st_size <= 44:
            raise BackendUnavailable(
                f"fluidsynth failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[:400]}"
            )
        audio = load_audio(wav, sr=None)
    return resample(audio, sr).samples


def _env(n: int, sr: int, attack: float, release: float, decay: float | None = None) -> np.ndarray:
    t = np.arange(n) / sr
    env = np.ones(n)
    a = max(1, int(attack * sr))
    env[:a] = np.linspace(0.0, 1.0, min(a, n))[: min(a, n)]
    if decay is not None:
        env *= np.exp(-t / decay)
    r = min(n, max(1, int(release * sr)))
    env[n - r :] *= np.linspace(1.0, 0.0, r)
    return env


def _karplus_strong(
    freq: float, n: int, sr: int, rng: np.random.Generator, damping: float, bright: float
) -> np.ndarray:
    """Plucked string: noise burst in a delay loop with averaging and an all-pass tuner."""
    from scipy.signal import lfilter

    period = sr / freq
    delay = int(np.floor(period - 0.5 - 0.1))
    frac = period - 0.5 - delay  # fractional delay realised by a first-order all-pass
    c = (1.0 - frac) / (1.0 + frac)
    burst = rng.uniform(-1.0, 1.0, delay + 2)
    if bright < 1.0:  # soften the pluck
        burst = lfilter([1.0 - bright], [1.0, -bright], burst)
    x = np.zeros(n)
    x[: min(n, burst.size)] = burst[: min(n, burst.size)]
    g = damping
    a = np.zeros(delay + 3)
    a[0], a[1] = 1.0, c
    a[delay] += -0.5 * g * c
    a[delay + 1] += -0.5 * g * (1.0 + c)
    a[delay + 2] += -0.5 * g
    y: np.ndarray = lfilter([1.0, c], a, x)
    return y


def _additive(
    freq: float, n: int, sr: int, partials: list[tuple[float, float, float]], vibrato: float = 0.0
) -> np.ndarray:
    """Sum of partials ``(ratio, amplitude, decay_s or 0 for sustained)``."""
    t = np.arange(n) / sr
    phase_mod = vibrato * np.sin(2 * np.pi * 5.2 * t) / 5.2 if vibrato else 0.0
    out = np.zeros(n)
    for ratio, amp, decay in partials:
        f = freq * ratio
        if f >= sr / 2 - 200:
            continue
        tone = amp * np.sin(2 * np.pi * f * t + 2 * np.pi * f * phase_mod * 0.003)
        if decay > 0:
            tone *= np.exp(-t / decay)
        out += tone
    return out


def _voice_note(
    program: int, pitch: int, dur_s: float, vel: int, sr: int, rng: np.random.Generator
) -> np.ndarray:
    freq = 440.0 * 2 ** ((pitch - 69) / 12)
    amp = (vel / 127.0) ** 1.5
    if 24 <= program <= 39:  # guitars and basses: plucked strings
        tail = 0.6 if program >= 32 else 0.9
        n = int((dur_s + tail) * sr)
        y = _karplus_strong(
            freq,
            n,
            sr,
            rng,
            damping=0.996 if program < 32 else 0.994,
            bright=0.55 if program < 32 else 0.75,
        )
        y *= _env(n, sr, 0.002, min(0.08, tail))
        if program >= 32:
            y = y + 0.5 * _additive(freq, n, sr, [(1, 0.6, 0.8)])
    elif program <= 7:  # pianos: inharmonic partials with faster decay up the series
        n = int((dur_s + 0.8) * sr)
        b = 0.0004
        partials = [
            (k * np.sqrt(1 + b * k * k), 1.0 / k**1.3, 1.6 / (1 + 0.5 * k)) for k in range(1, 9)
        ]
        y = _additive(freq, n, sr, partials) * _env(n, sr, 0.004, 0.25)
    elif 16 <= program <= 23:  # organs: drawbar harmonics, sustained
        n = int((dur_s + 0.1) * sr)
        y = _additive(
            freq,
            n,
            sr,
            [
                (0.5, 0.5, 0),
                (1, 1.0, 0),
                (2, 0.6, 0),
                (3, 0.3, 0),
                (4, 0.25, 0),
                (6, 0.1, 0),
                (8, 0.08, 0),
            ],
        )
        y *= _env(n, sr, 0.01, 0.08)
    elif 40 <= program <= 51:  # strings: saw-like partials, slow attack, vibrato
        n = int((dur_s + 0.3) * sr)
        y = _additive(freq, n, sr, [(k, 1.0 / k, 0) for k in range(1, 10)], vibrato=1.0)
        y *= _env(n, sr, 0.12, 0.3)
    else:  # winds and brass: few partials, vibrato, breath
        n = int((dur_s + 0.1) * sr)
        bright = 1.0 if 56 <= program <= 71 else 0.35
        y = _additive(
            freq,
            n,
            sr,
            [(1, 1.0, 0), (2, 0.5 * bright, 0), (3, 0.3 * bright, 0), (4, 0.15 * bright, 0)],
            vibrato=0.8,
        )
        y += 0.02 * rng.standard_normal(n)
        y *= _env(n, sr, 0.04, 0.08)
    peak = float(np.max(np.abs(y))) or 1.0
    out: np.ndarray = amp * y / peak
    return out


def _drum(pitch: int, vel: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.signal import butter, sosfilt

    amp = (vel / 127.0) ** 1.5
    if pitch == 36:  # kick: falling sine
        n = int(0.35 * sr)
        t = np.arange(n) / sr
        f = 50 + 100 * np.exp(-t / 0.04)
        y = np.sin(2 * np.pi * np.cumsum(f) / sr) * np.exp(-t / 0.12)
    elif pitch == 38:  # snare: band-passed noise and a body tone
        n = int(0.25 * sr)
        t = np.arange(n) / sr
        sos = butter(2, [1000, min(7000, sr / 2 - 100)], btype="bandpass", fs=sr, output="sos")
        y = 0.7 * sosfilt(sos, rng.standard_normal(n)) * np.exp(-t / 0.06)
        y += 0.5 * np.sin(2 * np.pi * 185 * t) * np.exp(-t / 0.05)
    else:  # closed hi-hat: high-passed noise
        n = int(0.08 * sr)
        t = np.arange(n) / sr
        sos = butter(2, min(6000, sr / 2 - 500), btype="highpass", fs=sr, output="sos")
        y = 0.5 * sosfilt(sos, rng.standard_normal(n)) * np.exp(-t / 0.02)
    out: np.ndarray = amp * y / (float(np.max(np.abs(y))) or 1.0)
    return out


def _render_builtin(piece: Piece, sr: int) -> np.ndarray:
    from scipy.signal import fftconvolve

    rng = np.random.default_rng([int(piece.seed) & 0xFFFFFFFF, 7])
    spb = 60.0 / piece.tempo_bpm
    total = int((piece.seconds + 2.0) * sr)
    out = np.zeros(total)
    mix = {0: 0.45, 1: 0.8, 2: 0.7, DRUM_CHANNEL: 0.5}
    for note in piece.notes:
        if note.channel == DRUM_CHANNEL:
            y = _drum(note.pitch, note.velocity, sr, rng)
        else:
            y = _voice_note(note.program, note.pitch, note.dur * spb, note.velocity, sr, rng)
        i0 = round(note.start * spb * sr)
        seg = y[: max(0, total - i0)]
        out[i0 : i0 + seg.size] += mix.get(note.channel, 0.6) * seg
    # small room: exponentially decaying noise impulse response, 25 % wet
    n_ir = int(0.6 * sr)
    ir = rng.standard_normal(n_ir) * np.exp(-np.arange(n_ir) / (0.12 * sr))
    ir /= np.sqrt(np.sum(ir**2))
    wet = fftconvolve(out, ir)[:total]
    result: np.ndarray = 0.8 * out + 0.25 * wet
    return result


def render_music_info(
    duration_s: float,
    sr: int = TARGET_SR,
    seed: int = 0,
    style: str = "piano",
    *,
    renderer: str = "auto",
    soundfont: str | Path | None = None,
) -> tuple[Audio, dict[str, Any]]:
    """:func:`render_music` plus a description (renderer, versions, key, tempo, progression)."""
    if duration_s <= 0:
        raise InputError("music duration must be > 0")
    if renderer not in ("auto", "fluidsynth", "builtin"):
        raise InputError(f"unknown music renderer {renderer!r}; use auto, fluidsynth or builtin")
    piece = compose(duration_s, seed=seed, style=style)
    info: dict[str, Any]
    if renderer == "builtin":
        info = {"renderer": "builtin", "reason": "requested"}
    else:
        info = music_renderer(soundfont)
        if renderer == "fluidsynth" and info["renderer"] != "fluidsynth":
            raise BackendUnavailable(f"fluidsynth renderer unavailable: {info['reason']}")
    samples: np.ndarray | None = None
    if info["renderer"] == "fluidsynth":
        try:
            samples = _render_fluidsynth(piece, sr, info["fluidsynth"], Path(info["soundfont"]))
        except (BackendUnavailable, OSError, subprocess.TimeoutExpired) as exc:
            if renderer == "fluidsynth":
                raise
            info = {"renderer": "builtin", "reason": f"fluidsynth failed, fell back: {exc}"}
    if samples is None:
        samples = _render_builtin(piece, sr)
    n = round(duration_s * sr)
    x = np.zeros(n)
    x[: min(n, samples.size)] = samples[:n]
    fade = min(n // 4, int(0.05 * sr))
    if fade > 1:
        x[:fade] *= np.linspace(0.0, 1.0, fade)
        x[n - fade :] *= np.linspace(1.0, 0.0, fade)
    rms = float(np.sqrt(np.mean(x**2)))
    if rms > 0:
        x *= 10 ** (RMS_LEVEL_DBFS / 20.0) / rms
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak > 0.98:
        x *= 0.98 / peak
    info = {
        **info,
        "version": MUSIC_VERSION,
        "level": f"RMS {RMS_LEVEL_DBFS:g} dBFS",
        "duration_s": round(n / sr, 3),
        **piece.describe(),
    }
    return Audio(x.astype(np.float32), sr), info


def render_music(
    duration_s: float,
    sr: int = TARGET_SR,
    seed: int = 0,
    style: str = "piano",
    *,
    renderer: str = "auto",
    soundfont: str | Path | None = None,
) -> Audio:
    """A deterministic music bed of ``duration_s`` seconds (see the module docstring).

    ``style`` is one of ``piano``, ``band`` (e-piano, sax, bass, drums), ``strings``,
    ``guitar``, ``organ``. ``renderer`` ``auto`` uses fluidsynth + GM soundfont when
    installed, else the built-in synth; ``fluidsynth`` insists (``BackendUnavailable``
    otherwise); ``builtin`` never calls out.
    """
    return render_music_info(duration_s, sr, seed, style, renderer=renderer, soundfont=soundfont)[0]


__all__ = [
    "MUSIC_VERSION",
    "STYLES",
    "Note",
    "Piece",
    "compose",
    "find_soundfont",
    "midi_bytes",
    "music_renderer",
    "render_music",
    "render_music_info",
]
