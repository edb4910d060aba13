"""A Pipecat observer that keeps the framework's own view of a call for voxassay's ledger.

Each VAD, transcription and interruption frame the pipeline pushes downstream (its first
push; a broadcast frame's upstream copy is left out) becomes
one event, stamped with ``time.monotonic_ns()`` (``CLOCK_MONOTONIC``: the clock voxassay's
harness stamps with on the same host):

    VADUserStartedSpeakingFrame / VADUserStoppedSpeakingFrame -> vad.speech_started / _stopped
    InterimTranscriptionFrame / TranscriptionFrame            -> asr.partial / asr.final (text)
    InterruptionFrame                                         -> turn.decision (interrupt)
    UserStarted/StoppedSpeakingFrame                          -> turn.decision (user turn)

``voxassay duplex run`` fetches them after the call (``observer=`` in the agent spec) and
writes them to the bundle's ledger as producer ``pipecat``, beside its own events.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from pipecat.frames.frames import (
    InterimTranscriptionFrame,
    InterruptionFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection

MAX_SESSIONS = 64
MAX_EVENTS = 20_000


class EventStore:
    """Events per session key (a Twilio streamSid, a SmallWebRTC pc_id), the latest
    ``MAX_SESSIONS`` sessions kept, at most ``MAX_EVENTS`` events each."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def open(self, key: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        self._sessions[key] = events
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return events

    def get(self, key: str) -> list[dict[str, Any]] | None:
        return self._sessions.get(key)


def _event(frame: Any) -> tuple[str, dict[str, Any]] | None:
    if isinstance(frame, VADUserStartedSpeakingFrame):
        return "vad.speech_started", {"frame": "VADUserStartedSpeakingFrame"}
    if isinstance(frame, VADUserStoppedSpeakingFrame):
        return "vad.speech_stopped", {"frame": "VADUserStoppedSpeakingFrame"}
    if isinstance(frame, TranscriptionFrame):
        return "asr.final", {"text": frame.text, "frame": "TranscriptionFrame"}
    if isinstance(frame, InterimTranscriptionFrame):
        return "asr.partial", {"text": frame.text, "frame": "InterimTranscriptionFrame"}
    if isinstance(frame, InterruptionFrame):
        return "turn.decision", {"action": "interrupt", "frame": "InterruptionFrame"}
    if isinstance(frame, UserStartedSpeakingFrame):
        return "turn.decision", {"action": "user_turn_started", "frame": type(frame).__name__}
    if isinstance(frame, UserStoppedSpeakingFrame):
        return "turn.decision", {"action": "user_turn_ended", "frame": type(frame).__name__}
    return None


class LedgerObserver(BaseObserver):
    """Appends the frames above to one session's event list (module docstring)."""

    def __init__(self, events: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._events = events
        self._seen: set[int] = set()

    async def on_push_frame(self, data: FramePushed) -> None:
        frame = data.frame
        # a broadcast frame travels as two copies, one each way: the downstream one counts
        if data.direction != FrameDirection.DOWNSTREAM:
            return
        if frame.id in self._seen or len(self._events) >= MAX_EVENTS:
            return
        found = _event(frame)
        if found is None:
            return
        self._seen.add(frame.id)
        kind, body = found
        self._events.append(
            {
                "type": kind,
                "monotonic_ns": time.monotonic_ns(),
                "data": {**body, "processor": type(data.source).__name__},
            }
        )
