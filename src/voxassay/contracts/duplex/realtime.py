"""The OpenAI Realtime event vocabulary (GA and beta names) and how it maps onto the ledger.

Shared by the log importer (``suites/duplex/evidence``), the WebSocket client and the reference
agent's server (``systems/duplex``): the one place these names are listed.
"""

from __future__ import annotations

CLIENT_PRODUCER = "realtime.client"
SERVER_PRODUCER = "realtime.server"
IMPORTER_PRODUCER = "realtime.import"
"""Producer of the ``clock.producer`` records (the importer made the estimate)."""
PASS_PREFIX = "realtime."

# --------------------------------------------------------------------------- vocabulary

CLIENT_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "session.update",
        "transcription_session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
        "output_audio_buffer.clear",
    }
)
"""Events a client sends (GA and beta use the same client names)."""

SERVER_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "error",
        "session.created",
        "session.updated",
        "transcription_session.updated",
        "conversation.created",
        "conversation.item.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.deleted",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
        "conversation.item.input_audio_transcription.segment",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.dtmf_event_received",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "response.created",
        "response.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
        "rate_limits.updated",
    }
)
"""Server events by their GA names."""

BETA_NAMES: dict[str, str] = {
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
}
"""Beta server event names and the GA name they are read as."""

LEDGER_MAPPING: dict[str, str] = {
    "session.created": "session.connected",
    "error": "session.error",
    "conversation.item.input_audio_transcription.failed": "session.error (utterance_id)",
    "input_audio_buffer.speech_started": "vad.speech_started (utterance_id = item_id)",
    "input_audio_buffer.speech_stopped": "vad.speech_stopped (utterance_id = item_id)",
    "conversation.item.input_audio_transcription.delta": "asr.partial (utterance_id)",
    "conversation.item.input_audio_transcription.completed": "asr.final (utterance_id)",
    "response.created": "response.created",
    "response.done": "response.done, plus response.cancelled when status is cancelled",
    "response.output_audio.delta": "tts.chunk (data.bytes, data.duration_ms)",
    "response.function_call_arguments.done": "tool.requested (task_id = call_id)",
    "response.mcp_call_arguments.done": "tool.requested (task_id = MCP item id)",
    "response.mcp_call.completed": "tool.completed",
    "response.mcp_call.failed": "tool.failed",
    "conversation.item.create": "tool.completed for a function_call_output item (client)",
    "response.cancel": "turn.decision, data.action = interrupt (client)",
    "conversation.item.truncate": "playback.interrupted, played_until_ms = audio_end_ms",
    "conversation.item.truncated": "playback.interrupted only if no client truncate is logged",
    "output_audio_buffer.started": "playback.started (playback_id = response_id)",
    "output_audio_buffer.stopped": "playback.stopped",
    "output_audio_buffer.cleared": "playback.interrupted",
}
"""Realtime event (GA name) -> ledger event. Everything else: ``realtime.<name>``."""

SUMMARISED_TYPES: frozenset[str] = frozenset(
    {
        "input_audio_buffer.append",
        "response.output_audio_transcript.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.mcp_call_arguments.delta",
    }
)
"""High-volume events counted in ``stats`` instead of being copied into the ledger."""
