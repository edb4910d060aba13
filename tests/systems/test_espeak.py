"""espeak-ng synthesizer: real binary, WAV parsing, voices, pitch of variants."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import Audio, load_audio, resample
from voxassay.core.errors import BackendUnavailable, InputError
from voxassay.systems import espeak as espeak_mod
from voxassay.systems.espeak import build, find_espeak, parse_wav_stream

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def needs_espeak() -> None:
    if find_espeak() is None:
        pytest.skip("espeak-ng binary not installed (apt-get install espeak-ng)")


def median_f0(audio: Audio) -> float:
    """Median F0 (Hz) over voiced 40 ms frames: normalised autocorrelation peak > 0.5."""
    a = resample(audio, 16000)
    x = a.samples.astype(np.float64)
    n, hop = 640, 160
    lo, hi = 16000 // 400, 16000 // 60
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[::hop]
    energy = np.mean(frames**2, axis=1)
    loud = energy > np.percentile(energy, 90) * 10 ** (-2.5)
    f0 = []
    for fr in frames[loud]:
        fr = fr - fr.mean()
        ac = np.correlate(fr, fr, "full")[n - 1 :]
        if ac[0] <= 0:
            continue
        ac = ac / ac[0]
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.5:
            f0.append(16000 / lag)
    assert len(f0) > 10, "too few voiced frames"
    return float(np.median(f0))


def test_f0_estimator_on_real_speech() -> None:
    """The estimator separates a real female (VCTK p225) and male (ARCTIC aew) talker."""
    female = DATA / "accented" / "vctk" / "p225_003.wav"
    male = DATA / "read_speech" / "cmu_arctic" / "aew_arctic_a0001.wav"
    if not female.exists() or not male.exists():
        pytest.skip(f"real recordings not found under {DATA}")
    f, m = median_f0(load_audio(female)), median_f0(load_audio(male))
    assert 150 < f < 300 and 70 < m < 160


def test_synthesizes_speech_like_audio() -> None:
    needs_espeak()
    s = build("espeak-ng")
    s.load()
    audio = s.synthesize(TEXT)
    assert audio.sr == s.sample_rate == 22050
    words = len(TEXT.split())
    assert words / 5.0 < audio.duration < words / 1.5  # 1.5-5 words per second
    assert np.sqrt(np.mean(audio.samples**2)) > 0.01
    assert np.max(np.abs(audio.samples)) <= 1.0
    desc = s.describe()
    assert desc["deterministic"] is True and "ignored" in desc["instructions"]
    assert desc["version"].startswith("eSpeak NG")


def test_variants_change_pitch() -> None:
    needs_espeak()
    s = build("espeak-ng:en-us")
    f3 = median_f0(s.synthesize(TEXT, voice="en-us+f3"))
    m7 = median_f0(s.synthesize(TEXT, voice="en-us+m7"))
    base = median_f0(s.synthesize(TEXT))
    assert f3 > 1.4 * m7
    assert f3 > base


def test_deterministic_and_options() -> None:
    needs_espeak()
    s = build("espeak-ng:en-gb")
    a, b = s.synthesize(TEXT), s.synthesize(TEXT)
    assert a.samples.tobytes() == b.samples.tobytes()
    assert s.synthesize(TEXT, instructions="sound happy").samples.tobytes() == a.samples.tobytes()
    fast = build("espeak-ng:en-gb?speed=300").synthesize(TEXT)
    slow = build("espeak-ng:en-gb?speed=120").synthesize(TEXT)
    assert fast.duration < 0.7 * slow.duration
    high = median_f0(build("espeak-ng:en-gb?pitch=90").synthesize(TEXT))
    low = median_f0(build("espeak-ng:en-gb?pitch=10").synthesize(TEXT))
    assert high > low


def test_text_starting_with_dash_is_spoken_not_parsed() -> None:
    needs_espeak()
    audio = build("espeak-ng").synthesize("-v is not an option here")
    assert audio.duration > 1.0


def test_bad_voice_and_options_are_input_errors() -> None:
    needs_espeak()
    with pytest.raises(InputError, match="Did you mean en-us"):
        build("espeak-ng:en-uss")
    with pytest.raises(InputError, match="Did you mean f3"):
        build("espeak-ng").synthesize("hello", voice="en-us+f33")
    with pytest.raises(InputError, match="unknown espeak-ng option"):
        build("espeak-ng?rate=3")
    with pytest.raises(InputError, match="outside"):
        build("espeak-ng?pitch=150")
    with pytest.raises(InputError, match="empty"):
        build("espeak-ng").synthesize("  ")


def test_missing_binary_is_unavailable_with_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(espeak_mod.shutil, "which", lambda _name: None)
    with pytest.raises(BackendUnavailable, match="apt-get install espeak-ng"):
        build("espeak-ng:en-us")
    with pytest.raises(BackendUnavailable, match="not found"):
        build("espeak-ng?bin=/nonexistent/espeak-ng")


def test_parse_wav_stream_with_placeholder_sizes() -> None:
    pcm = (np.sin(np.arange(2205) / 5) * 10000).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, 22050, 44100, 2, 16)
    data = (
        b"RIFF" + struct.pack("<I", 0x7FFFF024) + b"WAVE"
        + b"fmt " + struct.pack("<I", 16) + fmt
        + b"data" + struct.pack("<I", 0x7FFFF000) + pcm + b"\x01"  # odd trailing byte
    )  # fmt: skip
    audio = parse_wav_stream(data)
    assert audio.sr == 22050 and audio.samples.size == 2205
    assert np.allclose(audio.samples * 32768, np.frombuffer(pcm, "<i2"))
    with pytest.raises(Exception, match="WAV"):
        parse_wav_stream(b"not a wav at all")
