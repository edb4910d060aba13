"""Latency metrics from an event ledger: declarative start -> end pairs, computed in one pass.

Every latency of DESIGN.md's table is a ``PairDef``: a start event, an end event, and the id
that joins them. ``MetricAccumulator`` reads events one at a time and emits one ``LatencyPair``
per start it accepts; ``summarize`` turns pairs into P50/P95/P99 with n, failures and a
session-clustered bootstrap interval, overall and split by route, scenario category, device,
language and system version (``SessionMeta``).

Formula and denominator (every metric)
=======================================
``value_ms = (end_ns - start_ns) / 1e6`` on the session clock. The denominator ``n`` of every
percentile is *every accepted start*: a start whose end never came is **censored** (a failure:
counted in ``n`` and ``n_censored``, ranked above every observed value, never zero). A start is
not counted at all (and each case is counted in ``diagnostics``) when it is withdrawn by a
``cancel`` event (the moment stopped being a start: the user kept talking), superseded by a
better source, has nothing to act on (``unbound``: e.g. an interruption while no response was
playing), repeats a start that is still open, or its end cannot be observed in that session
(``not_measurable``: an acoustic end in a session without acoustic events).

Pair definitions
================
See ``DEFAULT_PAIRS`` (``definitions_table()`` prints them). Conventions read from the ledger:

- ``acoustic.speech_started/stopped`` carry ``data.role`` (``user`` | ``agent``) as written by
  ``acoustic.acoustic_events``. When the harness aligns an acoustic segment with a scenario
  segment it may add ``utterance_id`` / ``data.segment_id`` and the segment's ``data.intents``.
- ``user.speech_started/stopped`` (scenario truth) carry ``utterance_id`` and
  ``data.segment_id``; their ``data.intents`` / ``data.expected_actions`` /
  ``data.segment_role`` come from the event or, when absent, from ``SessionMeta.segments``
  (filled from the scenario). ``segment_role`` is the scenario segment's role (``user``,
  ``bystander``, ``media``, ``echo``, ``noise``, ``unknown``); it is not ``data.role``, which on
  ``acoustic.*`` events names the channel (``user`` | ``agent``).
- **Respondable points** (``response_first_*``): the end of a user segment is a point where a
  response is expected unless its intents include ``backchannel`` or ``unrelated``
  (``NOT_RESPONDABLE_INTENTS``) or its ``segment_role`` is not ``user``
  (``NOT_RESPONDABLE_ROLES``: a bystander, the TV, echo or a cough is not talking to the
  agent, whatever its intents say). The same rule picks the user onsets that withdraw a
  waiting start ("the user resumes") and, in sessions without scenario truth, the aligned
  acoustic user ends and onsets of the fallback. An event without a ``segment_role`` (no
  scenario, or a segment the ledger does not name) is judged by its intents alone.
- ``response.done`` has ``data.status`` (``completed``, ``cancelled``, ...); ``tts.chunk`` is one
  piece of agent audio received for ``response_id``; ``task.state`` may carry ``data.status``.
- Ids are inherited within a session: an event with a ``playback_id`` but no ``response_id``
  takes the response of its ``playback.started``; an event with a ``response_id`` takes the
  ``task_id`` / ``utterance_id`` its ``response.created`` named.

End rules: ``first`` (the first end event for the key), ``last`` (the last end event for the
key before a ``final`` event or the end of the session; an end before the start counts as the
start: the state already held), ``silence`` (acoustic: the end of the agent's speech burst
running at the start, where a burst ends at an agent speech stop that is not followed by agent
speech within ``settle_ms``; a start with no agent speech within ``settle_ms`` before it is
``unbound``; a burst that ended before the start gives 0). ``closes`` events end the wait
without an end (censored at that time); with ``already`` an end or close seen before the start
means the end state held at the start (value 0).

Ordering and clocks
===================
The accumulator needs each session's events in causal order, i.e. the order of
``ledger.order_by_causality`` (sessions may interleave with each other). It trusts that order:
a pair's end is the first suitable event *after* the start in the stream. Times are session
clock: ``monotonic_ns`` plus the producer's ``clock.producer`` offset (``ledger.session_ns``);
clock records given to ``open_session`` (e.g. ``ledger.producer_clocks`` of the bundle's
ledger) apply to the whole session, records met in the stream apply from there on (the one with
the smallest uncertainty wins, as in ``producer_clocks``). Causal order can legitimately put an
event before one with a smaller session time (skewed producers); such a **non-monotonic
timestamp** is processed in stream order with its own time, counted per session
(``diagnostics()["nonmonotonic"]``) and reported once per session with a
``NonMonotonicTimestampWarning``. Pair values then can be negative (counted as ``negative``).
The horizon and the settle window use the session's high-water time, so a late timestamp never
moves them back.

Memory
======
Only open starts are held (per session, per metric, per key), plus per session the currently
playing playbacks and bounded recent-id memories (``memory_per_session`` entries each). Open
starts older than the horizon (``horizon_ms``, per metric overridable) are evicted as censored
while the session runs; a session's remaining starts are resolved by ``end_session``, by
``finish``, or when more than ``max_sessions`` sessions are open (least recently active first).
``LatencyTable`` keeps only what the summaries need: per pair one float, a session code and
one small code per split field.
"""

from __future__ import annotations

import heapq
import itertools
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.vocabulary import CLOCK_EVENT_TYPE
from voxassay.suites.duplex.evidence.ledger import order_by_causality, producer_clocks, session_ns
from voxassay.suites.duplex.scoring.latency_pairs import (
    DEFAULT_HORIZON_MS,
    DEFAULT_PAIRS,
    Match,
    PairDef,
)
from voxassay.suites.duplex.scoring.latency_table import (
    METRICS_VERSION,
    NO_META,
    SPLIT_FIELDS,
    LatencyPair,
    LatencyTable,
    SessionMeta,
    SplitSpec,
)

__all__ = [
    "MetricAccumulator",
    "NonMonotonicTimestampWarning",
    "pairs_from_events",
    "summarize",
]


class NonMonotonicTimestampWarning(UserWarning):
    """A session's event has an earlier session time than an event before it in the stream."""


# --------------------------------------------------------------------------- definitions


# --------------------------------------------------------------------------- sessions and pairs


# --------------------------------------------------------------------------- the accumulator

_REQUIRES, _UNTIL, _CANCEL, _FCANCEL, _CLOSES, _END, _RESUME, _FINAL, _START, _FSTART = range(10)
_PLAYBACK_ENDS = frozenset({"playback.stopped", "playback.interrupted", "playback.completed"})
_ENRICHED_PREFIXES = ("user.", "acoustic.")
_ENRICHED_KEYS = ("intents", "expected_actions", "segment_role")
_TOTALS = (
    "events",
    "sessions",
    "clock_records",
    "nonmonotonic",
    "peak_open_starts",
    "sessions_ended_by_limit",
)


class _Open:
    """An accepted start waiting for its end."""

    __slots__ = ("alive", "cand_id", "cand_ns", "d", "fallback", "key", "route", "start_id", "t0")

    def __init__(
        self, d: int, key: str, t0: int, start_id: str, fallback: bool, route: str | None
    ) -> None:
        self.d = d
        self.key = key
        self.t0 = t0
        self.start_id = start_id
        self.fallback = fallback
        self.route = route
        self.cand_ns: int | None = None
        self.cand_id: str | None = None
        self.alive = True


class _DefState:
    """One metric's state within one session."""

    __slots__ = (
        "finished",
        "last_end",
        "last_stop",
        "open",
        "primary_seen",
        "required_seen",
        "seen_end",
        "speaking",
        "used_utt",
    )

    def __init__(self) -> None:
        self.open: dict[str, _Open] = {}
        self.primary_seen = False
        self.required_seen = False
        self.used_utt: OrderedDict[str, None] = OrderedDict()
        self.seen_end: OrderedDict[str, str] = OrderedDict()
        self.last_end: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self.finished: OrderedDict[str, int] = OrderedDict()
        self.speaking = False
        self.last_stop: int | None = None


class _Session:
    __slots__ = (
        "active",
        "cands",
        "clocks",
        "defs",
        "heap",
        "hw",
        "meta",
        "nonmonotonic",
        "pb_resp",
        "responses",
        "route",
        "sid",
        "warned",
    )

    def __init__(self, sid: str, meta: SessionMeta, n_defs: int) -> None:
        self.sid = sid
        self.meta = meta
        self.clocks: dict[str, ProducerClock] = {}
        self.hw: int | None = None
        self.nonmonotonic = 0
        self.warned = False
        self.route: str | None = None
        self.defs = [_DefState() for _ in range(n_defs)]
        self.heap: list[tuple[int, int, _Open]] = []
        self.cands: list[_Open] = []
        self.active: dict[str, str | None] = {}
        """Playing playbacks (playback_id -> response_id), in start order."""
        self.pb_resp: OrderedDict[str, str | None] = OrderedDict()
        self.responses: OrderedDict[str, list[Any]] = OrderedDict()
        """response_id -> [task_id, utterance_id, done]."""


def _remember(od: OrderedDict[str, Any], key: str, value: Any, cap: int) -> None:
    od[key] = value
    od.move_to_end(key)
    if len(od) > cap:
        od.popitem(last=False)


class MetricAccumulator:
    """Streams events into ``LatencyPair`` s (see the module docstring for every rule).

    ``meta``: the ``SessionMeta`` of each session, as a mapping or a lookup function (or give
    it per session with ``open_session``). ``horizon_ms``: longest wait before an open start is
    censored while its session runs. ``max_sessions``: sessions held at once (the least
    recently active one is ended beyond it). ``memory_per_session``: entries kept in each
    per-session id memory (responses, playbacks, seen ends, used utterances).
    """

    def __init__(
        self,
        defs: Sequence[PairDef] = DEFAULT_PAIRS,
        *,
        meta: Mapping[str, SessionMeta] | Callable[[str], SessionMeta | None] | None = None,
        horizon_ms: float = DEFAULT_HORIZON_MS,
        max_sessions: int = 1024,
        memory_per_session: int = 256,
    ) -> None:
        names = [d.name for d in defs]
        if len(set(names)) != len(names):
            raise ValueError("metric names must be unique")
        if max_sessions < 1 or memory_per_session < 1:
            raise ValueError("max_sessions and memory_per_session must be >= 1")
        self.defs = tuple(defs)
        self._meta = meta
        self.horizon_ms = horizon_ms
        self.max_sessions = max_sessions
        self.memory = memory_per_session
        self._horizon_ns = [
            round((d.horizon_ms if d.horizon_ms is not None else horizon_ms) * 1e6)
            for d in self.defs
        ]
        self._settle_ns = [round(d.settle_ms * 1e6) for d in self.defs]
        self._by_type: dict[str, list[tuple[int, int, Match]]] = {}
        for i, d in enumerate(self.defs):
            fb = d.fallback
            roles: list[tuple[int, tuple[Match, ...]]] = [
                (_REQUIRES, d.requires),
                (_CANCEL, d.cancel),
                (_CLOSES, d.closes),
                (_END, d.end),
                (_RESUME, d.resume),
                (_FINAL, d.final),
                (_START, d.start),
            ]
            if fb is not None:
                roles += [(_UNTIL, fb.until), (_FCANCEL, fb.cancel), (_FSTART, fb.start)]
            for phase, matches in roles:
                for m in matches:
                    for et in m.event_types:
                        self._by_type.setdefault(et, []).append((phase, i, m))
        for entries in self._by_type.values():
            entries.sort(key=lambda x: (x[0], x[1]))
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._pending_meta: dict[str, tuple[SessionMeta | None, dict[str, ProducerClock]]] = {}
        self._counter = itertools.count()
        self._n_open = 0
        self.counts: dict[str, Counter[str]] = {d.name: Counter() for d in self.defs}
        self.totals: Counter[str] = Counter(dict.fromkeys(_TOTALS, 0))

    # ------------------------------------------------------------------ public API

    def open_session(
        self,
        session_id: str,
        meta: SessionMeta | None = None,
        clocks: Mapping[str, ProducerClock] | None = None,
    ) -> None:
        """Give a session's meta and clock records before (or instead of) meeting it."""
        s = self._sessions.get(session_id)
        if s is None:
            self._pending_meta[session_id] = (meta, dict(clocks or {}))
            return
        if meta is not None:
            s.meta = meta
        for c in (clocks or {}).values():
            self._add_clock(s, c)

    def add(self, event: Event) -> list[LatencyPair]:
        """Consume one event; returns the pairs it completed (usually none)."""
        out: list[LatencyPair] = []
        s = self._session(event.session_id, out)
        self.totals["events"] += 1
        et = event.event_type
        if et == CLOCK_EVENT_TYPE:
            self._add_clock(s, ProducerClock.from_event(event))
            self.totals["clock_records"] += 1
            return out
        t = session_ns(event, s.clocks)
        hw = s.hw
        if hw is None or t >= hw:
            s.hw = hw = t
        else:
            s.nonmonotonic += 1
            self.totals["nonmonotonic"] += 1
            if not s.warned:
                s.warned = True
                warnings.warn(
                    f"session {s.sid}: {et} {event.event_id} is {(hw - t) / 1e6:.1f} ms "
                    "earlier on the session clock than an event before it; processed in "
                    "stream order (later ones in this session are counted, not reported)",
                    NonMonotonicTimestampWarning,
                    stacklevel=2,
                )
        if event.route is not None:
            s.route = str(event.route)
        if s.heap and s.heap[0][0] < hw:
            self._expire(s, hw, out)
        if s.cands:
            self._confirm(s, hw, out)

        entries = self._by_type.get(et)
        if entries:
            data = event.data
            if s.meta.segments and et.startswith(_ENRICHED_PREFIXES):
                data = self._enrich(s, event)
            pid = event.playback_id
            rid = event.response_id
            if rid is None and pid is not None:
                rid = s.pb_resp.get(pid)
            tid, uid = event.task_id, event.utterance_id
            if rid is not None and (tid is None or uid is None):
                r = s.responses.get(rid)
                if r is not None:
                    tid = tid if tid is not None else r[0]
                    uid = uid if uid is not None else r[1]
            ids = {
                "session": "",
                "response_id": rid,
                "playback_id": pid,
                "task_id": tid,
                "utterance_id": uid,
            }
            applied: tuple[int, int] | None = None
            for phase, i, m in entries:
                # entries are sorted by (phase, metric): a role applies once per event even
                # when several of its matches accept it
                if applied == (phase, i) or not m.data_ok(data):
                    continue
                applied = (phase, i)
                self._apply(s, phase, i, event, t, ids, out)
        self._update_state(s, event)
        return out

    def feed(self, events: Iterable[Event]) -> Iterator[LatencyPair]:
        """``add`` every event, then ``finish``: all pairs of the stream, as they complete."""
        for event in events:
            yield from self.add(event)
        yield from self.finish()

    def end_session(self, session_id: str) -> list[LatencyPair]:
        """Resolve a session's open starts (censored at its last time) and forget it."""
        out: list[LatencyPair] = []
        s = self._sessions.pop(session_id, None)
        self._pending_meta.pop(session_id, None)
        if s is not None:
            self._close(s, out)
        return out

    def finish(self) -> list[LatencyPair]:
        """End every open session."""
        out: list[LatencyPair] = []
        while self._sessions:
            _, s = self._sessions.popitem(last=False)
            self._close(s, out)
        return out

    @property
    def open_starts(self) -> int:
        """Starts currently waiting for their end (the accumulator's working set)."""
        return self._n_open

    def diagnostics(self) -> dict[str, Any]:
        """Counts per metric (started, pairs, censored and every reason a start was not
        counted) and for the stream (events, sessions, non-monotonic timestamps, peak open)."""
        return {
            "version": METRICS_VERSION,
            **{k: int(v) for k, v in sorted(self.totals.items())},
            "metrics": {name: dict(sorted(c.items())) for name, c in self.counts.items()},
        }

    # ------------------------------------------------------------------ internals

    def _session(self, sid: str, out: list[LatencyPair]) -> _Session:
        s = self._sessions.get(sid)
        if s is not None:
            self._sessions.move_to_end(sid)
            return s
        meta, clocks = self._pending_meta.pop(sid, (None, {}))
        if meta is None:
            meta = self._lookup_meta(sid)
        s = _Session(sid, meta, len(self.defs))
        for c in clocks.values():
            self._add_clock(s, c)
        self._sessions[sid] = s
        self.totals["sessions"] += 1
        while len(self._sessions) > self.max_sessions:
            _, old = self._sessions.popitem(last=False)
            self.totals["sessions_ended_by_limit"] += 1
            self._close(old, out)
        return s

    def _lookup_meta(self, sid: str) -> SessionMeta:
        src = self._meta
        found: SessionMeta | None = None
        if callable(src):
            found = src(sid)
        elif src is not None:
            found = src.get(sid)
        return found if found is not None else NO_META

    @staticmethod
    def _add_clock(s: _Session, clock: ProducerClock) -> None:
        old = s.clocks.get(clock.producer)
        if old is None or clock.uncertainty_ns <= old.uncertainty_ns:
            s.clocks[clock.producer] = clock

    @staticmethod
    def _enrich(s: _Session, event: Event) -> dict[str, Any]:
        data = event.data
        if all(k in data for k in _ENRICHED_KEYS):
            return data
        seg = data.get("segment_id") or event.utterance_id
        extra = s.meta.segments.get(seg) if isinstance(seg, str) else None
        return {**extra, **data} if extra else data

    def _apply(
        self,
        s: _Session,
        phase: int,
        i: int,
        event: Event,
        t: int,
        ids: dict[str, str | None],
        out: list[LatencyPair],
    ) -> None:
        d = self.defs[i]
        st = s.defs[i]
        counts = self.counts[d.name]
        if phase in (_START, _FSTART):
            self._start(s, i, event, t, ids, phase == _FSTART, out)
            return
        if phase == _REQUIRES:
            st.required_seen = True
            return
        if phase == _UNTIL:
            if not st.primary_seen:
                st.primary_seen = True
                for o in [o for o in st.open.values() if o.fallback]:
                    self._drop(s, o, "superseded")
            return
        if phase == _RESUME:
            st.speaking = True
            for o in st.open.values():
                if o.cand_ns is not None:
                    o.cand_ns = o.cand_id = None
                    counts["resumed"] += 1
            return
        if d.end_rule == "silence" and phase == _END:
            st.speaking = False
            st.last_stop = t
            for o in st.open.values():
                if o.cand_ns is None:
                    o.cand_ns, o.cand_id = t, event.event_id
                    s.cands.append(o)
            return
        key = ids[d.join]
        if key is None:
            return
        cur = st.open.get(key)
        if phase in (_CANCEL, _FCANCEL):
            if cur is not None and cur.fallback == (phase == _FCANCEL):
                self._drop(s, cur, "cancelled")
            return
        if phase == _CLOSES:
            if d.already:
                _remember(st.seen_end, key, event.event_id, self.memory)
            if cur is not None:
                self._emit(s, cur, None, None, out, censored_at=t)
            return
        if phase == _END:
            if d.end_rule == "last":
                _remember(st.last_end, key, (t, event.event_id), self.memory)
                if cur is not None:
                    cur.cand_ns, cur.cand_id = t, event.event_id
                return
            if d.already:
                _remember(st.seen_end, key, event.event_id, self.memory)
            if cur is not None:
                self._emit(s, cur, t, event.event_id, out)
            else:
                counts["unmatched_ends"] += 1
            return
        if phase == _FINAL:
            _remember(st.finished, key, t, self.memory)
            if cur is not None:
                self._emit_candidate(s, cur, out)

    def _start(
        self,
        s: _Session,
        i: int,
        event: Event,
        t: int,
        ids: dict[str, str | None],
        fallback: bool,
        out: list[LatencyPair],
    ) -> None:
        d = self.defs[i]
        st = s.defs[i]
        counts = self.counts[d.name]
        if fallback and st.primary_seen:
            return
        uid = ids["utterance_id"] or event.data.get("utterance_id")  # aligned acoustic
        if d.once_per_utterance and isinstance(uid, str):
            if uid in st.used_utt:
                counts["same_utterance"] += 1
                return
            _remember(st.used_utt, uid, None, self.memory)
        key = self._active(s, d.join) if d.bind else ids[d.join]
        if key is None:
            counts["unbound"] += 1
            return
        if (
            d.end_rule == "silence"
            and not st.speaking
            and (st.last_stop is None or t - st.last_stop >= self._settle_ns[i])
        ):
            counts["unbound"] += 1  # no agent speech running at the onset: nothing to stop
            return
        old = st.open.get(key)
        if old is not None:
            if d.on_repeat == "keep":
                counts["repeated"] += 1
                return
            self._drop(s, old, "restarted")
        o = _Open(i, key, t, event.event_id, fallback, s.route)
        counts["started"] += 1
        if d.end_rule == "first" and d.already and key in st.seen_end:
            self._emit(s, o, t, st.seen_end[key], out, opened=False)
            return
        if d.end_rule == "last":
            last = st.last_end.get(key)
            if last is not None:
                o.cand_ns, o.cand_id = last
            if key in st.finished:
                self._emit_candidate(s, o, out, opened=False)
                return
        if d.end_rule == "silence" and not st.speaking:
            o.cand_ns, o.cand_id = st.last_stop, None
            s.cands.append(o)
        st.open[key] = o
        self._n_open += 1
        if self._n_open > self.totals["peak_open_starts"]:
            self.totals["peak_open_starts"] = self._n_open
        heapq.heappush(s.heap, (t + self._horizon_ns[i], next(self._counter), o))

    @staticmethod
    def _active(s: _Session, join: str) -> str | None:
        """The playback playing now (latest started), or its response; without a playing
        playback, the latest response that is not done."""
        if s.active:
            pid = next(reversed(s.active))
            return pid if join == "playback_id" else s.active[pid]
        if join == "playback_id":
            return None
        for rid in reversed(s.responses):
            if not s.responses[rid][2]:
                return rid
        return None

    def _update_state(self, s: _Session, event: Event) -> None:
        et = event.event_type
        if et == "response.created" and event.response_id:
            _remember(
                s.responses,
                event.response_id,
                [event.task_id, event.utterance_id, False],
                self.memory,
            )
        elif et == "response.done" and event.response_id:
            r = s.responses.get(event.response_id)
            if r is None:
                _remember(s.responses, event.response_id, [None, None, True], self.memory)
            else:
                r[2] = True
        elif et == "playback.started" and event.playback_id:
            rid = event.response_id
            s.active[event.playback_id] = rid
            _remember(s.pb_resp, event.playback_id, rid, self.memory)
        elif et in _PLAYBACK_ENDS and event.playback_id:
            s.active.pop(event.playback_id, None)

    def _expire(self, s: _Session, hw: int, out: list[LatencyPair]) -> None:
        while s.heap and s.heap[0][0] < hw:
            _, _, o = heapq.heappop(s.heap)
            if o.alive:
                self.counts[self.defs[o.d].name]["horizon"] += 1
                self._resolve(s, o, hw, out)

    def _confirm(self, s: _Session, hw: int, out: list[LatencyPair]) -> None:
        keep: list[_Open] = []
        for o in s.cands:
            if not o.alive or o.cand_ns is None:
                continue
            if o.cand_ns + self._settle_ns[o.d] <= hw:
                self._emit_candidate(s, o, out)
            else:
                keep.append(o)
        s.cands = keep

    def _resolve(self, s: _Session, o: _Open, at: int, out: list[LatencyPair]) -> None:
        """An open start whose wait is over (session end or horizon)."""
        d = self.defs[o.d]
        if d.requires and not s.defs[o.d].required_seen:
            self._drop(s, o, "not_measurable")
        elif d.end_rule == "last" or (d.end_rule == "silence" and o.cand_ns is not None):
            self._emit_candidate(s, o, out)
        else:
            self._emit(s, o, None, None, out, censored_at=at)

    def _close(self, s: _Session, out: list[LatencyPair]) -> None:
        at = s.hw if s.hw is not None else 0
        if s.cands:
            self._confirm(s, at, out)
        opens = [o for st in s.defs for o in st.open.values()]
        opens.sort(key=lambda o: (o.t0, o.d))
        for o in opens:
            self._resolve(s, o, at, out)

    def _emit_candidate(
        self, s: _Session, o: _Open, out: list[LatencyPair], opened: bool = True
    ) -> None:
        """Emit with the candidate end (clamped to the start: that state already held)."""
        if o.cand_ns is None or o.cand_ns < o.t0:
            self._emit(s, o, o.t0, o.cand_id, out, opened=opened)
        else:
            self._emit(s, o, o.cand_ns, o.cand_id, out, opened=opened)

    def _unlink(self, s: _Session, o: _Open) -> None:
        o.alive = False
        st = s.defs[o.d]
        if st.open.get(o.key) is o:
            del st.open[o.key]
            self._n_open -= 1

    def _drop(self, s: _Session, o: _Open, reason: str) -> None:
        self._unlink(s, o)
        self.counts[self.defs[o.d].name][reason] += 1

    def _emit(
        self,
        s: _Session,
        o: _Open,
        end_ns: int | None,
        end_id: str | None,
        out: list[LatencyPair],
        *,
        censored_at: int | None = None,
        opened: bool = True,
    ) -> None:
        if opened:
            self._unlink(s, o)
        else:
            o.alive = False
        name = self.defs[o.d].name
        counts = self.counts[name]
        counts["pairs"] += 1
        if end_ns is None:
            counts["censored"] += 1
        elif end_ns < o.t0:
            counts["negative"] += 1
        out.append(
            LatencyPair(
                metric=name,
                session_id=s.sid,
                key=o.key,
                start_ns=o.t0,
                end_ns=end_ns,
                censored_after_ms=(
                    None
                    if end_ns is not None
                    else max(0, (o.t0 if censored_at is None else censored_at) - o.t0) / 1e6
                ),
                route=o.route,
                meta=s.meta,
                start_event_id=o.start_id,
                end_event_id=end_id,
                source="fallback" if o.fallback else "primary",
            )
        )


def pairs_from_events(
    events: Iterable[Event],
    meta: Mapping[str, SessionMeta] | None = None,
    *,
    defs: Sequence[PairDef] = DEFAULT_PAIRS,
    horizon_ms: float = DEFAULT_HORIZON_MS,
) -> list[LatencyPair]:
    """Pairs of a finite ledger (e.g. one bundle's ``events.jsonl``): events are put in causal
    order and each session's clock records apply to all of its events. Holds the ledger in
    memory; for long streams feed a ``MetricAccumulator`` instead."""
    evs = order_by_causality(events)
    acc = MetricAccumulator(defs, horizon_ms=horizon_ms, max_sessions=1 << 30)
    by_session: dict[str, list[Event]] = {}
    for e in evs:
        by_session.setdefault(e.session_id, []).append(e)
    for sid, mine in by_session.items():
        acc.open_session(sid, (meta or {}).get(sid), producer_clocks(mine))
    return list(acc.feed(evs))


# --------------------------------------------------------------------------- summaries


def summarize(
    pairs: Iterable[LatencyPair],
    split_by: Sequence[SplitSpec] = SPLIT_FIELDS,
    *,
    defs: Sequence[PairDef] = DEFAULT_PAIRS,
    n_boot: int = 1000,
    seed: int = 0,
    accumulator: MetricAccumulator | None = None,
) -> dict[str, Any]:
    """Summaries of ``pairs`` (consumed once; any iterable, e.g. ``accumulator.feed(events)``)
    per metric and per value of each split (a field name, or a tuple of names for their
    combinations). See ``LatencyTable.summary``; ``accumulator`` adds its ``diagnostics()``."""
    out = LatencyTable(defs).extend(pairs).summary(split_by, n_boot=n_boot, seed=seed)
    if accumulator is not None:
        out["diagnostics"] = accumulator.diagnostics()
    return out
