"""The causal slice of a failed task check: from the tool call or state that failed back through the agent's decision, the utterance it acted on and the user's words (by id where the ledger links them, by time otherwise), with the first gate that missed (heard, decided, acted)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.vocabulary import Role
from voxassay.suites.duplex.evidence.ledger import order_by_causality, producer_clocks, session_ns
from voxassay.suites.duplex.scoring.task_context import (
    TaskCheck,
)
from voxassay.suites.duplex.scoring.values import (
    canonical_value,
    text_mentions,
    values_equal,
)

__all__ = [
    "UNKNOWN_ROOT_CAUSE",
    "Gate",
    "Layer",
    "UtteranceLink",
    "UtteranceLinks",
    "task_failure_slice",
]


Layer = Literal["perception", "decision", "control", "playback", "unknown"]


UNKNOWN_ROOT_CAUSE = "unknown root cause"


_UTT_END_TYPES = ("vad.speech_stopped", "asr.final", "asr.partial")


_AGENT_UTT_TYPES = ("vad.speech_started", "vad.speech_stopped", "asr.partial", "asr.final")


_TRUTH_TYPES = ("user.speech_started", "user.speech_stopped")


def _fmt_span(span: tuple[float, float]) -> str:
    end = "end" if math.isinf(span[1]) else f"{span[1]:.3f}"
    return f"{span[0]:.3f}-{end} s"


@dataclass(frozen=True)
class UtteranceLink:
    """One agent utterance linked to one scenario segment it heard.

    ``how``: ``id`` (a truth event carries the agent's utterance id) or ``time`` (the spans
    overlap); ``overlap_ms``: the overlap of the two spans (None when the agent utterance has
    no span); spans in seconds on the clock of the times the links were built from.
    """

    utterance_id: str
    segment_id: str
    how: Literal["id", "time"]
    overlap_ms: float | None
    utterance_span: tuple[float, float] | None
    segment_span: tuple[float, float] | None

    def note(self) -> str:
        if self.how == "id":
            return f"linked by id: the truth events of segment {self.segment_id} carry {self.utterance_id}"
        assert self.utterance_span is not None and self.segment_span is not None
        return (
            f"linked by time: agent utterance {self.utterance_id} "
            f"({_fmt_span(self.utterance_span)}) overlaps segment {self.segment_id}'s truth span "
            f"({_fmt_span(self.segment_span)}) by {self.overlap_ms:.0f} ms"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "utterance_id": self.utterance_id,
            "segment_id": self.segment_id,
            "link": self.how,
            "overlap_ms": self.overlap_ms,
        }


@dataclass(frozen=True)
class _TruthSpan:
    segment_id: str
    role: str | None
    utterance_id: str | None
    start: float
    end: float
    start_event: Event


class UtteranceLinks:
    """Agent utterances linked to the scenario segments they heard, by id or by time.

    A live agent names utterances by its own ids (``vad.speech_started``, ``asr.*``,
    ``turn.decision``, ``response.created`` carry ``utterance_id`` = ``u2``), the scenario
    truth (``user.speech_started/stopped``, producer harness) by the segment id (in
    ``data.segment_id``, else the ``utterance_id``). The rule:

    - **agent utterance span**: from its first ``vad.speech_started`` (else first
      ``asr.partial``) to its last ``vad.speech_stopped`` (else last ``asr.final``, else last
      ``asr.partial``; none: the end of the ledger). Without a start event it has no span;
    - **truth span** of a user segment: its first ``user.speech_started`` to the first
      ``user.speech_stopped`` after it (none: the next truth onset, else the end of the
      ledger). Only ``user`` segments are linked (``data.role`` user or absent);
    - **by id**: when a truth event carries the agent's utterance id (the convention of a
      harness that shares ids), that segment is the link, unless the agent utterance has a
      span that does not overlap it (ids that merely coincide: then the time rule decides);
    - **by time**: otherwise the user segments whose truth span overlaps the agent
      utterance's span (overlap > 0), largest overlap first (ties: the earlier segment).
      No overlap (or no span): no link, and the reason says why.

    Times are seconds on one clock (session seconds, or audio seconds), given with the events.
    """

    def __init__(self, timed: Iterable[tuple[Event, float]]) -> None:
        pairs = sorted(timed, key=lambda x: x[1])
        self.end = pairs[-1][1] if pairs else 0.0
        vad_starts: dict[str, list[float]] = defaultdict(list)
        partial_starts: dict[str, list[float]] = defaultdict(list)
        ends: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.agent_ids: set[str] = set()
        truth_start: dict[str, tuple[Event, float]] = {}
        truth_stop: dict[str, list[float]] = defaultdict(list)
        onsets: list[float] = []
        for e, t in pairs:
            if e.event_type in _TRUTH_TYPES:
                sid = e.data.get("segment_id")
                sid = sid if isinstance(sid, str) and sid else e.utterance_id
                if not sid:
                    continue
                if e.event_type == "user.speech_started":
                    onsets.append(t)
                    truth_start.setdefault(sid, (e, t))
                else:
                    truth_stop[sid].append(t)
                continue
            uid = e.utterance_id
            if not uid or e.event_type not in (*_AGENT_UTT_TYPES, "turn.decision"):
                continue
            self.agent_ids.add(uid)
            if e.event_type == "vad.speech_started":
                vad_starts[uid].append(t)
            elif e.event_type == "asr.partial":
                partial_starts[uid].append(t)
            if e.event_type in _UTT_END_TYPES:
                ends[uid][e.event_type].append(t)
        self.spans: dict[str, tuple[float, float]] = {}
        for uid in self.agent_ids:
            first = vad_starts.get(uid) or partial_starts.get(uid)
            if not first:
                continue
            a = min(first)
            end_of = ends.get(uid, {})
            closing = next((end_of[k] for k in _UTT_END_TYPES if end_of.get(k)), None)
            b = max(closing) if closing else self.end
            self.spans[uid] = (a, max(a, b))
        self.truth: dict[str, _TruthSpan] = {}
        self.truth_ids: dict[str, str] = {}
        for sid, (e, t) in truth_start.items():
            stop = min((x for x in truth_stop.get(sid, []) if x >= t), default=None)
            if stop is None:
                stop = min((x for x in onsets if x > t), default=max(self.end, t))
            role = e.data.get("role")
            self.truth[sid] = _TruthSpan(
                sid, str(role) if role is not None else None, e.utterance_id, t, stop, e
            )
            if e.utterance_id:
                self.truth_ids.setdefault(e.utterance_id, sid)

    @staticmethod
    def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
        return min(a[1], b[1]) - max(a[0], b[0])

    def _is_user(self, seg: _TruthSpan) -> bool:
        return seg.role in (None, "", str(Role.USER))

    def start_event(self, segment_id: str) -> Event | None:
        """The segment's first ``user.speech_started``."""
        seg = self.truth.get(segment_id)
        return seg.start_event if seg else None

    def segment_span(self, segment_id: str) -> tuple[float, float] | None:
        seg = self.truth.get(segment_id)
        return (seg.start, seg.end) if seg else None

    def _time_links(self, uid: str, span: tuple[float, float]) -> list[UtteranceLink]:
        out = []
        for seg in self.truth.values():
            if not self._is_user(seg):
                continue
            ov = self._overlap(span, (seg.start, seg.end))
            if ov > 0:
                out.append(
                    UtteranceLink(
                        uid, seg.segment_id, "time", round(ov * 1000, 1), span, (seg.start, seg.end)
                    )
                )
        out.sort(key=lambda lk: (-(lk.overlap_ms or 0.0), (lk.segment_span or (0.0, 0.0))[0]))
        return out

    def segments_for(self, utterance_id: str) -> tuple[list[UtteranceLink], str]:
        """The scenario segments an agent utterance heard, best first, and why there are none."""
        span = self.spans.get(utterance_id)
        by_time = self._time_links(utterance_id, span) if span is not None else []
        same = self.truth_ids.get(utterance_id)
        if same is not None:
            hit = next((lk for lk in by_time if lk.segment_id == same), None)
            if span is None or hit is not None:
                seg = self.truth[same]
                first = UtteranceLink(
                    utterance_id,
                    same,
                    "id",
                    hit.overlap_ms if hit else None,
                    span,
                    (seg.start, seg.end),
                )
                return [first, *(lk for lk in by_time if lk.segment_id != same)], ""
        if by_time:
            return by_time, ""
        if span is None:
            return [], (
                f"utterance {utterance_id} has no user.speech_started (input) carrying its id and "
                "no vad.speech_started or asr.partial to place it in time"
            )
        why = (
            f"utterance {utterance_id} ({_fmt_span(span)}) overlaps no user segment's truth span "
            "(user.speech_started..stopped)"
        )
        others = [
            f"{seg.role} segment {seg.segment_id}"
            for seg in self.truth.values()
            if not self._is_user(seg) and self._overlap(span, (seg.start, seg.end)) > 0
        ]
        if others:
            why += "; it overlaps only " + ", ".join(others)
        if same is not None:
            why += f"; truth segment {same} carries the same id but lies elsewhere in time"
        before = [s for s in self.truth.values() if self._is_user(s) and s.end <= span[0]]
        if before:
            last = max(before, key=lambda s: s.end)
            why += (
                f"; the latest user segment before it, {last.segment_id}, ended "
                f"{span[0] - last.end:.3f} s before it started (the agent's events may lag "
                "the audio)"
            )
        if not self.truth:
            why += "; the ledger has no user.speech_started truth events"
        return [], why

    def next_after(self, segment_id: str) -> tuple[str, float] | None:
        """The first agent utterance that starts after the segment's truth end, and how long
        after (s): where an agent that heard the segment late shows it."""
        seg = self.truth.get(segment_id)
        if seg is None or math.isinf(seg.end):
            return None
        later = [(span[0], uid) for uid, span in self.spans.items() if span[0] >= seg.end]
        if not later:
            return None
        t0, uid = min(later)
        return uid, t0 - seg.end

    def utterances_for(
        self, segment_id: str, truth_utterance_id: str | None = None
    ) -> list[UtteranceLink]:
        """The agent utterances that heard a segment, best first: the agent utterance with the
        segment's truth id (when its span, if any, overlaps the segment), then every agent
        utterance whose span overlaps the segment's truth span, largest overlap first."""
        seg = self.truth.get(segment_id)
        tid = truth_utterance_id or (seg.utterance_id if seg else None) or segment_id
        seg_span = (seg.start, seg.end) if seg else None
        out: list[UtteranceLink] = []
        if seg_span is not None:
            for uid, span in self.spans.items():
                ov = self._overlap(span, seg_span)
                if ov > 0:
                    out.append(
                        UtteranceLink(uid, segment_id, "time", round(ov * 1000, 1), span, seg_span)
                    )
            out.sort(key=lambda lk: (-(lk.overlap_ms or 0.0), (lk.utterance_span or (0.0, 0.0))[0]))
        for cand in dict.fromkeys((tid, segment_id)):
            if cand not in self.agent_ids:
                continue
            hit = next((lk for lk in out if lk.utterance_id == cand), None)
            if hit is not None or cand not in self.spans or seg_span is None:
                first = UtteranceLink(
                    cand,
                    segment_id,
                    "id",
                    hit.overlap_ms if hit else None,
                    self.spans.get(cand),
                    seg_span,
                )
                return [first, *(lk for lk in out if lk.utterance_id != cand)]
        return out


@dataclass
class _Ledger:
    events: list[Event]
    time_ns: dict[str, int]
    links: UtteranceLinks

    @classmethod
    def of(cls, events: Iterable[Event]) -> _Ledger:
        evs = order_by_causality(events)
        clocks = producer_clocks(evs)
        times = {e.event_id: session_ns(e, clocks) for e in evs}
        links = UtteranceLinks((e, times[e.event_id] / 1e9) for e in evs)
        return cls(evs, times, links)

    def t(self, e: Event) -> int:
        return self.time_ns[e.event_id]

    def find(self, event_type: str | None = None, **attrs: Any) -> list[Event]:
        out = []
        for e in self.events:
            if event_type is not None and e.event_type != event_type:
                continue
            if all(
                (e.data.get(k[5:]) if k.startswith("data_") else getattr(e, k, None)) == v
                for k, v in attrs.items()
            ):
                out.append(e)
        return out

    def has_type(self, event_type: str) -> bool:
        return any(e.event_type == event_type for e in self.events)


def _link(step: str, ident: str | None, event: Event | None, note: str = "") -> dict[str, Any]:
    return {
        "step": step,
        "id": ident,
        "event_id": event.event_id if event else None,
        "event_type": event.event_type if event else None,
        "note": note,
    }


def _walk_back(
    call: Mapping[str, Any], led: _Ledger, delivered: bool
) -> tuple[list[dict[str, Any]], str | None, str]:
    """Links from the outcome back to the input segment; (chain, utterance_id, break note)."""
    chain: list[dict[str, Any]] = []
    call_id = call.get("call_id")
    if delivered and call.get("delivered_response_id"):
        rid = call["delivered_response_id"]
        play = led.find("playback.started", response_id=rid)
        chain.append(_link("delivery", rid, play[0] if play else None, "the announcement"))
    done = led.find("tool.completed", data_call_id=call_id) or led.find(
        "tool.failed", data_call_id=call_id
    )
    req = led.find("tool.requested", data_call_id=call_id)
    outcome_events = done or req
    chain.append(
        _link("outcome", call_id, outcome_events[0] if outcome_events else None, "the tool call")
    )
    task_id = call.get("task_id") or (req[0].task_id if req else None)
    if task_id:
        states = led.find("task.state", task_id=task_id)
        chain.append(_link("task", task_id, states[-1] if states else (req[0] if req else None)))
    response_id = call.get("response_id") or (req[0].response_id if req else None)
    if not response_id and task_id:
        response_id = next(
            (e.response_id for e in led.find(None, task_id=task_id) if e.response_id), None
        )
    if not response_id:
        return (
            chain,
            None,
            f"call {call_id} names no response (no response_id on the call or its tool.requested)",
        )
    created = led.find("response.created", response_id=response_id)
    chain.append(_link("response", response_id, created[0] if created else None))
    utterance_id = next(
        (
            e.utterance_id
            for e in [
                *created,
                *led.find("turn.decision", response_id=response_id),
                *led.find(None, response_id=response_id),
            ]
            if e.utterance_id
        ),
        None,
    )
    if not utterance_id:
        return chain, None, f"response {response_id} names no utterance"
    decision = led.find("turn.decision", utterance_id=utterance_id)
    if decision:
        chain.append(_link("decision", utterance_id, decision[-1]))
    asr = led.find("asr.final", utterance_id=utterance_id)
    chain.append(_link("utterance", utterance_id, asr[-1] if asr else None))
    links, why = led.links.segments_for(utterance_id)
    if not links:
        return chain, utterance_id, why
    best = links[0]
    note = "scenario segment, " + best.note()
    if len(links) > 1:
        note += "; also overlaps " + ", ".join(
            f"{lk.segment_id} ({lk.overlap_ms:.0f} ms)" for lk in links[1:]
        )
    step = _link("input", best.segment_id, led.links.start_event(best.segment_id), note)
    step.update(
        link=best.how,
        overlap_ms=best.overlap_ms,
        also=[lk.to_dict() for lk in links[1:]],
    )
    chain.append(step)
    return chain, utterance_id, ""


Gate = tuple[str, Layer, bool | None, str]


def _heard_gate(
    trigger: Mapping[str, Any] | None, led: _Ledger, values: Mapping[str, Any] | None
) -> Gate:
    """The trigger utterance reached ASR (and, with ``values``, its text says one of them).

    A trigger that is a scenario segment is heard by the agent utterances linked to it
    (``UtteranceLinks.utterances_for``: by id, else by time overlap)."""
    if not trigger or not trigger.get("utterance_id"):
        return ("heard", "perception", None, "no user utterance to check")
    if not led.has_type("asr.final"):
        return ("heard", "perception", None, "the ledger has no asr.final events")
    utts, how = _trigger_utterances(trigger, led)
    finals = [e for e in led.find("asr.final") if e.utterance_id in utts]
    if not finals:
        sid = trigger.get("segment_id")
        if utts:
            what = f"utterance(s) {', '.join(utts)} ({how})"
        elif sid:
            what = f"segment {sid} (no agent utterance overlaps it in time"
            nxt = led.links.next_after(str(sid))
            if nxt is not None:
                what += f"; the next one, {nxt[0]}, starts {nxt[1]:.3f} s after its end"
            what += ")"
        else:
            what = f"utterance {trigger.get('utterance_id')}"
        return ("heard", "perception", False, f"no asr.final for {what}: missed")
    text = " ".join(str(e.data.get("text") or "") for e in finals)
    src = f" ({how})" if how else ""
    if not values:
        return ("heard", "perception", True, f"asr.final: {text!r}{src}")
    said = trigger.get("say")
    for v in values.values():
        if text_mentions(text, v):
            return ("heard", "perception", True, f"asr.final {text!r} says {v!r}{src}")
    if said and not any(text_mentions(str(said), v) for v in values.values()):
        return ("heard", "perception", None, f"the scenario text {said!r} does not name the value")
    wanted = ", ".join(repr(v) for v in values.values())
    return ("heard", "perception", False, f"asr.final {text!r} lacks {wanted}: misheard{src}")


def _trigger_utterances(trigger: Mapping[str, Any], led: _Ledger) -> tuple[list[str], str]:
    """The agent utterance ids that heard a trigger, best first, and how they were linked: a
    scenario segment through ``UtteranceLinks.utterances_for``; an agent event's own
    utterance id (a ``task.state`` trigger) as it is."""
    sid = trigger.get("segment_id")
    if sid and trigger.get("source", "scenario") == "scenario":
        links = led.links.utterances_for(str(sid), trigger.get("utterance_id"))
        if not links:
            return [], ""
        how = links[0].note()
        if len(links) > 1:
            how += "; also " + ", ".join(
                f"{lk.utterance_id} ({lk.overlap_ms:.0f} ms)" for lk in links[1:]
            )
        return [lk.utterance_id for lk in links], how
    utt = trigger.get("utterance_id")
    return ([str(utt)], "") if utt else ([], "")


def _decided_stop_gate(trigger: Mapping[str, Any] | None, led: _Ledger) -> Gate:
    """A ``turn.decision`` of the stop's utterance(s) in the expected set (any one of them:
    an agent that first interrupts and then answers the stop did decide to stop)."""
    if not trigger or not trigger.get("utterance_id"):
        return ("decided", "decision", None, "no user utterance")
    utts, how = _trigger_utterances(trigger, led)
    decisions = [e for e in led.find("turn.decision") if e.utterance_id in utts]
    if not decisions:
        return ("decided", "decision", None, "no turn.decision for the stop")
    ok = set(trigger.get("expected_actions") or []) or {"interrupt", "pause"}
    hit = next((e for e in decisions if str(e.data.get("action") or "") in ok), None)
    action = str((hit or decisions[-1]).data.get("action") or "")
    src = f" ({how})" if how else ""
    return (
        "decided",
        "decision",
        hit is not None,
        f"turn.decision {action!r} (expected {sorted(ok)}){src}",
    )


def _acted_gate(
    trigger: Mapping[str, Any] | None, led: _Ledger, call: Mapping[str, Any], requested: bool
) -> Gate:
    """The agent acted on the stop: a task.state cancel after it or a compensation request."""
    t0 = (trigger or {}).get("ns")
    cancels = [
        e
        for e in led.find("task.state")
        if (
            str(e.data.get("status") or "").casefold() in {"cancelled", "canceled"}
            or str(e.data.get("action") or "").casefold() == "cancel"
        )
        and (t0 is None or led.t(e) >= t0)
        and (call.get("task_id") is None or e.task_id in (None, call.get("task_id")))
    ]
    if cancels or requested:
        what = f"task.state cancel {cancels[0].event_id}" if cancels else "compensation requested"
        return ("acted", "decision", True, what)
    return ("acted", "decision", False, "no task.state cancel and no compensating call requested")


def task_failure_slice(check: TaskCheck, events: Iterable[Event]) -> dict[str, Any]:
    """Causal slice of a failed task check: from the bad outcome back to the input.

    Walks from the first failing call (or the announcement that delivered it) through its
    task_id, response_id and utterance_id to the input segment (``user.speech_started``),
    then runs the check's gates in order and names the layer of the first failing gate.

    Utterance to input: a live agent names utterances by its own ids, the scenario truth by
    the segment id, so the agent utterance is linked to the scenario segment it heard by the
    rule of ``UtteranceLinks``: by id when a truth event carries the agent's utterance id
    (and the times do not contradict it), else **by time**: the user segment whose truth span
    (``user.speech_started`` .. ``user.speech_stopped``) overlaps the agent utterance's span
    (its ``vad.speech_started`` .. ``vad.speech_stopped``, else .. ``asr.final``) the most;
    the input link says how it was made (``link``: ``id`` | ``time``, ``overlap_ms``, and the
    other overlapping segments in ``also``). No overlapping segment: the chain breaks with
    the reason. The same rule links a trigger segment to the agent utterances that heard it
    (the *heard* and *decided* gates). Layers:
    perception (the stop/correction/change utterance has no ``asr.final``, or its text lacks
    the corrected value), decision (wrong ``turn.decision``, no action on a cancel, wrong tool
    or arguments, a second decision to write), control (a cancel or correction not propagated:
    an in-flight call committed, a write after stop, a retry or replay without idempotency),
    playback (a superseded result was played). The last passing gate is the last one that
    passed before the first failing one (gates after it are not read as progress). When the
    chain breaks the layer is ``unknown`` (root cause: ``unknown root cause``).
    """
    out: dict[str, Any] = {
        "check": check.name,
        "passed": check.passed,
        "outcome": None,
        "trigger": check.details.get("trigger"),
        "chain": [],
        "event_ids": [],
        "gates": [],
        "last_passing_gate": None,
        "first_failing_gate": None,
        "layer": None,
        "root_cause": None,
        "reason": "",
    }
    if check.passed is not False:
        out["reason"] = "the check did not fail: nothing to slice"
        return out
    led = _Ledger.of(events)
    details = check.details
    calls = details.get("calls") or []
    if not calls:
        out.update(
            layer="unknown",
            root_cause=UNKNOWN_ROOT_CAUSE,
            reason="no tool call to walk back from",
        )
        return out
    call = calls[0]
    out["outcome"] = {"call_id": call.get("call_id"), "tool": call.get("tool")}
    delivered = check.name in ("stale_result_interception", "delivery_correctness")
    chain, _, broken = _walk_back(call, led, delivered)
    out["chain"] = chain
    out["event_ids"] = [link["event_id"] for link in chain if link["event_id"]]
    if broken:
        out.update(layer="unknown", root_cause=UNKNOWN_ROOT_CAUSE, reason=f"chain breaks: {broken}")
        return out
    gates = _gates(check, call, led)
    out["gates"] = [{"gate": g[0], "layer": g[1], "passed": g[2], "note": g[3]} for g in gates]
    stop = next((i for i, g in enumerate(gates) if g[2] is False), len(gates))
    passing = [g for g in gates[:stop] if g[2] is True]
    failing = next((g for g in gates if g[2] is False), None)
    out["last_passing_gate"] = passing[-1][0] if passing else None
    if failing is None:
        out.update(layer="unknown", root_cause=UNKNOWN_ROOT_CAUSE, reason="no gate failed")
        return out
    out.update(
        first_failing_gate=failing[0],
        layer=failing[1],
        root_cause=failing[1],
        reason=failing[3],
    )
    return out


def _gates(check: TaskCheck, call: Mapping[str, Any], led: _Ledger) -> list[Gate]:
    d = check.details
    trigger = d.get("trigger")
    name = check.name
    if name == "goal_completion":
        kind = (trigger or {}).get("kind")
        name = {"stop": "cancellation", "correction": "parameter_consistency"}.get(
            str(kind), "goal_completion"
        )
    if name == "parameter_consistency":
        values = d.get("expected_values") or {}
        gates: list[Gate] = [_heard_gate(trigger, led, values)]
        t0 = (trigger or {}).get("ns")
        later_states = [e for e in led.find("task.state") if t0 is None or led.t(e) >= t0]
        if later_states:
            held = any(
                text_mentions(canonical_value(e.data.get("fields")), v)
                or any(values_equal(x, v) for x in (e.data.get("fields") or {}).values())
                for e in later_states
                for v in values.values()
            )
            gates.append(
                (
                    "understood",
                    "decision",
                    held,
                    "task.state after the correction "
                    + ("holds" if held else "does not hold")
                    + " the latest value",
                )
            )
        else:
            gates.append(("understood", "decision", None, "no task.state after the correction"))
        in_flight = t0 is not None and int(call.get("requested_ns") or 0) < t0
        gates.append(
            (
                "in_flight_cancelled",
                "control",
                not in_flight,
                "the call was requested before the correction and still committed"
                if in_flight
                else "the call was requested after the correction",
            )
        )
        gates.append(("arguments", "decision", False, "committed with the old value"))
        return gates
    if name == "write_after_stop":
        return [
            _heard_gate(trigger, led, None),
            _decided_stop_gate(trigger, led),
            ("propagated", "control", False, "a write was committed after the stop"),
        ]
    if name == "cancellation":
        requested = bool((d.get("compensation_requested") or {}).get(call.get("call_id")))
        return [
            _heard_gate(trigger, led, None),
            _decided_stop_gate(trigger, led),
            _acted_gate(trigger, led, call, requested),
            ("propagated", "control", False, "the write still stands"),
        ]
    if name == "compensation":
        requested = bool((d.get("compensation_requested") or {}).get(call.get("call_id")))
        return [
            _heard_gate(trigger, led, None),
            (
                "compensation_requested",
                "decision",
                requested,
                "a compensating call was requested"
                if requested
                else "no compensating call was requested",
            ),
            ("compensation_committed", "control", False, "no compensating call committed"),
        ]
    if name in ("duplicate_side_effects", "reconnect_consistency"):
        original = (d.get("related") or {}).get(call.get("call_id")) or {}
        r1, r2 = original.get("response_id"), call.get("response_id")
        if r1 and r2:
            same = r1 == r2
            note = (
                f"both writes come from response {r1}: a retry"
                if same
                else f"two responses ({r1}, {r2}) each decided to write"
            )
            one: Gate = ("single_decision", "decision", same, note)
        else:
            one = ("single_decision", "decision", None, "response of a copy unknown")
        what = "replayed after the reconnect" if name == "reconnect_consistency" else "retried"
        return [
            one,
            (
                "idempotent",
                "control",
                False,
                f"{what} without an idempotency key the backend honoured",
            ),
        ]
    if name in ("stale_result_interception", "delivery_correctness"):
        return [
            _heard_gate(trigger, led, None),
            ("intercepted", "playback", False, "a superseded result was played to the user"),
        ]
    if name == "tool_choice":
        return [("tool_choice", "decision", False, "; ".join(d.get("problems") or []))]
    values = d.get("expected_values") or {}
    return [
        _heard_gate(trigger, led, values),
        ("state", "decision", False, "the final state does not match the truth"),
    ]
