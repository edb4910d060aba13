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

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.event import Event
from voxassay.stats.intervals import wilson_interval
from voxassay.suites.duplex.scoring.history import Timed, _na, _r

if TYPE_CHECKING:
    pass

__all__ = [
    "CASE_RATES",
    "FAULT_WORDS",
    "RECOVERY_DEFINITION",
    "RECOVERY_VERSION",
    "decisions_by_segment",
    "is_fault",
    "pool_cases",
    "recovery_accuracy",
]

RECOVERY_VERSION = "2"
CASE_RATES = ("history_consistency", "recovery_accuracy")
"""The behaviour rates this module scores case by case (defined in the catalogue)."""
"""Largest |recorded heard point - acoustic heard duration| that is consistent (docstring)."""
FAULT_WORDS = frozenset({"drop", "dropped", "disconnect", "disconnected", "down", "lost", "outage"})
"""Words of a ``network.*`` event type that say the link went away."""
_INTERACTIVE = ("session.resumed", "session.connected", "response.created")

RECOVERY_DEFINITION = catalogue.definition("recovery_accuracy")


# =========================================================================== inputs


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
