"""The Realtime WebSocket server around in-process agents: every event it emits conforms to the
official SDK's models (GA and beta), client events reach the agent, bad input gets ``error``
events without dropping the connection, floods are bounded, tokens are enforced, and the CLI.

Loopback only (127.0.0.1, ephemeral ports); every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from base64 import b64decode
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO
from tests.systems.duplex.conformance import check
from voxassay.contracts.duplex.agent_api import (
    AgentBase,
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
    ToolCall,
)
from voxassay.reference.server import RealtimeServer
from voxassay.systems.duplex.realtime_protocol import (
    BETA_HEADER,
    client_session,
    pcm16_to_b64,
    server_name,
)

pytest.importorskip("websockets")

pytestmark = pytest.mark.live

SR = 16_000
WIRE_FRAME = np.zeros(480, np.int16)  # 20 ms at 24 kHz


def tone(ms: float, sr: int = SR) -> np.ndarray:
    t = np.arange(int(sr * ms / 1000)) / sr
    return (0.2 * np.sin(2 * np.pi * 220 * t) * 32767).astype(np.int16)


class ScriptedAgent(AgentBase):
    """Emits every kind of output at fixed frames and records what reaches it."""

    def __init__(self) -> None:
        self.frames = 0
        self.reports: list[PlaybackReport] = []
        self.tool_results: list[tuple[str, Any, str | None]] = []
        self.hooks: list[tuple[str, Any]] = []
        self.finished = False

    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        self.session = session
        return []

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        self.frames += 1
        k = self.frames
        if k == 3:
            return [AgentEvent("vad.speech_started", utterance_id="u1")]
        if k == 6:
            return [
                AgentEvent("asr.partial", {"text": "book a"}, utterance_id="u1"),
                AgentEvent("vad.speech_stopped", utterance_id="u1"),
                AgentEvent("asr.final", {"text": "book a table"}, utterance_id="u1"),
                AgentEvent("turn.decision", {"action": "respond"}, response_id="r1"),
                AgentEvent("response.created", response_id="r1"),
                AudioOut("r1", tone(200)),
                ToolCall("call_1", "lookup", {"q": "table", "idempotency_key": "k1"}, "k1"),
            ]
        if k == 8:
            return [
                AudioOut("r1", tone(100)),
                AgentEvent("response.done", {"status": "completed"}, response_id="r1"),
            ]
        if k == 10:
            return [AgentEvent("response.created", response_id="r2"), AudioOut("r2", tone(1000))]
        if k == 12:
            return [
                ClearAudio("r2", "user speech"),
                AgentEvent("response.done", {"status": "cancelled"}, response_id="r2"),
                AudioOut("r2", tone(100)),  # after the cut: never sent
            ]
        if k == 14:
            return [
                AgentEvent("session.error", reason="scripted failure"),
                AgentEvent("response.created", response_id="r3"),
                ToolCall("call_2", "lookup", {"q": "x"}, response_id="r3"),
                AudioOut("r3", tone(60)),
                AgentEvent("response.done", {"status": "failed"}, response_id="r3"),
            ]
        return []

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        self.reports.append(report)
        return []

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        self.tool_results.append((call_id, result, error))
        return []

    def configure(self, settings: dict[str, Any], now_ns: int) -> list[AgentOutput]:
        self.hooks.append(("configure", settings))
        return []

    def on_response_request(self, now_ns: int) -> list[AgentOutput]:
        self.hooks.append(("response.create", None))
        return []

    def finish(self, now_ns: int) -> SessionEnd:
        self.finished = True
        return SessionEnd(final_state={"frames": self.frames})


@contextmanager
def serving(factory: Callable[[], Any], **kw: Any) -> Iterator[RealtimeServer]:
    server = RealtimeServer(factory, port=0, **kw)
    server.start_in_thread()
    try:
        yield server
    finally:
        server.stop()


class Client:
    """A scripted synchronous Realtime client that records everything it receives."""

    def __init__(self, url: str, dialect: str = "ga", headers: list[tuple[str, str]] | None = None):
        from websockets.sync.client import connect

        hdrs = list(headers or [])
        if dialect == "beta":
            hdrs.append(BETA_HEADER)
        self.ws = connect(
            url,
            additional_headers=hdrs,
            open_timeout=5,
            proxy=None,
            compression=None,
            legacy=True,
            max_queue=None,
        )
        self.events: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []

    def send(self, event: dict[str, Any]) -> None:
        self.sent.append(event)
        self.ws.send(json.dumps(event))

    def recv_until(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for ev in self.events:
            if pred(ev):
                return ev
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                types = [e.get("type") for e in self.events[-15:]]
                raise AssertionError(f"timed out; last events: {types}")
            ev = json.loads(self.ws.recv(timeout=left))
            self.events.append(ev)
            if pred(ev):
                return ev

    def collect(self, pred: Callable[[dict[str, Any]], bool], n: int, timeout: float = 5.0) -> None:
        """Receive until ``n`` received events satisfy ``pred`` (or fail at the timeout)."""
        deadline = time.monotonic() + timeout
        while sum(1 for e in self.events if pred(e)) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; got {[e.get('type') for e in self.events]}")
            self.events.append(json.loads(self.ws.recv(timeout=left)))

    def of(self, etype: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == etype]

    def close(self) -> None:
        self.ws.close()


def typed(etype: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("type") == etype


@pytest.mark.parametrize("dialect", ["ga", "beta"])
def test_every_server_event_conforms_and_client_events_reach_the_agent(dialect: str) -> None:
    agents: list[ScriptedAgent] = []
    ends: list[tuple[str, SessionEnd]] = []
    trace: list[tuple[str, dict[str, Any]]] = []

    def make() -> ScriptedAgent:
        agents.append(ScriptedAgent())
        return agents[-1]

    with serving(
        make,
        protocol="auto",
        on_end=lambda sid, end: ends.append((sid, end)),
        trace=lambda side, ev: trace.append((side, ev)),
        idle_tick_ms=10_000,
    ) as server:
        c = Client(server.url, dialect)
        c.recv_until(typed("session.created"))
        update = client_session(
            dialect,  # type: ignore[arg-type]
            turn="server_vad",
            voice="marin",
            transcribe="whisper-1",
            instructions="Be brief.",
        )
        c.send({"type": "session.update", "session": update})
        updated = c.recv_until(typed("session.updated"))["session"]
        # every accepted setting is echoed, in the client's dialect
        if dialect == "ga":
            assert updated["audio"]["output"]["voice"] == "marin"
            assert updated["audio"]["input"]["transcription"] == {"model": "whisper-1"}
        else:
            assert updated["voice"] == "marin"
            assert updated["input_audio_transcription"] == {"model": "whisper-1"}
        assert updated["instructions"] == "Be brief."
        for _ in range(20):
            c.send({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(WIRE_FRAME)})
        c.recv_until(lambda e: e["type"] == "response.done" and e["response"]["id"] == "r3")
        # the client answers the call, cuts r1 where it was heard, and pokes the rest
        (item_added,) = [
            e
            for e in c.of("response.output_item.added")
            if e["response_id"] == "r1" and e["item"]["type"] == "message"
        ]
        item_id = item_added["item"]["id"]
        c.send(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": 120,
            }
        )
        c.recv_until(typed("conversation.item.truncated"))
        out = json.dumps({"slots": ["19:00"]})
        fco = {"type": "function_call_output", "call_id": "call_1", "output": out}
        c.send({"type": "conversation.item.create", "item": fco})
        c.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "function_call_output",
                    "call_id": "call_2",
                    "output": json.dumps({"error": "no slots"}),
                },
            }
        )
        c.send({"type": "response.create"})
        c.send({"type": "input_audio_buffer.commit"})
        c.send({"type": "input_audio_buffer.clear"})
        c.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                },
            }
        )
        c.send({"type": "output_audio_buffer.clear"})
        c.send({"type": "response.cancel"})  # nothing active: an error event, still conforming
        c.recv_until(
            lambda e: e["type"] == "error" and "no active response" in e["error"]["message"]
        )
        c.close()
        deadline = time.monotonic() + 5
        while not ends and time.monotonic() < deadline:
            time.sleep(0.02)

    (agent,) = agents
    server_events = [ev for side, ev in trace if side == "server"]
    for ev in server_events:
        check(dialect, "server", ev)
    for ev in c.sent:
        check(dialect, "client", ev)
    types = {e["type"] for e in server_events}
    expected = {
        "session.created",
        "session.updated",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
        server_name("response.output_audio.delta", dialect),  # type: ignore[arg-type]
        server_name("response.output_audio.done", dialect),  # type: ignore[arg-type]
        "response.content_part.done",
        "response.output_item.done",
        "response.function_call_arguments.done",
        "response.done",
        "output_audio_buffer.cleared",
        "conversation.item.truncated",
        "error",
    }
    expected |= (
        {"conversation.item.added", "conversation.item.done"}
        if dialect == "ga"
        else {"conversation.item.created"}
    )
    assert expected <= types, expected - types
    # what arrived is what was traced, in order
    assert [e["event_id"] for e in c.events] == [e["event_id"] for e in server_events][
        : len(c.events)
    ]

    # responses: r1 completed, r2 cancelled with its late audio dropped, r3 failed
    done = {e["response"]["id"]: e["response"] for e in c.of("response.done")}
    assert done["r1"]["status"] == "completed"
    assert done["r2"]["status"] == "cancelled"
    assert done["r2"]["status_details"]["reason"] == "turn_detected"
    assert done["r3"]["status"] == "failed"
    delta = server_name("response.output_audio.delta", dialect)  # type: ignore[arg-type]
    samples = {
        rid: sum(len(b64decode(e["delta"])) // 2 for e in c.of(delta) if e["response_id"] == rid)
        for rid in ("r1", "r2")
    }
    assert samples["r1"] == 300 * 24  # 200 + 100 ms at 24 kHz, flushed at done
    assert samples["r2"] <= 1000 * 24  # the 100 ms sent after the clear never went out
    cleared = c.of("output_audio_buffer.cleared")
    assert cleared[0]["response_id"] == "r2"  # the agent's cut
    assert cleared[1]["response_id"] == "r3"  # the client's output_audio_buffer.clear
    # the tool call of r1 has no open response of its own, r3's belongs to r3
    calls = {e["call_id"]: e for e in c.of("response.function_call_arguments.done")}
    assert json.loads(calls["call_1"]["arguments"]) == {"q": "table", "idempotency_key": "k1"}
    assert calls["call_2"]["response_id"] == "r3"
    (transcript,) = c.of("conversation.item.input_audio_transcription.completed")
    (started,) = c.of("input_audio_buffer.speech_started")
    assert (
        transcript["transcript"] == "book a table" and transcript["item_id"] == started["item_id"]
    )
    assert started["audio_start_ms"] == 60  # 3 frames of client audio in
    # the agent heard the truncate, the tool outputs, and the hooks
    assert PlaybackReport("r1", "started", 0.0) in agent.reports
    assert PlaybackReport("r1", "interrupted", 120.0) in agent.reports
    assert ("call_1", {"slots": ["19:00"]}, None) in agent.tool_results
    assert ("call_2", None, "no slots") in agent.tool_results
    assert ("response.create", None) in agent.hooks
    assert agent.hooks[0][0] == "configure" and agent.hooks[0][1]["turn"] == "server_vad"
    assert agent.finished and ends and ends[0][1].final_state == {"frames": agent.frames}
    assert agent.session is not None and agent.session.clock == "real"
    assert agent.session.scenario is None


def test_bad_input_gets_error_events_and_the_connection_stays() -> None:
    with serving(ScriptedAgent, max_message_bytes=64 * 1024, idle_tick_ms=10_000) as server:
        c = Client(server.url)
        c.recv_until(typed("session.created"))
        bad: list[Any] = [
            b"\x00\x01binary",
            "{not json",
            "[1, 2]",
            json.dumps({"no": "type"}),
            json.dumps({"type": 5}),
            json.dumps({"type": "no.such.event"}),
            json.dumps({"type": "conversation.item.delete", "item_id": "x"}),
            json.dumps({"type": "input_audio_buffer.append", "audio": "!!notbase64!!"}),
            json.dumps({"type": "input_audio_buffer.append", "audio": 12}),
            json.dumps({"type": "input_audio_buffer.append", "audio": "AAAA" * 20_000}),  # > 64 KiB
            json.dumps({"type": "conversation.item.truncate", "item_id": "nope"}),
            json.dumps(
                {
                    "type": "conversation.item.truncate",
                    "item_id": "nope",
                    "content_index": 0,
                    "audio_end_ms": 5,
                }
            ),
            json.dumps(
                {
                    "type": "conversation.item.create",
                    "item": {"type": "function_call_output", "call_id": "ghost", "output": "{}"},
                }
            ),
            json.dumps({"type": "conversation.item.create", "item": {"type": "weird"}}),
            json.dumps({"type": "session.update", "session": {"input_audio_format": "g711_ulaw"}}),
            json.dumps({"type": "session.update", "session": "nope"}),
            json.dumps({"type": "response.cancel", "response_id": 7}),
            "[" * 5000 + "]" * 5000,  # nested too deep for the JSON parser
            json.dumps({"type": "input_audio_buffer.commit"}),  # nothing appended yet
        ]
        for msg in bad:
            c.ws.send(msg)
        c.collect(lambda e: e["type"] == "error", len(bad))
        errors = c.of("error")
        assert len(errors) == len(bad), [e["error"]["message"] for e in errors]
        for ev in errors:
            check("ga", "server", ev)
        messages = [e["error"]["message"] for e in errors]
        assert "binary" in messages[0] and "malformed JSON" in messages[1]
        assert "unknown client event type 'no.such.event'" in messages[5]
        assert "not supported by this server" in messages[6]
        assert "larger than" in messages[9]
        assert "not supported (pcm16 at 24 kHz only)" in messages[14]
        assert messages[-2] == "malformed JSON: nested too deeply"
        assert errors[-1]["error"]["code"] == "input_audio_buffer_commit_empty"
        assert "buffer only has 0.00ms of audio" in messages[-1]
        # 50 ms appended is still too little to commit; 150 ms more is enough
        c.send({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(tone(50, 24_000))})
        c.send({"type": "input_audio_buffer.commit"})
        c.recv_until(lambda e: e["type"] == "error" and "50.00ms" in e["error"]["message"])
        c.send({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(tone(150, 24_000))})
        c.send({"type": "input_audio_buffer.commit"})
        c.recv_until(typed("input_audio_buffer.committed"))
        # still serving: a valid update is answered
        c.send({"type": "session.update", "session": client_session("ga")})
        c.recv_until(typed("session.updated"))
        c.close()


def test_an_input_flood_is_dropped_with_an_error_and_the_session_survives() -> None:
    class Slow(ScriptedAgent):
        def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
            time.sleep(0.02)
            return []

    with serving(Slow, max_queued_frames=10, idle_tick_ms=10_000) as server:
        c = Client(server.url)
        c.recv_until(typed("session.created"))
        for _ in range(300):  # 6 s of audio at once: far more than the agent's queue
            c.send({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(WIRE_FRAME)})
        err = c.recv_until(
            lambda e: e["type"] == "error" and e["error"].get("code") == "input_dropped"
        )
        assert "input flood" in err["error"]["message"]
        c.send({"type": "session.update", "session": client_session("ga")})
        c.recv_until(typed("session.updated"))
        c.close()


def test_a_token_protected_server_refuses_a_wrong_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from websockets.exceptions import InvalidStatus

    monkeypatch.setenv("VOXASSAY_TEST_TOKEN", "s3cret-token")
    with serving(ScriptedAgent, token_env="VOXASSAY_TEST_TOKEN") as server:
        for headers in (
            [],
            [("Authorization", "Bearer wrong")],
            [("Authorization", "s3cret-token")],
        ):
            with pytest.raises(InvalidStatus) as info:
                Client(server.url, headers=headers)
            assert info.value.response.status_code == 401
        ok = Client(server.url, headers=[("Authorization", "Bearer s3cret-token")])
        ok.recv_until(typed("session.created"))
        ok.close()
    monkeypatch.delenv("VOXASSAY_TEST_TOKEN")
    with pytest.raises(ValueError, match="VOXASSAY_TEST_TOKEN"):
        RealtimeServer(ScriptedAgent, token_env="VOXASSAY_TEST_TOKEN")


def test_an_agent_that_fails_to_start_gets_an_error_and_a_close() -> None:
    class Broken(ScriptedAgent):
        def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
            raise RuntimeError("no model")

    from websockets.exceptions import ConnectionClosed

    with serving(Broken) as server:
        c = Client(server.url)
        err = c.recv_until(typed("error"))
        assert (
            "failed to start" in err["error"]["message"] and "no model" in err["error"]["message"]
        )
        with pytest.raises(ConnectionClosed):
            for _ in range(100):
                c.ws.recv(timeout=5)
        # the server itself is fine: the next client is served
        ok = Client(server.url)
        ok.recv_until(typed("session.created"))
        ok.close()


def test_idle_ticks_keep_the_agent_clock_running_and_playback_completion_is_estimated() -> None:
    agents: list[ScriptedAgent] = []

    def make() -> ScriptedAgent:
        agents.append(ScriptedAgent())
        return agents[-1]

    with serving(make, idle_tick_ms=40, playback_grace_ms=0) as server:
        c = Client(server.url)
        # no audio at all: the agent still ticks through its script
        c.recv_until(
            lambda e: e["type"] == "response.done" and e["response"]["id"] == "r1", timeout=5
        )
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not any(
            r.status == "completed" and r.response_id == "r1" for r in agents[0].reports
        ):
            time.sleep(0.02)
        # r1 played out to its end: there is no audio of it left to clear
        c.send({"type": "output_audio_buffer.clear"})
        c.recv_until(
            lambda e: e["type"] == "error" and "no response audio to clear" in e["error"]["message"]
        )
        c.close()
    (done,) = [r for r in agents[0].reports if r.status == "completed" and r.response_id == "r1"]
    assert done.played_ms == pytest.approx(300.0)


def test_cli_help_is_light_and_serve_runs(tmp_path: Any) -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from voxassay.cli.main import cli\n"
        "for args in (['--help'], ['reference', '--help'], ['reference', 'serve', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        "heavy = ('numpy', 'websockets', 'scipy', 'soundfile', 'openai', 'pydantic')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", out.stdout
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voxassay.cli.main",
            "reference",
            "serve",
            "--port",
            "0",
            "--agent",
            "energy",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(proc.stdout.readline() if proc.stdout else "")
        )
        reader.start()
        reader.join(20)
        assert line and line[0].startswith("ws://127.0.0.1:"), (line, proc.poll())
        url = line[0].split()[0]
        c = Client(url)
        c.recv_until(typed("session.created"))
        c.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_cli_serve_without_the_reference_agent_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from voxassay.cli.main import cli

    monkeypatch.setitem(sys.modules, "voxassay.reference.agent", None)  # import fails
    r = CliRunner().invoke(cli, ["reference", "serve", "--port", "0", "--policy", "careful"])
    assert r.exit_code == 2
    assert "voxassay.reference.agent" in r.output and "--agent" in r.output


def test_a_response_request_with_nothing_to_answer_is_created_and_done() -> None:
    """``response.create`` when the agent has nothing to say: ``response.created`` and
    ``response.done`` (completed, no output) still come, so an SDK client waiting for
    ``response.done`` is answered (issue 32 item 10)."""
    with serving(ScriptedAgent, idle_tick_ms=10_000) as server:
        c = Client(server.url)
        c.recv_until(typed("session.created"))
        c.send({"type": "response.create"})
        created = c.recv_until(typed("response.created"))
        done = c.recv_until(typed("response.done"))
        assert done["response"]["id"] == created["response"]["id"]
        assert done["response"]["status"] == "completed" and done["response"]["output"] == []
        for ev in (created, done):
            check("ga", "server", ev)
        c.close()
