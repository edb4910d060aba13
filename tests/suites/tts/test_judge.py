"""The TTS judge against the local fake chat server (the adapter and parser are real)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.systems.fake_openai_server import FakeOpenAIServer
from voxassay.core.audio import Audio, load_audio
from voxassay.suites.tts.judge import JUDGE_PROMPT_VERSION, Judge, build_prompt, parse_score

pytestmark = pytest.mark.live

SCALE = {"min": 1, "max": 5}
QUESTION = "How natural does this voice sound?"
SECRET = "sk-judge-0123456789abcdefSECRET"
KEY_ENV = "VOXASSAY_TEST_JUDGE_KEY"


@pytest.fixture
def clip() -> Audio:
    return load_audio(shared_data() / "read_speech" / "ljspeech" / "LJ001-0002.wav", sr=None)


def judge_for(server: FakeOpenAIServer, **opts: str) -> Judge:
    query = "&".join(f"{k}={v}" for k, v in {"backoff": "0.01", **opts}.items())
    return Judge(f"openai-compat:{server.base_url}?{query}")


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Score: 4\nClear and natural.", 4.0),
        ("**Score:** 2\nRobotic.", 2.0),
        ("score = 5", 5.0),
        ("I'd give it a 4/5 overall.", 4.0),
        ("Overall: four out of five.", 4.0),
        ("I would rate this one a 3; it is a bit flat.", 3.0),
        ("I'd give it a 2.", 2.0),
        ("Rating: 1 - the words are garbled.", 1.0),
        ("3", 3.0),
        ("Score: 3.5", 3.5),
    ],
)
def test_parse_accepts_strict_then_lenient(answer: str, score: float) -> None:
    got, reason = parse_score(answer, SCALE)
    assert got == score, reason


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Score: 7", "outside the scale"),
        ("Score: 0", "outside the scale"),
        ("It deserves 8/10.", "another scale"),
        ("Score: 2\nScore: 4", "ambiguous"),
        ("The voice sounds pleasant and clear.", "no score"),
        ("", "empty"),
        ("I'd give it a 4, maybe a 5.", "ambiguous"),
    ],
)
def test_parse_refuses_to_guess(answer: str, why: str) -> None:
    got, reason = parse_score(answer, SCALE)
    assert got is None and why in reason


def test_prompt_asks_the_human_question_on_the_same_scale() -> None:
    prompt = build_prompt(
        QUESTION,
        {"min": 1, "max": 5, "labels": {1: "very unnatural", 5: "completely natural"}},
        "Take 40 mg daily.",
        "Speak calmly.",
    )
    assert QUESTION in prompt and "Score: N" in prompt
    assert "from 1 to 5 (1 = very unnatural; 5 = completely natural)" in prompt
    assert '"Take 40 mg daily."' in prompt and '"Speak calmly."' in prompt
    bare = build_prompt(QUESTION, SCALE)
    assert "asked to say" not in bare and "instruction" not in bare
    assert JUDGE_PROMPT_VERSION.startswith("tts-judge-v")


def test_rate_through_fake_server_sends_audio_and_parses(
    clip: Audio, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)

    def reply(prompt: str, clips: list[tuple[np.ndarray, int]]) -> str:
        # a deterministic "listener": longer real speech gets the higher score
        ((samples, sr),) = clips
        return f"Score: {4 if len(samples) / sr > 1.0 else 2}\nLength {len(samples) / sr:.2f} s."

    with FakeOpenAIServer(token=SECRET, chat_reply=reply) as server:
        judge = judge_for(server, key_env=KEY_ENV)
        block = judge.rate(clip, QUESTION, SCALE, "in being comparatively modern.", None)
        short = judge.rate(Audio(clip.samples[: clip.sr // 2], clip.sr), QUESTION, SCALE)
    assert set(block) == {"spec", "score", "status", "raw", "reason"}
    assert block["status"] == "ok" and block["score"] == 4.0 and "strict" in block["reason"]
    assert block["raw"].startswith("Score: 4\nLength 1.90 s")
    assert short["score"] == 2.0
    req = server.requests[0]["json"]
    assert req["temperature"] == 0
    assert QUESTION in server.requests[0]["prompt"]
    assert "comparatively modern" in server.requests[0]["prompt"]
    assert len(server.requests[0]["clips"]) == 1
    info = judge.describe()
    assert info["prompt_version"] == JUDGE_PROMPT_VERSION
    assert SECRET not in json.dumps(info) and SECRET not in json.dumps(block)


def test_unparseable_and_long_answers_are_recorded(clip: Audio) -> None:
    rambling = "The voice is pleasant. " * 60
    with FakeOpenAIServer(chat_reply=rambling) as server:
        block = judge_for(server).rate(clip, QUESTION, SCALE)
    assert block["status"] == "unparseable" and block["score"] is None
    assert block["reason"] == "no score found in the answer"
    assert len(block["raw"]) == 500 and block["raw"] == rambling[:500]
    with FakeOpenAIServer(chat_reply="Score: 9") as server:
        block = judge_for(server).rate(clip, QUESTION, SCALE)
    assert block["status"] == "unparseable" and "outside the scale" in block["reason"]
    assert block["raw"] == "Score: 9"


def test_server_errors_become_error_blocks(clip: Audio, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(mode="error500") as server:
        block = judge_for(server, retries="1", key_env=KEY_ENV).rate(clip, QUESTION, SCALE)
    assert block["status"] == "error" and block["score"] is None
    assert "500" in block["reason"] and len(server.requests) == 2
    with FakeOpenAIServer(token="another-token") as server:
        block = judge_for(server, key_env=KEY_ENV).rate(clip, QUESTION, SCALE)
    assert block["status"] == "error" and "401" in block["reason"]
    assert SECRET not in block["reason"] and SECRET[:8] not in block["reason"]
    with FakeOpenAIServer(mode="invalid_json") as server:
        block = judge_for(server).rate(clip, QUESTION, SCALE)
    assert block["status"] == "error" and "non-JSON" in block["reason"]
    with FakeOpenAIServer() as server:
        block = judge_for(server).rate(clip, QUESTION, {"min": 5, "max": 1})
    assert block["status"] == "error" and "scale" in block["reason"]
    assert server.requests == []


def test_slow_server_times_out_as_error(clip: Audio) -> None:
    with FakeOpenAIServer(mode="sleep", sleep_s=5.0) as server:
        block = judge_for(server, timeout="0.4").rate(clip, QUESTION, SCALE)
    # a timeout, not the server's late answer (it sleeps 5 s, then answers well)
    assert block["status"] == "error" and "timeout" in block["reason"]
    assert len(server.requests) == 1


def test_python_callable_judge(tmp_path: object, clip: Audio) -> None:
    class Listener:
        def understand(self, audio_parts: list[Audio], prompt: str) -> str:
            level = float(np.sqrt(np.mean(np.square(audio_parts[0].samples))))
            return "I'd give it a 3." if level > 0.01 else "I can't hear anything."

        def describe(self) -> dict[str, str]:
            return {"name": "listener"}

    judge = Judge("python:listener:make", system=Listener())
    assert judge.rate(clip, QUESTION, SCALE)["score"] == 3.0
    silent = judge.rate(Audio(np.zeros(16000, dtype=np.float32), 16000), QUESTION, SCALE)
    assert silent["status"] == "unparseable"
    assert judge.describe()["system"] == {"name": "listener"}


def test_tts_run_with_a_judge_stores_scores_beside_the_metrics(tmp_path: object) -> None:
    """``tts run --judge``: every item asked its rater question through the chat adapter;
    answers stored per record and counted in the report (unparseable ones apart)."""
    from pathlib import Path

    from voxassay.suites.tts.suite import run_tts

    def reply(prompt: str, clips: list) -> str:
        # deterministic: a longer clip gets a higher score; one answer is unusable
        seconds = len(clips[0][0]) / clips[0][1]
        return "no idea" if seconds > 3.5 else f"Score: {2 + int(seconds)}"

    out = Path(str(tmp_path))
    with FakeOpenAIServer(chat_reply=reply) as server:
        store = run_tts(
            ["espeak-ng:en-us+f3"],
            out,
            items="demo",
            only=["phone_numbers", "general_quality"],
            asr=None,
            judge=f"openai-compat:{server.base_url}?retries=0&timeout=5",
            measures=("quality", "rate"),
        )
        asked = len([r for r in server.requests if r["path"].endswith("/chat/completions")])
    recs = [json.loads(x) for x in (store.path / "records.jsonl").read_text().splitlines()]
    assert recs and asked == len(recs)
    for r in recs:
        judge = r["output"]["judge"]
        assert judge["status"] in ("ok", "unparseable")
        if judge["status"] == "ok":
            assert 1 <= judge["score"] <= 5
        else:
            assert judge["score"] is None
    report = json.loads((store.path / "report.json").read_text())
    blob = json.dumps(report)
    assert "judge" in blob
    assert store.info()["config"].get("judge", "").startswith("openai-compat:")
