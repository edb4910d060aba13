"""``openai-compat`` ``converse`` against the local fake chat server (the edge): AO sends the
user's audio as an ``input_audio`` part and no words, TO the transcript as text and no audio;
earlier user turns go as audio in AO; the spoken answer comes back as audio with its
transcript; a text-only server gives a text-only reply; a server deaf to the audio makes the
STS ablation find no difference (the control)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.duplex import arctic_clip
from tests.systems.fake_openai_server import FakeOpenAIServer
from voxassay.core.registry import REGISTRY
from voxassay.systems.converse import HistoryTurn, Turn

pytestmark = pytest.mark.live

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@needs_espeak
def test_ao_sends_audio_to_sends_words_and_the_answer_is_spoken() -> None:
    audio = arctic_clip("aew_arctic_a0001.wav", 2.0)
    turn = Turn(audio, 16_000, "author of the danger trail", ("hesitant",))
    earlier = [
        HistoryTurn("user", "hello", arctic_clip("aew_arctic_a0002.wav", 1.0), 16_000),
        HistoryTurn("assistant", "Hi, how can I help?"),
    ]
    with FakeOpenAIServer(chat_reply="Sure, I can help with that.") as server:
        system = REGISTRY.build("converse", f"openai-compat:{server.base_url}?retries=0&voice=echo")
        system.load()
        ao = system.converse(turn, earlier, "ao")
        to = system.converse(turn, earlier, "to")
    ao_req, to_req = (r["json"] for r in server.requests)
    assert ao_req["modalities"] == ["text", "audio"] and ao_req["audio"]["voice"] == "echo"
    assert "temperature" not in ao_req  # provider defaults
    last_ao, last_to = ao_req["messages"][-1], to_req["messages"][-1]
    assert last_ao["content"][0]["type"] == "input_audio" and len(last_ao["content"]) == 1
    assert last_to["content"] == "author of the danger trail"
    assert ao_req["messages"][0]["content"][0]["type"] == "input_audio"  # earlier turn heard
    assert to_req["messages"][0]["content"] == "hello"
    assert "hesitant" not in json.dumps(ao_req) + json.dumps(to_req)  # stressors stay home
    assert len(server.requests[0]["clips"]) == 2 and not server.requests[1]["clips"]
    for reply in (ao, to):
        assert reply.text == "Sure, I can help with that."
        assert reply.audio is not None and reply.duration_s > 0.5
        assert float(np.sqrt(np.mean(reply.audio**2))) > 0.01


def test_a_text_only_server_gives_a_text_only_reply() -> None:
    turn = Turn(np.zeros(16_000, np.float32) + 0.01, 16_000, "hello")
    with FakeOpenAIServer(chat_reply="Just text.") as server:
        system = REGISTRY.build("converse", f"openai-compat:{server.base_url}?retries=0")
        system.load()
        body = system.payload(turn, [], "to")
        body.pop("modalities")
        reply = system._parse(system._post(json=body).text)
    assert reply.text == "Just text." and reply.audio is None


@needs_espeak
@pytest.mark.slow
def test_a_server_deaf_to_audio_gives_no_ao_to_difference(tmp_path: Path) -> None:
    from tests.reference.test_fault_injection import _needs_speech_stack
    from voxassay.suites.sts.runner import run_sts

    _needs_speech_stack()
    with FakeOpenAIServer(chat_reply="I can help. Would you like me to go ahead?") as server:
        spec = f"openai-compat:{server.base_url}?retries=0"
        store = run_sts(
            [spec], tmp_path, only=("parcel",), cache_dir=tmp_path / "cache", proxies="all"
        )
    report = json.loads((store.path / "report.json").read_text())
    (system,) = report["systems"]
    assert system["status"] == {"ok": 8}
    d = system["ao_minus_to"]["checklist"]["overall"]
    assert d["mean"] == 0.0 and d["ci_low"] <= 0 <= d["ci_high"]
    # the slower proxies: the ASR round trip heard the robotic espeak answer in part (its WER
    # is the measurement: about 0.7 here), DNSMOS scored every answer
    recs = store.load_records().records
    assert all(0.0 < r.metrics["answer_wer"] < 1.0 for r in recs)
    assert all("i can" in r.output["answer_heard"].lower() for r in recs)
    assert all(1.0 <= r.metrics["dnsmos_ovrl"] <= 5.0 for r in recs)
    assert system["ao_minus_to"]["answer_wer"]["overall"]["n"] == 4
    info = store.info()["systems"][spec]["system_info"]
    assert info["decoding"].startswith("provider defaults") and info["voice"] == "alloy"
