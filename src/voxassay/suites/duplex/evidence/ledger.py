"""The event ledger (``events.jsonl``): streaming read, append-and-flush write, causal order.

Clock skew between producers. Every producer stamps ``monotonic_ns`` from its own clock. A
``clock.producer`` record (``ProducerClock``) says how that clock maps to the session clock:
``session_ns = monotonic_ns + offset_ns``, give or take ``uncertainty_ns``. A producer without
a record is taken to be on the session clock (offset 0; the validator warns when several
producers share a ledger). When a producer has several records, the one with the smallest
uncertainty is used (the later one on a tie); drift within a session is not modelled.

``order_by_causality`` never trusts the estimate over facts that do not depend on it:

1. a producer's own events keep their order (``monotonic_ns``, then ``seq``, then file
   order): one clock is always comparable with itself;
2. an event that opens an id comes before every other event carrying that id
   (``response.created`` for ``response_id``, ``playback.started`` for ``playback_id``,
   ``user.speech_started`` for ``utterance_id``, ``tool.requested`` before the
   ``tool.completed``/``tool.failed`` of the same ``data.call_id`` or ``task_id``);
3. only events that these two rules leave unordered are ordered by the session-clock
   estimate, then the producer sequence. An id rule that contradicts rule 1 (a cycle, e.g.
   an agent that logs ``turn.decision`` for a response before its ``response.created``) is
   dropped for the events of that cycle; rule 1 always holds.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.vocabulary import CLOCK_EVENT_TYPE

ID_OPENERS: dict[str, str] = {
    "response_id": "response.created",
    "playback_id": "playback.started",
    "utterance_id": "user.speech_started",
}
TOOL_CLOSERS = ("tool.completed", "tool.failed")


# --------------------------------------------------------------------------- reading


def read_events(path: str | Path) -> Iterator[tuple[int, Event | Problem]]:
    """Yield ``(line_number, Event or Problem)`` for each non-blank line, one at a time.

    Constant memory: the file is read line by line. A line that is not a valid event (bad
    JSON, not UTF-8, missing or mistyped fields) yields an error ``Problem`` for that line;
    unknown event types are valid events (see ``Event.known_type``).
    """
    name = str(path)
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield line_no, Event.model_validate_json(raw)
            except ValidationError as exc:
                yield line_no, Problem(name, line_no, None, "error", describe_line_error(exc))


def describe_line_error(exc: ValidationError) -> str:
    """One message for all errors of a ledger line."""
    parts = []
    for err in exc.errors(include_url=False):
        kind, loc = err["type"], ".".join(str(x) for x in err["loc"])
        if kind == "json_invalid":
            raw = err.get("input")
            if isinstance(raw, bytes):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    return f"line is not UTF-8 (byte {bad.start + 1})"
            return f"malformed JSON: {(err.get('ctx') or {}).get('error', err['msg'])}"
        if kind in ("model_type", "dict_type") and not loc:
            return "not a JSON object"
        if kind == "missing":
            parts.append(f"missing required field {loc!r}")
        elif kind == "value_error":
            parts.append(str((err.get("ctx") or {}).get("error", err["msg"])))
        else:
            parts.append(f"{loc or 'event'}: {err['msg']}" + _got(err))
    return "; ".join(parts)


def _got(err: Any) -> str:
    value = err.get("input")
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return f" (got {text[:60]})"
    return ""


def iter_valid_events(path: str | Path) -> Iterator[Event]:
    """Only the events of ``path`` (lines that do not parse are skipped)."""
    for _, item in read_events(path):
        if isinstance(item, Event):
            yield item


# --------------------------------------------------------------------------- writing


def write_events(path: str | Path, events: Iterable[Event]) -> int:
    """Write ``events`` as a new ledger (replacing ``path``); returns the number written."""
    n = 0
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for event in events:
            fh.write(event.to_json() + "\n")
            n += 1
    os.replace(tmp, path)
    return n


class EventWriter:
    """Append events to a ledger, flushed per event (``fsync=True`` also syncs to disk).

    A half-written last line left by a killed writer is cut when the file is reopened.
    """

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.count = 0
        _cut_partial_last_line(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def write(self, event: Event) -> None:
        self._fh.write(event.to_json() + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())
        self.count += 1

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _cut_partial_last_line(path: Path) -> None:
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        pos, block = size, 1 << 16
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                fh.truncate(start + nl + 1)
                return
            pos = start
        fh.truncate(0)


# --------------------------------------------------------------------------- clocks and order


def producer_clocks(events: Iterable[Event]) -> dict[str, ProducerClock]:
    """The clock record used for each producer (smallest uncertainty; later wins a tie)."""
    best: dict[str, ProducerClock] = {}
    for event in events:
        if event.event_type != CLOCK_EVENT_TYPE:
            continue
        clock = ProducerClock.from_event(event)
        old = best.get(clock.producer)
        if old is None or clock.uncertainty_ns <= old.uncertainty_ns:
            best[clock.producer] = clock
    return best


def session_ns(event: Event, clocks: dict[str, ProducerClock]) -> int:
    """The event's time on the session clock (offset 0 for producers without a record)."""
    clock = clocks.get(event.producer)
    return event.monotonic_ns + (clock.offset_ns if clock else 0)


def order_by_causality(events: Iterable[Event]) -> list[Event]:
    """Events in an order consistent with causality (see the module docstring)."""
    evs = list(events)
    n = len(evs)
    if n < 2:
        return evs
    clocks = producer_clocks(evs)
    key = [
        (session_ns(e, clocks), e.seq if e.seq is not None else -1, i) for i, e in enumerate(evs)
    ]
    succ: list[list[int]] = [[] for _ in range(n)]
    opener_edges: list[tuple[int, int]] = []

    def edge(a: int, b: int) -> None:
        if a != b:
            opener_edges.append((a, b))

    by_producer: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(evs):
        by_producer[e.producer].append(i)
    for idx in by_producer.values():
        idx.sort(key=lambda i: (evs[i].monotonic_ns, key[i][1], i))
        for a, b in itertools.pairwise(idx):
            succ[a].append(b)

    for field, opener_type in ID_OPENERS.items():
        _opener_edges(evs, key, edge, lambda e, f=field: getattr(e, f), opener_type, None)
    _opener_edges(evs, key, edge, _tool_call_key, "tool.requested", TOOL_CLOSERS)
    for a, b in opener_edges:
        succ[a].append(b)
    # Rule 1 is a fact, rule 2 a convention: an id rule that contradicts the producers' own
    # order (e.g. an agent logging its turn.decision for a response before response.created)
    # closes a cycle; such id edges are dropped, every producer order is kept.
    comp = _components(succ)
    if max(comp, default=0) + 1 < n:
        sizes = Counter(comp)
        drop = {(a, b) for a, b in opener_edges if comp[a] == comp[b] and sizes[comp[a]] > 1}
        for a, b in drop:
            succ[a].remove(b)
    indeg = [0] * n
    for targets in succ:
        for b in targets:
            indeg[b] += 1

    ready = [key[i] for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    pending = [key[i] for i in range(n)]
    heapq.heapify(pending)
    done = [False] * n
    out: list[Event] = []
    while len(out) < n:
        if ready:
            i = heapq.heappop(ready)[2]
            if done[i]:
                continue
        else:  # a cycle: emit the earliest remaining event regardless of its constraints
            i = heapq.heappop(pending)[2]
            if done[i]:
                continue
        done[i] = True
        out.append(evs[i])
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0 and not done[j]:
                heapq.heappush(ready, key[j])
    return out


def _components(succ: list[list[int]]) -> list[int]:
    """Strongly connected component of every node (iterative Tarjan); ids are 0..k-1."""
    n = len(succ)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    comp = [-1] * n
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, pos = work.pop()
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            recurse = False
            targets = succ[v]
            while pos < len(targets):
                w = targets[pos]
                pos += 1
                if index[w] == -1:
                    work.append((v, pos))
                    work.append((w, 0))
                    recurse = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return comp


def _tool_call_key(event: Event) -> str | None:
    call = event.data.get("call_id")
    if isinstance(call, str) and call:
        return f"call:{call}"
    return f"task:{event.task_id}" if event.task_id else None


def _opener_edges(
    evs: list[Event],
    key: list[tuple[int, int, int]],
    edge: Any,
    get_id: Any,
    opener_type: str,
    closers: tuple[str, ...] | None,
) -> None:
    """Edge from the earliest opener of each id to the other events with that id."""
    opener: dict[str, int] = {}
    members: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(evs):
        ident = get_id(e)
        if not ident:
            continue
        if e.event_type == opener_type:
            if ident not in opener or key[i] < key[opener[ident]]:
                opener[ident] = i
        elif closers is None or e.event_type in closers:
            members[ident].append(i)
    for ident, start in opener.items():
        for j in members.get(ident, ()):
            edge(start, j)
