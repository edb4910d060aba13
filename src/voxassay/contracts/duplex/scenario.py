"""The scenario contract: segments and their triggers, tools, faults, business truth; cross-field checks."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from voxassay.contracts.duplex.common import (
    SCENARIO_SCHEMA_VERSION,
    Loc,
    Strict,
    _raise,
    defer,
    iso_dates,
    version_check,
)
from voxassay.contracts.duplex.vocabulary import (
    Category,
    HistoryAction,
    Intent,
    Role,
    TaskAction,
    TurnAction,
)


class Trigger(Strict):
    """Start relative to an observed event: the first ``event`` (of ``ref``) plus ``offset_ms``."""

    event: str = Field(pattern=r"^[a-z_]+(\.[a-z0-9_]+)+$")
    """Ledger event type, e.g. playback.started or user.speech_stopped."""
    offset_ms: int = Field(default=0, ge=0)
    ref: str | None = None
    """Segment id the event belongs to (its speech, or the response it caused)."""


class GenerateKind(StrEnum):
    """Ambient sounds the renderer synthesizes (``voxassay.suites.duplex.live.stimuli``)."""

    TV = "tv"
    CHATTER = "chatter"
    COUGH = "cough"
    KEYBOARD = "keyboard"
    MUSIC = "music"
    HUM = "hum"
    ECHO = "echo"


class Generate(Strict):
    """A generated sound: same kind, seed and duration give the same samples."""

    kind: GenerateKind
    seed: int = Field(default=0, ge=0)
    duration_ms: int = Field(gt=0, le=600_000)
    text: str | None = Field(default=None, min_length=1)
    """tv, chatter, echo: the words spoken (default: built-in lines chosen by seed)."""
    voice: str | None = Field(default=None, min_length=1)
    """echo: the agent's voice spec (default piper); tv, chatter: one voice for every talker."""


_SEGMENT_JSON_RULES: dict[str, Any] = {
    "allOf": [
        {"oneOf": [{"required": ["at_ms"]}, {"required": ["after"]}]},
        {"oneOf": [{"required": ["audio"]}, {"required": ["say"]}, {"required": ["generate"]}]},
    ],
    "dependentRequired": {
        "say": ["voice"],
        "voice": ["say"],
        "start_ms": ["audio"],
        "end_ms": ["audio"],
    },
}


class Segment(Strict):
    """One sound of the scenario: who, what, when, and the expected reactions."""

    model_config = ConfigDict(json_schema_extra=_SEGMENT_JSON_RULES)

    id: str = Field(min_length=1)
    role: Role
    audio: str | None = None
    """Audio file, relative to the scenario file (XOR say)."""
    start_ms: int | None = Field(default=None, ge=0)
    """Trim start of the audio file."""
    end_ms: int | None = Field(default=None, gt=0)
    """Trim end of the audio file (exclusive)."""
    say: str | None = None
    """Text rendered by a synthesizer (XOR audio)."""
    voice: str | None = None
    """Synthesizer voice spec for say: piper, espeak-ng:en-us+f3, ..."""
    generate: Generate | None = None
    """A generated ambient sound: tv, chatter, cough, keyboard, music, hum, echo (XOR audio, say)."""
    gain_db: float = 0.0
    at_ms: int | None = Field(default=None, ge=0)
    """Start time on the session clock (XOR after)."""
    after: Trigger | None = None
    """Start after an observed event (XOR at_ms)."""
    intents: list[Intent] = Field(default_factory=list)
    expected_actions: list[TurnAction] = Field(default_factory=list)
    expected_task_action: TaskAction | None = None
    expected_history_action: HistoryAction | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Self:
        if not defer(info):
            _raise(segment_cross_checks(self))
        return self


def segment_cross_checks(seg: Segment, loc: Loc = ()) -> list[tuple[Loc, str]]:
    """Rules within one segment: one source, one start, voice with say, a sane trim."""
    out: list[tuple[Loc, str]] = []
    sources = [k for k in ("audio", "say", "generate") if getattr(seg, k) is not None]
    if len(sources) != 1:
        which = (
            "neither audio nor say nor generate"
            if not sources
            else f"both {' and '.join(sources)}"
            if len(sources) == 2
            else "audio, say and generate"
        )
        key = sources[-1] if sources else "id"
        out.append(((*loc, key), f"{which}: give exactly one"))
    if seg.say is not None and not seg.voice:
        out.append(((*loc, "say"), "say needs a voice (e.g. voice: piper)"))
    if seg.voice is not None and seg.say is None:
        out.append(((*loc, "voice"), "voice is only used with say"))
    if seg.audio is None and (seg.start_ms is not None or seg.end_ms is not None):
        key = "start_ms" if seg.start_ms is not None else "end_ms"
        what = "say" if seg.say is not None else "generate" if seg.generate else "this segment"
        out.append(((*loc, key), f"start_ms/end_ms trim audio; they do not apply to {what}"))
    if seg.start_ms is not None and seg.end_ms is not None and seg.end_ms <= seg.start_ms:
        out.append(((*loc, "end_ms"), f"end_ms {seg.end_ms} must be after start_ms {seg.start_ms}"))
    if (seg.at_ms is None) == (seg.after is None):
        which = "both at_ms and after" if seg.at_ms is not None else "neither at_ms nor after"
        out.append(
            ((*loc, "after" if seg.after is not None else "id"), f"{which}: give exactly one")
        )
    for key in ("intents", "expected_actions"):
        values = getattr(seg, key)
        if len(set(values)) != len(values):
            out.append(((*loc, key), f"{key} repeats a label"))
    return out


class ToolResult(Strict):
    """A canned answer: the first result whose ``match`` is a subset of the call's arguments."""

    match: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    """Fail the call with this message instead of returning ``result``."""


class Tool(Strict):
    """One tool of the scenario's world."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    description: str = ""
    arguments: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the arguments."""
    results: list[ToolResult] = Field(default_factory=list)
    latency_ms: int = Field(default=0, ge=0)
    may_go_stale: bool = False
    """The result can be outdated by the time it arrives (e.g. the user changed the request)."""
    side_effect: bool = False
    """The call commits a write (booking, payment); counted for duplicates and stop rules."""


class FaultKind(StrEnum):
    DELAY = "delay"
    JITTER = "jitter"
    LOSS = "loss"
    DISCONNECT = "disconnect"
    BACKLOG = "backlog"


FAULT_PARAMS: dict[FaultKind, str | None] = {
    FaultKind.DELAY: "delay_ms",
    FaultKind.JITTER: "jitter_ms",
    FaultKind.LOSS: "loss_rate",
    FaultKind.DISCONNECT: None,
    FaultKind.BACKLOG: "backlog_ms",
}


class Fault(Strict):
    """A network or media fault (category 7); random faults are reproducible from ``seed``."""

    kind: FaultKind
    direction: Literal["uplink", "downlink", "both"] = "both"
    at_ms: int | None = Field(default=None, ge=0)
    """When it starts (neither ``at_ms`` nor ``after``: from the session's start)."""
    after: Trigger | None = None
    duration_ms: int | None = Field(default=None, gt=0)
    """How long it lasts (None: to the end; required for disconnect)."""
    delay_ms: int | None = Field(default=None, ge=0)
    jitter_ms: int | None = Field(default=None, ge=0)
    loss_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    backlog_ms: int | None = Field(default=None, ge=0)
    seed: int = 0


def fault_cross_checks(fault: Fault, loc: Loc = ()) -> list[tuple[Loc, str]]:
    """A fault names its parameter, no other, and one start."""
    out: list[tuple[Loc, str]] = []
    needed = FAULT_PARAMS[fault.kind]
    if needed and getattr(fault, needed) is None:
        out.append(((*loc, "kind"), f"a {fault.kind} fault needs {needed}"))
    if fault.kind is FaultKind.DISCONNECT and fault.duration_ms is None:
        out.append(((*loc, "kind"), "a disconnect fault needs duration_ms"))
    for param in {p for p in FAULT_PARAMS.values() if p} - {needed}:
        if getattr(fault, param) is not None:
            out.append(((*loc, param), f"{param} is not used by a {fault.kind} fault"))
    if fault.at_ms is not None and fault.after is not None:
        out.append(((*loc, "after"), "both at_ms and after: give at most one"))
    return out


class BusinessTruth(Strict):
    """What the world must look like at the end, and which writes were allowed on the way."""

    expected_final_state: dict[str, Any] = Field(default_factory=dict)
    allowed_side_effects: list[str] = Field(default_factory=list)
    max_duplicate_side_effects: int = Field(default=0, ge=0)
    forbidden_after_stop: bool = True
    """A write committed after the user said stop is a failure even if the end state is right."""

    @field_validator("expected_final_state", mode="before")
    @classmethod
    def _dates_as_text(cls, value: Any) -> Any:
        return iso_dates(value)


class Scenario(Strict):
    """A full-duplex scenario: timed segments, expected reactions, the tool world, the truth."""

    schema_version: int = Field(default=SCENARIO_SCHEMA_VERSION, ge=1)
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    version: int = Field(ge=1)
    category: Category
    description: str = ""
    language: str = "en"
    tags: list[str] = Field(default_factory=list)
    segments: list[Segment] = Field(min_length=1)
    business_truth: BusinessTruth = Field(default_factory=lambda: BusinessTruth())
    tools: list[Tool] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    echo_db: float | None = Field(default=None, le=0)
    """The agent's own playback in its microphone, in dB relative to what was played (e.g.
    -20); None: no echo path. The played audio is the capture over a sound loop, else the
    modelled player's track."""
    """The business state the agent starts from (e.g. ``appointments``, ``availability``);
    agents with their own backend seed it, dates as ISO strings like the business truth."""

    @field_validator("initial_state", mode="before")
    @classmethod
    def _initial_dates_as_text(cls, value: Any) -> Any:
        return iso_dates(value)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return version_check(value, SCENARIO_SCHEMA_VERSION, "scenario")

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Self:
        if not defer(info):
            _raise(scenario_cross_checks(self))
        return self

    def segment(self, segment_id: str) -> Segment:
        for seg in self.segments:
            if seg.id == segment_id:
                return seg
        raise KeyError(segment_id)


def scenario_cross_checks(sc: Scenario) -> list[tuple[Loc, str]]:
    """Every cross-field rule of a scenario, each with the location it is about."""
    out: list[tuple[Loc, str]] = []
    first: dict[str, int] = {}
    for i, seg in enumerate(sc.segments):
        out += segment_cross_checks(seg, ("segments", i))
        if seg.id in first:
            out.append(
                (
                    ("segments", i, "id"),
                    f"duplicate segment id {seg.id!r} (also segment {first[seg.id]})",
                )
            )
        else:
            first[seg.id] = i
    for i, seg in enumerate(sc.segments):
        if seg.after and seg.after.ref is not None:
            if seg.after.ref not in first:
                out.append(
                    (
                        ("segments", i, "after", "ref"),
                        f"after.ref {seg.after.ref!r} is not a segment id",
                    )
                )
            elif seg.after.ref == seg.id:
                out.append((("segments", i, "after", "ref"), "a segment cannot start after itself"))
    out += _trigger_cycles(sc, first)
    for i, fault in enumerate(sc.faults):
        out += fault_cross_checks(fault, ("faults", i))
        if fault.after and fault.after.ref is not None and fault.after.ref not in first:
            out.append(
                (
                    ("faults", i, "after", "ref"),
                    f"after.ref {fault.after.ref!r} is not a segment id",
                )
            )
    names: dict[str, int] = {}
    for i, tool in enumerate(sc.tools):
        if tool.name in names:
            out.append((("tools", i, "name"), f"duplicate tool name {tool.name!r}"))
        names.setdefault(tool.name, i)
    return out


def _trigger_cycles(sc: Scenario, index: dict[str, int]) -> list[tuple[Loc, str]]:
    """Segments whose after.ref chain loops back never start."""
    out: list[tuple[Loc, str]] = []
    reported: set[str] = set()
    for seg in sc.segments:
        seen: list[str] = []
        cur: Segment | None = seg
        while cur is not None and cur.after and cur.after.ref in index:
            if cur.id in seen:
                cycle = seen[seen.index(cur.id) :]
                if not reported & set(cycle):
                    reported.update(cycle)
                    i = index[cycle[0]]
                    chain = " -> ".join([*cycle, cycle[0]])
                    out.append((("segments", i, "after", "ref"), f"after.ref cycle: {chain}"))
                break
            seen.append(cur.id)
            ref = cur.after.ref
            cur = sc.segments[index[ref]] if ref is not None and ref != cur.id else None
    return out
