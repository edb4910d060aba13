"""The reference agent's Realtime server: the server class and the outputs of one connection (agent events, audio, tool calls and cancellations as Realtime server events); the connection's input handlers and worker are in server.py."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import functools
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    Stamped,
    ToolCall,
)
from voxassay.systems.duplex.realtime_protocol import (
    PROTOCOL_RATE,
    Dialect,
    StreamResampler,
    pcm16_to_b64,
    server_name,
)
from voxassay.systems.duplex.realtime_ws import HOP_FIELD

ProtocolChoice = Literal["ga", "beta", "auto"]
MODEL_NAME = "voxassay-reference"
_ERRORS_PER_S = 20
HOP_SEND = '"@hop-send@"'
"""Hop trace: the placeholder the sender replaces with the time it writes the event."""


@dataclass
class _Response:
    rid: str
    output_index: int = 0
    item_id: str | None = None
    resampler: StreamResampler | None = None
    sent_samples: int = 0  # at the protocol rate
    first_audio_ns: int | None = None
    done: bool = False
    cut: bool = False  # truncated, cleared or cancelled: no completion estimate
    completed_reported: bool = False
    items: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""  # what the agent says (its output audio transcript)

    @property
    def sent_ms(self) -> float:
        return self.sent_samples * 1000 / PROTOCOL_RATE


@functools.lru_cache(maxsize=8)
def _resampler_template(rate_in: int, rate_out: int) -> StreamResampler:
    return StreamResampler(rate_in, rate_out)


def _fresh_resampler(rate_in: int, rate_out: int) -> StreamResampler:
    """A new resampler stream sharing a cached filter table (building the table costs more
    than resampling a chunk; each response's first audio would wait for it)."""
    resampler = copy.copy(_resampler_template(rate_in, rate_out))
    resampler.reset()
    return resampler


def beta_item(item: dict[str, Any]) -> dict[str, Any]:
    """A GA item in the beta shape (content part types ``audio`` / ``text``)."""
    out = dict(item)
    content = out.get("content")
    rename = {"output_audio": "audio", "output_text": "text"}
    if isinstance(content, list):
        out["content"] = [
            {**c, "type": rename.get(str(c.get("type")), c.get("type"))}
            if isinstance(c, dict)
            else c
            for c in content
        ]
    return out


class ServerSettings(Protocol):
    """What a connection's outgoing side reads from its server (``RealtimeServer``)."""

    sample_rate: int
    frame_ms: int
    agent_thread: bool
    max_outgoing: int
    max_queued_frames: int
    send_timeout_s: float
    trace: Callable[[str, dict[str, Any]], None] | None


class ConnectionOutputs:
    """A connection's outgoing side: emits Realtime server events for the agent's outputs (responses, audio deltas, transcripts, tool calls, clears). submit is the connection's worker queue (_Connection)."""

    def __init__(self, server: ServerSettings, ws: Any, dialect: Dialect) -> None:
        self.srv = server
        self.ws = ws
        self.dialect: Dialect = dialect
        self.loop = asyncio.get_running_loop()
        self.sid = f"sess_{uuid.uuid4().hex[:16]}"
        self.t0 = time.monotonic_ns()
        self.n_ids = 0
        self.out: asyncio.Queue[str | None] = asyncio.Queue(maxsize=server.max_outgoing)
        self.jobs: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=server.max_queued_frames)
        self.worker: threading.Thread | None = None
        # ``agent_thread=False``: calls queued here and run on the loop thread
        self.inline: collections.deque[tuple[Any, ...]] | None = (
            None if server.agent_thread else collections.deque()
        )
        self.inline_busy = False
        self.agent: Any = None  # the inline agent
        self.frame = server.sample_rate * server.frame_ms // 1000
        self.in_rs = StreamResampler(PROTOCOL_RATE, server.sample_rate)
        self.inbuf = np.zeros(0, np.int16)
        self.aligned = False  # the first frame got its lead of silence (``on_append``)
        self.client_samples = 0  # agent-rate samples of client audio cut into frames
        self.uncommitted = 0  # protocol-rate samples appended since the last commit or clear
        self.last_input_ns = 0
        self.settings: dict[str, Any] = {"turn": "server_vad", "tools": []}
        self.responses: dict[str, _Response] = {}
        self.item_to_response: dict[str, str] = {}
        self.open_rid: str | None = None
        self.last_audio_rid: str | None = None
        self.user_item: str | None = None
        self.last_user_item: str | None = None
        self.utterance_items: dict[str, str] = {}  # agent utterance id -> user item id
        self.calls: dict[str, str] = {}  # call_id -> response id
        self.errors_window = (0, 0)  # (second, count)
        self.dropped_frames = 0
        self.closing = False
        self.alive = True
        self.t_recv = 0  # when the message being handled was received (monotonic ns)
        self.hop_tags: dict[int, dict[str, Any]] = {}  # hop trace: client_samples -> stamps
        self.hop: dict[str, Any] | None = None  # hop trace: the frame whose outputs are applied
        self.hop_traced = False  # hop trace: some event carries a send placeholder

    # ------------------------------------------------------------------ ids, time
    def submit(self, job: tuple[Any, ...], *, frame: bool = False) -> bool:
        """Queue ``job`` on the connection's worker (``_Connection.submit``)."""
        raise NotImplementedError

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def new_id(self, prefix: str) -> str:
        self.n_ids += 1
        return f"{prefix}_{self.n_ids:06d}"

    def name(self, ga: str) -> str:
        return server_name(ga, self.dialect)

    # ------------------------------------------------------------------ sending
    def emit(self, event: dict[str, Any]) -> None:
        """Queue a server event (loop thread)."""
        event = {"event_id": self.new_id("event"), **event}
        if self.srv.trace is not None:
            self.srv.trace("server", event)
        try:
            self.out.put_nowait(json.dumps(event, separators=(",", ":")))
        except asyncio.QueueFull:
            if not self.closing:
                self.closing = True
                self.loop.create_task(self.ws.close(1008, "client is not reading"))

    def error(
        self,
        message: str,
        *,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        event_id: str | None = None,
    ) -> None:
        """An ``error`` event, at most ``_ERRORS_PER_S`` per second (the rest are dropped)."""
        sec = int(time.monotonic())
        last, n = self.errors_window
        n = n + 1 if sec == last else 1
        self.errors_window = (sec, n)
        if n > _ERRORS_PER_S:
            return
        err: dict[str, Any] = {"type": kind, "message": message}
        if code:
            err["code"] = code
        if param:
            err["param"] = param
        if event_id:
            err["event_id"] = event_id
        self.emit({"type": "error", "error": err})

    async def sender(self) -> None:
        while True:
            text = await self.out.get()
            if text is None:
                return
            if self.hop_traced and HOP_SEND in text:  # hop trace only
                text = text.replace(HOP_SEND, str(time.monotonic_ns()), 1)
            try:
                # a timeout scope, not ``wait_for``: no task per message (a loop turn each),
                # so the events of a burst go out in one turn
                async with asyncio.timeout(self.srv.send_timeout_s):
                    await self.ws.send(text)
            except TimeoutError:
                self.ws.transport.abort()
                return
            except Exception:
                return

    def _threadsafe(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server stopped
            self.loop.call_soon_threadsafe(lambda: fn(*args, **kw))

    async def _close_after_flush(self, code: int, reason: str) -> None:
        for _ in range(50):
            if self.out.empty():
                break
            await asyncio.sleep(0.01)
        await self.ws.close(code, reason)

    # ------------------------------------------------------------------ agent outputs
    def apply(self, outputs: list[AgentOutput], samples: int) -> None:
        """Turn agent outputs into server events (loop thread)."""
        if not self.alive:
            return
        if self.hop_tags:
            self.hop = self.hop_tags.pop(samples, None)
            if self.hop is not None:
                self.hop["apply"] = time.monotonic_ns()
        try:
            self._apply(outputs, samples)
        finally:
            self.hop = None

    def _apply(self, outputs: list[AgentOutput], samples: int) -> None:
        audio_ms = round(samples * 1000 / self.srv.sample_rate)
        for out in outputs:
            if isinstance(out, Stamped):
                out = out.output
            if isinstance(out, AudioOut):
                self.audio(out)
            elif isinstance(out, AgentEvent):
                self.agent_event(out, audio_ms)
            elif isinstance(out, ClearAudio):
                rid = out.response_id or self.open_rid or self.last_audio_rid
                resp = self.responses.get(rid) if rid else None
                if resp is not None:
                    self.clear(resp, "turn_detected")
            elif isinstance(out, ToolCall):
                self.tool_call(out)

    def response(self, rid: str) -> _Response:
        resp = self.responses.get(rid)
        if resp is None:
            resp = self.responses[rid] = _Response(rid)
            self.open_rid = rid
            self.emit({"type": "response.created", "response": self.response_doc(resp)})
        return resp

    def response_doc(self, resp: _Response, status: str = "in_progress", reason: str = "") -> Any:
        doc: dict[str, Any] = {
            "id": resp.rid,
            "object": "realtime.response",
            "status": status,
            "output": [i if self.dialect == "ga" else beta_item(i) for i in resp.items],
        }
        if self.dialect == "ga":
            doc["output_modalities"] = ["audio"]
        else:
            doc["modalities"] = ["audio", "text"]
        if status != "in_progress":
            details: dict[str, Any] = {"type": status}
            if reason:
                details["reason"] = reason
            doc["status_details"] = details
        return doc

    def audio(self, out: AudioOut) -> None:
        resp = self.response(out.response_id)
        if resp.done or resp.cut:
            return  # audio of a cancelled or finished response is not sent
        if resp.item_id is None:
            resp.item_id = self.new_id("item")
            self.item_to_response[resp.item_id] = resp.rid
            item = {
                "id": resp.item_id,
                "object": "realtime.item",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            resp.output_index = len(resp.items)
            resp.items.append(item)
            self.emit(
                {
                    "type": "response.output_item.added",
                    "response_id": resp.rid,
                    "output_index": resp.output_index,
                    "item": item if self.dialect == "ga" else beta_item(item),
                }
            )
            self.item_added(dict(item), done=False)
            self.emit(
                {
                    "type": "response.content_part.added",
                    "response_id": resp.rid,
                    "item_id": resp.item_id,
                    "output_index": resp.output_index,
                    "content_index": 0,
                    "part": {"type": "audio", "transcript": ""},
                }
            )
            if resp.text:  # the agent's words come with its audio (one delta: the whole text)
                self.emit(
                    {
                        "type": self.name("response.output_audio_transcript.delta"),
                        "response_id": resp.rid,
                        "item_id": resp.item_id,
                        "output_index": resp.output_index,
                        "content_index": 0,
                        "delta": resp.text,
                    }
                )
            resp.resampler = _fresh_resampler(self.srv.sample_rate, PROTOCOL_RATE)
        assert resp.resampler is not None
        wire = resp.resampler.process_pcm16(np.asarray(out.pcm, dtype=np.int16).reshape(-1))
        self.send_audio(resp, wire)

    def send_audio(self, resp: _Response, wire: np.ndarray) -> None:
        if not wire.size:
            return
        first = resp.first_audio_ns is None
        if first:
            resp.first_audio_ns = self.now()
            self.last_audio_rid = resp.rid
        resp.sent_samples += int(wire.size)
        delta: dict[str, Any] = {
            "type": self.name("response.output_audio.delta"),
            "response_id": resp.rid,
            "item_id": resp.item_id,
            "output_index": resp.output_index,
            "content_index": 0,
            "delta": pcm16_to_b64(wire),
        }
        if self.hop is not None:  # hop trace: the frame's stamps; ``send`` set by the sender
            delta[HOP_FIELD] = {**self.hop, "emit": time.monotonic_ns(), "send": "@hop-send@"}
            self.hop_traced = True
            self.hop = None
        self.emit(delta)
        if first:
            # told after the sender's next turn has written the audio: the worker thread
            # woken now would hold the loop thread (GIL) between queueing and sending it
            started = ("playback", PlaybackReport(resp.rid, "started", 0.0))
            self.loop.call_soon(self.submit, started)

    def close_response(self, resp: _Response, status: str, reason: str = "") -> None:
        if resp.done:
            return
        resp.done = True
        if resp.resampler is not None and resp.item_id is not None:
            if status != "cancelled":  # a cut response's held-back tail is not sent
                self.send_audio(resp, resp.resampler.flush_pcm16())
            resp.resampler = None
            base = {
                "response_id": resp.rid,
                "item_id": resp.item_id,
                "output_index": resp.output_index,
                "content_index": 0,
            }
            self.emit({"type": self.name("response.output_audio.done"), **base})
            if resp.text:
                self.emit(
                    {
                        "type": self.name("response.output_audio_transcript.done"),
                        **base,
                        "transcript": resp.text,
                    }
                )
            self.emit(
                {
                    "type": "response.content_part.done",
                    **base,
                    "part": {"type": "audio", "transcript": resp.text},
                }
            )
            item = resp.items[resp.output_index]
            item["status"] = "completed" if status == "completed" else "incomplete"
            item["content"] = [
                {
                    "type": "output_audio" if self.dialect == "ga" else "audio",
                    "transcript": resp.text,
                }
            ]
            self.emit(
                {
                    "type": "response.output_item.done",
                    "response_id": resp.rid,
                    "output_index": resp.output_index,
                    "item": item if self.dialect == "ga" else beta_item(item),
                }
            )
            if self.dialect == "ga":
                self.emit({"type": "conversation.item.done", "item": dict(item)})
        self.emit({"type": "response.done", "response": self.response_doc(resp, status, reason)})
        if self.open_rid == resp.rid:
            self.open_rid = None

    def empty_response(self) -> None:
        """``response.create`` with nothing to answer: a response created and done at once,
        with no output (a client waiting for ``response.done`` is answered)."""
        self.close_response(self.response(self.new_id("resp")), "completed")

    def clear(self, resp: _Response, reason: str) -> None:
        self.emit({"type": "output_audio_buffer.cleared", "response_id": resp.rid})
        resp.cut = True
        if not resp.done:
            self.close_response(resp, "cancelled", reason)

    def agent_event(self, ev: AgentEvent, audio_ms: int) -> None:
        et = ev.event_type
        if et == "vad.speech_started":
            self.user_item = self.new_id("item")
            if ev.utterance_id:
                self.utterance_items.setdefault(ev.utterance_id, self.user_item)
            self.emit(
                {
                    "type": "input_audio_buffer.speech_started",
                    "audio_start_ms": audio_ms,
                    "item_id": self.user_item,
                }
            )
        elif et == "vad.speech_stopped":
            item = self.user_item or self.new_id("item")
            self.emit(
                {
                    "type": "input_audio_buffer.speech_stopped",
                    "audio_end_ms": audio_ms,
                    "item_id": item,
                }
            )
            if self.settings.get("turn") != "manual":
                self.commit_user_item(item)
                self.user_item = None
                self.uncommitted = 0
            self.last_user_item = item
        elif et in ("asr.final", "asr.partial"):
            item = self._user_item_for(ev)
            text = str(ev.data.get("text", ev.data.get("delta", "")) or "")
            if et == "asr.final":
                self.emit(
                    {
                        "type": "conversation.item.input_audio_transcription.completed",
                        "item_id": item,
                        "content_index": 0,
                        "transcript": text,
                        "usage": {"type": "duration", "seconds": 0.0},
                    }
                )
            elif text:
                self.emit(
                    {
                        "type": "conversation.item.input_audio_transcription.delta",
                        "item_id": item,
                        "content_index": 0,
                        "delta": text,
                    }
                )
        elif et == "response.created" and ev.response_id:
            resp = self.response(ev.response_id)
            said = ev.data.get("text")
            if isinstance(said, str) and not resp.text:
                resp.text = said.strip()
        elif et in ("response.done", "response.cancelled") and ev.response_id:
            resp = self.response(ev.response_id)
            status = "cancelled" if et == "response.cancelled" else ev.data.get("status")
            status = (
                status
                if status in ("completed", "cancelled", "failed", "incomplete")
                else ("completed")
            )
            reason = "turn_detected" if status == "cancelled" else ""
            if status == "cancelled":
                resp.cut = True
            self.close_response(resp, status, reason)
        elif et == "session.error":
            msg = ev.reason or str(ev.data.get("message") or ev.data.get("error") or "agent error")
            self.error(msg, kind="server_error", code="agent_error")

    def commit_user_item(self, item_id: str) -> None:
        """The user's audio up to now is an item: ``input_audio_buffer.committed`` and the
        item's ``conversation.item.added`` + ``.done`` (beta ``conversation.item.created``);
        its transcript follows in ``...input_audio_transcription.completed``."""
        self.emit({"type": "input_audio_buffer.committed", "item_id": item_id})
        content = [{"type": "input_audio", "transcript": None}]
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": content,
        }
        self.item_added(item)

    def item_added(self, item: dict[str, Any], *, done: bool = True) -> None:
        """An item joined the conversation: GA ``conversation.item.added`` (+ ``.done`` when
        it is complete already), beta ``conversation.item.created``."""
        if self.dialect == "ga":
            self.emit({"type": "conversation.item.added", "item": item})
            if done:
                self.emit({"type": "conversation.item.done", "item": item})
        else:
            self.emit({"type": "conversation.item.created", "item": beta_item(item)})

    def _user_item_for(self, ev: AgentEvent) -> str:
        if ev.utterance_id and ev.utterance_id in self.utterance_items:
            return self.utterance_items[ev.utterance_id]
        return self.last_user_item or self.user_item or self.new_id("item")

    def tool_call(self, call: ToolCall) -> None:
        own = call.response_id is None or (
            call.response_id in self.responses and self.responses[call.response_id].done
        )
        rid = self.new_id("resp") if own else str(call.response_id)
        resp = self.response(rid)
        item_id = self.new_id("item")
        args = json.dumps(call.arguments, separators=(",", ":"))
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": "",
        }
        index = len(resp.items)
        resp.items.append(item)
        self.calls[call.call_id] = rid
        self.emit(
            {
                "type": "response.output_item.added",
                "response_id": rid,
                "output_index": index,
                "item": dict(item),
            }
        )
        done: dict[str, Any] = {
            "type": "response.function_call_arguments.done",
            "response_id": rid,
            "item_id": item_id,
            "output_index": index,
            "call_id": call.call_id,
            "arguments": args,
        }
        if self.dialect == "ga":  # beta names the function in the output item only
            done["name"] = call.name
        self.emit(done)
        item.update(status="completed", arguments=args)
        self.emit(
            {
                "type": "response.output_item.done",
                "response_id": rid,
                "output_index": index,
                "item": dict(item),
            }
        )
        if own:
            self.close_response(resp, "completed")
