"""The in-process duplex agent API: what the driver calls, and what an agent hands back.

A session is a stream of fixed-size input frames (``FRAME_MS`` of mono int16 PCM at the
session's ``sample_rate``), pushed in order on the session clock; every push is also the
agent's tick, so an agent that waits for nothing still sees time pass (the driver streams
silence between scenario segments, like a live microphone). Each call returns the agent's
outputs produced by that moment:

- ``AgentEvent``: a ledger event the agent itself observed or decided (``vad.speech_started``,
  ``asr.final``, ``turn.decision``, ``response.created/done``, ``tool.requested/completed``,
  ``task.state``, ...). The driver stamps it with the session clock and producer ``agent``.
- ``AudioOut``: agent speech for ``response_id``, appended to the client's playback buffer
  (the driver models playback: the buffer drains at real time).
- ``ClearAudio``: the agent asks the client to drop what is still buffered (Realtime's
  ``output_audio_buffer.clear`` or a cancelled response): playback stops at that moment.
- ``ToolCall``: a call the client answers from the scenario's tool world (agents without a
  backend of their own); the answer comes back through ``on_tool_result`` after the tool's
  latency. Agents with their own backend (the reference agent) report their calls as
  ``tool.*`` events and export ``tool-audit.json`` from ``finish``.

The driver tells the agent what the user actually heard (``on_playback``: the equivalent of
Realtime's ``conversation.item.truncate`` with ``audio_end_ms``) and when the connection drops
or comes back (``on_connection``).

Clock. ``now_ns`` is the session clock (0 = the session start). With the virtual clock the
driver charges each call's measured compute to the clock by default: outputs of a call that
started at ``t`` and took ``c`` are stamped ``t + c``, and the next frame is handed over no
earlier than that (a busy agent falls behind, as it would live). With ``compute="zero"``
every output is stamped ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from voxassay.contracts.duplex.scenario import Scenario

__all__ = [
    "FRAME_MS",
    "SAMPLE_RATE",
    "AgentBase",
    "AgentEvent",
    "AgentFactory",
    "AgentOutput",
    "AudioOut",
    "ClearAudio",
    "DuplexAgent",
    "PlaybackReport",
    "SessionEnd",
    "SessionInfo",
    "Stamped",
    "ToolCall",
]

SAMPLE_RATE = 16_000
"""Default session sample rate (input and output PCM)."""
FRAME_MS = 20
"""Default input frame length; 10 ms is the other supported size."""


@dataclass(frozen=True)
class SessionInfo:
    """What an agent learns when a session starts."""

    session_id: str
    sample_rate: int = SAMPLE_RATE
    frame_ms: int = FRAME_MS
    scenario: Scenario | None = None
    """The scenario being run (its tools and initial state); agents must not read the
    expected actions or the business truth (they are the exam, not the brief)."""
    clock: Literal["virtual", "real"] = "virtual"
    route: str = "direct"
    compute: Literal["charged", "zero"] | None = None
    """On the virtual clock: whether the agent's compute is charged to the clock (None on the
    real clock). With ``zero`` nothing the agent computes costs session time, so a
    deterministic agent may reuse results it computed before (the outputs are the same)."""
    seed: int = 0
    """The run's seed: what a link draws (an impairing relay's losses) is seeded from it."""


@dataclass(frozen=True)
class AgentEvent:
    """A ledger event produced by the agent (``producer = "agent"``), or by the link that
    reaches it (``producer = "transport"``: what the network path itself reported)."""

    event_type: str
    data: dict[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    utterance_id: str | None = None
    task_id: str | None = None
    playback_id: str | None = None
    reason: str | None = None
    producer: str = "agent"


@dataclass(frozen=True)
class AudioOut:
    """Agent speech for ``response_id``: mono int16 PCM at the session rate."""

    response_id: str
    pcm: np.ndarray


@dataclass(frozen=True)
class ClearAudio:
    """Drop the client's buffered audio (of ``response_id``, or all when None)."""

    response_id: str | None = None
    reason: str = "cleared"


@dataclass(frozen=True)
class ToolCall:
    """A call the client answers from the scenario's tool world."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    idempotency_key: str | None = None
    task_id: str | None = None
    task_version: int | None = None
    response_id: str | None = None


@dataclass(frozen=True)
class Stamped:
    """An output with the session-clock time it happened at (``ns``).

    Remote agents (a socket link) return what they received since the last call, each stamped
    with its receipt time; the driver then uses that time instead of charging compute.
    """

    ns: int
    output: AgentEvent | AudioOut | ClearAudio | ToolCall


AgentOutput = AgentEvent | AudioOut | ClearAudio | ToolCall | Stamped


@dataclass(frozen=True)
class PlaybackReport:
    """What the client's player did with a response's audio.

    ``status``: ``started`` | ``interrupted`` (cut: ``played_ms`` is what was heard) |
    ``completed`` (all of it was heard).
    """

    response_id: str
    status: Literal["started", "interrupted", "completed"]
    played_ms: float


@dataclass
class SessionEnd:
    """What an agent leaves at the end of a session (its business truth, when it has one)."""

    final_state: dict[str, Any] | None = None
    """The business state (written as ``final-state.json``)."""
    tool_audit: dict[str, Any] | None = None
    """Every tool call (``tool-audit.json``, see ``task.ToolAudit``); None: the driver's own
    audit of ``ToolCall`` outputs is used."""
    info: dict[str, Any] = field(default_factory=dict)
    """Versions and configuration to record in the bundle manifest."""
    events: list[Stamped] = field(default_factory=list)
    """Events the agent reports only at the end, each with its own session-clock time (a
    framework's observer read after the call); the driver logs them as they are stamped."""


@runtime_checkable
class DuplexAgent(Protocol):
    """An in-process full-duplex agent (see the module docstring for the contract)."""

    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        """A new session begins (an agent object serves one session at a time)."""
        ...

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        """One input frame (int16, ``frame_ms`` long) that starts at ``now_ns``."""
        ...

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        """The client's player started, cut or finished a response."""
        ...

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        """The answer to a ``ToolCall`` (``error`` set when the tool failed)."""
        ...

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        """The link dropped (False) or came back (True); frames in between are lost."""
        ...

    def finish(self, now_ns: int) -> SessionEnd:
        """The session is over: export the business state and the tool audit."""
        ...


class AgentBase:
    """Convenience base: every hook returns nothing; override what the agent needs."""

    session: SessionInfo | None = None

    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        self.session = session
        return []

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        return []

    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        return []

    def on_tool_result(
        self, call_id: str, result: Any, error: str | None, now_ns: int
    ) -> list[AgentOutput]:
        return []

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        return []

    def finish(self, now_ns: int) -> SessionEnd:
        return SessionEnd()


class AgentFactory:
    """What a duplex backend hands the runner: a callable making one fresh agent per session,
    with ``info``, what the run records about the agent (backend, version, options)."""

    def __init__(self, make: Any, info: dict[str, Any]) -> None:
        self._make = make
        self.info = info

    def __call__(self) -> Any:
        return self._make()
