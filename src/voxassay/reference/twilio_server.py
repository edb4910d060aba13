"""Serve an in-process ``DuplexAgent`` as a phone agent: the agent's side of Twilio Media Streams.

``TwilioAgentServer(factory)`` (``voxassay reference serve --transport twilio-ws``) listens on
127.0.0.1 (``ws://HOST:PORT/media``) and takes what Twilio sends when a call is forked to a
WebSocket: ``connected``, ``start`` (the media format must be ``audio/x-mulaw`` at 8 kHz,
mono; anything else closes the stream with 1003), ``media`` (the caller, 8 kHz mu-law ->
the agent's rate, cut into ``frame_ms`` frames), ``mark`` (an echo of ours), ``dtmf``
(ignored) and ``stop`` (the call ended). Each connection gets a fresh agent on its own worker
thread (``agent_host.AgentHost``); at most ``max_connections`` at once (HTTP 503 beyond);
``token_env`` requires ``Authorization: Bearer <token>`` (HTTP 401).

Agent outputs: ``AudioOut`` -> ``media`` messages (mu-law, 20 ms each); the end of a
response (``response.done`` completed) -> a ``mark`` named after the response;
``ClearAudio`` or a cancelled response -> ``clear``. Playback as the agent hears it:
``started`` when the response's first audio is sent, ``completed`` when its mark comes back
(the caller's side played everything before it), ``interrupted`` at a clear with
``played_ms`` = the real time since the first audio (at most what was sent).
When no media arrives for ``idle_tick_ms`` the agent gets silent frames (its clock ticks, as
behind a live line).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    Stamped,
)
from voxassay.reference.agent_host import AgentHost
from voxassay.reference.threaded import ServesInThread
from voxassay.systems.duplex.g711 import mulaw_decode, mulaw_encode
from voxassay.systems.duplex.realtime_protocol import StreamResampler
from voxassay.systems.duplex.twilio_ws import PHONE_RATE

__all__ = ["TwilioAgentServer"]

_CHUNK = PHONE_RATE // 50  # 20 ms of mu-law


@dataclass
class _Spoken:
    rid: str
    resampler: StreamResampler
    sent: int = 0  # 8 kHz samples sent
    first_ns: int | None = None
    done: bool = False
    cut: bool = False


class _Call:
    """One Media Stream: its agent, resamplers and the responses it is sending."""

    def __init__(self, srv: TwilioAgentServer, ws: Any) -> None:
        self.srv = srv
        self.ws = ws
        self.loop = asyncio.get_running_loop()
        self.t0 = time.monotonic_ns()
        self.sid = f"call_{uuid.uuid4().hex[:16]}"
        self.stream_sid: str | None = None
        self.frame = srv.sample_rate * srv.frame_ms // 1000
        self.up = StreamResampler(PHONE_RATE, srv.sample_rate)
        self.inbuf = np.zeros(0, np.int16)
        self.samples = 0
        self.last_media_ns = 0
        self.spoken: dict[str, _Spoken] = {}
        self.out: asyncio.Queue[str | None] = asyncio.Queue(maxsize=srv.max_outgoing)
        self.host = AgentHost(
            srv.factory,
            session_id=self.sid,
            sample_rate=srv.sample_rate,
            frame_ms=srv.frame_ms,
            loop=self.loop,
            post=self.apply,
            now=self.now,
            on_error=self.agent_error,
            on_end=srv.on_end,
            max_queued_frames=srv.max_queued_frames,
        )
        self.errors: list[str] = []

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def agent_error(self, message: str) -> None:
        self.errors.append(message)  # Media Streams has no error message: kept, then closed
        if "failed to" in message:
            self.loop.create_task(self.ws.close(1011, "agent failed"))

    # ------------------------------------------------------------------ sending
    def send(self, message: dict[str, Any]) -> None:
        if self.stream_sid is None:
            return
        try:
            self.out.put_nowait(json.dumps({**message, "streamSid": self.stream_sid}))
        except asyncio.QueueFull:
            self.loop.create_task(self.ws.close(1008, "the caller side is not reading"))

    async def sender(self) -> None:
        while (text := await self.out.get()) is not None:
            try:
                async with asyncio.timeout(self.srv.send_timeout_s):
                    await self.ws.send(text)
            except Exception:
                self.ws.transport.abort()
                return

    def apply(self, outputs: list[AgentOutput], samples: int) -> None:
        for out in outputs:
            if isinstance(out, Stamped):
                out = out.output
            if isinstance(out, AudioOut):
                self.speak(out)
            elif isinstance(out, ClearAudio):
                self.clear(out.response_id)
            elif isinstance(out, AgentEvent) and out.response_id:
                status = out.data.get("status")
                if out.event_type == "response.cancelled" or status == "cancelled":
                    self.clear(out.response_id)
                elif out.event_type == "response.done":
                    self.finish_response(out.response_id)

    def speak(self, out: AudioOut) -> None:
        resp = self.spoken.get(out.response_id)
        if resp is None:
            resampler = StreamResampler(self.srv.sample_rate, PHONE_RATE)
            resp = self.spoken[out.response_id] = _Spoken(out.response_id, resampler)
        if resp.done or resp.cut:
            return
        self.media(resp, resp.resampler.process_pcm16(np.asarray(out.pcm, np.int16).reshape(-1)))

    def media(self, resp: _Spoken, pcm: np.ndarray) -> None:
        if not pcm.size:
            return
        if resp.first_ns is None:
            resp.first_ns = self.now()
            self.host.submit(("playback", PlaybackReport(resp.rid, "started", 0.0)))
        data = mulaw_encode(pcm)
        for i in range(0, len(data), _CHUNK):
            payload = base64.b64encode(data[i : i + _CHUNK]).decode("ascii")
            self.send({"event": "media", "media": {"payload": payload}})
        resp.sent += pcm.size

    def finish_response(self, rid: str) -> None:
        resp = self.spoken.get(rid)
        if resp is None or resp.done or resp.cut:
            return
        resp.done = True
        self.media(resp, resp.resampler.flush_pcm16())
        if resp.first_ns is not None:
            self.send({"event": "mark", "mark": {"name": rid}})

    def clear(self, rid: str | None) -> None:
        targets = [r for r in self.spoken.values() if not r.cut and (rid is None or r.rid == rid)]
        playing = [r for r in targets if r.first_ns is not None]
        if not targets:
            return
        for resp in targets:
            resp.cut = True
        if playing:
            self.send({"event": "clear"})
        for resp in playing:
            assert resp.first_ns is not None
            heard = min((self.now() - resp.first_ns) / 1e6, resp.sent * 1000 / PHONE_RATE)
            self.host.submit(("playback", PlaybackReport(resp.rid, "interrupted", heard)))

    # ------------------------------------------------------------------ receiving
    def receive(self, message: str | bytes) -> bool:
        """Handle one message; False ends the call."""
        if isinstance(message, bytes):
            return True
        try:
            msg = json.loads(message)
        except (json.JSONDecodeError, RecursionError):
            return True
        event = msg.get("event") if isinstance(msg, dict) else None
        if event == "media":
            self.on_media(msg.get("media") or {})
        elif event == "start":
            return self.on_start(msg)
        elif event == "mark":
            name = (msg.get("mark") or {}).get("name")
            resp = self.spoken.get(name) if isinstance(name, str) else None
            if resp is not None and not resp.cut:
                report = PlaybackReport(resp.rid, "completed", resp.sent * 1000 / PHONE_RATE)
                self.host.submit(("playback", report))
        elif event == "stop":
            return False
        return True

    def on_start(self, msg: dict[str, Any]) -> bool:
        given = msg.get("start")
        start: dict[str, Any] = given if isinstance(given, dict) else {}
        fmt = start.get("mediaFormat") or {}
        if (fmt.get("encoding"), fmt.get("sampleRate"), fmt.get("channels", 1)) != (
            "audio/x-mulaw",
            PHONE_RATE,
            1,
        ):
            self.loop.create_task(self.ws.close(1003, f"unsupported media format {fmt!r}"))
            return False
        sid = msg.get("streamSid") or start.get("streamSid")
        self.stream_sid = str(sid) if sid else f"MZ{uuid.uuid4().hex}"
        return True

    def on_media(self, media: dict[str, Any]) -> None:
        if media.get("track", "inbound") != "inbound":
            return
        try:
            raw = base64.b64decode(str(media.get("payload", "")), validate=True)
        except (binascii.Error, ValueError):
            return
        self.last_media_ns = self.now()
        x = self.up.process_pcm16(mulaw_decode(raw))
        self.inbuf = np.concatenate([self.inbuf, x]) if self.inbuf.size else x
        while self.inbuf.size >= self.frame:
            frame, self.inbuf = self.inbuf[: self.frame], self.inbuf[self.frame :]
            self.samples += self.frame
            if not self.host.submit(("frame", frame, self.samples), frame=True):
                break

    async def ticker(self) -> None:
        silent = np.zeros(self.frame, np.int16)
        while self.host.alive:
            await asyncio.sleep(self.srv.frame_ms / 1000)
            if self.now() - self.last_media_ns >= self.srv.idle_tick_ms * 1e6:
                self.host.submit(("frame", silent, self.samples), frame=True)

    async def run(self) -> None:
        self.host.start()
        tasks = [asyncio.create_task(self.sender()), asyncio.create_task(self.ticker())]
        try:
            async for message in self.ws:
                if not self.receive(message):
                    break
        except Exception:
            pass  # a dropped connection ends the call like a stop
        finally:
            self.host.stop()
            with contextlib.suppress(asyncio.QueueFull):
                self.out.put_nowait(None)
            await self.host.wait()
            for task in tasks:
                task.cancel()


class TwilioAgentServer(ServesInThread):
    """Media Streams WebSocket server around an agent factory (module docstring)."""

    _thread_name = "voxassay-twilio-server"

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        host: str = "127.0.0.1",
        port: int = 8766,
        path: str = "/media",
        token_env: str | None = None,
        sample_rate: int = 16_000,
        frame_ms: int = 20,
        max_connections: int = 16,
        max_message_bytes: int = 64 * 1024,
        max_queued_frames: int = 250,
        max_outgoing: int = 20_000,
        send_timeout_s: float = 5.0,
        idle_tick_ms: float = 200.0,
        on_end: Callable[[str, SessionEnd], None] | None = None,
    ) -> None:
        self.factory = factory
        self.host, self.port, self.path = host, port, path
        self.sample_rate, self.frame_ms = sample_rate, frame_ms
        self.max_connections = max_connections
        self.max_message_bytes = max_message_bytes
        self.max_queued_frames = max_queued_frames
        self.max_outgoing = max_outgoing
        self.send_timeout_s = send_timeout_s
        self.idle_tick_ms = idle_tick_ms
        self.on_end = on_end
        self.calls: set[_Call] = set()
        self._token: str | None = None
        if token_env:
            token = os.environ.get(token_env)
            if not token:
                raise ValueError(f"token_env={token_env}: that environment variable is not set")
            self._token = token
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}{self.path}"

    def _process_request(self, connection: Any, request: Any) -> Any:
        if request.path.split("?", 1)[0] != self.path:
            return connection.respond(HTTPStatus.NOT_FOUND, f"the stream is at {self.path}\n")
        if self._token is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode()):
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        if len(self.calls) >= self.max_connections:
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the server is at its limit of {self.max_connections} calls\n",
            )
        return None

    async def _handle(self, ws: Any) -> None:
        call = _Call(self, ws)
        self.calls.add(call)
        try:
            await call.run()
        finally:
            self.calls.discard(call)

    async def start(self) -> str:
        from websockets.asyncio.server import serve

        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._process_request,
            max_size=self.max_message_bytes,
            compression=None,
            close_timeout=2,
        )
        self.port = int(next(iter(self._server.sockets)).getsockname()[1])
        return self.url

    async def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        url = await self.start()
        if ready is not None:
            ready(url)
        assert self._stopped is not None
        await self._stopped.wait()
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5.0)
