"""``webrtc``: the OpenAI Realtime WebRTC flow against ``reference.webrtc_server`` serving an
``EnergyAgent`` in this process (its own threads and loop), over loopback.

Asserted: ICE gathers host candidates on 127.0.0.1 only, on both peers, although aioice would
offer every interface; no STUN server is asked unless named and TURN credentials come only from
the environment; a session with real speech plays the agent's answer, the caller's cut-in
stops it, the route comes from the nominated pair, and the transport states its clock,
framing and jitter buffer.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from tests.helpers.duplex import arctic_clip, cut_in_scenario, importable, need, needs_speech
from voxassay.contracts.duplex.agent_api import SessionEnd
from voxassay.reference.webrtc_server import WebRTCAgentServer
from voxassay.suites.duplex.live.session import SessionConfig, run_session
from voxassay.systems.duplex.realtime_webrtc import WebRTCAgentLink
from voxassay.systems.duplex.simple_agents import EnergyAgent
from voxassay.systems.duplex.webrtc_ice import host_candidates, ice_configuration

pytestmark = pytest.mark.live


@pytest.fixture(autouse=True)
def _aiortc() -> None:
    need("aiortc", importable("aiortc"), "pip install 'voxassay[webrtc]' (make test installs it)")


_CANDIDATE = re.compile(r"^a=candidate:\S+ \d+ \S+ \d+ (\S+) \d+ typ (\w+)", re.M)


@contextmanager
def served(make: Any = EnergyAgent) -> Iterator[tuple[WebRTCAgentServer, list[SessionEnd]]]:
    ends: list[SessionEnd] = []
    server = WebRTCAgentServer(make, port=0, on_end=lambda sid, end: ends.append(end))
    server.start_in_thread()
    try:
        yield server, ends
    finally:
        server.stop()


async def _offer(hosts: list[str] | None, url: str | None = None) -> tuple[str, str | None]:
    """Gather an offer (host candidates on ``hosts``); POST it to ``url`` when given."""
    import httpx
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection(ice_configuration())
    try:
        pc.createDataChannel("oai-events")
        pc.addTransceiver("audio")
        with host_candidates(hosts):
            await pc.setLocalDescription(await pc.createOffer())
        offer = pc.localDescription.sdp
        answer = None
        if url is not None:
            async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
                reply = await client.post(
                    url, content=offer.encode(), headers={"Content-Type": "application/sdp"}
                )
            assert reply.status_code == 201, reply.text
            answer = reply.text
        return offer, answer
    finally:
        await pc.close()


def test_host_candidates_are_loopback_only_on_both_peers() -> None:
    from aioice.ice import get_host_addresses

    every = set(get_host_addresses(use_ipv4=True, use_ipv6=True))  # aioice's own choice
    with served() as (server, _):
        offer, answer = asyncio.run(_offer(["127.0.0.1"], server.url))
    assert answer is not None
    for sdp in (offer, answer):
        found = _CANDIDATE.findall(sdp)
        assert found, sdp
        assert {addr for addr, _ in found} == {"127.0.0.1"}
        assert {kind for _, kind in found} == {"host"}  # no STUN asked, no reflexive ones
    # unrestricted, aioice offers the machine's interfaces instead (what the patch prevents)
    free, _ = asyncio.run(_offer(None))
    assert {addr for addr, _ in _CANDIDATE.findall(free)} == every


def test_no_stun_by_default_and_turn_credentials_only_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ice_configuration().iceServers == []
    with pytest.raises(ValueError, match="needs a TURN server"):
        ice_configuration(route="relay")
    with pytest.raises(PermissionError, match=r"VOXASSAY_T_NONE \(turn_user_env"):
        ice_configuration(
            turn="turn:127.0.0.1:3478", turn_user_env="VOXASSAY_T_NONE", turn_pass_env="X"
        )
    monkeypatch.setenv("VOXASSAY_T_USER", "alice")
    monkeypatch.setenv("VOXASSAY_T_PASS", "s3cret-value")
    cfg = ice_configuration(
        route="relay",
        turn="turn:127.0.0.1:3478",
        turn_user_env="VOXASSAY_T_USER",
        turn_pass_env="VOXASSAY_T_PASS",
    )
    (turn,) = cfg.iceServers
    assert (turn.username, turn.credential) == ("alice", "s3cret-value")
    assert cfg.iceTransportPolicy.value == "relay"
    link = WebRTCAgentLink(
        "http://127.0.0.1:9/v1/realtime/calls",
        route="relay",
        turn_server="turn:127.0.0.1:3478",
        turn_user_env="VOXASSAY_T_USER",
        turn_pass_env="VOXASSAY_T_PASS",
    )
    assert "s3cret-value" not in json.dumps(link.info, default=str)  # what bundles keep


@needs_speech
def test_a_webrtc_call_plays_the_answer_and_the_cut_in_stops_it() -> None:
    clips = {
        "ask": arctic_clip("aew_arctic_a0001.wav", 2.0),
        "cut": arctic_clip("aew_arctic_a0002.wav", 1.2),
    }
    with served(lambda: EnergyAgent(answer_ms=2000)) as (server, ends):
        link = WebRTCAgentLink(server.url)
        res = run_session(
            cut_in_scenario("rtc", 300),
            clips,
            link,
            SessionConfig(clock="real", tail_ms=800),
            "rtc1",
        )
    errors = [e.reason for e in res.events if e.event_type == "session.error"]
    assert not errors, errors
    # the route is what the nominated pair says: host to host on loopback
    (ice,) = [e for e in res.events if e.event_type == "network.ice_selected"]
    assert ice.producer == "transport" and ice.data["route"] == "direct"
    pair = res.end.info["realtime"]["ice"]
    assert pair["local"]["address"] == pair["remote"]["address"] == "127.0.0.1"
    assert {e.route for e in res.events if e.route is not None} == {"direct"}
    # the answer was heard: audio over the media track, played
    started = next(e for e in res.events if e.event_type == "playback.started")
    k = round(started.monotonic_ns * 16_000 / 1e9)
    assert np.sqrt(np.mean(res.output[k : k + 8000] ** 2)) > 0.01
    # the cut-in: the server detected it, cleared its buffer, playback stopped
    cut = [e for e in res.events if e.event_type == "playback.interrupted"]
    assert cut and cut[0].response_id == started.response_id
    # while it played: what was played fits in the time since playback started (one 20 ms
    # frame of rounding); how long that was is the machine's, not asserted
    assert 0 < cut[0].played_until_ms <= (cut[0].monotonic_ns - started.monotonic_ns) / 1e6 + 20
    order = [e.event_type for e in res.events if e.response_id == started.response_id]
    assert order.index("playback.interrupted") <= order.index("response.done")
    # the transport states its clock, its framing and its jitter buffer
    clocks = {e.data["producer"] for e in res.events if e.event_type == "clock.producer"}
    assert "transport" in clocks
    info = res.end.info["realtime"]
    assert info["transport"] == "webrtc" and "Opus" in info["framing"] and info["jitter_buffer"]
    assert info["barge_in"] == "server" and info["barge_in_source"] == "protocol default"
    assert ends and ends[0].info is not None  # the server's session ended too


def test_an_overlong_header_line_gets_a_431_and_the_server_goes_on() -> None:
    """A 64 KiB header line (over the reader's limit) is answered 431, not an unhandled
    exception without a reply; the next request is served (issue 32 item 10)."""
    import socket

    with served() as (server, _):
        for header in (b"X-Long: " + b"a" * (70 * 1024), b"X-Short: a"):
            with socket.create_connection((server.host, server.port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n")
                reply = s.recv(4096)
            status = reply.split(b"\r\n", 1)[0]
            assert status == (
                b"HTTP/1.1 431 Request Header Fields Too Large"
                if header.startswith(b"X-Long")
                else b"HTTP/1.1 404 Not Found"
            ), reply
