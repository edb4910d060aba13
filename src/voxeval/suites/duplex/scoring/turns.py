"""Turn-taking analysis of a two-channel call (user channel, agent channel) from speech segments.

This is the scoring core of ``voxeval duplex score --stereo call.wav``: it needs no transcript
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

**What a user sound is** (first rule that applies; a scenario label on the sound overrides it):

1. ``noise``: the detector says the segment is not speech (``kind != "speech"``).
2. ``background``: its level is more than ``background_rel_db`` (12 dB) under the user's
   reference level. A talker at 1-2 m reaches a handset or headset microphone 20-26 dB below the
   user at a few cm (about 6 dB per doubling of distance), while one talker's own utterances
   rarely vary by more than about 6 dB; 12 dB sits between the two.
3. ``backchannel``: it starts while the agent is talking, lasts at most ``backchannel_max_s``
   (1 s) and is at least ``backchannel_rel_db`` (2 dB) quieter than the reference. Listener
   tokens ("uh-huh", "right") are short and produced softer than turn speech, while competitive
   incomings (a "stop!", "wait") are raised in loudness (French & Local 1983); a short sound at
   the user's own level is therefore a barge-in attempt, not a backchannel.
4. otherwise ``speech``: turn speech, which claims the floor.

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
* an **agent backchannel** when it is shorter than ``backchannel_max_s`` and ends before the user
  resumes;
* otherwise a **response**: the turn ends there.

Agent speech that starts while the user is still talking (more than ``early_start_tol_s`` before
the end of the user's sound) is a backchannel when short and over by the user's end, otherwise a
premature takeover of context ``speech`` (talking over the user).

**Response latency** of a turn = onset of the first agent burst that starts at or after the
turn's onset, before the next turn's onset, and is still running at the turn's final speech end
(agent backchannels excluded) minus that final end. It is negative when the agent started before
the user finished (an early start within the tolerance, or a takeover the agent never gave up).
Without such a burst the latency is **censored** at the next turn's onset (or the call's end): it
counts in ``n`` as a turn without response, never as zero.

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
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from voxeval.contracts.duplex import catalogue
from voxeval.stats.intervals import wilson_interval
from voxeval.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxeval.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxeval.stats.percentiles import LatencyValue, percentile_summary

__all__ = [
    "ACTIONS",
    "ALL_ACTIONS",
    "DEFAULT_PARAMS",
    "FDB_SOURCES",
    "TURNS_VERSION",
    "AgentBurst",
    "CallAnalysis",
    "Decision",
    "Event",
    "Label",
    "Latency",
    "LatencyValue",
    "Pause",
    "Rate",
    "SegmentLike",
    "Takeover",
    "Turn",
    "TurnParams",
    "UserSound",
    "aggregate",
    "analyze_call",
    "compat_metrics",
    "confusion_matrix",
    "percentile_summary",
]

TURNS_VERSION = "2"

ACTIONS = ("listen", "continue", "backchannel", "pause", "interrupt", "ignore")
"""The scenario turn actions (the values of ``schema.TurnAction``)."""
RESPOND = "respond"
ALL_ACTIONS = (*ACTIONS, RESPOND)
"""Turn actions plus ``respond``: the agent takes the turn (turn ends, takeovers)."""

SPEECH, BACKCHANNEL, BACKGROUND, NOISE = "speech", "backchannel", "background", "noise"
BARGE_IN, RESUME = "barge_in", "resume"
YIELD_ACTIONS = frozenset({"interrupt", "listen", "pause"})
"""Expected actions that require an agent that is talking to stop."""

FDB_SOURCES = {
    "v1.0": "Full-Duplex-Bench v1_v1.5/evaluation/eval_{pause_handling,smooth_turn_taking,"
    "user_interruption,backchannel}.py (read in the public forks "
    "lamkdhe180931-arch/Full-Duplex-Bench and abePclWaseda/Full-Duplex-Bench of "
    "DanielLin94144/Full-Duplex-Bench)",
    "v1.5": "Full-Duplex-Bench v1_v1.5/evaluation/get_timing.py (read in cshape/Full-Duplex-Bench); "
    "metric names and directions from DanielLin94144/Full-Duplex-Bench v1_v1.5/README.md",
}
FDB_TURN_DURATION_S = 1.0  # FDB v1: output shorter than 1 s ...
FDB_TURN_WORDS = 3  # ... with at most 3 words is not a turn (TOR 0)
FDB_BC_TURN_S = 3.0  # FDB v1 backchannel task: a model segment over 3 s is a takeover
FDB_BC_WORDS = 2  # ... under 1 s with at most 2 words is a backchannel
FDB_USER_MERGE_S = 0.6  # FDB v1.5 get_timing: user VAD segments merged across gaps <= 0.6 s
FDB_MODEL_MERGE_S = 0.5  # ... model segments across gaps <= 0.5 s


# --------------------------------------------------------------------------- inputs


class SegmentLike(Protocol):
    """What the analysis reads from a segment (``acoustic.Segment`` fits; ``kind`` optional)."""

    @property
    def channel(self) -> int: ...

    @property
    def start_s(self) -> float: ...

    @property
    def end_s(self) -> float: ...

    @property
    def level_dbfs(self) -> float: ...


@dataclass(frozen=True)
class TurnParams:
    """The rules' constants (module docstring explains each choice)."""

    unit_merge_gap_s: float = 0.3
    """User segments closer than this are one sound (word gaps)."""
    agent_merge_gap_s: float = 0.5
    """Agent segments closer than this are one burst; the minimum silence after a stop."""
    cut_tolerance_s: float = 0.05
    """A recorded playback cut this close to an agent gap splits the burst there."""
    max_pause_s: float = 1.5
    """Longest silence inside one user turn."""
    takeover_resume_max_s: float = 1.0
    """A user who resumes sooner than this after the agent started resumes their own turn."""
    early_start_tol_s: float = 0.3
    """Agent speech starting this close before the user's end is an early start, not a talk-over."""
    backchannel_max_s: float = 1.0
    """Longest backchannel (user or agent)."""
    backchannel_rel_db: float = -2.0
    """A user backchannel is at least this much under the reference level (dB, negative)."""
    background_rel_db: float = -12.0
    """User-channel speech further under the reference level than this is background (dB)."""
    yield_window_s: float = 0.9
    """The agent's speech ending sooner than this after an onset is a stop."""
    late_yield_max_s: float = 2.0
    """Latest end that can count as a (late) stop, when its context shows a reaction."""
    min_reaction_s: float = 0.1
    """An agent end sooner than this after the onset is not a reaction (terminal overlap)."""
    resume_window_s: float = 3.0
    """The agent talking again within this after a stop, before any user turn, resumed its turn."""
    background_response_window_s: float = 2.0
    """Unprompted agent speech starting within this after a background sound responds to it."""
    label_tolerance_s: float = 0.15
    """A label matches a sound whose onset lies in [label start - tol, label end]."""
    user_ref_level_dbfs: float | None = None
    """Fix the user's reference level instead of estimating it."""


DEFAULT_PARAMS = TurnParams()


@dataclass(frozen=True)
class Label:
    """A scenario label on a user-channel interval: expected turn actions (several allowed)."""

    start_s: float
    end_s: float
    expected_actions: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()
    role: str | None = None
    id: str | None = None


# --------------------------------------------------------------------------- results


@dataclass
class UserSound:
    """One user-channel sound (segments merged across word gaps) and what it was taken for."""

    id: str
    start_s: float
    end_s: float
    level_dbfs: float
    rel_level_db: float | None
    kind: str
    kind_source: str
    reason: str
    n_segments: int
    agent_speaking_at_onset: bool = False
    agent_burst: str | None = None
    turn: str | None = None
    label: str | None = None


@dataclass
class AgentBurst:
    """One stretch of agent speech (segments merged across pauses < ``agent_merge_gap_s``).

    ``role``: ``response`` (answers ``turn``), ``takeover`` (started inside the user's turn; it is
    also the response when it outlasted the turn), ``backchannel``, ``continuation`` (the agent
    resumed its own talk after stopping) or ``unprompted``.
    """

    id: str
    start_s: float
    end_s: float
    n_segments: int
    role: str = "unprompted"
    turn: str | None = None
    n_words: int | None = None


@dataclass
class Turn:
    """One user turn and the agent's answer to it."""

    id: str
    sounds: list[str]
    onset_s: float
    end_s: float
    pauses: list[tuple[float, float]]
    barge_in: bool
    response_burst: str | None
    response_onset_s: float | None
    response_latency_ms: float | None
    censored: bool
    censored_after_ms: float | None
    premature_takeover: bool
    takeovers: list[str]


@dataclass
class Takeover:
    """The agent starting while the user still held the turn (the user spoke on afterwards)."""

    id: str
    turn: str
    burst: str
    context: str
    agent_onset_s: float
    agent_end_s: float
    user_end_before_s: float
    user_resume_s: float | None
    onset_after_user_end_ms: float
    user_resumed_after_ms: float | None
    agent_yield_after_resume_ms: float | None
    overlap_ms: float


@dataclass
class Event:
    """A user-channel sound the agent had to handle: an overlap, or a non-turn sound in a gap."""

    id: str
    sound: str
    kind: str
    onset_s: float
    end_s: float
    rel_level_db: float | None
    agent_speaking_at_onset: bool
    agent_burst: str | None
    agent_end_s: float | None
    agent_end_after_onset_ms: float | None
    terminal: bool
    agent_stopped: bool
    stop_ms: float | None
    late_stop: bool
    agent_next_onset_s: float | None
    agent_silence_after_stop_ms: float | None
    agent_responded: bool | None
    should_yield: bool | None
    expected_actions: list[str]
    expected_source: str
    observed_action: str | None
    outcome: str
    turn: str | None = None


@dataclass
class Pause:
    """A silence inside one user turn: the agent should listen."""

    id: str
    turn: str
    start_s: float
    end_s: float
    dur_ms: float
    agent_activity: str
    takeover: str | None
    expected_actions: list[str]
    expected_source: str
    observed_action: str


@dataclass
class Decision:
    """One point where the agent had to choose a turn action, with expected vs observed."""

    id: str
    point: str
    ref: str
    time_s: float
    expected: str
    expected_source: str
    observed: str
    correct: bool


@dataclass
class Rate:
    """``value = k / n``; ``denominator`` lists the n items, ``events`` the k counted ones."""

    name: str
    k: int
    n: int
    value: float | None
    events: list[str]
    denominator: list[str]
    definition: str


@dataclass
class Latency:
    """A latency metric: every pair, and percentiles where n supports them."""

    name: str
    values: list[LatencyValue]
    summary: dict[str, Any]
    definition: str


@dataclass
class CallAnalysis:
    """Everything derived from one call; ``to_dict()`` is JSON-serialisable."""

    call_id: str
    version: str
    params: dict[str, Any]
    duration_s: float
    user_ref_level_dbfs: float | None
    user_ref_level_source: str
    expected_action_source: str
    expected_source_counts: dict[str, int]
    sounds: list[UserSound]
    bursts: list[AgentBurst]
    turns: list[Turn]
    takeovers: list[Takeover]
    events: list[Event]
    pauses: list[Pause]
    decisions: list[Decision]
    confusion: dict[str, Any]
    rates: dict[str, Rate]
    latencies: dict[str, Latency]
    labels: dict[str, Any]
    inputs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types only (tuples become lists; no NaN or infinity)."""
        out: dict[str, Any] = _plain(asdict(self))
        json.dumps(out, allow_nan=False)  # fail here, not in a report writer
        return out


def _plain(x: Any) -> Any:
    """JSON types: tuples to lists, non-finite floats to None."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# --------------------------------------------------------------------------- metric definitions

TURN_METRICS: tuple[str, ...] = (
    "response_latency_ms",
    "barge_in_stop_ms",
    "premature_takeover_rate",
    "talk_over_rate",
    "false_yield_rate",
    "missed_interruption_rate",
    "correct_yield_rate",
    "bystander_false_response_rate",
    "ambient_false_activation_rate",
    "false_silence_rate",
    "behaviour_accuracy",
)
"""What the turn layer measures (two acoustic latencies, then the rates, in the order the
aggregate lists them); each is defined in the metric catalogue (``contracts/duplex/catalogue.py``)."""
DEFINITIONS: dict[str, str] = {name: catalogue.definition(name) for name in TURN_METRICS}
"""Metric name -> its catalogue definition (the text every report and view shows)."""


# --------------------------------------------------------------------------- internals


@dataclass(frozen=True)
class _Seg:
    start: float
    end: float
    level: float
    kind: str
    words: int | None
    gaps: tuple[tuple[float, float], ...] = ()
    """Inner pauses the detector bridged (agent segments, for recorded cuts)."""

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class _Unit:
    start: float
    end: float
    level: float
    kind: str
    n: int
    words: int | None

    @property
    def dur(self) -> float:
        return self.end - self.start


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _segments(segments: Iterable[Any], what: str, *, keep_gaps: bool = False) -> list[_Seg]:
    out: list[_Seg] = []
    for s in segments:
        start, end = float(_attr(s, "start_s")), float(_attr(s, "end_s"))
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise ValueError(f"{what} segment with end {end} before start {start}")
        if end == start:
            continue
        level = _attr(s, "level_dbfs")
        words = _attr(s, "n_words")
        out.append(
            _Seg(
                start,
                end,
                float(level) if level is not None else math.nan,
                str(_attr(s, "kind", SPEECH) or SPEECH),
                int(words) if words is not None else None,
                tuple((float(a), float(b)) for a, b in (_attr(s, "gaps") or ()))
                if keep_gaps
                else (),
            )
        )
    return sorted(out, key=lambda s: (s.start, s.end))


def _split_at_cuts(segs: list[_Seg], cuts: Sequence[float], p: TurnParams) -> list[_Seg]:
    """Split agent segments at an inner pause (``gaps`` of a detector segment) that holds a
    recorded cut: the detector bridged the pause, the player says the audio was flushed there."""
    if not cuts:
        return segs
    tol = p.cut_tolerance_s
    out: list[_Seg] = []
    for seg in segs:
        start = seg.start
        for g0, g1 in seg.gaps:
            if any(g0 - tol <= c <= g1 + tol for c in cuts) and start < g0 < g1 < seg.end:
                out.append(_Seg(start, g0, seg.level, seg.kind, None))
                start = g1
        out.append(
            _Seg(start, seg.end, seg.level, seg.kind, seg.words if start == seg.start else None)
        )
    return out


def _power_mean_db(parts: Sequence[_Seg]) -> float:
    known = [p for p in parts if math.isfinite(p.level)]
    if not known:
        return math.nan
    w = sum(p.dur for p in known)
    return 10.0 * math.log10(sum(p.dur * 10.0 ** (p.level / 10.0) for p in known) / w)


def _merge(
    segs: Sequence[_Seg],
    gap: float,
    *,
    by_kind: bool,
    max_level_diff_db: float | None = None,
    cuts: Sequence[float] = (),
    cut_tolerance: float = 0.0,
) -> list[_Unit]:
    """Merge segments separated by less than ``gap`` (of the same kind when ``by_kind``; with
    ``max_level_diff_db``, not across a level jump larger than that: another talker; never
    across a gap holding one of ``cuts``, widened by ``cut_tolerance`` on both sides)."""
    groups: list[list[_Seg]] = []
    for s in segs:
        if groups:
            g = groups[-1]
            g_end = max(x.end for x in g)
            same_kind = not by_kind or g[0].kind == s.kind
            same_talker = (
                max_level_diff_db is None
                or not (math.isfinite(s.level) and math.isfinite(g[-1].level))
                or abs(s.level - g[-1].level) <= max_level_diff_db
            )
            cut = any(g_end - cut_tolerance <= c <= s.start + cut_tolerance for c in cuts)
            if s.start - g_end < gap and same_kind and same_talker and not cut:
                g.append(s)
                continue
        groups.append([s])
    units = []
    for g in groups:
        words = [x.words for x in g]
        units.append(
            _Unit(
                g[0].start,
                max(x.end for x in g),
                _power_mean_db(g),
                g[0].kind,
                len(g),
                sum(w for w in words if w is not None)
                if all(w is not None for w in words)
                else None,
            )
        )
    return units


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    order = sorted(range(len(values)), key=lambda i: values[i])
    total = sum(weights)
    acc = 0.0
    for i in order:
        acc += weights[i]
        if acc >= total / 2:
            return values[i]
    return values[order[-1]]


def _reference_level(segs: Sequence[_Seg], p: TurnParams) -> tuple[float | None, str]:
    if p.user_ref_level_dbfs is not None:
        return float(p.user_ref_level_dbfs), "params"
    speech = [s for s in segs if s.kind == SPEECH and math.isfinite(s.level)]
    if not speech:
        return None, "unavailable"
    ref = _weighted_median([s.level for s in speech], [s.dur for s in speech])
    own = [s for s in speech if s.level - ref >= p.background_rel_db]
    ref = _weighted_median([s.level for s in own], [s.dur for s in own])
    return ref, "estimated: duration-weighted median of user speech levels"


def _labels(labels: Iterable[Any] | None) -> list[Label]:
    out: list[Label] = []
    for i, lab in enumerate(labels or ()):
        if isinstance(lab, Label):
            out.append(lab)
            continue
        acts = _attr(lab, "expected_actions")
        if acts is None:
            one = _attr(lab, "expected_action")
            acts = [] if one is None else [one]
        elif isinstance(acts, str):
            acts = [acts]
        intents = _attr(lab, "intents") or ()
        if isinstance(intents, str):
            intents = [intents]
        for a in acts:
            if str(a) not in ALL_ACTIONS:
                raise ValueError(f"label {i}: unknown turn action {a!r}; use one of {ALL_ACTIONS}")
        lid = _attr(lab, "id")
        out.append(
            Label(
                float(_attr(lab, "start_s")),
                float(_attr(lab, "end_s")),
                tuple(str(a) for a in acts),
                tuple(str(x) for x in intents),
                _attr(lab, "role"),
                str(lid) if lid is not None else f"label{i + 1}",
            )
        )
    return out


def _match_label(labels: Sequence[Label], onset: float, tol: float) -> Label | None:
    hits = [lab for lab in labels if lab.start_s - tol <= onset <= lab.end_s]
    if not hits:
        return None
    return min(hits, key=lambda lab: abs(lab.start_s - onset))


def _label_kind(lab: Label) -> str | None:
    """A sound kind a label implies, or None to keep the acoustic classification."""
    role = (lab.role or "").lower()
    intents = {x.lower() for x in lab.intents}
    if role in ("bystander", "media", "echo"):
        return BACKGROUND
    if role == "noise":
        return NOISE
    if "backchannel" in intents:
        return BACKCHANNEL
    if "unrelated" in intents or (lab.expected_actions and set(lab.expected_actions) <= {"ignore"}):
        return BACKGROUND if role in ("", "user", "unknown") else NOISE
    if intents & {"start", "interrupt", "correction", "cancel", "continue"}:
        return SPEECH
    return None


def _burst_at(bursts: Sequence[AgentBurst], t: float) -> AgentBurst | None:
    for b in bursts:
        if b.start_s <= t < b.end_s:
            return b
    return None


def _ms(x: float) -> float:
    return x * 1000.0


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
    useg = _segments(user_segments, "user")
    cuts = sorted(float(c) for c in agent_cuts_s)
    aseg = _split_at_cuts(_segments(agent_segments, "agent", keep_gaps=True), cuts, p)
    labs = _labels(labels)
    ends = [s.end for s in (*useg, *aseg)]
    dur = float(duration_s) if duration_s is not None else (max(ends) if ends else 0.0)

    bursts = [
        AgentBurst(f"a{i}", u.start, u.end, u.n, n_words=u.words)
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
    ref, ref_source = _reference_level(useg, p)
    units = _merge(
        useg, p.unit_merge_gap_s, by_kind=True, max_level_diff_db=abs(p.background_rel_db)
    )

    # ---- what each user sound is
    sounds: list[UserSound] = []
    sound_label: dict[str, Label | None] = {}
    for i, u in enumerate(units, start=1):
        sid = f"u{i}"
        rel = u.level - ref if ref is not None and math.isfinite(u.level) else None
        b = _burst_at(bursts, u.start)
        lab = _match_label(labs, u.start, p.label_tolerance_s)
        sound_label[sid] = lab
        kind, source, reason = _classify(u, rel, b is not None, p)
        lk = _label_kind(lab) if lab is not None else None
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
    analysis.labels = _summary_labels(analysis)
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
                short = b.end_s - b.start_s < p.backchannel_max_s
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
            short_done = b.end_s <= nxt.start_s and b.end_s - b.start_s < p.backchannel_max_s
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
        carrier = _burst_at(bursts, first.start_s)
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
        nxt_onset = turns[k + 1].onset_s if k + 1 < len(turns) else math.inf
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


def _events(
    sounds: list[UserSound],
    bursts: list[AgentBurst],
    turns: list[Turn],
    sound_label: Mapping[str, Label | None],
    p: TurnParams,
) -> list[Event]:
    events: list[Event] = []
    floor_onsets = sorted(s.start_s for s in sounds if s.kind == SPEECH)
    first_of_turn = {t.sounds[0] for t in turns}
    for s in sounds:
        b = _burst_at(bursts, s.start_s)
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
            Event(
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
) -> Event:
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
    observed = RESPOND if responded else "ignore"
    nxt = next((b for b in bursts if b.start_s > s.start_s), None)
    return Event(
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
        "false_response" if responded and RESPOND not in expected else "ignored",
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
            lab = _match_label(labels, b, p.label_tolerance_s)
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
}


def _judge(expected: Sequence[str], observed: str) -> tuple[str, str, bool]:
    """(expected row, observed column, correct) for the confusion matrix."""
    ok = _EQUIVALENT.get(observed, {observed})
    for e in expected:
        if e in ok:
            return e, e, True
    return expected[0], observed, False


def _decisions(
    events: Sequence[Event],
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
    for t in turns:
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


def confusion_matrix(decisions: Iterable[Decision]) -> dict[str, Any]:
    """Expected (rows) x observed (columns) counts over ``ALL_ACTIONS`` with per-class
    precision (diagonal / column sum) and recall (diagonal / row sum); None where undefined."""
    m = {e: dict.fromkeys(ALL_ACTIONS, 0) for e in ALL_ACTIONS}
    for d in decisions:
        m[d.expected][d.observed] += 1
    per_class: dict[str, Any] = {}
    for c in ALL_ACTIONS:
        row = sum(m[c].values())
        col = sum(m[e][c] for e in ALL_ACTIONS)
        per_class[c] = {
            "support": row,
            "predicted": col,
            "precision": m[c][c] / col if col else None,
            "recall": m[c][c] / row if row else None,
        }
    return {"labels": list(ALL_ACTIONS), "matrix": m, "per_class": per_class}


def _rate(name: str, hits: Sequence[str], pool: Sequence[str]) -> Rate:
    return Rate(
        name,
        len(hits),
        len(pool),
        len(hits) / len(pool) if pool else None,
        list(hits),
        list(pool),
        DEFINITIONS[name],
    )


def _rates(
    events: Sequence[Event],
    pauses: Sequence[Pause],
    takeovers: Sequence[Takeover],
    turns: Sequence[Turn],
    decisions: Sequence[Decision],
) -> dict[str, Rate]:
    overlaps = [e for e in events if e.agent_speaking_at_onset and not e.terminal]
    keep = [e for e in overlaps if not e.should_yield]
    yield_ = [e for e in overlaps if e.should_yield]
    bg = [e for e in events if e.kind == BACKGROUND and not e.terminal]
    nz = [e for e in events if e.kind == NOISE and not e.terminal]

    def reacted(e: Event) -> bool:
        return e.agent_stopped if e.agent_speaking_at_onset else bool(e.agent_responded)

    talk_turns = sorted({x.turn for x in takeovers if x.context == "speech"})
    return {
        "premature_takeover_rate": _rate(
            "premature_takeover_rate",
            [x.id for x in pauses if x.takeover],
            [x.id for x in pauses],
        ),
        "talk_over_rate": _rate("talk_over_rate", talk_turns, [t.id for t in turns]),
        "false_yield_rate": _rate(
            "false_yield_rate", [e.id for e in keep if e.agent_stopped], [e.id for e in keep]
        ),
        "missed_interruption_rate": _rate(
            "missed_interruption_rate",
            [e.id for e in yield_ if not e.agent_stopped],
            [e.id for e in yield_],
        ),
        "correct_yield_rate": _rate(
            "correct_yield_rate", [e.id for e in yield_ if e.agent_stopped], [e.id for e in yield_]
        ),
        "bystander_false_response_rate": _rate(
            "bystander_false_response_rate", [e.id for e in bg if reacted(e)], [e.id for e in bg]
        ),
        "ambient_false_activation_rate": _rate(
            "ambient_false_activation_rate", [e.id for e in nz if reacted(e)], [e.id for e in nz]
        ),
        "false_silence_rate": _rate(
            "false_silence_rate", [t.id for t in turns if t.censored], [t.id for t in turns]
        ),
        "behaviour_accuracy": _rate(
            "behaviour_accuracy", [d.id for d in decisions if d.correct], [d.id for d in decisions]
        ),
    }


def _latencies(turns: Sequence[Turn], events: Sequence[Event]) -> dict[str, Latency]:
    resp = [
        LatencyValue(t.id, t.response_latency_ms, t.censored, t.censored_after_ms) for t in turns
    ]
    stops = [
        LatencyValue(
            e.id,
            e.stop_ms,
            not e.agent_stopped,
            None if e.agent_stopped else e.agent_end_after_onset_ms,
        )
        for e in events
        if e.kind == BARGE_IN and not e.terminal
    ]
    return {
        "response_latency_ms": Latency(
            "response_latency_ms",
            resp,
            percentile_summary(resp),
            DEFINITIONS["response_latency_ms"],
        ),
        "barge_in_stop_ms": Latency(
            "barge_in_stop_ms", stops, percentile_summary(stops), DEFINITIONS["barge_in_stop_ms"]
        ),
    }


def _summary_labels(a: CallAnalysis) -> dict[str, Any]:
    """The per-call labels in the duplex truth kit's vocabulary (``truth.json`` ``labels``)."""
    overlaps = [e for e in a.events if e.agent_speaking_at_onset and not e.terminal]
    return {
        "premature_takeover": any(t.premature_takeover for t in a.turns),
        "false_yield": any(e.outcome == "false_yield" for e in a.events),
        "should_yield": {e.id: e.should_yield for e in a.events if not e.terminal},
        "agent_stopped": {e.id: e.agent_stopped for e in a.events if not e.terminal},
        "barge_in_stop_ms": {
            e.id: e.stop_ms for e in a.events if e.kind == BARGE_IN and e.agent_stopped
        },
        "response_latency_ms": {t.id: t.response_latency_ms for t in a.turns},
        "agent_behaviour_correct": not any(t.premature_takeover for t in a.turns)
        and all(e.outcome in ("correct_yield", "correct_continue") for e in overlaps)
        and not any(e.outcome == "false_response" for e in a.events),
    }


# --------------------------------------------------------------------------- aggregation


def aggregate(analyses: Sequence[CallAnalysis]) -> dict[str, Any]:
    """Pool calls: rates as sum(k) / sum(n) with 95 % Wilson intervals, latencies as percentiles
    over all pairs (censored ranked last) with call-clustered bootstrap intervals, the summed
    confusion matrix, and the pooled Full-Duplex-Bench compatibility metrics.

    Event references are ``"<call_id>/<id>"``.
    """
    out: dict[str, Any] = {
        "version": TURNS_VERSION,
        "n_calls": len(analyses),
        "calls": [a.call_id for a in analyses],
        "expected_action_source": {a.call_id: a.expected_action_source for a in analyses},
    }
    rates: dict[str, Any] = {}
    for name, definition in DEFINITIONS.items():
        if name in ("response_latency_ms", "barge_in_stop_ms"):
            continue
        k = sum(a.rates[name].k for a in analyses)
        n = sum(a.rates[name].n for a in analyses)
        lo, hi = wilson_interval(k, n)
        rates[name] = {
            "value": k / n if n else None,
            "k": k,
            "n": n,
            "ci_low": lo if n else None,
            "ci_high": hi if n else None,
            "ci_method": "wilson 95%",
            "events": [f"{a.call_id}/{x}" for a in analyses for x in a.rates[name].events],
            "denominator": [
                f"{a.call_id}/{x}" for a in analyses for x in a.rates[name].denominator
            ],
            "definition": definition,
        }
    out["rates"] = rates
    lat: dict[str, Any] = {}
    for name in ("response_latency_ms", "barge_in_stop_ms"):
        vals: list[LatencyValue] = []
        clusters: list[str] = []
        for a in analyses:
            for v in a.latencies[name].values:
                vals.append(
                    LatencyValue(
                        f"{a.call_id}/{v.ref}", v.value_ms, v.censored, v.censored_after_ms
                    )
                )
                clusters.append(a.call_id)
        summary = percentile_summary(vals, clusters)
        lat[name] = {
            **summary,
            "values": [asdict(v) for v in vals],
            "definition": DEFINITIONS[name],
        }
    out["latencies"] = lat
    pooled = [d for a in analyses for d in a.decisions]
    out["confusion"] = confusion_matrix(pooled)
    out["compat"] = _pool_compat([compat_metrics(a) for a in analyses])
    return out


# --------------------------------------------------------------------------- Full-Duplex-Bench


def _fdb_tor(span_s: float, words: int | None) -> int:
    """FDB v1 turn rule: output spanning < 1 s with <= 3 words is not a turn. Without word counts
    the span alone decides (every sub-second output is taken to have at most 3 words)."""
    if span_s < FDB_TURN_DURATION_S and (words is None or words <= FDB_TURN_WORDS):
        return 0
    return 1


def _span(bs: Sequence[AgentBurst]) -> tuple[float, int | None]:
    if not bs:
        return 0.0, 0
    words = [b.n_words for b in bs]
    w = sum(x for x in words if x is not None) if all(x is not None for x in words) else None
    return max(b.end_s for b in bs) - min(b.start_s for b in bs), w


def _fdb_merge(iv: Sequence[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(iv):
        if out and s - out[-1][1] <= gap:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _fdb_stop_intervals(
    user: Sequence[tuple[float, float]], model: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """v1.5 stop latency intervals: every user/model overlap ``[later start, earlier end]``;
    of overlaps ending at the same millisecond the shortest is kept."""
    found: list[tuple[float, float]] = []
    i = j = 0
    while i < len(user) and j < len(model):
        s = max(user[i][0], model[j][0])
        e = min(user[i][1], model[j][1])
        if e > s:
            found.append((s, e))
        if user[i][1] < model[j][1]:
            i += 1
        else:
            j += 1
    best: dict[int, tuple[float, float]] = {}
    for s, e in found:
        key = round(e * 1000)
        if key not in best or e - s < best[key][1] - best[key][0]:
            best[key] = (s, e)
    return sorted(best.values(), key=lambda x: x[1])


def _fdb_response_intervals(
    user: Sequence[tuple[float, float]], model: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """v1.5 response latency intervals: each user segment end to the first model start after it;
    of user ends answered by the same model start the latest is kept."""
    best: dict[int, tuple[float, float]] = {}
    for _, ue in user:
        start = next((ms for ms, _ in model if ms > ue), None)
        if start is None:
            continue
        key = round(start * 1000)
        if key not in best or ue > best[key][0]:
            best[key] = (ue, start)
    return sorted(best.values(), key=lambda x: x[1])


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def compat_metrics(analysis: CallAnalysis) -> dict[str, Any]:
    """Full-Duplex-Bench (FDB) metrics under FDB's names, computed on this call's segments.

    These are compatibility metrics: FDB scores one isolated situation per sample with word
    timestamps from ASR; here every situation of a multi-turn call is one item and agent speech
    bursts stand in for the words (``n_words`` on agent segments enables FDB's word rule).

    * v1.0 ``pause_handling.TOR`` (lower is better): per pause inside a user turn, agent speech
      starting in the pause is a turn-over (1) unless it spans < 1 s (with <= 3 words); TOR = mean
      over pauses.
    * v1.0 ``smooth_turn_taking`` (turns that did not start during agent speech) and
      ``user_interruption`` (barge-in turns): ``TOR`` (higher is better) = the agent's speech
      after the turn, from its answer to the next turn, is a turn by the same rule; ``Latency``
      (s, lower is better) = mean over TOR = 1 items of ``max(0, answer onset - turn end)`` (FDB
      clips early starts to 0).
    * v1.0 ``backchannel``: per user turn, agent bursts starting while the user holds the turn:
      TOR = 1 if one spans > 3 s, or 1-3 s, or (with word counts) has > 2 words under 1 s;
      ``Freq`` = agent bursts under 1 s started during user turns / call duration (per s);
      ``JSD`` needs FDB's human backchannel-timing distribution for the same input: not computed.
    * v1.5 ``Stop Latency`` / ``Response Latency`` (s): FDB's get_timing on the call: user speech
      merged across gaps <= 0.6 s and agent speech across <= 0.5 s; stop intervals are the
      user/agent overlaps (later start to earlier end), response intervals run from a user
      segment's end to the next agent start. Values are means over the intervals.
    * v1.5 behaviour categories (respond/resume/uncertain/unknown) need ASR and an LLM judge:
      not computed.
    """
    a = analysis
    bursts = {b.id: b for b in a.bursts}
    ordered = sorted(a.bursts, key=lambda b: b.start_s)
    turns = a.turns
    # pause handling
    ph: list[dict[str, Any]] = []
    for pz in a.pauses:
        early = float(a.params.get("early_start_tol_s", DEFAULT_PARAMS.early_start_tol_s))
        inside = [b for b in ordered if pz.start_s - early <= b.start_s < pz.end_s]
        span, words = _span(inside)
        tor = _fdb_tor(span, words) if inside else 0
        ph.append({"ref": pz.id, "TOR": tor, "span_s": span, "n_words": words})
    # smooth turn-taking / user interruption
    stt: list[dict[str, Any]] = []
    ui: list[dict[str, Any]] = []
    for k, t in enumerate(turns):
        nxt = turns[k + 1].onset_s if k + 1 < len(turns) else math.inf
        item: dict[str, Any] = {"ref": t.id, "TOR": 0, "latency_s": None, "span_s": 0.0}
        if t.response_burst is not None:
            ans = bursts[t.response_burst]
            out = [b for b in ordered if ans.start_s <= b.start_s < nxt]
            span, words = _span(out)
            item.update(TOR=_fdb_tor(span, words), span_s=span, n_words=words)
            if item["TOR"]:
                item["latency_s"] = max(0.0, ans.start_s - t.end_s)
        (ui if t.barge_in else stt).append(item)
    # backchannel
    bc_items: list[dict[str, Any]] = []
    n_bc = 0
    for t in turns:
        during = [b for b in ordered if t.onset_s <= b.start_s < t.end_s]
        tor = 0
        for b in during:
            span = b.end_s - b.start_s
            words_over = b.n_words is not None and b.n_words > FDB_BC_WORDS
            if span > FDB_BC_TURN_S or span >= FDB_TURN_DURATION_S or words_over:
                tor = 1
            else:
                n_bc += 1
        bc_items.append({"ref": t.id, "TOR": tor, "n_agent_bursts": len(during)})
    # v1.5 timing
    user_iv = _fdb_merge(
        [(s["start_s"], s["end_s"]) for s in a.inputs.get("user", []) if s["kind"] == SPEECH],
        FDB_USER_MERGE_S,
    )
    model_iv = _fdb_merge(
        [(s["start_s"], s["end_s"]) for s in a.inputs.get("agent", [])], FDB_MODEL_MERGE_S
    )
    stop_iv = _fdb_stop_intervals(user_iv, model_iv)
    resp_iv = _fdb_response_intervals(user_iv, model_iv)

    def tor_block(items: list[dict[str, Any]], direction: str) -> dict[str, Any]:
        return {
            "value": _mean([x["TOR"] for x in items]),
            "n": len(items),
            "direction": direction,
            "items": items,
        }

    def lat_block(items: list[dict[str, Any]]) -> dict[str, Any]:
        xs = [x["latency_s"] for x in items if x["TOR"] == 1]
        return {"value_s": _mean(xs), "n": len(xs), "direction": "lower is better"}

    return {
        "call_id": a.call_id,
        "note": (
            "Full-Duplex-Bench compatibility metrics computed from two-channel segments; agent "
            "speech bursts stand in for ASR words; not a Full-Duplex-Bench result"
        ),
        "sources": FDB_SOURCES,
        "v1.0": {
            "pause_handling": {"TOR": tor_block(ph, "lower is better")},
            "smooth_turn_taking": {
                "TOR": tor_block(stt, "higher is better"),
                "Latency": lat_block(stt),
            },
            "user_interruption": {
                "TOR": tor_block(ui, "higher is better"),
                "Latency": lat_block(ui),
                "GPT-4o score": {"value": None, "reason": "needs ASR and an LLM judge"},
            },
            "backchannel": {
                "TOR": tor_block(bc_items, "lower is better"),
                "Freq": {
                    "value": n_bc / a.duration_s if a.duration_s > 0 else None,
                    "count": n_bc,
                    "duration_s": a.duration_s,
                    "direction": "higher is better",
                },
                "JSD": {
                    "value": None,
                    "reason": "needs Full-Duplex-Bench's human backchannel distribution for the input",
                },
            },
        },
        "v1.5": {
            "Stop Latency": {
                "value_s": _mean([e - s for s, e in stop_iv]),
                "n": len(stop_iv),
                "intervals": [list(x) for x in stop_iv],
            },
            "Response Latency": {
                "value_s": _mean([e - s for s, e in resp_iv]),
                "n": len(resp_iv),
                "intervals": [list(x) for x in resp_iv],
            },
            "behavior": {"value": None, "reason": "needs ASR and an LLM judge"},
        },
    }


def _pool_compat(per_call: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pool per-call compatibility metrics: TOR and latency means over all items of all calls,
    backchannel Freq as total count / total duration, v1.5 means over all intervals."""

    def items(path: tuple[str, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for c in per_call:
            node: Any = c
            for key in path:
                node = node[key]
            out.extend({**x, "ref": f"{c['call_id']}/{x['ref']}"} for x in node["items"])
        return out

    def tor(path: tuple[str, ...], direction: str) -> dict[str, Any]:
        xs = items(path)
        return {"value": _mean([x["TOR"] for x in xs]), "n": len(xs), "direction": direction}

    def lat(path: tuple[str, ...]) -> dict[str, Any]:
        xs = [x["latency_s"] for x in items(path) if x["TOR"] == 1]
        return {"value_s": _mean(xs), "n": len(xs), "direction": "lower is better"}

    def v15(name: str) -> dict[str, Any]:
        xs = [e - s for c in per_call for s, e in c["v1.5"][name]["intervals"]]
        return {"value_s": _mean(xs), "n": len(xs)}

    count = sum(c["v1.0"]["backchannel"]["Freq"]["count"] for c in per_call)
    dur = sum(c["v1.0"]["backchannel"]["Freq"]["duration_s"] for c in per_call)
    return {
        "note": per_call[0]["note"] if per_call else None,
        "sources": FDB_SOURCES,
        "n_calls": len(per_call),
        "v1.0": {
            "pause_handling": {"TOR": tor(("v1.0", "pause_handling", "TOR"), "lower is better")},
            "smooth_turn_taking": {
                "TOR": tor(("v1.0", "smooth_turn_taking", "TOR"), "higher is better"),
                "Latency": lat(("v1.0", "smooth_turn_taking", "TOR")),
            },
            "user_interruption": {
                "TOR": tor(("v1.0", "user_interruption", "TOR"), "higher is better"),
                "Latency": lat(("v1.0", "user_interruption", "TOR")),
            },
            "backchannel": {
                "TOR": tor(("v1.0", "backchannel", "TOR"), "lower is better"),
                "Freq": {
                    "value": count / dur if dur > 0 else None,
                    "count": count,
                    "duration_s": dur,
                },
                "JSD": {"value": None, "reason": "not computed (needs a reference distribution)"},
            },
        },
        "v1.5": {"Stop Latency": v15("Stop Latency"), "Response Latency": v15("Response Latency")},
    }
