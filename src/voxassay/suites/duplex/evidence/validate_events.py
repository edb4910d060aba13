"""Checking a ledger (events.jsonl) line by line: JSON, the event schema, one session, clock records, monotonic producer clocks, id tracking across events; problems at their line, capped, with a summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.vocabulary import (
    CLOCK_EVENT_TYPE,
    unknown_event_hint,
)
from voxassay.suites.duplex.evidence.ledger import read_events

__all__ = ["LedgerSummary", "validate_events"]


REPEAT_CAP = 20
"""A ledger problem of one kind is listed this many times, then summarised with a count."""


def _duration(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms" if ns >= 1_000_000 else f"{ns} ns"


@dataclass
class LedgerSummary:
    """What the ledger check learned (used by the bundle check)."""

    problems: list[Problem] = field(default_factory=list)
    n_events: int = 0
    producers: set[str] = field(default_factory=set)
    session_ids: Counter[str] = field(default_factory=Counter)
    first_ns: dict[str, int] = field(default_factory=dict)
    last_ns: dict[str, int] = field(default_factory=dict)
    clocks: dict[str, ProducerClock] = field(default_factory=dict)

    def span_ns(self, origin_ns: int | None = None) -> int | None:
        """Session-clock time from ``origin_ns`` (default: the first event) to the last event."""
        if not self.first_ns:
            return None

        def offset(p: str) -> int:
            clock = self.clocks.get(p)
            return clock.offset_ns if clock else 0

        start = min(ns + offset(p) for p, ns in self.first_ns.items())
        end = max(ns + offset(p) for p, ns in self.last_ns.items())
        return end - (origin_ns if origin_ns is not None else start)


class _Capped:
    """Collects problems, listing each kind at most REPEAT_CAP times."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[Problem] = []
        self.counts: Counter[str] = Counter()
        self.example: dict[str, Literal["error", "warning"]] = {}

    def add(
        self, kind: str, line: int | None, message: str, severity: Literal["error", "warning"]
    ) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= REPEAT_CAP:
            self.items.append(Problem(self.file, line, None, severity, message))
        else:
            self.example.setdefault(kind, severity)

    def finish(self) -> list[Problem]:
        for kind, severity in self.example.items():
            more = self.counts[kind] - REPEAT_CAP
            msg = f"... {more} more line(s) with the same problem ({kind})"
            self.items.append(Problem(self.file, None, None, severity, msg))
        return self.items


def validate_events(
    path: Path, session_id: str | None = None, name: str | None = None
) -> LedgerSummary:
    """Check a ledger line by line (streamed): syntax, fields, ids, per-producer monotonicity.

    Errors: malformed lines, missing/mistyped fields, duplicate ``event_id``, a session id
    other than ``session_id``, a playback bound to two responses, a tool result without a
    request. Warnings: unknown types, unknown fields, ``monotonic_ns`` going back within a
    producer, ids used without their opening event, producers without a clock record.
    """
    file = name or str(path)
    out = LedgerSummary()
    cap = _Capped(file)
    seen_ids: dict[str, int] = {}
    last: dict[str, tuple[int, int]] = {}
    created: set[str] = set()
    started: set[str] = set()
    requested: set[str] = set()
    playback_response: dict[str, tuple[str, int]] = {}
    uses_response: dict[str, int] = {}
    uses_playback: dict[str, int] = {}
    results: list[tuple[str, int, str]] = []
    known_fields = set(Event.model_fields)
    for line, item in read_events(path):
        if isinstance(item, Problem):
            cap.add("unparsable line", line, item.message, "error")
            continue
        ev: Event = item
        out.n_events += 1
        out.producers.add(ev.producer)
        out.session_ids[ev.session_id] += 1
        if ev.event_id in seen_ids:
            msg = f"duplicate event_id {ev.event_id!r} (first on line {seen_ids[ev.event_id]})"
            cap.add("duplicate event_id", line, msg, "error")
        else:
            seen_ids[ev.event_id] = line
        if session_id is not None and ev.session_id != session_id:
            msg = f"session_id {ev.session_id!r} is not the bundle's {session_id!r}"
            cap.add("foreign session_id", line, msg, "error")
        if not ev.known_type:
            cap.add(
                f"unknown type {ev.event_type}", line, unknown_event_hint(ev.event_type), "warning"
            )
        for extra in (ev.model_extra or {}).keys() - known_fields:
            msg = f"unknown field {extra!r} (kept; put producer-specific values in data)"
            cap.add("unknown field", line, msg, "warning")
        if ev.event_type == CLOCK_EVENT_TYPE:
            clock = ProducerClock.from_event(ev)
            old = out.clocks.get(clock.producer)
            if old is None or clock.uncertainty_ns <= old.uncertainty_ns:
                out.clocks[clock.producer] = clock
            continue
        prev = last.get(ev.producer)
        if prev is not None and ev.monotonic_ns < prev[0]:
            msg = (
                f"monotonic_ns of producer {ev.producer!r} goes back "
                f"{_duration(prev[0] - ev.monotonic_ns)} (line {prev[1]} was later)"
            )
            cap.add(f"non-monotonic {ev.producer}", line, msg, "warning")
        last[ev.producer] = (ev.monotonic_ns, line)
        out.first_ns[ev.producer] = min(
            out.first_ns.get(ev.producer, ev.monotonic_ns), ev.monotonic_ns
        )
        out.last_ns[ev.producer] = max(
            out.last_ns.get(ev.producer, ev.monotonic_ns), ev.monotonic_ns
        )
        _track_ids(
            ev,
            line,
            cap,
            created,
            started,
            requested,
            playback_response,
            uses_response,
            uses_playback,
            results,
        )
    for rid, line in uses_response.items():
        if rid not in created:
            msg = f"response_id {rid!r} is used but no response.created has it"
            cap.add("response without response.created", line, msg, "warning")
    for pid, line in uses_playback.items():
        if pid not in started:
            msg = f"playback_id {pid!r} is used but no playback.started has it"
            cap.add("playback without playback.started", line, msg, "warning")
    for key, line, etype in results:
        if key not in requested:
            msg = (
                f"{etype} for {key.replace(':', ' ', 1)} that was never requested (tool.requested)"
            )
            cap.add("tool result without request", line, msg, "error")
    if len(out.producers) > 1:
        for producer in sorted(out.producers - set(out.clocks)):
            if producer in out.first_ns:
                msg = (
                    f"producer {producer!r} has no clock.producer record: its monotonic_ns is "
                    "assumed to be on the session clock"
                )
                cap.add(f"no clock {producer}", None, msg, "warning")
    if session_id is None and len(out.session_ids) > 1:
        ids = ", ".join(sorted(out.session_ids)[:5])
        cap.add(
            "several sessions",
            None,
            f"the ledger mixes {len(out.session_ids)} sessions: {ids}",
            "warning",
        )
    if out.n_events == 0 and not cap.counts:
        cap.add("empty", None, "the ledger has no events", "error")
    out.problems = cap.finish()
    return out


def _track_ids(
    ev: Event,
    line: int,
    cap: _Capped,
    created: set[str],
    started: set[str],
    requested: set[str],
    playback_response: dict[str, tuple[str, int]],
    uses_response: dict[str, int],
    uses_playback: dict[str, int],
    results: list[tuple[str, int, str]],
) -> None:
    t = ev.event_type
    if ev.response_id:
        if t == "response.created":
            created.add(ev.response_id)
        else:
            uses_response.setdefault(ev.response_id, line)
    if ev.playback_id:
        if t == "playback.started":
            started.add(ev.playback_id)
        else:
            uses_playback.setdefault(ev.playback_id, line)
        if ev.response_id:
            bound = playback_response.setdefault(ev.playback_id, (ev.response_id, line))
            if bound[0] != ev.response_id:
                msg = (
                    f"playback_id {ev.playback_id!r} belongs to response {bound[0]!r} "
                    f"(line {bound[1]}), here to {ev.response_id!r}"
                )
                cap.add("playback bound to two responses", line, msg, "error")
    if t.startswith("tool."):
        call = ev.data.get("call_id")
        keys = [f"call:{call}"] if isinstance(call, str) and call else []
        if ev.task_id:
            keys.append(f"task:{ev.task_id}")
        if t == "tool.requested":
            requested.update(keys)
        elif t in ("tool.completed", "tool.failed") and keys:
            results.append((keys[0], line, t))
