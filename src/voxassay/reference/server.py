"""Serve any in-process ``DuplexAgent`` over the OpenAI Realtime WebSocket protocol.

``serve_agent(factory)`` (and ``voxassay reference serve``) listens on 127.0.0.1:8765 by default
and speaks the subset of the protocol that ``voxassay.systems.duplex.realtime_ws`` uses, with GA
or beta event names (``protocol``: ``ga``, ``beta``, or ``auto`` = beta for clients that send
the ``OpenAI-Beta: realtime=v1`` header, GA otherwise). Each connection gets a fresh agent
from ``factory()`` and its own session clock (0 = the connection was accepted); the agent
runs in a worker thread of its own, so a slow agent never blocks the socket
(``agent_thread=False``: it is called on the server's event loop instead, two thread wake-ups
fewer per frame, for agents whose calls take microseconds, such as the self-check's echo).

Client event -> agent
=====================
================================  =========================================================
``session.update``                validated (pcm16 at 24 kHz only); tools, instructions and
                                  the turn mode are handed to the agent's optional
                                  ``configure(settings)``; answered with ``session.updated``
``input_audio_buffer.append``     24 -> 16 kHz, cut into ``frame_ms`` frames ->
                                  ``push_audio`` (bounded queue: a flood is dropped with an
                                  ``error``); the first frame is led by silence (under one
                                  frame) so that frames end where the client's appends end
                                  when it appends whole frames, as the voxassay link does: the
                                  resamplers' look-ahead (~2 ms, the client's and ours) then
                                  costs that, not a frame of delay
``input_audio_buffer.commit``     ``input_audio_buffer.committed``; optional ``on_commit``
``input_audio_buffer.clear``      drops the partial frame; ``input_audio_buffer.cleared``
``conversation.item.truncate``    ``on_playback(PlaybackReport(rid, "interrupted",
                                  played_ms=audio_end_ms))``; ``conversation.item.truncated``
``conversation.item.create``      a ``function_call_output`` -> ``on_tool_result`` (output
                                  JSON ``{"error": ...}`` is an error); items are
                                  acknowledged (GA ``conversation.item.added`` + ``.done``,
                                  beta ``conversation.item.created``)
``response.create``               optional ``on_response_request`` (the agent decides)
``response.cancel``               the response is cancelled here (its later audio dropped,
                                  ``response.done`` cancelled, reason client_cancelled);
                                  optional ``on_response_cancel``
``output_audio_buffer.clear``     ``output_audio_buffer.cleared`` + cancel, as above
================================  =========================================================

Agent output -> server events
=============================
``AudioOut`` -> ``response.output_audio.delta`` (beta ``response.audio.delta``; 16 -> 24 kHz
per response, base64), preceded at a response's first audio by ``response.output_item.added``
and ``response.content_part.added``; ``vad.speech_started/stopped`` ->
``input_audio_buffer.speech_started/stopped`` (+ ``committed``; ``audio_start_ms`` /
``audio_end_ms`` = client audio received when the agent said so); ``asr.partial/final`` ->
``conversation.item.input_audio_transcription.delta/completed``; ``response.created`` /
``response.done`` (``data.status``) / ``response.cancelled`` -> ``response.created`` /
``response.done`` (audio, part and item ``.done`` events first); ``ClearAudio`` ->
``output_audio_buffer.cleared`` and, if the response is still open, ``response.done``
cancelled (turn_detected); ``ToolCall`` -> a ``function_call`` output item
(``response.output_item.added``, ``response.function_call_arguments.done``,
``response.output_item.done``) in its response, or in a response of its own; agent
``session.error`` -> ``error``. Other agent events (``turn.decision``, ``tool.*``, ...) have no
Realtime equivalent and are not sent.

Playback over WebSocket is the client's; the protocol only reports cuts (truncate). The server
tells the agent ``started`` when a response's first audio is sent and ``completed`` when, by
a real-time estimate from that moment, all of its audio has played (plus
``playback_grace_ms``) without a truncate or cancel.

Reliability
===========
Binds to 127.0.0.1 unless told otherwise. With ``token_env`` the handshake must carry
``Authorization: Bearer <token>`` (HTTP 401 otherwise). At most ``max_connections`` sessions
run at once (HTTP 503 beyond). A session whose client leaves while its agent is still being
built never starts; agents share the process's warm models (``speech.warm_up`` runs once). Every client message is checked (text
frame, size <= ``max_message_bytes``, JSON object, known ``type``, field types); bad input is
answered with an ``error`` event (rate-limited) and the connection stays open. A message larger
than ``4 * max_message_bytes`` is refused by the WebSocket layer (close 1009). A client that
stops reading is disconnected when a send takes longer than ``send_timeout_s`` or its
outgoing queue fills. An agent that raises gets an ``error`` event per failure (a failing
``start`` closes the connection with 1011). When a connection ends the agent's ``finish`` runs
and ``on_end(session_id, SessionEnd)`` receives its business truth.

Hop trace: an append whose ``event_id`` starts with ``realtime_ws.HOP_PREFIX`` gets the frame
it completes stamped (received, agent call start/end, outputs applied, delta emitted, delta
written: ``time.monotonic_ns``) and the first audio delta made from it carries the stamps in
field ``realtime_ws.HOP_FIELD`` (``bench_harness_latency.py``, the self-check). Other
appends cost one string check.

When the input stops for ``idle_tick_ms`` the agent is fed silent frames (it still needs its
clock to tick, as behind a live microphone); they do not count as client audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentOutput,
    DuplexAgent,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
)
from voxassay.reference.realtime_outputs import (
    MODEL_NAME,
    ConnectionOutputs,
    ProtocolChoice,
)
from voxassay.reference.threaded import ServesInThread
from voxassay.systems.duplex.realtime_protocol import (
    BETA_HEADER,
    CLIENT_EVENT_TYPES,
    PROTOCOL_RATE,
    Dialect,
    b64_to_pcm16,
    read_session,
    server_session,
)
from voxassay.systems.duplex.realtime_ws import HOP_PREFIX

__all__ = ["RealtimeServer", "serve_agent"]

MIN_COMMIT_MS = 100.0
"""``input_audio_buffer.commit`` needs at least this much appended audio (as OpenAI's server
requires); less is an ``input_audio_buffer_commit_empty`` error."""


class _Connection(ConnectionOutputs):
    srv: RealtimeServer
    """One client: its agent, worker thread, resamplers and protocol state."""

    # ------------------------------------------------------------------ worker
    def submit(self, job: tuple[Any, ...], *, frame: bool = False) -> bool:
        if self.inline is not None:
            self.inline.append(job)
            if not self.inline_busy:
                self.run_inline()
            return True
        try:
            self.jobs.put_nowait(job)
            return True
        except queue.Full:
            if frame:
                self.dropped_frames += 1
                if self.dropped_frames == 1 or self.dropped_frames % 50 == 0:
                    self.error(
                        f"input flood: the agent is {self.srv.max_queued_frames} frames behind; "
                        f"{self.dropped_frames} frame(s) dropped so far",
                        kind="server_error",
                        code="input_dropped",
                    )
            else:
                self.error("the agent is overloaded; event dropped", kind="server_error")
            return False

    def work(self) -> None:
        """The worker thread: build the agent, then run one call at a time."""
        agent: Any = None
        try:
            agent = self.srv.factory()
            if not self.alive:  # the client left while the agent was being built
                self.finish(agent)
                return
            info = SessionInfo(
                session_id=self.sid,
                sample_rate=self.srv.sample_rate,
                frame_ms=self.srv.frame_ms,
                scenario=None,
                clock="real",
            )
            self.post(agent.start(info, self.now()), self.client_samples)
        except Exception as exc:
            self.post_fatal(f"the agent failed to start: {type(exc).__name__}: {exc}")
            return
        while True:
            job = self.jobs.get()
            kind = job[0]
            if kind == "finish":
                self.finish(agent)
                return
            try:
                outputs = self.call(agent, job)
            except Exception as exc:
                self.post_error(f"the agent raised in {kind}: {type(exc).__name__}: {exc}")
                continue
            self.post(outputs, job[-1] if kind == "frame" else self.client_samples)

    def start_inline(self) -> None:
        """``agent_thread=False``: build and start the agent on the loop thread."""
        try:
            self.agent = self.srv.factory()
            info = SessionInfo(
                session_id=self.sid,
                sample_rate=self.srv.sample_rate,
                frame_ms=self.srv.frame_ms,
                scenario=None,
                clock="real",
            )
            outputs = self.agent.start(info, self.now())
        except Exception as exc:
            self.agent = None
            self.error(
                f"the agent failed to start: {type(exc).__name__}: {exc}",
                kind="server_error",
                code="agent_error",
            )
            self.closing = True
            self.loop.create_task(self._close_after_flush(1011, "agent failed"))
            return
        if outputs:
            self.apply(list(outputs), self.client_samples)

    def run_inline(self) -> None:
        """``agent_thread=False``: run the queued calls now, on the loop thread, one at a time
        (a call's outputs may queue further calls: they run in this same pass)."""
        assert self.inline is not None
        self.inline_busy = True
        try:
            while self.inline:
                job = self.inline.popleft()
                if self.agent is None:
                    continue
                if job[0] == "finish":
                    agent, self.agent = self.agent, None
                    self.finish(agent)
                    continue
                try:
                    outputs = self.call(self.agent, job)
                except Exception as exc:
                    self.error(
                        f"the agent raised in {job[0]}: {type(exc).__name__}: {exc}",
                        kind="server_error",
                        code="agent_error",
                    )
                    continue
                if outputs:
                    self.apply(list(outputs), job[-1] if job[0] == "frame" else self.client_samples)
        finally:
            self.inline_busy = False

    def call(self, agent: Any, job: tuple[Any, ...]) -> list[AgentOutput] | None:
        kind, now = job[0], self.now()
        if kind == "frame":
            hop = self.hop_tags.get(job[-1]) if self.hop_tags else None
            if hop is None:
                return agent.push_audio(job[1], now)
            hop["agent_start"] = time.monotonic_ns()
            outputs = agent.push_audio(job[1], now)
            hop["agent_end"] = time.monotonic_ns()
            if not outputs:
                self.hop_tags.pop(job[-1], None)  # nothing to stamp further
            return outputs
        if kind == "playback":
            return agent.on_playback(job[1], now)
        if kind == "tool":
            return agent.on_tool_result(job[1], job[2], job[3], now)
        if kind == "hook":
            hook = getattr(agent, job[1], None)
            outputs = hook(*job[2], now) if callable(hook) else []
            if job[1] == "on_response_request" and not outputs:
                self._threadsafe(self.empty_response)
            return outputs
        return []

    def finish(self, agent: Any) -> None:
        try:
            end = agent.finish(self.now())
        except Exception as exc:
            end = SessionEnd(info={"finish_error": f"{type(exc).__name__}: {exc}"})
        if self.srv.on_end is not None:
            with contextlib.suppress(Exception):
                self.srv.on_end(self.sid, end)

    def post(self, outputs: list[AgentOutput] | None, samples: int) -> None:
        if outputs:
            self._threadsafe(self.apply, list(outputs), samples)

    def post_error(self, message: str) -> None:
        self._threadsafe(self.error, message, kind="server_error", code="agent_error")

    def post_fatal(self, message: str) -> None:
        def fatal() -> None:
            self.error(message, kind="server_error", code="agent_error")
            self.closing = True
            self.loop.create_task(self._close_after_flush(1011, "agent failed"))

        self._threadsafe(fatal)

    def stop_worker(self) -> None:
        """End the agent's session after the client left: audio frames still queued are
        dropped (nobody hears the answer any more), but every event the client sent and the
        server acknowledged (tool outputs, items, truncations, hooks) still reaches the agent,
        in order, before ``finish``: a slow agent must not lose what a fast client said."""
        if self.inline is not None:
            if self.agent is not None:
                if not self.inline_busy:
                    said = [job for job in self.inline if job[0] != "frame"]
                    self.inline.clear()
                    self.inline.extend(said)
                self.submit(("finish",))
            return
        kept = []
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            if job[0] != "frame":
                kept.append(job)
        for job in [*kept, ("finish",)]:
            with contextlib.suppress(queue.Full):
                self.jobs.put_nowait(job)

    # ------------------------------------------------------------------ main
    async def run(self) -> None:
        worker_done = asyncio.Event()
        if self.inline is None:

            def work() -> None:
                try:
                    self.work()
                finally:  # joined by an event, not a pool thread that waits
                    self._threadsafe(worker_done.set)

            self.worker = threading.Thread(target=work, name=f"agent-{self.sid}", daemon=True)
            self.worker.start()
        self.emit(
            {
                "type": "session.created",
                "session": server_session(self.dialect, self.settings, self.sid, MODEL_NAME),
            }
        )
        tasks = [asyncio.create_task(self.sender()), asyncio.create_task(self.ticker())]
        if self.inline is not None:
            self.start_inline()
        try:
            async for message in self.ws:
                self.receive(message)
        except Exception:
            pass  # a dropped connection ends the session like a close
        finally:
            self.alive = False
            self.stop_worker()
            for task in tasks:
                task.cancel()
            if self.worker is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(worker_done.wait(), 10.0)

    async def ticker(self) -> None:
        """Idle ticks for the agent's clock and the playback completion estimate."""
        period = self.srv.frame_ms / 1000
        silent = np.zeros(self.frame, np.int16)
        while self.alive:
            await asyncio.sleep(period)
            now = self.now()
            if now - self.last_input_ns >= self.srv.idle_tick_ms * 1e6 and self.jobs.empty():
                self.submit(("frame", silent, self.client_samples), frame=True)
            for resp in self.responses.values():
                if (
                    resp.done
                    and not resp.cut
                    and not resp.completed_reported
                    and resp.first_audio_ns is not None
                    and now
                    >= resp.first_audio_ns + (resp.sent_ms + self.srv.playback_grace_ms) * 1e6
                ):
                    resp.completed_reported = True
                    report = PlaybackReport(resp.rid, "completed", resp.sent_ms)
                    self.submit(("playback", report))

    # ------------------------------------------------------------------ client events
    def receive(self, message: str | bytes) -> None:
        self.t_recv = time.monotonic_ns()
        if isinstance(message, bytes):
            self.error("binary frames are not part of the Realtime protocol; send JSON text")
            return
        if len(message.encode("utf-8", "surrogatepass")) > self.srv.max_message_bytes:
            self.error(
                f"message larger than {self.srv.max_message_bytes} bytes", code="message_too_large"
            )
            return
        try:
            event = json.loads(message)
        except json.JSONDecodeError as exc:
            self.error(f"malformed JSON: {exc.msg} (column {exc.colno})", code="invalid_json")
            return
        except RecursionError:  # "[[[[..." thousands deep: refused like any bad JSON
            self.error("malformed JSON: nested too deeply", code="invalid_json")
            return
        if not isinstance(event, dict):
            self.error("a client event must be a JSON object", code="invalid_event")
            return
        etype = event.get("type")
        eid = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        if not isinstance(etype, str):
            self.error("missing string field 'type'", code="invalid_event", param="type")
            return
        handler = _CLIENT_HANDLERS.get(etype)
        if handler is None:
            known = etype in CLIENT_EVENT_TYPES
            msg = (
                f"{etype} is not supported by this server"
                if known
                else f"unknown client event type {etype!r}"
            )
            self.error(msg, code="unsupported_event" if known else "unknown_event", event_id=eid)
            return
        if self.srv.trace is not None:
            self.srv.trace("client", event)
        try:
            handler(self, event)
        except _Invalid as exc:
            self.error(exc.message, code="invalid_value", param=exc.param, event_id=eid)

    def on_session_update(self, ev: dict[str, Any]) -> None:
        session = _field(ev, "session", dict)
        settings, problems = read_session(session)
        if problems:
            raise _Invalid("; ".join(problems), "session")
        self.settings.update(settings)
        self.submit(("hook", "configure", (dict(self.settings),)))
        self.emit(
            {
                "type": "session.updated",
                "session": server_session(self.dialect, self.settings, self.sid, MODEL_NAME),
            }
        )

    def on_append(self, ev: dict[str, Any]) -> None:
        audio = _field(ev, "audio", str)
        try:
            pcm = b64_to_pcm16(audio)
        except ValueError as exc:
            raise _Invalid(str(exc), "audio") from None
        eid = ev.get("event_id")
        self.feed(pcm, eid if isinstance(eid, str) and eid.startswith(HOP_PREFIX) else None)

    def feed(self, pcm: np.ndarray, traced: str | None = None) -> None:
        """The client's audio (24 kHz int16), from appends or a media track, to the agent in
        ``frame_ms`` frames; ``traced``: the hop-trace id of the append that carried it."""
        self.last_input_ns = self.now()
        self.uncommitted += pcm.size
        eid = traced
        x = self.in_rs.process_pcm16(pcm)
        if not self.aligned and x.size:
            # lead the stream with silence so that frames end where the client's appends end:
            # otherwise the resamplers' look-ahead (~2 ms: the client's and ours) holds every
            # frame until the next append (a frame of added latency); once per session
            self.aligned = True
            lead = -x.size % self.frame
            if lead:
                x = np.concatenate([np.zeros(lead, np.int16), x])
        self.inbuf = np.concatenate([self.inbuf, x]) if self.inbuf.size else x
        while self.inbuf.size >= self.frame:
            frame, self.inbuf = self.inbuf[: self.frame], self.inbuf[self.frame :]
            self.client_samples += self.frame
            if traced:  # hop trace: stamps of the frame this append completes
                self.hop_tags[self.client_samples] = {"id": eid, "recv": self.t_recv}
            self.submit(("frame", frame, self.client_samples), frame=True)

    def on_commit(self, ev: dict[str, Any]) -> None:
        held_ms = 1000.0 * self.uncommitted / PROTOCOL_RATE
        if held_ms < MIN_COMMIT_MS:
            self.error(
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{MIN_COMMIT_MS:.0f}ms of audio, but buffer only has {held_ms:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
                event_id=ev.get("event_id") if isinstance(ev.get("event_id"), str) else None,
            )
            return
        self.uncommitted = 0
        item = self.user_item or self.new_id("item")
        self.user_item = None
        self.last_user_item = item
        self.utterance_items[item] = item  # the agent names the committed turn by its item
        self.commit_user_item(item)
        self.submit(("hook", "on_commit", (item,)))

    def on_clear_input(self, ev: dict[str, Any]) -> None:
        self.inbuf = np.zeros(0, np.int16)
        self.uncommitted = 0
        self.emit({"type": "input_audio_buffer.cleared"})

    def on_truncate(self, ev: dict[str, Any]) -> None:
        item_id = _field(ev, "item_id", str)
        content_index = _field(ev, "content_index", int)
        end_ms = _field(ev, "audio_end_ms", int)
        if content_index < 0 or end_ms < 0:
            raise _Invalid("content_index and audio_end_ms must be >= 0", "audio_end_ms")
        rid = self.item_to_response.get(item_id)
        resp = self.responses.get(rid) if rid else None
        if resp is None or resp.item_id != item_id:
            raise _Invalid(f"no assistant audio item {item_id!r} in this session", "item_id")
        if end_ms > resp.sent_ms + self.srv.frame_ms:
            raise _Invalid(
                f"audio_end_ms {end_ms} is longer than the item's audio ({resp.sent_ms:.0f} ms)",
                "audio_end_ms",
            )
        resp.cut = True
        self.submit(("playback", PlaybackReport(resp.rid, "interrupted", float(end_ms))))
        self.emit(
            {
                "type": "conversation.item.truncated",
                "item_id": item_id,
                "content_index": content_index,
                "audio_end_ms": end_ms,
            }
        )

    def on_item_create(self, ev: dict[str, Any]) -> None:
        item = _field(ev, "item", dict)
        itype = item.get("type")
        if itype not in ("message", "function_call", "function_call_output"):
            raise _Invalid(f"item.type {itype!r} is not supported", "item.type")
        item_id = item.get("id") if isinstance(item.get("id"), str) else self.new_id("item")
        if itype == "function_call_output":
            call_id = item.get("call_id")
            output = item.get("output")
            if not isinstance(call_id, str) or not isinstance(output, str):
                raise _Invalid("a function_call_output needs string call_id and output", "item")
            if call_id not in self.calls:
                raise _Invalid(f"no function call {call_id!r} in this session", "item.call_id")
            result, error = _tool_output(output)
            self.submit(("tool", call_id, result, error))
            ack: dict[str, Any] = {
                "id": item_id,
                "type": "function_call_output",
                "call_id": call_id,
                "output": output,
                "object": "realtime.item",
                "status": "completed",
            }
        else:
            ack = {
                k: v
                for k, v in item.items()
                if k in ("type", "role", "content", "name", "call_id", "arguments")
            }
            ack.update(id=item_id, object="realtime.item", status="completed")
            self.submit(("hook", "on_item", (dict(item),)))
        self.item_added(ack)

    def on_response_create(self, ev: dict[str, Any]) -> None:
        if "response" in ev and not isinstance(ev["response"], dict | None):
            raise _Invalid("response must be an object", "response")
        self.submit(("hook", "on_response_request", ()))

    def on_response_cancel(self, ev: dict[str, Any]) -> None:
        rid = ev.get("response_id")
        if rid is not None and not isinstance(rid, str):
            raise _Invalid("response_id must be a string", "response_id")
        rid = rid or self.open_rid
        resp = self.responses.get(rid) if rid else None
        if resp is None or resp.done:
            raise _Invalid("there is no active response to cancel", "response_id")
        resp.cut = True
        self.close_response(resp, "cancelled", "client_cancelled")
        self.submit(("hook", "on_response_cancel", (resp.rid,)))

    def on_clear_output(self, ev: dict[str, Any]) -> None:
        rid = self.open_rid or self.last_audio_rid
        resp = self.responses.get(rid) if rid else None
        if resp is None or resp.cut or resp.completed_reported:
            # nothing left to clear: no audio yet, already cut, or played out to the end
            raise _Invalid("there is no response audio to clear", None)
        self.clear(resp, "client_cancelled")
        self.submit(("hook", "on_response_cancel", (resp.rid,)))


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def _field(ev: dict[str, Any], key: str, kind: type) -> Any:
    value = ev.get(key)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        name = {dict: "an object", str: "a string", int: "an integer"}.get(kind, kind.__name__)
        raise _Invalid(f"{ev.get('type')}: field '{key}' must be {name}", key)
    return value


def _tool_output(output: str) -> tuple[Any, str | None]:
    """A function_call_output's text -> (result, error)."""
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return output, None
    if isinstance(value, dict) and set(value) == {"error"} and value["error"]:
        return None, str(value["error"])
    return value, None


_CLIENT_HANDLERS: dict[str, Callable[[_Connection, dict[str, Any]], None]] = {
    "session.update": _Connection.on_session_update,
    "input_audio_buffer.append": _Connection.on_append,
    "input_audio_buffer.commit": _Connection.on_commit,
    "input_audio_buffer.clear": _Connection.on_clear_input,
    "conversation.item.truncate": _Connection.on_truncate,
    "conversation.item.create": _Connection.on_item_create,
    "response.create": _Connection.on_response_create,
    "response.cancel": _Connection.on_response_cancel,
    "output_audio_buffer.clear": _Connection.on_clear_output,
}


class RealtimeServer(ServesInThread):
    """A Realtime-protocol WebSocket server around an agent factory (module docstring)."""

    _thread_name = "voxassay-realtime-server"

    def __init__(
        self,
        factory: Callable[[], DuplexAgent],
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token_env: str | None = None,
        protocol: ProtocolChoice = "ga",
        sample_rate: int = 16_000,
        frame_ms: int = 20,
        max_message_bytes: int = 1024 * 1024,
        max_queued_frames: int = 250,
        max_outgoing: int = 4000,
        send_timeout_s: float = 5.0,
        idle_tick_ms: float = 200.0,
        playback_grace_ms: float = 250.0,
        on_end: Callable[[str, SessionEnd], None] | None = None,
        trace: Callable[[str, dict[str, Any]], None] | None = None,
        agent_thread: bool = True,
        max_connections: int = 16,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        if protocol not in ("ga", "beta", "auto"):
            raise ValueError(f"protocol must be ga, beta or auto, not {protocol!r}")
        if frame_ms not in (10, 20):
            raise ValueError(f"frame_ms must be 10 or 20, got {frame_ms}")
        self.factory = factory
        self.host = host
        self.port = port
        self.protocol = protocol
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.max_message_bytes = max_message_bytes
        self.max_queued_frames = max_queued_frames
        self.max_outgoing = max_outgoing
        self.send_timeout_s = send_timeout_s
        self.idle_tick_ms = idle_tick_ms
        self.playback_grace_ms = playback_grace_ms
        self.on_end = on_end
        self.trace = trace
        self.agent_thread = agent_thread
        self.max_connections = max_connections
        self.refused = 0  # handshakes refused at the connection cap
        self._token: str | None = None
        if token_env:
            token = os.environ.get(token_env)
            if not token:
                raise ValueError(
                    f"token_env={token_env}: that environment variable is not set or empty; "
                    "set it, or serve without a token (loopback only)"
                )
            self._token = token
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self.connections: set[_Connection] = set()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    # ------------------------------------------------------------------ lifecycle
    def _process_request(self, connection: Any, request: Any) -> Any:
        if self._token is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode()):
                return connection.respond(
                    HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token\n"
                )
        if len(self.connections) >= self.max_connections:
            self.refused += 1
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the server is at its limit of {self.max_connections} sessions; "
                "retry when one ends\n",
            )
        return None

    async def start(self) -> str:
        """Bind and start accepting; returns the URL (with the real port when ``port=0``)."""
        try:
            from websockets.asyncio.server import serve
        except ImportError as exc:
            from voxassay.core.errors import BackendUnavailable

            raise BackendUnavailable(
                "the Realtime server needs the websockets package: "
                "pip install 'voxassay[live]' (or pip install websockets)"
            ) from exc
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._process_request,
            max_size=4 * self.max_message_bytes,
            compression=None,
            ping_interval=20,
            ping_timeout=20,
            close_timeout=2,
        )
        sockets = list(self._server.sockets)
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self.url

    async def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        """Start, call ``ready(url)``, and serve until ``stop``."""
        url = await self.start()
        if ready is not None:
            ready(url)
        assert self._stopped is not None
        await self._stopped.wait()
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
        for conn in list(self.connections):
            conn.stop_worker()

    def kill(self) -> None:
        """Drop every connection without a close frame and stop (a crash, for tests)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():

            def abort() -> None:
                for conn in list(self.connections):
                    conn.ws.transport.abort()

            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(abort)
        self.stop()

    async def _handle(self, ws: Any) -> None:
        dialect: Dialect
        if self.protocol == "auto":
            beta = BETA_HEADER[1] in (ws.request.headers.get(BETA_HEADER[0]) or "")
            dialect = "beta" if beta else "ga"
        else:
            dialect = self.protocol
        conn = _Connection(self, ws, dialect)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)


def serve_agent(
    factory: Callable[[], DuplexAgent],
    host: str = "127.0.0.1",
    port: int = 8765,
    token_env: str | None = None,
    protocol: ProtocolChoice = "ga",
    *,
    ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """Serve ``factory``'s agents until interrupted (Ctrl-C); ``ready(url)`` once bound.

    ``options`` go to ``RealtimeServer`` (frame_ms, max_message_bytes, on_end, ...).
    """
    server = RealtimeServer(
        factory, host=host, port=port, token_env=token_env, protocol=protocol, **options
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve_forever(ready))
