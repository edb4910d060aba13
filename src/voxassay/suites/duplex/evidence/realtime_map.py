"""Realtime events mapped onto ledger events (``LEDGER_MAPPING``): ids kept, responses, audio, transcripts, tool calls, truncations and buffer events translated, everything else kept as ``realtime.<name>``; secrets redacted and audio summarised."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.realtime import (
    CLIENT_EVENT_TYPES,
    CLIENT_PRODUCER,
    PASS_PREFIX,
    SERVER_EVENT_TYPES,
    SERVER_PRODUCER,
    SUMMARISED_TYPES,
)
from voxassay.suites.duplex.evidence.realtime_records import (
    PCM16_24K,
    AudioFormat,
    Record,
    _d,
    _err,
    _n,
    _s,
    _warn,
    compact,
    json_or_text,
    output_format,
)

__all__ = []


class Mapper:
    """Turns records (in log order) into ledger events, keeping per-session state."""

    def __init__(
        self,
        session_id: str,
        file: str,
        client_truncates: set[str],
        buffered_responses: set[str],
    ) -> None:
        self.session_id = session_id
        self.file = file
        self.client_truncates = client_truncates
        self.buffered_responses = buffered_responses
        self.events: list[Event] = []
        self.problems: list[Problem] = []
        self.seq: Counter[str] = Counter()
        self.fmt: AudioFormat | None = PCM16_24K
        self.fmt_source = "default (pcm16 24 kHz)"
        self.item_response: dict[str, str] = {}
        self.item_name: dict[str, str] = {}
        self.call_response: dict[str, str] = {}
        self.requested: set[str] = set()
        self.partial: dict[str, str] = {}
        self.audio_ms: dict[str, float] = defaultdict(float)
        self.audio_bytes: dict[str, int] = defaultdict(int)
        self.transcript: dict[str, str] = defaultdict(str)
        self.active: list[str] = []
        self.speech_during: dict[str, str] = {}
        self.buffer_start: dict[str, int] = {}
        self.unknown: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.summarised: Counter[str] = Counter()
        self.input_audio_bytes = 0
        self.deltas_without_payload = 0
        self.handlers: dict[str, Callable[[Record], None]] = {
            "session.created": self._session_created,
            "session.updated": self._session_config,
            "session.update": self._session_config,
            "error": self._error,
            "conversation.item.input_audio_transcription.failed": self._asr_failed,
            "input_audio_buffer.speech_started": self._speech_started,
            "input_audio_buffer.speech_stopped": self._speech_stopped,
            "conversation.item.input_audio_transcription.delta": self._asr_partial,
            "conversation.item.input_audio_transcription.completed": self._asr_final,
            "response.created": self._response_created,
            "response.done": self._response_done,
            "response.output_item.added": self._output_item,
            "response.output_item.done": self._output_item,
            "response.output_audio.delta": self._audio_delta,
            "response.output_audio_transcript.delta": self._transcript_delta,
            "response.output_audio_transcript.done": self._transcript_done,
            "response.function_call_arguments.done": self._function_args_done,
            "response.mcp_call_arguments.done": self._mcp_args_done,
            "response.mcp_call.completed": self._mcp_result,
            "response.mcp_call.failed": self._mcp_result,
            "conversation.item.create": self._item_create,
            "response.cancel": self._response_cancel,
            "conversation.item.truncate": self._truncate,
            "conversation.item.truncated": self._truncated,
            "output_audio_buffer.started": self._buffer_event,
            "output_audio_buffer.stopped": self._buffer_event,
            "output_audio_buffer.cleared": self._buffer_event,
            "input_audio_buffer.append": self._append,
        }

    # ------------------------------------------------------------------ plumbing

    def run(self, rec: Record) -> None:
        mark = len(self.events)
        try:
            handler = self.handlers.get(rec.kind)
            if handler is not None:
                handler(rec)
            elif rec.kind in SUMMARISED_TYPES:
                self.summarised[rec.kind] += 1
            elif rec.kind in CLIENT_EVENT_TYPES or rec.kind in SERVER_EVENT_TYPES:
                self.keep(rec)
            else:
                self.unknown[rec.rt_type] += 1
                self.problems.append(
                    _warn(
                        self.file,
                        rec.line,
                        f"unknown Realtime event type {rec.rt_type!r}: kept as "
                        f"{PASS_PREFIX}{rec.rt_type}",
                    )
                )
                self.keep(rec)
        except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
            del self.events[mark:]
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.problems.append(_err(self.file, rec.line, f"{rec.rt_type}: not mapped: {detail}"))

    def emit(
        self,
        rec: Record,
        event_type: str,
        data: dict[str, Any] | None = None,
        suffix: str = "",
        **fields: Any,
    ) -> Event:
        producer = CLIENT_PRODUCER if rec.side == "client" else SERVER_PRODUCER
        origin: dict[str, Any] = {"type": rec.rt_type, "line": rec.line}
        eid = _s(rec.event.get("event_id"))
        if eid:
            origin["event_id"] = eid
        payload = {**(data or {}), "realtime": origin}
        response_id = fields.get("response_id")
        if response_id and "trace_id" not in fields:
            fields["trace_id"] = response_id
        wall = dt.datetime.fromtimestamp(rec.ns / 1e9, tz=dt.UTC) if rec.wall else None
        event = Event.new(
            event_type,
            event_id=f"{self.session_id}:L{rec.line}{suffix}",
            session_id=self.session_id,
            producer=producer,
            monotonic_ns=rec.ns,
            seq=self.seq[producer] + 1,
            wall_time=wall,
            data=payload,
            **{k: v for k, v in fields.items() if v is not None},
        )
        self.seq[producer] += 1
        self.events.append(event)
        return event

    def keep(self, rec: Record) -> None:
        """A recognised event without ledger equivalent (or an unknown one): realtime.<name>."""
        self.kept[rec.kind] += 1
        ev = rec.event
        body = {k: v for k, v in ev.items() if k not in ("type", "event_id")}
        rid = _s(ev.get("response_id")) or _s(_d(ev.get("response")).get("id"))
        item_id = _s(ev.get("item_id")) or _s(_d(ev.get("item")).get("id"))
        if rid is None and item_id:
            rid = self.item_response.get(item_id)
        self.emit(rec, PASS_PREFIX + rec.kind, compact(body), response_id=rid)

    def _response_of(self, item_id: str | None) -> str | None:
        return self.item_response.get(item_id) if item_id else None

    # ------------------------------------------------------------------ session

    def _apply_format(self, rec: Record, session: dict[str, Any]) -> None:
        named, fmt, name = output_format(session)
        if not named:
            return
        if fmt is None:
            self.problems.append(
                _warn(
                    self.file,
                    rec.line,
                    f"unknown output audio format {name!r}: tts.chunk durations left out",
                )
            )
        self.fmt = fmt
        self.fmt_source = f"{rec.rt_type} on line {rec.line}"

    def _session_created(self, rec: Record) -> None:
        session = _d(rec.event.get("session"))
        self._apply_format(rec, session)
        turn = _d(_d(_d(session.get("audio")).get("input")).get("turn_detection")) or _d(
            session.get("turn_detection")
        )
        data = {
            "realtime_session_id": _s(session.get("id")),
            "model": _s(session.get("model")),
            "output_audio": self.fmt.describe() if self.fmt else None,
            "turn_detection": _s(turn.get("type")),
            "session": compact(session),
        }
        self.emit(rec, "session.connected", {k: v for k, v in data.items() if v is not None})

    def _session_config(self, rec: Record) -> None:
        self._apply_format(rec, _d(rec.event.get("session")))
        self.keep(rec)

    def _error(self, rec: Record) -> None:
        error = _d(rec.event.get("error"))
        reason = _s(error.get("code")) or _s(error.get("type")) or "error"
        data = {k: error[k] for k in ("type", "code", "message", "param") if error.get(k)}
        if _s(error.get("event_id")):
            data["client_event_id"] = error["event_id"]
        self.emit(rec, "session.error", data, reason=reason)

    def _asr_failed(self, rec: Record) -> None:
        error = _d(rec.event.get("error"))
        data = {"scope": "input_audio_transcription", "error": compact(error)}
        reason = _s(error.get("code")) or _s(error.get("type")) or "transcription_failed"
        item = _s(rec.event.get("item_id"))
        self.emit(rec, "session.error", data, reason=reason, utterance_id=item)

    def _append(self, rec: Record) -> None:
        self.summarised[rec.kind] += 1
        self.input_audio_bytes += rec.payload_bytes or 0

    # ------------------------------------------------------------------ user side

    def _speech_started(self, rec: Record) -> None:
        item = _s(rec.event.get("item_id"))
        for rid in self.active:
            self.speech_during.setdefault(rid, item or "")
        data = {"audio_start_ms": _n(rec.event.get("audio_start_ms")), "item_id": item}
        self.emit(rec, "vad.speech_started", _clean(data), utterance_id=item)

    def _speech_stopped(self, rec: Record) -> None:
        item = _s(rec.event.get("item_id"))
        data = {"audio_end_ms": _n(rec.event.get("audio_end_ms")), "item_id": item}
        self.emit(rec, "vad.speech_stopped", _clean(data), utterance_id=item)

    def _asr_partial(self, rec: Record) -> None:
        item = _s(rec.event.get("item_id"))
        delta = rec.event.get("delta")
        delta = delta if isinstance(delta, str) else ""
        key = item or ""
        self.partial[key] = self.partial.get(key, "") + delta
        data = {
            "delta": delta,
            "text": self.partial[key],
            "content_index": rec.event.get("content_index"),
        }
        self.emit(rec, "asr.partial", _clean(data), utterance_id=item)

    def _asr_final(self, rec: Record) -> None:
        item = _s(rec.event.get("item_id"))
        text = rec.event.get("transcript")
        data = {
            "text": text if isinstance(text, str) else "",
            "content_index": rec.event.get("content_index"),
        }
        self.emit(rec, "asr.final", _clean(data), utterance_id=item)

    # ------------------------------------------------------------------ responses

    def _response_created(self, rec: Record) -> None:
        resp = _d(rec.event.get("response"))
        rid = _s(resp.get("id"))
        if rid is None:
            raise ValueError("response.created without response.id")
        self.active.append(rid)
        modalities = resp.get("output_modalities", resp.get("modalities"))
        data = {
            "status": resp.get("status"),
            "conversation_id": resp.get("conversation_id"),
            "metadata": resp.get("metadata"),
            "output_modalities": modalities,
        }
        self.emit(rec, "response.created", _clean(data), response_id=rid)

    def _response_done(self, rec: Record) -> None:
        resp = _d(rec.event.get("response"))
        rid = _s(resp.get("id"))
        if rid is None:
            raise ValueError("response.done without response.id")
        if rid in self.active:
            self.active.remove(rid)
        status = _s(resp.get("status"))
        details = _d(resp.get("status_details"))
        reason = _s(details.get("reason"))
        outputs = [o for o in resp.get("output") or [] if isinstance(o, dict)]
        items = []
        transcript_parts = []
        audio_ms = 0.0
        for out in outputs:
            oid = _s(out.get("id"))
            if oid:
                self.item_response.setdefault(oid, rid)
                audio_ms += self.audio_ms.get(oid, 0.0)
            items.append(
                _clean({"id": oid, "type": out.get("type"), "call_id": out.get("call_id")})
            )
            heard = _content_transcript(out) or (self.transcript.get(oid, "") if oid else "")
            if heard:
                transcript_parts.append(heard)
        data = {
            "status": status,
            "output": items,
            "transcript": " ".join(transcript_parts) or None,
            "audio_ms": round(audio_ms, 3) if audio_ms else None,
            "usage": compact(resp.get("usage")) if resp.get("usage") else None,
            "error": compact(details.get("error")) if details.get("error") else None,
        }
        self.emit(rec, "response.done", _clean(data), reason=reason, response_id=rid)
        if status == "cancelled":
            cancel = {"status_details": compact(details)} if details else {}
            self.emit(rec, "response.cancelled", cancel, "c", reason=reason, response_id=rid)

    def _output_item(self, rec: Record) -> None:
        rid = _s(rec.event.get("response_id"))
        item = _d(rec.event.get("item"))
        iid = _s(item.get("id"))
        if iid and rid:
            self.item_response.setdefault(iid, rid)
        if iid and _s(item.get("name")):
            self.item_name[iid] = item["name"]
        if _s(item.get("call_id")) and _s(item.get("name")):
            self.item_name[item["call_id"]] = item["name"]
        self.keep(rec)

    def _audio_delta(self, rec: Record) -> None:
        ev = rec.event
        rid = _s(ev.get("response_id"))
        iid = _s(ev.get("item_id"))
        if iid and rid:
            self.item_response.setdefault(iid, rid)
        size = rec.payload_bytes
        key = f"{iid}:{ev.get('content_index', 0)}"
        data: dict[str, Any] = {
            "item_id": iid,
            "output_index": ev.get("output_index"),
            "content_index": ev.get("content_index"),
        }
        if size is None:
            self.deltas_without_payload += 1
            data["payload"] = "absent or not base64"
        else:
            data["bytes"] = size
            if self.fmt is not None:
                ms = self.fmt.ms(size)
                data["duration_ms"] = round(ms, 3)
                data["audio_start_ms"] = round(self.audio_ms[key], 3)
                data.update(self.fmt.describe())
                self.audio_ms[key] += ms
                if iid:
                    self.audio_ms[iid] += ms
            self.audio_bytes[key] += size
        self.emit(rec, "tts.chunk", _clean(data), response_id=rid)

    def _transcript_delta(self, rec: Record) -> None:
        self.summarised[rec.kind] += 1
        iid = _s(rec.event.get("item_id"))
        delta = rec.event.get("delta")
        if iid and isinstance(delta, str):
            self.transcript[iid] += delta

    def _transcript_done(self, rec: Record) -> None:
        iid = _s(rec.event.get("item_id"))
        text = rec.event.get("transcript")
        if iid and isinstance(text, str):
            self.transcript[iid] = text
        self.keep(rec)

    # ------------------------------------------------------------------ tools

    def _function_args_done(self, rec: Record) -> None:
        ev = rec.event
        call = _s(ev.get("call_id"))
        if call is None:
            raise ValueError("function call arguments without call_id")
        rid = _s(ev.get("response_id"))
        iid = _s(ev.get("item_id"))
        if iid and rid:
            self.item_response.setdefault(iid, rid)
        name = _s(ev.get("name")) or self.item_name.get(call) or self.item_name.get(iid or "")
        args, parsed = json_or_text(ev.get("arguments"))
        data = {"call_id": call, "name": name, "item_id": iid, "arguments": args}
        if not parsed:
            data["arguments_not_json"] = True
        self.requested.add(call)
        if rid:
            self.call_response[call] = rid
        self.emit(rec, "tool.requested", _clean(data), response_id=rid, task_id=call)

    def _mcp_args_done(self, rec: Record) -> None:
        ev = rec.event
        iid = _s(ev.get("item_id"))
        if iid is None:
            raise ValueError("MCP call arguments without item_id")
        rid = _s(ev.get("response_id"))
        if rid:
            self.item_response.setdefault(iid, rid)
            self.call_response[iid] = rid
        args, _ = json_or_text(ev.get("arguments"))
        data = {"call_id": iid, "kind": "mcp", "name": self.item_name.get(iid), "arguments": args}
        self.requested.add(iid)
        self.emit(rec, "tool.requested", _clean(data), response_id=rid, task_id=iid)

    def _mcp_result(self, rec: Record) -> None:
        iid = _s(rec.event.get("item_id"))
        if iid is None:
            raise ValueError("MCP call result without item_id")
        etype = "tool.completed" if rec.kind.endswith("completed") else "tool.failed"
        rid = self.call_response.get(iid)
        data = {"call_id": iid, "kind": "mcp"}
        self.emit(rec, etype, data, response_id=rid, task_id=iid)

    def _item_create(self, rec: Record) -> None:
        item = _d(rec.event.get("item"))
        if item.get("type") != "function_call_output":
            self.keep(rec)
            return
        call = _s(item.get("call_id"))
        if call is None:
            raise ValueError("function_call_output without call_id")
        if call not in self.requested:
            self.problems.append(
                _warn(
                    self.file,
                    rec.line,
                    f"function_call_output for call {call!r} that no earlier "
                    "response.function_call_arguments.done requested",
                )
            )
        output, parsed = json_or_text(item.get("output"))
        data = {"call_id": call, "item_id": _s(item.get("id")), "output": compact(output)}
        if not parsed:
            data["output_not_json"] = True
        rid = self.call_response.get(call)
        self.emit(rec, "tool.completed", _clean(data), response_id=rid, task_id=call)

    # ------------------------------------------------------------------ interruption

    def _response_cancel(self, rec: Record) -> None:
        named = _s(rec.event.get("response_id"))
        rid = named or (self.active[-1] if self.active else None)
        speech = self.speech_during.get(rid or "")
        reason = "barge_in" if speech is not None else "client_cancel"
        data = {
            "action": "interrupt",
            "source": "response.cancel",
            "response_named": named is not None,
            "active_response": rid is not None and rid in self.active,
        }
        self.emit(
            rec,
            "turn.decision",
            data,
            reason=reason,
            response_id=rid,
            utterance_id=speech or None,
        )

    def _interrupted(self, rec: Record) -> None:
        ev = rec.event
        iid = _s(ev.get("item_id"))
        rid = self._response_of(iid)
        end = _n(ev.get("audio_end_ms"))
        played = end if end is not None and end >= 0 else None
        if end is not None and played is None:
            self.problems.append(
                _warn(self.file, rec.line, f"negative audio_end_ms {end:g}: played_until_ms unset")
            )
        generated = self.audio_ms.get(iid) if iid else None
        data = {
            "item_id": iid,
            "content_index": ev.get("content_index"),
            "audio_end_ms": end,
            "generated_ms": round(generated, 3) if generated else None,
        }
        self.emit(
            rec,
            "playback.interrupted",
            _clean(data),
            reason="truncate",
            played_until_ms=played,
            response_id=rid,
            playback_id=rid if rid in self.buffered_responses else None,
        )

    def _truncate(self, rec: Record) -> None:
        self._interrupted(rec)

    def _truncated(self, rec: Record) -> None:
        iid = _s(rec.event.get("item_id"))
        if iid and iid in self.client_truncates:
            self.keep(rec)
        else:
            self._interrupted(rec)

    def _buffer_event(self, rec: Record) -> None:
        rid = _s(rec.event.get("response_id"))
        data: dict[str, Any] = {}
        if rec.kind == "output_audio_buffer.started":
            if rid:
                self.buffer_start.setdefault(rid, rec.ns)
            self.emit(rec, "playback.started", data, response_id=rid, playback_id=rid)
            return
        start = self.buffer_start.get(rid or "")
        if start is not None:
            data["buffer_elapsed_ms"] = round((rec.ns - start) / 1e6, 3)
        if rec.kind == "output_audio_buffer.stopped":
            etype, reason = "playback.stopped", "drained"
        else:
            etype, reason = "playback.interrupted", "cleared"
        self.emit(rec, etype, data, reason=reason, response_id=rid, playback_id=rid)


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _content_transcript(item: dict[str, Any]) -> str:
    parts = []
    for part in item.get("content") or []:
        if isinstance(part, dict):
            text = part.get("transcript") or part.get("text")
            if isinstance(text, str) and text:
                parts.append(text)
    return " ".join(parts)
