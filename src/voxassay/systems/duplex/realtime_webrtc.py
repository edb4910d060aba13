"""The OpenAI Realtime protocol over WebRTC (aiortc): ``webrtc:URL``.

The flow OpenAI documents for WebRTC clients: the link makes an SDP offer with one audio
track (send and receive, Opus) and a data channel named ``oai-events``, POSTs it to the URL
(``.../v1/realtime/calls``, ``Content-Type: application/sdp``, a bearer token from
``key_env`` when given) and applies the SDP answer it gets back. Client and server events are
the Realtime protocol's JSON on the data channel (``realtime_client.RealtimeClient`` reads
them); audio is RTP on the track both ways, never ``input_audio_buffer.append`` or audio
deltas.

Audio. The user's frames (session rate) are resampled to 48 kHz and queued to the outgoing
track, which hands aiortc one 20 ms frame at a time as the driver pushes them (the driver
paces in real time); aiortc encodes Opus (20 ms packets). Received RTP goes through aiortc's
jitter buffer (16 packets, 4 prefetched: 80 ms) and Opus decoder (48 kHz stereo); the link
averages the channels, resamples to the session rate and gives the audio to the driver as
``AudioOut`` of the response the server says is playing (``output_audio_buffer.started``
... ``stopped`` / ``cleared``; audible audio outside that span goes to the latest response).
What the track carries between responses (silence) is not output.

Barge-in: the server owns the output buffer (the protocol default over WebRTC is
``server``: playback stops at ``output_audio_buffer.cleared`` or a cancelled response); the
server knows what was played, so the link sends no ``conversation.item.truncate``.

Route and addresses: ``route=direct|relay`` (relay: relay-only ICE policy through the TURN
server ``turn=turn:HOST:PORT`` with credentials from ``turn_user_env`` / ``turn_pass_env``);
host candidates are ``ice_hosts`` only (default: 127.0.0.1 for a loopback URL, else every
interface); no STUN server is asked unless ``stun=`` names one. The route the session reports
is read from the nominated ICE pair (``webrtc_ice.selected_route``), never from the spec;
``info["ice"]`` keeps the pair. The link's events of producer ``transport``
(``network.ice_selected``) carry it into the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    PlaybackReport,
)
from voxassay.systems.duplex.impair import NETWORK_KINDS, ImpairPlan, UdpImpairer
from voxassay.systems.duplex.link_base import (
    LinkFactory,
    bearer_headers,
    describe_error,
    is_loopback,
    redact_url,
)
from voxassay.systems.duplex.realtime_client import BargeIn, RealtimeClient
from voxassay.systems.duplex.realtime_protocol import Dialect, StreamResampler
from voxassay.systems.duplex.webrtc_ice import host_candidates, ice_configuration, selected_route

__all__ = [
    "WEBRTC_RATE",
    "WebRTCAgentLink",
    "build",
    "import_aiortc",
    "mic_track_class",
    "queue_frames",
    "read_track",
]

WEBRTC_RATE = 48_000
FRAME_MS = 20
_FRAME = WEBRTC_RATE * FRAME_MS // 1000
JITTER_BUFFER = "aiortc JitterBuffer: 16 packets, 4 prefetched (80 ms at 20 ms packets)"


def mic_track_class() -> Any:
    from aiortc.mediastreams import MediaStreamTrack

    class MicTrack(MediaStreamTrack):
        """The user's audio: 20 ms frames at 48 kHz, released as the driver pushes them."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self.frames: asyncio.Queue[np.ndarray] = asyncio.Queue(maxsize=500)
            self.pts = 0

        async def recv(self) -> Any:
            import av

            pcm = await self.frames.get()
            frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = WEBRTC_RATE
            frame.pts = self.pts
            frame.time_base = fractions.Fraction(1, WEBRTC_RATE)
            self.pts += pcm.size
            return frame

    return MicTrack


def queue_frames(loop: Any, mic: Any, pcm: np.ndarray, dropped: Callable[[], None]) -> None:
    """Hand ``pcm`` (48 kHz, a whole number of 20 ms frames) to ``mic``'s queue on ``loop``
    from another thread; a full queue drops a frame and calls ``dropped``."""
    frames = [pcm[i : i + _FRAME] for i in range(0, pcm.size, _FRAME)]

    def put() -> None:
        for f in frames:
            try:
                mic.frames.put_nowait(f)
            except asyncio.QueueFull:
                dropped()

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(put)


async def read_track(
    track: Any, timeout_s: float, received: Callable[[np.ndarray, int], None]
) -> bool:
    """Hand every frame of a received audio track to ``received(pcm16 mono, rate)`` (channels
    averaged) until it ends; False when no frame came for ``timeout_s`` (the path is gone)."""
    from aiortc.mediastreams import MediaStreamError

    while True:
        try:
            frame = await asyncio.wait_for(track.recv(), timeout_s)
        except TimeoutError:
            return False
        except (MediaStreamError, asyncio.CancelledError):
            return True
        x = frame.to_ndarray().reshape(-1, len(frame.layout.channels)).mean(axis=1)
        received(np.round(x).astype(np.int16), frame.sample_rate)


class WebRTCAgentLink(RealtimeClient):
    """A Realtime server reached over WebRTC, as a ``DuplexAgent`` (module docstring)."""

    TRANSPORT: ClassVar[str] = "webrtc"
    PROTOCOL_BARGE_IN: ClassVar[Literal["server", "client"]] = "server"

    def __init__(
        self,
        url: str,
        *,
        route: str = "direct",
        turn_server: str | None = None,
        turn_user_env: str | None = None,
        turn_pass_env: str | None = None,
        stun: str | None = None,
        ice_hosts: tuple[str, ...] | None = None,
        protocol: Dialect = "ga",
        key_env: str | None = None,
        turn: Literal["server_vad", "manual"] = "server_vad",
        barge_in: BargeIn = "protocol",
        voice: str | None = None,
        instructions: str | None = None,
        transcribe: str | None = None,
        session_model: str | None = None,
        connect_timeout_s: float = 10.0,
        media_timeout_s: float = 3.0,
        impair: bool = False,
        endpoint_ms: float = 500.0,
        threshold_dbfs: float = -40.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a WebRTC signalling URL starts with http:// or https://: {url!r}")
        import_aiortc()
        self.route = route
        self.media_timeout_s = media_timeout_s
        self.impair = impair
        self.applies_faults = NETWORK_KINDS if impair else frozenset()
        self.turn_server = turn_server
        self.turn_user_env = turn_user_env
        self.turn_pass_env = turn_pass_env
        self.stun = stun
        self.ice_hosts = (
            ice_hosts if ice_hosts is not None else (("127.0.0.1",) if is_loopback(url) else None)
        )
        if route not in ("direct", "relay"):
            raise ValueError(f"route must be direct or relay, not {route!r}")
        if route == "relay" and not turn_server:
            raise ValueError("route=relay needs a TURN server (turn=turn:HOST:PORT)")
        if impair and route != "relay":
            raise ValueError(
                "impair runs as the TURN hop: give route=relay and a TURN server (both peers "
                "check each other directly on a direct route, so a relay in front of one "
                "candidate would not carry the media)"
            )
        super().__init__(
            url,
            protocol=protocol,
            key_env=key_env,
            turn=turn,
            barge_in=barge_in,
            voice=voice,
            instructions=instructions,
            transcribe=transcribe,
            session_model=session_model,
            connect_timeout_s=connect_timeout_s,
            endpoint_ms=endpoint_ms,
            threshold_dbfs=threshold_dbfs,
        )
        self.info.update(
            route_requested=route,
            turn_server=turn_server,
            ice_hosts=list(self.ice_hosts) if self.ice_hosts is not None else "all interfaces",
            framing=f"Opus, {FRAME_MS} ms frames at {WEBRTC_RATE} Hz (aiortc encoder)",
            jitter_buffer=JITTER_BUFFER,
        )

    def _reset_session_state(self) -> None:
        super()._reset_session_state()
        self._pc: Any = None
        self._channel: Any = None
        self._mic: Any = None
        self._up: StreamResampler | None = None
        self._down: StreamResampler | None = None
        self._playing: str | None = None  # response the server says is playing
        self._latest: str | None = None  # latest response created
        self._tail: str | None = None  # stopped; its last frames are still in the jitter buffer
        self._held: dict[str, dict[str, Any]] = {}  # response.done held until its audio ends
        self._ended: set[str] = set()  # responses cleared or done: later audio is not theirs
        self._reader: asyncio.Task[Any] | None = None
        self.ice: dict[str, Any] | None = None
        self.observed_route: str | None = None
        self._backlog: deque[np.ndarray] = deque()
        self._plan: ImpairPlan | None = None
        self._relays: list[UdpImpairer] = []
        self._faults: list[Any] = getattr(self, "_faults", [])
        self._seed: int = getattr(self, "_seed", 0)

    def _is_open(self) -> bool:
        return self._pc is not None or self._loop is not None

    # ------------------------------------------------------------------ connection
    async def _post_offer(self, sdp: str) -> str:
        import httpx

        headers = bearer_headers(self.key_env, "application/sdp")
        async with httpx.AsyncClient(
            timeout=self.connect_timeout_s, trust_env=not is_loopback(self.url)
        ) as client:
            reply = await client.post(self.url, content=sdp.encode(), headers=headers)
        if reply.status_code not in (200, 201):
            raise ConnectionError(
                f"the server refused the offer (HTTP {reply.status_code}: {reply.text[:200]})"
            )
        return reply.text

    async def _connect(self) -> None:
        from aiortc import RTCPeerConnection, RTCSessionDescription

        turn = self.turn_server
        if self._plan is not None and turn and self.route == "relay":  # impair the TURN hop
            turn = await self._front(turn)
        config = ice_configuration(
            route=self.route,
            turn=turn,
            turn_user_env=self.turn_user_env,
            turn_pass_env=self.turn_pass_env,
            stun=self.stun,
        )
        pc = RTCPeerConnection(configuration=config)
        self._pc = pc
        self._mic = mic_track_class()()
        pc.addTrack(self._mic)
        channel = pc.createDataChannel("oai-events")
        self._channel = channel
        opened = asyncio.Event()
        channel.on("open", opened.set)
        channel.on("message", self._receive_event)
        channel.on("close", lambda: self._lost("the data channel closed"))
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        with host_candidates(self.ice_hosts):
            await pc.setLocalDescription(await pc.createOffer())
        answer = await self._post_offer(pc.localDescription.sdp)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        await asyncio.wait_for(opened.wait(), self.connect_timeout_s)
        self._connected = True
        self.ice = selected_route(pc)
        self.observed_route = self.ice["route"] if self.ice else None

    async def _relay(self, host: str, port: int) -> int:
        assert self._plan is not None
        relay = UdpImpairer((host, port), self._plan, t0_ns=self._t0)
        self._relays.append(relay)
        return await relay.start()

    async def _front(self, turn: str) -> str:
        """The TURN server's URL, with an impairing relay in front of it."""
        scheme, _, where = turn.partition(":")
        host, _, port = where.split("?", 1)[0].rpartition(":")
        return f"{scheme}:127.0.0.1:{await self._relay(host or where, int(port or 3478))}"

    def on_fault_window(self, i: int, start_ms: float) -> None:
        """The session opened fault ``i``'s window (its trigger fired)."""
        plan, loop = self._plan, self._loop
        if plan is not None and loop is not None:
            loop.call_soon_threadsafe(plan.open, i, start_ms)

    def _on_state(self) -> None:
        pc = self._pc
        if pc is not None and pc.connectionState in ("failed", "closed", "disconnected"):
            self._lost(f"peer connection {pc.connectionState}")

    def _lost(self, reason: str) -> None:
        if self._closing or not self._connected:
            return
        self._connected = False
        self._count("connection.lost")
        self._emit(
            AgentEvent(
                "session.disconnected", {"cause": reason}, reason=reason, producer="transport"
            )
        )
        self._error("connection", f"connection lost: {reason}")

    def _open_session(self) -> None:
        if self.impair and self._plan is None:  # one plan per session: reconnections share it
            self._plan = ImpairPlan(self._faults, seed=self._seed)
        try:
            self._run(self._connect(), self.connect_timeout_s + 2.0)
        except PermissionError as exc:
            self._error("config", str(exc))
            return
        except Exception as exc:
            self._error("connect", f"cannot connect to {self.info['url']}: {describe_error(exc)}")
            return
        self._count("connections")
        self.info["route"] = self.observed_route
        self.info["ice"] = self.ice
        self._emit(
            AgentEvent(
                "network.ice_selected",
                {"route": self.observed_route, "pair": self.ice, "requested": self.route},
                producer="transport",
            )
        )
        self._send({"type": "session.update", "session": self._session_doc})

    async def _disconnect(self) -> None:
        self._closing = True
        self._connected = False
        pc, self._pc = self._pc, None
        if self._reader is not None:
            self._reader.cancel()
        if pc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pc.close(), 3.0)
        for relay in self._relays:
            relay.close()

    # ------------------------------------------------------------------ events and audio
    def _send(self, event: dict[str, Any]) -> None:
        with self._lock:
            if not self._connected or self._loop is None or self._channel is None:
                self._count("send.dropped_disconnected")
                return
            self._log("client", event)
            self._count(f"sent.{event['type']}")
            text = json.dumps(event, separators=(",", ":"))
        channel = self._channel

        def send() -> None:
            try:
                channel.send(text)
            except Exception as exc:
                self._lost(describe_error(exc))

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(send)

    def _send_audio(self, pcm: np.ndarray) -> None:
        assert self._up is not None
        wire = self._up.process_pcm16(pcm)
        self._backlog.append(wire)
        pending = np.concatenate(list(self._backlog))
        self._backlog.clear()
        n = pending.size // _FRAME * _FRAME
        if pending.size > n:
            self._backlog.append(pending[n:])
        if self._mic is None or self._loop is None or n == 0:
            return
        queue_frames(
            self._loop, self._mic, pending[:n], lambda: self._count("audio.dropped_frames")
        )

    def _on_track(self, track: Any) -> None:
        if track.kind == "audio" and self._reader is None:
            self._reader = asyncio.ensure_future(self._read_track(track))

    async def _read_track(self, track: Any) -> None:
        if not await read_track(track, self.media_timeout_s, self._received):
            # a WebRTC sender never stops sending: the path is gone
            self._lost(f"no media received for {self.media_timeout_s:g} s")
            await self._disconnect()

    def _received(self, pcm: np.ndarray, rate: int) -> None:
        if self._down is None or self._down.rate_in != rate:
            self._down = StreamResampler(rate, self._sr)
        out = self._down.process_pcm16(pcm)
        self._count("audio.received_samples", int(pcm.size))
        audible = bool(out.size) and int(np.abs(out).max()) > 64
        with self._lock:
            rid = self._playing
            if rid is None and self._tail is not None:
                if not audible:  # the stopped response's last frame has come through
                    self._release(self._tail)
                    self._tail = None
                else:
                    rid = self._tail
            if rid is None and audible:  # audible with no span open: the latest response
                rid = self._latest
            if rid is not None and rid in self._ended and rid != self._tail:
                # frames in flight when the server cut or ended the response: they would have
                # been heard, but the player has closed it; counted, not replayed
                self._count("audio.after_end_samples", int(out.size))
                rid = None
        if rid is not None and out.size:
            self._emit(AudioOut(rid, out))

    def _release(self, rid: str) -> None:
        self._ended.add(rid)
        held = self._held.pop(rid, None)
        if held is not None:
            super()._on_response_done(held)

    def _on_response_created(self, ev: dict[str, Any]) -> None:
        super()._on_response_created(ev)
        rid = ev["response"]["id"]
        with self._lock:
            self._latest = rid

    def _on_buffer_started(self, ev: dict[str, Any]) -> None:
        rid = ev.get("response_id")
        with self._lock:
            self._playing = rid if isinstance(rid, str) else self._latest

    def _on_buffer_stopped(self, ev: dict[str, Any]) -> None:
        with self._lock:
            rid = ev.get("response_id") or self._playing
            self._playing = None
            if self._tail is not None and self._tail != rid:
                self._release(self._tail)
            self._tail = rid if isinstance(rid, str) else None

    def _on_cleared(self, ev: dict[str, Any]) -> None:
        with self._lock:
            cut = (ev.get("response_id"), self._playing, self._tail, self._latest)
            self._ended.update(r for r in cut if isinstance(r, str))
            self._playing = None
            self._tail = None
        super()._on_cleared(ev)
        for rid in list(self._held):
            self._release(rid)

    def _on_response_done(self, ev: dict[str, Any]) -> None:
        """A completed response whose audio is still coming over the track: its
        ``response.done`` waits for the audio (the player would end it early otherwise);
        generation is over, playback is not (``output_audio_buffer.stopped`` and then the
        first silent frame end it)."""
        resp = ev.get("response")
        rid = resp.get("id") if isinstance(resp, dict) else None
        status = resp.get("status") if isinstance(resp, dict) else None
        with self._lock:
            playing = rid is not None and rid in (self._playing, self._tail)
            if playing and status == "completed":
                self._held[str(rid)] = ev
                return
            if isinstance(rid, str):
                self._ended.add(rid)
        super()._on_response_done(ev)

    _HANDLERS: ClassVar[dict[str, Any]] = {
        **RealtimeClient._HANDLERS,
        "response.created": _on_response_created,
        "output_audio_buffer.started": _on_buffer_started,
        "output_audio_buffer.stopped": _on_buffer_stopped,
        "output_audio_buffer.cleared": _on_cleared,
        "response.done": _on_response_done,
    }

    # ------------------------------------------------------------------ DuplexAgent
    def start(self, session: Any, now_ns: int) -> list[AgentOutput]:
        self._faults = list(session.scenario.faults) if session.scenario is not None else []
        self._seed = int(getattr(session, "seed", 0))
        out = super().start(session, now_ns)  # resets the session state, then connects
        self._up = StreamResampler(session.sample_rate, WEBRTC_RATE)
        return out

    def finish(self, now_ns: int) -> Any:
        end = super().finish(now_ns)
        if self._relays:
            reports = [r.report() for r in self._relays]
            end.info["realtime"]["impairment"] = reports[0] if len(reports) == 1 else reports
        return end

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        """Nothing to tell: over WebRTC the server knows what was played."""
        return self._drain()

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        """False: close the peer connection. True: a new offer (a new server session)."""
        if connected and not self._connected and self._loop is not None:
            self._closing = False

            async def again() -> None:
                await asyncio.get_running_loop().run_in_executor(None, self._open_session)

            asyncio.run_coroutine_threadsafe(again(), self._loop)
        elif not connected and self._pc is not None and self._loop is not None:
            self._connected = False
            asyncio.run_coroutine_threadsafe(self._disconnect(), self._loop)
        return self._drain()

    def close(self) -> None:
        """Close the peer connection and stop the loop thread (idempotent, bounded)."""
        if self._loop is not None and self._pc is not None:
            with contextlib.suppress(Exception):
                self._run(self._disconnect(), 4.0)
        self._connected = False
        self._stop_loop()


def import_aiortc() -> None:
    try:
        import aiortc  # noqa: F401
        import httpx  # noqa: F401
    except ImportError as exc:
        from voxassay.core.errors import BackendUnavailable

        raise BackendUnavailable(
            "the WebRTC link needs aiortc and httpx: pip install 'voxassay[webrtc]'"
        ) from exc


# --------------------------------------------------------------------------- registry

_FLOATS = ("connect_timeout_s", "media_timeout_s", "endpoint_ms", "threshold_dbfs")
_PASSED = (
    "protocol",
    "key_env",
    "barge_in",
    "voice",
    "instructions",
    "transcribe",
    "session_model",
    "turn_user_env",
    "turn_pass_env",
    "stun",
    "route",
)


def build(spec: Any, capability: str) -> LinkFactory:
    """Registry factory for ``webrtc:http(s)://HOST[:PORT]/v1/realtime/calls[?route=relay&
    turn=turn:HOST:PORT&turn_user_env=VAR&turn_pass_env=VAR&ice_hosts=127.0.0.1]``."""
    from voxassay.core.errors import SpecError
    from voxassay.core.registry import options_of

    if capability != "duplex":
        raise SpecError(f"webrtc provides duplex, not {capability!r}")
    url = str(spec.target or "")
    if not url.startswith(("http://", "https://")):
        raise SpecError(f"webrtc needs the http(s):// URL the offer is POSTed to: {spec.raw!r}")
    spec.check_options(frozenset(o.name for o in options_of("webrtc", "duplex")), "webrtc")
    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    options: dict[str, Any] = {}
    for key, value in spec.options.items():
        if key in _FLOATS:
            options[key] = spec.float_option(key, 0.0)
        elif key == "turn":
            options["turn_server"] = value
        elif key == "turn_detection":
            options["turn"] = value
        elif key == "ice_hosts":
            options["ice_hosts"] = tuple(h for h in value.split(",") if h)
        elif key == "impair":
            options["impair"] = value.lower() in ("1", "true", "yes")
        elif key in _PASSED:
            options[key] = value
    try:
        return LinkFactory(WebRTCAgentLink, url, options)
    except (ValueError, PermissionError) as exc:
        raise SpecError(f"{redact_url(spec.raw)}: {exc}") from None
