"""Turn-taking analysis of a two-channel call (user channel, agent channel) from speech segments.

This is the scoring core of ``voxassay duplex score --stereo call.wav``: it needs no transcript
and no ledger, only the speech segments of both channels (``channel``, ``start_s``, ``end_s``,
``level_dbfs`` and optionally ``kind``, e.g. from ``acoustic.detect_segments``) and, when the
call comes from a scenario, its labels. Everything is derived by the rules below; every number in
``TurnParams`` is a rule's constant and is written into the analysis.

Rules
=====

**Sounds.** User segments closer than ``unit_merge_gap_s`` (0.3 s: longer than word gaps, shorter
than hesitations) form one *sound*; agent segments closer than ``agent_merge_gap_s`` (0.5 s, the
merge gap Full-Duplex-Bench uses for model speech) form one *burst* of agent speech. An agent
pause shorter than that is a word or sentence pause, never a stop; so every burst end is followed
by at least 0.5 s of agent silence, except at a **recorded cut**: when the caller of the
analysis passes the times at which the client's player flushed the agent's audio
(``agent_cuts_s``; a bundle's ``playback.interrupted`` events), a burst never spans a gap that
contains one (within ``cut_tolerance_s``, 0.05 s), neither between segments nor inside one
(a detector segment's bridged ``gaps``). A flush is direct evidence of a stop, so a
response that is cut and followed 0.2 s later by a different one is a stop and a new response,
not one burst; calls scored from audio alone have no cuts and keep the plain merge rule.

**Leakage.** Segments the detector labelled ``crosstalk`` or ``echo`` (the other channel's
sound heard on this one) are left out on both sides: never speech, a backchannel, a bystander,
a noise event or a barge-in.

**What a user sound is** (first rule that applies; a scenario label on the sound overrides it):

1. ``noise``: the detector says the segment is not speech (``kind != "speech"``).
2. ``background``: its level is more than ``background_rel_db`` (12 dB) under the user's
   reference level. A talker at 1-2 m reaches a handset or headset microphone 20-26 dB below the
   user at a few cm (about 6 dB per doubling of distance), while one talker's own utterances
   rarely vary by more than about 6 dB; 12 dB sits between the two.
3. where an ASR transcribed the sound (``duplex score --asr``: segments carry ``token``):
   ``backchannel`` when it lasts at most ``backchannel_max_s`` (1 s) and every word is a
   backchannel form ("mm-hmm", "yeah", "oh", "I see": ``evidence.backchannel_asr``), wherever
   it falls; ``speech`` when the ASR heard other words. What is said decides, not how loud.
4. without words, ``backchannel``: it starts while the agent is talking, lasts at most
   ``backchannel_max_s`` and is at least ``backchannel_rel_db`` (2 dB) quieter than the
   reference. Listener tokens ("uh-huh", "right") are short and produced softer than turn
   speech, while competitive incomings (a "stop!", "wait") are raised in loudness (French &
   Local 1983); a short sound at the user's own level is therefore taken for a barge-in
   attempt. Level is the fallback feature, not the definition.
5. otherwise ``speech``: turn speech, which claims the floor.

A backchannel is never a turn: one in the agent's silence demands no answer (the agent going on
with its talk and the agent staying silent are both right).

The *reference level* is the duration-weighted median level of the user channel's speech
segments, recomputed once without segments more than 12 dB under the first estimate (the user is
the dominant talker on their own channel); ``user_ref_level_dbfs`` fixes it instead.

**Turns without transcripts.** Consecutive turn-speech sounds belong to one user turn unless the
silence between them exceeds ``max_pause_s`` (1.5 s: above the 1.2 s mid-sentence pauses of the
scenario set and Jefferson's ~1 s "standard maximum" silence) or the agent *responded* in it.
Agent speech that starts in a user pause (or within ``early_start_tol_s`` before the user's end)
is classified as

* a **premature takeover** when the user resumes while the agent is still talking, within
  ``max_pause_s`` of their own end and less than ``takeover_resume_max_s`` (1 s) after the agent
  started. A speaker resuming their own unfinished sentence does so at their own pace, so the
  resumption comes within their pause minus the agent's endpointing delay: under 1 s for pauses
  up to 1.2 s and endpointers that wait 0.2 s or more. A barge-in that answers the agent's words
  needs the listener to hear a word or two (~0.3-0.5 s) and plan a reply (~0.6 s at the least):
  about 1 s or more. Without words the two can still meet; a scenario label on the sound (intent
  ``continue`` vs ``interrupt``/``correction``/``cancel``/``start``) then decides. The resumed
  speech stays in the same turn (its onset is an overlap of kind ``resume`` that the agent should
  yield to);
* an **agent backchannel** when it is shorter than ``backchannel_max_s``, ends before the user
  resumes and (where transcribed) is a backchannel form: it satisfies an expected ``listen``;
* otherwise a **response**: the turn ends there.

Agent speech that starts within ``early_start_tol_s`` (0.5 s) before the end of the user's sound,
the user then stopping, is an **overlapping floor transfer**: the answer, with a negative offset
(Heldner & Edlund 2010's between-speaker overlap), not a takeover and not an interruption.
Agent speech that starts earlier while the user is still talking is a backchannel when short
(and not heard as other words) and over by the user's end, otherwise a premature takeover of
context ``speech`` (talking over the user; ``talk_over_rate`` over the turns).

**Response latency** of a turn = onset of the first agent burst that starts at or after the
turn's onset, before the next turn's onset, and is still running at the turn's final speech end
(agent backchannels excluded) minus that final end. It is negative when the agent started before
the user finished (an early start within the tolerance, or a takeover the agent never gave up).
Without such a burst the latency is **censored** at the next turn's onset (or the call's end): it
counts in ``n`` as a turn without response, never as zero.

**Cut by the recording.** A user sound or agent burst that starts within 10 ms of the file's
start began before the recording: its onset is not an event (no barge-in, no takeover, no
response: an agent burst there is ``before_recording``), and the turn it opens has
``cut_by_file: start`` (what it answered or interrupted is not in the file). A last user turn
that runs into the file's end has ``cut_by_file: end`` (no answer can be observed). Neither
counts in the response latency, the turn-without-response rate or the turn-end decisions.

**Overlaps and yielding.** Every user sound whose onset falls inside an agent burst is an overlap
event: ``barge_in`` (turn speech opening a new turn), ``resume`` (turn speech resuming the user's
own turn over a premature takeover), ``backchannel``, ``background`` or ``noise``. With
``dt`` = end of that agent burst minus the onset:

* ``dt < min_reaction_s`` (0.1 s): the agent was finishing anyway (no system perceives and stops
  that fast): a *terminal overlap*, not a decision;
* ``dt < yield_window_s`` (0.9 s): the agent **stopped** (``stop_ms = dt``). Overlap resolution
  in conversation takes a syllable or two, and a voice pipeline that yields at all does so within
  VAD onset (~0.1-0.3 s) plus cancellation and playback flush, well under a second. The window
  stays clear of 1 s because a non-floor sound (a backchannel, a bystander line, a cough) can
  land as little as ~1 s before the agent's natural end, and segment edges carry ~10 ms of
  error: an end this early is a stop whatever follows it;
* ``yield_window_s <= dt < late_yield_max_s`` (2 s): a **late stop** only if the end is reactive
  by its context (a natural end is as likely here): for floor-claiming speech (barge-in, resume),
  the agent fell silent while the user was still holding the floor (before the end of the user's
  turn); for other sounds, the agent resumed its own talk within ``resume_window_s`` (3 s) without
  any user turn in between, which a natural end (after which the agent waits for the user) does
  not do;
* otherwise the agent **continued**.

The observed action is ``continue`` (no stop), ``pause`` (stopped and resumed its own talk within
``resume_window_s`` before the user took a turn), or ``interrupt`` (stopped and gave up the
floor). The shape of the agent's end (a cut vs a decay) is deliberately not used: segments carry
no shape, synthetic and trimmed speech often ends abruptly even when complete, and a 10 ms edge
error moves any short pre-end window into the fade.

**Expected actions** come from scenario labels when a label covers the decision point, otherwise
from the acoustic classification: barge-in and resume -> ``interrupt`` (yield), backchannel ->
``continue``, background and noise -> ``ignore``, a pause inside a user turn -> ``listen``, a turn
end -> ``respond``. ``respond`` (take the turn) extends the six scenario turn actions so that turn
ends and takeovers have a column; where the agent's behaviour cannot tell two actions apart
(``continue`` vs ``ignore`` while it is talking, ``listen`` vs ``ignore`` while it is silent) the
observed action is recorded as the expected one. Every decision point says where its expected
action came from (``labels``, ``acoustic`` or ``definition``) and the analysis says which
(``expected_action_source``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from voxassay.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxassay.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxassay.stats.percentiles import LatencyValue, percentile_summary
from voxassay.suites.duplex.scoring.turn_metrics import (
    _latencies,
    _rates,
    confusion_matrix,
    summary_labels,
)
from voxassay.suites.duplex.scoring.turn_segments import (
    _labels,
    _merge,
    _ms,
    _Seg,
    _segments,
    _Unit,
    burst_at,
    label_kind,
    match_label,
    reference_level,
    split_at_cuts,
)
from voxassay.suites.duplex.scoring.turn_types import (
    BACKCHANNEL,
    BACKGROUND,
    BARGE_IN,
    DEFAULT_PARAMS,
    NOISE,
    RESPOND,
    RESUME,
    SPEECH,
    TURNS_VERSION,
    YIELD_ACTIONS,
    AgentBurst,
    CallAnalysis,
    Decision,
    Label,
    Pause,
    Takeover,
    Turn,
    TurnEvent,
    TurnParams,
    UserSound,
)

LEAKAGE = frozenset({"crosstalk", "echo"})
"""Segment kinds that are the other channel's sound: never this side's speech or sound."""

FILE_EDGE_S = 0.01
"""A sound within 10 ms of the recording's start or end is cut by it (censored)."""

__all__ = [
    "TURNS_VERSION",
    "LatencyValue",
    "analyze_call",
    "percentile_summary",
]


# --------------------------------------------------------------------------- inputs


# --------------------------------------------------------------------------- results


# --------------------------------------------------------------------------- metric definitions


# --------------------------------------------------------------------------- internals


# --------------------------------------------------------------------------- analysis


def analyze_call(
    user_segments: Iterable[Any],
    agent_segments: Iterable[Any],
    *,
    labels: Iterable[Any] | None = None,
    params: TurnParams = DEFAULT_PARAMS,
    call_id: str = "call",
    duration_s: float | None = None,
    agent_cuts_s: Iterable[float] = (),
) -> CallAnalysis:
    """Turns, latencies, overlaps, behaviour outcomes and metrics of one two-channel call.

    ``user_segments`` / ``agent_segments``: objects or mappings with ``start_s``, ``end_s``,
    ``level_dbfs`` (``channel`` is not used to assign roles; ``kind`` defaults to ``speech``;
    ``n_words`` is used only by the Full-Duplex-Bench compatibility metrics). ``labels``:
    ``Label`` objects or mappings with ``start_s``, ``end_s``, ``expected_actions`` (or
    ``expected_action``) and optionally ``intents``, ``role``, ``id``. ``duration_s``: the call
    length (censoring time of a last unanswered turn); default the last segment end.
    ``agent_cuts_s``: recorded playback flushes (seconds); agent speech is never merged across
    a gap that contains one.
    """
    p = params
    useg = [s for s in _segments(user_segments, "user") if s.kind not in LEAKAGE]
    cuts = sorted(float(c) for c in agent_cuts_s)
    own = [s for s in _segments(agent_segments, "agent", keep_gaps=True) if s.kind not in LEAKAGE]
    aseg = split_at_cuts(own, cuts, p)
    labs = _labels(labels)
    ends = [s.end for s in (*useg, *aseg)]
    dur = float(duration_s) if duration_s is not None else (max(ends) if ends else 0.0)

    bursts = [
        AgentBurst(f"a{i}", u.start, u.end, u.n, n_words=u.words, token=u.token)
        for i, u in enumerate(
            _merge(
                aseg,
                p.agent_merge_gap_s,
                by_kind=False,
                cuts=cuts,
                cut_tolerance=p.cut_tolerance_s,
            ),
            start=1,
        )
    ]
    for burst in bursts:
        if burst.start_s <= FILE_EDGE_S:
            burst.role = "before_recording"  # its onset is not in the file: no takeover, no answer
    ref, ref_source = reference_level(useg, p)
    units = _merge(
        useg, p.unit_merge_gap_s, by_kind=True, max_level_diff_db=abs(p.background_rel_db)
    )

    # ---- what each user sound is
    sounds: list[UserSound] = []
    sound_label: dict[str, Label | None] = {}
    for i, u in enumerate(units, start=1):
        sid = f"u{i}"
        rel = u.level - ref if ref is not None and math.isfinite(u.level) else None
        b = burst_at(bursts, u.start)
        lab = match_label(labs, u.start, p.label_tolerance_s)
        sound_label[sid] = lab
        kind, source, reason = _classify(u, rel, b is not None, p)
        lk = label_kind(lab) if lab is not None else None
        if lk is not None and lab is not None:
            kind, source, reason = lk, "labels", f"label {lab.id}"
        sounds.append(
            UserSound(
                sid,
                u.start,
                u.end,
                u.level,
                rel,
                kind,
                source,
                reason,
                u.n,
                b is not None,
                b.id if b else None,
                label=lab.id if lab else None,
            )
        )

    turns, takeovers = _build_turns(sounds, bursts, dur, p, sound_label)
    events = _events(sounds, bursts, turns, sound_label, p)
    pauses = _pauses(turns, sounds, bursts, takeovers, labs, p)
    decisions = _decisions(events, pauses, takeovers, turns)
    confusion = confusion_matrix(decisions)
    rates = _rates(events, pauses, takeovers, turns, decisions)
    latencies = _latencies(turns, events)
    counts: dict[str, int] = {}
    for d in decisions:
        counts[d.expected_source] = counts.get(d.expected_source, 0) + 1
    chosen = {d.expected_source for d in decisions if d.expected_source != "definition"}
    source = (
        "none"
        if not chosen
        else "labels"
        if chosen == {"labels"}
        else "acoustic"
        if chosen == {"acoustic"}
        else "mixed"
    )
    analysis = CallAnalysis(
        call_id=call_id,
        version=TURNS_VERSION,
        params=asdict(p),
        duration_s=dur,
        user_ref_level_dbfs=ref,
        user_ref_level_source=ref_source,
        expected_action_source=source,
        expected_source_counts=counts,
        sounds=sounds,
        bursts=bursts,
        turns=turns,
        takeovers=takeovers,
        events=events,
        pauses=pauses,
        decisions=decisions,
        confusion=confusion,
        rates=rates,
        latencies=latencies,
        labels={},
        inputs={
            "user": [_seg_dict(s) for s in useg],
            "agent": [_seg_dict(s) for s in aseg],
        },
    )
    analysis.labels = summary_labels(analysis)
    return analysis


def _seg_dict(s: _Seg) -> dict[str, Any]:
    d: dict[str, Any] = {
        "start_s": s.start,
        "end_s": s.end,
        "level_dbfs": s.level if math.isfinite(s.level) else None,
        "kind": s.kind,
    }
    if s.words is not None:
        d["n_words"] = s.words
    return d


def _classify(
    u: _Unit, rel: float | None, agent_talking: bool, p: TurnParams
) -> tuple[str, str, str]:
    if u.kind != SPEECH:
        return NOISE, "acoustic", f"detector kind {u.kind!r}"
    if rel is not None and rel < p.background_rel_db:
        return BACKGROUND, "acoustic", f"{rel:.1f} dB under the user's level"
    if u.token is True and u.dur <= p.backchannel_max_s:
        return BACKCHANNEL, "asr", f"short ({u.dur:.2f} s), heard as a backchannel form"
    if u.token is False:
        return SPEECH, "asr", "turn speech (words other than a backchannel form)"
    if (
        agent_talking
        and u.dur <= p.backchannel_max_s
        and rel is not None
        and rel <= p.backchannel_rel_db
    ):
        return BACKCHANNEL, "acoustic", f"short ({u.dur:.2f} s) and soft ({rel:.1f} dB) overlap"
    return SPEECH, "acoustic", "turn speech"


def _build_turns(
    sounds: list[UserSound],
    bursts: list[AgentBurst],
    dur: float,
    p: TurnParams,
    sound_label: Mapping[str, Label | None],
) -> tuple[list[Turn], list[Takeover]]:
    floor = [s for s in sounds if s.kind == SPEECH]
    groups: list[list[UserSound]] = []
    # (burst, context, sound before, sound after or None)
    pending: list[tuple[AgentBurst, str, UserSound, UserSound | None]] = []
    for i, prev in enumerate(floor):
        if not groups:
            groups.append([prev])
        nxt = floor[i + 1] if i + 1 < len(floor) else None
        limit = nxt.start_s if nxt is not None else math.inf
        lab = sound_label.get(nxt.id) if nxt is not None else None
        intents = {x.lower() for x in lab.intents} if lab is not None else set()
        force_same = "continue" in intents  # the label says: the same utterance goes on
        force_new = bool(intents & {"start", "interrupt", "correction", "cancel"})
        boundary = nxt is not None and nxt.start_s - prev.end_s > p.max_pause_s
        for b in bursts:
            if not (prev.start_s <= b.start_s < limit) or b.role != "unprompted":
                continue
            if b.start_s < prev.end_s - p.early_start_tol_s:
                # started while the user was clearly still talking
                short = b.end_s - b.start_s < p.backchannel_max_s and b.token is not False
                if short and b.end_s <= prev.end_s + p.early_start_tol_s:
                    b.role = "backchannel"
                else:
                    b.role = "takeover"
                    pending.append((b, "speech", prev, nxt))
                    if nxt is not None and prev.end_s < b.end_s <= nxt.start_s:
                        boundary = True  # the agent took the floor and finished: it answered
                continue
            if nxt is None:
                continue  # an answer (or later speech): attributed below
            within = nxt.start_s - prev.end_s <= p.max_pause_s
            short_done = (
                b.end_s <= nxt.start_s
                and b.end_s - b.start_s < p.backchannel_max_s
                and b.token is not False
            )
            resumed_over = (
                within
                and b.end_s > nxt.start_s
                and nxt.start_s - b.start_s < p.takeover_resume_max_s
            )
            if force_new:
                boundary = True
            elif short_done and (within or force_same):
                b.role = "backchannel"
            elif force_same or resumed_over:
                b.role = "takeover"
                pending.append((b, "pause", prev, nxt))
            else:
                boundary = True
        if force_same:
            boundary = False
        elif force_new:
            boundary = True
        if nxt is not None:
            if boundary:
                groups.append([nxt])
            else:
                groups[-1].append(nxt)

    turns: list[Turn] = []
    for k, g in enumerate(groups, start=1):
        tid = f"turn{k}"
        for s in g:
            s.turn = tid
        first = g[0]
        carrier = burst_at(bursts, first.start_s)
        barge = (
            carrier is not None
            and carrier.role != "backchannel"
            and carrier.end_s - first.start_s >= p.min_reaction_s
        )
        turns.append(
            Turn(
                tid,
                [s.id for s in g],
                first.start_s,
                g[-1].end_s,
                [(a.end_s, b.start_s) for a, b in itertools.pairwise(g)],
                barge,
                None,
                None,
                None,
                False,
                None,
                False,
                [],
            )
        )

    takeovers: list[Takeover] = []
    by_sound = {s.id: s for s in sounds}
    for n, (b, context, prev, nxt) in enumerate(pending, start=1):
        tid = prev.turn or ""
        resume = nxt.start_s if (nxt is not None and nxt.turn == tid) else None
        overlap = sum(
            max(0.0, min(b.end_s, s.end_s) - max(b.start_s, s.start_s))
            for s in (by_sound[x] for x in _turn_of(turns, tid).sounds)
        )
        takeovers.append(
            Takeover(
                f"t{n}",
                tid,
                b.id,
                context,
                b.start_s,
                b.end_s,
                prev.end_s,
                resume,
                _ms(b.start_s - prev.end_s),
                _ms(resume - b.start_s) if resume is not None else None,
                _ms(b.end_s - resume) if resume is not None and b.end_s > resume else None,
                _ms(overlap),
            )
        )
        b.turn = tid
    for t in turns:
        t.takeovers = [x.id for x in takeovers if x.turn == t.id]
        t.premature_takeover = bool(t.takeovers)

    # ---- answers
    for k, t in enumerate(turns):
        if t.onset_s <= FILE_EDGE_S:
            t.cut_by_file = "start"
            t.barge_in = False
        nxt_onset = turns[k + 1].onset_s if k + 1 < len(turns) else math.inf
        if nxt_onset == math.inf and t.end_s >= dur - FILE_EDGE_S:
            t.cut_by_file = "end"  # still talking when the recording stops: no answer to see
            continue
        answer = next(
            (
                b
                for b in bursts
                if t.onset_s <= b.start_s < nxt_onset
                and b.end_s > t.end_s
                and b.role in ("unprompted", "takeover")
            ),
            None,
        )
        if answer is None:
            t.censored = True
            t.censored_after_ms = _ms(min(nxt_onset, max(dur, t.end_s)) - t.end_s)
            continue
        if answer.role == "unprompted":
            answer.role = "response"
        answer.turn = t.id
        t.response_burst = answer.id
        t.response_onset_s = answer.start_s
        t.response_latency_ms = _ms(answer.start_s - t.end_s)
    return turns, takeovers


def _turn_of(turns: Sequence[Turn], tid: str) -> Turn:
    return next(t for t in turns if t.id == tid)


def _default_expected(kind: str) -> list[str]:
    """Expected action from the acoustic class: yield to floor claims, talk through the rest."""
    if kind in (BARGE_IN, RESUME):
        return ["interrupt"]
    if kind == BACKCHANNEL:
        return ["continue"]
    return ["ignore"]


GAP_BACKCHANNEL_EXPECTED = ["continue", "listen"]
"""A backchannel in the agent's silence claims no floor: the agent going on with its own talk
and the agent staying silent are both right (never a turn that demands an answer)."""


def _events(
    sounds: list[UserSound],
    bursts: list[AgentBurst],
    turns: list[Turn],
    sound_label: Mapping[str, Label | None],
    p: TurnParams,
) -> list[TurnEvent]:
    events: list[TurnEvent] = []
    floor_onsets = sorted(s.start_s for s in sounds if s.kind == SPEECH)
    first_of_turn = {t.sounds[0] for t in turns}
    for s in sounds:
        if s.start_s <= FILE_EDGE_S:
            continue  # began before the recording: its onset is not an event
        b = burst_at(bursts, s.start_s)
        if s.kind == SPEECH:
            if b is None or b.role == "backchannel":
                continue  # a turn start in silence: measured by the turn's latency
            if s.id in first_of_turn:
                kind = BARGE_IN
            elif b.role == "takeover" and b.turn == s.turn:
                kind = RESUME
            else:
                continue
        else:
            kind = s.kind
        lab = sound_label.get(s.id)
        if lab is not None and lab.expected_actions:
            expected, source = list(lab.expected_actions), "labels"
        elif kind == BACKCHANNEL and b is None:
            expected, source = list(GAP_BACKCHANNEL_EXPECTED), "acoustic"
        else:
            expected, source = _default_expected(kind), "acoustic"
        eid = f"e{len(events) + 1}"
        if b is None:
            events.append(_gap_event(eid, s, kind, bursts, floor_onsets, expected, source, p))
            continue
        if b.role == "backchannel":
            continue
        floor = kind in (BARGE_IN, RESUME)
        claim_end = _turn_of(turns, s.turn).end_s if (floor and s.turn) else None
        dt = b.end_s - s.start_s
        nxt = next((x for x in bursts if x.start_s >= b.end_s), None)
        later_floor = next((t for t in floor_onsets if t > s.start_s), math.inf)
        horizon = claim_end if claim_end is not None else later_floor
        resumed = (
            nxt is not None
            and nxt.start_s - b.end_s <= p.resume_window_s
            and nxt.start_s < horizon
            and (floor or nxt.role in ("unprompted", "continuation"))
        )
        terminal = dt < p.min_reaction_s
        late = False
        if terminal:
            stopped = False
        elif dt < p.yield_window_s:
            stopped = True
        elif dt < p.late_yield_max_s and (
            (floor and claim_end is not None and b.end_s < claim_end) or (not floor and resumed)
        ):
            stopped = late = True
        else:
            stopped = False
        should = bool(set(expected) & YIELD_ACTIONS)
        if terminal:
            observed: str | None = None
            outcome = "terminal_overlap"
        else:
            if stopped:
                observed = "pause" if resumed else "interrupt"
                if resumed and nxt is not None and nxt.role == "unprompted":
                    nxt.role = "continuation"
            else:
                observed = "continue"
            if should:
                outcome = "correct_yield" if stopped else "missed_interruption"
            else:
                outcome = "false_yield" if stopped else "correct_continue"
        events.append(
            TurnEvent(
                eid,
                s.id,
                kind,
                s.start_s,
                s.end_s,
                s.rel_level_db,
                True,
                b.id,
                b.end_s,
                _ms(dt),
                terminal,
                stopped,
                _ms(dt) if stopped else None,
                late,
                nxt.start_s if nxt is not None else None,
                _ms(nxt.start_s - b.end_s) if (stopped and nxt is not None) else None,
                None,
                None if terminal else should,
                expected,
                source,
                observed,
                outcome,
                s.turn,
            )
        )
    return events


def _gap_event(
    eid: str,
    s: UserSound,
    kind: str,
    bursts: Sequence[AgentBurst],
    floor_onsets: Sequence[float],
    expected: list[str],
    source: str,
    p: TurnParams,
) -> TurnEvent:
    later_floor = next((t for t in floor_onsets if t > s.start_s), math.inf)
    reply = next(
        (
            b
            for b in bursts
            if s.start_s < b.start_s <= s.end_s + p.background_response_window_s
            and b.start_s < later_floor
            and b.role in ("unprompted", "continuation")
        ),
        None,
    )
    responded = reply is not None
    if kind == BACKCHANNEL:  # the agent going on after a listener token continues its talk
        observed = "continue" if responded else "listen"
    else:
        observed = RESPOND if responded else "ignore"
    nxt = next((b for b in bursts if b.start_s > s.start_s), None)
    return TurnEvent(
        eid,
        s.id,
        kind,
        s.start_s,
        s.end_s,
        s.rel_level_db,
        False,
        None,
        None,
        None,
        False,
        False,
        None,
        False,
        nxt.start_s if nxt is not None else None,
        None,
        responded,
        False,
        expected,
        source,
        observed,
        "false_response" if observed == RESPOND and RESPOND not in expected else "ignored",
    )


def _pauses(
    turns: Sequence[Turn],
    sounds: Sequence[UserSound],
    bursts: Sequence[AgentBurst],
    takeovers: Sequence[Takeover],
    labels: Sequence[Label],
    p: TurnParams,
) -> list[Pause]:
    out: list[Pause] = []
    for t in turns:
        for a, b in t.pauses:
            tk = next(
                (
                    x
                    for x in takeovers
                    if x.turn == t.id and x.context == "pause" and x.user_resume_s == b
                ),
                None,
            )
            bc = any(
                x.role == "backchannel" and a - p.early_start_tol_s <= x.start_s < b for x in bursts
            )
            activity = "takeover" if tk else "backchannel" if bc else "none"
            observed = RESPOND if tk else "backchannel" if bc else "listen"
            lab = match_label(labels, b, p.label_tolerance_s)
            if lab is not None and lab.expected_actions:
                expected, source = list(lab.expected_actions), "labels"
            else:
                expected, source = ["listen"], "acoustic"
            out.append(
                Pause(
                    f"p{len(out) + 1}",
                    t.id,
                    a,
                    b,
                    _ms(b - a),
                    activity,
                    tk.id if tk else None,
                    expected,
                    source,
                    observed,
                )
            )
    return out


_EQUIVALENT = {
    # observed -> expected actions it also satisfies (indistinguishable from outside)
    "continue": {"continue", "ignore"},
    "interrupt": {"interrupt", "listen"},
    "ignore": {"ignore", "listen"},
    "listen": {"listen", "ignore"},
    "backchannel": {"backchannel", "listen"},  # a listener token claims no floor
}


def _judge(expected: Sequence[str], observed: str) -> tuple[str, str, bool]:
    """(expected row, observed column, correct) for the confusion matrix."""
    ok = _EQUIVALENT.get(observed, {observed})
    for e in expected:
        if e in ok:
            return e, e, True
    return expected[0], observed, False


def _decisions(
    events: Sequence[TurnEvent],
    pauses: Sequence[Pause],
    takeovers: Sequence[Takeover],
    turns: Sequence[Turn],
) -> list[Decision]:
    rows: list[tuple[float, str, str, list[str], str, str]] = []
    for e in events:
        if e.observed_action is None:
            continue
        point = "overlap" if e.agent_speaking_at_onset else "gap_sound"
        rows.append(
            (e.onset_s, point, e.id, e.expected_actions, e.expected_source, e.observed_action)
        )
    for pz in pauses:
        rows.append(
            (
                pz.start_s,
                "pause",
                pz.id,
                pz.expected_actions,
                pz.expected_source,
                pz.observed_action,
            )
        )
    for tk in takeovers:
        if tk.context == "speech":
            rows.append((tk.agent_onset_s, "talk_over", tk.id, ["listen"], "acoustic", RESPOND))
    for t in (t for t in turns if t.cut_by_file is None):
        rows.append(
            (
                t.end_s,
                "turn_end",
                t.id,
                [RESPOND],
                "definition",
                "listen" if t.censored else RESPOND,
            )
        )
    rows.sort(key=lambda r: (r[0], r[1]))
    out = []
    for i, (time_s, point, ref, expected, source, observed) in enumerate(rows, start=1):
        exp, obs, ok = _judge(expected, observed)
        out.append(Decision(f"d{i}", point, ref, time_s, exp, source, obs, ok))
    return out


# --------------------------------------------------------------------------- aggregation


# --------------------------------------------------------------------------- Full-Duplex-Bench
