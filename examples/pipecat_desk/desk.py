"""The reference desk's dialogue as a Pipecat processor, in the place an LLM would take.

Pipecat's user aggregator decides when the user's turn ends and hands the context on
(``LLMContextFrame``); ``DeskProcessor`` reads the user's last words from it and asks
voxassay's rule-based ``DialogueManager`` (the appointment desk of Riverside Dental; no LLM,
no network) what to say, which it pushes on as ``TTSSpeakFrame``s for the TTS service.
A background tick lets tool calls that finish later speak their results. Everything about
turns, VAD and interruptions is Pipecat's own: that is what is under test.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    LLMContextFrame,
    StartFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from voxassay.reference.db import ClinicDB
from voxassay.reference.dialogue import DialogueManager, Say

TICK_S = 0.2


def _last_user_text(context: Any) -> str:
    for message in reversed(list(context.get_messages())):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class DeskProcessor(FrameProcessor):
    """Context in, the desk's replies out as speech (module docstring)."""

    def __init__(self, policy: str = "careful", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dm = DialogueManager(ClinicDB({}), policy, "pipecat-desk")
        self._t0 = time.monotonic()
        self._ticker: asyncio.Task[None] | None = None

    def _now_ms(self) -> float:
        return (time.monotonic() - self._t0) * 1000.0

    async def _speak(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Say) and action.text.strip():
                await self.push_frame(TTSSpeakFrame(action.text))

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            await self._speak(self._dm.tick(self._now_ms()))

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            await self.push_frame(frame, direction)
            self._ticker = asyncio.create_task(self._tick())
        elif isinstance(frame, LLMContextFrame):
            text = _last_user_text(frame.context)
            if text:
                await self._speak(self._dm.on_user_text(text, None, self._now_ms()))
        elif isinstance(frame, UserStartedSpeakingFrame | UserStoppedSpeakingFrame):
            active = isinstance(frame, UserStartedSpeakingFrame)
            await self._speak(self._dm.on_user_speech(active, self._now_ms()))
            await self.push_frame(frame, direction)
        else:
            if isinstance(frame, EndFrame | CancelFrame) and self._ticker is not None:
                self._ticker.cancel()
            await self.push_frame(frame, direction)
