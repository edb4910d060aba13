"""The shared Realtime vocabulary: resampling, audio codec, session objects (checked against the
official SDK's models), raw-log elision, and the ``ws://`` spec options."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.systems.duplex.conformance import check
from voxassay.core.errors import SpecError
from voxassay.core.specs import parse_spec
from voxassay.systems.duplex import realtime_ws
from voxassay.systems.duplex.realtime_protocol import (
    AUDIO_OMITTED,
    StreamResampler,
    b64_to_pcm16,
    client_session,
    elide_audio,
    function_tools,
    pcm16_to_b64,
    read_session,
    server_name,
    server_session,
)

pytestmark = pytest.mark.live

DIALECTS = ("ga", "beta")


@pytest.mark.parametrize(("rate_in", "rate_out"), [(16_000, 24_000), (24_000, 16_000)])
def test_streamed_resampling_equals_one_piece_and_keeps_time(rate_in: int, rate_out: int) -> None:
    rng = np.random.default_rng(0)
    x = 0.1 * rng.standard_normal(rate_in)
    rs = StreamResampler(rate_in, rate_out)
    whole = np.concatenate([rs.process(x), rs.flush()])
    assert whole.size == rate_out  # ceil(n * out / in)
    parts, i = [], 0
    while i < x.size:
        n = int(rng.integers(1, 700))
        parts.append(rs.process(x[i : i + n]))
        i += n
    parts.append(rs.flush())
    assert np.array_equal(np.concatenate(parts), whole)
    # a 1 kHz tone keeps its amplitude and its phase: output sample m is time m / rate_out
    t_in = np.arange(rate_in) / rate_in
    y = np.concatenate([rs.process(np.sin(2 * np.pi * 1000 * t_in)), rs.flush()])
    ref = np.sin(2 * np.pi * 1000 * np.arange(y.size) / rate_out)
    assert np.abs(y[100:-100] - ref[100:-100]).max() < 1e-3
    # holdback is about a millisecond, not a block
    first = StreamResampler(rate_in, rate_out).process(np.zeros(rate_in // 50))
    assert rate_out // 50 - first.size <= rate_out // 500


def test_resampler_rejects_content_above_the_lower_nyquist() -> None:
    sr = 24_000
    tone = np.sin(2 * np.pi * 10_000 * np.arange(sr) / sr)  # above 8 kHz: must not alias
    rs = StreamResampler(sr, 16_000)
    y = np.concatenate([rs.process(tone), rs.flush()])
    assert np.sqrt(np.mean(y[200:-200] ** 2)) < 0.01


def test_pcm16_codec_round_trip_and_errors() -> None:
    pcm = np.array([0, 1, -1, 32767, -32768], np.int16)
    assert np.array_equal(b64_to_pcm16(pcm16_to_b64(pcm)), pcm)
    with pytest.raises(ValueError, match="base64"):
        b64_to_pcm16("not base64!!")
    with pytest.raises(ValueError, match="even number of bytes"):
        b64_to_pcm16(base64.b64encode(b"\x00\x01\x02").decode())


def test_elide_audio_keeps_the_size_and_never_the_payload() -> None:
    audio = pcm16_to_b64(np.zeros(480, np.int16))
    for ev in (
        {"type": "input_audio_buffer.append", "audio": audio},
        {"type": "response.output_audio.delta", "delta": audio, "item_id": "i"},
        {"type": "response.audio.delta", "delta": audio, "item_id": "i"},
    ):
        out = elide_audio(ev)
        key = "audio" if "audio" in ev else "delta"
        assert out[key] == AUDIO_OMITTED.format(n=960)
        assert ev[key] == audio  # the original is untouched
    other = {"type": "response.output_audio_transcript.delta", "delta": "hello"}
    assert elide_audio(other) == other


def test_server_names_per_dialect() -> None:
    assert server_name("response.output_audio.delta", "ga") == "response.output_audio.delta"
    assert server_name("response.output_audio.delta", "beta") == "response.audio.delta"
    assert server_name("response.done", "beta") == "response.done"


TOOL = SimpleNamespace(
    name="book_appointment",
    description="Book a slot",
    arguments={
        "type": "object",
        "properties": {"date": {"type": "string"}},
        "required": ["date"],
    },
)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("turn", ["server_vad", "manual"])
def test_client_session_update_conforms_and_reads_back(dialect: Any, turn: Any) -> None:
    tools = function_tools([TOOL], dialect)
    session = client_session(
        dialect,
        turn=turn,
        tools=tools,
        voice="alloy",
        instructions="Be brief.",
        transcribe="whisper-1",
        vad={"silence_duration_ms": 400},
    )
    model = check(dialect, "client", {"type": "session.update", "session": session})
    assert model.type == "session.update"  # type: ignore[attr-defined]
    settings, problems = read_session(session)
    assert problems == []
    assert settings["turn"] == turn
    assert settings["tools"][0]["name"] == "book_appointment"
    assert settings["tools"][0]["parameters"]["required"] == ["date"]
    assert settings["instructions"] == "Be brief."


@pytest.mark.parametrize("dialect", DIALECTS)
def test_server_session_objects_conform(dialect: Any) -> None:
    settings = {"turn": "manual", "tools": function_tools([TOOL], dialect), "instructions": "x"}
    for etype in ("session.created", "session.updated"):
        doc = server_session(dialect, settings, "sess_1", "voxassay-reference")
        check(dialect, "server", {"type": etype, "event_id": "event_1", "session": doc})


def test_conformance_check_can_fail() -> None:
    """The check is not a rubber stamp: missing, misspelt and wrong-dialect fields fail."""
    good = {
        "type": "conversation.item.truncate",
        "item_id": "item_1",
        "content_index": 0,
        "audio_end_ms": 1200,
    }
    check("ga", "client", good)
    with pytest.raises(AssertionError, match="does not validate"):
        check("ga", "client", {k: v for k, v in good.items() if k != "audio_end_ms"})
    with pytest.raises(AssertionError, match="does not know"):
        check("ga", "client", {**good, "audio_end_msec": 3})
    delta = {
        "type": "response.output_audio.delta",
        "event_id": "e",
        "response_id": "r",
        "item_id": "i",
        "output_index": 0,
        "content_index": 0,
        "delta": "AAAA",
    }
    check("ga", "server", delta)
    with pytest.raises(AssertionError):
        check("beta", "server", delta)  # beta calls it response.audio.delta


def test_read_session_refuses_formats_it_cannot_serve() -> None:
    _, problems = read_session({"input_audio_format": "g711_ulaw"})
    assert problems and "not supported" in problems[0]
    _, problems = read_session({"audio": {"input": {"format": {"type": "audio/pcmu"}}}})
    assert problems
    _, problems = read_session(
        {"audio": {"output": {"format": {"type": "audio/pcm", "rate": 8000}}}}
    )
    assert problems
    _, problems = read_session({"tools": "nope"})
    assert problems
    settings, problems = read_session({})
    assert settings == {} and problems == []


def test_spec_options_come_out_of_the_url_and_the_rest_stays() -> None:
    spec = parse_spec(
        "wss://api.example.test/v1/realtime?model=gpt-realtime&protocol=beta&turn_detection=manual"
        "&key_env=MY_KEY&connect_timeout_s=2.5"
    )
    factory = realtime_ws.build(spec, "duplex")
    assert factory.url == "wss://api.example.test/v1/realtime?model=gpt-realtime"
    assert factory.options == {
        "protocol": "beta",
        "turn": "manual",
        "key_env": "MY_KEY",
        "connect_timeout_s": 2.5,
    }
    link = factory()
    assert isinstance(link, realtime_ws.RealtimeAgentLink)
    assert link.protocol == "beta" and link.turn == "manual"
    assert factory.info["url"] == "wss://api.example.test/v1/realtime?model=gpt-realtime"
    with pytest.raises(SpecError):
        realtime_ws.build(parse_spec("ws://127.0.0.1:1/?protocol=v9"), "duplex")
    with pytest.raises(SpecError):
        realtime_ws.build(parse_spec("ws://127.0.0.1:1/"), "transcribe")


def test_secrets_in_urls_are_redacted_in_the_recorded_info() -> None:
    link = realtime_ws.RealtimeAgentLink("wss://user:pw@host.test/rt?api_key=SECRET&model=m")
    assert "SECRET" not in str(link.info) and "pw" not in str(link.info)
    assert "model=m" in link.info["url"]
