"""PocketSphinx with the en-us model from its wheel, on real clips and on digital silence."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import load_audio, rms_dbfs
from voxassay.core.errors import SpecError
from voxassay.core.registry import REGISTRY
from voxassay.systems.pocketsphinx import PocketSphinxTranscriber, clean_token, to_pcm16
from voxassay.systems.testing import check_transcriber

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LJ = DATA / "read_speech" / "ljspeech"
FILLER = re.compile(r"<|>|\[|\]|\+\+|\(\d+\)")


def words_of(text: str) -> set[str]:
    return set(re.sub(r"[^a-z' ]", " ", text.lower()).split())


@pytest.fixture(scope="module")
def sphinx() -> PocketSphinxTranscriber:
    system = REGISTRY.build("transcribe", "pocketsphinx")
    assert isinstance(system, PocketSphinxTranscriber)
    system.load()
    return system


def clip(name: str) -> tuple[np.ndarray, str]:
    path = LJ / f"{name}.wav"
    if not path.exists():
        pytest.skip(f"../shared/data not found: {path}")
    manifest = (DATA / "read_speech" / "manifest.csv").read_text(encoding="utf-8")
    line = next(ln for ln in manifest.splitlines() if ln.startswith(f"ljspeech/{name}.wav"))
    reference = line.split(",", 1)[1].split(",LJ,")[0].strip('"')
    return load_audio(path).samples, reference


@pytest.mark.slow
@pytest.mark.parametrize("name", ["LJ001-0001", "LJ001-0002"])
def test_clean_clip_gives_reference_words(sphinx: PocketSphinxTranscriber, name: str) -> None:
    audio, reference = clip(name)
    out = sphinx.transcribe(audio)
    assert out.text.strip()
    assert words_of(out.text) & words_of(reference), (out.text, reference)
    assert not FILLER.search(out.text)
    assert out.words is not None and [w.word for w in out.words] == out.text.split()
    duration = audio.shape[0] / 16000
    starts = [w.start for w in out.words]
    assert starts == sorted(starts)
    assert all(0.0 <= w.start <= w.end <= duration for w in out.words)
    assert all(w.prob is not None and 0.0 <= w.prob <= 1.0 for w in out.words)


@pytest.mark.slow
def test_digital_silence_does_not_crash_or_hallucinate(sphinx: PocketSphinxTranscriber) -> None:
    zeros = np.zeros(16000, dtype=np.float32)
    out = sphinx.transcribe(zeros)
    assert out.text == ""  # without dither the decoder answers "dog" on pure zeros
    assert not np.any(zeros)  # dither is applied to a copy
    assert sphinx.transcribe(np.zeros(80, dtype=np.float32)).text == ""  # 5 ms
    assert sphinx.transcribe(np.zeros(0, dtype=np.float32)).text == ""


@pytest.mark.slow
def test_result_does_not_depend_on_previous_clips(sphinx: PocketSphinxTranscriber) -> None:
    a, _ = clip("LJ001-0002")
    b, _ = clip("LJ001-0003")
    first = sphinx.transcribe(a)
    b_after_a = sphinx.transcribe(b)
    again = sphinx.transcribe(a)
    assert (first.text, first.words) == (again.text, again.words)
    fresh = REGISTRY.build("transcribe", "pocketsphinx")
    fresh_b = fresh.transcribe(b)  # also loads lazily
    assert (fresh_b.text, fresh_b.words) == (b_after_a.text, b_after_a.words)


def test_dither_level_and_seed() -> None:
    zeros = np.zeros(48000, dtype=np.float32)
    pcm = to_pcm16(zeros)
    assert pcm.dtype == np.int16
    assert rms_dbfs(pcm.astype(np.float32) / 32767) == pytest.approx(-60.0, abs=0.5)
    assert np.array_equal(pcm, to_pcm16(zeros))
    assert not np.array_equal(pcm, to_pcm16(zeros, seed=1))
    assert not np.any(to_pcm16(zeros, dither_dbfs=float("-inf")))
    loud = to_pcm16(np.array([2.0, -2.0, 0.5], dtype=np.float32), dither_dbfs=float("-inf"))
    assert loud.tolist() == [32767, -32767, 16384]


def test_clean_token() -> None:
    assert clean_token("the(2)") == "the"
    assert clean_token("with(12)") == "with"
    for filler in ("<s>", "</s>", "<sil>", "[NOISE]", "++UH++", "", "  "):
        assert clean_token(filler) is None
    assert clean_token("don't") == "don't"


@pytest.mark.slow
def test_config_passthrough_and_describe() -> None:
    system = REGISTRY.build("transcribe", "pocketsphinx?beam=1e-40&dither_dbfs=-70&seed=3")
    assert isinstance(system, PocketSphinxTranscriber)
    system.load()
    info = system.describe()
    json.dumps(info)
    assert info["config_overrides"] == {"beam": "1e-40"}
    assert info["dither_dbfs"] == -70.0 and info["dither_seed"] == 3
    assert info["model_path"] and "en-us" in info["model_path"]
    assert info["versions"]["pocketsphinx"].startswith("5.")
    with pytest.raises(SpecError, match="bogus"):
        REGISTRY.build("transcribe", "pocketsphinx?bogus=1")
    with pytest.raises(SpecError, match="samprate"):
        REGISTRY.build("transcribe", "pocketsphinx?samprate=8000")
    with pytest.raises(SpecError, match="no target"):
        REGISTRY.build("transcribe", "pocketsphinx:en-us")


@pytest.mark.slow
def test_conforms(sphinx: PocketSphinxTranscriber) -> None:
    audio, _ = clip("LJ001-0002")
    assert check_transcriber(sphinx, audio, check_repeat=True) == []
