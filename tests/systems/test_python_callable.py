"""python:module:factory adapters built from real modules written to a temporary directory."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import Audio, load_audio
from voxassay.core.errors import InputError, SpecError, SystemOutputError
from voxassay.core.registry import REGISTRY
from voxassay.core.specs import parse_spec
from voxassay.systems.audio_output import EmptyAudioError
from voxassay.systems.base import Transcript, Word
from voxassay.systems.python_callable import (
    CallableSynthesizer,
    CallableTranscriber,
    CallableUnderstander,
    coerce_transcript,
)
from voxassay.systems.python_callable import (
    build as build_python,
)
from voxassay.systems.testing import check_synthesizer, check_transcriber, check_understander

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CLIP = DATA / "read_speech" / "ljspeech" / "LJ001-0002.wav"

USER_MODULE = '''
import numpy as np
from voxassay.systems.base import Transcript

__version__ = "1.2.3"

class Energy:
    """Answers with the clip length and RMS, so tests can see the real audio arrived."""

    sample_rate = 16000

    def __init__(self, answer="transcript", scale="1"):
        self.answer = answer
        self.scale = float(scale)
        self.loaded = 0

    def load(self):
        self.loaded += 1

    def transcribe(self, audio):
        rms = float(np.sqrt(np.mean(np.square(audio)))) * self.scale
        text = f"{audio.shape[0]} {rms:.4f}"
        if self.answer == "transcript":
            return Transcript(text, language="en")
        if self.answer == "str":
            return text
        if self.answer == "dict":
            return {"pred_text": text, "words": [{"word": "x", "start": 0.0, "end": 0.5}]}
        if self.answer == "int":
            return 7
        if self.answer == "nodict":
            return {"label": text}
        if self.answer == "badwords":
            return {"text": text, "words": [{"word": "x", "start": None, "end": 1}]}
        raise ValueError(self.answer)

    def describe(self):
        return {"name": "energy", "scale": self.scale}


def make_energy(**options):
    return Energy(**options)


def make_function(prefix="n="):
    def run(audio, sample_rate):
        return f"{prefix}{audio.shape[0]}@{sample_rate}"
    return run


def make_nothing():
    return 42


def broken_factory():
    raise RuntimeError("factory exploded")

NOT_CALLABLE = 5
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"voxassay_user_asr_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def clip() -> np.ndarray:
    if not CLIP.exists():
        pytest.skip(f"../shared/data not found: {CLIP}")
    return load_audio(CLIP).samples


def build(spec: str) -> CallableTranscriber:
    system = REGISTRY.build("transcribe", spec)
    assert isinstance(system, CallableTranscriber)
    system.load()
    return system


def test_object_factory_gets_options_and_real_audio(user_module: str, clip: np.ndarray) -> None:
    system = build(f"python:{user_module}:make_energy?scale=2")
    assert system.obj.loaded == 1 and system.obj.scale == 2.0
    out = system.transcribe(clip)
    n, rms = out.text.split()
    assert int(n) == clip.shape[0] == pytest.approx(1.9 * 16000, abs=16)
    expected = 2 * float(np.sqrt(np.mean(np.square(clip))))
    assert float(rms) == pytest.approx(expected, abs=1e-4) and expected > 0.01
    info = system.describe()
    assert info["kind"] == "object" and info["module_version"] == "1.2.3"
    assert info["system"] == {"name": "energy", "scale": 2.0}
    assert info["options"] == {"scale": "2"}
    json.dumps(info)


@pytest.mark.parametrize("answer", ["transcript", "str", "dict"])
def test_accepted_answer_shapes(user_module: str, answer: str) -> None:
    out = build(f"python:{user_module}:make_energy?answer={answer}").transcribe(
        np.full(800, 0.5, dtype=np.float32)
    )
    assert isinstance(out, Transcript) and out.text == "800 0.5000"
    if answer == "dict":
        assert out.words == [Word("x", 0.0, 0.5, None)]


@pytest.mark.parametrize("answer", ["int", "nodict", "badwords"])
def test_unusable_answers_are_system_output_errors(user_module: str, answer: str) -> None:
    system = build(f"python:{user_module}:make_energy?answer={answer}")
    with pytest.raises(SystemOutputError):
        system.transcribe(np.zeros(160, dtype=np.float32))


def test_plain_callable_receives_sample_rate(user_module: str, clip: np.ndarray) -> None:
    system = build(f"python:{user_module}:make_function?prefix=len")
    assert system.kind == "callable"
    assert system.transcribe(clip).text == f"len{clip.shape[0]}@16000"
    assert check_transcriber(system, clip) == []


def test_import_and_attribute_errors(user_module: str) -> None:
    with pytest.raises(
        InputError, match=r"not found in the current directory .* module search path"
    ):
        REGISTRY.build("transcribe", "python:voxassay_no_such_module_xyz:make")
    with pytest.raises(InputError) as err:
        REGISTRY.build("transcribe", f"python:{user_module}:make_energi")
    assert "make_energy" in str(err.value) and "make_function" in str(err.value)
    with pytest.raises(SpecError, match="module:factory"):
        REGISTRY.build("transcribe", f"python:{user_module}")
    with pytest.raises(InputError, match="not a callable"):
        REGISTRY.build("transcribe", f"python:{user_module}:NOT_CALLABLE")
    with pytest.raises(InputError, match="no transcribe"):
        REGISTRY.build("transcribe", f"python:{user_module}:make_nothing")
    with pytest.raises(InputError, match="factory exploded"):
        REGISTRY.build("transcribe", f"python:{user_module}:broken_factory")
    with pytest.raises(InputError, match="unexpected keyword"):
        REGISTRY.build("transcribe", f"python:{user_module}:make_function?nope=1")


def test_coerce_transcript_rules() -> None:
    assert coerce_transcript("hi").text == "hi"
    assert coerce_transcript({"text": "a", "language": "en"}).language == "en"
    words = coerce_transcript({"text": "a", "words": [Word("a", 0.1, 0.2, 0.9)]}).words
    assert words == [Word("a", 0.1, 0.2, 0.9)]
    for bad in (None, b"bytes", ["a"], {"text": 3}, Transcript(text=5)):  # type: ignore[arg-type]
        with pytest.raises(SystemOutputError):
            coerce_transcript(bad)
    with pytest.raises(SystemOutputError, match="non-finite"):
        coerce_transcript({"text": "a", "words": [{"word": "a", "start": float("nan"), "end": 1}]})


SYNTH_MODULE = '''
import numpy as np
from voxassay.core.audio import Audio, load_audio

CLIP = None


def _speech(path, seconds):
    audio = load_audio(path, sr=None)
    return audio.samples[: int(seconds * audio.sr)], audio.sr


class Reader:
    """Returns a slice of a real recording, as long as the text asks (0.06 s per char)."""

    def __init__(self, path, answer="audio"):
        self.path = path
        self.answer = answer
        self.sample_rate = 22050
        self.calls = []

    def synthesize(self, text, voice, instructions):
        self.calls.append((text, voice, instructions))
        samples, sr = _speech(self.path, min(1.9, 0.06 * len(text)))
        if self.answer == "audio":
            return Audio(samples, sr)
        if self.answer == "array":
            return samples
        if self.answer == "int16":
            return (np.round(samples * 32767).astype(np.int16), sr)
        if self.answer == "nan":
            return Audio(np.full(100, np.nan, dtype=np.float32), sr)
        if self.answer == "empty":
            return Audio(np.zeros(0, dtype=np.float32), sr)
        if self.answer == "wrongrate":
            return Audio(samples, 16000)
        if self.answer == "none":
            return None
        raise ValueError(self.answer)


def make_reader(path, answer="audio"):
    return Reader(path, answer)


def make_synth_function(path, shape="tuple"):
    def speak(text, voice=None, instructions=None):
        samples, sr = _speech(path, 1.0)
        if shape == "tuple":
            return samples, sr
        if shape == "dict":
            return {"audio": samples, "sample_rate": sr}
        if shape == "badrate":
            return samples, "fast"
        return {"wave": samples}
    return speak


class Listener:
    def __init__(self, answer="str"):
        self.answer = answer

    def understand(self, audio_parts, prompt):
        if self.answer != "str":
            return {"answer": "yes"}
        return f"{len(audio_parts)} clips, {audio_parts[0].sr} Hz, prompt {prompt!r}"


def make_listener(answer="str"):
    return Listener(answer)


def make_listen_function():
    return lambda audio_parts, prompt: " ".join(f"{a.duration:.2f}" for a in audio_parts)


def make_nothing():
    return 42
'''


@pytest.fixture
def synth_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    if not CLIP.exists():
        pytest.skip(f"../shared/data not found: {CLIP}")
    name = f"voxassay_user_tts_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(SYNTH_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_synthesizer_object_gets_voice_and_instructions(synth_module: str) -> None:
    system = REGISTRY.build("synthesize", f"python:{synth_module}:make_reader?path={CLIP}")
    assert isinstance(system, CallableSynthesizer) and system.sample_rate == 22050
    system.load()
    audio = system.synthesize("Hello there, world.", "narrator", "Speak slowly.")
    assert isinstance(audio, Audio) and audio.sr == 22050
    assert audio.duration == pytest.approx(0.06 * 19, abs=0.01)
    real = load_audio(CLIP, sr=None).samples
    assert np.array_equal(audio.samples, real[: audio.samples.size])
    assert system.obj.calls == [("Hello there, world.", "narrator", "Speak slowly.")]
    assert check_synthesizer(system) == []
    info = system.describe()
    assert info["capability"] == "synthesize" and info["sample_rate"] == 22050
    json.dumps(info)


@pytest.mark.parametrize("answer", ["array", "int16"])
def test_synthesizer_accepts_arrays_and_int16(synth_module: str, answer: str) -> None:
    spec = f"python:{synth_module}:make_reader?path={CLIP}&answer={answer}"
    audio = REGISTRY.build("synthesize", spec).synthesize("Hello there.")
    real = load_audio(CLIP, sr=None).samples[: audio.samples.size]
    assert audio.sr == 22050 and audio.samples.dtype == np.float32
    assert np.max(np.abs(audio.samples - real)) < 1e-4


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        ("nan", EmptyAudioError, "NaN"),
        ("empty", EmptyAudioError, "0 samples"),
        ("wrongrate", SystemOutputError, "declares sample_rate 22050"),
        ("none", SystemOutputError, "NoneType"),
    ],
)
def test_synthesizer_bad_outputs(
    synth_module: str, answer: str, error: type[Exception], message: str
) -> None:
    spec = f"python:{synth_module}:make_reader?path={CLIP}&answer={answer}"
    with pytest.raises(error, match=message) as err:
        REGISTRY.build("synthesize", spec).synthesize("Hello.")
    if error is EmptyAudioError:
        assert err.value.kind == "empty_audio"  # type: ignore[attr-defined]


def test_synthesizer_plain_callable_shapes(synth_module: str) -> None:
    for shape in ("tuple", "dict"):
        system = REGISTRY.build(
            "synthesize", f"python:{synth_module}:make_synth_function?path={CLIP}&shape={shape}"
        )
        assert system.kind == "callable" and system.sample_rate == 0
        audio = system.synthesize("Hi.", voice="v", instructions=None)
        assert audio.sr == 22050 and audio.duration == pytest.approx(1.0, abs=0.001)
        assert system.sample_rate == 22050
    for shape, message in (("badrate", "not an integer"), ("nokeys", "keys: wave")):
        system = REGISTRY.build(
            "synthesize", f"python:{synth_module}:make_synth_function?path={CLIP}&shape={shape}"
        )
        with pytest.raises(SystemOutputError, match=message):
            system.synthesize("Hi.")


def test_understander_object_and_callable(synth_module: str) -> None:
    clip = load_audio(CLIP, sr=None)
    system = REGISTRY.build("understand", f"python:{synth_module}:make_listener")
    assert isinstance(system, CallableUnderstander)
    system.load()
    assert system.understand([clip, clip], "Same speaker?") == (
        "2 clips, 22050 Hz, prompt 'Same speaker?'"
    )
    assert check_understander(system) == []
    bad = REGISTRY.build("understand", f"python:{synth_module}:make_listener?answer=dict")
    with pytest.raises(SystemOutputError, match="must return the answer as a str"):
        bad.understand([clip], "q")
    assert any("raised" in p for p in check_understander(bad))
    plain = REGISTRY.build("understand", f"python:{synth_module}:make_listen_function")
    assert plain.understand([clip, Audio(clip.samples[:11025], 22050)], "q") == "1.90 0.50"
    assert plain.describe()["capability"] == "understand"
    with pytest.raises(InputError, match="no understand"):
        REGISTRY.build("understand", f"python:{synth_module}:make_nothing")
    with pytest.raises(InputError, match="no synthesize"):
        REGISTRY.build("synthesize", f"python:{synth_module}:make_nothing")
    with pytest.raises(SpecError, match="provides"):
        build_python(parse_spec(f"python:{synth_module}:make_listener"), "align")
