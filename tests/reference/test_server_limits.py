"""The Realtime server bounds its work: a connection cap (HTTP 503 beyond it, served again
once a session ends), sessions whose client left while the agent was being built never start,
and connect/close cycles leave no threads behind. Loopback only; every wait is bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.reference.test_server import Client, ScriptedAgent, serving, typed
from voxassay.contracts.duplex.agent_api import AgentOutput, SessionEnd, SessionInfo

pytest.importorskip("websockets")

pytestmark = pytest.mark.live


def _wait(pred: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def test_the_connection_cap_refuses_with_503_and_frees_a_place_when_a_session_ends() -> None:
    from websockets.exceptions import InvalidStatus

    with serving(ScriptedAgent, max_connections=3, idle_tick_ms=10_000) as server:
        held = [Client(server.url) for _ in range(3)]
        for c in held:
            c.recv_until(typed("session.created"))
        with pytest.raises(InvalidStatus) as info:
            Client(server.url)
        assert info.value.response.status_code == 503
        assert b"limit of 3 sessions" in info.value.response.body
        assert server.refused == 1
        held.pop().close()
        assert _wait(lambda: len(server.connections) == 2)
        again = Client(server.url)
        again.recv_until(typed("session.created"))
        for c in [*held, again]:
            c.close()


def test_sessions_closed_while_their_agent_is_built_never_start_and_leave_no_threads() -> None:
    built = threading.Semaphore(0)
    starts: list[str] = []
    ends: list[str] = []

    class SlowToBuild(ScriptedAgent):
        def __init__(self) -> None:
            super().__init__()
            time.sleep(0.3)  # a model warm-up
            built.release()

        def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
            starts.append(session.session_id)
            return []

    def on_end(sid: str, end: SessionEnd) -> None:
        ends.append(sid)

    before = threading.active_count()
    with serving(SlowToBuild, on_end=on_end, max_connections=50) as server:
        baseline = threading.active_count()
        for _ in range(20):  # connect and leave at once: the agent is still being built
            c = Client(server.url)
            c.recv_until(typed("session.created"))
            c.close()
        assert _wait(lambda: len(ends) == 20, timeout=20), f"{len(ends)} of 20 sessions ended"
        assert starts == [], "an agent whose client had left was started"
        assert _wait(lambda: not server.connections)
        assert _wait(lambda: threading.active_count() <= baseline, timeout=10), (
            f"{threading.active_count()} threads, {baseline} before the cycles: "
            f"{[t.name for t in threading.enumerate()]}"
        )
        # the server still serves a client that stays
        c = Client(server.url)
        c.recv_until(typed("session.created"))
        assert _wait(lambda: len(starts) == 1)
        c.close()
    assert _wait(lambda: threading.active_count() <= before, timeout=10)


def test_one_warm_up_serves_every_session_that_starts_during_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voxassay.reference import speech

    calls: list[str] = []
    monkeypatch.setattr(speech, "_warmed", threading.Event())
    monkeypatch.setattr(
        speech, "transcribe", lambda *a, **k: calls.append("asr") or time.sleep(0.2)
    )
    monkeypatch.setattr(speech, "speak", lambda *a, **k: calls.append("tts"))
    threads = [threading.Thread(target=speech.warm_up) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert calls == ["asr", "tts"]
    assert speech._warmed.is_set()
