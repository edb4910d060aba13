"""The reference server honours ``turn_detection: null`` (the client commits turns and asks
for answers) and reports the conversation as the Realtime protocol does: user and assistant
items (``conversation.item.added`` / ``.done``) and the assistant's output transcript.

A real recording (LJ Speech, ../shared/data) is the user's turn; loopback only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.reference.test_fault_injection import _needs_speech_stack
from tests.reference.test_server import Client, serving, typed
from tests.systems.duplex.conformance import check
from voxassay.systems.duplex.realtime_protocol import PROTOCOL_RATE, client_session, pcm16_to_b64

pytestmark = [pytest.mark.slow, pytest.mark.live]


def _utterance_24k() -> np.ndarray:
    from voxassay.core.audio import load_audio

    clip = load_audio(shared_data() / "read_speech/ljspeech/LJ001-0002.wav", sr=PROTOCOL_RATE)
    return (np.clip(clip.samples, -1, 32767 / 32768) * 32768).astype(np.int16)


def _append(client: Client, pcm: np.ndarray) -> None:
    step = PROTOCOL_RATE // 50  # 20 ms appends, as a streaming client sends them
    for i in range(0, pcm.size, step):
        client.send({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(pcm[i : i + step])})


def _reference() -> Any:
    from voxassay.reference.agent import ReferenceAgent

    return ReferenceAgent("careful")


def test_manual_turns_answer_a_committed_turn_only_when_asked() -> None:
    _needs_speech_stack()
    speech = _utterance_24k()
    silence = np.zeros(PROTOCOL_RATE, np.int16)
    with serving(_reference) as server:
        client = Client(server.url)
        try:
            client.send({"type": "session.update", "session": client_session("ga", turn="manual")})
            updated = client.recv_until(typed("session.updated"))
            assert updated["session"]["audio"]["input"]["turn_detection"] is None
            _append(client, np.concatenate([speech, silence, silence]))
            # three seconds of a finished utterance and silence: a server that detected turns
            # itself would have started and answered by now; with manual turns nothing comes
            with pytest.raises((AssertionError, TimeoutError), match="timed out"):
                client.recv_until(
                    lambda e: e["type"].startswith(("response.", "input_audio_buffer.speech")),
                    timeout=3.0,
                )
            client.send({"type": "input_audio_buffer.commit"})
            committed = client.recv_until(typed("input_audio_buffer.committed"))
            user_item = committed["item_id"]
            added = client.recv_until(
                lambda e: e["type"] == "conversation.item.added" and e["item"]["id"] == user_item
            )
            assert added["item"]["role"] == "user"
            assert added["item"]["content"][0]["type"] == "input_audio"
            heard = client.recv_until(
                typed("conversation.item.input_audio_transcription.completed"), timeout=30
            )
            assert heard["item_id"] == user_item
            assert "modern" in heard["transcript"].lower()
            # committed but not asked: still no response
            with pytest.raises((AssertionError, TimeoutError), match="timed out"):
                client.recv_until(typed("response.created"), timeout=1.5)
            client.send({"type": "response.create"})
            done = client.recv_until(typed("response.done"), timeout=60)
            rid = done["response"]["id"]
            deltas = [
                e for e in client.of("response.output_audio.delta") if e["response_id"] == rid
            ]
            assert deltas, "the answer is spoken"
            words = client.recv_until(typed("response.output_audio_transcript.done"))
            assert words["response_id"] == rid and words["transcript"].strip()
            said = "".join(e["delta"] for e in client.of("response.output_audio_transcript.delta"))
            assert said == words["transcript"]
            item_id = deltas[0]["item_id"]
            assistant = [
                e for e in client.of("conversation.item.added") if e["item"]["id"] == item_id
            ]
            assert assistant and assistant[0]["item"]["role"] == "assistant"
            finished = [
                e for e in client.of("conversation.item.done") if e["item"]["id"] == item_id
            ]
            assert finished[0]["item"]["content"][0]["transcript"] == words["transcript"]
            assert not client.of("input_audio_buffer.speech_started")
        finally:
            client.close()
    for event in client.events:
        check("ga", "server", event)


def test_server_turns_add_the_user_item_when_the_turn_ends() -> None:
    _needs_speech_stack()
    speech = _utterance_24k()
    silence = np.zeros(PROTOCOL_RATE, np.int16)
    with serving(_reference, protocol="auto") as server:
        client = Client(server.url, dialect="beta")
        try:
            client.send({"type": "session.update", "session": client_session("beta")})
            client.recv_until(typed("session.updated"))
            _append(client, np.concatenate([speech, silence, silence]))
            committed = client.recv_until(typed("input_audio_buffer.committed"), timeout=30)
            created = client.recv_until(
                lambda e: (
                    e["type"] == "conversation.item.created"
                    and e["item"]["id"] == committed["item_id"]
                )
            )
            assert created["item"]["role"] == "user"
            client.recv_until(typed("response.done"), timeout=60)
            assert client.of("response.audio_transcript.done")
        finally:
            client.close()
    for event in client.events:
        check("beta", "server", event)
