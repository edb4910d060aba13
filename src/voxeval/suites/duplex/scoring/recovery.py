"""After the break: history consistency after a truncation, recovery after a component failure.

Two behaviour rates of DESIGN.md ("Full-duplex ledger and bundle"), each computed per session by
a pure function from recorded evidence: the ledger events (with their times in audio seconds,
i.e. on the timeline of ``input.wav`` / ``output.wav``), the agent channel's speech segments
(from ``output.wav`` or a redacted bundle's ``features.json``), the scenario's labels and the
turn analysis (``turns.analyze_call``) of the same session. Each returns one **case** per
opportunity, a plain dict with ``passed``: True, False, or None (**not assessable**: the
evidence the case needs is missing; the reason says which). A rate is ``k / n`` with
``k`` = cases that passed and ``n`` = cases with ``passed`` not None; not-assessable cases are
counted apart with their reasons, never as passes or as zero.

History consistency
===================
*After truncation, the agent's memory holds only what was heard.*

Ledger convention ``history.updated`` (written by the agent when it edits its conversation
history because of what the user heard): ``response_id`` (or ``playback_id``; or
``data.response_id``) names the response, ``data.action`` is one of ``keep | truncate | clarify |
mark_uncertain`` (``schema.HistoryAction``), ``data.heard_until_ms`` is how many ms of that
response's audio the history keeps as heard, ``data.segment_id`` optionally names the scenario
segment that caused it. The last ``history.updated`` of a response is its final memory state.
Without one, ``played_until_ms`` of the response's last ``playback.interrupted`` /
``playback.stopped`` (the OpenAI Realtime import maps ``conversation.item.truncate``
``audio_end_ms`` to it) is the recorded heard point. Without either, nothing was truncated:
the memory holds the whole response.

**A response's audio** is the agent channel's speech segments that start in its window
``[t(playback.started) - ONSET_SLACK_S, t(next response's playback.started) - ONSET_SLACK_S)``.
A response without ``playback.started`` cannot be placed on the audio.

**Cut off** (the response was acoustically cut before its end), either:

1. the agent *yielded* to a user sound (the turn analysis observed ``interrupt``: its speech
   stopped within the yield window of an overlapping onset and it gave up the floor); the
   response is the one whose audio holds the stopped burst's last segment; or
2. the ledger cut it (``playback.interrupted``; ``playback.stopped`` whose ``reason`` is not a
   natural end such as ``drained``; ``response.done`` with ``data.status`` cancelled;
   ``response.cancelled``) *while its audio was playing*: its audio started before the cut
   (within ``ONSET_SLACK_S``) and was still sounding within ``PLAYING_SLACK_S`` before it.

**Heard (acoustic truth)** = acoustic stop - acoustic onset of the response's audio, in ms: the
onset is its first segment's start, the stop the end of the stopped burst (1) or of its last
segment starting before the cut (2); for a response that was not cut, its last segment's end.
This is the duration of the response's audio that sounded; a player position
(``played_until_ms``) also counts leading silence in the response's audio, which the
tolerance absorbs up to ``HISTORY_TOLERANCE_MS``. When the player reports that the response
starved before the cut (``data.stalled_ms`` of its ``playback.*`` events: underruns during
which nothing was played, e.g. a network drop), that silence is subtracted: it is wall time,
not audio. A response flushed during one of its own pauses (the player's cut event comes
after its last sound) was heard up to any point of that silence: the heard point may lie
anywhere from the last sound to the cut, at most ``SILENT_TAIL_MAX_MS`` (1 s, a long sentence
pause; longer silence before a flush is a stall, not the response's audio) past the sound.

**Consistent** when both hold:

- *heard point*: ``|recorded - heard| <= HISTORY_TOLERANCE_MS`` (250 ms). A cut response with
  no truncation recorded (or a ``keep`` without ``heard_until_ms``) keeps unheard text:
  inconsistent. A recorded point beyond the tolerance is inconsistent either way (more: the
  memory holds audio the user never heard; less: it dropped audio the user did hear);
- *action*: when the scenario segment that caused the cut has ``expected_history_action``
  and a ``history.updated`` states an action, the action matches. ``clarify`` and
  ``mark_uncertain`` are accepted for each other: both leave the uncertain tail out of what the
  memory asserts was heard (whether the agent also asks aloud is a turn behaviour, scored
  elsewhere); ``keep`` and ``truncate`` must match exactly. A ``played_until_ms`` alone
  states no action (an implied truncate is not judged against the scenario).

Cases (denominator): every response cut off (1 or 2), plus every scenario segment with
``expected_history_action`` (attached to the response playing at its truth onset; several
segments on one response make one case, judged against the segment that caused the cut).
Not assessable: a yield whose audio no ``playback.started`` places, a response without agent
audio, a segment without a truth onset or with no response playing at it, a
``history.updated`` without a heard point where none can be read from ``played_until_ms``, or
an action outside the vocabulary.

``HISTORY_TOLERANCE_MS`` = 250 ms: about one syllable at conversational rates (4-5
syllables/s), so a heard point inside it misplaces at most the syllable that was being cut; it
is an order of magnitude above the segment edge error of the detector (``acoustic.
MEASURED_EDGE_ERROR``, max ~12 ms on the truth kit) and covers the short leading silence of
synthesized audio that a player position counts and the acoustic onset does not.

Recovery accuracy
=================
*Recovery and degradation when a component fails* (DESIGN category 8).

**Fault events**: ``tool.failed``, ``session.disconnected``, ``session.error``, a ``network.*``
event whose name says the link went away (a ``drop``, ``dropped``, ``disconnect``,
``disconnected``, ``down``, ``lost`` or ``outage`` word: ``network.drop``,
``network.disconnected``; jitter, loss and delay events degrade, they are not failures), and
``response.done`` with ``data.status`` failed. **An episode** starts at a fault event; later
fault events before the agent is interactive again belong to it. **Interactive again**: the
first ``session.resumed``, ``session.connected`` or ``response.created`` after the episode
started, or a ``playback.started`` of a response not created before it.

**Recovered correctly** = all of

1. the agent became interactive again;
2. the first scenario-labelled user segment after the fault (role ``user``, non-empty
   ``expected_actions``, truth onset after the episode's first fault and before the next
   episode) got observed turn actions within its expected set: every decision the turn
   analysis placed at that segment's sounds (overlap and gap sounds, pauses resumed by it,
   talk-overs during it, the end of the turn it ends) is correct;
3. when the session has task checks: the task state after the fault was not corrupted, read
   from the existing checks: ``reconnect_consistency`` failed (for an episode with a
   connection loss), or ``duplicate_side_effects`` failed with a duplicate write requested
   after the fault. ``goal_completion`` is deliberately not used: it judges the session's end
   state, which failures unrelated to the fault also break. Neither check scored: this part
   is recorded as not checked and does not decide the case.

n = episodes with such a labelled segment after them. Not assessable: no labelled segment
after the fault (or the next episode comes first), or the turn analysis placed no decision at
the segment while the agent did become interactive (a never-interactive agent fails whatever
the segment shows).

Causal slices
=============
Every failed case of either rate gets a causal slice (``history_slice``, kind ``history``;
``recovery_slice``, kind ``recovery``) shaped like the task and behaviour slices: a chain from
the outcome back to the input segment (agent utterances linked to it by id or by time overlap,
``task.UtteranceLinks``), gates in order with the first failing one and the last one that
passed before it, and the layer of the first failing gate (their docstrings list the gates).
``bundle.score_bundle_folder`` adds them to the record's ``slices``, so the report lists them
among the key failures.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from voxeval.contracts.duplex import catalogue
from voxeval.contracts.duplex.event import Event
from voxeval.contracts.duplex.vocabulary import HistoryAction
from voxeval.stats.intervals import wilson_interval

if TYPE_CHECKING:
    from voxeval.suites.duplex.scoring.task_slice import UtteranceLink, UtteranceLinks

__all__ = [
    "CASE_RATES",
    "FAULT_WORDS",
    "HISTORY_ACTIONS",
    "HISTORY_DEFINITION",
    "HISTORY_EVENT",
    "HISTORY_TOLERANCE_MS",
    "NATURAL_END_REASONS",
    "ONSET_SLACK_S",
    "PLAYING_SLACK_S",
    "RECOVERY_DEFINITION",
    "RECOVERY_VERSION",
    "UNCERTAIN_ACTIONS",
    "AgentCut",
    "agent_cuts",
    "decisions_by_segment",
    "history_consistency",
    "history_slice",
    "is_fault",
    "pool_cases",
    "recovery_accuracy",
    "recovery_slice",
]

RECOVERY_VERSION = "2"
CASE_RATES = ("history_consistency", "recovery_accuracy")
"""The behaviour rates this module scores case by case (defined in the catalogue)."""
HISTORY_EVENT = "history.updated"
"""Ledger event of an agent editing its conversation history (see the module docstring)."""
HISTORY_ACTIONS: tuple[str, ...] = tuple(str(a) for a in HistoryAction)
UNCERTAIN_ACTIONS = frozenset({str(HistoryAction.CLARIFY), str(HistoryAction.MARK_UNCERTAIN)})
"""Actions accepted for each other: both leave the uncertain tail out of what was heard."""
HISTORY_TOLERANCE_MS = 250.0
SILENT_TAIL_MAX_MS = 1000.0
"""Longest silence between a response's last sound and its flush that still counts as heard."""
"""Largest |recorded heard point - acoustic heard duration| that is consistent (docstring)."""
ONSET_SLACK_S = 0.3
"""Agent audio may start this much before its logged ``playback.started`` (or a cut) and still
belong to it: the software event is written around the moment the audio starts."""
PLAYING_SLACK_S = 0.5
"""A response's audio that ended less than this before a ledger cut was still playing at it
(the turn analysis merges agent speech across shorter pauses: a word or sentence pause)."""
NATURAL_END_REASONS = frozenset({"drained", "completed", "complete", "finished", "done", "end"})
"""``playback.stopped`` reasons that mean the response played to its end (not a cut)."""
FAULT_WORDS = frozenset({"drop", "dropped", "disconnect", "disconnected", "down", "lost", "outage"})
"""Words of a ``network.*`` event type that say the link went away."""
_INTERACTIVE = ("session.resumed", "session.connected", "response.created")

HISTORY_DEFINITION = catalogue.definition("history_consistency")
RECOVERY_DEFINITION = catalogue.definition("recovery_accuracy")

Timed = tuple[Event, float]


# =========================================================================== inputs


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


def decisions_by_segment(analysis: Any) -> dict[str, list[dict[str, Any]]]:
    """The turn decisions of a ``turns.CallAnalysis`` grouped by the scenario label (segment
    id) of the user sound each is about: an overlap or gap sound itself, the sound that ends
    a pause (the pause's label is matched at that onset), the sound a talk-over interrupted,
    and the last sound of a turn for its turn end."""
    sounds = {s.id: s for s in analysis.sounds}
    events = {e.id: e for e in analysis.events}
    pauses = {p.id: p for p in analysis.pauses}
    takeovers = {t.id: t for t in analysis.takeovers}
    turns = {t.id: t for t in analysis.turns}
    out: dict[str, list[dict[str, Any]]] = {}
    for d in analysis.decisions:
        sound = None
        if d.point in ("overlap", "gap_sound") and d.ref in events:
            sound = sounds.get(events[d.ref].sound)
        elif d.point == "pause" and d.ref in pauses:
            p = pauses[d.ref]
            members = [sounds[x] for x in turns[p.turn].sounds] if p.turn in turns else []
            sound = min(members, key=lambda s: abs(s.start_s - p.end_s), default=None)
        elif d.point == "talk_over" and d.ref in takeovers:
            tk = takeovers[d.ref]
            members = [sounds[x] for x in turns[tk.turn].sounds] if tk.turn in turns else []
            sound = min(members, key=lambda s: abs(s.end_s - tk.user_end_before_s), default=None)
        elif d.point == "turn_end" and d.ref in turns:
            sound = sounds.get(turns[d.ref].sounds[-1])
        if sound is not None and sound.label:
            out.setdefault(sound.label, []).append(asdict(d))
    return out


# =========================================================================== history


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


def _response_key(e: Event, pb_resp: Mapping[str, str]) -> str | None:
    if e.response_id:
        return e.response_id
    if e.playback_id:
        return pb_resp.get(e.playback_id, e.playback_id)
    rid = e.data.get("response_id")
    return str(rid) if isinstance(rid, str) and rid else None


def _is_cut_event(e: Event) -> bool:
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
            key = _response_key(e, pb_resp)
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
        key = _response_key(e, pb_resp)
        if e.event_type == HISTORY_EVENT and key is None:
            sid = e.data.get("segment_id")  # names the segment only: its response
            if isinstance(sid, str) and sid in onsets:
                key = _response_at(order, onsets[sid])
        hit = responses.get(key) if key is not None else None
        if hit is None:
            continue
        if _is_cut_event(e) and hit.cut_event is None:
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
    if exp is not None and action is not None and not _action_ok(exp, action):
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


def _action_ok(expected: str, observed: str) -> bool:
    return observed == expected or {observed, expected} <= UNCERTAIN_ACTIONS


# =========================================================================== recovery


_WORD = re.compile(r"[._-]+")


def is_fault(e: Event) -> bool:
    """A component failure event (see the module docstring)."""
    et = e.event_type
    if et in ("tool.failed", "session.disconnected", "session.error"):
        return True
    if et.startswith("network."):
        return bool(set(_WORD.split(et[len("network.") :].lower())) & FAULT_WORDS)
    return et == "response.done" and str(e.data.get("status")) == "failed"


_CONNECTION_LOSS = ("session.disconnected", "network.")


@dataclass
class _Episode:
    faults: list[Timed]
    back: Timed | None = None

    @property
    def t0(self) -> float:
        return self.faults[0][1]


def _episodes(evs: Sequence[Timed]) -> list[_Episode]:
    out: list[_Episode] = []
    created: set[str] = set()
    for e, t in evs:
        cur = out[-1] if out else None
        if is_fault(e):
            if cur is None or cur.back is not None:
                out.append(_Episode([(e, t)]))
            else:
                cur.faults.append((e, t))
            continue
        interactive = e.event_type in _INTERACTIVE or (
            e.event_type == "playback.started" and (e.response_id or "") not in created
        )
        if cur is not None and cur.back is None and interactive:
            cur.back = (e, t)
        if e.event_type == "response.created" and e.response_id:
            created.add(e.response_id)
    return out


def recovery_accuracy(
    events: Sequence[Timed],
    labels: Sequence[Mapping[str, Any]],
    decisions: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    task_checks: Sequence[Mapping[str, Any]] | None = None,
    origin_ns: int = 0,
) -> list[dict[str, Any]]:
    """Recovery accuracy cases of one session: one per fault episode.

    Formula: an episode passes when the agent became interactive again (``session.resumed``
    / ``session.connected`` / a new response after the fault), every turn decision at the
    first scenario-labelled user segment after the fault is correct, and the task checks show
    no corruption after the fault (``reconnect_consistency`` failed for a connection loss, or
    ``duplicate_side_effects`` failed with a duplicate requested after the fault).
    Denominator: episodes with a labelled user segment after them (before the next episode);
    the others, and episodes whose segment got no decision while the agent was back, have
    ``passed`` None with the reason.

    ``events``: ledger events with their time in audio seconds; ``labels``: the session's
    scenario labels (``id``, ``start_s``, ``role``, ``expected_actions``); ``decisions``:
    segment id -> decisions (``decisions_by_segment``); ``task_checks``: the session's task
    check dicts (``task.TaskResult.to_dict()["checks"]``), None when the task was not scored;
    ``origin_ns``: session-clock time of audio second 0 (tool-audit times are session ns).
    """
    evs = sorted(events, key=lambda x: x[1])
    eps = _episodes(evs)
    user_labels = sorted(
        (
            lab
            for lab in labels
            if str(lab.get("role") or "user") == "user" and lab.get("expected_actions")
        ),
        key=lambda lab: float(lab["start_s"]),
    )
    cases = []
    for i, ep in enumerate(eps):
        t0 = ep.t0
        nxt = eps[i + 1].t0 if i + 1 < len(eps) else math.inf
        kinds = sorted({e.event_type for e, _ in ep.faults})
        base: dict[str, Any] = {
            "id": f"recovery:{ep.faults[0][0].event_id}",
            "time_s": _r(t0, 4),
            "faults": [[e.event_type, e.event_id, _r(t, 4)] for e, t in ep.faults],
            "fault_types": kinds,
            "interactive_at_s": _r(ep.back[1], 4) if ep.back else None,
            "interactive_by": (
                [ep.back[0].event_type, ep.back[0].event_id] if ep.back is not None else None
            ),
        }
        seg = next((lab for lab in user_labels if float(lab["start_s"]) >= t0), None)
        if seg is None or float(seg["start_s"]) >= nxt:
            why = (
                "no scenario-labelled user segment after the fault"
                if seg is None
                else f"the next fault (at {nxt:.3f} s) came before the first labelled user "
                f"segment after this one ({seg['id']})"
            )
            cases.append({**base, **_na(base["id"], t0, why)})
            continue
        sid = str(seg["id"])
        decs = list(decisions.get(sid) or [])
        base.update(
            segment_id=sid,
            segment_start_s=_r(float(seg["start_s"]), 4),
            expected_actions=list(seg.get("expected_actions") or []),
            decisions=[
                {k: d.get(k) for k in ("id", "point", "expected", "observed", "correct")}
                for d in decs
            ],
        )
        task = _task_after(ep, task_checks, origin_ns)
        base["task"] = task
        problems: list[str] = []
        if ep.back is None:
            problems.append(
                "the agent never became interactive again (no session.resumed/connected or "
                "new response after the fault)"
            )
        elif not decs:
            cases.append(
                {
                    **base,
                    **_na(
                        base["id"],
                        t0,
                        f"the turn analysis placed no decision at segment {sid} (no user "
                        "sound matched its label)",
                    ),
                }
            )
            continue
        wrong = [d for d in decs if not d.get("correct")]
        for d in wrong:
            problems.append(
                f"segment {sid}: {d.get('point')} at {float(d.get('time_s') or 0):.3f} s "
                f"expected {d.get('expected')}, observed {d.get('observed')}"
            )
        if task.get("corrupted"):
            problems.append(str(task["reason"]))
        passed = not problems
        if passed and ep.back is not None:
            reason = (
                f"interactive again at {ep.back[1]:.3f} s ({ep.back[0].event_type}); "
                f"segment {sid}: {len(decs)} decision(s) as expected"
            )
            if task.get("checked"):
                reason += "; task state not corrupted"
        else:
            reason = "; ".join(problems)
        cases.append(
            {
                **base,
                "passed": passed,
                "status": "recovered" if passed else "not_recovered",
                "reason": reason,
            }
        )
    return cases


def _task_after(
    ep: _Episode, checks: Sequence[Mapping[str, Any]] | None, origin_ns: int
) -> dict[str, Any]:
    """Was the task state corrupted after the episode's fault? (see the module docstring)"""
    if checks is None:
        return {"checked": False, "corrupted": False, "reason": "no task scoring"}
    by_name = {str(c.get("name")): c for c in checks}
    t0_ns = origin_ns + round(ep.t0 * 1e9)
    used: list[str] = []
    connection = any(e.event_type.startswith(_CONNECTION_LOSS) for e, _ in ep.faults)
    rc = by_name.get("reconnect_consistency")
    if connection and rc is not None and rc.get("passed") is not None:
        used.append("reconnect_consistency")
        if rc["passed"] is False:
            return {
                "checked": True,
                "corrupted": True,
                "checks": used,
                "check": "reconnect_consistency",
                "reason": f"task state corrupted across the reconnect: {rc.get('reason')}",
            }
    dup = by_name.get("duplicate_side_effects")
    if dup is not None and dup.get("passed") is not None:
        used.append("duplicate_side_effects")
        if dup["passed"] is False:
            calls = (dup.get("details") or {}).get("calls") or []
            late = [
                c.get("call_id")
                for c in calls
                if isinstance(c, Mapping)
                and isinstance(c.get("requested_ns"), int)
                and c["requested_ns"] >= t0_ns
            ]
            if late:
                return {
                    "checked": True,
                    "corrupted": True,
                    "checks": used,
                    "check": "duplicate_side_effects",
                    "reason": "duplicate write(s) requested after the fault: "
                    + ", ".join(str(x) for x in late),
                }
    if not used:
        return {
            "checked": False,
            "corrupted": False,
            "reason": "reconnect_consistency / duplicate_side_effects not scored",
        }
    return {"checked": True, "corrupted": False, "checks": used, "reason": "not corrupted"}


# =========================================================================== causal slices

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
    from voxeval.suites.duplex.scoring.task_slice import UNKNOWN_ROOT_CAUSE

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
        from voxeval.suites.duplex.scoring.task_slice import UtteranceLinks

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
    mine = [(e, t) for e, t in evs if key is not None and _response_key(e, pb_resp) == key]
    created = next(((e, t) for e, t in mine if e.event_type == "response.created"), None)
    started = next(((e, t) for e, t in mine if e.event_type == "playback.started"), None)
    stops = [
        (e, t) for e, t in mine if e.event_type in ("playback.interrupted", "playback.stopped")
    ]
    played = next((x for x in reversed(stops) if x[0].played_until_ms is not None), None)
    client_cuts = [x for x in stops if _is_cut_event(x[0])]
    cancels = [
        (e, t)
        for e, t in mine
        if e.event_type in ("response.cancelled", "response.done") and _is_cut_event(e)
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
    elif _action_ok(str(exp), str(obs)):
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


# =========================================================================== pooling


def pool_cases(
    name: str, per_session: Mapping[str, Sequence[Mapping[str, Any]]], definition: str
) -> dict[str, Any]:
    """Pool sessions' cases into one rate entry shaped like ``turns.aggregate``'s rates:
    ``k / n`` with a 95 % Wilson interval, ``events`` (passed refs), ``denominator``
    (assessable refs, ``<session>/<case id>``), plus ``not_assessable`` (count) and
    ``not_assessable_cases`` (refs with reasons) and ``failures`` (refs with reasons)."""
    events: list[str] = []
    den: list[str] = []
    na: list[dict[str, Any]] = []
    fails: list[dict[str, Any]] = []
    for sid, cases in per_session.items():
        for c in cases:
            ref = f"{sid}/{c['id']}"
            if c.get("passed") is None:
                na.append({"ref": ref, "reason": c.get("reason")})
                continue
            den.append(ref)
            if c["passed"]:
                events.append(ref)
            else:
                fails.append({"ref": ref, "reason": c.get("reason")})
    k, n = len(events), len(den)
    lo, hi = wilson_interval(k, n)
    return {
        "value": k / n if n else None,
        "k": k,
        "n": n,
        "ci_low": lo if n else None,
        "ci_high": hi if n else None,
        "ci_method": "wilson 95%",
        "events": events,
        "denominator": den,
        "not_assessable": len(na),
        "not_assessable_cases": na,
        "failures": fails,
        "definition": definition,
        "name": name,
    }
