"""Reading a Realtime event log: JSONL or a JSON array, wrapped or raw records, timestamps in any unit or ISO time (``detect_time_unit``), sides, ids and audio formats; small value helpers the importer's stages share."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.realtime import (
    BETA_NAMES,
)

__all__ = [
    "ONE_SIDED_WINDOW_NS",
    "PCM16_24K",
    "TIME_KEYS",
    "Side",
    "base64_decoded_bytes",
    "detect_time_unit",
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


UNIT_NS: dict[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


_EPOCH_MIN_S = 946_684_800.0  # 2000-01-01


_EPOCH_MAX_S = 4_102_444_800.0  # 2100-01-01


_MAX_SPAN_S = 2 * 86_400.0


_TYPICAL_GAP_S = 0.03


_SECRET_KEYS = frozenset({"client_secret", "api_key", "apikey", "authorization", "token"})


_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


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
class Record:
    """A record with its side and time resolved."""

    line: int
    event: dict[str, Any]
    rt_type: str
    kind: str
    side: Side
    ns: int
    wall: bool
    payload_bytes: int | None = None


def iter_jsonl(
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


def iter_array(text: str, file: str, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
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
        for unit in UNIT_NS:
            if f"{key}_{unit}" in obj:
                return f"{key}_{unit}", obj[f"{key}_{unit}"]
    return None


def unwrap(line: int, obj: Any, file: str) -> _Raw | Problem:
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
    field_name = _PAYLOAD_FIELDS.get(canonical(etype))
    if field_name is not None and isinstance(event.get(field_name), str):
        payload = base64_decoded_bytes(event.pop(field_name))
    return _Raw(line, event, declared, key, value, wrapper, payload)


_PAYLOAD_FIELDS = {"response.output_audio.delta": "delta", "input_audio_buffer.append": "audio"}
"""Events whose base64 audio is measured and dropped as soon as the line is read."""


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
    units = [u for u, ns in UNIT_NS.items() if span * ns / 1e9 <= _MAX_SPAN_S] or list(UNIT_NS)
    mid = statistics.median(vals)
    for unit in units:
        if _EPOCH_MIN_S <= mid * UNIT_NS[unit] / 1e9 <= _EPOCH_MAX_S:
            return unit, f"epoch time in {unit} (median falls in 2000..2100)"
    gaps = [b - a for a, b in itertools.pairwise(vals) if b > a]
    if not gaps:
        return units[0], f"default {units[0]} (no increasing timestamps to measure gaps)"
    gap = statistics.median(gaps)
    target = math.log10(_TYPICAL_GAP_S)
    best = min(units, key=lambda u: abs(math.log10(gap * UNIT_NS[u] / 1e9) - target))
    return best, (
        f"relative clock in {best} (median gap {gap:g} {best} between events; "
        f"the unit closest to a {_TYPICAL_GAP_S * 1000:g} ms gap)"
    )


def parse_iso(text: str) -> int | None:
    """Epoch nanoseconds of an ISO-8601 string (UTC if it has no offset), else None."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def to_number(value: Any) -> float | int | None:
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


def scale(value: float | int, unit: str) -> int:
    factor = UNIT_NS[unit]
    if isinstance(value, int):
        return value * factor
    return round(value * factor)


def is_epoch(ns: int) -> bool:
    return _EPOCH_MIN_S <= ns / 1e9 <= _EPOCH_MAX_S


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


def canonical(rt_type: str) -> str:
    return BETA_NAMES.get(rt_type, rt_type)


def base64_decoded_bytes(text: str) -> int | None:
    """Decoded size of a base64 string without decoding it (None if it is not base64)."""
    body = text.strip()
    if len(body) % 4 == 1 or not _B64.fullmatch(body):
        return None
    return len(body.rstrip("=")) * 3 // 4


def json_or_text(value: Any) -> tuple[Any, bool]:
    """(parsed JSON, True) for a JSON string; (the value, False) otherwise."""
    if isinstance(value, str):
        try:
            return json.loads(value), True
        except json.JSONDecodeError:
            return value, False
    return value, False


def compact(value: Any, key: str = "") -> Any:
    """A copy safe to store: base64 audio replaced by its size, secret-looking keys redacted."""
    if key.lower() in _SECRET_KEYS:
        return "<redacted>"
    if isinstance(value, dict):
        return {k: compact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and (key in ("delta", "audio") or len(value) > 1024):
        size = base64_decoded_bytes(value) if len(value) >= 64 else None
        if size is not None:
            return f"<base64 audio omitted: {size} bytes>"
    return value


@dataclass(frozen=True)
class AudioFormat:
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


PCM16_24K = AudioFormat("pcm16", 24_000, 2)


_FORMAT_NAMES: dict[str, tuple[str, int, int]] = {
    "pcm16": ("pcm16", 24_000, 2),
    "audio/pcm": ("pcm16", 24_000, 2),
    "g711_ulaw": ("g711_ulaw", 8_000, 1),
    "audio/pcmu": ("g711_ulaw", 8_000, 1),
    "g711_alaw": ("g711_alaw", 8_000, 1),
    "audio/pcma": ("g711_alaw", 8_000, 1),
}


def output_format(session: dict[str, Any]) -> tuple[bool, AudioFormat | None, str | None]:
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
    return True, AudioFormat(label, int(rate) if rate else default_rate, width), name


def ids_in(event: dict[str, Any]) -> Iterator[str]:
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


def client_refs(rec: Record) -> list[str]:
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
