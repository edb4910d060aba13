"""Import the event log of an OpenAI Realtime session into a voxeval ledger.

Input (detected, not declared)
------------------------------
* **JSONL**, one record per line, or a **JSON array** of the same records (line numbers are
  those of the element's first character).
* A record is either a raw Realtime event with a timestamp beside its ``type``
  (``{"type": "response.created", ..., "ts": 1718000000.125}``), or a wrapper
  ``{"direction": "client" | "server", "t": ..., "event": {...}}``. ``sent``/``send``/
  ``outgoing`` mean client and ``received``/``recv``/``incoming`` mean server. Without a
  direction, the side is read from the event type (client event names are a closed set).
* The timestamp key is one of ``t``, ``ts``, ``timestamp``, ``time``; a unit suffix
  (``ts_ms``, ``t_ns``, ``time_s``, ``timestamp_us``) fixes the unit. Otherwise numbers
  are read as seconds, milliseconds, microseconds or nanoseconds by ``detect_time_unit``
  (one unit for the whole file): a median inside 2000..2100 in one unit means epoch time
  in that unit; otherwise, among the units that keep the log shorter than two days, the one
  whose median gap between successive events is closest to 30 ms. ISO-8601 strings are
  wall-clock times (UTC when no offset is given). ``time_unit=`` overrides the guess.
* GA names (``response.output_audio.delta``) and beta names (``response.audio.delta``)
  are both accepted; beta names are read as their GA equivalent (``BETA_NAMES``).

Mapping
-------
``LEDGER_MAPPING`` is the table (Realtime name -> ledger type). Ids are kept:
``response_id`` stays, user audio item ids become ``utterance_id``, ``call_id`` becomes
``task_id`` (and ``data.call_id``), and ``trace_id`` is the response id for every event
that belongs to a response. Assistant item ids stay in ``data.item_id``. Every event keeps
its origin in ``data.realtime`` (original type, event id, log line). Recognised protocol
events without a ledger equivalent are kept as ``realtime.<GA name>``; high-volume deltas
with no timing value of their own (``input_audio_buffer.append``, transcript, text and
argument deltas) are not copied but summarised in ``stats`` (transcripts are attached to
``response.done``). Event types this module does not know are kept as
``realtime.<name>`` and reported as warnings. Base64 audio never enters the ledger (its
byte count does), and keys that may hold secrets (``client_secret``, ``api_key``) are
redacted.

Clocks
------
Producers ``realtime.client`` and ``realtime.server`` each get a ``clock.producer`` record.
The session clock is the client's (offset 0); when the log has no client events it is the
server's. The server offset is estimated NTP-style from pairs whose causal order does not
depend on the log's line order:

* an answer caused by a client request happened after it, so
  ``server - client <= t(answer) - t(request)``: ``error.event_id`` echoing a client
  event id, ``conversation.item.truncate`` -> ``truncated`` (same item and ``audio_end_ms``),
  ``conversation.item.create`` -> ``created``/``added`` (same item id or ``call_id``),
  ``delete`` -> ``deleted``, ``retrieve`` -> ``retrieved``, ``response.cancel`` naming a
  response -> its ``response.done`` cancelled with ``client_cancelled``; and, matched first
  in first out in log order, ``response.create`` -> ``response.created`` (echoed
  ``metadata`` wins; a server-VAD commit in between makes the pair ambiguous and drops it),
  ``input_audio_buffer.commit`` -> ``committed`` (not a VAD commit), ``session.update`` ->
  ``session.updated``, ``input_audio_buffer.clear`` / ``output_audio_buffer.clear`` ->
  ``cleared``;
* a client event that names a server-made id (a response id, an item or call id the client
  did not create) was sent after the server first used that id, so
  ``server - client >= t(first server use) - t(client event)``;
* when the log was written by one observer in the order it saw things, every client line
  was sent after the server lines above it arrived, which bounds the offset from below in
  the same way (latest server time above the line). Line order is only trusted this way
  when these bounds agree with the answer bounds above; a log merged from two files and
  sorted by skewed times contradicts them and is then not used.

With both kinds the offset is the midpoint of [max lower bound, min upper bound] and the
uncertainty half its width (if the bounds cross, the midpoint is kept, the uncertainty is
half the overlap and a warning says so). With one kind only, the answer (or reaction) is
assumed to take at most ``ONE_SIDED_WINDOW_NS`` and the estimate is the middle of that
window. With neither, the clocks are assumed equal (a warning says so). The method text
of the server's clock record states which case applied and how many pairs were used.

Problems
--------
Malformed lines, records without an event type or a readable timestamp, and records whose
content cannot be mapped are **errors** (the record is not imported); unknown event types,
times that go back within one side, direction labels that contradict the event type and
inconsistent clock bounds are **warnings** (the record is imported). Bad input never raises
(an unreadable file is one error without a line number); only an invalid ``time_unit``
argument does.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
import statistics
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from voxeval.contracts.duplex.common import Problem
from voxeval.contracts.duplex.event import ClockKind, Event, ProducerClock
from voxeval.contracts.duplex.realtime import (
    BETA_NAMES,
    CLIENT_EVENT_TYPES,
    CLIENT_PRODUCER,
    IMPORTER_PRODUCER,
    PASS_PREFIX,
    SERVER_EVENT_TYPES,
    SERVER_PRODUCER,
    SUMMARISED_TYPES,
)
from voxeval.contracts.duplex.vocabulary import CLOCK_EVENT_TYPE
from voxeval.suites.duplex.evidence.ledger import order_by_causality

__all__ = [
    "ONE_SIDED_WINDOW_NS",
    "ClockEstimate",
    "ImportResult",
    "detect_time_unit",
    "import_realtime_log",
]

ONE_SIDED_WINDOW_NS = 500_000_000
"""Assumed longest request->answer (or event->reaction) time when only one bound exists."""

Side = Literal["client", "server"]


_DIRECTION_WORDS: dict[str, Side] = {
    "client": "client",
    "sent": "client",
    "send": "client",
    "outgoing": "client",
    "server": "server",
    "received": "server",
    "recv": "server",
    "incoming": "server",
}
TIME_KEYS = ("t", "ts", "timestamp", "time")
_UNIT_NS: dict[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_EPOCH_MIN_S = 946_684_800.0  # 2000-01-01
_EPOCH_MAX_S = 4_102_444_800.0  # 2100-01-01
_MAX_SPAN_S = 2 * 86_400.0
_TYPICAL_GAP_S = 0.03
_SECRET_KEYS = frozenset({"client_secret", "api_key", "apikey", "authorization", "token"})
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ClockEstimate:
    """Offset of the server clock against the client clock, with how it was obtained.

    ``offset_ns`` is added to server timestamps to put them on the client (session) clock,
    i.e. it is ``-(server - client)``. ``lower_ns``/``upper_ns`` bound ``server - client``.
    """

    offset_ns: int
    uncertainty_ns: int
    method: str
    n_upper: int = 0
    n_lower: int = 0
    lower_ns: int | None = None
    upper_ns: int | None = None
    consistent: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for ``stats`` and ``import.json``)."""
        return {
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "method": self.method,
            "n_upper": self.n_upper,
            "n_lower": self.n_lower,
            "server_minus_client_lower_ns": self.lower_ns,
            "server_minus_client_upper_ns": self.upper_ns,
            "consistent": self.consistent,
        }


@dataclass
class ImportResult:
    """The ledger events (clock records first, then causal order), problems, and counts."""

    events: list[Event]
    problems: list[Problem]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        """Problems whose record was not imported."""
        return [p for p in self.problems if p.severity == "error"]


# --------------------------------------------------------------------------- reading


@dataclass
class _Raw:
    """One record as read: its line, the Realtime event, declared side and timestamp."""

    line: int
    event: dict[str, Any]
    declared: Side | None
    stamp_key: str
    stamp: Any
    wrapper: bool
    payload_bytes: int | None = None
    """Size of the base64 audio the event carried (the payload itself is dropped on read)."""


@dataclass
class _Record:
    """A record with its side and time resolved."""

    line: int
    event: dict[str, Any]
    rt_type: str
    kind: str
    side: Side
    ns: int
    wall: bool
    payload_bytes: int | None = None


def _iter_jsonl(
    lines: Iterable[bytes], file: str, problems: list[Problem]
) -> Iterator[tuple[int, Any]]:
    for line_no, raw in enumerate(lines, start=1):
        raw = raw.rstrip(b"\r\n")
        if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(_err(file, line_no, f"line is not UTF-8 (byte {exc.start + 1})"))
            continue
        try:
            yield line_no, json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(_err(file, line_no, f"malformed JSON: {exc.msg} (column {exc.colno})"))


def _iter_array(text: str, file: str, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
    """Elements of a JSON array with the line each starts on; stops at the first bad one."""
    decoder = json.JSONDecoder()
    n = len(text)
    counted_to, line = 0, 1

    def line_at(pos: int) -> int:
        nonlocal counted_to, line
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        return line

    def skip(pos: int) -> int:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        return pos

    pos = skip(text.index("[") + 1)
    if pos < n and text[pos] == "]":
        return
    while True:
        pos = skip(pos)
        if pos >= n:
            problems.append(_err(file, line_at(n), "malformed JSON: the array is not closed"))
            return
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            msg = f"malformed JSON: {exc.msg}; the rest of the array could not be read"
            problems.append(_err(file, line_at(exc.pos), msg))
            return
        yield line_at(pos), obj
        pos = skip(end)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            if skip(pos + 1) < n:
                msg = "text after the closing ] was ignored"
                problems.append(_err(file, line_at(skip(pos + 1)), msg))
            return
        problems.append(_err(file, line_at(min(pos, n)), "malformed JSON: expected , or ]"))
        return


def _find_stamp(obj: dict[str, Any]) -> tuple[str, Any] | None:
    for key in TIME_KEYS:
        if key in obj:
            return key, obj[key]
        for unit in _UNIT_NS:
            if f"{key}_{unit}" in obj:
                return f"{key}_{unit}", obj[f"{key}_{unit}"]
    return None


def _unwrap(line: int, obj: Any, file: str) -> _Raw | Problem:
    if not isinstance(obj, dict):
        return _err(file, line, "not a JSON object")
    wrapper = isinstance(obj.get("event"), dict)
    if wrapper:
        event = dict(obj["event"])
        outer = obj
    else:
        event = dict(obj)
        outer = event
    etype = event.get("type")
    if not isinstance(etype, str) or not etype:
        return _err(file, line, "no event type (a Realtime event needs a string 'type')")
    declared: Side | None = None
    direction = outer.get("direction")
    if direction is not None:
        declared = _DIRECTION_WORDS.get(str(direction).strip().lower())
        if declared is None:
            return _err(
                file, line, f"direction {direction!r} is neither client nor server (sent/received)"
            )
    found = _find_stamp(outer)
    inside = not wrapper
    if found is None and wrapper:
        found, inside = _find_stamp(event), True
    if found is None:
        return _err(file, line, f"{etype}: missing timestamp (one of {', '.join(TIME_KEYS)})")
    key, value = found
    if inside:  # a timestamp beside the Realtime fields is not part of the event
        event.pop(key, None)
    if not wrapper:
        event.pop("direction", None)
    payload: int | None = None
    field_name = _PAYLOAD_FIELDS.get(_canonical(etype))
    if field_name is not None and isinstance(event.get(field_name), str):
        payload = base64_decoded_bytes(event.pop(field_name))
    return _Raw(line, event, declared, key, value, wrapper, payload)


_PAYLOAD_FIELDS = {"response.output_audio.delta": "delta", "input_audio_buffer.append": "audio"}
"""Events whose base64 audio is measured and dropped as soon as the line is read."""


# --------------------------------------------------------------------------- time


def detect_time_unit(values: Sequence[float]) -> tuple[str, str]:
    """Unit (``s``, ``ms``, ``us``, ``ns``) of numeric timestamps, and how it was decided.

    Values are taken in log order. Units that would make the log longer than two days are
    ruled out; a median that falls in 2000..2100 in one of the remaining units means epoch
    time in that unit; otherwise the unit whose median gap between successive increasing
    values is closest to 30 ms wins (a relative clock). Without gaps: seconds.
    """
    vals = [float(v) for v in values if math.isfinite(v)]
    if not vals:
        return "s", "default (no numeric timestamps)"
    span = max(vals) - min(vals)
    units = [u for u, ns in _UNIT_NS.items() if span * ns / 1e9 <= _MAX_SPAN_S] or list(_UNIT_NS)
    mid = statistics.median(vals)
    for unit in units:
        if _EPOCH_MIN_S <= mid * _UNIT_NS[unit] / 1e9 <= _EPOCH_MAX_S:
            return unit, f"epoch time in {unit} (median falls in 2000..2100)"
    gaps = [b - a for a, b in itertools.pairwise(vals) if b > a]
    if not gaps:
        return units[0], f"default {units[0]} (no increasing timestamps to measure gaps)"
    gap = statistics.median(gaps)
    target = math.log10(_TYPICAL_GAP_S)
    best = min(units, key=lambda u: abs(math.log10(gap * _UNIT_NS[u] / 1e9) - target))
    return best, (
        f"relative clock in {best} (median gap {gap:g} {best} between events; "
        f"the unit closest to a {_TYPICAL_GAP_S * 1000:g} ms gap)"
    )


def _parse_iso(text: str) -> int | None:
    """Epoch nanoseconds of an ISO-8601 string (UTC if it has no offset), else None."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _to_number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            num = float(text)
        except ValueError:
            return None
        return num if math.isfinite(num) else None
    return None


def _scale(value: float | int, unit: str) -> int:
    factor = _UNIT_NS[unit]
    if isinstance(value, int):
        return value * factor
    return round(value * factor)


def _is_epoch(ns: int) -> bool:
    return _EPOCH_MIN_S <= ns / 1e9 <= _EPOCH_MAX_S


# --------------------------------------------------------------------------- small helpers


def _err(file: str, line: int | None, message: str) -> Problem:
    return Problem(file, line, None, "error", message)


def _warn(file: str, line: int | None, message: str) -> Problem:
    return Problem(file, line, None, "warning", message)


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _n(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _canonical(rt_type: str) -> str:
    return BETA_NAMES.get(rt_type, rt_type)


def base64_decoded_bytes(text: str) -> int | None:
    """Decoded size of a base64 string without decoding it (None if it is not base64)."""
    body = text.strip()
    if len(body) % 4 == 1 or not _B64.fullmatch(body):
        return None
    return len(body.rstrip("=")) * 3 // 4


def _json_or_text(value: Any) -> tuple[Any, bool]:
    """(parsed JSON, True) for a JSON string; (the value, False) otherwise."""
    if isinstance(value, str):
        try:
            return json.loads(value), True
        except json.JSONDecodeError:
            return value, False
    return value, False


def _compact(value: Any, key: str = "") -> Any:
    """A copy safe to store: base64 audio replaced by its size, secret-looking keys redacted."""
    if key.lower() in _SECRET_KEYS:
        return "<redacted>"
    if isinstance(value, dict):
        return {k: _compact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, str) and (key in ("delta", "audio") or len(value) > 1024):
        size = base64_decoded_bytes(value) if len(value) >= 64 else None
        if size is not None:
            return f"<base64 audio omitted: {size} bytes>"
    return value


# --------------------------------------------------------------------------- audio format


@dataclass(frozen=True)
class _AudioFormat:
    name: str
    sample_rate: int
    bytes_per_sample: int

    def ms(self, nbytes: int) -> float:
        return nbytes / (self.sample_rate * self.bytes_per_sample) * 1000.0

    def describe(self) -> dict[str, Any]:
        return {
            "format": self.name,
            "sample_rate": self.sample_rate,
            "bytes_per_sample": self.bytes_per_sample,
        }


PCM16_24K = _AudioFormat("pcm16", 24_000, 2)
_FORMAT_NAMES: dict[str, tuple[str, int, int]] = {
    "pcm16": ("pcm16", 24_000, 2),
    "audio/pcm": ("pcm16", 24_000, 2),
    "g711_ulaw": ("g711_ulaw", 8_000, 1),
    "audio/pcmu": ("g711_ulaw", 8_000, 1),
    "g711_alaw": ("g711_alaw", 8_000, 1),
    "audio/pcma": ("g711_alaw", 8_000, 1),
}


def _output_format(session: dict[str, Any]) -> tuple[bool, _AudioFormat | None, str | None]:
    """(session names an output format, the format or None if unknown, the name as written).

    GA: ``session.audio.output.format = {"type": "audio/pcm", "rate": 24000}``;
    beta: ``session.output_audio_format = "pcm16" | "g711_ulaw" | "g711_alaw"``.
    """
    raw: Any = _d(_d(session.get("audio")).get("output")).get("format")
    if raw is None:
        raw = session.get("output_audio_format")
    if raw is None:
        return False, None, None
    rate: float | None = None
    if isinstance(raw, dict):
        name = _s(raw.get("type"))
        rate = _n(raw.get("rate"))
    else:
        name = _s(raw)
    known = _FORMAT_NAMES.get(name or "")
    if known is None:
        return True, None, str(name if name is not None else raw)
    label, default_rate, width = known
    return True, _AudioFormat(label, int(rate) if rate else default_rate, width), name


# --------------------------------------------------------------------------- clock estimate


def _ids_in(event: dict[str, Any]) -> Iterator[str]:
    """Ids a server event mentions (response, item, call)."""
    for key in ("response_id", "item_id", "call_id", "previous_item_id"):
        value = _s(event.get(key))
        if value:
            yield value
    for inner in (_d(event.get("response")), _d(event.get("item"))):
        for key in ("id", "call_id"):
            value = _s(inner.get(key))
            if value:
                yield value


def _client_refs(rec: _Record) -> list[str]:
    """Server-made ids a client event names (candidates; client-made ids are removed later)."""
    ev = rec.event
    refs: list[str] = []
    if rec.kind == "response.cancel":
        refs.append(_s(ev.get("response_id")) or "")
    elif rec.kind in (
        "conversation.item.truncate",
        "conversation.item.delete",
        "conversation.item.retrieve",
    ):
        refs.append(_s(ev.get("item_id")) or "")
    elif rec.kind == "conversation.item.create":
        refs.append(_s(ev.get("previous_item_id")) or "")
        item = _d(ev.get("item"))
        if item.get("type") == "function_call_output":
            refs.append(_s(item.get("call_id")) or "")
    return [r for r in refs if r]


_ORDER_PAIRS: dict[str, str] = {
    "response.created": "response.create",
    "input_audio_buffer.committed": "input_audio_buffer.commit",
    "session.updated": "session.update",
    "input_audio_buffer.cleared": "input_audio_buffer.clear",
    "output_audio_buffer.cleared": "output_audio_buffer.clear",
}


def estimate_server_offset(
    records: Sequence[_Record], file: str = "", problems: list[Problem] | None = None
) -> ClockEstimate:
    """Offset of the server clock against the client clock (see the module docstring)."""
    upper: list[tuple[int, int, int]] = []  # (server - client, client line, server line)
    lower: list[tuple[int, int, int]] = []
    client = [r for r in records if r.side == "client"]
    server = [r for r in records if r.side == "server"]

    # ids the client made itself (naming them proves nothing about the server)
    client_made: set[str] = set()
    for rec in client:
        item = _d(rec.event.get("item"))
        if rec.kind == "conversation.item.create":
            if _s(item.get("id")):
                client_made.add(item["id"])
            if item.get("type") == "function_call" and _s(item.get("call_id")):
                client_made.add(item["call_id"])

    first_use: dict[str, _Record] = {}
    for rec in server:
        for ident in _ids_in(rec.event):
            if ident not in first_use or rec.ns < first_use[ident].ns:
                first_use[ident] = rec
    for rec in client:
        for ident in _client_refs(rec):
            if ident in client_made or ident not in first_use:
                continue
            src = first_use[ident]
            lower.append((src.ns - rec.ns, rec.line, src.line))

    # exact answers, by id
    def pair(req: _Record, ans: _Record) -> None:
        upper.append((ans.ns - req.ns, req.line, ans.line))

    by_client_event_id: dict[str, _Record] = {}
    dupes: set[str] = set()
    for rec in client:
        eid = _s(rec.event.get("event_id"))
        if eid:
            if eid in by_client_event_id:
                dupes.add(eid)
            by_client_event_id[eid] = rec
    answered_by_error: set[int] = set()
    answers: dict[tuple[str, ...], list[_Record]] = defaultdict(list)
    for rec in server:
        ev = rec.event
        item = _d(ev.get("item"))
        if rec.kind == "error":
            ref = _s(_d(ev.get("error")).get("event_id"))
            if ref and ref in by_client_event_id and ref not in dupes:
                pair(by_client_event_id[ref], rec)
                answered_by_error.add(by_client_event_id[ref].line)
        elif rec.kind == "conversation.item.truncated":
            answers[("truncate", str(ev.get("item_id")), str(_n(ev.get("audio_end_ms"))))].append(
                rec
            )
        elif rec.kind in ("conversation.item.created", "conversation.item.added"):
            if _s(item.get("id")):
                answers[("create-id", item["id"])].append(rec)
            if item.get("type") == "function_call_output" and _s(item.get("call_id")):
                answers[("create-call", item["call_id"])].append(rec)
        elif rec.kind == "conversation.item.deleted":
            answers[("delete", str(ev.get("item_id")))].append(rec)
        elif rec.kind == "conversation.item.retrieved":
            answers[("retrieve", str(item.get("id")))].append(rec)
        elif rec.kind == "response.done":
            resp = _d(ev.get("response"))
            details = _d(resp.get("status_details"))
            if resp.get("status") == "cancelled" and details.get("reason") == "client_cancelled":
                answers[("cancel", str(resp.get("id")))].append(rec)

    def take(key: tuple[str, ...], req: _Record) -> bool:
        for i, ans in enumerate(answers.get(key, [])):
            pair(req, ans)
            del answers[key][i]
            return True
        return False

    for rec in client:
        if rec.line in answered_by_error:
            continue
        ev = rec.event
        item = _d(ev.get("item"))
        if rec.kind == "conversation.item.truncate":
            take(("truncate", str(ev.get("item_id")), str(_n(ev.get("audio_end_ms")))), rec)
        elif rec.kind == "conversation.item.create":
            by_id = bool(_s(item.get("id"))) and take(("create-id", item["id"]), rec)
            if not by_id and item.get("type") == "function_call_output" and item.get("call_id"):
                take(("create-call", str(item["call_id"])), rec)
        elif rec.kind == "conversation.item.delete":
            take(("delete", str(ev.get("item_id"))), rec)
        elif rec.kind == "conversation.item.retrieve":
            take(("retrieve", str(ev.get("item_id"))), rec)
        elif rec.kind == "response.cancel" and _s(ev.get("response_id")):
            take(("cancel", ev["response_id"]), rec)

    # answers without ids, matched first in first out in log order
    vad_items: set[str] = {
        str(r.event.get("item_id"))
        for r in server
        if r.kind == "input_audio_buffer.speech_stopped" and r.event.get("item_id")
    }
    pending: dict[str, deque[tuple[_Record, bool]]] = defaultdict(deque)
    by_metadata: dict[str, _Record] = {}
    used_metadata: set[int] = set()
    for rec in records:
        if rec.line in answered_by_error:
            continue
        if rec.side == "client":
            if rec.kind in _ORDER_PAIRS.values():
                pending[rec.kind].append((rec, False))
                meta = _d(_d(rec.event.get("response")).get("metadata"))
                if rec.kind == "response.create" and meta:
                    by_metadata[json.dumps(meta, sort_keys=True)] = rec
            continue
        if (
            rec.kind == "input_audio_buffer.committed"
            and str(rec.event.get("item_id")) in vad_items
        ):
            # a server-VAD commit: not an answer, and it may start a response of its own
            pending["response.create"] = deque((r, True) for r, _ in pending["response.create"])
            continue
        request_kind = _ORDER_PAIRS.get(rec.kind)
        if request_kind is None:
            continue
        if rec.kind == "response.created":
            meta = _d(_d(rec.event.get("response")).get("metadata"))
            key = json.dumps(meta, sort_keys=True) if meta else None
            if key and key in by_metadata and by_metadata[key].line not in used_metadata:
                req = by_metadata[key]
                used_metadata.add(req.line)
                pending["response.create"] = deque(
                    (r, amb) for r, amb in pending["response.create"] if r.line != req.line
                )
                pair(req, rec)
                continue
        queue = pending[request_kind]
        while queue and queue[0][0].line in used_metadata:
            queue.popleft()
        if queue:
            req, ambiguous = queue.popleft()
            if not ambiguous:
                pair(req, rec)

    # log order as observation order: a client line after server lines was sent after they
    # arrived, so it bounds the offset from below too. Used only if the answers agree.
    seq_lower: list[tuple[int, int, int]] = []
    latest: _Record | None = None
    for rec in records:
        if rec.side == "server":
            if latest is None or rec.ns >= latest.ns:
                latest = rec
        elif latest is not None:
            seq_lower.append((latest.ns - rec.ns, rec.line, latest.line))
    order_note = ""
    if seq_lower and upper:
        if max(seq_lower)[0] <= min(upper)[0]:
            lower += seq_lower
            order_note = (
                f"; log order read as observation order ({len(seq_lower)} client line(s) after "
                "server lines; consistent with the answers)"
            )
        else:
            order_note = "; log order is not observation order (it contradicts the answers)"
    return _combine(upper, lower, file, problems, order_note)


def _combine(
    upper: list[tuple[int, int, int]],
    lower: list[tuple[int, int, int]],
    file: str,
    problems: list[Problem] | None,
    note: str = "",
) -> ClockEstimate:
    w = ONE_SIDED_WINDOW_NS
    if upper and lower:
        hi = min(upper)
        lo = max(lower)
        mid = (hi[0] + lo[0]) // 2
        half = abs(hi[0] - lo[0]) // 2
        consistent = lo[0] <= hi[0]
        method = (
            f"NTP-style bounds: {len(upper)} server answer(s) to client requests give "
            f"server-client <= {hi[0] / 1e6:.3f} ms (lines {hi[1]}->{hi[2]}); {len(lower)} "
            f"client event(s) sent after server events give >= {lo[0] / 1e6:.3f} ms "
            f"(lines {lo[2]}->{lo[1]}); offset = midpoint, uncertainty = half the gap{note}"
        )
        if not consistent:
            method += " (the bounds cross: uncertainty is half the overlap)"
            if problems is not None:
                problems.append(
                    _warn(
                        file,
                        hi[2],
                        f"clock bounds cross: the answer on line {hi[2]} (to line {hi[1]}) "
                        f"puts the server at most {hi[0] / 1e6:.3f} ms ahead, the reaction on "
                        f"line {lo[1]} at least {lo[0] / 1e6:.3f} ms ahead; clocks drift or the "
                        "log mixes sources",
                    )
                )
        return ClockEstimate(-mid, half, method, len(upper), len(lower), lo[0], hi[0], consistent)
    if upper:
        hi = min(upper)
        method = (
            f"one-sided: {len(upper)} server answer(s) to client requests give server-client "
            f"<= {hi[0] / 1e6:.3f} ms (lines {hi[1]}->{hi[2]}); no reaction bounds it from "
            f"below, so the fastest answer is assumed to take 0..{w / 1e6:g} ms{note}"
        )
        mid = hi[0] - w // 2
        return ClockEstimate(-mid, w // 2, method, len(upper), 0, None, hi[0])
    if lower:
        lo = max(lower)
        method = (
            f"one-sided: {len(lower)} client event(s) naming server-made ids give "
            f"server-client >= {lo[0] / 1e6:.3f} ms (lines {lo[2]}->{lo[1]}); no answer bounds "
            f"it from above, so the quickest reaction is assumed to take 0..{w / 1e6:g} ms"
        )
        mid = lo[0] + w // 2
        return ClockEstimate(-mid, w // 2, method, 0, len(lower), lo[0], None)
    return ClockEstimate(
        0, 0, "assumed: no request/answer pairs in the log; server clock taken as the client's"
    )


# --------------------------------------------------------------------------- mapping


class _Mapper:
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
        self.fmt: _AudioFormat | None = PCM16_24K
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
        self.handlers: dict[str, Callable[[_Record], None]] = {
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

    def run(self, rec: _Record) -> None:
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
        rec: _Record,
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

    def keep(self, rec: _Record) -> None:
        """A recognised event without ledger equivalent (or an unknown one): realtime.<name>."""
        self.kept[rec.kind] += 1
        ev = rec.event
        body = {k: v for k, v in ev.items() if k not in ("type", "event_id")}
        rid = _s(ev.get("response_id")) or _s(_d(ev.get("response")).get("id"))
        item_id = _s(ev.get("item_id")) or _s(_d(ev.get("item")).get("id"))
        if rid is None and item_id:
            rid = self.item_response.get(item_id)
        self.emit(rec, PASS_PREFIX + rec.kind, _compact(body), response_id=rid)

    def _response_of(self, item_id: str | None) -> str | None:
        return self.item_response.get(item_id) if item_id else None

    # ------------------------------------------------------------------ session

    def _apply_format(self, rec: _Record, session: dict[str, Any]) -> None:
        named, fmt, name = _output_format(session)
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

    def _session_created(self, rec: _Record) -> None:
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
            "session": _compact(session),
        }
        self.emit(rec, "session.connected", {k: v for k, v in data.items() if v is not None})

    def _session_config(self, rec: _Record) -> None:
        self._apply_format(rec, _d(rec.event.get("session")))
        self.keep(rec)

    def _error(self, rec: _Record) -> None:
        error = _d(rec.event.get("error"))
        reason = _s(error.get("code")) or _s(error.get("type")) or "error"
        data = {k: error[k] for k in ("type", "code", "message", "param") if error.get(k)}
        if _s(error.get("event_id")):
            data["client_event_id"] = error["event_id"]
        self.emit(rec, "session.error", data, reason=reason)

    def _asr_failed(self, rec: _Record) -> None:
        error = _d(rec.event.get("error"))
        data = {"scope": "input_audio_transcription", "error": _compact(error)}
        reason = _s(error.get("code")) or _s(error.get("type")) or "transcription_failed"
        item = _s(rec.event.get("item_id"))
        self.emit(rec, "session.error", data, reason=reason, utterance_id=item)

    def _append(self, rec: _Record) -> None:
        self.summarised[rec.kind] += 1
        self.input_audio_bytes += rec.payload_bytes or 0

    # ------------------------------------------------------------------ user side

    def _speech_started(self, rec: _Record) -> None:
        item = _s(rec.event.get("item_id"))
        for rid in self.active:
            self.speech_during.setdefault(rid, item or "")
        data = {"audio_start_ms": _n(rec.event.get("audio_start_ms")), "item_id": item}
        self.emit(rec, "vad.speech_started", _clean(data), utterance_id=item)

    def _speech_stopped(self, rec: _Record) -> None:
        item = _s(rec.event.get("item_id"))
        data = {"audio_end_ms": _n(rec.event.get("audio_end_ms")), "item_id": item}
        self.emit(rec, "vad.speech_stopped", _clean(data), utterance_id=item)

    def _asr_partial(self, rec: _Record) -> None:
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

    def _asr_final(self, rec: _Record) -> None:
        item = _s(rec.event.get("item_id"))
        text = rec.event.get("transcript")
        data = {
            "text": text if isinstance(text, str) else "",
            "content_index": rec.event.get("content_index"),
        }
        self.emit(rec, "asr.final", _clean(data), utterance_id=item)

    # ------------------------------------------------------------------ responses

    def _response_created(self, rec: _Record) -> None:
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

    def _response_done(self, rec: _Record) -> None:
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
            "usage": _compact(resp.get("usage")) if resp.get("usage") else None,
            "error": _compact(details.get("error")) if details.get("error") else None,
        }
        self.emit(rec, "response.done", _clean(data), reason=reason, response_id=rid)
        if status == "cancelled":
            cancel = {"status_details": _compact(details)} if details else {}
            self.emit(rec, "response.cancelled", cancel, "c", reason=reason, response_id=rid)

    def _output_item(self, rec: _Record) -> None:
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

    def _audio_delta(self, rec: _Record) -> None:
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

    def _transcript_delta(self, rec: _Record) -> None:
        self.summarised[rec.kind] += 1
        iid = _s(rec.event.get("item_id"))
        delta = rec.event.get("delta")
        if iid and isinstance(delta, str):
            self.transcript[iid] += delta

    def _transcript_done(self, rec: _Record) -> None:
        iid = _s(rec.event.get("item_id"))
        text = rec.event.get("transcript")
        if iid and isinstance(text, str):
            self.transcript[iid] = text
        self.keep(rec)

    # ------------------------------------------------------------------ tools

    def _function_args_done(self, rec: _Record) -> None:
        ev = rec.event
        call = _s(ev.get("call_id"))
        if call is None:
            raise ValueError("function call arguments without call_id")
        rid = _s(ev.get("response_id"))
        iid = _s(ev.get("item_id"))
        if iid and rid:
            self.item_response.setdefault(iid, rid)
        name = _s(ev.get("name")) or self.item_name.get(call) or self.item_name.get(iid or "")
        args, parsed = _json_or_text(ev.get("arguments"))
        data = {"call_id": call, "name": name, "item_id": iid, "arguments": args}
        if not parsed:
            data["arguments_not_json"] = True
        self.requested.add(call)
        if rid:
            self.call_response[call] = rid
        self.emit(rec, "tool.requested", _clean(data), response_id=rid, task_id=call)

    def _mcp_args_done(self, rec: _Record) -> None:
        ev = rec.event
        iid = _s(ev.get("item_id"))
        if iid is None:
            raise ValueError("MCP call arguments without item_id")
        rid = _s(ev.get("response_id"))
        if rid:
            self.item_response.setdefault(iid, rid)
            self.call_response[iid] = rid
        args, _ = _json_or_text(ev.get("arguments"))
        data = {"call_id": iid, "kind": "mcp", "name": self.item_name.get(iid), "arguments": args}
        self.requested.add(iid)
        self.emit(rec, "tool.requested", _clean(data), response_id=rid, task_id=iid)

    def _mcp_result(self, rec: _Record) -> None:
        iid = _s(rec.event.get("item_id"))
        if iid is None:
            raise ValueError("MCP call result without item_id")
        etype = "tool.completed" if rec.kind.endswith("completed") else "tool.failed"
        rid = self.call_response.get(iid)
        data = {"call_id": iid, "kind": "mcp"}
        self.emit(rec, etype, data, response_id=rid, task_id=iid)

    def _item_create(self, rec: _Record) -> None:
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
        output, parsed = _json_or_text(item.get("output"))
        data = {"call_id": call, "item_id": _s(item.get("id")), "output": _compact(output)}
        if not parsed:
            data["output_not_json"] = True
        rid = self.call_response.get(call)
        self.emit(rec, "tool.completed", _clean(data), response_id=rid, task_id=call)

    # ------------------------------------------------------------------ interruption

    def _response_cancel(self, rec: _Record) -> None:
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

    def _interrupted(self, rec: _Record) -> None:
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

    def _truncate(self, rec: _Record) -> None:
        self._interrupted(rec)

    def _truncated(self, rec: _Record) -> None:
        iid = _s(rec.event.get("item_id"))
        if iid and iid in self.client_truncates:
            self.keep(rec)
        else:
            self._interrupted(rec)

    def _buffer_event(self, rec: _Record) -> None:
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


# --------------------------------------------------------------------------- entry point


def import_realtime_log(
    path: str | Path,
    *,
    session_id: str | None = None,
    time_unit: str | None = None,
) -> ImportResult:
    """Read a Realtime event log and map it to ledger events (see the module docstring).

    ``time_unit`` (``s``, ``ms``, ``us``, ``ns``) overrides the detected unit of numeric
    timestamps without a unit suffix. Never raises for bad input: problems carry the line.
    """
    file = str(path)
    problems: list[Problem] = []
    stats: dict[str, Any] = {"source": file}
    if time_unit is not None and time_unit not in _UNIT_NS:
        raise ValueError(f"time_unit must be one of {', '.join(_UNIT_NS)}, not {time_unit!r}")
    try:
        raws = _read(Path(path), file, problems, stats)
    except OSError as exc:
        problems.append(_err(file, None, f"cannot read the log: {exc.strerror or exc}"))
        return ImportResult([], problems, stats)
    records = _resolve(raws, file, problems, stats, time_unit)
    stats["records"] = len(raws)
    if not records:
        if not problems:
            problems.append(_err(file, None, "the log has no events"))
        stats["imported_records"] = 0
        return ImportResult([], _sorted(problems), stats)

    sid = session_id or _realtime_session_id(records) or Path(path).stem or "realtime"
    sides = {r.side for r in records}
    wall = all(r.wall for r in records)
    kind = ClockKind.WALL if wall else ClockKind.MONOTONIC
    reference: Side = "client" if "client" in sides else "server"
    first_ns = min(r.ns for r in records if r.side == reference)
    clocks = [
        ProducerClock(
            producer=CLIENT_PRODUCER if reference == "client" else SERVER_PRODUCER,
            kind=kind,
            method=f"reference: the session clock is the {reference}'s clock",
        )
    ]
    estimate: ClockEstimate | None = None
    if sides == {"client", "server"}:
        estimate = estimate_server_offset(records, file, problems)
        if estimate.n_upper == 0 and estimate.n_lower == 0:
            problems.append(
                _warn(
                    file,
                    None,
                    "no request/answer pairs to estimate the server clock: assumed equal to "
                    "the client clock",
                )
            )
        clocks.append(
            ProducerClock(
                producer=SERVER_PRODUCER,
                kind=kind,
                offset_ns=estimate.offset_ns,
                uncertainty_ns=estimate.uncertainty_ns,
                method=estimate.method,
            )
        )

    client_truncates = {
        str(r.event.get("item_id"))
        for r in records
        if r.side == "client" and r.kind == "conversation.item.truncate"
    }
    buffered = {
        str(r.event.get("response_id"))
        for r in records
        if r.kind == "output_audio_buffer.started" and r.event.get("response_id")
    }
    mapper = _Mapper(sid, file, client_truncates, buffered)
    for rec in records:
        mapper.run(rec)
    problems += mapper.problems

    clock_events = [
        Event.new(
            CLOCK_EVENT_TYPE,
            event_id=f"{sid}:clock:{c.producer}",
            session_id=sid,
            producer=IMPORTER_PRODUCER,
            monotonic_ns=first_ns,
            data=c.model_dump(mode="json"),
        )
        for c in clocks
    ]
    ordered = order_by_causality(clock_events + mapper.events)
    events = clock_events + [e for e in ordered if e.event_type != CLOCK_EVENT_TYPE]

    rejected_lines = {p.line for p in problems if p.severity == "error" and p.line is not None}
    stats.update(
        {
            "session_id": sid,
            "realtime_session_id": _realtime_session_id(records),
            "imported_records": len({r.line for r in records} - rejected_lines),
            "events": len(events),
            "event_types": dict(sorted(Counter(e.event_type for e in events).items())),
            "unknown_types": dict(sorted(mapper.unknown.items())),
            "unknown_events": sum(mapper.unknown.values()),
            "kept_as_realtime": dict(sorted(mapper.kept.items())),
            "summarised": dict(sorted(mapper.summarised.items())),
            "input_audio_bytes": mapper.input_audio_bytes,
            "audio_deltas_without_payload": mapper.deltas_without_payload,
            "output_audio": {
                **(mapper.fmt.describe() if mapper.fmt else {"format": None}),
                "source": mapper.fmt_source,
            },
            "clock_reference": CLIENT_PRODUCER if reference == "client" else SERVER_PRODUCER,
            "clock": estimate.as_dict() if estimate else None,
        }
    )
    problems = _sorted(problems)
    stats["errors"] = sum(p.severity == "error" for p in problems)
    stats["warnings"] = sum(p.severity == "warning" for p in problems)
    return ImportResult(events, problems, stats)


def _sorted(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line is not None, p.line or 0))


def _read(path: Path, file: str, problems: list[Problem], stats: dict[str, Any]) -> list[_Raw]:
    """Records of a JSONL file (streamed line by line) or a JSON array (read whole)."""
    with open(path, "rb") as fh:
        head = b""
        while True:
            block = fh.read(4096)
            head = (head + block).lstrip(b"\xef\xbb\xbf \t\r\n")
            if head or not block:
                break
        fh.seek(0)
        items: Iterable[tuple[int, Any]]
        if head[:1] == b"[":
            try:
                text = fh.read().decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                problems.append(_err(file, None, f"the log is not UTF-8 (byte {exc.start + 1})"))
                return []
            stats["format"] = "json-array"
            items = _iter_array(text, file, problems)
        else:
            stats["format"] = "jsonl"
            items = _iter_jsonl(fh, file, problems)
        raws = _unwrap_all(items, file, problems)
    stats["layout"] = {
        "wrapper": sum(r.wrapper for r in raws),
        "raw": sum(not r.wrapper for r in raws),
    }
    return raws


def _unwrap_all(items: Iterable[tuple[int, Any]], file: str, problems: list[Problem]) -> list[_Raw]:
    raws: list[_Raw] = []
    for line, obj in items:
        got = _unwrap(line, obj, file)
        if isinstance(got, Problem):
            problems.append(got)
        else:
            raws.append(got)
    return raws


def _resolve(
    raws: list[_Raw],
    file: str,
    problems: list[Problem],
    stats: dict[str, Any],
    time_unit: str | None,
) -> list[_Record]:
    """Timestamps to nanoseconds, sides decided, go-backs within a side reported."""
    parsed: list[tuple[_Raw, float | int | None, int | None, str | None]] = []
    for raw in raws:
        suffix = raw.stamp_key.rpartition("_")[2] if "_" in raw.stamp_key else None
        number = _to_number(raw.stamp)
        iso = (
            _parse_iso(raw.stamp.strip()) if number is None and isinstance(raw.stamp, str) else None
        )
        if number is None and iso is None:
            etype = raw.event.get("type")
            msg = f"{etype}: unreadable timestamp {raw.stamp_key}={str(raw.stamp)[:40]!r}"
            problems.append(_err(file, raw.line, msg))
            continue
        parsed.append((raw, number, iso, suffix))

    free = [float(n) for _, n, _, suffix in parsed if n is not None and suffix is None]
    if time_unit is not None:
        unit, how = time_unit, "given"
    else:
        unit, how = detect_time_unit(free)
    if not free:
        how = "no numeric timestamps without a unit"
    isos = sum(iso is not None for _, _, iso, _ in parsed)
    stats["time"] = {"unit": unit, "how": how, "iso_8601": isos}

    records: list[_Record] = []
    for raw, number, iso, suffix in parsed:
        if iso is not None:
            ns = iso
        else:
            assert number is not None
            ns = _scale(number, suffix or unit)
        rt_type = str(raw.event["type"])
        kind = _canonical(rt_type)
        by_type: Side | None = (
            "client"
            if kind in CLIENT_EVENT_TYPES
            else "server"
            if kind in SERVER_EVENT_TYPES
            else None
        )
        side: Side = by_type or raw.declared or "server"
        if raw.declared and by_type and raw.declared != by_type:
            problems.append(
                _warn(
                    file,
                    raw.line,
                    f"direction says {raw.declared} but {rt_type} is a {by_type} event: "
                    f"read as {by_type}",
                )
            )
        records.append(
            _Record(raw.line, raw.event, rt_type, kind, side, ns, _is_epoch(ns), raw.payload_bytes)
        )

    if isos and any(not r.wall for r in records):
        problems.append(
            _warn(
                file,
                None,
                "the log mixes ISO-8601 wall-clock times with relative numbers: their "
                "events cannot be compared",
            )
        )
    last: dict[Side, _Record] = {}
    for rec in records:
        prev = last.get(rec.side)
        if prev is not None and rec.ns < prev.ns:
            problems.append(
                _warn(
                    file,
                    rec.line,
                    f"time goes back {(prev.ns - rec.ns) / 1e6:.3f} ms against line "
                    f"{prev.line} ({rec.side} side); kept as logged",
                )
            )
        last[rec.side] = rec
    return records


def _realtime_session_id(records: list[_Record]) -> str | None:
    for rec in records:
        if rec.kind == "session.created":
            sid = _s(_d(rec.event.get("session")).get("id"))
            if sid:
                return sid
    return None
