"""``realtime:ws://`` ``converse`` against the reference agent served over the Realtime
protocol (``reference.server``, manual turns) in this process: TO creates a text item and
asks for a response, AO appends and commits the user's audio (a real LJ Speech recording);
both come back as spoken answers with their transcript; the wire carries what the mode says
and nothing else."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.reference.test_fault_injection import _needs_speech_stack
from tests.reference.test_server import serving
from voxassay.core.registry import REGISTRY
from voxassay.systems.converse import HistoryTurn, Turn

pytestmark = [pytest.mark.slow, pytest.mark.live]


def _reference() -> Any:
    from voxassay.reference.agent import ReferenceAgent

    return ReferenceAgent("careful")


def test_to_is_a_text_item_and_ao_is_committed_audio() -> None:
    _needs_speech_stack()
    from voxassay.core.audio import load_audio

    clip = load_audio(shared_data() / "read_speech/ljspeech/LJ001-0002.wav", sr=16_000)
    turn = Turn(clip.samples, 16_000, "I would like to book an appointment.", ("urgent",))
    trace: list[dict[str, Any]] = []
    with serving(_reference, trace=lambda kind, ev: trace.append({"kind": kind, **ev})) as server:
        system = REGISTRY.build("converse", f"realtime:{server.url}")
        system.load()
        to = system.converse(turn, [HistoryTurn("assistant", "Riverside Dental, hello.")], "to")
        ao = system.converse(turn, [], "ao")
    for reply in (to, ao):
        assert reply.audio is not None and reply.duration_s > 0.3, reply
        assert float(np.sqrt(np.mean(reply.audio**2))) > 0.005
        assert reply.text and reply.first_audio_ms is not None
    assert "day" in to.text.lower(), to.text  # the desk goes on with the booking it read
    kinds = [e.get("type") for e in trace]
    items = [e for e in trace if e.get("type") == "conversation.item.create"]
    texts = [p.get("text") for e in items for p in e["item"]["content"]]
    assert texts == ["Riverside Dental, hello.", "I would like to book an appointment."]
    assert kinds.count("input_audio_buffer.commit") == 1 and "input_audio_buffer.append" in kinds
    assert kinds.count("response.create") == 2
    sent = json.dumps(trace)
    assert "urgent" not in sent  # stressors never travel
