"""openai-compat against a real local HTTP server standing in for the remote API."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxeval.core.audio import load_audio
from voxeval.core.errors import SpecError, SystemOutputError
from voxeval.core.registry import REGISTRY
from voxeval.core.specs import parse_spec
from voxeval.systems.base import Transcript
from voxeval.systems.openai_compat import APIStatusError, OpenAICompatTranscriber, build
from voxeval.systems.testing import check_transcriber

try:
    from fake_openai_server import FakeOpenAIServer
except ImportError:  # tests laid out as packages
    from tests.systems.fake_openai_server import FakeOpenAIServer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CLIP = DATA / "read_speech" / "ljspeech" / "LJ001-0002.wav"
SECRET = "sk-test-0123456789abcdefSECRETVALUE"
KEY_ENV = "VOXEVAL_TEST_OPENAI_KEY"


@pytest.fixture
def clip() -> np.ndarray:
    if not CLIP.exists():
        pytest.skip(f"../shared/data not found: {CLIP}")
    return load_audio(CLIP).samples


def make(server: FakeOpenAIServer, **opts: str) -> OpenAICompatTranscriber:
    query = "&".join(f"{k}={v}" for k, v in {"key_env": KEY_ENV, "backoff": "0.01", **opts}.items())
    system = build(parse_spec(f"openai-compat:{server.base_url}?{query}"), "transcribe")
    system.load()
    return system


def test_request_format_auth_and_parsed_words(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(token=SECRET) as server:
        out = make(server, model="tiny-test").transcribe(clip)
    assert isinstance(out, Transcript)
    assert out.text == "in being comparatively modern."
    assert [w.word for w in out.words or []] == ["in", "being", "comparatively", "modern"]
    assert out.words is not None and out.words[-1].end == pytest.approx(1.68)
    assert out.language == "english"
    (req,) = server.requests
    assert req["path"] == "/v1/audio/transcriptions"
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
    f = req["fields"]
    assert f["model"] == ["tiny-test"]
    assert f["response_format"] == ["verbose_json"]
    assert f["language"] == ["en"]
    assert f["temperature"] == ["0"]
    assert f["timestamp_granularities[]"] == ["word"]
    filename, payload, ctype = req["files"]["file"]
    assert filename.endswith(".wav") and ctype == "audio/wav"
    info = sf.info(io.BytesIO(payload))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    decoded, _ = sf.read(io.BytesIO(payload), dtype="float32")
    assert decoded.shape == clip.shape
    assert np.max(np.abs(decoded - clip)) < 1e-3  # the real audio went over the wire


def test_no_key_means_no_authorization_header(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(token=None) as server:
        out = make(server).transcribe(clip)
    assert out.text
    assert "Authorization" not in server.requests[0]["headers"]


def test_wrong_key_error_has_status_and_body_but_never_the_key(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(token="the-right-token") as server:
        system = make(server)
        with pytest.raises(APIStatusError) as err:
            system.transcribe(clip)
    message = str(err.value)
    assert err.value.status == 401
    assert "401" in message and "Incorrect API key" in message
    assert SECRET not in message and SECRET[:8] not in message
    assert len(server.requests) == 1  # 4xx is not retried
    described = json.dumps(system.describe())
    assert SECRET not in described and SECRET not in repr(system)
    assert SECRET not in json.dumps(vars(system), default=str)
    assert system.describe()["key_present"] is True


def test_500_is_retried_then_reported(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(mode="error500") as server, pytest.raises(APIStatusError) as err:
        make(server, retries="2").transcribe(clip)
    assert len(server.requests) == 3
    assert "500" in str(err.value) and "internal failure" in str(err.value)


def test_429_then_ok_succeeds(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(mode="ratelimit_then_ok", fail_times=2) as server:
        out = make(server, retries="2").transcribe(clip)
    assert out.text == "in being comparatively modern."
    assert len(server.requests) == 3


def test_429_beyond_retries_fails(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    server = FakeOpenAIServer(mode="ratelimit_then_ok", fail_times=5)
    with server, pytest.raises(APIStatusError, match="429"):
        make(server, retries="1").transcribe(clip)
    assert len(server.requests) == 2


@pytest.mark.parametrize("mode", ["invalid_json", "missing_text"])
def test_unparseable_answers(clip: np.ndarray, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(mode=mode) as server, pytest.raises(SystemOutputError):
        make(server).transcribe(clip)


def test_slow_server_times_out(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(mode="sleep", sleep_s=5.0) as server:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="timeout"):
            make(server, timeout="0.5").transcribe(clip)
        assert time.monotonic() - t0 < 3.0
    assert len(server.requests) == 1  # a timeout is not retried


def test_plain_text_and_segment_nested_words(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(text=" hello there \n") as server:
        out = make(server, response_format="text").transcribe(clip)
    assert out.text == "hello there" and out.words is None
    assert "timestamp_granularities[]" not in server.requests[0]["fields"]
    with FakeOpenAIServer(mode="ok_segment_words") as server:
        out = make(server).transcribe(clip)
    assert [w.word for w in out.words or []] == ["in", "being", "comparatively", "modern"]


def test_malformed_words_are_unparseable(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    server = FakeOpenAIServer(words=[{"word": "in", "start": "soon"}])
    with server, pytest.raises(SystemOutputError, match="numeric"):
        make(server).transcribe(clip)


def test_unreachable_server_reports_url(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer() as server:
        url = server.base_url
    system = build(parse_spec(f"openai-compat:{url}?retries=1&backoff=0.01"), "transcribe")
    with pytest.raises(ConnectionError, match="2 attempt"):
        system.transcribe(clip)


def test_conforms_with_check_helper(clip: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    short = [{"word": "in", "start": 0.0, "end": 0.3}, {"word": "being", "start": 0.3, "end": 0.9}]
    with FakeOpenAIServer(token=SECRET, words=short) as server:
        problems = check_transcriber(make(server), clip)
    assert problems == []
    # the canned 1.9 s words do not fit the helper's 1 s of silence: the helper must say so
    with FakeOpenAIServer(token=SECRET) as server:
        problems = check_transcriber(make(server), clip)
    assert any("silence_1s" in p and "outside the audio" in p for p in problems)


def test_spec_validation() -> None:
    with pytest.raises(SpecError, match="base URL"):
        REGISTRY.build("transcribe", "openai-compat")
    with pytest.raises(SpecError, match="http"):
        REGISTRY.build("transcribe", "openai-compat:ftp://host/v1")
    with pytest.raises(SpecError, match="unknown"):
        REGISTRY.build("transcribe", "openai-compat:http://h/v1?temprature=0")
    with pytest.raises(SpecError, match="response_format"):
        REGISTRY.build("transcribe", "openai-compat:http://h/v1?response_format=srt")
    system = REGISTRY.build("transcribe", "openai-compat:http://h:1/v1/?model=m&timeout=5")
    assert isinstance(system, OpenAICompatTranscriber)
    assert system.url == "http://h:1/v1/audio/transcriptions"
    assert system.describe()["timeout_s"] == 5.0
