"""openai-compat against a real local HTTP server standing in for the remote API."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxassay.core.audio import Audio, load_audio
from voxassay.core.errors import InputError, SpecError, SystemOutputError
from voxassay.core.registry import REGISTRY
from voxassay.core.specs import parse_spec
from voxassay.systems.audio_output import EmptyAudioError
from voxassay.systems.base import Transcript
from voxassay.systems.openai_chat import OpenAICompatUnderstander
from voxassay.systems.openai_compat import APIStatusError, OpenAICompatTranscriber, build
from voxassay.systems.openai_speech import OpenAICompatSynthesizer
from voxassay.systems.testing import check_transcriber, check_understander

pytestmark = pytest.mark.live

try:
    from fake_openai_server import FakeOpenAIServer, clip_digest
except ImportError:  # tests laid out as packages
    from tests.systems.fake_openai_server import FakeOpenAIServer, clip_digest

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CLIP = DATA / "read_speech" / "ljspeech" / "LJ001-0002.wav"
SECRET = "sk-test-0123456789abcdefSECRETVALUE"
KEY_ENV = "VOXASSAY_TEST_OPENAI_KEY"


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
    with (
        FakeOpenAIServer(mode="sleep", sleep_s=5.0) as server,
        pytest.raises(TimeoutError, match="timeout"),  # not the answer it sends at 5 s
    ):
        make(server, timeout="0.5").transcribe(clip)
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


# --- understand: /v1/chat/completions with input_audio parts ------------------------------


def make_understander(server: FakeOpenAIServer, **opts: str) -> OpenAICompatUnderstander:
    query = "&".join(f"{k}={v}" for k, v in {"key_env": KEY_ENV, "backoff": "0.01", **opts}.items())
    system = REGISTRY.build("understand", f"openai-compat:{server.base_url}?{query}")
    assert isinstance(system, OpenAICompatUnderstander)
    system.load()
    return system


def test_understand_sends_prompt_and_every_clip_and_reads_the_answer(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    loud = Audio(clip, 16_000)
    quiet = Audio(clip[:8000] * 0.1, 16_000)
    native = load_audio(CLIP, sr=None)  # 22,050 Hz: the adapter must resample to 16 kHz
    with FakeOpenAIServer(token=SECRET) as server:
        system = make_understander(server, model="audio-lm", seed="7", max_tokens="32")
        answer = system.understand([quiet, loud, native], "Which clip is louder?")
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
    body = req["json"]
    assert body["model"] == "audio-lm" and body["temperature"] == 0
    assert body["seed"] == 7 and body["max_tokens"] == 32
    content = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "user"
    assert content[0] == {"type": "text", "text": "Which clip is louder?"}
    assert [p["type"] for p in content[1:]] == ["input_audio"] * 3
    assert all(p["input_audio"]["format"] == "wav" for p in content[1:])
    # the server measured the real audio it received: durations and levels come back
    assert answer.startswith("clips=3; 1: 0.500 s")
    assert "2: 1.900 s" in answer and "3: 1.900 s" in answer and "louder=2" in answer
    assert [sr for _, sr in req["clips"]] == [16_000] * 3
    assert np.max(np.abs(req["clips"][1][0] - clip)) < 1e-3
    info = system.describe()
    assert info["temperature"] == 0 and info["seed"] == 7 and info["capability"] == "understand"
    assert SECRET not in json.dumps(info) and SECRET not in repr(system)


def test_understand_scripted_answers_by_clip_digest(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    native = load_audio(CLIP, sr=None)
    table = {clip_digest(native.samples, native.sr): "Answer: sadness"}
    with FakeOpenAIServer(chat_answers=table) as server:
        system = make_understander(server)
        assert system.understand([native], "Name the emotion.") == "Answer: sadness"
        other = system.understand([Audio(clip * 0.5, 16_000)], "Name the emotion.")
    assert other.startswith("clips=1")  # not in the table: the measured description
    assert "seed" not in server.requests[0]["json"]
    assert "max_tokens" not in server.requests[0]["json"]
    assert "Authorization" not in server.requests[0]["headers"]


def test_understand_callable_reply_sees_prompt_and_clips(clip: np.ndarray) -> None:
    def reply(prompt: str, clips: list[tuple[np.ndarray, int]]) -> str:
        return f"{prompt[:5]}|{len(clips)}|{len(clips[0][0])}"

    with FakeOpenAIServer(chat_reply=reply) as server:
        out = make_understander(server).understand([Audio(clip, 16_000)], "Hello there")
    assert out == f"Hello|1|{clip.shape[0]}"


def test_understand_errors_retries_and_timeouts(
    clip: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    audio = [Audio(clip, 16_000)]
    with FakeOpenAIServer(token="other") as server, pytest.raises(APIStatusError) as err:
        make_understander(server).understand(audio, "q")
    assert err.value.status == 401 and SECRET not in str(err.value)
    assert SECRET[:8] not in str(err.value)
    monkeypatch.delenv(KEY_ENV)
    with FakeOpenAIServer(mode="error500") as server, pytest.raises(APIStatusError, match="500"):
        make_understander(server, retries="1").understand(audio, "q")
    assert len(server.requests) == 2
    with FakeOpenAIServer(mode="ratelimit_then_ok", fail_times=1) as server:
        assert make_understander(server).understand(audio, "q").startswith("clips=1")
    assert len(server.requests) == 2
    with (
        FakeOpenAIServer(mode="invalid_json") as server,
        pytest.raises(SystemOutputError, match="non-JSON"),
    ):
        make_understander(server).understand(audio, "q")
    with (
        FakeOpenAIServer(mode="missing_text") as server,
        pytest.raises(SystemOutputError, match="choices"),
    ):
        make_understander(server).understand(audio, "q")
    with (
        FakeOpenAIServer(mode="sleep", sleep_s=5.0) as server,
        pytest.raises(TimeoutError, match="timeout"),  # not the answer it sends at 5 s
    ):
        make_understander(server, timeout="0.4").understand(audio, "q")


def test_understand_refuses_bad_input_before_sending(clip: np.ndarray) -> None:
    with FakeOpenAIServer() as server:
        system = make_understander(server)
        with pytest.raises(InputError, match="at least one"):
            system.understand([], "q")
        with pytest.raises(InputError, match="prompt"):
            system.understand([Audio(clip, 16_000)], "  ")
        with pytest.raises(InputError, match="not voxassay"):
            system.understand([clip], "q")  # type: ignore[list-item]
        with pytest.raises(InputError, match="NaN"):
            system.understand([Audio(np.full(160, np.nan, dtype=np.float32), 16_000)], "q")
    assert server.requests == []
    with pytest.raises(SpecError, match="unknown"):
        REGISTRY.build("understand", "openai-compat:http://h/v1?temperature=1")
    with pytest.raises(SpecError, match="provides"):
        build(parse_spec("openai-compat:http://h/v1"), "duplex")


def test_understander_conforms_with_check_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(token=SECRET) as server:
        assert check_understander(make_understander(server)) == []
    with FakeOpenAIServer(chat_reply=lambda p, c: 42) as server:  # type: ignore[arg-type,return-value]
        problems = check_understander(make_understander(server))
    assert problems  # the fake answered a number as content: not a string answer


# --- synthesize: /v1/audio/speech -------------------------------------------------------


needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng missing")


def make_synth(server: FakeOpenAIServer, **opts: str) -> OpenAICompatSynthesizer:
    query = "&".join(f"{k}={v}" for k, v in {"key_env": KEY_ENV, "backoff": "0.01", **opts}.items())
    system = REGISTRY.build("synthesize", f"openai-compat:{server.base_url}?{query}")
    assert isinstance(system, OpenAICompatSynthesizer)
    system.load()
    return system


@needs_espeak
def test_synthesize_request_and_wav_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    text = "Take forty milligrams of atorvastatin every evening."
    with FakeOpenAIServer(token=SECRET) as server:
        system = make_synth(server, model="tts-test", voice="echo")
        plain = system.synthesize(text)
        styled = system.synthesize(text, voice="alloy", instructions="Speak warmly.")
    first, second = (r["json"] for r in server.requests)
    assert first == {"model": "tts-test", "input": text, "voice": "echo", "response_format": "wav"}
    assert second["instructions"] == "Speak warmly." and second["voice"] == "alloy"
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    for audio in (plain, styled):
        assert isinstance(audio, Audio) and audio.sr == 24_000
        assert audio.samples.dtype == np.float32 and 2.0 < audio.duration < 6.0
        assert np.all(np.isfinite(audio.samples)) and np.max(np.abs(audio.samples)) > 0.05
    assert plain.samples.shape != styled.samples.shape or not np.allclose(
        plain.samples, styled.samples
    )  # a different voice came back
    info = system.describe()
    assert info["instructions_sent_calls"] == 1 and info["voice"] == "echo"
    assert SECRET not in json.dumps(info)


@needs_espeak
def test_synthesize_pcm_and_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    text = "The meeting moved to Thursday the fourth of March."
    with FakeOpenAIServer() as server:
        wav = make_synth(server).synthesize(text)
        pcm = make_synth(server, response_format="pcm").synthesize(text)
        fast = make_synth(server, speed="2.0").synthesize(text)
    assert server.requests[1]["json"]["response_format"] == "pcm"
    assert server.requests[2]["json"]["speed"] == 2.0
    assert pcm.sr == 24_000 and pcm.samples.shape == wav.samples.shape
    assert np.max(np.abs(pcm.samples - wav.samples)) < 1e-3
    assert fast.duration < 0.75 * wav.duration


def test_synthesize_error_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with (
        FakeOpenAIServer(mode="missing_text") as server,
        pytest.raises(SystemOutputError, match="instead of audio"),
    ):
        make_synth(server).synthesize("hello")
    with (
        FakeOpenAIServer(mode="empty_audio") as server,
        pytest.raises(EmptyAudioError, match="empty"),
    ):
        make_synth(server).synthesize("hello")
    with FakeOpenAIServer(token="nope") as server, pytest.raises(APIStatusError) as err:
        make_synth(server).synthesize("hello")
    assert SECRET not in str(err.value) and SECRET[-4:] not in str(err.value)
    with FakeOpenAIServer(mode="sleep", sleep_s=5.0) as server, pytest.raises(TimeoutError):
        make_synth(server, timeout="0.3").synthesize("hello")
    with FakeOpenAIServer() as server, pytest.raises(InputError, match="empty"):
        make_synth(server).synthesize("   ")
    with pytest.raises(SpecError, match="response_format"):
        REGISTRY.build("synthesize", "openai-compat:http://h/v1?response_format=mp3")
    with pytest.raises(SpecError, match="speed"):
        REGISTRY.build("synthesize", "openai-compat:http://h/v1?speed=9")
