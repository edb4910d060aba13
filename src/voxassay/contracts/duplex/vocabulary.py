"""The duplex vocabularies: categories, roles, intents, turn/task/history actions, routes, and the ledger's event types."""

from __future__ import annotations

from enum import StrEnum

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
