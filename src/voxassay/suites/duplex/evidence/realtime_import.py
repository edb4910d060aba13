"""Import the event log of an OpenAI Realtime session into a voxassay ledger.

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

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import ClockKind, Event, ProducerClock
from voxassay.contracts.duplex.realtime import (
    CLIENT_EVENT_TYPES,
    CLIENT_PRODUCER,
    IMPORTER_PRODUCER,
    SERVER_EVENT_TYPES,
    SERVER_PRODUCER,
)
from voxassay.contracts.duplex.vocabulary import CLOCK_EVENT_TYPE
from voxassay.suites.duplex.evidence.ledger import order_by_causality
from voxassay.suites.duplex.evidence.realtime_clock import ClockEstimate, estimate_server_offset
from voxassay.suites.duplex.evidence.realtime_map import Mapper
from voxassay.suites.duplex.evidence.realtime_records import (
    UNIT_NS,
    Record,
    Side,
    _d,
    _err,
    _Raw,
    _s,
    _warn,
    canonical,
    detect_time_unit,
    is_epoch,
    iter_array,
    iter_jsonl,
    parse_iso,
    scale,
    to_number,
    unwrap,
)

__all__ = [
    "ImportResult",
    "import_realtime_log",
]


# --------------------------------------------------------------------------- results


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


# --------------------------------------------------------------------------- time


# --------------------------------------------------------------------------- small helpers


# --------------------------------------------------------------------------- audio format


# --------------------------------------------------------------------------- clock estimate


# --------------------------------------------------------------------------- mapping


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
    if time_unit is not None and time_unit not in UNIT_NS:
        raise ValueError(f"time_unit must be one of {', '.join(UNIT_NS)}, not {time_unit!r}")
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
    mapper = Mapper(sid, file, client_truncates, buffered)
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
            items = iter_array(text, file, problems)
        else:
            stats["format"] = "jsonl"
            items = iter_jsonl(fh, file, problems)
        raws = _unwrap_all(items, file, problems)
    stats["layout"] = {
        "wrapper": sum(r.wrapper for r in raws),
        "raw": sum(not r.wrapper for r in raws),
    }
    return raws


def _unwrap_all(items: Iterable[tuple[int, Any]], file: str, problems: list[Problem]) -> list[_Raw]:
    raws: list[_Raw] = []
    for line, obj in items:
        got = unwrap(line, obj, file)
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
) -> list[Record]:
    """Timestamps to nanoseconds, sides decided, go-backs within a side reported."""
    parsed: list[tuple[_Raw, float | int | None, int | None, str | None]] = []
    for raw in raws:
        suffix = raw.stamp_key.rpartition("_")[2] if "_" in raw.stamp_key else None
        number = to_number(raw.stamp)
        iso = (
            parse_iso(raw.stamp.strip()) if number is None and isinstance(raw.stamp, str) else None
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

    records: list[Record] = []
    for raw, number, iso, suffix in parsed:
        if iso is not None:
            ns = iso
        else:
            assert number is not None
            ns = scale(number, suffix or unit)
        rt_type = str(raw.event["type"])
        kind = canonical(rt_type)
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
            Record(raw.line, raw.event, rt_type, kind, side, ns, is_epoch(ns), raw.payload_bytes)
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
    last: dict[Side, Record] = {}
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


def _realtime_session_id(records: list[Record]) -> str | None:
    for rec in records:
        if rec.kind == "session.created":
            sid = _s(_d(rec.event.get("session")).get("id"))
            if sid:
                return sid
    return None
