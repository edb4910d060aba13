"""The mock transcriber: every mode, fail_every accounting, table lookups on real audio."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import load_audio
from voxassay.core.errors import InputError, SpecError, SystemOutputError
from voxassay.core.registry import REGISTRY
from voxassay.systems.base import Transcript
from voxassay.systems.mock import MockTranscriber, audio_key, write_table
from voxassay.systems.python_callable import coerce_transcript
from voxassay.systems.testing import check_transcriber

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LJ = DATA / "read_speech" / "ljspeech"


def mock(spec: str) -> MockTranscriber:
    system = REGISTRY.build("transcribe", spec)
    assert isinstance(system, MockTranscriber)
    system.load()
    return system


@pytest.fixture
def clips() -> dict[str, np.ndarray]:
    names = ["LJ001-0002", "LJ001-0004"]
    paths = [LJ / f"{n}.wav" for n in names]
    missing = [p for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"../shared/data not found: {missing[0]}")
    return {n: load_audio(p).samples for n, p in zip(names, paths, strict=True)}


SILENCE = np.zeros(16000, dtype=np.float32)


def test_default_is_silence_and_fixed_returns_text() -> None:
    assert mock("mock").transcribe(SILENCE).text == ""
    out = mock("mock:fixed?text=hello world").transcribe(SILENCE)
    assert isinstance(out, Transcript) and out.text == "hello world"


def test_fail_raises_and_garble_breaks_the_protocol() -> None:
    with pytest.raises(RuntimeError, match=r"^mock failure$"):
        mock("mock:fail").transcribe(SILENCE)
    garbled = mock("mock:garble").transcribe(SILENCE)
    assert not isinstance(garbled, Transcript | str)  # the runner must see a broken answer
    with pytest.raises(SystemOutputError, match="without a string 'text'"):
        coerce_transcript(garbled)
    problems = check_transcriber("mock:garble")
    assert problems and "not Transcript" in problems[0]


def test_fail_every_is_deterministic() -> None:
    system = mock("mock:fixed?text=a&fail_every=3")
    outcomes = []
    for _ in range(7):
        try:
            outcomes.append(system.transcribe(SILENCE).text)
        except RuntimeError:
            outcomes.append("FAIL")
    assert outcomes == ["a", "a", "FAIL", "a", "a", "FAIL", "a"]


def test_hang_sleeps_for_seconds() -> None:
    system = mock("mock:hang?seconds=0.3&text=late")
    t0 = time.monotonic()
    out = system.transcribe(SILENCE)
    assert time.monotonic() - t0 >= 0.3
    assert out.text == "late"
    assert mock("mock:hang").seconds == 3600.0


def test_table_maps_real_audio_by_sha1(clips: dict[str, np.ndarray], tmp_path: Path) -> None:
    a, b = clips["LJ001-0002"], clips["LJ001-0004"]
    assert audio_key(a) != audio_key(b)
    assert audio_key(a) == audio_key(a.copy())
    table = write_table(
        tmp_path / "table.json",
        {
            audio_key(a): "in being comparatively modern",
            audio_key(b): {
                "text": "produced the block books",
                "words": [{"word": "produced", "start": 0.1, "end": 0.6}],
            },
        },
    )
    system = mock(f"mock:table:{table}?default=UNKNOWN")
    assert system.transcribe(a).text == "in being comparatively modern"
    out_b = system.transcribe(b)
    assert out_b.text == "produced the block books"
    assert out_b.words is not None and out_b.words[0].end == 0.6
    # one sample changed: different key, so the default answers
    changed = a.copy()
    changed[100] += 1e-3
    assert system.transcribe(changed).text == "UNKNOWN"
    assert mock(f"mock:{table}").transcribe(a).text == "in being comparatively modern"
    assert system.describe()["table_entries"] == 2


def test_table_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        REGISTRY.build("transcribe", f"mock:table:{tmp_path / 'nope.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        REGISTRY.build("transcribe", f"mock:table:{bad}")
    with pytest.raises(SpecError, match="needs a JSON file"):
        REGISTRY.build("transcribe", "mock:table")
    garbled = write_table(tmp_path / "g.json", {audio_key(SILENCE): 42})
    with pytest.raises(SystemOutputError):
        mock(f"mock:table:{garbled}").transcribe(SILENCE)


def test_spec_errors() -> None:
    with pytest.raises(SpecError, match="modes: silence"):
        REGISTRY.build("transcribe", "mock:echo")
    with pytest.raises(SpecError, match=r"unknown mock transcribe option\(s\) txt.*known: default"):
        REGISTRY.build("transcribe", "mock:fixed?txt=a")
    with pytest.raises(SpecError):
        REGISTRY.build("transcribe", "mock:fixed?fail_every=two")


def test_mock_conforms(clips: dict[str, np.ndarray]) -> None:
    assert check_transcriber("mock:fixed?text=hi", clips["LJ001-0002"], check_repeat=True) == []
    problems = check_transcriber("mock:fail")
    assert problems and "mock failure" in problems[0]
