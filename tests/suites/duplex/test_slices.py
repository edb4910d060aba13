"""Causal slices of history consistency and recovery accuracy failures (``recovery.py``), and
the utterance links they share with the task and behaviour slices: constructed ledgers through
the pure functions, then bundles of the duplex truth kit where a live agent names its
utterances by its own ids, through the bundle scorer and the report's key failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voxassay.contracts.duplex.event import Event
from voxassay.suites.duplex.scoring.history import AgentCut, history_consistency
from voxassay.suites.duplex.scoring.recovery import recovery_accuracy
from voxassay.suites.duplex.scoring.recovery_slices import history_slice, recovery_slice

Timed = tuple[Event, float]

# one agent answer r1: its audio sounds 2.7-5.69 s (2990 ms); the user barges in at 5.5 s
A_START, A_END, HEARD_MS = 2.7, 5.69, 2990.0
AGENT = [{"start_s": A_START, "end_s": A_END}]
YIELD = AgentCut(A_END, A_START, 5.5, "u2", "ev1")


class Timeline:
    """Ledger events with their times in audio seconds, readable ids (x1, x2, ...)."""

    def __init__(self) -> None:
        self.events: list[Timed] = []

    def add(self, kind: str, t: float, producer: str = "agent", **kw: Any) -> str:
        eid = f"x{len(self.events) + 1}"
        ev = Event.new(
            kind,
            session_id="s",
            producer=producer,
            monotonic_ns=round(t * 1e9),
            event_id=eid,
            **kw,
        )
        self.events.append((ev, t))
        return eid

    def truth(self, segment: str, start: float, end: float) -> None:
        data = {"segment_id": segment, "role": "user"}
        self.add("user.speech_started", start, "harness", utterance_id=segment, data=data)
        self.add("user.speech_stopped", end, "harness", utterance_id=segment, data=data)


def answer(*, barge_vad: bool = True) -> Timeline:
    """r1 playing from 2.7 s; segment u2 (5.5-7.4 s) barges in; the agent's own utterance
    a7 (VAD 5.6-7.7 s) heard it."""
    tl = Timeline()
    tl.add("response.created", 2.6, response_id="r1", utterance_id="a3")
    tl.add("playback.started", 2.7, "player", response_id="r1", playback_id="p1")
    tl.truth("u2", 5.5, 7.4)
    if barge_vad:
        tl.add("vad.speech_started", 5.6, utterance_id="a7")
        tl.add("vad.speech_stopped", 7.7, utterance_id="a7")
    return tl


def history_case(tl: Timeline, *, expected: str | None = None) -> dict[str, Any]:
    (case,) = history_consistency(
        tl.events,
        AGENT,
        cuts=[YIELD],
        expected={"u2": expected} if expected else None,
        onsets={"u2": 5.5},
    )
    return case


def gates_of(sl: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    return [(g["gate"], g["layer"], g["passed"]) for g in sl["gates"]]


# =========================================================================== history


HISTORY_GATES = ["cut_registered", "heard_point_recorded", "heard_point_matches", "history_action"]


def test_history_slice_of_an_unregistered_cut_is_control() -> None:
    # the agent's audio stopped (it yielded) but the ledger has no stop, cancel or truncate
    tl = answer()
    case = history_case(tl)
    assert case["passed"] is False
    sl = history_slice(case, tl.events)
    assert (sl["kind"], sl["check"]) == ("history", "history_consistency")
    assert [g[0] for g in gates_of(sl)] == HISTORY_GATES
    assert (sl["first_failing_gate"], sl["layer"]) == ("cut_registered", "control")
    assert sl["last_passing_gate"] is None
    assert "never registered the cut" in sl["reason"]
    assert sl["time_s"] == case["time_s"]
    # the chain goes back to the barge-in and the agent utterance that heard it, by time
    steps = {c["step"]: c for c in sl["chain"]}
    assert steps["response"]["id"] == "r1" and steps["input"]["id"] == "u2"
    assert steps["utterance"]["id"] == "a7" and steps["utterance"]["link"] == "time"
    assert steps["utterance"]["overlap_ms"] == pytest.approx(1800.0)
    assert sl["chain"][0]["step"] == "outcome"


def test_history_slice_of_a_stop_without_position_is_playback() -> None:
    tl = answer()
    tl.add("playback.interrupted", 5.7, "player", response_id="r1", playback_id="p1")
    sl = history_slice(history_case(tl), tl.events)
    assert (sl["first_failing_gate"], sl["layer"]) == ("cut_registered", "playback")
    assert "reports no played_until_ms" in sl["reason"]


def test_history_slice_of_a_cancel_without_heard_point_is_decision() -> None:
    # the agent cancelled its answer itself but kept the whole text in its memory
    tl = answer()
    tl.add("response.cancelled", 5.7, response_id="r1")
    sl = history_slice(history_case(tl), tl.events)
    assert gates_of(sl)[:2] == [
        ("cut_registered", "control", True),
        ("heard_point_recorded", "decision", False),
    ]
    assert (sl["first_failing_gate"], sl["layer"]) == ("heard_point_recorded", "decision")
    assert sl["last_passing_gate"] == "cut_registered"


@pytest.mark.parametrize(
    ("claimed", "played", "layer", "words"),
    [
        # the agent claims 1.5 s more than its client reported (the client was right)
        (HEARD_MS + 1500, HEARD_MS, "decision", "claims 4490 ms heard, its client reported"),
        # the client's position is 1.5 s beyond the audio; the memory followed it
        (None, HEARD_MS + 1500, "playback", "the client's played_until_ms = 4490 ms disagrees"),
        (HEARD_MS + 1500, HEARD_MS + 1500, "playback", "the memory followed the client"),
        # a claim with no client report to compare with is the agent's own
        (HEARD_MS - 1000, None, "decision", "no client report to follow"),
    ],
)
def test_history_slice_of_a_wrong_heard_point(
    claimed: float | None, played: float | None, layer: str, words: str
) -> None:
    tl = answer()
    tl.add(
        "playback.interrupted",
        5.7,
        "player",
        response_id="r1",
        playback_id="p1",
        played_until_ms=played,
    )
    if claimed is not None:
        tl.add(
            "history.updated",
            5.75,
            response_id="r1",
            data={"action": "truncate", "heard_until_ms": claimed},
        )
    case = history_case(tl)
    assert case["passed"] is False
    sl = history_slice(case, tl.events)
    assert (sl["first_failing_gate"], sl["layer"]) == ("heard_point_matches", layer)
    assert words in sl["reason"]
    assert gates_of(sl)[1] == ("heard_point_recorded", "decision", True)
    memory = next(c for c in sl["chain"] if c["step"] == "memory")
    assert memory["event_type"] == ("history.updated" if claimed else "playback.interrupted")


def test_history_slice_of_a_wrong_action_is_decision() -> None:
    tl = answer()
    tl.add("playback.interrupted", 5.7, "player", playback_id="p1", played_until_ms=HEARD_MS)
    keep = {"segment_id": "u2", "action": "keep", "heard_until_ms": HEARD_MS}
    tl.add("history.updated", 5.75, data=keep)
    sl = history_slice(history_case(tl, expected="truncate"), tl.events)
    # "keep" after a cut keeps the whole response, whatever heard point it names
    assert gates_of(sl)[:2] == [
        ("cut_registered", "playback", True),
        ("heard_point_recorded", "decision", False),
    ]
    assert sl["layer"] == "decision" and sl["last_passing_gate"] == "cut_registered"
    assert "keeps the whole response" in sl["reason"]
    # a truncation at the heard point but with the wrong stated action
    tl = answer()
    tl.add("playback.interrupted", 5.7, "player", playback_id="p1", played_until_ms=HEARD_MS)
    clarify = {"segment_id": "u2", "action": "clarify", "heard_until_ms": HEARD_MS}
    tl.add("history.updated", 5.75, data=clarify)
    sl = history_slice(history_case(tl, expected="truncate"), tl.events)
    assert gates_of(sl) == [
        ("cut_registered", "playback", True),
        ("heard_point_recorded", "decision", True),
        ("heard_point_matches", "decision", True),
        ("history_action", "decision", False),
    ]
    assert sl["layer"] == "decision" and sl["last_passing_gate"] == "heard_point_matches"
    assert "history action 'clarify', the scenario expects 'truncate'" in sl["reason"]
    # an answer cut where the scenario expects it kept: the cut was the wrong decision
    tl = answer()
    tl.add("playback.interrupted", 5.7, "player", playback_id="p1", played_until_ms=HEARD_MS)
    tl.add("history.updated", 5.75, data={"segment_id": "u2", "action": "truncate"})
    sl = history_slice(history_case(tl, expected="keep"), tl.events)
    assert sl["first_failing_gate"] == "history_action"
    assert "the cut itself was the wrong turn decision" in sl["reason"]


def test_history_slice_of_a_passing_case_names_no_layer() -> None:
    tl = answer()
    tl.add("playback.interrupted", 5.7, "player", playback_id="p1", played_until_ms=HEARD_MS)
    case = history_case(tl)
    assert case["passed"] is True
    sl = history_slice(case, tl.events)
    assert sl["layer"] is None and sl["gates"] == [] and "nothing to slice" in sl["reason"]


# =========================================================================== recovery


LABELS = [
    {"id": "u2", "start_s": 5.5, "end_s": 7.4, "role": "user", "expected_actions": ["listen"]}
]


def wrong_at_u2() -> dict[str, list[dict[str, Any]]]:
    return {
        "u2": [
            {
                "id": "d1",
                "point": "turn_end",
                "time_s": 7.4,
                "expected": "respond",
                "observed": "listen",
                "correct": False,
            }
        ]
    }


def faulted(*, back: bool = True, barge_vad: bool = True) -> Timeline:
    tl = answer(barge_vad=barge_vad)
    tl.add("tool.failed", 4.0, data={"call_id": "c1"})
    if back:
        tl.add("response.created", 4.5, response_id="r2", utterance_id="a3")
    return tl


def test_recovery_slice_agent_never_back_is_control() -> None:
    tl = faulted(back=False)
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    sl = recovery_slice(case, tl.events)
    assert (sl["kind"], sl["check"]) == ("recovery", "recovery_accuracy")
    assert [g[0] for g in gates_of(sl)] == [
        "fault",
        "interactive_again",
        "segment_decision",
        "task_not_corrupted",
    ]
    assert gates_of(sl)[0] == ("fault", "control", True)
    assert (sl["first_failing_gate"], sl["layer"]) == ("interactive_again", "control")
    assert sl["last_passing_gate"] == "fault"
    assert any(c["step"] == "fault" and c["event_type"] == "tool.failed" for c in sl["chain"])


def test_recovery_slice_wrong_decision_on_a_heard_segment_is_decision() -> None:
    tl = faulted()
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    sl = recovery_slice(case, tl.events)
    assert (sl["first_failing_gate"], sl["layer"]) == ("segment_decision", "decision")
    assert sl["last_passing_gate"] == "interactive_again"
    # heard through the agent's own utterance a7, linked to u2 by time
    assert "vad.speech_started" in sl["reason"] and "of a7" in sl["reason"]
    utt = next(c for c in sl["chain"] if c["step"] == "utterance")
    assert (utt["id"], utt["link"]) == ("a7", "time")
    assert [c["step"] for c in sl["chain"]] == [
        "outcome",
        "decision",
        "utterance",
        "input",
        "interactive",
        "fault",
    ]


def test_recovery_slice_wrong_decision_on_an_unheard_segment_is_perception() -> None:
    tl = faulted(barge_vad=False)
    # the agent's VAD works (it heard an earlier utterance) but nothing during u2
    tl.add("vad.speech_started", 0.6, utterance_id="a3")
    tl.add("vad.speech_stopped", 2.2, utterance_id="a3")
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    sl = recovery_slice(case, tl.events)
    assert (sl["first_failing_gate"], sl["layer"]) == ("segment_decision", "perception")
    assert "did not hear segment u2 while it was spoken" in sl["reason"]
    # an agent that hears it only after it ended is named with how late
    tl.add("vad.speech_started", 7.9, utterance_id="a8")
    tl.add("vad.speech_stopped", 8.3, utterance_id="a8")
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    sl = recovery_slice(case, tl.events)
    assert sl["layer"] == "perception"
    assert "its next utterance, a8, starts 0.500 s after the segment ended" in sl["reason"]
    # a ledger without any VAD/ASR cannot tell: decision, and it says so
    tl = faulted(barge_vad=False)
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    sl = recovery_slice(case, tl.events)
    assert sl["layer"] == "decision" and "no VAD/ASR events" in sl["reason"]


def test_recovery_slice_task_corruption_takes_the_task_slice_layer() -> None:
    tl = Timeline()
    tl.truth("u2", 5.5, 7.4)
    tl.add("vad.speech_started", 5.6, utterance_id="a7")
    tl.add("session.disconnected", 4.0)
    tl.add("session.resumed", 4.4)
    good = {"u2": [{**wrong_at_u2()["u2"][0], "observed": "respond", "correct": True}]}
    broken = {"name": "reconnect_consistency", "passed": False, "reason": "'date' lost"}
    (case,) = recovery_accuracy(tl.events, LABELS, good, task_checks=[broken])
    assert case["passed"] is False
    task_sl = {"layer": "control", "first_failing_gate": "idempotent"}
    sl = recovery_slice(case, tl.events, task_slices={"reconnect_consistency": task_sl})
    assert (sl["first_failing_gate"], sl["layer"]) == ("task_not_corrupted", "control")
    assert "'date' lost" in sl["reason"] and "first failing gate idempotent" in sl["reason"]
    assert sl["chain"][1]["step"] == "task" and sl["chain"][1]["id"] == "reconnect_consistency"
    # without the task slice the layer is not known
    sl = recovery_slice(case, tl.events)
    assert sl["layer"] == "unknown" and sl["root_cause"] == "unknown root cause"
    assert sl["first_failing_gate"] == "task_not_corrupted"


# =========================================================================== bundles


D06 = "d06_backchannel_agent_wrongly_stops"
"""u1 0.45-2.25 s; the answer a1 from 2.8 s; the backchannel bc1 4.80-5.29 s, at which the
agent wrongly stops (expected: continue)."""
OWN_IDS = {"u1": "u7", "bc1": "u1"}
"""The agent's own utterance ids: its name for what it heard during bc1 is "u1", the id of a
different scenario segment (ids that merely coincide must not link)."""


def own_ids(events: list[Event]) -> list[Event]:
    """A live agent's ledger: its VAD, ASR, decisions and responses carry its own utterance
    ids; the harness truth keeps the segment ids."""
    out = []
    for e in events:
        if e.producer == "agent" and e.utterance_id in OWN_IDS:
            e = e.model_copy(update={"utterance_id": OWN_IDS[e.utterance_id]})
        out.append(e)
    return out


def with_fault(events: list[Event]) -> list[Event]:
    sid = events[-1].session_id
    fault = Event.new(
        "tool.failed",
        session_id=sid,
        producer="agent",
        monotonic_ns=4_000_000_000,
        event_id=f"{sid}-fault",
    )
    return sorted([*own_ids(events), fault], key=lambda e: e.monotonic_ns)


def test_bundle_slices_link_the_agents_own_ids_by_time(tmp_path: Path) -> None:
    from tests.suites.duplex.test_bundle import build_bundle
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = build_bundle(tmp_path / "b", D06, decisions={"bc1": "interrupt"}, transform=with_fault)
    slices = score_bundle_folder(b).output.to_output()["slices"]
    by_kind = {s["kind"]: s for s in slices}
    beh = by_kind["behaviour"]
    assert (beh["check"], beh["first_failing_gate"], beh["layer"]) == (
        "behaviour:false_stop",
        "decided",
        "decision",
    )
    utt = next(c for c in beh["chain"] if c["step"] == "utterance")
    # the agent's "u1" heard bc1 (its VAD 4.92-5.535 s), not the segment named u1
    assert (utt["id"], utt["link"]) == ("u1", "time")
    assert utt["overlap_ms"] == pytest.approx((5.285125 - 4.9201875) * 1000, abs=1)
    assert beh["trigger"]["utterances"] == ["u1"]
    # the fault at 4.0 s: the first labelled user segment after it is bc1, decided wrongly
    # although heard (the VAD of the agent's u1, linked to bc1 by time)
    rec = by_kind["recovery"]
    assert (rec["check"], rec["first_failing_gate"], rec["layer"]) == (
        "recovery_accuracy",
        "segment_decision",
        "decision",
    )
    assert "of u1" in rec["reason"]
    assert rec["last_passing_gate"] == "interactive_again"
    inp = next(c for c in rec["chain"] if c["step"] == "input")
    assert inp["id"] == "bc1" and inp["event_type"] == "user.speech_started"


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.suites.duplex.test_bundle import build_bundle, kit, run_dir

    kit()
    root = tmp_path_factory.mktemp("slices")

    def over(events: list[Event]) -> list[Event]:
        return [
            e.model_copy(update={"played_until_ms": 4490.0})
            if e.event_type == "playback.interrupted"
            else e
            for e in events
        ]

    build_bundle(root / "b" / "over", "d02_bargein_cut_200", session_id="over", transform=over)
    build_bundle(
        root / "b" / "rec",
        D06,
        session_id="rec",
        decisions={"bc1": "interrupt"},
        transform=with_fault,
    )
    return run_dir([str(root / "b"), "--out", str(root / "runs")])


def test_history_and_recovery_slices_are_key_failures(slice_run: Path) -> None:
    from tests.suites.duplex.test_bundle import report_of

    report = report_of(slice_run)
    fails = report["key_failures"]
    kinds = [f["kind"] for f in fails]
    # recovery failures first, then history cases and turn decisions by session ("over"
    # before "rec") and time
    assert kinds == ["recovery", "history", "behaviour"]
    hist = fails[1]
    assert hist["session"] == "over" and hist["check"] == "history_consistency"
    # the client says 4490 ms were played, 2990 ms sounded: the memory followed the client
    assert (hist["first_failing_gate"], hist["layer"]) == ("heard_point_matches", "playback")
    assert hist["time_s"] is not None
    summary = report["failure_summary"]
    assert summary["by_check"]["history_consistency"] == 1
    assert summary["by_check"]["recovery_accuracy"] == 1
    assert summary["by_layer"] == {"decision": 2, "playback": 1}
    md = (slice_run / "report.md").read_text()
    key = md.split("## Key failures", 1)[1]
    assert "| over | history | history_consistency |" in key
    assert "| rec | recovery | recovery_accuracy |" in key
    html = (slice_run / "report.html").read_text()
    assert "heard_point_matches" in html and "segment_decision" in html


def test_recovery_slice_hearing_without_utterance_ids_reads_the_segment_span() -> None:
    # a VAD that names no utterance: an event inside the segment's truth span heard it
    tl = faulted(barge_vad=False)
    tl.add("vad.speech_started", 5.65)
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    assert recovery_slice(case, tl.events)["layer"] == "decision"
    # one long before the segment did not
    tl = faulted(barge_vad=False)
    tl.add("vad.speech_started", 1.0)
    (case,) = recovery_accuracy(tl.events, LABELS, wrong_at_u2())
    assert recovery_slice(case, tl.events)["layer"] == "perception"
