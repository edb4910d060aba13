"""Causal slices of wrong turn decisions: from the user's cue through what the agent heard,
decided and played, to the first miss (``behaviour_slice``). History and recovery slices are in
``recovery.py``; the task's causal walk in ``task.py``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex.event import Event

if TYPE_CHECKING:
    from voxassay.suites.duplex.scoring.task_slice import UtteranceLink, UtteranceLinks


FAILURE_WINDOW_S = 2.0
"""Ledger events this long after a wrong decision are read by its causal slice."""
MARKER_TYPES = (
    "user.",
    "vad.",
    "asr.final",
    "turn.decision",
    "history.",
    "response.",
    "playback.",
    "tool.",
    "task.state",
    "session.",
    "network.",
    "fault.",
)
_STOP_ACTIONS = frozenset({"interrupt", "pause"})
_KEEP_ACTIONS = frozenset({"continue", "ignore", "backchannel"})
_HEARD_TYPES = ("vad.speech_started", "asr.partial", "asr.final")
_CANCEL_TYPES = ("response.cancelled", "playback.stopped", "playback.interrupted")


def _failure_kind(expected: str, observed: str, point: str) -> str:
    """``missed_stop`` | ``false_stop`` | ``no_response`` | ``unwanted_response`` | ``other``."""
    if observed == "continue" and (
        expected in _STOP_ACTIONS or (expected == "listen" and point == "overlap")
    ):
        return "missed_stop"
    if expected in _KEEP_ACTIONS and observed in _STOP_ACTIONS:
        return "false_stop"
    if expected == "respond" and observed == "listen":
        return "no_response"
    if expected in ("listen", "ignore") and observed == "respond":
        return "unwanted_response"
    return "other"


def _is_cancel(e: Event) -> bool:
    return e.event_type in _CANCEL_TYPES or (
        e.event_type == "response.done" and str(e.data.get("status")) == "cancelled"
    )


def behaviour_slice(
    decision: Mapping[str, Any],
    analysis: Any,
    events: Sequence[tuple[Event, float]],
    *,
    links: UtteranceLinks | None = None,
) -> dict[str, Any]:
    """Causal slice of a wrong turn decision, from the outcome back to the input audio.

    ``decision``: a ``turns.Decision`` as a dict; ``events``: the ledger's events with their
    time in audio seconds; ``links``: a ``task.UtteranceLinks`` of the same events (built
    here when not given). The chain is: the outcome (the decision point), the scenario
    segment labelled there (if any), the agent utterance(s) that heard that segment (linked
    by the rule of ``task.UtteranceLinks``: by id, else by time overlap of the agent
    utterance's VAD/ASR span with the segment's truth span; the step says which and the
    overlap), the user sound (input audio span), the agent burst it met, and the ledger
    events in the window ``[t - 0.2 s, t + FAILURE_WINDOW_S]`` (to the censoring time for an
    unanswered turn). Where a gate reads VAD, ASR or decision events, those of the linked
    utterance(s) are preferred; *heard* is judged by the link itself when it can be (the
    segment has a truth span and the agent's VAD/ASR events carry utterance ids), else by
    any such event in the window. Gates, in order, each ``True``/``False``/``None``
    (not assessable from this ledger):

    - the agent should have stopped (``missed_stop``): *heard* (a ``vad.speech_started`` or
      ``asr.*`` event in the window; perception), *decided* (a ``turn.decision`` with a
      yielding action; decision), *acted* (``response.cancelled``, ``response.done``
      cancelled, ``playback.stopped/interrupted``; control), *silent* (the agent's audio
      stopped; false by the outcome; playback);
    - the agent should have kept talking (``false_stop``): *decided* (no ``turn.decision`` to
      interrupt or pause), *not cancelled* (no cancel or stop event), *audio kept* (false by
      the outcome: the audio stopped with nothing in the ledger asking for it; playback;
      not assessable when ``playback.completed`` shows the response simply ended);
    - the agent should have answered (``no_response``): *heard* (``vad.speech_stopped``),
      *decided* (``turn.decision`` respond or ``response.created``), *acted*
      (``playback.started``), *audible* (false by the outcome);
    - the agent should have waited (``unwanted_response``): *decided to wait* (false when a
      ``response.created`` or a ``turn.decision`` to respond falls in the window).

    The layer is that of the first failing gate; with none failing the root cause is
    unknown.
    """
    from voxassay.suites.duplex.scoring.task_slice import UNKNOWN_ROOT_CAUSE, UtteranceLinks

    if links is None:
        links = UtteranceLinks(events)
    point, ref = str(decision["point"]), str(decision["ref"])
    expected, observed = str(decision["expected"]), str(decision["observed"])
    t0 = float(decision["time_s"])
    kind = _failure_kind(expected, observed, point)
    chain: list[dict[str, Any]] = [
        {
            "step": "outcome",
            "id": decision["id"],
            "note": f"{point} at {t0:.3f} s: expected {expected}, observed {observed}",
        }
    ]
    sound = label = burst = None
    t_end = t0 + FAILURE_WINDOW_S
    ev = next((e for e in analysis.events if e.id == ref), None)
    if ev is not None:
        sound = next((s for s in analysis.sounds if s.id == ev.sound), None)
        if ev.agent_burst:
            burst = next((b for b in analysis.bursts if b.id == ev.agent_burst), None)
    pause = next((p for p in analysis.pauses if p.id == ref), None)
    take = next((t for t in analysis.takeovers if t.id == ref), None)
    turn = next((t for t in analysis.turns if t.id == ref), None)
    if pause is not None and pause.takeover:
        take = next((t for t in analysis.takeovers if t.id == pause.takeover), None)
    if take is not None:
        burst = next((b for b in analysis.bursts if b.id == take.burst), None)
        t_end = max(t_end, take.agent_onset_s + 0.2)
    if turn is not None:
        last = next((s for s in analysis.sounds if s.id == turn.sounds[-1]), None)
        sound = last
        if turn.censored_after_ms is not None:
            t_end = max(t_end, turn.end_s + turn.censored_after_ms / 1000.0)
    if sound is not None and sound.label:
        label = sound.label
    linked: list[UtteranceLink] = []
    if label:
        chain.append({"step": "segment", "id": label, "note": "scenario segment (label)"})
        linked = links.utterances_for(label)
        if linked:
            note = linked[0].note()
            if len(linked) > 1:
                note += "; also " + ", ".join(
                    f"{lk.utterance_id} ({lk.overlap_ms or 0:.0f} ms)" for lk in linked[1:]
                )
            chain.append(
                {
                    "step": "utterance",
                    "id": linked[0].utterance_id,
                    "link": linked[0].how,
                    "overlap_ms": linked[0].overlap_ms,
                    "also": [lk.to_dict() for lk in linked[1:]],
                    "note": note,
                }
            )
        elif links.segment_span(label) is not None and links.spans:
            chain.append(
                {
                    "step": "utterance",
                    "id": None,
                    "note": f"no agent utterance overlaps segment {label}'s truth span",
                }
            )
    heard_by = {lk.utterance_id for lk in linked}
    # the link decides *heard* when the segment is timed and the agent's VAD/ASR carry ids
    link_judges = (
        label is not None and links.segment_span(str(label)) is not None and bool(links.spans)
    )
    if sound is not None:
        chain.append(
            {
                "step": "input",
                "id": sound.id,
                "start_s": sound.start_s,
                "end_s": sound.end_s,
                "note": f"user-side {sound.kind} ({sound.kind_source})",
            }
        )
    if burst is not None:
        chain.append(
            {
                "step": "agent",
                "id": burst.id,
                "start_s": burst.start_s,
                "end_s": burst.end_s,
                "note": f"agent burst ({burst.role})",
            }
        )
    t_start = t0 - 0.2
    if pause is not None:
        t_start = pause.start_s - 0.2
    win = [(e, t) for e, t in events if t_start <= t <= t_end]
    for e, t in win:
        if e.event_type.startswith(MARKER_TYPES) and e.event_type != "tts.chunk":
            chain.append(
                {"step": "ledger", "id": e.event_id, "type": e.event_type, "t_s": round(t, 4)}
            )
    types = {e.event_type for e, _ in events}
    has_decisions = "turn.decision" in types

    def find(pred: Callable[[Event], bool]) -> Event | None:
        """The first window event matching, those of the linked utterance(s) first."""
        if heard_by:
            own = next((e for e, _ in win if pred(e) and e.utterance_id in heard_by), None)
            if own is not None:
                return own
        return next((e for e, _ in win if pred(e)), None)

    def heard_gate(pred: Callable[[Event], bool], kinds: set[str], missing: str) -> None:
        if link_judges:
            ev = next(
                (e for e, _ in events if pred(e) and e.utterance_id in heard_by),
                None,
            )
            if ev is not None:
                note = f"{ev.event_type} {ev.event_id} of {ev.utterance_id} ({linked[0].note()})"
            elif heard_by:
                note = f"{linked[0].note()}, but it has no {' / '.join(sorted(kinds))}"
            else:
                note = f"no agent utterance overlaps segment {label}'s truth span: {missing}"
                nxt = links.next_after(str(label))
                if nxt is not None:
                    note += f" (the next one, {nxt[0]}, starts {nxt[1]:.3f} s after its end)"
            gates.append(("heard", "perception", ev is not None, note))
            return
        ev = find(pred)
        gates.append(
            (
                "heard",
                "perception",
                ev is not None if types & kinds else None,
                f"{ev.event_type} {ev.event_id}" if ev else missing,
            )
        )

    gates: list[tuple[str, str, bool | None, str]] = []
    if kind == "missed_stop":
        heard_gate(
            lambda e: e.event_type in _HEARD_TYPES,
            set(_HEARD_TYPES),
            "no VAD/ASR event after the onset",
        )
        dec = find(lambda e: e.event_type == "turn.decision")
        if not has_decisions:
            gates.append(("decided", "decision", None, "the ledger has no turn.decision events"))
        else:
            action = str(dec.data.get("action")) if dec else None
            ok = action in _STOP_ACTIONS | {"listen"}
            gates.append(
                (
                    "decided",
                    "decision",
                    ok,
                    f"turn.decision {action!r}" if dec else "no turn.decision",
                )
            )
        cancel = find(_is_cancel)
        gates.append(
            (
                "acted",
                "control",
                cancel is not None,
                f"{cancel.event_type} {cancel.event_id}"
                if cancel
                else "no cancel or playback stop",
            )
        )
        gates.append(("silent", "playback", False, "the agent's audio kept going (acoustic)"))
    elif kind == "false_stop":
        dec = find(lambda e: e.event_type == "turn.decision")
        if dec is None:
            gates.append(
                (
                    "decided",
                    "decision",
                    None if not has_decisions else True,
                    "no turn.decision in the window",
                )
            )
        else:
            action = str(dec.data.get("action"))
            gates.append(
                ("decided", "decision", action not in _STOP_ACTIONS, f"turn.decision {action!r}")
            )
        cancel = find(_is_cancel)
        gates.append(
            (
                "not_cancelled",
                "control",
                cancel is None,
                f"{cancel.event_type} {cancel.event_id}" if cancel else "no cancel or stop event",
            )
        )
        done = find(lambda e: e.event_type == "playback.completed")
        gates.append(
            (
                "audio_kept",
                "playback",
                None if done is not None else False,
                "playback.completed: the response ended by itself"
                if done is not None
                else "the agent's audio stopped (acoustic)",
            )
        )
    elif kind == "no_response":
        heard_gate(
            lambda e: e.event_type == "vad.speech_stopped",
            {"vad.speech_stopped"},
            "no end of speech detected",
        )
        dec = find(
            lambda e: (
                e.event_type == "response.created"
                or (e.event_type == "turn.decision" and str(e.data.get("action")) == "respond")
            )
        )
        gates.append(
            (
                "decided",
                "decision",
                dec is not None,
                f"{dec.event_type} {dec.event_id}" if dec else "no response.created or decision",
            )
        )
        play = find(lambda e: e.event_type == "playback.started")
        gates.append(
            (
                "acted",
                "control",
                play is not None,
                f"playback.started {play.event_id}" if play else "no playback.started",
            )
        )
        gates.append(("audible", "playback", False, "no agent audio (acoustic)"))
    elif kind == "unwanted_response":
        dec = find(
            lambda e: (
                e.event_type == "response.created"
                or (e.event_type == "turn.decision" and str(e.data.get("action")) == "respond")
            )
        )
        gates.append(
            (
                "decided_wait",
                "decision",
                False if dec is not None else None,
                f"{dec.event_type} {dec.event_id} while the user held the turn"
                if dec
                else "no decision event in the window",
            )
        )
    stop = next((i for i, g in enumerate(gates) if g[2] is False), len(gates))
    passing = [g for g in gates[:stop] if g[2] is True]
    failing = next((g for g in gates if g[2] is False), None)
    out: dict[str, Any] = {
        "kind": "behaviour",
        "check": f"behaviour:{kind}",
        "decision": dict(decision),
        "time_s": round(t0, 4),
        "window_s": [round(t_start, 4), round(t_end, 4)],
        "trigger": {
            "segment_id": label,
            "sound": sound.id if sound else None,
            "utterances": [lk.utterance_id for lk in linked],
        },
        "chain": chain,
        "event_ids": [c["id"] for c in chain if c["step"] == "ledger"],
        "gates": [{"gate": g[0], "layer": g[1], "passed": g[2], "note": g[3]} for g in gates],
        "last_passing_gate": passing[-1][0] if passing else None,
        "first_failing_gate": failing[0] if failing else None,
        "layer": failing[1] if failing else "unknown",
        "root_cause": failing[1] if failing else UNKNOWN_ROOT_CAUSE,
        "reason": failing[3] if failing else "no gate failed: the ledger does not explain it",
    }
    return out


# --------------------------------------------------------------------------- a run
