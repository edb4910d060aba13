"""The turn layer's types: its inputs (speech segments, labels of expected actions, parameters) and what ``analyze_call`` gives back (turns, agent bursts, user sounds, takeovers, overlap and gap events, pauses, decisions, rates, latencies: a ``CallAnalysis``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from voxassay.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxassay.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxassay.stats.percentiles import LatencyValue

__all__ = [
    "ACTIONS",
    "ALL_ACTIONS",
    "BACKCHANNEL",
    "BACKGROUND",
    "BARGE_IN",
    "DEFAULT_PARAMS",
    "NOISE",
    "RESPOND",
    "RESUME",
    "SPEECH",
    "TURNS_VERSION",
    "YIELD_ACTIONS",
    "AgentBurst",
    "CallAnalysis",
    "Decision",
    "Label",
    "Latency",
    "Pause",
    "Rate",
    "SegmentLike",
    "Takeover",
    "Turn",
    "TurnEvent",
    "TurnParams",
    "UserSound",
]


TURNS_VERSION = "4"
"""4: overlapping transfers up to 0.5 s (was 0.3 s); backchannels by what the ASR heard where
it did; a backchannel satisfies `listen` and in silence demands no answer."""
BARGE_IN, RESUME = "barge_in", "resume"
SPEECH, BACKCHANNEL, BACKGROUND, NOISE = "speech", "backchannel", "background", "noise"
"""Kinds of user-channel sound."""


ACTIONS = ("listen", "continue", "backchannel", "pause", "interrupt", "ignore")
"""The scenario turn actions (the values of ``schema.TurnAction``)."""


RESPOND = "respond"


ALL_ACTIONS = (*ACTIONS, RESPOND)
"""Turn actions plus ``respond``: the agent takes the turn (turn ends, takeovers)."""


YIELD_ACTIONS = frozenset({"interrupt", "listen", "pause"})
"""Expected actions that require an agent that is talking to stop."""


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
    early_start_tol_s: float = 0.5
    """Agent speech starting this close before the user's end, the user then stopping, is an
    overlapping floor transfer (a response with a negative offset), not a talk-over."""
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
    token: bool | None = None
    """What an ASR heard in it: True a backchannel form, False other words, None untranscribed."""


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
    cut_by_file: str | None = None
    """``start``: its first sound began before the recording (onset unseen); ``end``: its last
    sound runs into the recording's end (no answer can be observed: latency not measured)."""


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
class TurnEvent:
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
    events: list[TurnEvent]
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
