"""Latency pairs, declared: each metric is a start event, an end event and a join key with its rules (``PairDef``, matched by ``Match``/``on``); ``DEFAULT_PAIRS`` are the ten ledger latencies of the catalogue (``definitions_table()`` prints them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.vocabulary import Role

__all__ = [
    "DEFAULT_HORIZON_MS",
    "DEFAULT_PAIRS",
    "INTERRUPTING_INTENTS",
    "NOT_RESPONDABLE_INTENTS",
    "NOT_RESPONDABLE_ROLES",
    "RECOVERY_INTENTS",
    "UNKNOWN",
    "EndRule",
    "Fallback",
    "JoinKey",
    "Match",
    "PairDef",
    "definitions_table",
    "on",
]


DEFAULT_HORIZON_MS = 120_000.0
"""Longest wait for an end before a start is censored while its session is still running."""


INTERRUPTING_INTENTS = ("interrupt", "correction", "cancel")
"""Scenario intents of an effective interruption (the agent is expected to yield)."""


RECOVERY_INTENTS = ("interrupt", "correction")
"""Intents after which the agent is expected to start a new response."""


NOT_RESPONDABLE_INTENTS = ("backchannel", "unrelated")
"""Intents of user speech whose end is not a point where a response is expected."""


NOT_RESPONDABLE_ROLES = tuple(str(r) for r in Role if r is not Role.USER)
"""Scenario segment roles (``data.segment_role``) whose speech is not addressed to the agent:
every role but ``user`` (``unknown`` included: nothing says a response is expected)."""


UNKNOWN = "unknown"
"""Split label of pairs whose session does not state the split field."""


JoinKey = Literal["utterance_id", "response_id", "playback_id", "task_id", "session"]


EndRule = Literal["first", "last", "silence"]


@dataclass(frozen=True)
class Match:
    """Which events a role of a pair accepts: event type(s) and conditions on ``data``.

    ``where``: ``data[key]`` must equal one of the values. ``any_of``: ``data[key]`` (a string
    or a list) must share a value with the given ones. ``none_of``: it must share none (an
    absent key shares none).
    """

    event_types: tuple[str, ...]
    where: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    any_of: tuple[tuple[str, tuple[str, ...]], ...] = ()
    none_of: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def data_ok(self, data: Mapping[str, Any]) -> bool:
        """The data conditions alone (the type is checked by the caller's index)."""
        for key, allowed in self.where:
            if data.get(key) not in allowed:
                return False
        for key, wanted in self.any_of:
            if not _shares(data.get(key), wanted):
                return False
        return all(not _shares(data.get(key), banned) for key, banned in self.none_of)

    def __call__(self, event: Event) -> bool:
        return event.event_type in self.event_types and self.data_ok(event.data)

    def describe(self) -> str:
        conds = [f"{k}={'|'.join(map(str, v))}" for k, v in self.where]
        conds += [f"{k}∋{'|'.join(v)}" for k, v in self.any_of]
        conds += [f"{k}∌{'|'.join(v)}" for k, v in self.none_of]
        types = " / ".join(self.event_types)
        return f"{types} [{', '.join(conds)}]" if conds else types


def _shares(value: Any, wanted: tuple[str, ...]) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value in wanted
    if isinstance(value, list | tuple | set | frozenset):
        return any(v in wanted for v in value)
    return False


def on(
    *event_types: str,
    any_of: Mapping[str, Sequence[str]] | None = None,
    none_of: Mapping[str, Sequence[str]] | None = None,
    **equals: Any,
) -> Match:
    """``Match`` shorthand: ``on("response.done", status="cancelled")``; a tuple value of
    ``equals`` lists alternatives."""
    if not event_types:
        raise ValueError("a match needs at least one event type")
    return Match(
        event_types=tuple(event_types),
        where=tuple(
            (k, tuple(v) if isinstance(v, tuple) else (v,)) for k, v in sorted(equals.items())
        ),
        any_of=tuple((k, tuple(v)) for k, v in sorted((any_of or {}).items())),
        none_of=tuple((k, tuple(v)) for k, v in sorted((none_of or {}).items())),
    )


@dataclass(frozen=True)
class Fallback:
    """A second source of starts, used in a session only until an ``until`` event is seen.

    When ``until`` first matches, open starts from this source are dropped (``superseded``):
    e.g. acoustic user speech ends stand in for scenario truth in sessions that have none.
    """

    start: tuple[Match, ...]
    cancel: tuple[Match, ...] = ()
    until: tuple[Match, ...] = ()


@dataclass(frozen=True)
class PairDef:
    """One latency metric: ``start`` -> ``end`` joined on ``join`` (see the module docstring).

    ``bind``: the start takes the session's active response (``join="response_id"``) or
    playback (``join="playback_id"``) at its time; without one it is ``unbound``.
    ``on_repeat``: a start for a key that is still open is ignored (``keep``, latency from the
    first) or replaces it (``restart``, latency from the latest). ``once_per_utterance``: only
    the first start event of an utterance id counts (truth and aligned acoustic onsets of one
    utterance). ``requires``: the pair is measurable only in sessions that show such an event.
    """

    name: str
    start: tuple[Match, ...]
    end: tuple[Match, ...]
    join: JoinKey
    description: str
    groups: tuple[str, ...] = ()
    cancel: tuple[Match, ...] = ()
    closes: tuple[Match, ...] = ()
    fallback: Fallback | None = None
    bind: bool = False
    end_rule: EndRule = "first"
    final: tuple[Match, ...] = ()
    resume: tuple[Match, ...] = ()
    settle_ms: float = 500.0
    already: bool = False
    on_repeat: Literal["keep", "restart"] = "keep"
    once_per_utterance: bool = False
    requires: tuple[Match, ...] = ()
    horizon_ms: float | None = None

    def __post_init__(self) -> None:
        if self.bind and self.join not in ("response_id", "playback_id"):
            raise ValueError(f"{self.name}: bind needs join response_id or playback_id")
        if self.end_rule == "silence" and not self.resume:
            raise ValueError(f"{self.name}: the silence rule needs resume matches")
        if self.end_rule == "last" and self.closes:
            raise ValueError(f"{self.name}: closes is for the first rule")
        if not self.start or not self.end:
            raise ValueError(f"{self.name}: start and end need at least one match each")

    def describe(self) -> dict[str, Any]:
        start = " or ".join(m.describe() for m in self.start)
        if self.fallback is not None:
            start += " (else " + " or ".join(m.describe() for m in self.fallback.start) + ")"
        return {
            "start": start,
            "end": " or ".join(m.describe() for m in self.end),
            "join": ("bound " if self.bind else "") + self.join,
            "rule": self.end_rule,
            "description": self.description,
            "groups": list(self.groups),
        }


_NOT_ADDRESSED = {"intents": NOT_RESPONDABLE_INTENTS, "segment_role": NOT_RESPONDABLE_ROLES}
"""Speech that does not expect a response: a non-responding intent or a non-user segment role."""


_USER_STOP_ACOUSTIC = on(
    "acoustic.speech_stopped", role="user", none_of={"intents": NOT_RESPONDABLE_INTENTS}
)


_USER_START_ACOUSTIC = on("acoustic.speech_started", role="user")


_AGENT_START_ACOUSTIC = on("acoustic.speech_started", role="agent")


_AGENT_STOP_ACOUSTIC = on("acoustic.speech_stopped", role="agent")


_TRUTH = (on("user.speech_started"), on("user.speech_stopped"))


_RESPONDABLE = on("user.speech_stopped", none_of=_NOT_ADDRESSED)


_USER_RESUMES = on("user.speech_started", none_of=_NOT_ADDRESSED)


_RESPONDABLE_FALLBACK = Fallback(
    start=(on("acoustic.speech_stopped", role="user", none_of=_NOT_ADDRESSED),),
    cancel=(on("acoustic.speech_started", role="user", none_of=_NOT_ADDRESSED),),
    until=_TRUTH,
)


_INTERRUPTION = (
    on("user.speech_started", any_of={"intents": INTERRUPTING_INTENTS}),
    on("user.speech_started", any_of={"expected_actions": ("interrupt",)}),
    on("acoustic.speech_started", role="user", any_of={"intents": INTERRUPTING_INTENTS}),
    on("acoustic.speech_started", role="user", any_of={"expected_actions": ("interrupt",)}),
)


_PLAYBACK_STOPPED = on("playback.stopped", "playback.interrupted")


DEFAULT_PAIRS: tuple[PairDef, ...] = (
    PairDef(
        "end_of_input_ms",
        start=(_USER_STOP_ACOUSTIC,),
        end=(on("vad.speech_stopped"),),
        join="session",
        cancel=(_USER_START_ACOUSTIC,),
        groups=("end-of-input detection",),
        description=catalogue.definition("end_of_input_ms"),
    ),
    PairDef(
        "response_first_audio_ms",
        start=(_RESPONDABLE,),
        end=(_AGENT_START_ACOUSTIC,),
        join="session",
        cancel=(_USER_RESUMES,),
        fallback=_RESPONDABLE_FALLBACK,
        requires=(_AGENT_START_ACOUSTIC, _AGENT_STOP_ACOUSTIC),
        groups=("response first audio",),
        description=catalogue.definition("response_first_audio_ms"),
    ),
    PairDef(
        "response_first_playback_ms",
        start=(_RESPONDABLE,),
        end=(on("playback.started"),),
        join="session",
        cancel=(_USER_RESUMES,),
        fallback=_RESPONDABLE_FALLBACK,
        groups=("response first audio",),
        description=catalogue.definition("response_first_playback_ms"),
    ),
    PairDef(
        "interrupt_stop_ms",
        start=_INTERRUPTION,
        end=(_AGENT_STOP_ACOUSTIC,),
        resume=(_AGENT_START_ACOUSTIC,),
        end_rule="silence",
        join="session",
        once_per_utterance=True,
        groups=("interrupt stop",),
        description=catalogue.definition("interrupt_stop_ms"),
    ),
    PairDef(
        "interrupt_stop_playback_ms",
        start=_INTERRUPTION,
        end=(_PLAYBACK_STOPPED,),
        closes=(on("playback.completed"),),
        join="playback_id",
        bind=True,
        once_per_utterance=True,
        groups=("interrupt stop", "cancel propagation"),
        description=catalogue.definition("interrupt_stop_playback_ms"),
    ),
    PairDef(
        "cancel_generation_ms",
        start=_INTERRUPTION,
        end=(on("response.done", status="cancelled"),),
        closes=(on("response.done", none_of={"status": ("cancelled",)}),),
        join="response_id",
        bind=True,
        already=True,
        once_per_utterance=True,
        groups=("cancel propagation",),
        description=catalogue.definition("cancel_generation_ms"),
    ),
    PairDef(
        "cancel_transmission_ms",
        start=_INTERRUPTION,
        end=(on("tts.chunk"),),
        final=(on("response.done"),),
        end_rule="last",
        join="response_id",
        bind=True,
        once_per_utterance=True,
        groups=("cancel propagation",),
        description=catalogue.definition("cancel_transmission_ms"),
    ),
    PairDef(
        "new_response_recovery_ms",
        start=(
            on("user.speech_stopped", any_of={"intents": RECOVERY_INTENTS}),
            on("acoustic.speech_stopped", role="user", any_of={"intents": RECOVERY_INTENTS}),
        ),
        end=(on("playback.started"),),
        join="session",
        once_per_utterance=True,
        groups=("new-response recovery",),
        description=catalogue.definition("new_response_recovery_ms"),
    ),
    PairDef(
        "tool_announcement_ms",
        start=(on("tool.completed"),),
        end=(on("playback.started"),),
        join="task_id",
        on_repeat="restart",
        cancel=(on("task.state", status=("cancelled", "superseded")),),
        groups=("tool result announcement",),
        description=catalogue.definition("tool_announcement_ms"),
    ),
    PairDef(
        "reconnect_recovery_ms",
        start=(
            on(
                "session.disconnected",
                "network.drop",
                "network.disconnected",
                none_of={"timed_by": ("scenario",)},
            ),
        ),
        end=(on("session.resumed", "session.connected", none_of={"timed_by": ("scenario",)}),),
        join="session",
        groups=("reconnect recovery",),
        description=catalogue.definition("reconnect_recovery_ms"),
    ),
)


def definitions_table(defs: Sequence[PairDef] = DEFAULT_PAIRS) -> str:
    """The pair definitions as a Markdown table."""
    rows = ["| metric | start | end | join | rule |", "|---|---|---|---|---|"]
    for d in defs:
        x = d.describe()
        rows.append(f"| {d.name} | {x['start']} | {x['end']} | {x['join']} | {x['rule']} |")
    return "\n".join(rows)
