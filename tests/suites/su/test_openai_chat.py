"""SU runs against the fake OpenAI chat server on 127.0.0.1 (the edge is faked, not the run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.systems.fake_openai_server import FakeOpenAIServer
from voxassay.core.audio import load_audio
from voxassay.core.items import load_manifest, write_manifest
from voxassay.suites.su.pairs import build_pairs
from voxassay.suites.su.prompts import separator_audio
from voxassay.suites.su.run import run_su

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def pairs(speaker_manifest: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    write_manifest(build_pairs(load_manifest(speaker_manifest), "speaker_match", n=8, seed=1), p)
    return p


def _answer(prompt: str, clips: list[tuple[np.ndarray, int]]) -> str:
    if len(clips) == 2:
        return "Same voice quality.\nANSWER: same"
    return "Probably two different people."  # lenient for merged input


def test_chat_segmented_and_merged(pairs: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(chat_reply=_answer) as server:
        spec = f"openai-compat:{server.base_url}?model=fake-alm&retries=0"
        store = run_su(pairs, ["speaker_match"], [spec], tmp_path)
    rep = json.loads((store.path / "report.json").read_text())
    tasks = rep["systems"][0]["tasks"]
    assert tasks["speaker_match_segmented"]["n_lenient"] == 0
    assert tasks["speaker_match_merged"]["n_lenient"] == tasks["speaker_match_merged"]["n"] > 0
    assert rep["systems"][0]["kind"] == "local test endpoint"
    assert all(t["no_real_system"] for t in rep["tasks"] if t["n_test_items"])
    reqs = server.requests
    assert all(r["json"]["temperature"] == 0 and r["json"]["model"] == "fake-alm" for r in reqs)
    merged = [r for r in reqs if len(r["clips"]) == 1]
    seg = [r for r in reqs if len(r["clips"]) == 2]
    assert len(merged) == len(seg) > 0
    # the merged input is clip A + separator + clip B, at 16 kHz
    items = {it.id: it for it in load_manifest(pairs)}
    lengths = {
        sum(load_audio(p).samples.size for p in (it.audio or [])) + separator_audio(16_000).size
        for it in items.values()
        if it.labels["split"] == "test"
    }
    got = {r["clips"][0][0].size for r in merged}
    assert got <= lengths
    assert "1 kHz beep" in merged[0]["prompt"] and "two audio clips" in seg[0]["prompt"]


def test_chat_server_errors_and_timeouts(pairs: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(mode="error500") as server:
        store = run_su(
            pairs,
            ["speaker_match_segmented"],
            [f"openai-compat:{server.base_url}?retries=0"],
            tmp_path,
        )
    recs = store.load_records().records
    assert recs and all(r.status == "error" for r in recs)
    assert "500" in recs[0].error["message"]
    with FakeOpenAIServer(mode="sleep", sleep_s=3.0) as server:
        store = run_su(
            pairs,
            ["speaker_match_segmented"],
            [f"openai-compat:{server.base_url}?retries=0&timeout=30"],
            tmp_path / "t",
            timeout=0.3,
        )
    recs = store.load_records().records
    assert recs and all(r.status == "timeout" for r in recs)


def test_chat_unparseable_answers(pairs: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(chat_reply="I am not sure, they might or might not be.") as server:
        store = run_su(
            pairs,
            ["speaker_match_segmented"],
            [f"openai-compat:{server.base_url}?retries=0"],
            tmp_path,
        )
    recs = store.load_records().records
    assert recs and all(r.status == "unparseable" for r in recs)
    assert recs[0].output["answer_text"].startswith("I am not sure")
