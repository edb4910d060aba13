"""History consistency: after a response was cut off, does the agent's record of what the user heard match what was acoustically played (within ``HISTORY_TOLERANCE_MS``), and does a stated history action match the scenario's? Cases per session, each judged or not assessable; the helpers recovery accuracy shares."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.vocabulary import HistoryAction

if TYPE_CHECKING:
    pass


__all__ = [
    "HISTORY_ACTIONS",
    "HISTORY_DEFINITION",
    "HISTORY_EVENT",
    "HISTORY_TOLERANCE_MS",
    "NATURAL_END_REASONS",
    "ONSET_SLACK_S",
    "PLAYING_SLACK_S",
    "SILENT_TAIL_MAX_MS",
    "UNCERTAIN_ACTIONS",
    "AgentCut",
    "Timed",
    "agent_cuts",
    "history_consistency",
]


HISTORY_EVENT = "history.updated"
"""Ledger event of an agent editing its conversation history (see the module docstring)."""


HISTORY_ACTIONS: tuple[str, ...] = tuple(str(a) for a in HistoryAction)


UNCERTAIN_ACTIONS = frozenset({str(HistoryAction.CLARIFY), str(HistoryAction.MARK_UNCERTAIN)})
"""Actions accepted for each other: both leave the uncertain tail out of what was heard."""


HISTORY_TOLERANCE_MS = 250.0


SILENT_TAIL_MAX_MS = 1000.0
"""Longest silence between a response's last sound and its flush that still counts as heard."""


ONSET_SLACK_S = 0.3
"""Agent audio may start this much before its logged ``playback.started`` (or a cut) and still
belong to it: the software event is written around the moment the audio starts."""


PLAYING_SLACK_S = 0.5
"""A response's audio that ended less than this before a ledger cut was still playing at it
(the turn analysis merges agent speech across shorter pauses: a word or sentence pause)."""


NATURAL_END_REASONS = frozenset({"drained", "completed", "complete", "finished", "done", "end"})
"""``playback.stopped`` reasons that mean the response played to its end (not a cut)."""


HISTORY_DEFINITION = catalogue.definition("history_consistency")


Timed = tuple[Event, float]


@dataclass(frozen=True)
class AgentCut:
    """The agent stopped talking in reaction to a user sound (observed ``interrupt``).

    ``stop_s``: the end of its stopped speech burst (the acoustic stop); ``burst_start_s``:
    that burst's onset; ``onset_s``: the user sound's onset; ``segment_id``: the scenario label
    on that sound; ``ref``: the turn analysis event id.
    """

    stop_s: float
    burst_start_s: float
    onset_s: float
    segment_id: str | None
    ref: str


def agent_cuts(analysis: Any) -> list[AgentCut]:
    """The acoustic yields of a ``turns.CallAnalysis``: overlap events where the agent
    stopped and gave up the floor (observed ``interrupt``; a ``pause`` resumed its own talk)."""
    sounds = {s.id: s for s in analysis.sounds}
    bursts = {b.id: b for b in analysis.bursts}
    out = []
    for e in analysis.events:
        if not (e.agent_speaking_at_onset and e.agent_stopped and e.observed_action == "interrupt"):
            continue
        b = bursts.get(e.agent_burst)
        if b is None:
            continue
        snd = sounds.get(e.sound)
        out.append(AgentCut(b.end_s, b.start_s, e.onset_s, snd.label if snd else None, e.id))
    return out


@dataclass
class _Response:
    key: str
    t_start: float
    lo: float
    hi: float = math.inf
    segs: list[tuple[float, float]] | None = None
    cut_event: Timed | None = None
    yielded: AgentCut | None = None
    history: Timed | None = None
    played: Timed | None = None
    segments: list[str] | None = None
    stalled_ms: float | None = None
    """The player's reported starving time of the response (``data.stalled_ms``)."""


def _speech(segments: Iterable[Mapping[str, Any]]) -> list[tuple[float, float]]:
    out = [
        (float(s["start_s"]), float(s["end_s"]))
        for s in segments
        if str(s.get("kind", "speech")) == "speech"
    ]
    return sorted(out)


def response_key(e: Event, pb_resp: Mapping[str, str]) -> str | None:
    if e.response_id:
        return e.response_id
    if e.playback_id:
        return pb_resp.get(e.playback_id, e.playback_id)
    rid = e.data.get("response_id")
    return str(rid) if isinstance(rid, str) and rid else None


def is_cut_event(e: Event) -> bool:
    et = e.event_type
    if et in ("playback.interrupted", "response.cancelled"):
        return True
    if et == "playback.stopped":
        return str(e.reason or e.data.get("reason") or "").lower() not in NATURAL_END_REASONS
    return et == "response.done" and str(e.data.get("status")) == "cancelled"


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def _r(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x, digits)


def history_consistency(
    events: Sequence[Timed],
    agent_segments: Iterable[Mapping[str, Any]],
    *,
    cuts: Sequence[AgentCut] = (),
    expected: Mapping[str, str] | None = None,
    onsets: Mapping[str, float] | None = None,
    tolerance_ms: float = HISTORY_TOLERANCE_MS,
) -> list[dict[str, Any]]:
    """History consistency cases of one session (the module docstring states every rule).

    Formula: a case passes when ``|recorded heard point - (acoustic stop - acoustic onset)|
    <= tolerance_ms`` (a cut response with nothing recorded fails) and a stated
    ``history.updated`` action matches the scenario's ``expected_history_action``
    (``clarify`` ~ ``mark_uncertain``). Denominator: responses acoustically cut off (the agent
    yielded, or the ledger cut them while their audio played) plus scenario segments with an
    ``expected_history_action``; a case whose evidence is missing has ``passed`` None and a
    reason (counted apart, never as a pass or a failure).

    ``events``: ledger events with their time in audio seconds; ``agent_segments``: the agent
    channel's segments (``start_s``, ``end_s``, optional ``kind``); ``cuts``: the acoustic
    yields (``agent_cuts``); ``expected``: segment id -> expected history action; ``onsets``:
    segment id -> truth onset (audio seconds).
    """
    expected = dict(expected or {})
    onsets = dict(onsets or {})
    evs = sorted(events, key=lambda x: x[1])
    speech = _speech(agent_segments)
    pb_resp: dict[str, str] = {}
    responses: dict[str, _Response] = {}
    for e, t in evs:
        if e.event_type == "playback.started":
            if e.playback_id and e.response_id:
                pb_resp.setdefault(e.playback_id, e.response_id)
            key = response_key(e, pb_resp)
            if key is not None and key not in responses:
                responses[key] = _Response(key, t, t - ONSET_SLACK_S)
    order = sorted(responses.values(), key=lambda r: r.t_start)
    for a, b in itertools.pairwise(order):
        a.hi = b.lo
    nxt = {a.key: b.t_start for a, b in itertools.pairwise(order)}
    for r in order:
        # back-to-back responses merge into one acoustic segment: each response gets the
        # part of the agent's speech between its playback start and the next one's
        end = nxt.get(r.key, math.inf)
        segs = []
        for s0, e0 in speech:
            if s0 >= r.hi or e0 <= r.lo or s0 >= end:
                continue
            lo = s0 if s0 >= r.lo else r.t_start
            hi = min(e0, end)
            if hi > lo:
                segs.append((lo, hi))
        r.segs = segs
        r.segments = []
    for e, t in evs:
        key = response_key(e, pb_resp)
        if e.event_type == HISTORY_EVENT and key is None:
            sid = e.data.get("segment_id")  # names the segment only: its response
            if isinstance(sid, str) and sid in onsets:
                key = _response_at(order, onsets[sid])
        hit = responses.get(key) if key is not None else None
        if hit is None:
            continue
        if is_cut_event(e) and hit.cut_event is None:
            hit.cut_event = (e, t)
        if e.event_type.startswith("playback.") and _num(e.data.get("stalled_ms")):
            hit.stalled_ms = _num(e.data.get("stalled_ms"))
        if e.event_type in ("playback.interrupted", "playback.stopped") and (
            e.played_until_ms is not None
        ):
            hit.played = (e, t)
        if e.event_type == HISTORY_EVENT:
            hit.history = (e, t)

    cases: list[dict[str, Any]] = []
    for c in sorted(cuts, key=lambda c: c.stop_s):
        owner = _response_of_cut(order, c)
        if owner is None:
            cases.append(
                _na(
                    f"history:cut@{c.stop_s:.3f}",
                    c.stop_s,
                    f"the agent's audio was cut at {c.stop_s:.3f} s (yield to "
                    f"{c.segment_id or 'an unlabelled user sound'}) but no playback.started "
                    "places it: the response, and so what its memory holds, is unknown",
                    segment_id=c.segment_id,
                )
            )
        elif owner.yielded is None:
            owner.yielded = c
    for sid in sorted(expected, key=lambda s: (onsets.get(s, math.inf), s)):
        if sid not in onsets:
            cases.append(
                _na(
                    f"history:segment:{sid}",
                    None,
                    f"segment {sid} has no user.speech_started truth event: where it fell on "
                    "the agent's audio is unknown",
                    segment_id=sid,
                    expected_action=expected[sid],
                )
            )
            continue
        key = _response_at(order, onsets[sid])
        if key is None:
            cases.append(
                _na(
                    f"history:segment:{sid}",
                    onsets[sid],
                    f"no agent response was playing at segment {sid}'s onset "
                    f"({onsets[sid]:.3f} s): nothing to keep or truncate",
                    segment_id=sid,
                    expected_action=expected[sid],
                )
            )
            continue
        seglist = responses[key].segments
        assert seglist is not None
        seglist.append(sid)

    for r in order:
        case = _history_case(r, expected, onsets, tolerance_ms)
        if case is not None:
            cases.append(case)
    cases.sort(key=lambda c: (c["time_s"] if c["time_s"] is not None else math.inf, c["id"]))
    return cases


def _response_at(order: Sequence[_Response], t: float) -> str | None:
    """The response playing at ``t``: its window holds ``t`` and its audio sounds around it."""
    for r in order:
        if not (r.lo <= t < r.hi) or not r.segs:
            continue
        if r.segs[0][0] - ONSET_SLACK_S <= t <= max(e for _, e in r.segs) + PLAYING_SLACK_S:
            return r.key
    return None


def _response_of_cut(order: Sequence[_Response], c: AgentCut) -> _Response | None:
    for r in order:
        if any(abs(end - c.stop_s) <= 0.002 for _, end in r.segs or []):
            return r
    for r in order:
        if r.lo <= c.burst_start_s < r.hi and r.segs:
            return r
    return None


def _na(case_id: str, time_s: float | None, reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": case_id,
        "passed": None,
        "status": "not_assessable",
        "reason": reason,
        "time_s": _r(time_s, 4),
        **extra,
    }


def _history_case(
    r: _Response,
    expected: Mapping[str, str],
    onsets: Mapping[str, float],
    tol: float,
) -> dict[str, Any] | None:
    segs = r.segs or []
    attached = list(r.segments or [])
    ledger_cut = False
    t_cut = None
    if r.cut_event is not None and segs:
        t_cut = r.cut_event[1]
        before = [s for s in segs if s[0] <= t_cut + ONSET_SLACK_S]
        ledger_cut = bool(before) and max(e for _, e in before) >= t_cut - PLAYING_SLACK_S
    cut = r.yielded is not None or ledger_cut
    if not cut and not attached:
        return None
    evidence: list[str] = []
    if r.yielded is not None:
        evidence.append(
            f"acoustic: the agent yielded to {r.yielded.segment_id or r.yielded.ref} "
            f"(its speech stopped at {r.yielded.stop_s:.3f} s)"
        )
    if ledger_cut and r.cut_event is not None:
        evidence.append(f"ledger: {r.cut_event[0].event_type} {r.cut_event[0].event_id}")
    # the segment that caused the cut: the yield's label, else the last one before the stop
    cause = None
    if r.yielded is not None and r.yielded.segment_id in expected:
        cause = r.yielded.segment_id
    elif attached:
        limit = r.yielded.stop_s if r.yielded is not None else (t_cut if t_cut else math.inf)
        earlier = [s for s in attached if onsets.get(s, math.inf) <= limit + ONSET_SLACK_S]
        cause = (earlier or attached)[-1]
    exp = expected.get(cause) if cause is not None else None
    base: dict[str, Any] = {
        "id": f"history:{r.key}",
        "response_id": r.key,
        "cut": cut,
        "cut_evidence": evidence,
        "cut_by": r.yielded.segment_id if r.yielded is not None else None,
        "segment_id": cause,
        "segments": attached,
        "expected_action": exp,
        "tolerance_ms": tol,
        "playback_started_s": _r(r.t_start, 4),
    }
    if not segs:
        return {
            **_na(
                base["id"],
                r.t_start,
                f"response {r.key}: no agent speech on the agent channel after its "
                "playback.started: what was heard cannot be measured",
            ),
            **{k: v for k, v in base.items() if k != "id"},
        }
    onset = segs[0][0]
    if r.yielded is not None:
        stop = r.yielded.stop_s
    elif ledger_cut and t_cut is not None:
        stop = max(e for s, e in segs if s <= t_cut + ONSET_SLACK_S)
    else:
        stop = max(e for _, e in segs)
    heard = (stop - onset) * 1000.0
    stalled = r.stalled_ms if cut else None
    if stalled:
        heard = max(0.0, heard - stalled)
    base.update(
        acoustic_onset_s=_r(onset, 4),
        acoustic_stop_s=_r(stop, 4),
        acoustic_heard_ms=_r(heard),
    )
    if stalled:
        base["player_stalled_ms"] = _r(stalled)
    # flushed in a pause: the silence up to the cut was heard too (no word lies in it)
    heard_max = heard
    if r.cut_event is not None and r.cut_event[1] > stop:
        heard_max = heard + min((r.cut_event[1] - stop) * 1000.0, SILENT_TAIL_MAX_MS)
        base["silent_tail_ms"] = _r(heard_max - heard)
    action: str | None = None
    recorded: float | None = None
    whole = False
    source = "none"
    recorded_ref = None
    if r.history is not None:
        he = r.history[0]
        raw = he.data.get("action")
        action = str(raw) if raw is not None else None
        recorded_ref = he.event_id
        source = HISTORY_EVENT
        if action is not None and action not in HISTORY_ACTIONS:
            return {
                **base,
                **_na(
                    base["id"],
                    stop,
                    f"{HISTORY_EVENT} {he.event_id}: action {action!r} is not one of "
                    f"{' | '.join(HISTORY_ACTIONS)}",
                ),
                "observed_action": action,
            }
        recorded = _num(he.data.get("heard_until_ms"))
        if action == str(HistoryAction.KEEP) and cut:
            # "keep" after a cut keeps the whole response, whatever heard point it names
            recorded, whole = None, True
        elif recorded is None and r.played is not None:
            recorded = r.played[0].played_until_ms
            source = f"{HISTORY_EVENT} + played_until_ms"
            recorded_ref = f"{he.event_id}, {r.played[0].event_id}"
        elif recorded is None:
            return {
                **base,
                **_na(
                    base["id"],
                    stop,
                    f"{HISTORY_EVENT} {he.event_id} ({action or 'no action'}) states no "
                    "heard_until_ms and no playback stop records played_until_ms: the kept "
                    "extent is unknown",
                ),
                "observed_action": action,
            }
    elif r.played is not None:
        recorded = r.played[0].played_until_ms
        source = "played_until_ms"
        recorded_ref = r.played[0].event_id
    else:
        whole = True
    base.update(
        observed_action=action,
        recorded_source=source,
        recorded_ref=recorded_ref,
        recorded_heard_ms=_r(recorded),
        recorded_whole_response=whole,
    )
    problems: list[str] = []
    if whole and cut:
        what = (
            f"{HISTORY_EVENT} keep (the whole response, whatever heard point it names)"
            if source == HISTORY_EVENT
            else "no truncation recorded"
        )
        problems.append(
            f"the response was cut after {heard:.0f} ms of audio but {what}: the memory keeps "
            "text the user never heard"
        )
    elif recorded is not None:
        diff = recorded - heard
        base["diff_ms"] = _r(diff)
        if recorded - heard_max > tol:
            problems.append(
                f"the memory keeps {recorded:.0f} ms as heard, only {heard_max:.0f} ms sounded "
                f"({recorded - heard_max:.0f} ms unheard kept; tolerance {tol:.0f} ms)"
            )
        elif diff < -tol:
            problems.append(
                f"the memory keeps {recorded:.0f} ms, {heard:.0f} ms were heard ({-diff:.0f} ms "
                f"the user heard dropped; tolerance {tol:.0f} ms)"
            )
    if exp is not None and action is not None and not action_ok(exp, action):
        problems.append(f"history action {action!r}, the scenario expects {exp!r} at {cause}")
    passed = not problems
    if passed:
        if whole:
            reason = f"not cut: the whole response ({heard:.0f} ms) was heard and kept"
        else:
            reason = (
                f"the memory keeps {recorded:.0f} ms, {heard:.0f} ms were heard "
                f"(within {tol:.0f} ms)"
            )
        if exp is not None and action is not None:
            reason += f"; action {action} as expected ({exp})"
    else:
        reason = "; ".join(problems)
    return {
        **base,
        "passed": passed,
        "status": "consistent" if passed else "inconsistent",
        "reason": reason,
        "time_s": _r(stop, 4),
    }


def action_ok(expected: str, observed: str) -> bool:
    return observed == expected or {observed, expected} <= UNCERTAIN_ACTIONS
