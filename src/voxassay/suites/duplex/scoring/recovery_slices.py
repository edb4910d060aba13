"""Causal slices of failed history-consistency and recovery cases: what the user heard, what the agent recorded and did, step by step from the cut or the fault to the first miss."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex.vocabulary import HistoryAction

if TYPE_CHECKING:
    from voxassay.suites.duplex.scoring.task_slice import UtteranceLink, UtteranceLinks

from voxassay.suites.duplex.scoring.history import (
    HISTORY_EVENT,
    HISTORY_TOLERANCE_MS,
    Timed,
    _num,
    _r,
    action_ok,
    is_cut_event,
    response_key,
)

__all__ = ["history_slice", "recovery_slice"]


_HEARD_TYPES = ("vad.speech_started", "vad.speech_stopped", "asr.partial", "asr.final")


_HEARD_SLACK_S = 1.0
"""Without utterance ids, a VAD/ASR event this long after a segment's truth end still heard it."""


def _gate(name: str, layer: str, passed: bool | None, note: str) -> dict[str, Any]:
    return {"gate": name, "layer": layer, "passed": passed, "note": note}


def _slice_base(kind: str, check: str, case: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "check": check,
        "case": case.get("id"),
        "passed": case.get("passed"),
        "time_s": case.get("time_s"),
        "trigger": {"segment_id": case.get("segment_id")},
        "chain": [],
        "event_ids": [],
        "gates": [],
        "last_passing_gate": None,
        "first_failing_gate": None,
        "layer": None,
        "root_cause": None,
        "reason": "",
    }


def _finish(out: dict[str, Any], gates: list[dict[str, Any]]) -> dict[str, Any]:
    from voxassay.suites.duplex.scoring.task_slice import UNKNOWN_ROOT_CAUSE

    out["gates"] = gates
    out["event_ids"] = [c["event_id"] for c in out["chain"] if c.get("event_id")]
    stop = next((i for i, g in enumerate(gates) if g["passed"] is False), len(gates))
    passing = [g for g in gates[:stop] if g["passed"] is True]
    failing = next((g for g in gates if g["passed"] is False), None)
    out["last_passing_gate"] = passing[-1]["gate"] if passing else None
    if failing is None:
        out.update(
            layer="unknown",
            root_cause=UNKNOWN_ROOT_CAUSE,
            reason="no gate failed: the ledger does not explain it",
        )
    else:
        layer = str(failing["layer"])
        out.update(
            first_failing_gate=failing["gate"],
            layer=layer,
            root_cause=UNKNOWN_ROOT_CAUSE if layer == "unknown" else layer,
            reason=failing["note"],
        )
    return out


def _step(step: str, ident: Any, timed: Timed | None = None, note: str = "") -> dict[str, Any]:
    e = timed[0] if timed else None
    return {
        "step": step,
        "id": ident,
        "event_id": e.event_id if e else None,
        "event_type": e.event_type if e else None,
        "t_s": _r(timed[1], 4) if timed else None,
        "note": note,
    }


def _links_of(events: Sequence[Timed], links: UtteranceLinks | None) -> UtteranceLinks:
    if links is None:
        from voxassay.suites.duplex.scoring.task_slice import UtteranceLinks

        links = UtteranceLinks(events)
    return links


def _segment_steps(
    sid: str | None, events: Sequence[Timed], links: UtteranceLinks, why: str
) -> tuple[list[dict[str, Any]], list[UtteranceLink]]:
    """The chain's utterance (agent utterances linked to the segment) and input (its truth
    onset) steps, and the links."""
    if not sid:
        return [], []
    linked = list(links.utterances_for(sid))
    steps: list[dict[str, Any]] = []
    if linked:
        note = linked[0].note()
        if len(linked) > 1:
            note += "; also " + ", ".join(
                f"{lk.utterance_id} ({lk.overlap_ms or 0:.0f} ms)" for lk in linked[1:]
            )
        step = _step("utterance", linked[0].utterance_id, None, note)
        step.update(
            link=linked[0].how,
            overlap_ms=linked[0].overlap_ms,
            also=[lk.to_dict() for lk in linked[1:]],
        )
        steps.append(step)
    elif links.segment_span(sid) is not None:
        steps.append(
            _step(
                "utterance", None, None, f"no agent utterance overlaps segment {sid}'s truth span"
            )
        )
    start = links.start_event(sid)
    t_start = next(
        (t for e, t in events if start is not None and e.event_id == start.event_id), None
    )
    steps.append(
        _step(
            "input",
            sid,
            (start, t_start) if start is not None and t_start is not None else None,
            why if start is not None else f"{why} (no user.speech_started truth event)",
        )
    )
    return steps, linked


def history_slice(
    case: Mapping[str, Any], events: Sequence[Timed], *, links: UtteranceLinks | None = None
) -> dict[str, Any]:
    """Causal slice of a failed history consistency case (``history_consistency``).

    Chain, from the outcome back: the case (the memory that disagrees with what was heard),
    the recorded heard point (``history.updated`` / the playback stop with
    ``played_until_ms``), the cut (ledger event and/or the acoustic yield), the response
    (``response.created`` / ``playback.started``), the agent utterance that heard the
    segment that caused the cut (linked by id or time: ``task.UtteranceLinks``) and that
    segment's truth onset. Gates, in order (``True``/``False``/``None`` = not assessable):

    1. *cut_registered*: the agent side knows the response was cut: a ``playback.interrupted``
       / ``playback.stopped`` with ``played_until_ms`` (a Realtime truncate maps to it), the
       agent's own cancel (``response.cancelled``, ``response.done`` cancelled), or its
       ``history.updated`` for the response with a heard point or an action other than
       ``keep``. Fails as
       **playback** when the client reported a stop without ``played_until_ms``, as
       **control** when the ledger has neither a stop nor a cancel (the audio was cut, the
       agent never registered it). Not assessable for a response that was not cut;
    2. *heard_point_recorded* (**decision**): the agent recorded a heard point
       (``history.updated`` ``heard_until_ms``, or ``played_until_ms``); a cut response kept
       whole fails;
    3. *heard_point_matches*: the recorded point is within the tolerance of the acoustic
       truth. Otherwise **decision** when the agent's ``history.updated`` claims more or less
       than its client's ``played_until_ms`` reported (or there is no client report), and
       **playback** when the client's ``played_until_ms`` (which the memory followed)
       disagrees with the acoustic heard duration;
    4. *history_action* (**decision**): a stated action matches the scenario's
       ``expected_history_action`` (``clarify`` ~ ``mark_uncertain``).

    The layer is that of the first failing gate; none failing: unknown root cause.
    """
    out = _slice_base("history", "history_consistency", case)
    out["outcome"] = {"response_id": case.get("response_id")}
    if case.get("passed") is not False:
        out["reason"] = "the case did not fail: nothing to slice"
        return out
    links = _links_of(events, links)
    evs = sorted(events, key=lambda x: x[1])
    by_id = {e.event_id: (e, t) for e, t in evs}
    pb_resp: dict[str, str] = {}
    for e, _ in evs:
        if e.event_type == "playback.started" and e.playback_id and e.response_id:
            pb_resp.setdefault(e.playback_id, e.response_id)
    key = case.get("response_id")
    mine = [(e, t) for e, t in evs if key is not None and response_key(e, pb_resp) == key]
    created = next(((e, t) for e, t in mine if e.event_type == "response.created"), None)
    started = next(((e, t) for e, t in mine if e.event_type == "playback.started"), None)
    stops = [
        (e, t) for e, t in mine if e.event_type in ("playback.interrupted", "playback.stopped")
    ]
    played = next((x for x in reversed(stops) if x[0].played_until_ms is not None), None)
    client_cuts = [x for x in stops if is_cut_event(x[0])]
    cancels = [
        (e, t)
        for e, t in mine
        if e.event_type in ("response.cancelled", "response.done") and is_cut_event(e)
    ]
    refs = [by_id[x] for x in str(case.get("recorded_ref") or "").split(", ") if x in by_id]
    hist = next((x for x in refs if x[0].event_type == HISTORY_EVENT), None)
    if hist is None:
        hist = next((x for x in reversed(mine) if x[0].event_type == HISTORY_EVENT), None)
    cut = bool(case.get("cut"))
    tol = float(case.get("tolerance_ms") or HISTORY_TOLERANCE_MS)
    heard = _num(case.get("acoustic_heard_ms"))
    rec = _num(case.get("recorded_heard_ms"))
    source = str(case.get("recorded_source") or "none")

    sid = case.get("segment_id") or case.get("cut_by")
    seg_steps, _ = _segment_steps(
        str(sid) if sid else None, evs, links, "scenario segment that caused the cut"
    )
    memory = hist or played
    cut_ev: Timed | None = (client_cuts or cancels)[0] if (client_cuts or cancels) else None
    chain = [
        _step("outcome", case.get("id"), None, str(case.get("reason") or "")),
        _step(
            "memory",
            memory[0].event_id if memory else None,
            memory,
            f"{source}: {rec:.0f} ms kept as heard"
            if rec is not None
            else "no heard point recorded: the memory keeps the whole response",
        ),
        _step(
            "cut",
            cut_ev[0].event_id if cut_ev else None,
            cut_ev,
            "; ".join(case.get("cut_evidence") or []) or "not cut",
        ),
        _step(
            "response",
            key,
            created or started,
            f"playback started at {case.get('playback_started_s')} s"
            + (f", {heard:.0f} ms of its audio sounded" if heard is not None else ""),
        ),
        *seg_steps,
    ]
    out["chain"] = chain

    gates: list[dict[str, Any]] = []
    if not cut:
        gates.append(
            _gate(
                "cut_registered",
                "control",
                None,
                "the response was not cut: nothing to register",
            )
        )
    elif played is not None:
        pe = played[0]
        gates.append(
            _gate(
                "cut_registered",
                "playback",
                True,
                f"{pe.event_type} {pe.event_id}: the client reported played_until_ms = "
                f"{pe.played_until_ms:.0f}",
            )
        )
    elif cancels:
        ce = cancels[0][0]
        gates.append(
            _gate(
                "cut_registered",
                "control",
                True,
                f"{ce.event_type} {ce.event_id}: the agent's own cancel",
            )
        )
    elif hist is not None and (
        _num(hist[0].data.get("heard_until_ms")) is not None
        or str(hist[0].data.get("action")) != str(HistoryAction.KEEP)
    ):
        he = hist[0]
        gates.append(
            _gate(
                "cut_registered",
                "control",
                True,
                f"{he.event_type} {he.event_id} ({he.data.get('action') or 'no action'}): the "
                "agent edited its memory for the cut",
            )
        )
    elif client_cuts:
        ce = client_cuts[0][0]
        gates.append(
            _gate(
                "cut_registered",
                "playback",
                False,
                f"{ce.event_type} {ce.event_id} reports no played_until_ms and the agent issued "
                "no cancel: where the user stopped hearing never reached the agent",
            )
        )
    else:
        gates.append(
            _gate(
                "cut_registered",
                "control",
                False,
                f"the audio of response {key} was cut (acoustic) but the ledger has no cancel, "
                "truncate or playback stop for it: the agent never registered the cut",
            )
        )

    whole = bool(case.get("recorded_whole_response"))
    if rec is not None:
        gates.append(
            _gate(
                "heard_point_recorded",
                "decision",
                True,
                f"{source} ({case.get('recorded_ref')}): {rec:.0f} ms",
            )
        )
    elif whole and cut:
        what = (
            f"{HISTORY_EVENT} {hist[0].event_id} keeps the whole response"
            if hist is not None
            else f"no {HISTORY_EVENT} and no played_until_ms"
        )
        gates.append(
            _gate(
                "heard_point_recorded",
                "decision",
                False,
                f"{what}: the memory keeps the whole cut response",
            )
        )
    elif whole:
        gates.append(
            _gate("heard_point_recorded", "decision", True, "not cut: the whole response is kept")
        )
    else:
        gates.append(_gate("heard_point_recorded", "decision", None, "no heard point to read"))

    if rec is None or heard is None:
        passed_whole = whole and not cut
        gates.append(
            _gate(
                "heard_point_matches",
                "decision",
                True if passed_whole else None,
                "the whole response sounded and is kept"
                if passed_whole
                else "no recorded heard point to compare with the acoustic truth",
            )
        )
    elif abs(rec - heard) <= tol:
        gates.append(
            _gate(
                "heard_point_matches",
                "decision",
                True,
                f"{rec:.0f} ms recorded, {heard:.0f} ms sounded (within {tol:.0f} ms)",
            )
        )
    else:
        claimed = _num(hist[0].data.get("heard_until_ms")) if hist is not None else None
        pum = played[0].played_until_ms if played is not None else None
        if claimed is not None and pum is not None and abs(claimed - pum) > tol:
            gates.append(
                _gate(
                    "heard_point_matches",
                    "decision",
                    False,
                    f"the agent's {HISTORY_EVENT} claims {claimed:.0f} ms heard, its client "
                    f"reported played_until_ms = {pum:.0f} ms ({claimed - pum:+.0f} ms); "
                    f"{heard:.0f} ms sounded",
                )
            )
        elif pum is not None and abs(pum - heard) > tol:
            gates.append(
                _gate(
                    "heard_point_matches",
                    "playback",
                    False,
                    f"the client's played_until_ms = {pum:.0f} ms disagrees with the acoustic "
                    f"heard duration {heard:.0f} ms ({pum - heard:+.0f} ms, tolerance "
                    f"{tol:.0f} ms); the memory followed the client",
                )
            )
        else:
            gates.append(
                _gate(
                    "heard_point_matches",
                    "decision",
                    False,
                    f"the agent keeps {rec:.0f} ms as heard, {heard:.0f} ms sounded "
                    f"({rec - heard:+.0f} ms, tolerance {tol:.0f} ms)"
                    + ("" if pum is not None else "; no client report to follow"),
                )
            )

    exp, obs = case.get("expected_action"), case.get("observed_action")
    if exp is None or obs is None:
        gates.append(
            _gate(
                "history_action",
                "decision",
                None,
                "no expected history action" if exp is None else "no history action stated",
            )
        )
    elif action_ok(str(exp), str(obs)):
        gates.append(_gate("history_action", "decision", True, f"{obs} as expected ({exp})"))
    else:
        note = f"history action {obs!r}, the scenario expects {exp!r} at {sid}"
        if exp == str(HistoryAction.KEEP) and cut:
            note += (
                "; the response was cut where the scenario expects it kept: the cut itself "
                "was the wrong turn decision (see the behaviour slice at that segment)"
            )
        gates.append(_gate("history_action", "decision", False, note))
    return _finish(out, gates)


def recovery_slice(
    case: Mapping[str, Any],
    events: Sequence[Timed],
    *,
    task_slices: Mapping[str, Mapping[str, Any]] | None = None,
    links: UtteranceLinks | None = None,
) -> dict[str, Any]:
    """Causal slice of a failed recovery accuracy case (``recovery_accuracy``).

    Chain, from the outcome back: the case, the task check that shows corruption (if any),
    the wrong decision(s) at the first labelled segment after the fault, the agent
    utterance(s) linked to that segment (by id or time: ``task.UtteranceLinks``), its truth
    onset, the event that made the agent interactive again, and the fault event(s). Gates,
    in order:

    1. *fault*: the fault event(s) (always true: the case exists because of them);
    2. *interactive_again* (**control**): a ``session.resumed`` / ``session.connected`` or a
       new response after the fault;
    3. *segment_decision*: every turn decision at the segment is correct. A wrong one is
       **perception** when the agent did not hear the segment while it was spoken (no
       VAD/ASR event of an agent utterance linked to it; without utterance ids: none in its
       truth span plus ``_HEARD_SLACK_S``; the note names the next agent utterance and how
       late it starts), else **decision**; when the ledger has no VAD/ASR events at all,
       hearing is not known and it is **decision**;
    4. *task_not_corrupted*: the task check that showed corruption after the fault
       (``reconnect_consistency`` / ``duplicate_side_effects``) failed; its layer is that of
       the check's own task slice (``task_slices``: check name -> slice), so the report's
       layers stay perception/decision/control/playback; without that slice: unknown. Not
       assessable when neither check was scored.

    The layer is that of the first failing gate; none failing: unknown root cause.
    """
    out = _slice_base("recovery", "recovery_accuracy", case)
    out["outcome"] = {"faults": case.get("fault_types"), "segment_id": case.get("segment_id")}
    if case.get("passed") is not False:
        out["reason"] = "the case did not fail: nothing to slice"
        return out
    links = _links_of(events, links)
    evs = sorted(events, key=lambda x: x[1])
    by_id = {e.event_id: (e, t) for e, t in evs}
    sid = case.get("segment_id")
    decs = list(case.get("decisions") or [])
    wrong = [d for d in decs if not d.get("correct")]
    task = dict(case.get("task") or {})
    seg_steps, linked = _segment_steps(
        str(sid) if sid else None, evs, links, "first labelled user segment after the fault"
    )
    chain: list[dict[str, Any]] = [
        _step("outcome", case.get("id"), None, str(case.get("reason") or ""))
    ]
    if task.get("corrupted"):
        chain.append(_step("task", task.get("check"), None, str(task.get("reason") or "")))
    for d in wrong:
        chain.append(
            _step(
                "decision",
                d.get("id"),
                None,
                f"{d.get('point')}: expected {d.get('expected')}, observed {d.get('observed')}",
            )
        )
    chain += seg_steps
    back = case.get("interactive_by")
    if back:
        chain.append(
            _step(
                "interactive",
                back[1],
                by_id.get(str(back[1])),
                f"{back[0]} at {case.get('interactive_at_s')} s",
            )
        )
    for kind, eid, t in case.get("faults") or []:
        chain.append(_step("fault", eid, by_id.get(str(eid)), f"{kind} at {t} s"))
    out["chain"] = chain

    faults = case.get("faults") or []
    gates = [
        _gate(
            "fault",
            "control",
            True,
            "; ".join(f"{k} {eid} at {t} s" for k, eid, t in faults) or "fault",
        )
    ]
    if back:
        gates.append(
            _gate(
                "interactive_again",
                "control",
                True,
                f"{back[0]} {back[1]} at {case.get('interactive_at_s')} s",
            )
        )
    else:
        gates.append(
            _gate(
                "interactive_again",
                "control",
                False,
                "the agent never became interactive again (no session.resumed/connected or new "
                "response after the fault)",
            )
        )

    if not decs:
        gates.append(
            _gate("segment_decision", "decision", None, f"no decision placed at segment {sid}")
        )
    elif not wrong:
        gates.append(
            _gate(
                "segment_decision",
                "decision",
                True,
                f"segment {sid}: {len(decs)} decision(s) as expected",
            )
        )
    else:
        what = "; ".join(
            f"{d.get('point')} expected {d.get('expected')}, observed {d.get('observed')}"
            for d in wrong
        )
        ids = {lk.utterance_id for lk in linked}
        hearing = [(e, t) for e, t in evs if e.event_type in _HEARD_TYPES]
        heard_ev = next(((e, t) for e, t in hearing if e.utterance_id in ids), None)
        span = links.segment_span(str(sid)) if sid else None
        if heard_ev is None and span is not None:
            lo, hi = span[0], (span[1] if math.isfinite(span[1]) else span[0]) + _HEARD_SLACK_S
            heard_ev = next(
                ((e, t) for e, t in hearing if not e.utterance_id and lo <= t <= hi), None
            )
        if not hearing:
            gates.append(
                _gate(
                    "segment_decision",
                    "decision",
                    False,
                    f"segment {sid}: {what} (the ledger has no VAD/ASR events: whether the "
                    "agent heard it is not known)",
                )
            )
        elif heard_ev is None:
            nxt = links.next_after(str(sid)) if sid else None
            late = (
                f"; its next utterance, {nxt[0]}, starts {nxt[1]:.3f} s after the segment "
                "ended (heard late, if at all)"
                if nxt is not None
                else ""
            )
            gates.append(
                _gate(
                    "segment_decision",
                    "perception",
                    False,
                    f"the agent did not hear segment {sid} while it was spoken: no VAD/ASR "
                    f"event of an utterance overlapping its truth span{late} ({what})",
                )
            )
        else:
            he = heard_ev[0]
            gates.append(
                _gate(
                    "segment_decision",
                    "decision",
                    False,
                    f"segment {sid} was heard ({he.event_type} {he.event_id}"
                    + (f" of {he.utterance_id}" if he.utterance_id else "")
                    + f"), the decision was wrong: {what}",
                )
            )

    if not task.get("checked"):
        gates.append(
            _gate("task_not_corrupted", "unknown", None, str(task.get("reason") or "not checked"))
        )
    elif not task.get("corrupted"):
        gates.append(_gate("task_not_corrupted", "unknown", True, "not corrupted"))
    else:
        name = str(task.get("check") or "")
        ts = (task_slices or {}).get(name)
        layer = str((ts or {}).get("layer") or "unknown")
        note = str(task.get("reason") or "task state corrupted")
        if ts:
            note += (
                f"; the {name} task slice: first failing gate "
                f"{ts.get('first_failing_gate') or '-'}, layer {layer}"
            )
        else:
            note += f"; no task slice of {name or 'the check'}: its layer is unknown"
        gate = _gate("task_not_corrupted", layer, False, note)
        gate["via"] = name or None
        gates.append(gate)
    return _finish(out, gates)
