"""``RealtimeAgentLink``: the driver runs real scenarios over a real loopback socket against the
Realtime server (``voxassay.reference.server``) serving ``EnergyAgent``; every client and
server event is checked against the official SDK's models; failures become ledger evidence.

Real speech from ../shared/data (CMU ARCTIC, resampled to 16 kHz). Loopback only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.helpers.duplex import arctic_clip, cut_in_scenario
from tests.systems.duplex.conformance import check
from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
    Stamped,
    ToolCall,
)
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.reference.server import RealtimeServer
from voxassay.suites.duplex.live.session import SessionConfig, SessionResult, run_session
from voxassay.systems.duplex.realtime_protocol import pcm16_to_b64
from voxassay.systems.duplex.realtime_ws import RealtimeAgentLink
from voxassay.systems.duplex.simple_agents import EnergyAgent

pytestmark = pytest.mark.live

pytest.importorskip("websockets")

SR = 16_000
ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
needs_speech = pytest.mark.skipif(
    not ARCTIC.is_dir(), reason=f"needs ../shared/data read speech ({ARCTIC})"
)


def clip(name: str, seconds: float | None = None) -> np.ndarray:
    return arctic_clip(name, seconds)


def scenario(**over: Any) -> Scenario:
    return cut_in_scenario("rt", 300, **over)


class Recording(EnergyAgent):
    """EnergyAgent that records what the server tells it (playback reports, tool results)."""

    def __init__(self, tool: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.reports: list[PlaybackReport] = []
        self.tool_results: list[tuple[str, Any, str | None]] = []
        self.tool = tool
        self.asked = False

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        out = super().push_audio(pcm, now_ns)
        created = any(isinstance(o, AgentEvent) and o.event_type == "response.created" for o in out)
        if self.tool and created and not self.asked:  # its first answer also books
            self.asked = True
            out.append(ToolCall("call_1", "book", {"date": "2026-08-10"}, response_id="r1"))
        return out

    def on_playback(self, report: Any, now_ns: int) -> list[AgentOutput]:
        self.reports.append(report)
        return super().on_playback(report, now_ns)

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        self.tool_results.append((call_id, result, error))
        return []


@contextmanager
def serving(
    make: Callable[[], Any], **kw: Any
) -> Iterator[tuple[RealtimeServer, list[tuple[str, dict[str, Any]]]]]:
    trace: list[tuple[str, dict[str, Any]]] = []
    server = RealtimeServer(make, port=0, trace=lambda side, ev: trace.append((side, ev)), **kw)
    server.start_in_thread()
    try:
        yield server, trace
    finally:
        server.stop()


def events(res: SessionResult, etype: str) -> list[Any]:
    return [e for e in res.events if e.event_type == etype]


def client_events(link: RealtimeAgentLink, etype: str | None = None) -> list[dict[str, Any]]:
    return [
        line["event"]
        for line in link.raw_log
        if line["side"] == "client" and (etype is None or line["event"]["type"] == etype)
    ]


@needs_speech
def test_a_live_session_over_loopback_ga(tmp_path: Path) -> None:
    agents: list[Recording] = []

    def make() -> Recording:
        agents.append(Recording(answer_ms=2000))
        return agents[-1]

    clips = {"ask": clip("aew_arctic_a0001.wav", 2.0), "cut": clip("aew_arctic_a0002.wav", 1.2)}
    with serving(make) as (server, trace):
        link = RealtimeAgentLink(server.url)
        res = run_session(scenario(), clips, link, SessionConfig(clock="real", tail_ms=500), "ga1")
    assert not events(res, "session.error"), [e.reason for e in events(res, "session.error")]
    # the agent's own observations came back over the socket, in order
    vad = [e for e in res.events if e.event_type.startswith("vad.") and e.producer == "agent"]
    assert [e.event_type for e in vad][:3] == [
        "vad.speech_started",
        "vad.speech_stopped",
        "vad.speech_started",
    ]
    (truth_end,) = [e for e in events(res, "user.speech_stopped") if e.utterance_id == "ask"]
    assert vad[1].monotonic_ns > truth_end.monotonic_ns  # endpointing after the truth, by energy
    # the first answer (a second one, to the cut-in, may or may not fit before the tail ends)
    created = events(res, "response.created")[0]
    assert created.response_id == "r1"
    # the agent's audio arrived and was played: audible output after playback.started
    (started,) = [e for e in events(res, "playback.started") if e.response_id == "r1"]
    k = round(started.monotonic_ns * SR / 1e9)
    assert np.sqrt(np.mean(res.output[k : k + SR // 2] ** 2)) > 0.01
    assert sum(e.data["samples"] for e in events(res, "tts.chunk")) > SR  # > 1 s received
    # the interruption: the player's cut, the client's truncate and the agent's report agree
    (cut,) = [e for e in events(res, "playback.interrupted") if e.response_id == "r1"]
    (trunc,) = client_events(link, "conversation.item.truncate")
    assert abs(trunc["audio_end_ms"] - cut.played_until_ms) <= 20  # within one frame
    # while it played: what was played fits in the time since playback started (one frame)
    assert 0 < cut.played_until_ms <= (cut.monotonic_ns - started.monotonic_ns) / 1e6 + 20
    (heard,) = [r for r in agents[0].reports if r.status == "interrupted"]
    assert heard.played_ms == trunc["audio_end_ms"]
    assert any(e["type"] == "conversation.item.truncated" for s, e in trace if s == "server")
    # conformance: every event on the wire, both ways, validates against the SDK (GA)
    assert {e["type"] for e in client_events(link)} >= {
        "session.update",
        "input_audio_buffer.append",
        "conversation.item.truncate",
    }
    for ev in client_events(link):
        check("ga", "client", ev)
    for side, ev in trace:
        check("ga", side, ev)
    # the raw log re-derives a ledger with the importer; the key never appears
    from voxassay.suites.duplex.evidence.realtime_import import import_realtime_log

    path = link.write_raw_log(tmp_path / "realtime.jsonl")
    imported = import_realtime_log(path)
    assert not imported.errors, imported.errors[:3]
    types = {e.event_type for e in imported.events}
    assert {"vad.speech_started", "response.created", "tts.chunk", "playback.interrupted"} <= types
    assert res.end.info["realtime"]["stats"]["connections"] == 1


@needs_speech
def test_beta_manual_turns_and_tool_calls(tmp_path: Path) -> None:
    agents: list[Recording] = []

    def make() -> Recording:
        agents.append(Recording(tool=True, answer_ms=1000))
        return agents[-1]

    sc = scenario(
        segments=[{"id": "ask", "role": "user", "audio": "a.wav", "at_ms": 300}],
        tools=[
            {
                "name": "book",
                "description": "Book an appointment",
                "arguments": {"type": "object", "properties": {"date": {"type": "string"}}},
                "results": [{"match": {"date": "2026-08-10"}, "result": {"booked": True}}],
                "latency_ms": 100,
                "side_effect": True,
            }
        ],
    )
    clips = {"ask": clip("aew_arctic_a0003.wav", 2.0)}
    with serving(make, protocol="auto") as (server, trace):
        link = RealtimeAgentLink(server.url, protocol="beta", turn="manual")
        res = run_session(sc, clips, link, SessionConfig(clock="real", tail_ms=500), "b1")
    assert not events(res, "session.error"), [e.reason for e in events(res, "session.error")]
    # beta on the wire, both ways
    server_types = {e["type"] for s, e in trace if s == "server"}
    assert "response.audio.delta" in server_types
    assert "response.output_audio.delta" not in server_types
    (update,) = client_events(link, "session.update")
    assert update["session"]["turn_detection"] is None
    assert update["session"]["tools"][0]["name"] == "book"
    for ev in client_events(link):
        check("beta", "client", ev)
    for side, ev in trace:
        check("beta", side, ev)
    # manual turns: the link endpointed the audio it sent, then committed and asked
    mine = [e for e in res.events if e.data.get("source") == "client_endpointer"]
    assert [e.event_type for e in mine][:2] == ["vad.speech_started", "vad.speech_stopped"]
    (truth_end,) = events(res, "user.speech_stopped")
    assert mine[1].monotonic_ns >= truth_end.monotonic_ns + 400e6  # endpoint_ms of quiet
    sent = [
        (line["t_ns"], line["event"]["type"]) for line in link.raw_log if line["side"] == "client"
    ]
    commits = [t for t, ty in sent if ty == "input_audio_buffer.commit"]
    asks = [t for t, ty in sent if ty == "response.create"]
    assert commits and asks and commits[0] <= asks[0]
    assert commits[0] >= truth_end.monotonic_ns
    # the tool call went through the scenario's tool world and back to the remote agent
    (req,) = events(res, "tool.requested")
    assert req.data["tool"] == "book" and req.data["arguments"] == {"date": "2026-08-10"}
    (done,) = events(res, "tool.completed")
    assert done.monotonic_ns - req.monotonic_ns >= 100e6
    outputs = client_events(link, "conversation.item.create")
    assert json.loads(outputs[0]["item"]["output"]) == {"booked": True}
    deadline = time.monotonic() + 2
    while not agents[0].tool_results and time.monotonic() < deadline:
        time.sleep(0.02)
    assert agents[0].tool_results == [("call_1", {"booked": True}, None)]
    assert res.tool_audit["calls"][0]["committed"] is True


@needs_speech
def test_a_server_killed_mid_session_is_a_session_error_and_the_bundle_scores(
    tmp_path: Path,
) -> None:
    from voxassay.contracts.duplex.manifest import ClockInfo, Provenance, SystemInfo
    from voxassay.suites.duplex.live.bundle_writer import write_bundle
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    clips = {"ask": clip("aew_arctic_a0003.wav", 2.0), "cut": clip("aew_arctic_a0001.wav", 1.0)}
    server = RealtimeServer(lambda: EnergyAgent(answer_ms=1500), port=0)
    server.start_in_thread()
    killer = threading.Timer(1.2, server.kill)
    killer.start()
    try:
        link = RealtimeAgentLink(server.url)
        res = run_session(
            scenario(),
            clips,
            link,
            SessionConfig(clock="real", tail_ms=500, trigger_timeout_ms=1500),
            "killed",
        )
    finally:
        killer.cancel()
        server.stop()
    errors = events(res, "session.error")
    assert errors and "connection lost" in (errors[0].reason or "")
    assert errors[0].monotonic_ns >= 1.0e9  # not before the kill (1.2 s after the start)
    assert res.skipped and res.skipped[0]["segment"] == "cut"  # the agent never answered
    assert res.end.info["realtime"]["stats"]["connection.lost"] == 1
    folder = write_bundle(
        res,
        tmp_path / "killed",
        system=SystemInfo(name="realtime-energy", version="1"),
        provenance=Provenance(
            transport="socket",
            clock="monotonic",
            playback="modelled",
            capture="none",
            traffic="synthetic",
            acoustic_events="output_stream",
        ),
        clock=ClockInfo(kind="real", audio_origin_ns=0),
    )
    scored = score_bundle_folder(folder, detector="energy")
    assert scored.output.to_output()["evidence"]["level"] == "L2"  # modelled playback
    assert scored.metrics  # it scores
    problems = [p for p in scored.output.to_output()["problems"] if p["severity"] == "error"]
    assert not problems, problems


@needs_speech
def test_a_wrong_key_is_refused_and_the_key_is_never_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOXASSAY_RT_SERVER_TOKEN", "right-token-123")
    monkeypatch.setenv("VOXASSAY_RT_WRONG", "wrong-token-456")
    monkeypatch.delenv("VOXASSAY_RT_UNSET", raising=False)
    info = SessionInfo(session_id="k", clock="real")
    with serving(EnergyAgent, token_env="VOXASSAY_RT_SERVER_TOKEN") as (server, _):
        wrong = RealtimeAgentLink(server.url, key_env="VOXASSAY_RT_WRONG")
        out = wrong.start(info, 0)
        assert _errors(out) and "HTTP 401" in _errors(out)[0]
        assert wrong.push_audio(np.zeros(320, np.int16), 20_000_000) == []
        wrong.finish(40_000_000)
        unset = RealtimeAgentLink(server.url, key_env="VOXASSAY_RT_UNSET")
        assert "VOXASSAY_RT_UNSET is not set" in _errors(unset.start(info, 0))[0]
        unset.close()
        monkeypatch.setenv("VOXASSAY_RT_RIGHT", "right-token-123")
        right = RealtimeAgentLink(server.url, key_env="VOXASSAY_RT_RIGHT")
        assert _errors(right.start(info, 0)) == []
        deadline = time.monotonic() + 3
        while not any(line["side"] == "server" for line in right.raw_log):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        end = right.finish(0)
    dump = json.dumps(right.raw_log) + json.dumps(end.info) + json.dumps(wrong.raw_log)
    assert "right-token-123" not in dump and "wrong-token-456" not in dump
    assert client_events(right)[0]["type"] == "session.update"


def test_connect_refused_is_a_session_error_not_an_exception() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    link = RealtimeAgentLink(f"ws://127.0.0.1:{port}/", connect_timeout_s=1.0)
    out = link.start(SessionInfo(session_id="r", clock="real"), 0)
    assert "cannot connect" in _errors(out)[0]
    assert link.push_audio(np.zeros(320, np.int16), 0) == []
    assert link.on_playback(PlaybackReport("r1", "interrupted", 10.0), 0) == []
    assert link.on_tool_result("c", {}, None, 0) == []
    end = link.finish(0)
    assert end.info["realtime"]["stats"]["error.connect"] == 1


def _errors(out: list[AgentOutput]) -> list[str]:
    return [
        o.output.reason or ""
        for o in out
        if isinstance(o, Stamped)
        and isinstance(o.output, AgentEvent)
        and o.output.event_type == "session.error"
    ]


def _unwrapped(out: list[AgentOutput]) -> list[Any]:
    assert all(isinstance(o, Stamped) for o in out)
    return [o.output for o in out if isinstance(o, Stamped)]


def feed(link: RealtimeAgentLink, *messages: Any) -> list[Any]:
    """Hand server messages to the link's receive path (no socket) and collect outputs."""
    for m in messages:
        link._receive(m if isinstance(m, str | bytes) else json.dumps(m))
    return _unwrapped(link._drain())


def test_server_events_translate_and_bad_ones_become_session_errors() -> None:
    link = RealtimeAgentLink("ws://127.0.0.1:9/", barge_in="client")
    audio = pcm16_to_b64((np.ones(2400) * 1000).astype(np.int16))  # 100 ms at 24 kHz
    out = feed(
        link,
        {"type": "session.created", "event_id": "e0", "session": {}},
        {"type": "input_audio_buffer.speech_started", "audio_start_ms": 40, "item_id": "u1"},
        {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 900, "item_id": "u1"},
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "item_id": "u1",
            "content_index": 0,
            "transcript": "hello",
        },
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {
            "type": "response.audio.delta",
            "response_id": "r1",
            "item_id": "a1",
            "output_index": 0,
            "content_index": 0,
            "delta": audio,
        },
        {
            "type": "response.output_audio.delta",
            "response_id": "r1",
            "item_id": "a2",
            "output_index": 1,
            "content_index": 0,
            "delta": audio,
        },
        {
            "type": "response.done",
            "response": {
                "id": "r1",
                "status": "cancelled",
                "status_details": {"reason": "turn_detected"},
            },
        },
    )
    kinds = [type(o).__name__ + ":" + getattr(o, "event_type", "") for o in out]
    assert kinds[:4] == [
        "AgentEvent:vad.speech_started",
        "ClearAudio:",  # barge_in=client: speech_started stops playback
        "AgentEvent:vad.speech_stopped",
        "AgentEvent:asr.final",
    ]
    assert out[3].data["text"] == "hello" and out[3].utterance_id == "u1"
    pcm = [o for o in out if isinstance(o, AudioOut)]
    assert sum(o.pcm.size for o in pcm) == 2 * 1600  # 2 x 100 ms at 16 kHz after the flush
    assert isinstance(out[-2], ClearAudio) and out[-2].response_id == "r1"
    assert out[-1].event_type == "response.done" and out[-1].data == {
        "status": "cancelled",
        "reason": "turn_detected",
    }
    # truncation falls in the item the cut is in: 150 ms = 50 ms into the second item
    item, end_ms = link._truncation("r1", 150.0) or (None, 0)
    assert item is not None and item.item_id == "a2" and end_ms == 50
    item, end_ms = link._truncation("r1", 10_000.0) or (None, 0)
    assert item is not None and item.item_id == "a2" and end_ms == 100  # clamped to the audio

    bad = feed(
        link,
        "{not json",
        b"\x00binary",
        {"no": "type"},
        {"type": "brand.new_event"},
        {"type": "brand.new_event"},  # reported once per type
        {"type": "input_audio_buffer.append", "audio": ""},  # a client event from the server
        {"type": "response.output_audio.delta", "response_id": "r2"},  # fields missing
        {
            "type": "response.function_call_arguments.done",
            "response_id": "r2",
            "item_id": "f",
            "output_index": 0,
            "call_id": "c1",
            "name": "book",
            "arguments": "{oops",
        },
        {
            "type": "error",
            "event_id": "e9",
            "error": {"type": "invalid_request_error", "message": "bad thing", "code": "x"},
        },
        {"type": "output_audio_buffer.cleared", "event_id": "e10", "response_id": "r2"},
    )
    reasons = [
        o.reason for o in bad if isinstance(o, AgentEvent) and o.event_type == "session.error"
    ]
    assert any("malformed JSON" in r for r in reasons)
    assert any("binary" in r for r in reasons)
    assert any("without a string 'type'" in r for r in reasons)
    assert sum("brand.new_event" in r for r in reasons) == 1
    assert any("client event type" in r for r in reasons)
    assert any("response.output_audio.delta: malformed event" in r for r in reasons)
    assert any("arguments are not JSON" in r for r in reasons)
    assert "bad thing" in reasons
    (call,) = [o for o in bad if isinstance(o, ToolCall)]
    assert call.arguments == {"_raw": "{oops"} and call.name == "book"
    assert isinstance(bad[-1], ClearAudio) and bad[-1].response_id == "r2"
    # the raw log kept every line, malformed ones included, without audio payloads
    assert any("malformed" in line for line in link.raw_log)
    assert audio not in json.dumps(link.raw_log)


def test_beta_function_call_names_come_from_the_output_item() -> None:
    link = RealtimeAgentLink("ws://127.0.0.1:9/", protocol="beta")
    out = feed(
        link,
        {
            "type": "response.output_item.added",
            "response_id": "r1",
            "output_index": 0,
            "item": {
                "id": "f1",
                "type": "function_call",
                "call_id": "c1",
                "name": "lookup",
                "arguments": "",
            },
        },
        {
            "type": "response.function_call_arguments.done",
            "response_id": "r1",
            "item_id": "f1",
            "output_index": 0,
            "call_id": "c1",
            "arguments": '{"q": 1, "idempotency_key": "k"}',
        },
        {
            "type": "response.output_item.done",
            "response_id": "r1",
            "output_index": 0,
            "item": {
                "id": "f1",
                "type": "function_call",
                "call_id": "c1",
                "name": "lookup",
                "arguments": '{"q": 1}',
            },
        },
    )
    (call,) = out  # once, not again at output_item.done
    assert isinstance(call, ToolCall)
    assert (call.call_id, call.name, call.arguments["q"]) == ("c1", "lookup", 1)
    assert call.idempotency_key == "k" and call.response_id == "r1"


@needs_speech
def test_a_disconnect_fault_closes_the_socket_and_reconnects_with_a_new_session() -> None:
    agents: list[Recording] = []

    def make() -> Recording:
        agents.append(Recording(answer_ms=800))
        return agents[-1]

    sc = scenario(
        category="network_media",
        segments=[{"id": "ask", "role": "user", "audio": "a.wav", "at_ms": 200}],
        faults=[{"kind": "disconnect", "at_ms": 600, "duration_ms": 300}],
    )
    clips = {"ask": clip("aew_arctic_a0001.wav", 1.5)}
    with serving(make) as (server, trace):
        link = RealtimeAgentLink(server.url)
        res = run_session(sc, clips, link, SessionConfig(clock="real", tail_ms=1200), "net")
    assert not events(res, "session.error"), [e.reason for e in events(res, "session.error")]
    assert events(res, "session.disconnected")[0].reason == "fault"
    (resumed,) = events(res, "session.resumed")
    # after the fault's window (600 + 300 ms; the driver acts at a frame's start, <= 1 frame
    # early) and while the user still spoke (the question runs to 1700 ms)
    assert 880e6 <= resumed.monotonic_ns < 1700e6
    assert len(agents) == 2  # the Realtime protocol has no resumption: a new server session
    updates = [
        ln["t_ns"]
        for ln in link.raw_log
        if ln["side"] == "client" and ln["event"]["type"] == "session.update"
    ]
    # (the driver calls on_connection before it waits for the frame's deadline: <= 1 frame early)
    assert len(updates) == 2 and updates[1] >= resumed.monotonic_ns - 20e6
    sent = [
        ln["t_ns"]
        for ln in link.raw_log
        if ln["side"] == "client" and ln["event"]["type"] == "input_audio_buffer.append"
    ]
    assert not [t for t in sent if 620e6 < t < 880e6]  # nothing crossed the dropped link
    assert res.end.info["realtime"]["stats"]["connections"] == 2
    # the second agent heard the rest of the speech and answered it
    assert events(res, "response.created") and events(res, "playback.started")
    for side, ev in trace:
        check("ga", side, ev)


@pytest.mark.parametrize("agent_thread", [True, False])
def test_hop_trace_stamps_echoed_frames_in_causal_order_and_is_off_by_default(
    agent_thread: bool,
) -> None:
    """Both processes' stamps (one monotonic clock) follow each frame's path in order; the
    echo agent runs in a worker thread or on the server's loop (``agent_thread``) with the same
    result; without ``hop_trace`` nothing of the trace is on the wire."""
    from voxassay.suites.duplex.live import selfcheck
    from voxassay.systems.duplex.simple_agents import EchoAgent

    signal, starts = selfcheck.burst_signal(SR)
    clips = {selfcheck.SEGMENT_ID: signal[: starts[2]]}  # two bursts
    cfg = SessionConfig(clock="real", tail_ms=200)
    ended: list[SessionEnd] = []
    with serving(
        EchoAgent,
        sample_rate=24_000,
        agent_thread=agent_thread,
        on_end=lambda sid, end: ended.append(end),
    ) as (server, trace):
        link = RealtimeAgentLink(server.url, hop_trace=True)
        res = run_session(selfcheck._probe_scenario(), clips, link, cfg, "hops")
        plain = RealtimeAgentLink(server.url)
        res2 = run_session(selfcheck._probe_scenario(), clips, plain, cfg, "plain")
        deadline = time.monotonic() + 5
        while len(ended) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(ended) == 2  # the agent's finish ran for both connections
    for r in (res, res2):
        assert not events(r, "session.error")
        assert len(events(r, "playback.started")) == 2  # both bursts came back
    order = [
        "deadline",
        "hand",
        "queued",
        "server_recv",
        "server_agent_start",
        "server_agent_end",
        "server_apply",
        "server_emit",
        "server_send",
        "recv",
        "stamped",
    ]
    assert len(link.hops) >= 10  # 200 ms bursts: ~10 echoed frames each
    assert sum(bool(h["first"]) for h in link.hops) == 2  # one first frame per response
    for h in link.hops:
        stamps = [h[k] for k in order]
        assert stamps == sorted(stamps), h
        assert h["written"] >= h["queued"]
    # off by default: no event ids on the appends, no stamps in the server's events
    assert plain.hops == []
    assert all("event_id" not in e for e in client_events(plain, "input_audio_buffer.append"))
    served = [e for side, e in trace if side == "server" and "voxassay_hops" in e]
    assert len(served) == len(link.hops)  # only the traced session's first delta per frame
    breakdown = selfcheck.hop_breakdown(link.hops)
    assert breakdown["frames"] == len(link.hops) and breakdown["total"] > 0
    assert breakdown["first_of_response"]["frames"] == 2
