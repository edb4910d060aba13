"""Music beds: tonal (not noise), deterministic, level-controlled, with and without fluidsynth."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import load_audio
from voxassay.core.errors import BackendUnavailable
from voxassay.suites.asr import music
from voxassay.suites.asr.music import (
    STYLES,
    compose,
    midi_bytes,
    music_renderer,
    render_music,
    render_music_info,
)

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"


def spectral_flatness(x: np.ndarray, sr: int = 16000) -> float:
    """Median over 2048-sample frames of geometric / arithmetic mean power (80-2000 Hz)."""
    n, hop = 2048, 512
    frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), n)[::hop] * np.hanning(
        n
    )
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-12
    f = np.fft.rfftfreq(n, 1 / sr)
    band = (f >= 80) & (f <= 2000)
    flat = np.exp(np.mean(np.log(power[:, band]), axis=1)) / np.mean(power[:, band], axis=1)
    return float(np.median(flat))


def on_note_fraction(x: np.ndarray, sr: int = 16000, cents: float = 25.0) -> float:
    """Share of long-term power (250-2500 Hz) within ``cents`` of an equal-tempered pitch.

    For a flat spectrum this is about ``2 * cents / 100`` (0.5 for 25 cents).
    """
    n, hop = 8192, 2048
    frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), n)[::hop] * np.hanning(
        n
    )
    spec = (np.abs(np.fft.rfft(frames, axis=1)) ** 2).mean(axis=0)
    f = np.fft.rfftfreq(n, 1 / sr)
    band = (f >= 250) & (f <= 2500)
    dev = np.abs(((1200 * np.log2(f[band] / 440.0) + 50) % 100) - 50)
    return float(spec[band][dev <= cents].sum() / spec[band].sum())


def test_white_noise_baseline() -> None:
    noise = np.random.default_rng(0).standard_normal(16000 * 8) * 0.1
    assert spectral_flatness(noise) > 0.4
    assert on_note_fraction(noise) < 0.55


def test_real_noise_beds_are_not_tonal() -> None:
    path = DATA / "noise" / "speech_commands" / "running_tap_10s.wav"
    if not path.exists():
        pytest.skip(f"real noise recording not found at {path}")
    x = load_audio(path).samples
    assert spectral_flatness(x) > 0.1


@pytest.mark.parametrize("style", ["piano", "band", "guitar", "organ"])
def test_builtin_music_is_music_not_noise(style: str) -> None:
    audio, info = render_music_info(8.0, seed=0, style=style, renderer="builtin")
    assert info["renderer"] == "builtin"
    assert spectral_flatness(audio.samples) < 0.05
    assert on_note_fraction(audio.samples) > 0.75


@pytest.mark.parametrize("style", ["piano", "band", "strings"])
def test_fluidsynth_music_is_music_not_noise(style: str) -> None:
    if music_renderer()["renderer"] != "fluidsynth":
        pytest.skip(f"fluidsynth renderer unavailable here: {music_renderer()['reason']}")
    audio, info = render_music_info(8.0, seed=0, style=style, renderer="fluidsynth")
    assert info["renderer"] == "fluidsynth" and info["soundfont"].endswith(".sf2")
    assert spectral_flatness(audio.samples) < 0.05
    assert on_note_fraction(audio.samples) > 0.75


@pytest.mark.parametrize("renderer", ["builtin", "auto"])
def test_music_deterministic_and_seeded(renderer: str) -> None:
    a = render_music(6.0, seed=3, style="band", renderer=renderer)
    b = render_music(6.0, seed=3, style="band", renderer=renderer)
    c = render_music(6.0, seed=4, style="band", renderer=renderer)
    assert a.samples.tobytes() == b.samples.tobytes()
    assert a.samples.tobytes() != c.samples.tobytes()


def test_music_level_and_length() -> None:
    audio = render_music(5.0, sr=16000, seed=1, style="piano", renderer="builtin")
    assert audio.sr == 16000 and audio.samples.size == 5 * 16000
    rms_db = 20 * np.log10(np.sqrt(np.mean(audio.samples.astype(np.float64) ** 2)))
    assert abs(rms_db - music.RMS_LEVEL_DBFS) < 0.1
    assert np.max(np.abs(audio.samples)) <= 0.98 + 1e-6


def test_compose_has_parts_and_structure() -> None:
    for style in STYLES:
        piece = compose(10.0, seed=2, style=style)
        assert piece.seconds >= 10.0
        channels = {n.channel for n in piece.notes}
        assert {0, 1, 2} <= channels  # chords, melody, bass
        assert (music.DRUM_CHANNEL in channels) == ("drums" in STYLES[style])
        desc = piece.describe()
        assert desc["progression"].count("-") == 3 and desc["key"].endswith("major")
    with pytest.raises(Exception, match="unknown music style"):
        compose(5.0, style="polka")


def test_midi_file_is_well_formed() -> None:
    piece = compose(6.0, seed=0, style="band")
    data = midi_bytes(piece)
    assert data[:4] == b"MThd"
    length, fmt, ntracks, division = struct.unpack(">IHHH", data[4:14])
    assert (length, fmt, ntracks, division) == (6, 0, 1, music.TICKS)
    assert data[14:18] == b"MTrk"
    (track_len,) = struct.unpack(">I", data[18:22])
    assert len(data) == 22 + track_len
    assert data.endswith(b"\x00\xff\x2f\x00")
    # walk the events: every note-on has a matching note-off
    pos, end, running = 22, len(data) - 4, 0
    ons = offs = 0
    while pos < end:
        while data[pos] & 0x80:  # delta time (VLQ)
            pos += 1
        pos += 1
        status = data[pos]
        if status == 0xFF:
            pos += 3 + data[pos + 2]
            continue
        running = status
        kind = running & 0xF0
        size = 2 if kind in (0xC0, 0xD0) else 3
        if kind == 0x90 and data[pos + 2] > 0:
            ons += 1
        elif kind == 0x80:
            offs += 1
        pos += size
    assert ons == offs == len(piece.notes)


def test_without_fluidsynth_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(music.shutil, "which", lambda _name: None)
    info = music_renderer()
    assert info["renderer"] == "builtin" and "fluidsynth" in info["reason"]
    audio, used = render_music_info(3.0, seed=0, style="piano")
    assert used["renderer"] == "builtin" and audio.samples.size == 3 * 16000
    with pytest.raises(BackendUnavailable, match="apt-get install fluidsynth"):
        render_music(3.0, renderer="fluidsynth")


def test_missing_soundfont_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(music, "SOUNDFONT_CANDIDATES", (str(tmp_path / "none.sf2"),))
    monkeypatch.delenv("VOXASSAY_SOUNDFONT", raising=False)
    info = music_renderer()
    assert info["renderer"] == "builtin" and "soundfont" in info["reason"]


def test_failing_fluidsynth_falls_back_in_auto_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_sf2 = tmp_path / "broken.sf2"
    fake_sf2.write_bytes(b"not a soundfont")
    fake_bin = tmp_path / "fluidsynth"
    fake_bin.write_text("#!/bin/sh\necho 'cannot load soundfont' >&2\nexit 1\n")
    fake_bin.chmod(0o755)
    monkeypatch.setattr(music.shutil, "which", lambda _name: str(fake_bin))
    monkeypatch.setattr(music, "_fluidsynth_version", lambda _binary: "fake")
    audio, info = render_music_info(2.0, style="piano", soundfont=fake_sf2)
    assert info["renderer"] == "builtin" and "fluidsynth failed" in info["reason"]
    assert audio.samples.size == 2 * 16000
    with pytest.raises(BackendUnavailable, match="cannot load soundfont"):
        render_music(2.0, renderer="fluidsynth", soundfont=fake_sf2)
