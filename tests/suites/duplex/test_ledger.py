"""Ledger I/O: streaming read with line numbers, append-and-flush writer, causal order."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.suites.duplex.evidence.ledger import (
    EventWriter,
    order_by_causality,
    producer_clocks,
    read_events,
    session_ns,
    write_events,
)


def make(event_type: str, producer: str, ns: int, **kw: Any) -> Event:
    return Event.new(event_type, session_id="s1", producer=producer, monotonic_ns=ns, **kw)


def clock(producer: str, offset_ns: int, uncertainty_ns: int = 0) -> Event:
    record = ProducerClock(
        producer=producer, kind="monotonic", offset_ns=offset_ns, uncertainty_ns=uncertainty_ns
    )
    return record.to_event("s1", monotonic_ns=0)


def test_write_then_read_roundtrip(tmp_path: Path) -> None:
    events = [make("user.speech_started", "harness", i * 10, utterance_id="u1") for i in range(5)]
    path = tmp_path / "events.jsonl"
    assert write_events(path, events) == 5
    back = list(read_events(path))
    assert [line for line, _ in back] == [1, 2, 3, 4, 5]
    assert [e for _, e in back] == events


def test_read_reports_bad_lines_with_their_number_and_goes_on(tmp_path: Path) -> None:
    good = make("asr.final", "agent", 1).to_json().encode()
    lines = [good, b"{not json", b"", b'["a list"]', b'{"event_id": "x"}', b"42", good]
    lines.append(b'{"event_id": "\xff"}')  # not UTF-8
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(read_events(path))
    kinds = [(line, type(item).__name__) for line, item in items]
    assert kinds == [
        (1, "Event"),
        (2, "Problem"),
        (4, "Problem"),
        (5, "Problem"),
        (6, "Problem"),
        (7, "Event"),
        (8, "Problem"),
    ]
    messages = {line: item.message for line, item in items if isinstance(item, Problem)}
    assert messages[2].startswith("malformed JSON")
    assert messages[4] == "not a JSON object"
    assert "missing required field 'session_id'" in messages[5]
    assert "not UTF-8" in messages[8]
    assert messages[6] == "not a JSON object"
    assert all(p.file == str(path) and p.severity == "error" for p in messages_of(items))


def messages_of(items: list[tuple[int, Event | Problem]]) -> list[Problem]:
    return [i for _, i in items if isinstance(i, Problem)]


def test_read_is_lazy(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(make("asr.final", "agent", 1).to_json() + "\n" + "garbage\n" * 1000)
    it = read_events(path)
    line, first = next(it)
    assert line == 1 and isinstance(first, Event)


@pytest.mark.slow
def test_streaming_read_of_200k_lines_keeps_memory_bounded(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    template = make("tts.chunk", "agent", 0, response_id="r1", data={"bytes": 640}).model_dump(
        mode="json", exclude_none=True
    )
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(200_000):
            template["event_id"] = f"e{i}"
            template["monotonic_ns"] = i * 20_000_000
            fh.write(json.dumps(template) + "\n")
    assert path.stat().st_size > 30_000_000  # far more than the memory bound below
    tracemalloc.start()
    try:
        count = last = 0
        for line, item in read_events(path):
            assert isinstance(item, Event)
            count, last = count + 1, line
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 200_000 and last == 200_000
    assert peak < 3 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_event_writer_flushes_each_event_and_cuts_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        writer.write(make("session.connected", "harness", 1))
        # readable before close: flushed per event
        assert [type(i).__name__ for _, i in read_events(path)] == ["Event"]
        writer.write(make("user.speech_started", "harness", 2))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"event_id": "half-writ')  # a killed writer
    with EventWriter(path, fsync=True) as writer:
        writer.write(make("user.speech_stopped", "harness", 3))
    items = [i for _, i in read_events(path)]
    assert all(isinstance(i, Event) for i in items)
    assert [i.event_type for i in items if isinstance(i, Event)] == [
        "session.connected",
        "user.speech_started",
        "user.speech_stopped",
    ]


def test_producer_clocks_use_the_most_certain_estimate() -> None:
    events = [clock("agent", 100, 50), clock("agent", 900, 10), clock("agent", 500, 40)]
    assert producer_clocks(events)["agent"].offset_ns == 900
    e = make("asr.final", "agent", 1_000)
    assert session_ns(e, producer_clocks(events)) == 1_900
    assert session_ns(make("asr.final", "other", 7), {}) == 7


def test_order_uses_clock_offsets_across_producers() -> None:
    # the agent's clock runs 1 s behind the session clock: its raw stamps look earlier
    agent_vad = make("vad.speech_stopped", "agent", 1_500_000_000)
    user_stop = make("user.speech_stopped", "harness", 2_400_000_000)
    records = [clock("harness", 0), clock("agent", 1_000_000_000)]
    ordered = order_by_causality([agent_vad, user_stop, *records])
    names = [e.event_type for e in ordered if e.event_type != "clock.producer"]
    assert names == ["user.speech_stopped", "vad.speech_stopped"]
    # without the records the raw stamps decide (and are wrong)
    raw = [e.event_type for e in order_by_causality([agent_vad, user_stop])]
    assert raw == ["vad.speech_stopped", "user.speech_stopped"]


def test_causal_links_win_over_a_skewed_estimate() -> None:
    # the player's estimate puts playback.started 3 ms before response.created (within the
    # offset uncertainty); the shared response_id says the response came first
    created = make("response.created", "agent", 10_000_000, response_id="r1")
    chunk = make("tts.chunk", "agent", 11_000_000, response_id="r1")
    started = make("playback.started", "player", 7_000_000, response_id="r1", playback_id="p1")
    stopped = make("playback.stopped", "player", 9_000_000, playback_id="p1")
    requested = make("tool.requested", "agent", 20_000_000, task_id="t1", data={"call_id": "c1"})
    done = make("tool.completed", "tools", 1_000, task_id="t1", data={"call_id": "c1"})
    ordered = order_by_causality([stopped, started, chunk, done, created, requested])
    pos = {e.event_type: i for i, e in enumerate(ordered)}
    assert pos["response.created"] < pos["playback.started"] < pos["playback.stopped"]
    assert pos["response.created"] < pos["tts.chunk"]
    assert pos["tool.requested"] < pos["tool.completed"]
    assert len(ordered) == 6


def test_producer_order_and_sequence_numbers() -> None:
    a = make("tts.chunk", "agent", 5, seq=2)
    b = make("tts.chunk", "agent", 5, seq=1)
    c = make("tts.chunk", "agent", 4, seq=3)
    assert [e.seq for e in order_by_causality([a, b, c])] == [3, 1, 2]


def test_contradictory_constraints_do_not_hang() -> None:
    # one producer says playback.stopped came before playback.started (same playback id)
    stop = make("playback.stopped", "player", 1, playback_id="p")
    start = make("playback.started", "player", 2, playback_id="p")
    assert len(order_by_causality([start, stop])) == 2
    assert order_by_causality([]) == []


def test_an_id_rule_against_a_producers_own_order_does_not_delay_other_events() -> None:
    # the agent logs its decision for r1 before creating r1 (its own order is a fact); the
    # contradiction must not hold back events of other producers until the cycle is broken
    decision = make("turn.decision", "agent", 4_000_000, seq=1, response_id="r1")
    created = make("response.created", "agent", 4_000_000, seq=2, response_id="r1")
    started = make("playback.started", "player", 4_100_000, response_id="r1", playback_id="p1")
    late_a = make("acoustic.speech_started", "voxassay.acoustic", 5_000_000)
    late_b = make("acoustic.speech_stopped", "voxassay.acoustic", 9_000_000)
    ordered = order_by_causality([late_b, late_a, started, created, decision])
    assert [e.event_type for e in ordered] == [
        "turn.decision",
        "response.created",
        "playback.started",
        "acoustic.speech_started",
        "acoustic.speech_stopped",
    ]
