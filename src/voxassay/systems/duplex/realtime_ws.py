"""A ``DuplexAgent`` that is really a socket: the OpenAI Realtime protocol over WebSocket.

``RealtimeAgentLink`` lets the driver (``run_session(..., SessionConfig(clock="real"))``) run a
scenario against any server that speaks the Realtime protocol, GA or beta event names
(``realtime_protocol``): OpenAI's own endpoint, or ``voxassay reference serve``. What the
protocol means (server events -> agent outputs, truncation, tool results, turn modes,
barge-in) is ``realtime_client.RealtimeClient``'s; this module moves it over one WebSocket.

The socket lives in a background thread with its own asyncio loop. ``start`` connects (at
most ``connect_timeout_s``) and sends ``session.update``; ``push_audio`` resamples the frame
to 24 kHz and queues an ``input_audio_buffer.append`` (it never waits for the network: the
driver's pacing is not at the socket's mercy). A send that takes longer than
``send_timeout_s``, or a queue of ``max_pending`` unsent events, is a ``session.error``.

Barge-in: the protocol default is ``client`` (OpenAI's WebSocket guide: the server sends audio
faster than real time and cannot clear what the client holds, so the client stops playback at
``input_audio_buffer.speech_started`` and truncates to what was heard).

Connection faults: ``on_connection(False)`` closes the socket; ``(True)`` reconnects and
re-sends ``session.update`` (a new server session: the Realtime protocol has no resumption).
Both run on the link's thread: the driver's clock never waits for a close or a handshake;
what the driver sends while the reconnection is under way is held and goes out, in order,
after ``session.update`` (dropped and counted if the connection fails).

Hop trace (``hop_trace=True``, the self-check's probe and ``bench_harness_latency.py``)
======================================================================================
Each append carries ``event_id = HOP_PREFIX + n`` and the link stamps the frame
(``time.monotonic_ns``, shared by the processes of one machine): ``deadline`` (the frame's
session time), ``hand`` (``push_audio`` called), ``queued`` (encoded, handed to the loop
thread), ``written`` (the send call returned: may be after the server received it). A server
that knows the trace (``RealtimeServer``) returns its own stamps in the first audio delta made
from that frame (field ``HOP_FIELD``: ``recv``, ``agent_start``, ``agent_end``, ``apply``,
``emit``, ``send``); the link adds ``recv`` (message received) and ``stamped`` (the receipt
stamp given to the driver) and keeps the record in ``hops``. Off (the default), appends carry
no event id and nothing is stamped.

Raw log
=======
``raw_log`` holds every client and server event as ``{"t_ns", "side", "direction", "event"}``
(``t_ns`` on the session clock; ``side`` and ``direction`` are ``client`` | ``server``) with
base64 audio replaced by ``AUDIO_OMITTED``; a message that is not JSON is logged as
``{"t_ns", "side", "direction", "malformed", "error"}``. ``write_raw_log(path)`` writes it as
JSONL that ``realtime_import.import_realtime_log`` reads. The API key is read from the
environment variable ``key_env`` names and is never logged or stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from voxassay.contracts.duplex.agent_api import AgentOutput, Stamped
from voxassay.core.registry import options_of
from voxassay.core.specs import is_harness_option
from voxassay.systems.duplex.link_base import (
    LinkFactory,
    describe_error,
    open_websocket,
    redact_url,
)
from voxassay.systems.duplex.realtime_client import BargeIn, RealtimeClient
from voxassay.systems.duplex.realtime_protocol import BETA_HEADER, Dialect, pcm16_to_b64

__all__ = [
    "HOP_FIELD",
    "HOP_PREFIX",
    "LINK_OPTIONS",
    "RealtimeAgentLink",
    "build",
]

LINK_OPTIONS = frozenset(o.name for o in options_of("realtime", "duplex"))
"""Spec options the link reads from a ``ws://`` URL's query (the rest stay in the URL)."""

HOP_PREFIX = "voxassay-hop-"
"""Hop trace: the event id of a traced append (the server stamps what it makes of it)."""
HOP_FIELD = "voxassay_hops"
"""Hop trace: the server event field with the server's stamps of a traced frame."""


class RealtimeAgentLink(RealtimeClient):
    """A Realtime-protocol server over WebSocket seen as a ``DuplexAgent``."""

    TRANSPORT: ClassVar[str] = "realtime-ws"
    PROTOCOL_BARGE_IN: ClassVar[Literal["server", "client"]] = "client"

    def __init__(
        self,
        url: str,
        *,
        protocol: Dialect = "ga",
        key_env: str | None = None,
        turn: Literal["server_vad", "manual"] = "server_vad",
        barge_in: BargeIn = "protocol",
        voice: str | None = None,
        instructions: str | None = None,
        transcribe: str | None = None,
        session_model: str | None = None,
        vad: dict[str, Any] | None = None,
        connect_timeout_s: float = 5.0,
        send_timeout_s: float = 2.0,
        max_pending: int = 500,
        endpoint_ms: float = 500.0,
        threshold_dbfs: float = -40.0,
        min_speech_ms: float = 60.0,
        max_message_bytes: int = 16 * 1024 * 1024,
        raw_log_limit: int = 500_000,
        hop_trace: bool = False,
    ) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"a Realtime URL starts with ws:// or wss://, got {url!r}")
        _import_websockets()  # here, so that start() does not pay for the import
        self.send_timeout_s = send_timeout_s
        self.max_pending = max_pending
        self.max_message_bytes = max_message_bytes
        self.hop_trace = hop_trace
        self.hops: list[dict[str, Any]] = []
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
            vad=vad,
            connect_timeout_s=connect_timeout_s,
            endpoint_ms=endpoint_ms,
            threshold_dbfs=threshold_dbfs,
            min_speech_ms=min_speech_ms,
            raw_log_limit=raw_log_limit,
        )

    def _reset_session_state(self) -> None:
        super()._reset_session_state()
        self._ws: Any = None
        self._send_q: asyncio.Queue[str | None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._held: list[str] = []  # client events queued while a reconnection is under way
        self._generation = 0  # bumped by every disconnect: a late handshake is abandoned
        self._hop_of: dict[str, dict[str, Any]] = {}
        self.hops = []

    def _is_open(self) -> bool:
        return self._ws is not None or self._loop is not None

    # ------------------------------------------------------------------ connection
    def _headers(self) -> list[tuple[str, str]] | None:
        headers: list[tuple[str, str]] = []
        if self.key_env:
            key = os.environ.get(self.key_env)
            if not key:
                raise PermissionError(f"environment variable {self.key_env} is not set")
            headers.append(("Authorization", f"Bearer {key}"))
        if self.protocol == "beta":
            headers.append(BETA_HEADER)
        return headers

    async def _connect(self) -> None:
        headers = self._headers()
        ws = await open_websocket(
            self.url, headers, timeout_s=self.connect_timeout_s, max_bytes=self.max_message_bytes
        )
        self._ws = ws
        self._connected = True
        self._closing = False
        self._send_q = asyncio.Queue(maxsize=self.max_pending)
        self._tasks = [
            asyncio.create_task(self._reader(ws)),
            asyncio.create_task(self._sender(ws, self._send_q)),
        ]

    async def _disconnect(self) -> None:
        self._closing = True
        self._connected = False
        ws, self._ws = self._ws, None
        tasks, self._tasks = self._tasks, []  # this socket's, not a later reconnection's
        if self._send_q is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self._send_q.put_nowait(None)
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(), 1.5)
            except Exception:
                ws.transport.abort()
        for task in tasks:
            task.cancel()

    def _lost(self, reason: str, ws: Any = None) -> None:
        """The connection broke (not by us)."""
        if ws is not None and ws is not self._ws:
            return  # an old socket closing after a reconnection
        if self._closing or not self._connected:
            return
        self._connected = False
        self._count("connection.lost", 1)
        self._error("connection", f"connection lost: {reason}")
        if self._ws is not None:
            self._ws.transport.abort()

    async def _sender(self, ws: Any, queue: asyncio.Queue[str | None]) -> None:
        while True:
            text = await queue.get()
            if text is None:
                return
            try:
                # a timeout scope, not ``wait_for``: no task per message (a loop turn each);
                # ``send`` writes to the socket at once unless the transport pushes back
                async with asyncio.timeout(self.send_timeout_s):
                    await ws.send(text)
                if self.hop_trace:
                    self._hop_stamp(text, "written")
            except TimeoutError:
                self._lost(f"a send took longer than {self.send_timeout_s} s", ws)
                return
            except Exception as exc:
                self._lost(_describe_close(exc), ws)
                return

    async def _reader(self, ws: Any) -> None:
        try:
            async for message in ws:
                self._receive(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._lost(_describe_close(exc), ws)
            return
        self._lost(_describe_close(None, ws), ws)

    def _send(self, event: dict[str, Any]) -> None:
        """Queue a client event (any thread); logged with the time it is queued. While a
        reconnection is under way the event is held and goes out once it is connected."""
        with self._lock:
            held = self._connecting
            if not held and (not self._connected or self._loop is None):
                self._count("send.dropped_disconnected", 1)
                return
            self._log("client", event)
            self._count(f"sent.{event['type']}", 1)
            text = json.dumps(event, separators=(",", ":"))
            if self.hop_trace:
                text = self._hop_queued(event, text)
            if held:
                if len(self._held) >= self.max_pending:
                    self._count("send.dropped_reconnecting", 1)
                else:
                    self._held.append(text)
                return
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._enqueue, text)

    def _enqueue(self, text: str) -> None:
        q = self._send_q
        if q is None or not self._connected:
            self._count("send.dropped_disconnected", 1)
            return
        try:
            q.put_nowait(text)
        except asyncio.QueueFull:
            self._error(
                "backpressure",
                f"send queue full ({self.max_pending} events): the server is not reading; "
                "event dropped",
            )

    def _open_session(self) -> None:
        """Connect (bounded) and send session.update; failures become session.error."""
        try:
            self._run(self._connect(), self.connect_timeout_s + 1.0)
        except PermissionError as exc:
            self._error("config", str(exc))
            return
        except Exception as exc:
            self._error("connect", f"cannot connect to {self.info['url']}: {describe_error(exc)}")
            return
        self._count("connections", 1)
        self._send({"type": "session.update", "session": self._session_doc})

    def _reconnect(self) -> None:
        """Connect again in the background: the driver's clock never waits for a handshake.
        Events sent meanwhile are held; ``session.update`` then they go out once connected
        (none when the connection fails: they are counted as dropped)."""
        with self._lock:
            self._connecting = True
            self._held = []
            generation = self._generation
        update = json.dumps(
            {"type": "session.update", "session": self._session_doc}, separators=(",", ":")
        )

        async def go() -> None:
            try:
                await asyncio.wait_for(self._connect(), self.connect_timeout_s + 1.0)
            except Exception as exc:
                with self._lock:
                    self._connecting = False
                    self._count("send.dropped_disconnected", len(self._held))
                    self._held = []
                if isinstance(exc, PermissionError):
                    self._error("config", str(exc))
                else:
                    self._error(
                        "connect", f"cannot connect to {self.info['url']}: {describe_error(exc)}"
                    )
                return
            if generation != self._generation:  # dropped again while connecting
                await self._disconnect()
                return
            self._count("connections", 1)
            self._log("client", json.loads(update))
            self._count("sent.session.update", 1)
            with self._lock:  # in order: session.update, what was held, what comes next
                self._connecting = False
                held, self._held = self._held, []
                for text in [update, *held]:
                    self._enqueue(text)

        asyncio.run_coroutine_threadsafe(go(), self._ensure_loop())

    # ------------------------------------------------------------------ hop trace
    def _hop_start(self, samples: int, t_hand: int) -> str:
        """Hop trace: a frame handed over by the driver; the append's event id."""
        hid = f"{HOP_PREFIX}{len(self._hop_of)}"
        deadline = self._t0 + self._frames_sent * 1_000_000_000 // self._sr
        self._hop_of[hid] = {"id": hid, "samples": samples, "deadline": deadline, "hand": t_hand}
        return hid

    def _hop_queued(self, event: dict[str, Any], text: str) -> str:
        hop = self._hop_of.get(str(event.get("event_id", "")))
        if hop is None:
            return text
        hop["queued"] = time.monotonic_ns()
        traced = _TracedText(text)
        traced.hop = hop
        return traced

    def _hop_stamp(self, text: str, key: str) -> None:
        hop = getattr(text, "hop", None)
        if hop is not None:
            hop[key] = time.monotonic_ns()

    def _hop_received(self, message: str | bytes, t_recv: int) -> None:
        """Hop trace: a server event carrying the stamps of the frame it echoes."""
        if not isinstance(message, str) or HOP_FIELD not in message:
            return
        try:
            stamps = json.loads(message).get(HOP_FIELD)
            hop = self._hop_of[str(stamps["id"])]
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        if "recv" in hop:
            return  # the first audio made from the frame
        with self._lock:
            last = self._out[-1] if self._out else None
        stamp = last.ns + self._t0 if isinstance(last, Stamped) else time.monotonic_ns()
        server = {f"server_{k}": v for k, v in stamps.items() if k != "id"}
        hop.update(server, recv=t_recv, stamped=stamp, first=self._first_audio)
        self.hops.append(hop)

    # ------------------------------------------------------------------ receiving
    def _receive(self, message: str | bytes) -> None:
        if self.hop_trace:
            t_recv = time.monotonic_ns()
            self._receive_event(message)
            self._hop_received(message, t_recv)
            return
        self._receive_event(message)

    def _send_audio(self, pcm: np.ndarray) -> None:
        """``input_audio_buffer.append`` of the frame resampled to 24 kHz."""
        assert self._in_rs is not None
        t_hand = time.monotonic_ns() if self.hop_trace else 0
        wire = self._in_rs.process_pcm16(pcm)
        event: dict[str, Any] = {"type": "input_audio_buffer.append"}
        if self.hop_trace:
            event["event_id"] = self._hop_start(pcm.size, t_hand)
        event["audio"] = pcm16_to_b64(wire)
        if wire.size:
            self._send(event)

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        """False: close the socket. True: reconnect and re-send ``session.update``. Neither
        waits for the network (the close and the handshake run on the link's thread)."""
        if connected:
            if not self._connected and not self._connecting:
                if self._in_rs is not None:
                    self._in_rs.reset()
                with self._lock:
                    self._open.clear()
                self._reconnect()
        elif self._ws is not None or self._connecting:
            with self._lock:
                self._connected = False  # from now on nothing is sent
                self._connecting = False
                self._held = []
                self._generation += 1
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._disconnect(), self._loop)
        return self._drain()

    def _shutdown_socket(self) -> None:
        if self._loop is None:
            return
        try:
            self._run(self._disconnect(), 3.0)
        except Exception as exc:  # bounded: a close that hangs is abandoned
            self._count("close.failed", 1)
            self._count(f"close.{type(exc).__name__}", 1)

    def close(self) -> None:
        """Close the socket and stop the loop thread (idempotent, bounded)."""
        with self._lock:
            self._connecting = False
            self._generation += 1
        if self._ws is not None:
            self._shutdown_socket()
        self._connected = False
        self._stop_loop()


# --------------------------------------------------------------------------- helpers


class _TracedText(str):
    """A queued client event with its hop-trace record (``hop_trace`` only)."""

    hop: dict[str, Any]


def _describe_close(exc: BaseException | None, ws: Any = None) -> str:
    rcvd = getattr(exc, "rcvd", None) if exc is not None else None
    if rcvd is None and ws is not None:
        code, reason = getattr(ws, "close_code", None), getattr(ws, "close_reason", "")
    elif rcvd is not None:
        code, reason = rcvd.code, rcvd.reason
    else:
        return describe_error(exc) if exc is not None else "closed"
    if code is None:
        return "closed without a close frame"
    return f"closed by the server (code {code}{': ' + reason if reason else ''})"


def _import_websockets() -> None:
    try:
        import websockets.asyncio.client  # noqa: F401
    except ImportError as exc:
        from voxassay.core.errors import BackendUnavailable

        raise BackendUnavailable(
            "the Realtime WebSocket link needs the websockets package: "
            "pip install 'voxassay[live]' (or pip install websockets)"
        ) from exc


# --------------------------------------------------------------------------- registry


def build(spec: Any, capability: str) -> LinkFactory:
    """Registry factory for ``ws://...`` / ``wss://...`` (backend ``realtime``).

    Link options (``LINK_OPTIONS``) may be given in the URL's query or as spec options; they
    are taken out of the URL, everything else in the query (``model=...``) stays in it.
    """
    from voxassay.core.errors import SpecError

    if capability == "converse":
        from voxassay.systems.realtime_converse import build_realtime_converse

        return build_realtime_converse(spec)  # type: ignore[return-value]
    if capability != "duplex":
        raise SpecError(f"the realtime backend provides duplex and converse, not {capability!r}")
    url = str(spec.target or "")
    if not url.startswith(("ws://", "wss://")):
        raise SpecError(f"realtime needs a ws:// or wss:// URL, got {spec.raw!r}")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    raw = {k: v for k, v in query if k in LINK_OPTIONS}
    spec.check_options(LINK_OPTIONS, "realtime")
    raw.update({k: v for k, v in spec.options.items() if k in LINK_OPTIONS})
    # the harness's keys (name, num_cpus, route, ...) are never sent to the server
    kept = [(k, v) for k, v in query if k not in LINK_OPTIONS and not is_harness_option(k)]
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    options: dict[str, Any] = {}
    try:
        for key, value in raw.items():
            if key in ("connect_timeout_s", "send_timeout_s", "endpoint_ms", "threshold_dbfs"):
                options[key] = float(value)
            elif key == "turn_detection":  # ``turn`` is the harness's (a TURN server)
                options["turn"] = value
            else:
                options[key] = value
        return LinkFactory(RealtimeAgentLink, url, options)
    except ValueError as exc:
        raise SpecError(f"{redact_url(spec.raw)}: {exc}") from None
