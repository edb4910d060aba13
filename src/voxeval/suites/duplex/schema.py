"""Full-duplex contracts: scenario, ledger event, bundle manifest, acceptance matrix.

Each model has a versioned JSON Schema (``json_schemas()``; committed under ``schemas/``).
Cross-field rules live in ``scenario_cross_checks`` / ``matrix_cross_checks`` so that the
validator can report them at the offending YAML line; the models run them too, so a scenario
built in Python is refused the same way.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

SCENARIO_SCHEMA_VERSION = 1
EVENT_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1
MATRIX_SCHEMA_VERSION = 1

DEFER_CROSS_CHECKS = "defer_cross_checks"
"""Validation context key: skip cross-field checks (the validator runs them to get lines)."""

Loc = tuple[str | int, ...]


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    """One finding of the validator: where (file, 1-based line and column) and what.

    ``line`` is None for whole-file findings (a missing file, audio too short).
    """

    file: str
    line: int | None
    column: int | None
    severity: Literal["error", "warning"]
    message: str

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.severity}: {self.message}"


# --------------------------------------------------------------------------- vocabularies


class Category(StrEnum):
    """The eight scenario categories of DESIGN.md (stable names; numbers in CATEGORY_NUMBER)."""

    NORMAL_TURNS = "normal_turns"
    INTERRUPTION = "interruption"
    BACKCHANNEL = "backchannel"
    BYSTANDER_AMBIENT = "bystander_ambient"
    CORRECTION_ENTITY = "correction_entity"
    TOOLS_BACKGROUND = "tools_background"
    NETWORK_MEDIA = "network_media"
    RECOVERY_DEGRADATION = "recovery_degradation"


CATEGORY_NUMBER: dict[Category, int] = {c: i for i, c in enumerate(Category, start=1)}


class Role(StrEnum):
    """Who or what a segment's sound is."""

    USER = "user"
    BYSTANDER = "bystander"
    MEDIA = "media"
    ECHO = "echo"
    NOISE = "noise"
    UNKNOWN = "unknown"


class Intent(StrEnum):
    """Interaction intent of a segment (scenario truth)."""

    START = "start"
    BACKCHANNEL = "backchannel"
    CORRECTION = "correction"
    INTERRUPT = "interrupt"
    CONTINUE = "continue"
    CANCEL = "cancel"
    UNRELATED = "unrelated"


class TurnAction(StrEnum):
    """What the agent should do about a segment (several may be expected)."""

    LISTEN = "listen"
    CONTINUE = "continue"
    BACKCHANNEL = "backchannel"
    PAUSE = "pause"
    INTERRUPT = "interrupt"
    IGNORE = "ignore"


class TaskAction(StrEnum):
    """What should happen to the running task because of a segment."""

    KEEP = "keep"
    MODIFY = "modify"
    CANCEL = "cancel"
    COMPENSATE = "compensate"
    REFUSE = "refuse"


class HistoryAction(StrEnum):
    """What should happen to the conversation history because of a segment."""

    KEEP = "keep"
    TRUNCATE = "truncate"
    CLARIFY = "clarify"
    MARK_UNCERTAIN = "mark_uncertain"


class Route(StrEnum):
    DIRECT = "direct"
    RELAY = "relay"


# --------------------------------------------------------------------------- event types

KNOWN_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "user.speech_started",
        "user.speech_stopped",
        "vad.speech_started",
        "vad.speech_stopped",
        "asr.partial",
        "asr.final",
        "turn.decision",
        "response.created",
        "response.done",
        "response.cancelled",
        "tts.chunk",
        "playback.started",
        "playback.progress",
        "playback.stopped",
        "playback.interrupted",
        "playback.completed",
        "tool.requested",
        "tool.completed",
        "tool.failed",
        "task.state",
        "history.updated",
        "session.connected",
        "session.disconnected",
        "session.resumed",
        "session.error",
        "clock.producer",
    }
)
# ``realtime.*``: OpenAI Realtime protocol events kept verbatim by the importer.
KNOWN_EVENT_PREFIXES: tuple[str, ...] = ("network.", "acoustic.", "fault.", "realtime.")
CLOCK_EVENT_TYPE = "clock.producer"

# OpenAI Realtime protocol names (GA and beta) that people write into a ledger verbatim, and
# the ledger type a driver should map them to. Used for hints only; nothing is renamed.
REALTIME_EVENT_HINTS: dict[str, str] = {
    "input_audio_buffer.speech_started": "vad.speech_started",
    "input_audio_buffer.speech_stopped": "vad.speech_stopped",
    "conversation.item.input_audio_transcription.delta": "asr.partial",
    "conversation.item.input_audio_transcription.completed": "asr.final",
    "response.audio.delta": "tts.chunk",  # beta name
    "response.output_audio.delta": "tts.chunk",  # GA name
    "output_audio_buffer.started": "playback.started (server buffer, not acoustic truth)",
    "output_audio_buffer.stopped": "playback.stopped (server buffer, not acoustic truth)",
    "output_audio_buffer.cleared": "playback.interrupted (server buffer, not acoustic truth)",
    "conversation.item.truncated": "playback.interrupted with played_until_ms = audio_end_ms",
    "response.function_call_arguments.done": "tool.requested",
    "response.cancel": "response.cancelled (then response.done with status cancelled)",
    "session.created": "session.connected",
}


def is_known_event_type(event_type: str) -> bool:
    """True for the ledger vocabulary (exact names and the network./acoustic./fault. families)."""
    return event_type in KNOWN_EVENT_TYPES or event_type.startswith(KNOWN_EVENT_PREFIXES)


def unknown_event_hint(event_type: str) -> str:
    """Warning text for an event type outside the vocabulary (with a mapping hint if any)."""
    hint = REALTIME_EVENT_HINTS.get(event_type)
    if hint:
        return f"event type {event_type!r} is an OpenAI Realtime name; map it to {hint}"
    return f"unknown event type {event_type!r} (kept; scorers ignore it)"


# --------------------------------------------------------------------------- scenario


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def _defer(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(DEFER_CROSS_CHECKS))


def _raise(problems: list[tuple[Loc, str]]) -> None:
    if problems:
        raise ValueError("; ".join(f"{_dotted(loc)}: {msg}" for loc, msg in problems))


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def _iso_dates(value: Any) -> Any:
    """Dates that YAML turned into objects become ISO strings again (final-state.json is JSON)."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _iso_dates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso_dates(v) for v in value]
    return value


class Trigger(_Strict):
    """Start relative to an observed event: the first ``event`` (of ``ref``) plus ``offset_ms``."""

    event: str = Field(pattern=r"^[a-z_]+(\.[a-z0-9_]+)+$")
    """Ledger event type, e.g. playback.started or user.speech_stopped."""
    offset_ms: int = Field(default=0, ge=0)
    ref: str | None = None
    """Segment id the event belongs to (its speech, or the response it caused)."""


class GenerateKind(StrEnum):
    """Ambient sounds the renderer synthesizes (``voxeval.suites.duplex.live.render``)."""

    TV = "tv"
    CHATTER = "chatter"
    COUGH = "cough"
    KEYBOARD = "keyboard"
    MUSIC = "music"
    HUM = "hum"
    ECHO = "echo"


class Generate(_Strict):
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


class Segment(_Strict):
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
        if not _defer(info):
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


class ToolResult(_Strict):
    """A canned answer: the first result whose ``match`` is a subset of the call's arguments."""

    match: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    """Fail the call with this message instead of returning ``result``."""


class Tool(_Strict):
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


class Fault(_Strict):
    """A network or media fault (category 7); random faults are reproducible from ``seed``."""

    kind: FaultKind
    direction: Literal["uplink", "downlink", "both"] = "both"
    at_ms: int | None = Field(default=None, ge=0)
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


class BusinessTruth(_Strict):
    """What the world must look like at the end, and which writes were allowed on the way."""

    expected_final_state: dict[str, Any] = Field(default_factory=dict)
    allowed_side_effects: list[str] = Field(default_factory=list)
    max_duplicate_side_effects: int = Field(default=0, ge=0)
    forbidden_after_stop: bool = True
    """A write committed after the user said stop is a failure even if the end state is right."""

    @field_validator("expected_final_state", mode="before")
    @classmethod
    def _dates_as_text(cls, value: Any) -> Any:
        return _iso_dates(value)


def _version_check(value: int, current: int, what: str) -> int:
    if value > current:
        raise ValueError(
            f"{what} schema_version {value} is newer than this voxeval reads ({current})"
        )
    return value


class Scenario(_Strict):
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
    """The business state the agent starts from (e.g. ``appointments``, ``availability``);
    agents with their own backend seed it, dates as ISO strings like the business truth."""

    @field_validator("initial_state", mode="before")
    @classmethod
    def _initial_dates_as_text(cls, value: Any) -> Any:
        return _iso_dates(value)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return _version_check(value, SCENARIO_SCHEMA_VERSION, "scenario")

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Self:
        if not _defer(info):
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


# --------------------------------------------------------------------------- ledger event


class ClockKind(StrEnum):
    MONOTONIC = "monotonic"
    WALL = "wall"
    VIRTUAL = "virtual"
    SAMPLE = "sample"


class ProducerClock(_Strict):
    """The ``data`` of a ``clock.producer`` event: how a producer's clock maps to the session's.

    ``session_ns = producer monotonic_ns + offset_ns``, known to within ``uncertainty_ns``.
    """

    producer: str
    kind: ClockKind
    offset_ns: int = 0
    uncertainty_ns: int = Field(default=0, ge=0)
    method: str = "assumed"
    """How the offset was estimated: shared (same clock), ntp-style ping, audio alignment..."""

    def to_event(self, session_id: str, monotonic_ns: int, producer: str = "harness") -> Event:
        """A ledger line carrying this record (written by ``producer``, usually the harness)."""
        return Event.new(
            CLOCK_EVENT_TYPE,
            session_id=session_id,
            producer=producer,
            monotonic_ns=monotonic_ns,
            data=self.model_dump(mode="json"),
        )

    @classmethod
    def from_event(cls, event: Event) -> ProducerClock:
        return cls.model_validate(event.data)


class Event(BaseModel):
    """One ledger line. Unknown event types are kept (the validator warns)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    event_id: str = Field(min_length=1)
    trace_id: str | None = None
    session_id: str = Field(min_length=1)
    utterance_id: str | None = None
    response_id: str | None = None
    playback_id: str | None = None
    task_id: str | None = None
    event_type: str = Field(min_length=1)
    producer: str = Field(min_length=1)
    """Who wrote it (harness, agent, player, acoustic); each producer has its own clock."""
    monotonic_ns: int
    """The producer's clock; mapped to the session clock by its clock.producer record."""
    seq: int | None = None
    """Producer sequence number: orders a producer's events that share a timestamp."""
    wall_time: dt.datetime | None = None
    reason: str | None = None
    played_until_ms: float | None = Field(default=None, ge=0)
    """For playback stop/interrupt: how much of the response the user actually heard."""
    route: Route | None = None
    schema_version: int = Field(default=EVENT_SCHEMA_VERSION, ge=1)
    data: dict[str, Any] = Field(default_factory=dict)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return _version_check(value, EVENT_SCHEMA_VERSION, "event")

    @model_validator(mode="after")
    def _clock_data(self) -> Self:
        if self.event_type == CLOCK_EVENT_TYPE:
            try:
                ProducerClock.model_validate(self.data)
            except ValidationError as exc:
                details = "; ".join(
                    f"{'.'.join(str(x) for x in e['loc']) or 'data'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                )
                raise ValueError(f"clock.producer data: {details}") from None
        return self

    @property
    def known_type(self) -> bool:
        return is_known_event_type(self.event_type)

    @classmethod
    def new(
        cls,
        event_type: str,
        *,
        session_id: str,
        producer: str,
        monotonic_ns: int,
        **fields: Any,
    ) -> Event:
        """An event with a fresh random ``event_id``."""
        return cls(
            event_id=fields.pop("event_id", None) or uuid.uuid4().hex,
            event_type=event_type,
            session_id=session_id,
            producer=producer,
            monotonic_ns=monotonic_ns,
            **fields,
        )

    def to_json(self) -> str:
        """One compact JSON line (unset optional ids left out)."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


# --------------------------------------------------------------------------- bundle manifest

REQUIRED_BUNDLE_FILES = ("input.wav", "output.wav", "events.jsonl", "manifest.json")
OPTIONAL_BUNDLE_FILES = (
    "mixed.wav",
    "tool-audit.json",
    "final-state.json",
    "scenario.yaml",
)
EXPECTED_CHANNELS = {"mixed.wav": 2}
"""Default channel count by file: mixed.wav keeps the input (left) and output (right) apart."""


class FileEntry(_Strict):
    """A bundle file with its hash; audio may declare the channel count it must have."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)
    channels: int | None = Field(default=None, ge=1)


def file_entry(path: Path, root: Path, channels: int | None = None) -> FileEntry:
    """Hash ``path`` (streamed) into an entry named relative to the bundle ``root``."""
    return FileEntry(
        path=path.relative_to(root).as_posix(),
        sha256=sha256_file(path),
        bytes=path.stat().st_size,
        channels=channels,
    )


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ScenarioRef(_Strict):
    id: str
    version: int = Field(ge=1)


class ClockInfo(_Strict):
    """The session clock: virtual (advanced by the harness) or real; compute charged or not."""

    kind: Literal["virtual", "real"]
    compute: Literal["charged", "zero"] | None = None
    """Virtual clock only: agent compute added to the clock as measured, or counted as zero."""
    audio_origin_ns: int | None = None
    """Session-clock time of sample 0 of input.wav/output.wav (None: the first event)."""


class Provenance(BaseModel):
    """Facts about how the evidence was produced; the evidence level is derived from them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    transport: Literal["in_process", "socket"] | None = None
    """socket: the agent ran as its own process behind a real network socket."""
    clock: Literal["virtual", "monotonic"] | None = None
    playback: Literal["modelled", "real_device_capture"] | None = None
    """real_device_capture: agent audio went through a real player and was captured after it."""
    capture: Literal["none", "loopback_soundcard", "device_mic"] | None = None
    traffic: Literal["synthetic", "production_shadow"] | None = None
    acoustic_events: Literal["none", "output_stream", "capture"] | None = None
    """Where acoustic.* events were derived from: nowhere, the agent's output stream, or the capture."""


class SystemInfo(_Strict):
    name: str
    version: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class Privacy(_Strict):
    redacted: bool = False
    retention_days: int | None = Field(default=None, ge=0)
    purpose: str = "evaluation"


class BundleManifest(BaseModel):
    """``manifest.json`` of an evidence bundle. Holds provenance facts, never a level."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    schema_version: int = Field(default=MANIFEST_SCHEMA_VERSION, ge=1)
    session_id: str = Field(min_length=1)
    scenario: ScenarioRef | None = None
    created_at: dt.datetime
    producers: dict[str, str] = Field(default_factory=dict)
    """Producer name -> version (harness, agent, player, acoustic detector)."""
    files: list[FileEntry] = Field(default_factory=list)
    clock: ClockInfo
    provenance: Provenance = Field(default_factory=lambda: Provenance())
    route: Route | None = None
    device: str | None = None
    language: str | None = None
    system: SystemInfo | None = None
    privacy: Privacy = Field(default_factory=lambda: Privacy())

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return _version_check(value, MANIFEST_SCHEMA_VERSION, "manifest")

    def file(self, name: str) -> FileEntry | None:
        return next((f for f in self.files if f.path == name), None)


SELF_DECLARED_LEVEL_KEYS = ("evidence_level", "evidence", "level")
EvidenceLevel = Literal["L1", "L2", "L3", "L4"]
EVIDENCE_LEVELS: tuple[EvidenceLevel, ...] = ("L1", "L2", "L3", "L4")
_AUDIO = ("input.wav", "output.wav", "mixed.wav")
FEATURES_FILE = "features.json"
"""Derived audio features that a redacted bundle keeps instead of its raw audio."""
REDACTED_REASON = "redacted (features from raw audio; raw audio dropped)"
"""How reasons and the validator name a bundle whose raw audio voxeval's redaction dropped."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class EvidenceAssessment:
    """The derived level, why, and which manifest fields contradict each other.

    ``notes``: located findings that are not contradictions (the validator shows them as
    warnings): a redacted bundle whose capture claim rests on the redaction record.
    ``redaction``: the check of a declared redaction (None: the bundle declares none).
    """

    level: EvidenceLevel
    reasons: list[str]
    contradictions: list[tuple[Loc, str]]
    notes: list[tuple[Loc, str]] = field(default_factory=list)
    redaction: RedactionCheck | None = None


@dataclass(frozen=True)
class RedactionCheck:
    """Whether a bundle that declares ``privacy.redacted`` holds a consistent record of
    voxeval's redaction (``redact.redact_bundle``) in ``features.json``: its segments, a known
    redaction version, every dropped audio file with sha256 and size (and no longer listed
    in the manifest), and the level the bundle had before (``source_level``).
    ``problem`` says what is missing or inconsistent (None when consistent)."""

    problem: str | None
    dropped: tuple[str, ...] = ()
    source_level: EvidenceLevel | None = None
    at: str | None = None

    @property
    def consistent(self) -> bool:
        return self.problem is None


def read_features(bundle_dir: Path) -> dict[str, Any] | None:
    """``features.json`` of a bundle folder, or None when absent or not a JSON object."""
    try:
        data = json.loads((bundle_dir / FEATURES_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_redaction(
    manifest: BundleManifest, features: Any, listed: Iterable[str] | None = None
) -> RedactionCheck:
    """Check the redaction record of a bundle (see ``RedactionCheck``). ``features`` is the
    content of ``features.json`` (None: not available); ``listed`` the bundle files that
    count (default: the manifest's file list)."""
    from voxeval.suites.duplex.redact import REDACTION_VERSION

    files = set(listed) if listed is not None else {f.path for f in manifest.files}
    if FEATURES_FILE not in files:
        return RedactionCheck(f"{FEATURES_FILE} is not among the bundle's verified files")
    if not isinstance(features, dict):
        return RedactionCheck(f"{FEATURES_FILE} could not be read")
    segs = features.get("segments")
    if not isinstance(segs, dict) or not all(
        isinstance(segs.get(side), list) for side in ("user", "agent")
    ):
        return RedactionCheck(f"{FEATURES_FILE} holds no segments")
    red = features.get("redaction")
    if not isinstance(red, dict):
        return RedactionCheck(f"{FEATURES_FILE} has no redaction block")
    version = red.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        return RedactionCheck("the redaction block has no version")
    if not 1 <= version <= REDACTION_VERSION:
        return RedactionCheck(f"redaction version {version} is not one voxeval writes")
    level = red.get("source_level")
    if level not in EVIDENCE_LEVELS:
        return RedactionCheck("the redaction block records no source_level (L1..L4)")
    dropped = red.get("dropped")
    if not isinstance(dropped, list) or not dropped:
        return RedactionCheck("the redaction block records no dropped audio")
    paths: list[str] = []
    for i, entry in enumerate(dropped):
        ok = (
            isinstance(entry, dict)
            and entry.get("path") in _AUDIO
            and isinstance(entry.get("sha256"), str)
            and bool(_SHA256.match(entry["sha256"]))
            and isinstance(entry.get("bytes"), int)
            and entry["bytes"] >= 0
        )
        if not ok:
            return RedactionCheck(
                f"dropped entry {i} is not an audio file with its sha256 and bytes"
            )
        if entry["path"] in paths:
            return RedactionCheck(f"{entry['path']} is recorded as dropped twice")
        paths.append(str(entry["path"]))
    still = sorted(set(paths) & {f.path for f in manifest.files})
    if still:
        return RedactionCheck(f"{', '.join(still)} recorded as dropped but still listed")
    at = red.get("at")
    return RedactionCheck(None, tuple(paths), level, str(at) if at else None)


def derive_evidence_level(
    manifest: BundleManifest, bundle_dir: Path | None = None, *, features: Any = None
) -> tuple[EvidenceLevel, list[str]]:
    """The evidence level a bundle supports (DESIGN.md), with the reasons.

    L1: no events and no audio. L2: automated evidence (virtual clock, in-process, modelled
    playback). L3: socket transport, monotonic clock, real player captured (loopback or mic),
    acoustic events from that capture. L4: L3 on a named device with its microphone, or
    production shadow traffic. Missing facts count as the weakest value; contradictions
    void the claim. With ``bundle_dir``, files missing or not matching their hash are ignored.

    A redacted bundle (``privacy.redacted``) keeps the level its original evidence supported
    when ``features.json`` (read from ``bundle_dir``, or given as ``features``) holds a
    consistent record of voxeval's redaction (``check_redaction``): the dropped audio counts
    as present, since the kept features were derived from it, and the level is at most the
    recorded ``source_level``. The reasons then say ``REDACTED_REASON``. Without a
    consistent record the dropped audio counts as missing: a capture claim without its
    audio is a contradiction.
    """
    a = assess_evidence(manifest, bundle_dir, features=features)
    return a.level, a.reasons


def assess_evidence(
    manifest: BundleManifest, bundle_dir: Path | None = None, *, features: Any = None
) -> EvidenceAssessment:
    """``derive_evidence_level`` plus the located contradictions and notes (for the
    validator)."""
    reasons: list[str] = []
    contra: list[tuple[Loc, str]] = []
    for key in SELF_DECLARED_LEVEL_KEYS:
        if manifest.model_extra and key in manifest.model_extra:
            reasons.append(f"manifest field {key!r} ignored: evidence levels are derived")
    present = {f.path for f in manifest.files}
    if bundle_dir is not None:
        for f in manifest.files:
            target = bundle_dir / f.path
            if not target.is_file():
                reasons.append(f"{f.path} listed but missing: not counted")
                present.discard(f.path)
            elif target.stat().st_size != f.bytes or sha256_file(target) != f.sha256:
                reasons.append(f"{f.path} does not match its sha256/size: not counted")
                present.discard(f.path)
    redaction: RedactionCheck | None = None
    derived: set[str] = set()
    if manifest.privacy.redacted and not present & set(_AUDIO):
        if features is None and bundle_dir is not None and FEATURES_FILE in present:
            features = read_features(bundle_dir)
        redaction = check_redaction(manifest, features, present)
        if redaction.consistent:
            derived = set(redaction.dropped)
            present |= derived
        else:
            reasons.append(
                f"privacy.redacted, but the redaction record is not usable "
                f"({redaction.problem}): dropped audio not accounted for"
            )
    has_events = "events.jsonl" in present
    has_audio = bool(present & set(_AUDIO))
    if not has_events and not has_audio:
        return EvidenceAssessment(
            "L1",
            ["L1: no events or audio in the bundle (schemas and configuration only)", *reasons],
            [],
            redaction=redaction,
        )

    p = manifest.provenance
    weakest = {
        "transport": "in_process",
        "clock": "virtual",
        "playback": "modelled",
        "capture": "none",
        "traffic": "synthetic",
        "acoustic_events": "none",
    }
    fact: dict[str, str] = {}
    for key, weak in weakest.items():
        value = getattr(p, key)
        if value is None:
            reasons.append(f"provenance.{key} not recorded: assumed {weak}")
        fact[key] = value or weak

    def contradict(loc: Loc, message: str, key: str) -> None:
        contra.append((loc, message))
        reasons.append(f"contradiction: {message}; {key} counted as {weakest[key]}")
        fact[key] = weakest[key]

    real_clock = manifest.clock.kind == "real"
    if p.clock is not None and (p.clock == "monotonic") != real_clock:
        contradict(
            ("provenance", "clock"),
            f"provenance.clock is {p.clock} but clock.kind is {manifest.clock.kind}",
            "clock",
        )
    if fact["playback"] == "real_device_capture" and fact["capture"] == "none":
        contradict(
            ("provenance", "playback"),
            "playback claims a real device but nothing was captured (capture: none)",
            "playback",
        )
    if fact["capture"] != "none" and fact["playback"] == "modelled":
        contradict(
            ("provenance", "capture"),
            f"capture {fact['capture']} with modelled playback: there was no real player to capture",
            "capture",
        )
    if fact["capture"] != "none" and fact["clock"] == "virtual":
        contradict(
            ("provenance", "capture"),
            "a sound-card or microphone capture cannot run on a virtual clock",
            "capture",
        )
    if fact["capture"] != "none" and "output.wav" not in present:
        if redaction is not None:
            contradict(
                ("privacy", "redacted"),
                f"capture {fact['capture']} claimed, output.wav is gone and the redaction "
                f"record does not account for it ({redaction.problem})",
                "capture",
            )
        else:
            reasons.append("capture claimed but output.wav is absent: capture counted as none")
            fact["capture"] = "none"
    notes: list[tuple[Loc, str]] = []
    if fact["capture"] != "none" and "output.wav" in derived:
        notes.append(
            (
                ("privacy", "redacted"),
                f"{REDACTED_REASON}: the {fact['capture']} capture behind this evidence "
                f"(output.wav) was dropped by voxeval's redaction; its sha256 and the "
                f"features derived from it are in {FEATURES_FILE}",
            )
        )
    if fact["acoustic_events"] == "capture" and fact["capture"] == "none":
        contradict(
            ("provenance", "acoustic_events"),
            "acoustic events said to come from a capture that does not exist",
            "acoustic_events",
        )
    if fact["traffic"] == "production_shadow" and fact["clock"] == "virtual":
        contradict(
            ("provenance", "traffic"),
            "production shadow traffic on a virtual clock",
            "traffic",
        )

    l3_missing: list[str] = []
    if fact["playback"] == "modelled":
        l3_missing.append("playback is modelled (modelled playback is L2 however realistic)")
    if fact["capture"] == "none":
        l3_missing.append("the agent's audio was not captured after a real player")
    if fact["acoustic_events"] != "capture":
        l3_missing.append(f"acoustic events come from {fact['acoustic_events']}, not the capture")
    if fact["transport"] != "socket":
        l3_missing.append("the agent ran in-process, not behind a real socket")
    if fact["clock"] != "monotonic":
        l3_missing.append("the session ran on a virtual clock")
    if not has_events:
        l3_missing.append("no events.jsonl")
    shadow = (
        fact["traffic"] == "production_shadow"
        and fact["clock"] == "monotonic"
        and fact["transport"] == "socket"
        and has_events
    )
    if shadow:
        level: EvidenceLevel = "L4"
        head = "L4: production shadow traffic over real sockets on a real clock"
    elif l3_missing:
        level = "L2"
        head = "L2: automated evidence; not L3 because " + "; ".join(l3_missing)
    elif fact["capture"] == "device_mic" and manifest.device:
        level = "L4"
        head = f"L4: real device {manifest.device!r} captured with its microphone"
    else:
        level = "L3"
        head = "L3: real processes over sockets, real player captured, acoustic events from it"
        if fact["capture"] == "device_mic":
            head += "; not L4 because no device is named"
        else:
            head += "; not L4 because the capture is a loopback, not a real device"
    if redaction is not None and redaction.consistent and redaction.source_level is not None:
        source = redaction.source_level
        reasons.append(
            f"{REDACTED_REASON}: {', '.join(redaction.dropped)} dropped by voxeval's redaction"
            + (f" on {redaction.at}" if redaction.at else "")
            + f", their sha256 recorded in {FEATURES_FILE}; the bundle was at {source} then"
        )
        if EVIDENCE_LEVELS.index(level) > EVIDENCE_LEVELS.index(source):
            reasons.append(
                f"capped at {source}: a redacted bundle keeps at most the level its original "
                f"evidence supported (the provenance now claims {level})"
            )
            level = source
    return EvidenceAssessment(level, [head, *reasons], contra, notes, redaction)


def evidence_at_least(level: str, minimum: str) -> bool:
    return EVIDENCE_LEVELS.index(level) >= EVIDENCE_LEVELS.index(minimum)


# --------------------------------------------------------------------------- acceptance matrix


class Statistic(StrEnum):
    P50 = "p50"
    P95 = "p95"
    P99 = "p99"
    RATE = "rate"
    COUNT = "count"
    VALUE = "value"


class OnFail(StrEnum):
    ROLL_BACK = "roll_back"
    KEEP_IN_SHADOW = "keep_in_shadow"
    COLLECT_MORE_DATA = "collect_more_data"
    BLOCK = "block"


class SplitKey(StrEnum):
    ROUTE = "route"
    CATEGORY = "category"
    DEVICE = "device"
    LANGUAGE = "language"
    SYSTEM_VERSION = "system_version"
    SCENARIO = "scenario"


Comparator = Literal["<=", "<", ">=", ">", "=="]


def _quantile_min_n(q: float, confidence: float = 0.95) -> int:
    """Smallest n for which the sample maximum is a distribution-free upper bound of quantile q."""
    return math.ceil(math.log(1 - confidence) / math.log(q))


DEFAULT_MIN_N: dict[Statistic, int] = {
    Statistic.P50: _quantile_min_n(0.50),  # 5
    Statistic.P95: _quantile_min_n(0.95),  # 59
    Statistic.P99: _quantile_min_n(0.99),  # 299
    Statistic.RATE: 30,
    Statistic.COUNT: 1,
    Statistic.VALUE: 1,
}
"""Percentiles: n such that 1 - q**n >= 0.95; rates: 30 (rule of thumb); counts/values: 1."""


class Gate(_Strict):
    """One acceptance gate: a metric statistic against a threshold at a minimum evidence level."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    metric: str = Field(min_length=1)
    statistic: Statistic
    comparator: Comparator
    threshold: float
    unit: str = ""
    min_evidence: EvidenceLevel
    min_n: int | None = Field(default=None, ge=1)
    on_fail: OnFail
    split_by: list[SplitKey] = Field(default_factory=list)
    description: str = ""

    @property
    def required_n(self) -> int:
        return self.min_n if self.min_n is not None else DEFAULT_MIN_N[self.statistic]

    def passes(self, value: float) -> bool:
        """The threshold comparison alone (evidence and n are checked by the gate engine)."""
        t = self.threshold
        return {
            "<=": value <= t,
            "<": value < t,
            ">=": value >= t,
            ">": value > t,
            "==": value == t,
        }[self.comparator]


class AcceptanceMatrix(_Strict):
    """A named list of gates."""

    schema_version: int = Field(default=MATRIX_SCHEMA_VERSION, ge=1)
    id: str = Field(min_length=1)
    description: str = ""
    gates: list[Gate] = Field(min_length=1)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return _version_check(value, MATRIX_SCHEMA_VERSION, "matrix")

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Self:
        if not _defer(info):
            _raise(matrix_cross_checks(self))
        return self


def matrix_cross_checks(m: AcceptanceMatrix) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    seen: set[str] = set()
    for i, gate in enumerate(m.gates):
        if gate.id in seen:
            out.append((("gates", i, "id"), f"duplicate gate id {gate.id!r}"))
        seen.add(gate.id)
        if len(set(gate.split_by)) != len(gate.split_by):
            out.append((("gates", i, "split_by"), "split_by repeats a key"))
    return out


# --------------------------------------------------------------------------- JSON Schemas

SchemaKind = Literal["scenario", "event", "manifest", "matrix"]
SCHEMA_KINDS: tuple[SchemaKind, ...] = ("scenario", "event", "manifest", "matrix")
_SCHEMA_MODELS: dict[str, tuple[type[BaseModel], int, str]] = {
    "scenario": (Scenario, SCENARIO_SCHEMA_VERSION, "voxeval full-duplex scenario"),
    "event": (Event, EVENT_SCHEMA_VERSION, "voxeval full-duplex ledger event (one JSONL line)"),
    "manifest": (BundleManifest, MANIFEST_SCHEMA_VERSION, "voxeval evidence bundle manifest"),
    "matrix": (AcceptanceMatrix, MATRIX_SCHEMA_VERSION, "voxeval acceptance matrix"),
}
SCHEMAS_DIR = Path(__file__).parent / "schemas"
DATA_DIR = Path(__file__).parent / "data"
SCENARIOS_DIR = DATA_DIR / "scenarios"
EXAMPLE_MATRIX = DATA_DIR / "example_matrix.yaml"


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` with a versioned ``$id``."""
    model, version, title = _SCHEMA_MODELS[kind]
    body = model.model_json_schema()
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:voxeval:duplex:{kind}:v{version}",
        "title": title,
        **body,
    }


def json_schemas(kinds: Iterable[str] = SCHEMA_KINDS) -> dict[str, dict[str, Any]]:
    return {k: json_schema(k) for k in kinds}


def schema_text(kind: str) -> str:
    """The schema as committed: two-space JSON with a trailing newline."""
    return json.dumps(json_schema(kind), indent=2, ensure_ascii=False) + "\n"


def export_schemas(out_dir: Path, kinds: Iterable[str] = SCHEMA_KINDS) -> list[Path]:
    """Write ``<kind>.json`` into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in kinds:
        path = out_dir / f"{kind}.json"
        path.write_text(schema_text(kind), encoding="utf-8")
        paths.append(path)
    return paths
