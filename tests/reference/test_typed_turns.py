"""The reference agent answers a user's text item when the client asks for a response, as
the Realtime protocol has it (``conversation.item.create`` then ``response.create``): nothing
before the request, an answer in speech after it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.reference.test_fault_injection import _needs_speech_stack
from voxassay.contracts.duplex.agent_api import AgentEvent, AudioOut, SessionInfo
from voxassay.reference.agent import ReferenceAgent

pytestmark = pytest.mark.slow

FRAME = np.zeros(320, np.int16)  # 20 ms of silence at 16 kHz


def _flat(outputs: list[object]) -> list[object]:
    return [getattr(o, "output", o) for o in outputs]


def test_a_text_item_is_answered_on_response_create_only() -> None:
    _needs_speech_stack()
    agent = ReferenceAgent("careful")
    agent.start(SessionInfo(session_id="typed"), 0)
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "I'd like to book an appointment."}],
    }
    assert agent.on_item(item, 20_000_000) == []
    quiet = []
    for k in range(25):  # half a second: the item alone starts nothing
        quiet += _flat(agent.push_audio(FRAME, (k + 2) * 20_000_000))
    assert not [o for o in quiet if isinstance(o, AudioOut)]
    out = _flat(agent.on_response_request(600_000_000))
    decision = [o for o in out if isinstance(o, AgentEvent) and o.event_type == "turn.decision"]
    assert decision and decision[0].data["action"] == "respond"
    assert decision[0].utterance_id == "typed-1"
    for k in range(150):  # up to three seconds of ticks: the answer streams as speech
        out += _flat(agent.push_audio(FRAME, 600_000_000 + (k + 1) * 20_000_000))
        if any(isinstance(o, AudioOut) and o.pcm.size for o in out):
            break
    assert any(isinstance(o, AudioOut) and o.pcm.size for o in out)
    # nothing typed since: another request has nothing to answer
    assert agent.on_response_request(4_000_000_000) == []
