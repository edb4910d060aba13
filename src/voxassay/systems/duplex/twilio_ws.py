"""A phone call's media stream: voxassay plays Twilio's side of Media Streams against an agent.

``twilio-ws:ws://HOST:PORT/PATH`` reaches an agent the way a phone number does when Twilio
forks the call to a WebSocket (``<Connect><Stream>``): the link connects, sends ``connected``
and ``start`` (a ``streamSid``, ``callSid``, ``accountSid``, ``tracks: ["inbound"]`` and the
media format: ``audio/x-mulaw`` at 8 kHz, mono), then the caller's audio as ``media`` events
of 20 ms (160 mu-law bytes, base64; ``chunk`` and ``timestamp`` in ms count from the start),
and ``stop`` at the end. Every message carries a ``sequenceNumber`` (a string, from 1).

From the agent: ``media`` (its speech: mu-law 8 kHz -> 16 kHz ``AudioOut``), ``mark`` (a
named point in its audio: Twilio echoes it back once the audio before it has played) and
``clear`` (drop the audio Twilio holds; the pending marks are echoed at once).

Responses. Media Streams has no responses; the link cuts the agent's audio into bursts: a
burst (``response.created``, id ``tw-N``) starts with the first ``media`` after silence and
ends (``response.done`` completed) when no ``media`` came for ``gap_ms``, or at a ``clear``
(``ClearAudio`` + ``response.done`` cancelled, reason ``clear``). The driver's player plays the
bursts; a mark is echoed when the player reports the audio before it played: at the burst's
``completed`` for a mark at its end, else at ``started + offset`` on the session clock, and at
once when the burst is cut (as Twilio does at ``clear``). Echoed marks are
``playback.progress`` events of producer ``transport`` (``data.mark``).

The caller's turns are the agent's to find (phone audio has no turn events); ``dtmf`` is never
sent. A lost connection is a ``session.error``; ``on_connection(True)`` opens a new stream
(a new ``streamSid``), as a call that is redialled.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
)
from voxassay.systems.duplex.g711 import mulaw_decode, mulaw_encode
from voxassay.systems.duplex.link_base import (
    LinkBase,
    LinkFactory,
    describe_error,
    open_websocket,
    redact_url,
)
from voxassay.systems.duplex.realtime_protocol import StreamResampler

__all__ = ["PHONE_RATE", "TwilioStreamLink", "build"]

PHONE_RATE = 8_000
CHUNK_MS = 20
_CHUNK = PHONE_RATE * CHUNK_MS // 1000  # 160 samples, one byte each


@dataclass
class _Burst:
    rid: str
    samples: int = 0  # agent audio received, at the session rate
    last_media_ns: int = 0
    started_ns: int | None = None  # the player began playing it (session clock)
    marks: deque[tuple[str, int]] = field(default_factory=deque)  # (name, sample offset)
    done: bool = False  # no more media will join it
    played_out: bool = False  # the player completed or cut it


class TwilioStreamLink(LinkBase):
    """Twilio's side of a Media Stream, as a ``DuplexAgent`` (module docstring)."""

    TRANSPORT = "twilio-ws"
    RAW_LOG_NAME = "media-stream.jsonl"

    def __init__(
        self,
        url: str,
        *,
        key_env: str | None = None,
        gap_ms: float = 400.0,
        connect_timeout_s: float = 5.0,
        send_timeout_s: float = 2.0,
        max_pending: int = 500,
        max_message_bytes: int = 1024 * 1024,
        parameters: dict[str, str] | None = None,
        observer: str | None = None,
    ) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"a Media Streams URL starts with ws:// or wss://, got {url!r}")
        super().__init__()
        self.url = url
        self.key_env = key_env
        self.gap_ms = gap_ms
        self.connect_timeout_s = connect_timeout_s
        self.send_timeout_s = send_timeout_s
        self.max_pending = max_pending
        self.max_message_bytes = max_message_bytes
        self.parameters = dict(parameters or {})
        self.observer = observer
        self._sids: list[str] = []
        self.info: dict[str, Any] = {
            "backend": "twilio-ws",
            "transport": self.TRANSPORT,
            "url": redact_url(url),
            "media_format": {"encoding": "audio/x-mulaw", "sampleRate": PHONE_RATE, "channels": 1},
            "framing": f"{CHUNK_MS} ms media messages ({_CHUNK} bytes)",
            "gap_ms": gap_ms,
        }
        self._reset()

    def _reset(self) -> None:
        self._out = []
        self._ws: Any = None
        self._queue: asyncio.Queue[str | None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._connected = False
        self._closing = False
        self._seq = 0
        self._chunk = 0
        self._sent_ms = 0
        self._stream_sid = ""
        self._call_sid = ""
        self._sr = 16_000
        self._up: StreamResampler | None = None  # caller audio: session rate -> 8 kHz
        self._down: StreamResampler | None = None  # agent audio: 8 kHz -> session rate
        self._pending = np.zeros(0, np.int16)
        self._bursts: dict[str, _Burst] = {}
        self._burst: _Burst | None = None  # the burst media is being added to
        self._last: _Burst | None = None  # the latest burst (it may still be playing)
        self._n_bursts = 0

    # ------------------------------------------------------------------ wire
    def _message(self, event: str, **body: Any) -> dict[str, Any]:
        self._seq += 1
        return {"event": event, "sequenceNumber": str(self._seq), **body}

    def _send(self, message: dict[str, Any]) -> None:
        """Queue one message for the socket (any thread; never waits)."""
        if not self._connected or self._loop is None or self._queue is None:
            self._count("send.dropped_disconnected")
            return
        if message["event"] != "media":
            self._log("client", message)
        self._count(f"sent.{message['event']}")
        text = json.dumps(message, separators=(",", ":"))
        queue = self._queue

        def put() -> None:
            try:
                queue.put_nowait(text)
            except asyncio.QueueFull:
                self._error("backpressure", f"send queue full ({self.max_pending}): dropped")

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(put)

    async def _connect(self) -> None:
        headers: list[tuple[str, str]] = []
        if self.key_env:
            import os

            token = os.environ.get(self.key_env)
            if not token:
                raise PermissionError(f"environment variable {self.key_env} is not set")
            headers.append(("Authorization", f"Bearer {token}"))
        ws = await open_websocket(
            self.url, headers, timeout_s=self.connect_timeout_s, max_bytes=self.max_message_bytes
        )
        self._ws = ws
        self._connected = True
        self._closing = False
        self._queue = asyncio.Queue(maxsize=self.max_pending)
        self._tasks = [
            asyncio.create_task(self._reader(ws)),
            asyncio.create_task(self._writer(ws, self._queue)),
        ]

    async def _writer(self, ws: Any, queue: asyncio.Queue[str | None]) -> None:
        while (text := await queue.get()) is not None:
            try:
                async with asyncio.timeout(self.send_timeout_s):
                    await ws.send(text)
            except Exception as exc:
                self._lost(describe_error(exc), ws)
                return

    async def _reader(self, ws: Any) -> None:
        try:
            async for message in ws:
                self._receive(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._lost(describe_error(exc), ws)
            return
        self._lost("closed by the agent", ws)

    def _lost(self, reason: str, ws: Any) -> None:
        if ws is not self._ws or self._closing or not self._connected:
            return
        self._connected = False
        self._count("connection.lost")
        self._error("connection", f"connection lost: {reason}")

    async def _disconnect(self) -> None:
        self._closing = True
        self._connected = False
        ws, self._ws = self._ws, None
        tasks, self._tasks = self._tasks, []
        if self._queue is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)
        if ws is not None:
            await asyncio.sleep(0.05)  # let the writer flush ``stop``
            try:
                await asyncio.wait_for(ws.close(), 1.5)
            except Exception:
                ws.transport.abort()
        for task in tasks:
            task.cancel()

    def _open_stream(self) -> None:
        try:
            self._run(self._connect(), self.connect_timeout_s + 1.0)
        except PermissionError as exc:
            self._error("config", str(exc))
            return
        except Exception as exc:
            self._error("connect", f"cannot connect to {self.info['url']}: {describe_error(exc)}")
            return
        self._count("connections")
        self._seq = 0  # each stream's messages count from 1 (a redial is a new stream)
        self._stream_sid = "MZ" + uuid.uuid4().hex
        self._sids.append(self._stream_sid)
        self._call_sid = self._call_sid or "CA" + uuid.uuid4().hex
        self._chunk = 0
        self._sent_ms = 0
        self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        start = {
            "accountSid": "AC" + "0" * 32,
            "streamSid": self._stream_sid,
            "callSid": self._call_sid,
            "tracks": ["inbound"],
            "customParameters": self.parameters,
            "mediaFormat": dict(self.info["media_format"]),
        }
        self._send(self._message("start", start=start, streamSid=self._stream_sid))

    # ------------------------------------------------------------------ receiving
    def _receive(self, message: str | bytes) -> None:
        self._count("received")
        if isinstance(message, bytes):
            self._error("protocol", "the agent sent a binary frame (Media Streams is JSON text)")
            return
        try:
            msg = json.loads(message)
        except (json.JSONDecodeError, RecursionError):
            self._log("server", None, malformed=message[:500], error="not JSON")
            self._error("protocol", "malformed JSON from the agent")
            return
        event = msg.get("event") if isinstance(msg, dict) else None
        if event == "media":
            self._on_media(msg)
            return
        self._log("server", msg if isinstance(msg, dict) else None)
        if event == "mark":
            name = (msg.get("mark") or {}).get("name")
            if not isinstance(name, str):
                self._error("protocol", "a mark without a string name")
                return
            self._on_mark(name)
        elif event == "clear":
            self._on_clear()
        else:
            self._error("protocol", f"unexpected message from the agent: {str(event)[:40]!r}")

    def _on_media(self, msg: dict[str, Any]) -> None:
        payload = (msg.get("media") or {}).get("payload")
        try:
            raw = base64.b64decode(str(payload), validate=True)
        except (binascii.Error, ValueError):
            self._error("protocol", "a media payload that is not base64")
            return
        assert self._down is not None
        pcm = self._down.process_pcm16(mulaw_decode(raw))
        self._count("audio.received_bytes", len(raw))
        now = self._now()
        with self._lock:
            burst = self._burst
            if burst is None or burst.done:
                self._n_bursts += 1
                burst = self._burst = self._last = _Burst(f"tw-{self._n_bursts}")
                self._bursts[burst.rid] = burst
                self._emit(AgentEvent("response.created", response_id=burst.rid))
            burst.samples += pcm.size
            burst.last_media_ns = now
        if pcm.size:
            self._emit(AudioOut(burst.rid, pcm))

    def _playing(self) -> _Burst | None:
        """The burst whose audio is still queued or playing (None: the line is quiet)."""
        burst = self._last
        return burst if burst is not None and not burst.played_out else None

    def _on_mark(self, name: str) -> None:
        with self._lock:
            burst = self._playing()
            if burst is None:  # nothing is queued before the mark: it has played
                self._echo_marks([name], None)
                return
            burst.marks.append((name, burst.samples))

    def _on_clear(self) -> None:
        with self._lock:
            burst = self._playing()
            self._burst = None
            # every queued burst before the playing one goes too; its marks are echoed
            # first, in the order their audio was queued
            earlier = [
                b for b in self._bursts.values() if b is not burst and not b.played_out and b.marks
            ]
            for b in earlier:
                b.played_out = True
                names = [n for n, _ in b.marks]
                b.marks.clear()
                self._echo_marks(names, b.rid)
        if burst is None:
            return
        burst.played_out = True
        was_done = burst.done
        self._end_burst(burst)
        self._emit(ClearAudio(burst.rid, "clear (Media Streams)"))
        if not was_done:  # media was still coming: the response ends here, cut
            self._emit(
                AgentEvent(
                    "response.done", {"status": "cancelled"}, response_id=burst.rid, reason="clear"
                )
            )
        self._echo_marks([n for n, _ in burst.marks], burst.rid)
        burst.marks.clear()

    def _end_burst(self, burst: _Burst) -> None:
        if burst.done:
            return
        burst.done = True
        if self._down is not None:  # the resampler's held-back tail belongs to this burst
            rest = self._down.flush_pcm16()
            if rest.size:
                burst.samples += rest.size
                self._emit(AudioOut(burst.rid, rest))

    def _echo_marks(self, names: list[str], rid: str | None) -> None:
        for name in names:
            self._send(self._message("mark", streamSid=self._stream_sid, mark={"name": name}))
            self._emit(
                AgentEvent(
                    "playback.progress",
                    {"mark": name, "source": "twilio mark echo"},
                    response_id=rid,
                    playback_id=rid,
                    producer="transport",
                )
            )

    def _tick(self) -> None:
        """Bursts that went quiet end; marks whose audio has played are echoed."""
        now = self._now()
        with self._lock:
            burst = self._burst
            quiet = burst is not None and now - burst.last_media_ns >= self.gap_ms * 1e6
            if burst is not None and not burst.done and quiet:
                self._end_burst(burst)
                self._burst = None
                self._emit(
                    AgentEvent("response.done", {"status": "completed"}, response_id=burst.rid)
                )
            for b in self._bursts.values():
                if b.started_ns is None or not b.marks:
                    continue
                due = []
                while b.marks and b.started_ns + b.marks[0][1] * 1e9 / self._sr <= now:
                    due.append(b.marks.popleft()[0])
                if due:
                    self._echo_marks(due, b.rid)

    # ------------------------------------------------------------------ DuplexAgent
    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        """Connect, send ``connected`` and ``start``; the session clock is ``now_ns``."""
        if self._loop is not None:
            self.close()
        self._reset()
        self._begin(now_ns)
        self._sr = session.sample_rate
        self._up = StreamResampler(self._sr, PHONE_RATE)
        self._down = StreamResampler(PHONE_RATE, self._sr)
        self._open_stream()
        return self._drain()

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        """Send the caller's frame as 20 ms media messages; return what arrived."""
        if self._connected and self._up is not None:
            wire = self._up.process_pcm16(np.asarray(pcm, dtype=np.int16).reshape(-1))
            self._pending = np.concatenate([self._pending, wire]) if self._pending.size else wire
            while self._pending.size >= _CHUNK:
                chunk, self._pending = self._pending[:_CHUNK], self._pending[_CHUNK:]
                self._chunk += 1
                media = {
                    "track": "inbound",
                    "chunk": str(self._chunk),
                    "timestamp": str(self._sent_ms),
                    "payload": base64.b64encode(mulaw_encode(chunk)).decode("ascii"),
                }
                self._sent_ms += CHUNK_MS
                self._send(self._message("media", media=media, streamSid=self._stream_sid))
        else:
            self._count("frames.dropped_disconnected")
        self._tick()
        return self._drain()

    def poll(self, now_ns: int) -> list[AgentOutput]:
        self._tick()
        return self._drain()

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        """The player's view drives the mark echoes (module docstring)."""
        with self._lock:
            burst = self._bursts.get(report.response_id)
            if burst is None:
                return self._drain()
            if report.status == "started":
                burst.started_ns = now_ns - round(report.played_ms * 1e6)
            elif report.status in ("completed", "interrupted"):
                burst.played_out = True
                names = [n for n, _ in burst.marks]
                burst.marks.clear()
                self._echo_marks(names, burst.rid)
        self._tick()
        return self._drain()

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        """A phone stream carries no tool calls."""
        return self._drain()

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        """False: the call's stream drops. True: a new stream (connected, start) is opened."""
        if connected and not self._connected:
            if self._up is not None:
                self._up.reset()
            self._pending = np.zeros(0, np.int16)
            loop = self._ensure_loop()

            async def redial() -> None:
                await asyncio.get_running_loop().run_in_executor(None, self._open_stream)

            asyncio.run_coroutine_threadsafe(redial(), loop)
        elif not connected and self._ws is not None:
            self._connected = False
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._disconnect(), self._loop)
        return self._drain()

    def finish(self, now_ns: int) -> SessionEnd:
        """Send ``stop`` and close; a phone agent's business truth comes from a state probe.
        With ``observer`` the framework's own events of each stream are read then."""
        self.close()
        events = self.read_observer(self._sids, self.key_env)
        return SessionEnd(
            events=events,
            info={
                **({"observer": self.observer_info} if self.observer else {}),
                "twilio": {
                    **self.info,
                    "stream_sid": self._stream_sid,
                    "bursts": self._n_bursts,
                    "stats": dict(sorted(self.stats.items())),
                    "raw_log_events": len(self.raw_log),
                },
            },
        )

    def close(self) -> None:
        """Send ``stop``, close the socket and stop the loop thread (idempotent, bounded)."""
        if self._connected:
            stop = {"accountSid": "AC" + "0" * 32, "callSid": self._call_sid}
            self._send(self._message("stop", stop=stop, streamSid=self._stream_sid))
        if self._loop is not None and self._ws is not None:
            with contextlib.suppress(Exception):
                self._run(self._disconnect(), 3.0)
        self._connected = False
        self._stop_loop()


# --------------------------------------------------------------------------- registry


def build(spec: Any, capability: str) -> LinkFactory:
    """Registry factory for ``twilio-ws:ws://HOST:PORT/PATH[?gap_ms=400&key_env=VAR]``."""
    from voxassay.core.errors import SpecError
    from voxassay.core.registry import options_of

    if capability != "duplex":
        raise SpecError(f"twilio-ws provides duplex, not {capability!r}")
    url = str(spec.target or "")
    if not url.startswith(("ws://", "wss://")):
        raise SpecError(f"twilio-ws needs a ws:// or wss:// URL, got {spec.raw!r}")
    spec.check_options(frozenset(o.name for o in options_of("twilio-ws", "duplex")), "twilio-ws")
    options: dict[str, Any] = {}
    if "gap_ms" in spec.options:
        options["gap_ms"] = spec.float_option("gap_ms", 400.0, lo=20.0)
    if "connect_timeout_s" in spec.options:
        options["connect_timeout_s"] = spec.float_option("connect_timeout_s", 5.0, lo=0.1)
    if "key_env" in spec.options:
        options["key_env"] = spec.options["key_env"]
    if "observer" in spec.options:
        options["observer"] = spec.options["observer"]
    try:
        return LinkFactory(TwilioStreamLink, url, options)
    except ValueError as exc:
        raise SpecError(f"{redact_url(spec.raw)}: {exc}") from None
