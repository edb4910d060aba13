"""The OpenAI Realtime protocol seen from the client, whatever carries it.

``RealtimeClient`` is the transport-independent half of a Realtime link: the session state,
the translation of server events into agent outputs, the client's actions (truncation, tool
results, manual endpointing, barge-in) and the raw log. A transport subclass moves the events
and the audio: ``realtime_ws.RealtimeAgentLink`` (events and base64 audio on one WebSocket)
and ``realtime_webrtc.WebRTCAgentLink`` (events on the ``oai-events`` data channel, audio on
an Opus media track). Each runs its network on a background thread with its own asyncio loop
(``_ensure_loop``); the driver's calls never wait for the network.

The session clock is the driver's: ``start`` is called at ``now_ns`` = its session time, so
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

Barge-in (``barge_in``)
=======================
Who stops local playback when the user talks over the agent. The default (``protocol``) is
what the transport's documentation tells its clients to do: over WebSocket the server sends
all audio as fast as it makes it and cannot clear what the client holds, so the client stops
playback at ``input_audio_buffer.speech_started`` and truncates to what was heard (OpenAI's
WebSocket guide); over WebRTC the server owns the output buffer and says
``output_audio_buffer.cleared``. ``client`` and ``server`` force one behaviour
(``server``: only the server's clear or a cancelled response stops playback, so the agent's
own decisions are measured). The behaviour used is in ``info["barge_in"]`` and the bundle.
"""

from __future__ import annotations

import copy
import functools
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
    ToolCall,
)
from voxassay.systems.duplex.link_base import LinkBase, describe_error, redact_url
from voxassay.systems.duplex.realtime_protocol import (
    CLIENT_EVENT_TYPES,
    PROTOCOL_RATE,
    SERVER_EVENT_TYPES,
    Dialect,
    StreamResampler,
    b64_to_pcm16,
    canonical_name,
    client_session,
    function_tools,
)

__all__ = ["BargeIn", "RealtimeClient"]

BargeIn = Literal["protocol", "server", "client"]


class ItemAudio:
    """Audio received for one (item, content part) of a response."""

    def __init__(self, item_id: str, content_index: int) -> None:
        self.item_id = item_id
        self.content_index = content_index
        self.samples = 0  # at the protocol rate
        self.resampler: StreamResampler | None = None

    @property
    def ms(self) -> float:
        return self.samples * 1000 / PROTOCOL_RATE


class RealtimeClient(LinkBase):
    """The client half of a Realtime session as a ``DuplexAgent``, without its transport.

    A subclass sets ``TRANSPORT`` and ``PROTOCOL_BARGE_IN`` (what its documentation tells
    clients to do) and implements ``_open_session`` (connect, send ``session.update``),
    ``_send`` (one client event, never waiting), ``_send_audio`` (one frame of the user's
    audio), ``on_connection`` and ``close``.
    """

    TRANSPORT: ClassVar[str] = "realtime"
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
        endpoint_ms: float = 500.0,
        threshold_dbfs: float = -40.0,
        min_speech_ms: float = 60.0,
        raw_log_limit: int = 500_000,
    ) -> None:
        if protocol not in ("ga", "beta"):
            raise ValueError(f"protocol must be ga or beta, not {protocol!r}")
        if turn not in ("server_vad", "manual"):
            raise ValueError(f"turn must be server_vad or manual, not {turn!r}")
        if barge_in not in ("protocol", "server", "client"):
            raise ValueError(f"barge_in must be protocol, server or client, not {barge_in!r}")
        self.url = url
        self.protocol: Dialect = protocol
        self.key_env = key_env
        self.turn = turn
        self.barge_in: Literal["server", "client"] = (
            self.PROTOCOL_BARGE_IN if barge_in == "protocol" else barge_in
        )
        self.voice = voice
        self.instructions = instructions
        self.transcribe = transcribe
        self.session_model = session_model
        self.vad = vad
        self.connect_timeout_s = connect_timeout_s
        self.endpoint_ms = endpoint_ms
        self.threshold = 10 ** (threshold_dbfs / 20) * 32768
        self.min_speech_ms = min_speech_ms
        self.raw_log_limit = raw_log_limit
        self.info: dict[str, Any] = {
            "backend": "realtime",
            "transport": self.TRANSPORT,
            "url": redact_url(url),
            "protocol": protocol,
            "turn": turn,
            "barge_in": self.barge_in,
            "barge_in_source": "protocol default" if barge_in == "protocol" else "option",
        }
        super().__init__()
        self._session_doc: dict[str, Any] = {}
        self._reset_session_state()

    # ------------------------------------------------------------------ state
    def _reset_session_state(self) -> None:
        self._t0 = time.monotonic_ns()
        self._out = []
        self._connected = False
        self._closing = False
        self._connecting = False  # a reconnection is under way (``on_connection(True)``)
        self._errors = Counter()
        self._unknown: set[str] = set()
        self._items: dict[str, list[ItemAudio]] = {}  # response id -> audio items
        self._item_of: dict[str, ItemAudio] = {}  # "item_id:content_index"
        self._open: set[str] = set()  # responses created and not done
        self._calls: set[str] = set()
        self._call_names: dict[str, str] = {}  # call_id -> function name (output items)
        self._in_rs: StreamResampler | None = None
        self._ep_in_speech = False
        self._ep_speech_ms = 0.0
        self._ep_silence_ms = 0.0
        self._sr = 16_000
        self._frames_sent = 0  # user samples handed to the transport
        self._first_audio = False  # the last audio delta began an item (hop trace)

    # ------------------------------------------------------------------ receiving
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
                self._error("protocol", f"{etype}: malformed event ({describe_error(exc)})")
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
                item = self._item_of[key] = ItemAudio(iid, ci)
                self._items.setdefault(rid, []).append(item)
            item.samples += pcm.size
        if item.resampler is None:
            item.resampler = _fresh_resampler(PROTOCOL_RATE, self._sr)
        out = item.resampler.process_pcm16(pcm)
        self._count("audio.received_samples", int(pcm.size))
        if out.size:
            self._emit(AudioOut(rid, out))

    def _flush_item(self, rid: str, item: ItemAudio) -> None:
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

    _HANDLERS: ClassVar[dict[str, Callable[[RealtimeClient, dict[str, Any]], None]]] = {
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

    # ------------------------------------------------------------------ transport
    def _open_session(self) -> None:
        """Connect (bounded) and send ``session.update``; failures become session.error."""
        raise NotImplementedError

    def _send(self, event: dict[str, Any]) -> None:
        """Queue one client event (any thread, never waiting); log it as it is queued."""
        raise NotImplementedError

    def _send_audio(self, pcm: np.ndarray) -> None:
        """Hand one frame of the user's audio (int16 at the session rate) to the transport."""
        raise NotImplementedError

    def _is_open(self) -> bool:
        """Whether the transport still holds resources ``close`` must release."""
        return self._loop is not None

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ DuplexAgent
    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        """Connect, send ``session.update``; the session clock is ``now_ns`` at this call."""
        if self._is_open():
            self.close()
        self._reset_session_state()
        self._t0 = time.monotonic_ns() - now_ns
        self._sr = session.sample_rate
        self._in_rs = StreamResampler(self._sr, PROTOCOL_RATE)
        self.raw_log = []
        self.stats = Counter()
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
        """Send one frame; return what arrived since the last call."""
        if self._connected:
            pcm = np.asarray(pcm, dtype=np.int16).reshape(-1)
            self._send_audio(pcm)
            self._frames_sent += pcm.size
            if self.turn == "manual":
                self._endpoint(pcm)
        else:
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

    def _truncation(self, rid: str, played_ms: float) -> tuple[ItemAudio, int] | None:
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

    def finish(self, now_ns: int) -> SessionEnd:
        """Close the connection; a remote agent's business truth comes from a state probe."""
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


# --------------------------------------------------------------------------- helpers


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
