"""Serve an in-process ``DuplexAgent`` over the OpenAI Realtime WebRTC flow (aiortc).

``WebRTCAgentServer(factory)`` (``voxassay reference serve --transport webrtc``) listens for
HTTP on 127.0.0.1 and answers ``POST /v1/realtime/calls`` (body: an SDP offer,
``Content-Type: application/sdp``; at most 64 KiB) with ``201 Created`` and the SDP answer
(``Location: /v1/realtime/calls/<id>``). ``token_env`` requires ``Authorization: Bearer
<token>`` (401); at most ``max_connections`` calls at once (503); other paths 404, other
methods 405. Host candidates are the bind address only (``webrtc_ice.host_candidates``); no
STUN server is asked, so a relay route is the client's TURN server.

A call is the Realtime WebSocket server's connection (``server._Connection``: the same
event handling, agent worker and outputs) with two differences:

- events travel on the client's ``oai-events`` data channel (``DataChannelSocket`` adapts
  it to what the connection expects of a socket);
- audio is RTP: the client's track (Opus, decoded at 48 kHz, channels averaged, resampled to
  24 kHz) feeds the agent as appends would; the agent's audio goes to an outgoing track
  (``SpeakerTrack``) that sends 20 ms frames in real time (silence between responses).
  The track knows what was played: ``output_audio_buffer.started`` and ``PlaybackReport``
  started when a response's first frame goes out, ``output_audio_buffer.stopped`` and
  completed when its last one has, and at a clear (the agent's stop, a cancel, or the
  client's ``output_audio_buffer.clear``) its queued audio is dropped, the agent hears
  ``interrupted`` at the played milliseconds, and ``output_audio_buffer.cleared`` goes out.
  No audio deltas are sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import hmac
import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import PlaybackReport, SessionEnd
from voxassay.reference.realtime_outputs import _Response
from voxassay.reference.server import RealtimeServer, _Connection
from voxassay.reference.threaded import ServesInThread
from voxassay.systems.duplex.realtime_protocol import PROTOCOL_RATE, StreamResampler
from voxassay.systems.duplex.webrtc_ice import host_candidates

__all__ = ["WebRTCAgentServer"]

RATE = 48_000
FRAME = RATE // 50  # 20 ms
MAX_OFFER_BYTES = 64 * 1024
CALLS_PATH = "/v1/realtime/calls"


class DataChannelSocket:
    """An RTCDataChannel seen as the WebSocket a ``_Connection`` reads and writes."""

    def __init__(self, channel: Any, pc: Any) -> None:
        self.channel = channel
        self.pc = pc
        self.inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        channel.on("message", self.inbox.put_nowait)
        channel.on("close", lambda: self.inbox.put_nowait(None))
        self.transport = self
        self.closing: asyncio.Future[None] | None = None

    async def send(self, text: str) -> None:
        if self.channel.readyState != "open":
            raise ConnectionError("the data channel is closed")
        self.channel.send(text)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.inbox.put_nowait(None)
        with contextlib.suppress(Exception):
            await self.pc.close()

    def abort(self) -> None:
        self.closing = asyncio.ensure_future(self.close())

    def __aiter__(self) -> DataChannelSocket:
        return self

    async def __anext__(self) -> str | bytes:
        message = await self.inbox.get()
        if message is None:
            raise StopAsyncIteration
        return message


def _speaker_track_class() -> Any:
    from aiortc.mediastreams import MediaStreamTrack

    class SpeakerTrack(MediaStreamTrack):
        """The agent's voice: 20 ms frames at 48 kHz in real time, silence between."""

        kind = "audio"

        def __init__(self, call: _WebRTCCall) -> None:
            super().__init__()
            self.call = call
            self.queue: deque[list[Any]] = deque()  # [rid, pcm, offset]
            self.sent: dict[str, int] = {}
            self.t0: float | None = None
            self.pts = 0

        def add(self, rid: str, pcm: np.ndarray) -> None:
            if pcm.size:
                self.queue.append([rid, pcm, 0])

        def clear(self, rid: str | None) -> int:
            """Drop the queued audio of ``rid`` (None: all); the samples it had played."""
            self.queue = deque(c for c in self.queue if rid is not None and c[0] != rid)
            return self.sent.get(rid, 0) if rid is not None else 0

        def queued(self, rid: str) -> bool:
            return any(c[0] == rid for c in self.queue)

        async def recv(self) -> Any:
            import av

            if self.t0 is None:
                self.t0 = time.monotonic()
            wait = self.t0 + self.pts / RATE - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            out = np.zeros(FRAME, np.int16)
            filled = 0
            while filled < FRAME and self.queue:
                chunk = self.queue[0]
                rid, pcm, offset = chunk
                n = min(FRAME - filled, pcm.size - offset)
                out[filled : filled + n] = pcm[offset : offset + n]
                filled += n
                chunk[2] = offset + n
                first = rid not in self.sent
                self.sent[rid] = self.sent.get(rid, 0) + n
                if first:
                    self.call.track_started(rid)
                if chunk[2] >= pcm.size:
                    self.queue.popleft()
                    if not self.queued(rid):
                        self.call.track_drained(rid, self.sent[rid])
            frame = av.AudioFrame.from_ndarray(out.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = RATE
            frame.pts = self.pts
            frame.time_base = fractions.Fraction(1, RATE)
            self.pts += FRAME
            return frame

    return SpeakerTrack


class _WebRTCCall(_Connection):
    """A Realtime connection whose audio is RTP (module docstring)."""

    def __init__(self, srv: RealtimeServer, ws: DataChannelSocket, speaker: Any) -> None:
        super().__init__(srv, ws, "ga")
        self.speaker = speaker
        self.up: dict[str, StreamResampler] = {}
        self.mic_rs: StreamResampler | None = None

    # -- input: the client's track
    async def listen(self, track: Any) -> None:
        from aiortc.mediastreams import MediaStreamError

        while self.alive:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            x = frame.to_ndarray().reshape(-1, len(frame.layout.channels)).mean(axis=1)
            if self.mic_rs is None:
                self.mic_rs = StreamResampler(frame.sample_rate, PROTOCOL_RATE)
            self.feed(self.mic_rs.process_pcm16(np.round(x).astype(np.int16)))

    # -- output: the agent's audio goes to the track, never as deltas
    def send_audio(self, resp: _Response, wire: np.ndarray) -> None:
        if not wire.size:
            return
        rs = self.up.get(resp.rid)
        if rs is None:
            rs = self.up[resp.rid] = StreamResampler(PROTOCOL_RATE, RATE)
        resp.sent_samples += int(wire.size)
        self.last_audio_rid = resp.rid
        self.speaker.add(resp.rid, rs.process_pcm16(wire))

    def close_response(self, resp: _Response, status: str, reason: str = "") -> None:
        was_done = resp.done
        super().close_response(resp, status, reason)
        rs = self.up.pop(resp.rid, None)
        if not was_done and rs is not None and status != "cancelled":
            self.speaker.add(resp.rid, rs.flush_pcm16())
        if not was_done and status == "completed" and not self.speaker.queued(resp.rid):
            self.track_drained(resp.rid, self.speaker.sent.get(resp.rid, 0))

    def track_started(self, rid: str) -> None:
        resp = self.responses.get(rid)
        if resp is None or resp.cut:
            return
        resp.first_audio_ns = self.now()
        self.emit({"type": "output_audio_buffer.started", "response_id": rid})
        self.submit(("playback", PlaybackReport(rid, "started", 0.0)))

    def track_drained(self, rid: str, samples: int) -> None:
        resp = self.responses.get(rid)
        if resp is None or resp.cut or resp.completed_reported or not resp.done:
            return
        resp.completed_reported = True  # the track knows: no estimate from the ticker
        self.emit({"type": "output_audio_buffer.stopped", "response_id": rid})
        self.submit(("playback", PlaybackReport(rid, "completed", samples * 1000 / RATE)))

    def clear(self, resp: _Response, reason: str) -> None:
        if not resp.cut:
            played = self.speaker.clear(resp.rid)
            self.up.pop(resp.rid, None)
            if resp.first_audio_ns is not None and not resp.completed_reported:
                report = PlaybackReport(resp.rid, "interrupted", played * 1000 / RATE)
                self.submit(("playback", report))
        super().clear(resp, reason)


class WebRTCAgentServer(ServesInThread):
    """HTTP signalling + aiortc peers around an agent factory (module docstring)."""

    _thread_name = "voxassay-webrtc-server"

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token_env: str | None = None,
        frame_ms: int = 20,
        max_connections: int = 16,
        on_end: Callable[[str, SessionEnd], None] | None = None,
        trace: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        _import_aiortc()
        token = None
        if token_env:
            token = os.environ.get(token_env)
            if not token:
                raise ValueError(f"token_env={token_env}: that environment variable is not set")
        self._token = token
        # the settings every call's connection reads (never started as a WebSocket server)
        self.settings = RealtimeServer(
            factory, host=host, port=port, frame_ms=frame_ms, on_end=on_end, trace=trace
        )
        self.host, self.port = host, port
        self.max_connections = max_connections
        self.calls: dict[str, tuple[Any, _WebRTCCall | None]] = {}
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._thread: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{CALLS_PATH}"

    # ------------------------------------------------------------------ HTTP
    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, body, headers = 400, b"bad request\n", {"Content-Type": "text/plain"}
        try:
            async with asyncio.timeout(10):
                status, body, headers = await self._request(reader)
        except asyncio.LimitOverrunError:  # a request or header line over the 64 KiB limit
            status, body = 431, b"a request line or header is too long\n"
        except (TimeoutError, ValueError, asyncio.IncompleteReadError, ConnectionError) as exc:
            body = f"bad request: {exc}\n".encode()
        reason = {
            201: "Created",
            400: "Bad Request",
            401: "Unauthorized",
            404: "Not Found",
            405: "Method Not Allowed",
            413: "Payload Too Large",
            431: "Request Header Fields Too Large",
            503: "Service Unavailable",
        }.get(status, "Error")
        head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Connection: close"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        with contextlib.suppress(ConnectionError):
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            writer.close()

    async def _request(self, reader: asyncio.StreamReader) -> tuple[int, bytes, dict[str, str]]:
        text = {"Content-Type": "text/plain"}
        line = (await reader.readuntil(b"\r\n")).decode("latin-1").strip()
        method, _, rest = line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        headers: dict[str, str] = {}
        for _ in range(100):
            raw = (await reader.readuntil(b"\r\n")).decode("latin-1").strip()
            if not raw:
                break
            key, _, value = raw.partition(":")
            headers[key.strip().lower()] = value.strip()
        if path != CALLS_PATH:
            return 404, f"the offer goes to {CALLS_PATH}\n".encode(), text
        if method != "POST":
            return 405, b"POST an SDP offer\n", {**text, "Allow": "POST"}
        if self._token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode()):
                return 401, b"missing or wrong bearer token\n", text
        size = int(headers.get("content-length", "0") or 0)
        if size <= 0 or size > MAX_OFFER_BYTES:
            return 413, f"an offer is 1 to {MAX_OFFER_BYTES} bytes\n".encode(), text
        offer = (await reader.readexactly(size)).decode("utf-8", "replace")
        if len(self.calls) >= self.max_connections:
            return (
                503,
                f"the server is at its limit of {self.max_connections} calls\n".encode(),
                text,
            )
        call_id = f"rtc_{uuid.uuid4().hex[:16]}"
        try:
            answer = await self._answer(call_id, offer)
        except Exception as exc:
            self.calls.pop(call_id, None)
            return 400, f"cannot answer the offer: {type(exc).__name__}: {exc}\n".encode(), text
        return (
            201,
            answer.encode(),
            {
                "Content-Type": "application/sdp",
                "Location": f"{CALLS_PATH}/{call_id}",
            },
        )

    # ------------------------------------------------------------------ peers
    async def _answer(self, call_id: str, offer: str) -> str:
        from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

        pc = RTCPeerConnection(configuration=RTCConfiguration(iceServers=[]))
        self.calls[call_id] = (pc, None)
        speaker = _speaker_track_class()(None)
        mic: list[Any] = []

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "audio":
                mic.append(track)

        @pc.on("datachannel")
        def on_channel(channel: Any) -> None:
            if channel.label != "oai-events":
                return
            call = _WebRTCCall(self.settings, DataChannelSocket(channel, pc), speaker)
            speaker.call = call
            self.calls[call_id] = (pc, call)
            task = asyncio.ensure_future(self._run_call(call_id, call, mic))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                entry = self.calls.get(call_id)
                if entry is not None and entry[1] is not None:
                    entry[1].ws.inbox.put_nowait(None)
                elif entry is not None:
                    self.calls.pop(call_id, None)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        pc.addTrack(speaker)  # takes the offer's audio transceiver: send and receive
        with host_candidates([self.host]):
            await pc.setLocalDescription(await pc.createAnswer())
        return str(pc.localDescription.sdp)

    async def _run_call(self, call_id: str, call: _WebRTCCall, mic: list[Any]) -> None:
        listen = asyncio.ensure_future(call.listen(mic[0])) if mic else None
        try:
            await call.run()
        finally:
            if listen is not None:
                listen.cancel()
            pc, _ = self.calls.pop(call_id, (None, None))
            if pc is not None:
                with contextlib.suppress(Exception):
                    await pc.close()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> str:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(
            self._http, self.host, self.port, limit=MAX_OFFER_BYTES
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.url

    async def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        url = await self.start()
        if ready is not None:
            ready(url)
        assert self._stopped is not None
        await self._stopped.wait()
        assert self._server is not None
        self._server.close()
        for pc, _ in list(self.calls.values()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pc.close(), 3.0)
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5.0)


def _import_aiortc() -> None:
    try:
        import aiortc  # noqa: F401
    except ImportError as exc:
        from voxassay.core.errors import BackendUnavailable

        raise BackendUnavailable(
            "serving over WebRTC needs aiortc: pip install 'voxassay[webrtc]'"
        ) from exc
