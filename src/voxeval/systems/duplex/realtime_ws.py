"""A ``DuplexAgent`` that is really a socket: the OpenAI Realtime protocol over WebSocket.

``RealtimeAgentLink`` lets the driver (``run_session(..., SessionConfig(clock="real"))``) run a
scenario against any server that speaks the Realtime protocol, GA or beta event names
(``realtime_protocol``): OpenAI's own endpoint, or ``voxeval reference serve``.

Threads and time
================
The socket lives in a background thread with its own asyncio loop. ``start`` connects (at
most ``connect_timeout_s``) and sends ``session.update``; ``push_audio`` resamples the frame
to 24 kHz, queues an ``input_audio_buffer.append`` (it never waits for the network: the
driver's pacing is not at the socket's mercy) and returns every server event received since
the previous call, translated and wrapped in ``Stamped(receipt_ns, ...)``. The session clock
is the driver's: ``start`` is called at ``now_ns`` = its session time, so
``receipt_ns = time.monotonic_ns() - (t_start_call - now_ns)`` (microseconds of error).

Server event -> agent output
============================
========================================================  =====================================
``input_audio_buffer.speech_started`` / ``_stopped``      ``AgentEvent vad.speech_started`` /
                                                          ``vad.speech_stopped`` (utterance_id
                                                          = item id, data.audio_start_ms / end)
``conversation.item.input_audio_transcription.completed`` ``asr.final`` (data.text)
``...transcription.delta`` / ``.failed``                  ``asr.partial`` (data.delta) /
                                                          ``session.error``
``response.created``                                      ``response.created``
``response.output_audio.delta`` (beta ``audio.delta``)    ``AudioOut`` (24 -> 16 kHz; each
                                                          audio item has its own resampler,
                                                          flushed at its ``.done``)
``response.done``                                         ``response.done`` (data.status:
                                                          completed, cancelled, failed,
                                                          incomplete; data.reason); a
                                                          cancelled one is preceded by
                                                          ``ClearAudio``
``response.function_call_arguments.done``                 ``ToolCall`` (call_id, name, parsed
                                                          arguments; ``idempotency_key`` when
                                                          the arguments carry one)
``output_audio_buffer.cleared``                           ``ClearAudio``
``error``                                                 ``session.error`` (reason = message)
========================================================  =====================================

Other known events (``session.*``, item and content-part bookkeeping, transcripts, rate
limits) are only logged. An unknown event type (once per type), a malformed or binary
message, a lost connection, a send that times out or a full send queue becomes
``AgentEvent("session.error", reason=...)``: never an exception that ends the run.

Client actions
==============
- ``on_playback(interrupted)``: ``conversation.item.truncate`` of the response's audio item
  with ``audio_end_ms`` = the played milliseconds (how the server learns what was heard; a
  response with several audio items truncates the one the cut fell in).
- ``on_tool_result``: ``conversation.item.create`` (``function_call_output``; the output is
  the JSON result, or ``{"error": ...}``) then ``response.create``.
- ``on_connection(False)`` closes the socket; ``(True)`` reconnects and re-sends
  ``session.update`` (a new server session: the Realtime protocol has no resumption). Both
  run on the link's thread: the driver's clock never waits for a close or a handshake;
  what the driver sends while the reconnection is under way is held and goes out, in order,
  after ``session.update`` (dropped and counted if the connection fails).

Turn modes (``turn``)
=====================
- ``server_vad`` (default): the server detects turns (``create_response`` and
  ``interrupt_response`` on).
- ``manual``: ``turn_detection: null``; the link endpoints the input it sends with a frame
  energy detector (speech: RMS >= ``threshold_dbfs`` for ``min_speech_ms``; end: quieter for
  ``endpoint_ms``) and then sends ``input_audio_buffer.commit`` + ``response.create``; speech
  that starts while a response is in progress sends ``response.cancel``. It sees only the
  audio, never the scenario's truth. Its decisions are logged as ``vad.*`` with
  ``data.source = "client_endpointer"``.

Barge-in (``barge_in``): ``server`` (default) stops playback only when the server says so
(``output_audio_buffer.cleared``, a cancelled response), so the agent's own decisions are
measured; ``client`` also stops it at every ``speech_started``, as OpenAI's WebSocket sample
clients do (the WebSocket API sends no ``output_audio_buffer.cleared``).

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
import copy
import functools
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from voxeval.contracts.duplex.agent_api import (
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
from voxeval.core.registry import options_of
from voxeval.core.specs import is_harness_option
from voxeval.systems.duplex.realtime_protocol import (
    BETA_HEADER,
    CLIENT_EVENT_TYPES,
    PROTOCOL_RATE,
    SERVER_EVENT_TYPES,
    Dialect,
    StreamResampler,
    b64_to_pcm16,
    canonical_name,
    client_session,
    elide_audio,
    function_tools,
    pcm16_to_b64,
)

__all__ = ["LINK_OPTIONS", "RealtimeAgentLink", "RealtimeLinkFactory", "build"]

LINK_OPTIONS = frozenset(o.name for o in options_of("realtime", "duplex"))
"""Spec options the link reads from a ``ws://`` URL's query (the rest stay in the URL)."""

_ERROR_CAP = 20
"""session.error events per kind before further ones are only counted."""
_SECRETISH = ("key", "token", "secret", "password", "auth")


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    query = [
        (k, "<redacted>" if any(s in k.lower() for s in _SECRETISH) else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    netloc = parts.netloc.rsplit("@", 1)[-1]  # never keep user:password@
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


class _ItemAudio:
    """Audio received for one (item, content part) of a response."""

    def __init__(self, item_id: str, content_index: int) -> None:
        self.item_id = item_id
        self.content_index = content_index
        self.samples = 0  # at the protocol rate
        self.resampler: StreamResampler | None = None

    @property
    def ms(self) -> float:
        return self.samples * 1000 / PROTOCOL_RATE


class RealtimeAgentLink:
    """A Realtime-protocol server seen as a ``DuplexAgent`` (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        protocol: Dialect = "ga",
        key_env: str | None = None,
        turn: Literal["server_vad", "manual"] = "server_vad",
        barge_in: Literal["server", "client"] = "server",
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
        if protocol not in ("ga", "beta"):
            raise ValueError(f"protocol must be ga or beta, not {protocol!r}")
        if turn not in ("server_vad", "manual"):
            raise ValueError(f"turn must be server_vad or manual, not {turn!r}")
        if barge_in not in ("server", "client"):
            raise ValueError(f"barge_in must be server or client, not {barge_in!r}")
        self.url = url
        self.protocol: Dialect = protocol
        self.key_env = key_env
        self.turn = turn
        self.barge_in = barge_in
        self.voice = voice
        self.instructions = instructions
        self.transcribe = transcribe
        self.session_model = session_model
        self.vad = vad
        self.connect_timeout_s = connect_timeout_s
        self.send_timeout_s = send_timeout_s
        self.max_pending = max_pending
        self.endpoint_ms = endpoint_ms
        self.threshold = 10 ** (threshold_dbfs / 20) * 32768
        self.min_speech_ms = min_speech_ms
        self.max_message_bytes = max_message_bytes
        self.raw_log_limit = raw_log_limit
        self.hop_trace = hop_trace
        self.hops: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {
            "backend": "realtime",
            "url": _redact_url(url),
            "protocol": protocol,
            "turn": turn,
            "barge_in": barge_in,
        }
        self.raw_log: list[dict[str, Any]] = []
        self.stats: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session_doc: dict[str, Any] = {}
        self._reset_session_state()

    # ------------------------------------------------------------------ state
    def _reset_session_state(self) -> None:
        self._t0 = time.monotonic_ns()
        self._out: list[AgentOutput] = []
        self._ws: Any = None
        self._send_q: asyncio.Queue[str | None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._connected = False
        self._closing = False
        self._connecting = False  # a reconnection is under way (``on_connection(True)``)
        self._held: list[str] = []  # client events queued while it is under way
        self._generation = 0  # bumped by every disconnect: a late handshake is abandoned
        self._errors: Counter[str] = Counter()
        self._unknown: set[str] = set()
        self._items: dict[str, list[_ItemAudio]] = {}  # response id -> audio items
        self._item_of: dict[str, _ItemAudio] = {}  # "item_id:content_index"
        self._open: set[str] = set()  # responses created and not done
        self._calls: set[str] = set()
        self._call_names: dict[str, str] = {}  # call_id -> function name (output items)
        self._in_rs: StreamResampler | None = None
        self._ep_in_speech = False
        self._ep_speech_ms = 0.0
        self._ep_silence_ms = 0.0
        self._sr = 16_000
        self._hop_of: dict[str, dict[str, Any]] = {}
        self._frames_sent = 0
        self._first_audio = False  # the last audio delta began an item (hop trace)

    def _now(self) -> int:
        return time.monotonic_ns() - self._t0

    def _emit(self, output: AgentEvent | AudioOut | ClearAudio | ToolCall) -> None:
        with self._lock:
            self._out.append(Stamped(self._now(), output))

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def poll(self, now_ns: int) -> list[AgentOutput]:
        """What arrived since the last call, without sending anything (the driver polls
        between frames so events keep their receipt times)."""
        return self._drain()

    def _drain(self) -> list[AgentOutput]:
        with self._lock:
            out, self._out = self._out, []
        return out

    def _error(self, kind: str, reason: str, **data: Any) -> None:
        """A ``session.error`` (at most ``_ERROR_CAP`` per kind; the rest are counted)."""
        with self._lock:
            self._count(f"error.{kind}", 1)
            self._errors[kind] += 1
            n = self._errors[kind]
        if n > _ERROR_CAP:
            return
        if n == _ERROR_CAP:
            reason += f" (further {kind} errors are only counted in the stats)"
        self._emit(AgentEvent("session.error", {"kind": kind, **data}, reason=reason))

    def _log(self, side: str, event: dict[str, Any] | None, **extra: Any) -> None:
        if len(self.raw_log) >= self.raw_log_limit:
            self._count("raw_log.dropped", 1)
            return
        line: dict[str, Any] = {"t_ns": self._now(), "side": side, "direction": side}
        if event is not None:
            line["event"] = elide_audio(event)
        line.update(extra)
        self.raw_log.append(line)

    # ------------------------------------------------------------------ loop thread
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            return self._loop
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name="voxeval-realtime-link", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        return loop

    def _run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coro`` on the link's loop and wait at most ``timeout`` seconds."""
        loop = self._ensure_loop()
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2.0)
        if not loop.is_running():
            loop.close()

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
        from websockets.asyncio.client import connect

        headers = self._headers()
        host = urlsplit(self.url).hostname or ""
        loopback = host in ("localhost", "::1") or host.startswith("127.")
        ws = await asyncio.wait_for(
            connect(
                self.url,
                additional_headers=headers,
                open_timeout=self.connect_timeout_s,
                close_timeout=1.0,
                max_size=self.max_message_bytes,
                compression=None,
                proxy=None if loopback else True,
            ),
            self.connect_timeout_s,
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
            self._error("connect", f"cannot connect to {self.info['url']}: {_describe(exc)}")
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
                        "connect", f"cannot connect to {self.info['url']}: {_describe(exc)}"
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

    def _receive_event(self, message: str | bytes) -> None:
        self._count("received", 1)
        if isinstance(message, bytes):
            self._log("server", None, malformed=f"<{len(message)} binary bytes>", error="binary")
            self._error("protocol", "the server sent a binary frame (Realtime is JSON text)")
            return
        try:
            event = json.loads(message)
        except json.JSONDecodeError as exc:
            self._log("server", None, malformed=message[:500], error=str(exc))
            self._error("protocol", f"malformed JSON from the server: {exc.msg}")
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self._log("server", None, malformed=message[:500], error="no type")
            self._error("protocol", "a server message without a string 'type'")
            return
        self._log("server", event)
        etype = event["type"]
        name = canonical_name(etype)
        self._count(f"recv.{etype}", 1)
        handler = self._HANDLERS.get(name)
        if handler is not None:
            try:
                handler(self, event)
            except (KeyError, TypeError, ValueError) as exc:
                self._error("protocol", f"{etype}: malformed event ({_describe(exc)})")
        elif name not in SERVER_EVENT_TYPES:
            if etype in CLIENT_EVENT_TYPES:
                self._error("protocol", f"the server sent a client event type {etype!r}")
            elif etype not in self._unknown:
                self._unknown.add(etype)
                self._error("protocol", f"unknown server event type {etype!r}", event_type=etype)

    def _on_speech_started(self, ev: dict[str, Any]) -> None:
        iid = _opt_str(ev.get("item_id"))
        data = {"audio_start_ms": ev.get("audio_start_ms"), "item_id": iid}
        self._emit(AgentEvent("vad.speech_started", _clean(data), utterance_id=iid))
        if self.barge_in == "client":
            self._emit(ClearAudio(None, "speech_started (client barge-in)"))

    def _on_speech_stopped(self, ev: dict[str, Any]) -> None:
        iid = _opt_str(ev.get("item_id"))
        data = {"audio_end_ms": ev.get("audio_end_ms"), "item_id": iid}
        self._emit(AgentEvent("vad.speech_stopped", _clean(data), utterance_id=iid))

    def _on_transcript(self, ev: dict[str, Any]) -> None:
        iid = _opt_str(ev.get("item_id"))
        text = ev.get("transcript")
        if not isinstance(text, str):
            raise ValueError("transcript is not a string")
        self._emit(AgentEvent("asr.final", {"text": text, "item_id": iid}, utterance_id=iid))

    def _on_transcript_delta(self, ev: dict[str, Any]) -> None:
        iid = _opt_str(ev.get("item_id"))
        delta = ev.get("delta")
        if isinstance(delta, str) and delta:
            self._emit(
                AgentEvent("asr.partial", {"delta": delta, "item_id": iid}, utterance_id=iid)
            )

    def _on_transcript_failed(self, ev: dict[str, Any]) -> None:
        err = _obj(ev.get("error"))
        iid = _opt_str(ev.get("item_id"))
        msg = str(err.get("message") or "input transcription failed")
        self._emit(
            AgentEvent(
                "session.error",
                {"kind": "transcription", "item_id": iid},
                utterance_id=iid,
                reason=msg,
            )
        )

    def _on_response_created(self, ev: dict[str, Any]) -> None:
        rid = _response_id(ev)
        with self._lock:
            self._open.add(rid)
            self._items.setdefault(rid, [])
        self._emit(AgentEvent("response.created", response_id=rid))

    def _on_audio_delta(self, ev: dict[str, Any]) -> None:
        rid = str(ev["response_id"])
        iid = str(ev["item_id"])
        ci = int(ev.get("content_index", 0))
        pcm = b64_to_pcm16(str(ev["delta"]))
        key = f"{iid}:{ci}"
        with self._lock:
            item = self._item_of.get(key)
            self._first_audio = item is None
            if item is None:
                item = self._item_of[key] = _ItemAudio(iid, ci)
                self._items.setdefault(rid, []).append(item)
            item.samples += pcm.size
        if item.resampler is None:
            item.resampler = _fresh_resampler(PROTOCOL_RATE, self._sr)
        out = item.resampler.process_pcm16(pcm)
        self._count("audio.received_samples", int(pcm.size))
        if out.size:
            self._emit(AudioOut(rid, out))

    def _flush_item(self, rid: str, item: _ItemAudio) -> None:
        if item.resampler is not None:
            rest = item.resampler.flush_pcm16()
            item.resampler = None
            if rest.size:
                self._emit(AudioOut(rid, rest))

    def _on_audio_done(self, ev: dict[str, Any]) -> None:
        key = f"{ev.get('item_id')}:{int(ev.get('content_index', 0))}"
        item = self._item_of.get(key)
        if item is not None:
            self._flush_item(str(ev.get("response_id")), item)

    def _on_response_done(self, ev: dict[str, Any]) -> None:
        resp = ev.get("response")
        if not isinstance(resp, dict):
            raise ValueError("response.done without a response object")
        rid = _response_id(ev)
        for item in list(self._items.get(rid, [])):
            self._flush_item(rid, item)
        status = str(resp.get("status") or "completed")
        details = _obj(resp.get("status_details"))
        reason = details.get("reason")
        err = _obj(details.get("error")) or None
        with self._lock:
            self._open.discard(rid)
        if status == "cancelled":
            self._emit(ClearAudio(rid, f"response cancelled ({reason or 'no reason given'})"))
        data = _clean({"status": status, "reason": reason, "error": err})
        self._emit(AgentEvent("response.done", data, response_id=rid, reason=reason))

    def _on_call(self, ev: dict[str, Any]) -> None:
        call_id = str(ev["call_id"])
        if call_id in self._calls:
            return
        name = ev.get("name") or self._call_names.get(call_id)
        if not isinstance(name, str) or not name:
            raise ValueError(f"function call {call_id} has no name")
        self._calls.add(call_id)
        raw = ev.get("arguments", "")
        args: dict[str, Any]
        try:
            parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
            args = parsed if isinstance(parsed, dict) else {"_value": parsed}
        except json.JSONDecodeError as exc:
            args = {"_raw": raw}
            self._error("tool_arguments", f"call {call_id}: arguments are not JSON ({exc.msg})")
        key = args.get("idempotency_key")
        self._emit(
            ToolCall(
                call_id,
                name,
                args,
                idempotency_key=key if isinstance(key, str) else None,
                response_id=_opt_str(ev.get("response_id")),
            )
        )

    def _on_item_added(self, ev: dict[str, Any]) -> None:
        item = _obj(ev.get("item"))
        if item.get("type") == "function_call" and item.get("call_id") and item.get("name"):
            self._call_names[str(item["call_id"])] = str(item["name"])

    def _on_item_done(self, ev: dict[str, Any]) -> None:
        """A function call whose ``arguments.done`` never came (or came without a name)."""
        item = _obj(ev.get("item"))
        if item.get("type") == "function_call" and item.get("call_id"):
            self._on_item_added(ev)
            self._on_call({**item, "response_id": ev.get("response_id")})

    def _on_cleared(self, ev: dict[str, Any]) -> None:
        self._emit(ClearAudio(_opt_str(ev.get("response_id")), "output_audio_buffer.cleared"))

    def _on_error(self, ev: dict[str, Any]) -> None:
        err = _obj(ev.get("error"))
        msg = str(err.get("message") or "error without a message")
        data = _clean(
            {
                "kind": "server",
                "type": err.get("type"),
                "code": err.get("code"),
                "param": err.get("param"),
                "event_id": err.get("event_id"),
            }
        )
        self._count("error.server", 1)
        self._emit(AgentEvent("session.error", data, reason=msg))

    _HANDLERS: ClassVar[dict[str, Callable[[RealtimeAgentLink, dict[str, Any]], None]]] = {
        "input_audio_buffer.speech_started": _on_speech_started,
        "input_audio_buffer.speech_stopped": _on_speech_stopped,
        "conversation.item.input_audio_transcription.completed": _on_transcript,
        "conversation.item.input_audio_transcription.delta": _on_transcript_delta,
        "conversation.item.input_audio_transcription.failed": _on_transcript_failed,
        "response.created": _on_response_created,
        "response.output_audio.delta": _on_audio_delta,
        "response.output_audio.done": _on_audio_done,
        "response.done": _on_response_done,
        "response.function_call_arguments.done": _on_call,
        "response.output_item.added": _on_item_added,
        "response.output_item.done": _on_item_done,
        "output_audio_buffer.cleared": _on_cleared,
        "error": _on_error,
    }

    # ------------------------------------------------------------------ DuplexAgent
    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        """Connect, send ``session.update``; the session clock is ``now_ns`` at this call."""
        if self._ws is not None or self._loop is not None:
            self.close()
        self._reset_session_state()
        self._t0 = time.monotonic_ns() - now_ns
        self._sr = session.sample_rate
        self._in_rs = StreamResampler(self._sr, PROTOCOL_RATE)
        self.raw_log = []
        self.stats = Counter()
        self.hops = []
        tools = function_tools(session.scenario.tools, self.protocol) if session.scenario else []
        self._session_doc = client_session(
            self.protocol,
            turn=self.turn,
            tools=tools,
            voice=self.voice,
            instructions=self.instructions,
            transcribe=self.transcribe,
            vad=self.vad,
            model=self.session_model,
        )
        self._open_session()
        return self._drain()

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        """Send one frame (resampled to 24 kHz); return what arrived since the last call."""
        if self._connected and self._in_rs is not None:
            t_hand = time.monotonic_ns() if self.hop_trace else 0
            pcm = np.asarray(pcm, dtype=np.int16).reshape(-1)
            wire = self._in_rs.process_pcm16(pcm)
            event: dict[str, Any] = {"type": "input_audio_buffer.append"}
            if self.hop_trace:
                event["event_id"] = self._hop_start(pcm.size, t_hand)
            event["audio"] = pcm16_to_b64(wire)
            if wire.size:
                self._send(event)
            self._frames_sent += pcm.size
            if self.turn == "manual":
                self._endpoint(pcm)
        elif not self._connected:
            self._count("frames.dropped_disconnected", 1)
        return self._drain()

    def _endpoint(self, pcm: np.ndarray) -> None:
        """Manual turns: energy endpointing of what was sent (see the module docstring)."""
        frame_ms = pcm.size * 1000 / self._sr
        rms = float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))) if pcm.size else 0.0
        src = {"source": "client_endpointer"}
        if rms >= self.threshold:
            self._ep_silence_ms = 0.0
            self._ep_speech_ms += frame_ms
            if not self._ep_in_speech and self._ep_speech_ms >= self.min_speech_ms:
                self._ep_in_speech = True
                self._emit(AgentEvent("vad.speech_started", dict(src)))
                with self._lock:
                    active = sorted(self._open)
                if active:
                    self._send({"type": "response.cancel"})
                if self.barge_in == "client":
                    self._emit(ClearAudio(None, "speech (client barge-in)"))
            return
        if not self._ep_in_speech:
            self._ep_speech_ms = 0.0
            return
        self._ep_silence_ms += frame_ms
        if self._ep_silence_ms >= self.endpoint_ms:
            self._ep_in_speech = False
            self._ep_speech_ms = self._ep_silence_ms = 0.0
            self._emit(AgentEvent("vad.speech_stopped", dict(src)))
            self._send({"type": "input_audio_buffer.commit"})
            self._send({"type": "response.create"})

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        """An interrupted response: truncate its audio item to what was played."""
        if report.status == "interrupted":
            target = self._truncation(report.response_id, report.played_ms)
            if target is not None:
                item, end_ms = target
                self._send(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": item.item_id,
                        "content_index": item.content_index,
                        "audio_end_ms": end_ms,
                    }
                )
            else:
                self._count("truncate.no_item", 1)
        return self._drain()

    def _truncation(self, rid: str, played_ms: float) -> tuple[_ItemAudio, int] | None:
        with self._lock:
            items = list(self._items.get(rid, []))
        if not items:
            return None
        before = 0.0
        for item in items:
            if played_ms <= before + item.ms or item is items[-1]:
                end = min(max(played_ms - before, 0.0), item.ms)
                return item, min(round(end), int(item.ms))
            before += item.ms
        return None  # pragma: no cover (the loop returns at the last item)

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        """``function_call_output`` then ``response.create``."""
        payload = {"error": error} if error else result
        try:
            output = json.dumps(payload)
        except (TypeError, ValueError):
            output = json.dumps(str(payload))
        item = {"type": "function_call_output", "call_id": call_id, "output": output}
        self._send({"type": "conversation.item.create", "item": item})
        self._send({"type": "response.create"})
        return self._drain()

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

    def finish(self, now_ns: int) -> SessionEnd:
        """Close the socket; the business truth of a remote agent comes from a state probe."""
        self.close()
        return SessionEnd(
            info={
                "realtime": {
                    **self.info,
                    "stats": dict(sorted(self.stats.items())),
                    "raw_log_events": len(self.raw_log),
                }
            }
        )

    def close(self) -> None:
        """Close the socket and stop the loop thread (idempotent, bounded)."""
        with self._lock:
            self._connecting = False
            self._generation += 1
        if self._ws is not None:
            self._shutdown_socket()
        self._connected = False
        self._stop_loop()

    # ------------------------------------------------------------------ raw log
    def raw_log_lines(self) -> list[str]:
        """The raw log as JSONL lines."""
        return [json.dumps(line, separators=(",", ":")) for line in self.raw_log]

    def write_raw_log(self, path: str | Path) -> Path:
        """Write the raw log as JSONL (readable by ``import_realtime_log``)."""
        path = Path(path)
        path.write_text("".join(line + "\n" for line in self.raw_log_lines()), encoding="utf-8")
        return path


# --------------------------------------------------------------------------- helpers


HOP_PREFIX = "voxeval-hop-"
"""Hop trace: the event id of a traced append (the server stamps what it makes of it)."""
HOP_FIELD = "voxeval_hops"
"""Hop trace: the server event field with the server's stamps of a traced frame."""


class _TracedText(str):
    """A queued client event with its hop-trace record (``hop_trace`` only)."""

    hop: dict[str, Any]


def _describe(exc: BaseException) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return f"the server refused the connection (HTTP {status})"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _describe_close(exc: BaseException | None, ws: Any = None) -> str:
    rcvd = getattr(exc, "rcvd", None) if exc is not None else None
    if rcvd is None and ws is not None:
        code, reason = getattr(ws, "close_code", None), getattr(ws, "close_reason", "")
    elif rcvd is not None:
        code, reason = rcvd.code, rcvd.reason
    else:
        return _describe(exc) if exc is not None else "closed"
    if code is None:
        return "closed without a close frame"
    return f"closed by the server (code {code}{': ' + reason if reason else ''})"


def _import_websockets() -> None:
    try:
        import websockets.asyncio.client  # noqa: F401
    except ImportError as exc:
        from voxeval.core.errors import BackendUnavailable

        raise BackendUnavailable(
            "the Realtime WebSocket link needs the websockets package: "
            "pip install 'voxeval[live]' (or pip install websockets)"
        ) from exc


@functools.lru_cache(maxsize=8)
def _resampler_template(rate_in: int, rate_out: int) -> StreamResampler:
    return StreamResampler(rate_in, rate_out)


def _fresh_resampler(rate_in: int, rate_out: int) -> StreamResampler:
    """A new resampler stream sharing a cached filter table: building the table costs more
    than resampling a chunk, and each response's first chunk would wait for it."""
    resampler = copy.copy(_resampler_template(rate_in, rate_out))
    resampler.reset()
    return resampler


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _response_id(ev: dict[str, Any]) -> str:
    resp = ev.get("response")
    rid = resp.get("id") if isinstance(resp, dict) else None
    if not isinstance(rid, str) or not rid:
        raise ValueError("response without an id")
    return rid


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


# --------------------------------------------------------------------------- registry


class RealtimeLinkFactory:
    """One ``RealtimeAgentLink`` per session, with what the run records (``info``)."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url = url
        self.options = options
        probe = RealtimeAgentLink(url, **options)
        self.info = dict(probe.info)

    def __call__(self) -> RealtimeAgentLink:
        return RealtimeAgentLink(self.url, **self.options)


def build(spec: Any, capability: str) -> RealtimeLinkFactory:
    """Registry factory for ``ws://...`` / ``wss://...`` (backend ``realtime``).

    Link options (``LINK_OPTIONS``) may be given in the URL's query or as spec options; they
    are taken out of the URL, everything else in the query (``model=...``) stays in it.
    """
    from voxeval.core.errors import SpecError

    if capability != "duplex":
        raise SpecError(f"the realtime backend provides duplex, not {capability!r}")
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
        return RealtimeLinkFactory(url, options)
    except ValueError as exc:
        raise SpecError(f"{_redact_url(spec.raw)}: {exc}") from None
