"""check_transcriber finds real defects in deliberately broken adapters, and passes good ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxassay.core.audio import load_audio, rms_dbfs
from voxassay.systems.base import Transcript, Word
from voxassay.systems.testing import check_transcriber, speechlike_signal

pytestmark = pytest.mark.live

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CLIP = DATA / "read_speech" / "ljspeech" / "LJ001-0002.wav"
SRC = Path(__file__).resolve().parents[2] / "src"


class Adapter:
    """A configurable adapter: the defaults conform; each flag introduces one defect."""

    sample_rate = 16000

    def __init__(self, **defects: Any) -> None:
        self.defects = defects
        self.calls = 0

    def load(self) -> None:
        if self.defects.get("load_fails"):
            raise OSError("weights missing")

    def transcribe(self, audio: np.ndarray) -> Any:
        self.calls += 1
        d = self.defects
        duration = audio.shape[0] / self.sample_rate
        if d.get("raises"):
            raise ValueError("boom")
        if d.get("mutates"):
            audio *= 0.5
        if d.get("returns_str"):
            return "text"
        words = [Word("a", 0.0, 0.2 * duration), Word("b", 0.3 * duration, 0.5 * duration)]
        if d.get("decreasing"):
            words = list(reversed(words))
        if d.get("past_end"):
            words.append(Word("c", duration - 0.1, duration + 0.5))
        if d.get("bad_prob"):
            words[0].prob = 1.7
        if d.get("nan_time"):
            words[0].end = float("nan")
        text = "a b" if not d.get("nondeterministic") else f"a b {self.calls}"
        extra = {"handle": object()} if d.get("unserialisable_extra") else {}
        return Transcript(text, words, "en", extra)

    def describe(self) -> Any:
        if self.defects.get("describe_object"):
            return {"model": Path("/m")}
        if self.defects.get("describe_leaks"):
            import os

            return {"model": "m", "auth": os.environ["VOXASSAY_TEST_API_KEY"]}
        return {"model": "m"}


def test_conforming_adapter_has_no_problems() -> None:
    assert check_transcriber(Adapter(), check_repeat=True) == []


@pytest.mark.parametrize(
    ("defect", "expected"),
    [
        ("load_fails", "load() raised OSError"),
        ("raises", "raised ValueError: boom"),
        ("mutates", "modified its input"),
        ("returns_str", "returned str, not Transcript"),
        ("decreasing", "non-decreasing"),
        ("past_end", "outside the audio"),
        ("bad_prob", "not in [0, 1]"),
        ("nan_time", "non-finite"),
        ("unserialisable_extra", "not JSON-serialisable"),
        ("describe_object", "describe() is not JSON-serialisable"),
    ],
)
def test_each_defect_is_reported(defect: str, expected: str) -> None:
    problems = check_transcriber(Adapter(**{defect: True}))
    assert problems, f"{defect} went unnoticed"
    assert any(expected in p for p in problems), problems


def test_repeat_check_catches_nondeterminism() -> None:
    assert check_transcriber(Adapter(nondeterministic=True)) == []
    problems = check_transcriber(Adapter(nondeterministic=True), check_repeat=True)
    assert any("different output on a repeat" in p for p in problems)


def test_secret_in_describe_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXASSAY_TEST_API_KEY", "sk-live-abcdef123456")
    problems = check_transcriber(Adapter(describe_leaks=True))
    assert problems == [
        "describe() contains the value of secret environment variable(s) VOXASSAY_TEST_API_KEY"
    ]


def test_missing_methods_and_bad_rate() -> None:
    class Half:
        sample_rate = 0

        def transcribe(self, audio: np.ndarray) -> Transcript:
            return Transcript("")

    # load() and describe() are supplied as the python: backend supplies them; a declared
    # sample rate that is not a positive int is still a problem
    problems = check_transcriber(Half())
    assert not any("load()" in p or "describe()" in p for p in problems)
    assert any("sample_rate must be a positive int, got 0" in p for p in problems)
    assert any("load()" in p for p in check_transcriber(object()))


def test_real_audio_is_passed_and_checked() -> None:
    if not CLIP.exists():
        pytest.skip(f"../shared/data not found: {CLIP}")
    audio = load_audio(CLIP).samples
    seen: list[int] = []

    class Recorder(Adapter):
        def transcribe(self, audio: np.ndarray) -> Any:
            seen.append(audio.shape[0])
            return super().transcribe(audio)

    assert check_transcriber(Recorder(), audio) == []
    assert seen == [16000, audio.shape[0]]
    problems = check_transcriber(Adapter(), audio.astype(np.float64))
    assert problems and "mono float32" in problems[0]


def test_spec_strings_are_built_through_the_registry() -> None:
    assert check_transcriber("mock:fixed?text=ok") == []
    problems = check_transcriber("nosuchbackend")
    assert problems and "unknown transcribe backend" in problems[0]


def test_speechlike_signal_is_deterministic_and_voiced() -> None:
    a, b = speechlike_signal(), speechlike_signal()
    assert a.dtype == np.float32 and a.shape == (24000,) and np.array_equal(a, b)
    spectrum = np.abs(np.fft.rfft(a))
    freqs = np.fft.rfftfreq(a.shape[0], 1 / 16000)
    assert 80 < freqs[np.argmax(spectrum)] < 2000  # energy sits in the voice band
    assert float(np.max(np.abs(a))) == pytest.approx(0.3)
    assert -30 < rms_dbfs(a) < -20


def test_adapter_modules_import_without_heavy_packages() -> None:
    code = (
        "import sys\n"
        "import voxassay.systems.faster_whisper, voxassay.systems.pocketsphinx\n"
        "import voxassay.systems.openai_compat, voxassay.systems.python_callable\n"
        "import voxassay.systems.mock, voxassay.systems.testing\n"
        "heavy = {'faster_whisper', 'ctranslate2', 'pocketsphinx', 'httpx', 'soundfile', 'av'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_check_transcriber_accepts_what_the_python_backend_accepts() -> None:
    """A plain callable and a bare transcribe() object run fine under ``python:``; the
    conformance check wraps them the same way instead of refusing them."""

    class Bare:
        def transcribe(self, audio: np.ndarray) -> str:
            return "hello"

    assert check_transcriber(lambda audio, sample_rate: "hello") == []
    assert check_transcriber(Bare()) == []
    # what the backend would refuse is still refused, with the reasons
    problems = check_transcriber(42)
    assert "missing method transcribe()" in problems
    # and a bad plain callable is still caught by the checks themselves
    assert any("str" in p for p in check_transcriber(lambda audio, sample_rate: 7))
