"""An agent behind a plain audio WebRTC peer with JSON signalling (Pipecat's SmallWebRTC):
``smallwebrtc:http://HOST:PORT/api/offer``.

The link makes an SDP offer with one audio track (send and receive, Opus), POSTs it as JSON
``{"sdp", "type": "offer"}`` (a bearer token from ``key_env`` when given) and applies the
answer ``{"sdp", "type": "answer", "pc_id"}``. There is no event channel: only audio goes
both ways, as with a browser talking to the bot.

Audio: the user's frames are resampled to 48 kHz and queued to the outgoing track one
20 ms frame at a time as the driver pushes them (``realtime_webrtc.mic_track_class``);
received Opus frames are averaged to mono and resampled to the session rate.

Responses: plain WebRTC has none, so the link cuts the agent's audio into bursts, as the
phone link does: a burst (``response.created``, id ``rtc-N``) starts with the first audible
frame (peak over -54 dBFS) and ends (``response.done`` completed) after ``gap_ms`` without
one; quiet frames inside a burst are kept (they are its pauses), the trailing ``gap_ms`` are
not. An agent that stops for a barge-in simply stops sending: its burst ends there, and the
acoustic events of the output show where.

Host candidates are ``ice_hosts`` only (127.0.0.1 for a loopback URL); no STUN server is asked
unless ``stun=`` names one; the route is read from the nominated ICE pair. ``observer=URL``:
the framework's own events for the session's ``pc_id``, read after the call
(``observer_feed``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
)
from voxassay.systems.duplex.link_base import (
    LinkBase,
    LinkFactory,
    bearer_headers,
    describe_error,
    is_loopback,
    redact_url,
)
from voxassay.systems.duplex.realtime_protocol import StreamResampler
from voxassay.systems.duplex.realtime_webrtc import (
    FRAME_MS,
    WEBRTC_RATE,
    import_aiortc,
    mic_track_class,
    queue_frames,
    read_track,
)
from voxassay.systems.duplex.webrtc_ice import host_candidates, ice_configuration, selected_route

__all__ = ["SmallWebRTCLink", "build"]

_FRAME = WEBRTC_RATE * FRAME_MS // 1000
AUDIBLE_PEAK = 64
MAX_ANSWER_BYTES = 64_000


class SmallWebRTCLink(LinkBase):
    """Audio-only WebRTC to an agent, as a ``DuplexAgent`` (module docstring)."""

    TRANSPORT = "smallwebrtc"
    RAW_LOG_NAME = "signalling.jsonl"

    def __init__(
        self,
        url: str,
        *,
        key_env: str | None = None,
        gap_ms: float = 400.0,
        ice_hosts: tuple[str, ...] | None = None,
        stun: str | None = None,
        connect_timeout_s: float = 10.0,
        media_timeout_s: float = 3.0,
        observer: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a SmallWebRTC offer URL starts with http:// or https://: {url!r}")
        import_aiortc()
        super().__init__()
        self.url = url
        self.key_env = key_env
        self.gap_ms = gap_ms
        self.stun = stun
        self.connect_timeout_s = connect_timeout_s
        self.media_timeout_s = media_timeout_s
        self.observer = observer
        self.ice_hosts = (
            ice_hosts if ice_hosts is not None else (("127.0.0.1",) if is_loopback(url) else None)
        )
        self.info: dict[str, Any] = {
            "backend": "smallwebrtc",
            "transport": self.TRANSPORT,
            "url": redact_url(url),
            "signalling": "JSON offer/answer over HTTP POST (Pipecat SmallWebRTC)",
            "framing": f"Opus, {FRAME_MS} ms frames at {WEBRTC_RATE} Hz (aiortc encoder)",
            "gap_ms": gap_ms,
            "ice_hosts": list(self.ice_hosts) if self.ice_hosts is not None else "all interfaces",
        }
        self._reset()

    def _reset(self) -> None:
        self._pc: Any = None
        self._mic: Any = None
        self._reader: asyncio.Future[None] | None = None
        self._connected = False
        self._pc_ids: list[str] = []
        self._sr = 16_000
        self._up: StreamResampler | None = None
        self._down: StreamResampler | None = None
        self._backlog = np.zeros(0, np.int16)
        self._burst: str | None = None
        self._n_bursts = 0
        self._quiet: list[np.ndarray] = []
        self._quiet_samples = 0
        self.ice: dict[str, Any] | None = None
        self.observed_route: str | None = None

    # ------------------------------------------------------------------ connection
    async def _post_offer(self, sdp: str) -> dict[str, Any]:
        import httpx

        headers = bearer_headers(self.key_env, "application/json")
        async with httpx.AsyncClient(
            timeout=self.connect_timeout_s, trust_env=not is_loopback(self.url)
        ) as client:
            reply = await client.post(self.url, json={"sdp": sdp, "type": "offer"}, headers=headers)
        if reply.status_code not in (200, 201) or len(reply.content) > MAX_ANSWER_BYTES:
            raise ConnectionError(
                f"the server refused the offer (HTTP {reply.status_code}: {reply.text[:200]})"
            )
        answer = reply.json()
        if not isinstance(answer, dict) or not isinstance(answer.get("sdp"), str):
            raise ConnectionError("the answer is not JSON with an sdp")
        self._log("server", {"type": "answer", "pc_id": answer.get("pc_id")})
        return answer

    async def _connect(self) -> None:
        from aiortc import RTCPeerConnection, RTCSessionDescription

        pc = RTCPeerConnection(configuration=ice_configuration(stun=self.stun))
        self._pc = pc
        self._mic = mic_track_class()()
        pc.addTrack(self._mic)
        connected = asyncio.Event()

        def state() -> None:
            if pc.connectionState == "connected":
                connected.set()
            elif pc.connectionState in ("failed", "closed") and self._connected:
                self._connected = False
                self._error("connection", f"the peer connection is {pc.connectionState}")

        pc.on("connectionstatechange", state)
        pc.on("track", self._on_track)
        with host_candidates(self.ice_hosts):
            await pc.setLocalDescription(await pc.createOffer())
        self._log("client", {"type": "offer"})
        answer = await self._post_offer(pc.localDescription.sdp)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
        await asyncio.wait_for(connected.wait(), self.connect_timeout_s)
        self._connected = True
        if isinstance(answer.get("pc_id"), str):
            self._pc_ids.append(answer["pc_id"])
        self.ice = selected_route(pc)
        self.observed_route = self.ice["route"] if self.ice else None

    async def _disconnect(self) -> None:
        self._connected = False
        pc, self._pc = self._pc, None
        if self._reader is not None:
            self._reader.cancel()
        if pc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pc.close(), 3.0)

    # ------------------------------------------------------------------ audio
    def _on_track(self, track: Any) -> None:
        if track.kind == "audio" and self._reader is None:
            self._reader = asyncio.ensure_future(self._read_track(track))

    async def _read_track(self, track: Any) -> None:
        if not await read_track(track, self.media_timeout_s, self._received) and self._connected:
            self._error("media", f"no media received for {self.media_timeout_s:g} s")

    def _received(self, pcm: np.ndarray, rate: int) -> None:
        if self._down is None or self._down.rate_in != rate:
            self._down = StreamResampler(rate, self._sr)
        out = self._down.process_pcm16(pcm)
        if not out.size:
            return
        self._count("audio.received_samples", int(pcm.size))
        audible = int(np.abs(out).max()) > AUDIBLE_PEAK
        with self._lock:
            if audible:
                if self._burst is None:
                    self._n_bursts += 1
                    self._burst = f"rtc-{self._n_bursts}"
                    self._emit(AgentEvent("response.created", response_id=self._burst))
                for held in self._quiet:  # the burst's own pause
                    self._emit(AudioOut(self._burst, held))
                self._quiet, self._quiet_samples = [], 0
                self._emit(AudioOut(self._burst, out))
            elif self._burst is not None:
                self._quiet.append(out)
                self._quiet_samples += out.size
                if self._quiet_samples * 1000 >= self.gap_ms * self._sr:
                    rid, self._burst = self._burst, None
                    self._quiet, self._quiet_samples = [], 0
                    self._emit(
                        AgentEvent("response.done", {"status": "completed"}, response_id=rid)
                    )

    # ------------------------------------------------------------------ DuplexAgent
    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        """Offer, answer, ICE and DTLS; the session clock is ``now_ns``."""
        if self._loop is not None:
            self.close()
        self._reset()
        self._begin(now_ns)
        self._sr = session.sample_rate
        self._up = StreamResampler(self._sr, WEBRTC_RATE)
        try:
            self._run(self._connect(), self.connect_timeout_s + 2.0)
        except PermissionError as exc:
            self._error("config", str(exc))
        except Exception as exc:
            self._error("connect", f"cannot connect to {self.info['url']}: {describe_error(exc)}")
        return self._drain()

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        """Queue the user's frame to the outgoing track (48 kHz, 20 ms frames)."""
        if not self._connected or self._up is None or self._mic is None or self._loop is None:
            self._count("frames.dropped_disconnected")
            return self._drain()
        wire = self._up.process_pcm16(np.asarray(pcm, dtype=np.int16).reshape(-1))
        pending = np.concatenate([self._backlog, wire]) if self._backlog.size else wire
        n = pending.size // _FRAME * _FRAME
        self._backlog = pending[n:]
        if n:
            queue_frames(
                self._loop, self._mic, pending[:n], lambda: self._count("audio.dropped_frames")
            )
        return self._drain()

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        """Nothing to tell: plain WebRTC carries no playback reports."""
        return self._drain()

    def on_tool_result(self, call: Any, result: Any, now_ns: int) -> list[AgentOutput]:
        return self._drain()

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        return self._drain()

    def finish(self, now_ns: int) -> SessionEnd:
        """Close; with ``observer`` the framework's events of the session are read then."""
        with self._lock:
            if self._burst is not None:
                rid, self._burst = self._burst, None
                self._emit(AgentEvent("response.done", {"status": "completed"}, response_id=rid))
        self.close()
        events = self.read_observer(self._pc_ids, self.key_env)
        return SessionEnd(
            events=events,
            info={
                "smallwebrtc": {
                    **self.info,
                    "pc_ids": list(self._pc_ids),
                    "ice": self.ice,
                    "bursts": self._n_bursts,
                    "stats": dict(sorted(self.stats.items())),
                },
                **({"observer": self.observer_info} if self.observer else {}),
            },
        )

    def close(self) -> None:
        """Close the peer connection and stop the loop thread (idempotent, bounded)."""
        if self._loop is not None and self._pc is not None:
            with contextlib.suppress(Exception):
                self._run(self._disconnect(), 4.0)
        self._connected = False
        self._stop_loop()


def build(spec: Any, capability: str) -> LinkFactory:
    """Registry factory for ``smallwebrtc:http(s)://HOST:PORT/api/offer[?gap_ms=400&
    key_env=VAR&ice_hosts=127.0.0.1&observer=URL]``."""
    from voxassay.core.errors import SpecError
    from voxassay.core.registry import options_of

    if capability != "duplex":
        raise SpecError(f"smallwebrtc provides duplex, not {capability!r}")
    url = str(spec.target or "")
    if not url.startswith(("http://", "https://")):
        raise SpecError(f"smallwebrtc needs the http(s):// offer URL, got {spec.raw!r}")
    names = frozenset(o.name for o in options_of("smallwebrtc", "duplex"))
    spec.check_options(names, "smallwebrtc")
    options: dict[str, Any] = {}
    for key, value in spec.backend_options.items():  # name=, route= ... are the harness's
        if key in ("gap_ms", "connect_timeout_s", "media_timeout_s"):
            options[key] = spec.float_option(key, 0.0, lo=0.01)
        elif key == "ice_hosts":
            options["ice_hosts"] = tuple(h for h in value.split(",") if h)
        else:
            options[key] = value
    try:
        return LinkFactory(SmallWebRTCLink, url, options)
    except ValueError as exc:
        raise SpecError(f"{redact_url(spec.raw)}: {exc}") from None
