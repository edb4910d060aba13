"""Import of OpenAI Realtime event logs into the ledger: mapping, ids, clocks, problems, CLI.

The logs are written by hand below: one GA session with server VAD, a tool round trip, a
barge-in (response.cancel + conversation.item.truncate) and a recovery response; the same
session with beta names; WebRTC buffer events; malformed lines; skewed clocks.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from voxassay.cli.duplex import duplex
from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.realtime import CLIENT_PRODUCER, SERVER_PRODUCER
from voxassay.suites.duplex.evidence.ledger import read_events
from voxassay.suites.duplex.evidence.realtime_import import ImportResult, import_realtime_log
from voxassay.suites.duplex.evidence.realtime_records import ONE_SIDED_WINDOW_NS, detect_time_unit
from voxassay.suites.duplex.evidence.validate import validate_path

Step = tuple[float, str, dict[str, Any]]
S = "server"
C = "client"


def audio(ms: float, rate: int = 24_000, width: int = 2) -> str:
    """Base64 of ``ms`` of silence in the given format (what a delta carries)."""
    return base64.b64encode(bytes(round(rate * ms / 1000) * width)).decode()


GA_SESSION_CONFIG = {
    "type": "realtime",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "turn_detection": {"type": "server_vad", "create_response": True},
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
    },
}


def ga_session() -> list[Step]:
    """A GA session as the client logged it: send times for its own events, arrival times
    for the server's, all on the client's clock (seconds from connect)."""
    steps: list[Step] = [
        (
            0.000,
            S,
            {
                "type": "session.created",
                "event_id": "ev_01",
                "session": {"id": "sess_GA1", **GA_SESSION_CONFIG},
            },
        ),
        (
            0.040,
            C,
            {
                "type": "session.update",
                "event_id": "cl_01",
                "session": {
                    "type": "realtime",
                    "instructions": "Weather desk.",
                    "tools": [{"type": "function", "name": "get_weather"}],
                },
            },
        ),
        (
            0.110,
            S,
            {
                "type": "session.updated",
                "event_id": "ev_02",
                "session": {"id": "sess_GA1", **GA_SESSION_CONFIG},
            },
        ),
        (0.200, C, {"type": "input_audio_buffer.append", "audio": audio(100)}),
        (0.300, C, {"type": "input_audio_buffer.append", "audio": audio(100)}),
        (
            0.950,
            S,
            {
                "type": "input_audio_buffer.speech_started",
                "event_id": "ev_03",
                "audio_start_ms": 900,
                "item_id": "item_U1",
            },
        ),
        (
            2.350,
            S,
            {
                "type": "input_audio_buffer.speech_stopped",
                "event_id": "ev_04",
                "audio_end_ms": 2300,
                "item_id": "item_U1",
            },
        ),
        (
            2.360,
            S,
            {
                "type": "input_audio_buffer.committed",
                "event_id": "ev_05",
                "item_id": "item_U1",
                "previous_item_id": None,
            },
        ),
        (
            2.365,
            S,
            {
                "type": "conversation.item.added",
                "event_id": "ev_06",
                "item": {
                    "id": "item_U1",
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_audio", "transcript": None}],
                },
            },
        ),
        (
            2.380,
            S,
            {
                "type": "response.created",
                "event_id": "ev_07",
                "response": {
                    "id": "resp_A",
                    "object": "realtime.response",
                    "status": "in_progress",
                    "output": [],
                    "conversation_id": "conv_1",
                },
            },
        ),
        (
            2.600,
            S,
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "event_id": "ev_08",
                "item_id": "item_U1",
                "content_index": 0,
                "delta": "What's the weather",
            },
        ),
        (
            2.700,
            S,
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "event_id": "ev_09",
                "item_id": "item_U1",
                "content_index": 0,
                "delta": " in Paris?",
            },
        ),
        (
            2.750,
            S,
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "event_id": "ev_10",
                "item_id": "item_U1",
                "content_index": 0,
                "transcript": "What's the weather in Paris?",
            },
        ),
        (
            2.800,
            S,
            {
                "type": "response.output_item.added",
                "event_id": "ev_11",
                "response_id": "resp_A",
                "output_index": 0,
                "item": {
                    "id": "item_F1",
                    "type": "function_call",
                    "call_id": "call_W1",
                    "name": "get_weather",
                    "arguments": "",
                },
            },
        ),
        (
            2.850,
            S,
            {
                "type": "response.function_call_arguments.delta",
                "event_id": "ev_12",
                "response_id": "resp_A",
                "item_id": "item_F1",
                "output_index": 0,
                "call_id": "call_W1",
                "delta": '{"city": ',
            },
        ),
        (
            2.900,
            S,
            {
                "type": "response.function_call_arguments.done",
                "event_id": "ev_13",
                "response_id": "resp_A",
                "item_id": "item_F1",
                "output_index": 0,
                "call_id": "call_W1",
                "arguments": '{"city": "Paris"}',
            },
        ),
        (
            2.920,
            S,
            {
                "type": "response.done",
                "event_id": "ev_14",
                "response": {
                    "id": "resp_A",
                    "status": "completed",
                    "output": [
                        {
                            "id": "item_F1",
                            "type": "function_call",
                            "call_id": "call_W1",
                            "name": "get_weather",
                        }
                    ],
                    "usage": {"total_tokens": 321},
                },
            },
        ),
        (
            3.300,
            C,
            {
                "type": "conversation.item.create",
                "event_id": "cl_02",
                "item": {
                    "type": "function_call_output",
                    "call_id": "call_W1",
                    "output": '{"temp_c": 18, "sky": "cloudy"}',
                },
            },
        ),
        (3.305, C, {"type": "response.create", "event_id": "cl_03"}),
        (
            3.360,
            S,
            {
                "type": "conversation.item.added",
                "event_id": "ev_15",
                "item": {
                    "id": "item_O1",
                    "type": "function_call_output",
                    "call_id": "call_W1",
                    "output": '{"temp_c": 18}',
                },
            },
        ),
        (
            3.400,
            S,
            {
                "type": "response.created",
                "event_id": "ev_16",
                "response": {"id": "resp_B", "status": "in_progress", "output": []},
            },
        ),
        (
            3.450,
            S,
            {
                "type": "response.output_item.added",
                "event_id": "ev_17",
                "response_id": "resp_B",
                "output_index": 0,
                "item": {"id": "item_A1", "type": "message", "role": "assistant"},
            },
        ),
    ]
    for i in range(5):  # the server sends 1 s of audio faster than real time
        steps.append(
            (
                3.500 + 0.05 * i,
                S,
                {
                    "type": "response.output_audio.delta",
                    "event_id": f"ev_2{i}",
                    "response_id": "resp_B",
                    "item_id": "item_A1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": audio(200),
                },
            )
        )
    steps += [
        (3.520, S, {"type": "response.output_audio_transcript.delta", "event_id": "ev_30",
                    "response_id": "resp_B", "item_id": "item_A1", "output_index": 0,
                    "content_index": 0, "delta": "It's 18 degrees"}),
        (3.720, S, {"type": "response.output_audio_transcript.delta", "event_id": "ev_31",
                    "response_id": "resp_B", "item_id": "item_A1", "output_index": 0,
                    "content_index": 0, "delta": " and cloudy"}),
        # barge-in 0.7 s into playback: the client cancels and truncates what was heard
        (4.300, S, {"type": "input_audio_buffer.speech_started", "event_id": "ev_32",
                    "audio_start_ms": 4250, "item_id": "item_U2"}),
        (4.420, C, {"type": "response.cancel", "event_id": "cl_04"}),
        (4.430, C, {"type": "conversation.item.truncate", "event_id": "cl_05",
                    "item_id": "item_A1", "content_index": 0, "audio_end_ms": 700}),
        (4.500, S, {"type": "response.done", "event_id": "ev_33",
                    "response": {"id": "resp_B", "status": "cancelled",
                                 "status_details": {"type": "cancelled",
                                                    "reason": "client_cancelled"},
                                 "output": [{"id": "item_A1", "type": "message",
                                             "role": "assistant",
                                             "content": [{"type": "output_audio",
                                                          "transcript": "It's 18 degrees "
                                                                        "and cloudy"}]}]}}),
        (4.510, S, {"type": "conversation.item.truncated", "event_id": "ev_34",
                    "item_id": "item_A1", "content_index": 0, "audio_end_ms": 700}),
        (5.400, S, {"type": "input_audio_buffer.speech_stopped", "event_id": "ev_35",
                    "audio_end_ms": 5350, "item_id": "item_U2"}),
        (5.410, S, {"type": "input_audio_buffer.committed", "event_id": "ev_36",
                    "item_id": "item_U2", "previous_item_id": "item_A1"}),
        (5.430, S, {"type": "response.created", "event_id": "ev_37",
                    "response": {"id": "resp_C", "status": "in_progress", "output": []}}),
        (5.500, S, {"type": "conversation.item.input_audio_transcription.completed",
                    "event_id": "ev_38", "item_id": "item_U2", "content_index": 0,
                    "transcript": "Actually, what about tomorrow?"}),
        (5.600, S, {"type": "response.output_item.added", "event_id": "ev_39",
                    "response_id": "resp_C", "output_index": 0,
                    "item": {"id": "item_A2", "type": "message", "role": "assistant"}}),
        (5.650, S, {"type": "response.output_audio.delta", "event_id": "ev_40",
                    "response_id": "resp_C", "item_id": "item_A2", "output_index": 0,
                    "content_index": 0, "delta": audio(200)}),
        (5.700, S, {"type": "response.output_audio.delta", "event_id": "ev_41",
                    "response_id": "resp_C", "item_id": "item_A2", "output_index": 0,
                    "content_index": 0, "delta": audio(200)}),
        (6.200, S, {"type": "response.done", "event_id": "ev_42",
                    "response": {"id": "resp_C", "status": "completed",
                                 "output": [{"id": "item_A2", "type": "message"}]}}),
    ]  # fmt: skip
    return sorted(steps, key=lambda step: step[0])  # the order the client saw them in


def line_of(steps: list[Step], event_id: str) -> int:
    return next(i for i, (_, _, ev) in enumerate(steps, 1) if ev.get("event_id") == event_id)


GA_TO_BETA = {
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "conversation.item.added": "conversation.item.created",
}


def to_beta(steps: list[Step], output_format: str = "pcm16") -> list[Step]:
    """The same session with beta event names and beta session fields."""
    out: list[Step] = []
    for t, side, event in steps:
        ev = json.loads(json.dumps(event))
        ev["type"] = GA_TO_BETA.get(ev["type"], ev["type"])
        if "session" in ev and "audio" in ev["session"]:
            session = ev["session"]
            del session["audio"]
            session.update(
                {
                    "object": "realtime.session",
                    "modalities": ["audio", "text"],
                    "input_audio_format": "pcm16",
                    "output_audio_format": output_format,
                    "turn_detection": {"type": "server_vad"},
                }
            )
        out.append((t, side, ev))
    return out


CORE_TYPES = [
    "session.connected",
    "vad.speech_started",
    "vad.speech_stopped",
    "response.created",
    "asr.partial",
    "asr.partial",
    "asr.final",
    "tool.requested",
    "response.done",
    "tool.completed",
    "response.created",
    *["tts.chunk"] * 5,
    "vad.speech_started",
    "turn.decision",
    "playback.interrupted",
    "response.done",
    "response.cancelled",
    "vad.speech_stopped",
    "response.created",
    "asr.final",
    *["tts.chunk"] * 2,
    "response.done",
]


def write_wrapped(path: Path, steps: list[Step], key: str = "t", t0: float = 0.0) -> Path:
    lines = [json.dumps({"direction": side, key: t0 + t, "event": ev}) for t, side, ev in steps]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def core(result: ImportResult) -> list[Event]:
    return [
        e
        for e in result.events
        if e.event_type != "clock.producer" and not e.event_type.startswith("realtime.")
    ]


def only(result: ImportResult, event_type: str) -> list[Event]:
    return [e for e in result.events if e.event_type == event_type]


def clock_of(result: ImportResult, producer: str) -> ProducerClock:
    records = [ProducerClock.from_event(e) for e in only(result, "clock.producer")]
    return next(c for c in records if c.producer == producer)


def no_errors(path: Path) -> list[Problem]:
    return [p for p in validate_path(path) if p.severity == "error"]


# --------------------------------------------------------------------------- GA session


def test_ga_session_maps_types_in_causal_order(tmp_path: Path) -> None:
    result = import_realtime_log(write_wrapped(tmp_path / "ga.jsonl", ga_session()))
    assert result.problems == []
    assert [e.event_type for e in core(result)] == CORE_TYPES
    assert [e.event_type for e in result.events[:2]] == ["clock.producer"] * 2
    assert result.stats["imported_records"] == len(ga_session())
    assert result.stats["unknown_events"] == 0
    assert result.stats["summarised"] == {
        "input_audio_buffer.append": 2,
        "response.function_call_arguments.delta": 1,
        "response.output_audio_transcript.delta": 2,
    }
    assert result.stats["input_audio_bytes"] == 2 * 4800
    assert all(e.session_id == "sess_GA1" for e in result.events)
    producers = {e.event_type: e.producer for e in core(result)}
    assert producers["turn.decision"] == CLIENT_PRODUCER
    assert producers["tool.completed"] == CLIENT_PRODUCER
    assert producers["vad.speech_started"] == SERVER_PRODUCER
    assert producers["tts.chunk"] == SERVER_PRODUCER


def test_ga_session_keeps_ids_and_barge_in_facts(tmp_path: Path) -> None:
    result = import_realtime_log(write_wrapped(tmp_path / "ga.jsonl", ga_session()))
    vad = only(result, "vad.speech_started")
    assert [e.utterance_id for e in vad] == ["item_U1", "item_U2"]
    assert vad[0].data["audio_start_ms"] == 900
    partial = only(result, "asr.partial")
    assert [e.data["text"] for e in partial] == [
        "What's the weather",
        "What's the weather in Paris?",
    ]
    final = only(result, "asr.final")
    assert [(e.utterance_id, e.data["text"]) for e in final] == [
        ("item_U1", "What's the weather in Paris?"),
        ("item_U2", "Actually, what about tomorrow?"),
    ]

    (req,) = only(result, "tool.requested")
    assert (req.task_id, req.response_id, req.trace_id) == ("call_W1", "resp_A", "resp_A")
    assert req.data["name"] == "get_weather"  # from response.output_item.added
    assert req.data["arguments"] == {"city": "Paris"}
    (done,) = only(result, "tool.completed")
    assert (done.task_id, done.data["call_id"], done.response_id) == (
        "call_W1",
        "call_W1",
        "resp_A",
    )
    assert done.data["output"] == {"temp_c": 18, "sky": "cloudy"}

    (decision,) = only(result, "turn.decision")
    assert decision.data["action"] == "interrupt"
    assert decision.reason == "barge_in"
    assert (decision.response_id, decision.utterance_id) == ("resp_B", "item_U2")

    (cut,) = only(result, "playback.interrupted")  # the server's truncated is not a second one
    assert cut.played_until_ms == 700
    assert (cut.response_id, cut.trace_id, cut.data["item_id"]) == ("resp_B", "resp_B", "item_A1")
    assert cut.data["generated_ms"] == pytest.approx(1000.0)
    assert cut.producer == CLIENT_PRODUCER
    assert len(only(result, "realtime.conversation.item.truncated")) == 1

    (cancelled,) = only(result, "response.cancelled")
    assert (cancelled.response_id, cancelled.reason) == ("resp_B", "client_cancelled")
    dones = {e.response_id: e for e in only(result, "response.done")}
    assert dones["resp_B"].data["status"] == "cancelled"
    assert dones["resp_B"].data["transcript"] == "It's 18 degrees and cloudy"
    assert dones["resp_B"].data["audio_ms"] == pytest.approx(1000.0)
    assert dones["resp_A"].data["usage"] == {"total_tokens": 321}

    chunks = [e for e in only(result, "tts.chunk") if e.response_id == "resp_B"]
    assert [c.data["bytes"] for c in chunks] == [9600] * 5
    assert [c.data["duration_ms"] for c in chunks] == [200.0] * 5
    assert [c.data["audio_start_ms"] for c in chunks] == [0, 200, 400, 600, 800]
    assert {c.data["sample_rate"] for c in chunks} == {24000}

    # every event of a response carries its trace; ids in data point back to the log
    for e in result.events:
        if e.response_id:
            assert e.trace_id == e.response_id, e
    assert cut.data["realtime"] == {
        "type": "conversation.item.truncate",
        "line": line_of(ga_session(), "cl_05"),
        "event_id": "cl_05",
    }
    assert len({e.event_id for e in result.events}) == len(result.events)


def test_ledger_is_written_without_audio_and_validates(tmp_path: Path) -> None:
    result = import_realtime_log(write_wrapped(tmp_path / "ga.jsonl", ga_session()))
    from voxassay.suites.duplex.evidence.ledger import write_events

    ledger = tmp_path / "events.jsonl"
    write_events(ledger, result.events)
    assert no_errors(ledger) == []
    text = ledger.read_text()
    assert "A" * 64 not in text  # base64 audio is replaced by its size
    assert "input_audio_buffer.append" not in text
    back = [item for _, item in read_events(ledger)]
    assert back == result.events


def test_clock_offset_of_one_logger_is_near_zero(tmp_path: Path) -> None:
    result = import_realtime_log(write_wrapped(tmp_path / "ga.jsonl", ga_session()))
    client = clock_of(result, CLIENT_PRODUCER)
    server = clock_of(result, SERVER_PRODUCER)
    assert (client.offset_ns, client.uncertainty_ns) == (0, 0)
    assert client.method.startswith("reference")
    # one clock for both sides: 0 must lie inside the estimate, and the bounds are tight
    assert abs(server.offset_ns) <= server.uncertainty_ns
    assert server.uncertainty_ns <= 100_000_000
    assert "NTP-style" in server.method and "observation order" in server.method
    stats = result.stats["clock"]
    assert stats["n_upper"] >= 3 and stats["n_lower"] >= 3 and stats["consistent"]


def test_lines_written_late_are_put_back_in_causal_order(tmp_path: Path) -> None:
    steps = ga_session()
    created = line_of(steps, "ev_16") - 1  # response.created of resp_B
    late = steps.pop(created)
    steps.insert(line_of(steps, "ev_24"), late)  # logged after its own audio chunks
    result = import_realtime_log(write_wrapped(tmp_path / "late.jsonl", steps))
    assert [e.event_type for e in core(result)] == CORE_TYPES
    (warning,) = result.problems
    assert warning.severity == "warning" and "time goes back" in warning.message
    assert warning.line == line_of(steps, "ev_16")  # the late line itself


# --------------------------------------------------------------------------- beta names


def test_beta_names_give_the_same_ledger(tmp_path: Path) -> None:
    ga = import_realtime_log(write_wrapped(tmp_path / "ga.jsonl", ga_session()))
    beta = import_realtime_log(write_wrapped(tmp_path / "beta.jsonl", to_beta(ga_session())))
    assert beta.problems == []
    assert [e.event_type for e in core(beta)] == CORE_TYPES

    def shape(result: ImportResult) -> list[tuple[Any, ...]]:
        return [
            (e.event_type, e.response_id, e.utterance_id, e.task_id, e.played_until_ms)
            for e in core(result)
        ]

    assert shape(beta) == shape(ga)
    chunks = only(beta, "tts.chunk")
    assert {c.data["realtime"]["type"] for c in chunks} == {"response.audio.delta"}
    assert [c.data["duration_ms"] for c in chunks] == [200.0] * 7
    assert beta.stats["summarised"]["response.output_audio_transcript.delta"] == 2
    assert only(beta, "response.done")[1].data["transcript"] == "It's 18 degrees and cloudy"
    path = tmp_path / "beta-events.jsonl"
    from voxassay.suites.duplex.evidence.ledger import write_events

    write_events(path, beta.events)
    assert no_errors(path) == []


@pytest.mark.parametrize(
    ("variant", "fmt", "rate", "width"),
    [
        ("beta", "g711_ulaw", 8000, 1),
        ("beta", "g711_alaw", 8000, 1),
        ("ga", "audio/pcmu", 8000, 1),
        ("ga", "audio/pcm", 24000, 2),
    ],
)
def test_chunk_duration_follows_the_session_format(
    tmp_path: Path, variant: str, fmt: str, rate: int, width: int
) -> None:
    if variant == "beta":
        session: dict[str, Any] = {"id": "sess_F", "output_audio_format": fmt}
        delta_type = "response.audio.delta"
    else:
        session = {"id": "sess_F", "audio": {"output": {"format": {"type": fmt}}}}
        delta_type = "response.output_audio.delta"
    steps: list[Step] = [
        (0.0, S, {"type": "session.created", "session": session}),
        (0.5, S, {"type": "response.created", "response": {"id": "r1"}}),
        (0.6, S, {"type": delta_type, "response_id": "r1", "item_id": "a1",
                  "content_index": 0, "delta": audio(250, rate, width)}),
        (0.7, S, {"type": delta_type, "response_id": "r1", "item_id": "a1",
                  "content_index": 0, "delta": audio(250, rate, width)}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "f.jsonl", steps))
    chunks = only(result, "tts.chunk")
    assert [c.data["bytes"] for c in chunks] == [rate // 4 * width] * 2
    assert [c.data["duration_ms"] for c in chunks] == [250.0, 250.0]
    assert [c.data["audio_start_ms"] for c in chunks] == [0, 250]
    assert result.stats["output_audio"]["sample_rate"] == rate


def test_unknown_format_drops_durations_and_says_so(tmp_path: Path) -> None:
    steps: list[Step] = [
        (0.0, S, {"type": "session.created",
                  "session": {"id": "s", "output_audio_format": "opus_48k"}}),
        (0.1, S, {"type": "response.created", "response": {"id": "r1"}}),
        (0.2, S, {"type": "response.audio.delta", "response_id": "r1", "item_id": "a",
                  "delta": audio(100)}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "u.jsonl", steps))
    (chunk,) = only(result, "tts.chunk")
    assert chunk.data["bytes"] == 4800 and "duration_ms" not in chunk.data
    assert [(p.line, p.severity) for p in result.problems] == [(1, "warning")]
    assert "opus_48k" in result.problems[0].message


def test_secrets_are_redacted_and_missing_audio_is_counted(tmp_path: Path) -> None:
    steps: list[Step] = [
        (0.0, S, {"type": "session.created",
                  "session": {"id": "s", "client_secret": {"value": "ek_123"}}}),
        (0.1, S, {"type": "response.created", "response": {"id": "r1"}}),
        (0.2, S, {"type": "response.output_audio.delta", "response_id": "r1", "item_id": "a"}),
        (0.3, S, {"type": "response.output_audio.delta", "response_id": "r1", "item_id": "a",
                  "delta": "<omitted by logger>"}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "p.jsonl", steps))
    assert "ek_123" not in json.dumps([e.to_json() for e in result.events])
    (connected,) = only(result, "session.connected")
    assert connected.data["session"]["client_secret"] == "<redacted>"
    chunks = only(result, "tts.chunk")
    assert [c.data.get("bytes") for c in chunks] == [None, None]
    assert {c.data["payload"] for c in chunks} == {"absent or not base64"}
    assert result.stats["audio_deltas_without_payload"] == 2


# --------------------------------------------------------------------------- WebRTC, server side


def test_webrtc_buffer_events_and_server_side_truncation(tmp_path: Path) -> None:
    steps: list[Step] = [
        (0.00, S, {"type": "session.created", "session": {"id": "sess_W"}}),
        (1.00, S, {"type": "response.created", "response": {"id": "r1"}}),
        (1.10, S, {"type": "response.output_item.added", "response_id": "r1",
                   "item": {"id": "a1", "type": "message", "role": "assistant"}}),
        (1.20, S, {"type": "output_audio_buffer.started", "response_id": "r1"}),
        (3.00, S, {"type": "output_audio_buffer.stopped", "response_id": "r1"}),
        (3.05, S, {"type": "response.done", "response": {"id": "r1", "status": "completed"}}),
        (4.00, S, {"type": "response.created", "response": {"id": "r2"}}),
        (4.05, S, {"type": "response.output_item.added", "response_id": "r2",
                   "item": {"id": "a2", "type": "message", "role": "assistant"}}),
        (4.10, S, {"type": "output_audio_buffer.started", "response_id": "r2"}),
        (4.60, S, {"type": "input_audio_buffer.speech_started", "item_id": "u2",
                   "audio_start_ms": 4550}),
        (4.85, S, {"type": "output_audio_buffer.cleared", "response_id": "r2"}),
        (4.86, S, {"type": "conversation.item.truncated", "item_id": "a2",
                   "content_index": 0, "audio_end_ms": 740}),
        (4.90, S, {"type": "response.done",
                   "response": {"id": "r2", "status": "cancelled",
                                "status_details": {"reason": "turn_detected"}}}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "w.jsonl", steps))
    assert result.problems == []
    playback = [e for e in result.events if e.event_type.startswith("playback.")]
    assert [(e.event_type, e.playback_id, e.reason) for e in playback] == [
        ("playback.started", "r1", None),
        ("playback.stopped", "r1", "drained"),
        ("playback.started", "r2", None),
        ("playback.interrupted", "r2", "cleared"),
        ("playback.interrupted", "r2", "truncate"),  # no client truncate in this log
    ]
    assert playback[1].data["buffer_elapsed_ms"] == pytest.approx(1800.0)
    assert playback[3].data["buffer_elapsed_ms"] == pytest.approx(750.0)
    assert playback[4].played_until_ms == 740 and playback[4].response_id == "r2"
    (cancelled,) = only(result, "response.cancelled")
    assert cancelled.reason == "turn_detected"
    # only one producer: only its clock record, as the reference
    assert [ProducerClock.from_event(e).producer for e in only(result, "clock.producer")] == [
        SERVER_PRODUCER
    ]
    ledger = tmp_path / "events.jsonl"
    from voxassay.suites.duplex.evidence.ledger import write_events

    write_events(ledger, result.events)
    assert no_errors(ledger) == []


def test_mcp_calls_errors_and_transcription_failures(tmp_path: Path) -> None:
    steps: list[Step] = [
        (0.0, S, {"type": "session.created", "session": {"id": "sess_M"}}),
        (0.1, C, {"type": "response.create", "event_id": "cl_bad"}),
        (0.2, S, {"type": "error", "error": {"type": "invalid_request_error",
                                             "code": "conversation_already_has_active_response",
                                             "message": "busy", "event_id": "cl_bad"}}),
        (0.3, S, {"type": "conversation.item.input_audio_transcription.failed",
                  "item_id": "u1", "content_index": 0,
                  "error": {"type": "transcription_error", "code": "audio_unintelligible"}}),
        (1.0, S, {"type": "response.created", "response": {"id": "r1"}}),
        (1.1, S, {"type": "response.output_item.added", "response_id": "r1",
                  "item": {"id": "mcp_1", "type": "mcp_call", "name": "lookup"}}),
        (1.2, S, {"type": "response.mcp_call_arguments.done", "response_id": "r1",
                  "item_id": "mcp_1", "arguments": '{"q": "x"}'}),
        (1.5, S, {"type": "response.mcp_call.failed", "item_id": "mcp_1"}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "m.jsonl", steps))
    errors = only(result, "session.error")
    assert [(e.reason, e.utterance_id) for e in errors] == [
        ("conversation_already_has_active_response", None),
        ("audio_unintelligible", "u1"),
    ]
    assert errors[0].data["client_event_id"] == "cl_bad"
    (req,) = only(result, "tool.requested")
    assert (req.task_id, req.data["name"], req.data["arguments"]) == ("mcp_1", "lookup", {"q": "x"})
    (failed,) = only(result, "tool.failed")
    assert (failed.task_id, failed.response_id) == ("mcp_1", "r1")
    # the error answers the client's request: an upper bound for the server clock
    assert result.stats["clock"]["n_upper"] == 1


# --------------------------------------------------------------------------- problems


def test_bad_lines_are_reported_with_line_numbers_and_the_rest_imported(tmp_path: Path) -> None:
    good = [json.dumps({"direction": side, "t": t, "event": ev}) for t, side, ev in ga_session()]
    lines = [
        good[0],  # 1
        "{not json",  # 2
        "",  # 3
        "[1, 2]",  # 4
        json.dumps({"direction": "server", "t": 0.05, "event": {"event_id": "x"}}),  # 5
        json.dumps({"direction": "server", "event": {"type": "rate_limits.updated"}}),  # 6
        json.dumps({"direction": "server", "t": 0.06,
                    "event": {"type": "conversation.item.frobnicated", "item_id": "z"}}),  # 7
        json.dumps({"direction": "server", "t": 0.01, "event": {"type": "rate_limits.updated",
                                                               "rate_limits": []}}),  # 8
        json.dumps({"direction": "server", "t": "yesterday",
                    "event": {"type": "rate_limits.updated"}}),  # 9
        json.dumps({"direction": "sideways", "t": 0.07, "event": {"type": "response.create"}}),
        json.dumps({"direction": "server", "t": 0.08, "event": {"type": "response.cancel"}}),
        json.dumps({"direction": "server", "t": 0.09,
                    "event": {"type": "response.created", "response": "oops"}}),  # 12
    ]  # fmt: skip
    path = tmp_path / "bad.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"t": 1, "type": "\xff"}\n')
    result = import_realtime_log(path)
    found = [(p.line, p.severity, p.message) for p in result.problems]
    expected = [
        (None, "warning", "no request/answer pairs to estimate the server clock"),
        (2, "error", "malformed JSON"),
        (4, "error", "not a JSON object"),
        (5, "error", "no event type"),
        (6, "error", "missing timestamp"),
        (7, "warning", "unknown Realtime event type 'conversation.item.frobnicated'"),
        (8, "warning", "time goes back"),
        (9, "error", "unreadable timestamp t='yesterday'"),
        (10, "error", "direction 'sideways'"),
        (11, "warning", "direction says server but response.cancel is a client event"),
        (12, "error", "response.created: not mapped"),
        (13, "error", "not UTF-8"),
    ]
    assert [(line, sev) for line, sev, _ in found] == [(line, sev) for line, sev, _ in expected]
    for (_, _, message), (_, _, fragment) in zip(found, expected, strict=True):
        assert fragment in message, (message, fragment)
    # imported: lines 1, 7, 8, 11
    assert result.stats["records"] == 6  # lines that held an event with a type
    assert result.stats["imported_records"] == 4
    assert result.stats["unknown_types"] == {"conversation.item.frobnicated": 1}
    assert result.stats["errors"] == 8 and result.stats["warnings"] == 4
    types = [e.event_type for e in result.events]
    assert "realtime.conversation.item.frobnicated" in types
    assert "session.connected" in types and "turn.decision" in types
    assert "response.created" not in types
    (unknown,) = only(result, "realtime.conversation.item.frobnicated")
    assert unknown.data["item_id"] == "z" and unknown.data["realtime"]["line"] == 7


def test_function_output_without_request_is_a_warning(tmp_path: Path) -> None:
    steps: list[Step] = [
        (0.0, C, {"type": "conversation.item.create",
                  "item": {"type": "function_call_output", "call_id": "call_X", "output": "ok"}}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "o.jsonl", steps))
    (done,) = only(result, "tool.completed")
    assert done.task_id == "call_X" and done.data["output"] == "ok"
    assert done.data["output_not_json"] is True
    assert [(p.line, p.severity) for p in result.problems] == [(1, "warning")]


def test_unreadable_and_empty_logs_never_raise(tmp_path: Path) -> None:
    missing = import_realtime_log(tmp_path / "nope.jsonl")
    assert missing.events == [] and missing.problems[0].line is None
    assert "cannot read" in missing.problems[0].message
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    result = import_realtime_log(empty)
    assert result.events == [] and [p.message for p in result.problems] == ["the log has no events"]


# --------------------------------------------------------------------------- clocks


def skewed(steps: list[Step], client_skew: float, latency: float = 0.03) -> list[Step]:
    """Server events stamped by the server at emission (arrival minus latency); client events
    stamped by a client clock that reads ``client_skew`` seconds more than the server's."""
    return [(t + client_skew if side == C else t - latency, side, ev) for t, side, ev in steps]


@pytest.mark.parametrize("skew", [-2.5, 2.5])
@pytest.mark.parametrize("order", ["observed", "sorted"])
def test_skewed_client_clock_is_recovered(tmp_path: Path, skew: float, order: str) -> None:
    steps = skewed(ga_session(), skew)
    if order == "sorted":  # two logs merged by their (skewed) timestamps
        steps = sorted(steps, key=lambda s: s[0])
    result = import_realtime_log(write_wrapped(tmp_path / "skew.jsonl", steps))
    server = clock_of(result, SERVER_PRODUCER)
    truth = round(skew * 1e9)  # server time + truth = client time
    assert abs(server.offset_ns - truth) <= server.uncertainty_ns, server
    if order == "observed":
        assert server.uncertainty_ns <= 150_000_000
        assert "observation order" in server.method
    else:
        # merged by skewed times: only the id-based bounds are sure, so the estimate is wider
        assert server.uncertainty_ns <= 400_000_000
        if skew > 0:  # client lines pushed after later server lines: line order rejected
            assert "not observation order" in server.method
        assert result.stats["clock"]["consistent"] is True
        return
    assert result.stats["clock"]["consistent"] is True
    # the barge-in reads in causal order on the session clock although the raw client
    # times are seconds off the server's
    events = core(result)
    speech = next(
        e for e in events if e.event_type == "vad.speech_started" and e.utterance_id == "item_U2"
    )
    decision = next(e for e in events if e.event_type == "turn.decision")
    cancelled = next(e for e in events if e.event_type == "response.cancelled")
    assert events.index(speech) < events.index(decision) < events.index(cancelled)
    raw_gap = decision.monotonic_ns - speech.monotonic_ns
    assert abs(raw_gap - (0.12 + 0.03 + skew) * 1e9) < 1e6  # the skew is in the raw times


def test_one_sided_and_missing_pairs(tmp_path: Path) -> None:
    steps: list[Step] = [
        (10.00, C, {"type": "session.update", "session": {"instructions": "hi"}}),
        (10.25, S, {"type": "session.updated", "session": {"id": "s1"}}),
    ]  # fmt: skip
    result = import_realtime_log(write_wrapped(tmp_path / "one.jsonl", steps))
    server = clock_of(result, SERVER_PRODUCER)
    assert server.method.startswith("one-sided")
    assert server.uncertainty_ns == ONE_SIDED_WINDOW_NS // 2
    assert server.offset_ns == -(250_000_000 - ONE_SIDED_WINDOW_NS // 2)

    # line order alone is not trusted: without an answer to check it against, nothing is known
    none: list[Step] = [
        (1.0, S, {"type": "rate_limits.updated", "rate_limits": []}),
        (2.0, C, {"type": "input_audio_buffer.append", "audio": audio(20)}),
    ]
    result = import_realtime_log(write_wrapped(tmp_path / "none.jsonl", none))
    server = clock_of(result, SERVER_PRODUCER)
    assert (server.offset_ns, server.uncertainty_ns) == (0, 0)
    assert server.method.startswith("assumed")
    assert any("no request/answer pairs" in p.message for p in result.problems)


# --------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("values", "unit", "how"),
    [
        ([1718000000.125, 1718000000.150, 1718000001.5], "s", "epoch"),
        ([1718000000125, 1718000000150, 1718000001500], "ms", "epoch"),
        ([1718000000125000, 1718000000150000], "us", "epoch"),
        ([1718000000125000000, 1718000000150000000], "ns", "epoch"),
        ([0.0, 0.02, 0.05, 0.1, 1.3], "s", "relative"),
        ([0, 20, 50, 100, 1300], "ms", "relative"),
        ([1_000_000_000, 1_020_000_000, 1_050_000_000, 2_300_000_000], "ns", "relative"),
        ([86_400_000_000_000, 86_400_030_000_000, 86_400_070_000_000], "ns", "relative"),
        ([5.0], "s", "default"),
    ],
)
def test_detect_time_unit(values: list[float], unit: str, how: str) -> None:
    got, reason = detect_time_unit(values)
    assert got == unit
    assert how in reason


@pytest.mark.parametrize(
    ("key", "scale", "t0"),
    [
        ("ts", 1.0, 1718000000.0),
        ("timestamp", 1000.0, 1718000000.0),
        ("time", 1e9, 1718000000.0),
        ("ts_ms", 1000.0, 0.0),
        ("t", 1000.0, 0.0),
    ],
)
def test_raw_events_with_timestamp_beside_the_type(
    tmp_path: Path, key: str, scale: float, t0: float
) -> None:
    lines = []
    for t, _, ev in ga_session():
        value = (t0 + t) * scale
        stamp: float | int = round(value) if scale > 1 else value
        lines.append(json.dumps({**ev, key: stamp}))  # no direction: read from the type
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_realtime_log(path)
    assert result.problems == []
    assert [e.event_type for e in core(result)] == CORE_TYPES
    (decision,) = only(result, "turn.decision")
    assert decision.producer == CLIENT_PRODUCER
    assert decision.monotonic_ns == pytest.approx((t0 + 4.42) * 1e9, abs=1e4)
    assert (decision.wall_time is not None) == (t0 > 0)
    assert key not in decision.data["realtime"] and "direction" not in str(decision.data)


def test_iso_timestamps_are_wall_clock(tmp_path: Path) -> None:
    import datetime as dt

    start = dt.datetime(2025, 6, 1, 12, 0, 0, tzinfo=dt.UTC)
    lines = []
    for t, side, ev in ga_session():
        when = (start + dt.timedelta(seconds=t)).isoformat().replace("+00:00", "Z")
        lines.append(json.dumps({"direction": side, "timestamp": when, "event": ev}))
    path = tmp_path / "iso.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_realtime_log(path)
    assert result.problems == []
    assert result.stats["time"]["iso_8601"] == len(lines)
    (decision,) = only(result, "turn.decision")
    assert decision.wall_time == start + dt.timedelta(seconds=4.42)
    assert decision.monotonic_ns == int(start.timestamp() * 1e9) + 4_420_000_000
    assert clock_of(result, CLIENT_PRODUCER).kind == "wall"


def test_json_array_input_keeps_element_line_numbers(tmp_path: Path) -> None:
    steps = ga_session()[:12]
    elements = [{"direction": side, "t": t, "event": ev} for t, side, ev in steps]
    del elements[3]["t"]  # the fourth element (append) has no time
    body = "[\n" + ",\n".join(json.dumps(e, indent=2) for e in elements) + "\n]\n"
    path = tmp_path / "session.json"
    path.write_text(body)
    result = import_realtime_log(path)
    assert result.stats["format"] == "json-array"
    expected_line = 1 + sum(json.dumps(e, indent=2).count("\n") + 1 for e in elements[:3]) + 1
    assert [(p.line, p.severity) for p in result.problems] == [(expected_line, "error")]
    assert body.splitlines()[expected_line - 1] == "{"
    assert "missing timestamp" in result.problems[0].message
    assert result.stats["imported_records"] == 11

    cut = tmp_path / "cut.json"
    cut.write_text(body[: body.index('"input_audio_buffer.speech_started"')])
    result = import_realtime_log(cut)
    assert [(p.line, p.severity) for p in result.problems] == [
        (expected_line, "error"),
        (len(cut.read_text().splitlines()), "error"),  # the unfinished last line
    ]
    assert "rest of the array" in result.problems[1].message
    assert result.stats["imported_records"] == 4  # the elements before the cut (one lacks t)


# --------------------------------------------------------------------------- CLI


def test_cli_writes_the_ledger_and_prints_the_run_folder(tmp_path: Path) -> None:
    log = write_wrapped(tmp_path / "ga.jsonl", ga_session())
    out = tmp_path / "runs"
    res = CliRunner().invoke(duplex, ["import-realtime", str(log), "--out", str(out)])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert run_dir.parent == out and run_dir.name.startswith("realtime-import-")
    ledger = run_dir / "events.jsonl"
    assert no_errors(ledger) == []
    assert sum(1 for _ in read_events(ledger)) == len(import_realtime_log(log).events)
    report = json.loads((run_dir / "import.json").read_text())
    assert report["stats"]["session_id"] == "sess_GA1" and report["problems"] == []


def test_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "runs"
    bad = tmp_path / "bad.jsonl"
    good = [json.dumps({"direction": side, "t": t, "event": ev}) for t, side, ev in ga_session()]
    bad.write_text("\n".join([*good[:5], "{oops", *good[5:]]) + "\n")
    res = runner.invoke(duplex, ["import-realtime", str(bad), "-o", str(out)])
    assert res.exit_code == 1
    assert f"{bad}:6: error: malformed JSON" in res.stderr
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert (run_dir / "events.jsonl").is_file()  # the rest was imported

    warn = tmp_path / "warn.jsonl"
    warn.write_text("\n".join([*good, json.dumps({"t": 9, "type": "brand.new_event"})]) + "\n")
    res = runner.invoke(duplex, ["import-realtime", str(warn), "-o", str(out)])
    assert res.exit_code == 0 and f"{warn}:{len(good) + 1}: warning: unknown" in res.stderr

    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json at all\n")
    res = runner.invoke(duplex, ["import-realtime", str(junk), "-o", str(out)])
    assert res.exit_code == 2 and f"{junk}:1: error" in res.stderr
    missing = runner.invoke(duplex, ["import-realtime", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2
    unit = runner.invoke(duplex, ["import-realtime", str(bad), "--time-unit", "hours"])
    assert unit.exit_code == 2
    assert len(list(out.iterdir())) == 2  # nothing written for the usage errors


def test_cli_time_unit_overrides_detection(tmp_path: Path) -> None:
    log = write_wrapped(tmp_path / "ms.jsonl", [(t * 1000, s, e) for t, s, e in ga_session()])
    out = tmp_path / "runs"
    res = CliRunner().invoke(
        duplex, ["import-realtime", str(log), "-o", str(out), "--time-unit", "us"]
    )
    assert res.exit_code == 0, res.output
    ledger = Path(res.stdout.strip().splitlines()[-1]) / "events.jsonl"
    decision = next(
        e
        for _, e in read_events(ledger)
        if isinstance(e, Event) and e.event_type == "turn.decision"
    )
    assert decision.monotonic_ns == 4_420_000  # 4420 read as microseconds, as asked
