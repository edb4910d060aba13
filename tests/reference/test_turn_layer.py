"""The careful turn layer on rendered default-set scenarios (virtual clock, zero compute).

What the reference agent does at the words level, read from its own ledger: a "mm hmm" over
its answer is held and then judged a backchannel (no stop), a barge-in stops it on its words,
and a caller who pauses 1.2 s mid-sentence is transcribed piece by piece (the words next to
the pause survive).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.duplex import default_set_run
from tests.reference.test_fault_injection import _needs_speech_stack

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reference-careful")]

SCENARIOS = ("backchannel-mm-hmm-right", "interruption-2s", "normal-turns-pause-1200ms")


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The ledgers of the careful agent's session-wide run over the default set (the run the
    fault-injection tests read; virtual clock, zero compute, seed 0)."""
    _needs_speech_stack()
    store = default_set_run(tmp_path_factory, "reference:careful")
    found: dict[str, list[dict[str, Any]]] = {}
    bundles = Path(store.path) / "bundles"
    for name in SCENARIOS:
        (path,) = (bundles / name).rglob("events.jsonl")
        lines = path.read_text(encoding="utf-8").splitlines()
        found[name] = [json.loads(line) for line in lines if line.strip()]
    return found


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event_type"] == kind]


def _segment_window(events: list[dict[str, Any]], segment: str) -> tuple[int, int]:
    [start] = [e for e in _of(events, "user.speech_started") if e["data"]["segment_id"] == segment]
    [stop] = [e for e in _of(events, "user.speech_stopped") if e["data"]["segment_id"] == segment]
    return start["monotonic_ns"], stop["monotonic_ns"]


def test_a_half_second_mm_hmm_over_the_answer_is_a_backchannel(
    ledgers: dict[str, list[dict[str, Any]]],
) -> None:
    events = ledgers["backchannel-mm-hmm-right"]
    t0, t1 = _segment_window(events, "mm-hmm")
    # the token lasts longer than the 450 ms barge-in check: the check was needed
    assert t1 - t0 > 450_000_000
    decisions = [e["data"]["action"] for e in _of(events, "turn.decision")]
    assert "interrupt" not in decisions, decisions
    assert decisions.count("backchannel") == 2, decisions  # "mm hmm" and "right"
    assert not _of(events, "playback.interrupted")
    assert [e["data"].get("status") for e in _of(events, "response.done")] == ["completed"]


def test_a_barge_in_stops_the_agent_on_its_words(
    ledgers: dict[str, list[dict[str, Any]]],
) -> None:
    events = ledgers["interruption-2s"]
    stops = [e for e in _of(events, "turn.decision") if e["data"]["action"] == "interrupt"]
    assert len(stops) == 1
    assert stops[0]["data"]["reason"].startswith("barge-in: words over the agent")
    [cut] = _of(events, "playback.interrupted")
    [onset] = [e for e in _of(events, "user.speech_started") if "interrupt" in e["data"]["intents"]]
    # stopped on the words checked at 450 ms of speech (VAD onset and chunks add a little),
    # before the 1 s at which held speech counts as a barge-in anyway
    assert 0.45 <= (cut["monotonic_ns"] - onset["monotonic_ns"]) / 1e9 < 1.0


def test_a_long_pause_inside_an_utterance_splits_the_transcript(
    ledgers: dict[str, list[dict[str, Any]]],
) -> None:
    events = ledgers["normal-turns-pause-1200ms"]
    [final] = _of(events, "asr.final")
    words = final["data"]["text"].lower()
    assert "new number" in words and "0199" in words.replace(" ", ""), words
    [done] = _of(events, "tool.completed")
    assert done["data"]["tool"] == "update_contact"
    assert done["data"]["arguments"]["contact"] == "555 0199"
