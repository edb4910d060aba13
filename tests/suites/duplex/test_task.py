"""Task and side-effect metrics: each check passes on a correct session and fails on a faulty one."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from voxassay.contracts.duplex.business import (
    ToolAudit,
    ToolCall,
    export_task_schemas,
    load_final_state,
    load_tool_audit,
    task_json_schema,
)
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.core.errors import InputError
from voxassay.stats.intervals import wilson_interval
from voxassay.suites.duplex.evidence.ledger import write_events
from voxassay.suites.duplex.evidence.validate import load_scenario
from voxassay.suites.duplex.live.scenarios import SCENARIOS_DIR
from voxassay.suites.duplex.scoring.task import CHECKS, aggregate_tasks, score_bundle, score_task
from voxassay.suites.duplex.scoring.task_context import TaskResult
from voxassay.suites.duplex.scoring.task_slice import task_failure_slice
from voxassay.suites.duplex.scoring.values import normalize_value, text_mentions, values_equal

MS = 1_000_000


# --------------------------------------------------------------------------- builders


def scenario(name: str, **changes: Any) -> Scenario:
    """An example scenario, optionally with top-level fields replaced (validated again)."""
    base = load_scenario(SCENARIOS_DIR / f"{name}.yaml").model_dump(mode="json")
    base.update(changes)
    return Scenario.model_validate(base)


class Ledger:
    """Hand-built events.jsonl with readable ids (e1, e2, ...) and times in ms."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, event_type: str, ms: float, producer: str = "agent", **kw: Any) -> str:
        eid = kw.pop("event_id", None) or f"e{len(self.events) + 1}"
        self.events.append(
            Event(
                event_id=eid,
                event_type=event_type,
                session_id="s1",
                producer=producer,
                monotonic_ns=int(ms * MS),
                **kw,
            )
        )
        return eid

    def user(self, segment: str, start_ms: float, end_ms: float, heard: str | None) -> str:
        """Scenario truth for a segment, plus the agent's asr.final when ``heard`` is text."""
        utt = f"u-{segment}"
        eid = self.add(
            "user.speech_started",
            start_ms,
            producer="harness",
            utterance_id=utt,
            data={"segment_id": segment},
        )
        self.add("user.speech_stopped", end_ms, producer="harness", utterance_id=utt)
        if heard is not None:
            self.add("asr.final", end_ms + 100, utterance_id=utt, data={"text": heard})
        return eid

    def state(self, ms: float, version: int, utt: str, **data: Any) -> str:
        return self.add(
            "task.state", ms, task_id="t1", utterance_id=utt, data={"version": version, **data}
        )

    def tool(self, call_id: str, response: str | None, req_ms: float, done_ms: float) -> None:
        self.add(
            "tool.requested", req_ms, task_id="t1", response_id=response, data={"call_id": call_id}
        )
        self.add(
            "tool.completed", done_ms, task_id="t1", response_id=response, data={"call_id": call_id}
        )


def call(
    call_id: str,
    tool: str,
    args: dict[str, Any],
    req_ms: float,
    done_ms: float | None,
    *,
    status: str = "ok",
    write: bool = True,
    committed: bool | None = None,
    version: int | None = 1,
    response: str | None = "r1",
    delivered_ms: float | None = None,
    **kw: Any,
) -> ToolCall:
    return ToolCall(
        call_id=call_id,
        tool=tool,
        arguments=args,
        task_id="t1",
        task_version=version,
        response_id=response,
        requested_ns=int(req_ms * MS),
        completed_ns=None if done_ms is None else int(done_ms * MS),
        status=status,
        side_effect=write,
        committed=write if committed is None else committed,
        delivered_ns=None if delivered_ms is None else int(delivered_ms * MS),
        **kw,
    )


def audit(*calls: ToolCall) -> ToolAudit:
    return ToolAudit(session_id="s1", calls=list(calls))


def verdicts(result: TaskResult) -> dict[str, bool | None]:
    return {c.name: c.passed for c in result.checks}


# --------------------------------------------------------------------------- correction (reschedule)

CORRECTION = scenario("correction-date")
OLD, NEW = "2026-08-12", "2026-08-10"
RESCHEDULE = "reschedule_appointment"


def correction_ledger(heard: str, understood: bool) -> Ledger:
    led = Ledger()
    led.user("ask", 500, 2500, "Move my dentist appointment to August twelfth.")
    led.add("turn.decision", 2550, utterance_id="u-ask", data={"action": "listen"})
    led.add("response.created", 2700, response_id="r1", utterance_id="u-ask")
    led.state(2700, 1, "u-ask", fields={"date": OLD})
    led.add("playback.started", 3000, response_id="r1", playback_id="p1")
    led.user("correct", 4200, 5800, heard)
    led.add("turn.decision", 4500, utterance_id="u-correct", data={"action": "interrupt"})
    led.add("response.created", 6000, response_id="r2", utterance_id="u-correct")
    if understood:
        led.state(6000, 2, "u-correct", fields={"date": NEW})
    return led


HEARD = "No wait, the tenth, not the twelfth."
MISHEARD = "No weight, the tent, not the twelfth."


def correction_session(kind: str) -> tuple[dict[str, Any], ToolAudit, list[Event]]:
    """ok | decision (heard, old date sent) | control (old call in flight committed) |
    perception (correction misheard)."""
    led = correction_ledger(MISHEARD if kind == "perception" else HEARD, kind != "perception")
    if kind == "control":
        led.tool("c0", "r1", 3500, 6200)
        calls = [call("c0", RESCHEDULE, {"date": OLD}, 3500, 6200)]
        final = OLD
    else:
        date = NEW if kind == "ok" else OLD
        led.tool("c1", "r2", 6100, 6500)
        led.add("response.created", 6600, response_id="r3", utterance_id="u-correct")
        led.add("playback.started", 6700, response_id="r3", playback_id="p3")
        version = 2 if kind != "perception" else 1
        calls = [
            call(
                "c1",
                RESCHEDULE,
                {"date": date},
                6100,
                6500,
                version=version,
                response="r2",
                delivered_ms=6700,
                delivered_task_version=version,
                delivered_response_id="r3",
                result={"status": "rescheduled"},
            )
        ]
        final = date
    return {"final_date": final}, audit(*calls), led.events


def test_correction_ok_session_passes_every_applicable_check() -> None:
    state, aud, events = correction_session("ok")
    r = score_task(CORRECTION, state, aud, events)
    v = verdicts(r)
    assert v["goal_completion"] is True
    assert v["parameter_consistency"] is True
    assert v["tool_choice"] is True
    assert v["duplicate_side_effects"] is True
    assert v["stale_result_interception"] is True
    assert v["delivery_correctness"] is True
    # nothing to cancel, no stop (the correction modifies), no reconnect
    assert v["cancellation"] is None and v["compensation"] is None
    assert v["write_after_stop"] is None and v["reconnect_consistency"] is None
    assert r.passed is True
    assert r.duplicate_side_effects == 0 and r.stale_deliveries == 0


@pytest.mark.parametrize("kind", ["decision", "control", "perception"])
def test_corrected_date_but_old_date_committed_fails(kind: str) -> None:
    state, aud, events = correction_session(kind)
    r = score_task(CORRECTION, state, aud, events)
    param = r.check("parameter_consistency")
    assert param.passed is False
    assert param.expected == {"final_date": NEW}
    failing_call = "c0" if kind == "control" else "c1"
    assert failing_call in param.evidence
    wheres = {m["where"] for m in param.details["mismatches"]}
    assert wheres == {"final_state.final_date", f"call {failing_call}.arguments.date"}
    assert r.check("goal_completion").passed is False
    assert r.check("goal_completion").value == 0.0


@pytest.mark.parametrize(
    ("kind", "layer", "gate"),
    [
        ("decision", "decision", "arguments"),  # heard and understood, sent the old date
        ("control", "control", "in_flight_cancelled"),  # old call in flight, never cancelled
        ("perception", "perception", "heard"),  # "the tenth" misheard
    ],
)
def test_correction_failure_slice_names_the_layer(kind: str, layer: str, gate: str) -> None:
    state, aud, events = correction_session(kind)
    r = score_task(CORRECTION, state, aud, events)
    sl = task_failure_slice(r.check("parameter_consistency"), events)
    assert sl["layer"] == layer
    assert sl["first_failing_gate"] == gate
    steps = [link["step"] for link in sl["chain"]]
    assert steps[0] == "outcome" and steps[-1] == "input"
    assert {"task", "response", "utterance"} <= set(steps)
    # the input the write answered: the old request for the in-flight call, else the correction
    assert sl["chain"][-1]["id"] == ("ask" if kind == "control" else "correct")
    if kind != "perception":
        assert sl["last_passing_gate"] is not None
    # the goal failure is sliced the same way (its trigger is the correction)
    assert task_failure_slice(r.check("goal_completion"), events)["layer"] == layer


def test_write_replaced_after_correction_is_not_counted_but_a_late_old_write_is() -> None:
    led = correction_ledger(HEARD, understood=True)
    before = call("c0", RESCHEDULE, {"date": OLD}, 3500, 3700)  # before the correction
    after = call("c1", RESCHEDULE, {"date": NEW}, 6100, 6500, version=2, response="r2")
    r = score_task(CORRECTION, {"final_date": NEW}, audit(before, after), led.events)
    assert r.check("parameter_consistency").passed is True
    late_old = call("c0", RESCHEDULE, {"date": OLD}, 6000, 6050, version=2, response="r2")
    r = score_task(CORRECTION, {"final_date": NEW}, audit(late_old, after), led.events)
    check = r.check("parameter_consistency")
    assert check.passed is False and check.evidence[-1] == "c0"


def test_parameter_consistency_from_task_state_versions() -> None:
    # no correction segment: the change is known only from the agent's task.state versions
    sc = scenario(
        "tools-cancel-while-waiting",
        segments=[load_scenario(SCENARIOS_DIR / "tools-cancel-while-waiting.yaml").segments[0]],
        business_truth={
            "expected_final_state": {"taxi_booked": True},
            "allowed_side_effects": ["book_taxi"],
        },
    )
    led = Ledger()
    led.user("ask", 500, 2500, "Book me a taxi to the airport for six a.m.")
    led.state(2600, 1, "u-ask", fields={"destination": "airport", "pickup_time": "06:00"})
    led.state(3600, 2, "u-ask", fields={"destination": "airport", "pickup_time": "07:00"})
    args = {"destination": "airport", "pickup_time": "06:00"}
    bad = score_task(
        sc,
        {"taxi_booked": True},
        audit(call("c1", "book_taxi", args, 4000, 4400, version=2)),
        led.events,
    )
    check = bad.check("parameter_consistency")
    assert check.passed is False and check.expected == {"pickup_time": "07:00"}
    assert check.details["sources"] == ["task.state"]
    good_args = {**args, "pickup_time": "07:00"}
    good = score_task(
        sc,
        {"taxi_booked": True},
        audit(call("c1", "book_taxi", good_args, 4000, 4400, version=2)),
        led.events,
    )
    assert good.check("parameter_consistency").passed is True


# --------------------------------------------------------------------------- duplicate booking

BOOKING = scenario(
    "tools-cancel-while-waiting",
    segments=[load_scenario(SCENARIOS_DIR / "tools-cancel-while-waiting.yaml").segments[0]],
    business_truth={
        "expected_final_state": {"taxi_booked": True},
        "allowed_side_effects": ["book_taxi"],
    },
)
TAXI = {"destination": "airport", "pickup_time": "06:00"}


def booking_ledger(second_response: str | None = "r1") -> Ledger:
    led = Ledger()
    led.user("ask", 500, 2500, "Book me a taxi to the airport for six a.m.")
    led.add("response.created", 2700, response_id="r1", utterance_id="u-ask")
    led.state(2700, 1, "u-ask", fields=TAXI)
    led.add("tool.requested", 2800, task_id="t1", response_id="r1", data={"call_id": "c1"})
    led.add("tool.failed", 6800, task_id="t1", response_id="r1", data={"call_id": "c1"})
    if second_response == "r2":
        led.add("response.created", 6850, response_id="r2", utterance_id="u-ask")
    led.add(
        "tool.requested", 6900, task_id="t1", response_id=second_response, data={"call_id": "c2"}
    )
    led.add(
        "tool.completed", 7300, task_id="t1", response_id=second_response, data={"call_id": "c2"}
    )
    return led


def test_retry_without_idempotency_key_duplicates_the_booking() -> None:
    led = booking_ledger()
    first = call("c1", "book_taxi", TAXI, 2800, 6800, status="failed", error="timeout")
    retry = call("c2", "book_taxi", TAXI, 6900, 7300)
    bad = score_task(BOOKING, {"taxi_booked": True}, audit(first, retry), led.events)
    dup = bad.check("duplicate_side_effects")
    assert dup.passed is False and dup.value == 1 and dup.expected == 0
    assert dup.details["groups"] == [["c1", "c2"]]
    assert bad.duplicate_side_effects == 1
    # the end state looks right: only the duplicate check catches it
    assert bad.check("goal_completion").passed is True
    sl = task_failure_slice(dup, led.events)
    assert sl["layer"] == "control"
    assert sl["last_passing_gate"] == "single_decision"
    assert sl["outcome"]["call_id"] == "c2"

    # the same retry with the key: the backend dedupes it, nothing is duplicated
    first_k = call("c1", "book_taxi", TAXI, 2800, 6800, status="failed", idempotency_key="k-1")
    retry_k = call("c2", "book_taxi", TAXI, 6900, 7300, committed=False, idempotency_key="k-1")
    good = score_task(BOOKING, {"taxi_booked": True}, audit(first_k, retry_k), led.events)
    assert good.check("duplicate_side_effects").passed is True
    assert good.duplicate_side_effects == 0
    assert good.check("tool_choice").passed is True


def test_duplicates_by_key_and_allowance() -> None:
    led = booking_ledger()
    a = call("c1", "book_taxi", TAXI, 2800, 6800, idempotency_key="k-1")
    b = call("c2", "book_taxi", {**TAXI, "pickup_time": "6:00"}, 6900, 7300, idempotency_key="k-1")
    r = score_task(BOOKING, {"taxi_booked": True}, audit(a, b), led.events)
    assert r.check("duplicate_side_effects").value == 1  # same key, different spelling
    lenient = BOOKING.model_copy(
        update={
            "business_truth": BOOKING.business_truth.model_copy(
                update={"max_duplicate_side_effects": 1}
            )
        }
    )
    assert (
        score_task(lenient, {"taxi_booked": True}, audit(a, b), led.events)
        .check("duplicate_side_effects")
        .passed
        is True
    )


def test_second_decision_to_book_is_a_decision_failure() -> None:
    led = booking_ledger(second_response="r2")
    first = call("c1", "book_taxi", TAXI, 2800, 6800, status="failed")
    again = call("c2", "book_taxi", TAXI, 6900, 7300, response="r2")
    r = score_task(BOOKING, {"taxi_booked": True}, audit(first, again), led.events)
    sl = task_failure_slice(r.check("duplicate_side_effects"), led.events)
    assert sl["layer"] == "decision" and sl["first_failing_gate"] == "single_decision"


def test_broken_chain_is_unknown_root_cause() -> None:
    led = Ledger()
    led.user("ask", 500, 2500, "Book me a taxi to the airport for six a.m.")
    first = call("c1", "book_taxi", TAXI, 2800, 6800, status="failed", response=None)
    retry = call("c2", "book_taxi", TAXI, 6900, 7300, response=None)
    r = score_task(BOOKING, {"taxi_booked": True}, audit(first, retry), led.events)
    sl = task_failure_slice(r.check("duplicate_side_effects"), led.events)
    assert sl["layer"] == "unknown" and sl["root_cause"] == "unknown root cause"
    assert "chain breaks" in sl["reason"]


# --------------------------------------------------------------------------- cancel and stop

CANCEL = scenario("tools-cancel-while-waiting")


def cancel_ledger(*, agent_cancels: bool, cancel_ms: float = 4000) -> Ledger:
    led = Ledger()
    led.user("ask", 500, 2500, "Book me a taxi to the airport for six a.m.")
    led.add("response.created", 2700, response_id="r1", utterance_id="u-ask")
    led.state(2700, 1, "u-ask", fields=TAXI)
    led.add("tool.requested", 2800, task_id="t1", response_id="r1", data={"call_id": "c1"})
    led.user("cancel", 3800, 5800, "Actually, cancel that, I'll take the train.")
    led.add("turn.decision", 4000, utterance_id="u-cancel", data={"action": "interrupt"})
    if agent_cancels:
        led.state(cancel_ms, 2, "u-cancel", status="cancelled")
    return led


def test_cancel_in_flight_booking_ok() -> None:
    led = cancel_ledger(agent_cancels=True)
    c1 = call("c1", "book_taxi", TAXI, 2800, 4100, status="cancelled", committed=False)
    r = score_task(CANCEL, {"taxi_booked": False}, audit(c1), led.events)
    v = verdicts(r)
    assert v["goal_completion"] is True
    assert v["cancellation"] is True
    assert v["write_after_stop"] is True
    assert v["tool_choice"] is True
    assert v["compensation"] is None  # nothing committed, nothing to undo
    assert r.writes_after_stop == 0


def test_cancel_where_the_booking_still_stands() -> None:
    led = cancel_ledger(agent_cancels=False)
    led.add("tool.completed", 6800, task_id="t1", response_id="r1", data={"call_id": "c1"})
    c1 = call("c1", "book_taxi", TAXI, 2800, 6800, result={"status": "booked"})
    r = score_task(CANCEL, {"taxi_booked": True}, audit(c1), led.events)
    v = verdicts(r)
    assert v["cancellation"] is False and r.check("cancellation").value == 1
    assert v["compensation"] is False
    assert v["goal_completion"] is False
    assert v["write_after_stop"] is False  # it committed 3 s after "cancel that"
    assert v["tool_choice"] is False  # book_taxi is not an allowed side effect here
    sl = task_failure_slice(r.check("cancellation"), led.events)
    # heard, decided to interrupt, but never cancelled the task nor called cancel_taxi
    assert sl["layer"] == "decision" and sl["first_failing_gate"] == "acted"
    assert sl["last_passing_gate"] == "decided"
    assert task_failure_slice(r.check("goal_completion"), led.events)["layer"] == "decision"


def test_cancel_acted_on_but_compensation_failed_is_control() -> None:
    led = cancel_ledger(agent_cancels=True)
    led.add("tool.completed", 3500, task_id="t1", response_id="r1", data={"call_id": "c1"})
    c1 = call("c1", "book_taxi", TAXI, 2800, 3500)  # committed before the stop
    c2 = call(
        "c2",
        "cancel_taxi",
        {"booking_id": "TX-7"},
        4200,
        4600,
        status="failed",
        committed=False,
        compensates="c1",
        response="r2",
        version=2,
    )
    r = score_task(CANCEL, {"taxi_booked": True}, audit(c1, c2), led.events)
    assert r.check("write_after_stop").passed is True  # the booking predates the stop
    sl = task_failure_slice(r.check("cancellation"), led.events)
    assert sl["layer"] == "control" and sl["last_passing_gate"] == "acted"
    assert task_failure_slice(r.check("compensation"), led.events)["layer"] == "control"


def test_booking_undone_by_a_committed_compensation_does_not_stand() -> None:
    led = cancel_ledger(agent_cancels=True)
    c1 = call("c1", "book_taxi", TAXI, 2800, 3500)  # status left "ok" by the driver
    c2 = call(
        "c2",
        "cancel_taxi",
        {"booking_id": "TX-7"},
        4200,
        4600,
        compensates="c1",
        response="r2",
        version=2,
    )
    r = score_task(CANCEL, {"taxi_booked": False}, audit(c1, c2), led.events)
    assert r.check("cancellation").passed is True
    assert r.check("compensation").passed is True
    assert r.check("write_after_stop").passed is True


def test_new_request_after_cancel_reopens_writes() -> None:
    rebook = {
        "id": "rebook",
        "role": "user",
        "say": "Actually, book it for seven instead.",
        "voice": "piper",
        "at_ms": 9000,
        "intents": ["start"],
        "expected_task_action": "keep",
    }
    sc = scenario(
        "tools-cancel-while-waiting",
        segments=[*CANCEL.model_dump(mode="json")["segments"], rebook],
        business_truth={
            "expected_final_state": {"taxi_booked": True},
            "allowed_side_effects": ["book_taxi"],
        },
    )
    led = cancel_ledger(agent_cancels=True)
    led.user("rebook", 9000, 10500, "Actually, book it for seven instead.")
    c1 = call("c1", "book_taxi", TAXI, 2800, 4100, status="cancelled", committed=False)
    c2 = call("c2", "book_taxi", {**TAXI, "pickup_time": "07:00"}, 10700, 11000, version=3)
    r = score_task(sc, {"taxi_booked": True}, audit(c1, c2), led.events)
    assert r.check("cancellation").passed is True  # c2 answers the new request
    assert r.check("write_after_stop").passed is True
    assert r.check("compensation").passed is None
    # the same booking before the new request is a write after stop that still stands
    early = call("c2", "book_taxi", {**TAXI, "pickup_time": "07:00"}, 7000, 7300, version=3)
    r = score_task(sc, {"taxi_booked": True}, audit(c1, early), led.events)
    assert r.check("cancellation").passed is False
    assert r.check("write_after_stop").passed is False
    assert r.check("compensation").passed is False


def test_write_300ms_after_stop_fails_even_if_final_state_is_right() -> None:
    led = cancel_ledger(agent_cancels=True)
    led.add("tool.completed", 4100, task_id="t1", response_id="r1", data={"call_id": "c1"})
    booked = call("c1", "book_taxi", TAXI, 2800, 3800 + 300, status="compensated")
    undo = call(
        "c2",
        "cancel_taxi",
        {"booking_id": "TX-7"},
        4200,
        4500,
        compensates="c1",
        response="r2",
        version=2,
    )
    r = score_task(CANCEL, {"taxi_booked": False}, audit(booked, undo), led.events)
    v = verdicts(r)
    assert v["goal_completion"] is True  # looks right at the end
    assert v["cancellation"] is True
    assert v["compensation"] is True
    wa = r.check("write_after_stop")
    assert wa.passed is False and wa.value == 1 and "c1" in wa.evidence
    assert "300 ms after the stop" in wa.reason
    assert r.writes_after_stop == 1
    sl = task_failure_slice(wa, led.events)
    assert sl["layer"] == "control" and sl["first_failing_gate"] == "propagated"
    assert [g["gate"] for g in sl["gates"]] == ["heard", "decided", "propagated"]

    # the same write 300 ms *before* the stop is fine
    early = call("c1", "book_taxi", TAXI, 2800, 3800 - 300, status="compensated")
    ok = score_task(CANCEL, {"taxi_booked": False}, audit(early, undo), led.events)
    assert ok.check("write_after_stop").passed is True


def test_stop_from_task_state_cancel_alone() -> None:
    # no scenario stop segment is timed (no user.speech_started); the agent's cancel is
    led = Ledger()
    led.state(3000, 2, "u-x", status="cancelled")
    c1 = call("c1", "book_taxi", TAXI, 2800, 3300)
    r = score_task(CANCEL, {"taxi_booked": False}, audit(c1), led.events)
    assert r.check("write_after_stop").passed is False
    untimed = score_task(CANCEL, {"taxi_booked": False}, audit(c1), [])
    assert untimed.check("write_after_stop").passed is None
    assert untimed.check("write_after_stop").unscored is True


# --------------------------------------------------------------------------- stale result

_cancel_doc = load_scenario(SCENARIOS_DIR / "tools-cancel-while-waiting.yaml").model_dump(
    mode="json"
)
TOPIC = scenario(
    "tools-cancel-while-waiting",
    segments=[
        _cancel_doc["segments"][0],
        {
            **_cancel_doc["segments"][1],
            "id": "topic",
            "say": "Never mind. What's the weather tomorrow?",
            "intents": ["start"],
            "expected_task_action": "cancel",
        },
    ],
    tools=[
        *_cancel_doc["tools"],
        {"name": "taxi_quote", "arguments": {"type": "object"}, "may_go_stale": True},
    ],
    business_truth={"expected_final_state": {"taxi_booked": False}, "allowed_side_effects": []},
)
QUOTE = {"eta_min": 12, "price": 38}


def topic_session(delivered: bool, bump_version: bool) -> tuple[ToolAudit, list[Event]]:
    led = Ledger()
    led.user("ask", 500, 2500, "Book me a taxi to the airport for six a.m.")
    led.add("response.created", 2700, response_id="r1", utterance_id="u-ask")
    led.state(2700, 1, "u-ask", fields=TAXI)
    led.add("tool.requested", 2800, task_id="t1", response_id="r1", data={"call_id": "q1"})
    led.user("topic", 3800, 5300, "Never mind. What's the weather tomorrow?")
    led.add("turn.decision", 4000, utterance_id="u-topic", data={"action": "interrupt"})
    if bump_version:
        led.state(5500, 2, "u-topic", status="superseded")
    led.add("response.created", 5600, response_id="r2", utterance_id="u-topic")
    led.add("tool.completed", 6800, task_id="t1", response_id="r1", data={"call_id": "q1"})
    extra: dict[str, Any] = {}
    if delivered:
        led.add("response.created", 6900, response_id="r3", utterance_id="u-ask")
        led.add("playback.started", 7000, response_id="r3", playback_id="p3")
        extra = {
            "delivered_ms": 7000,
            "delivered_response_id": "r3",
            "delivered_task_version": 2 if bump_version else None,
        }
    q1 = call(
        "q1",
        "taxi_quote",
        {"destination": "airport"},
        2800,
        6800,
        write=False,
        result=QUOTE,
        **extra,
    )
    return audit(q1), led.events


def test_stale_result_announced_after_topic_change() -> None:
    aud, events = topic_session(delivered=False, bump_version=True)
    ok = score_task(TOPIC, {"taxi_booked": False}, aud, events)
    assert ok.check("stale_result_interception").passed is True
    assert ok.stale_deliveries == 0
    assert ok.check("delivery_correctness").passed is None

    aud, events = topic_session(delivered=True, bump_version=True)
    bad = score_task(TOPIC, {"taxi_booked": False}, aud, events)
    stale = bad.check("stale_result_interception")
    assert stale.passed is False and stale.value == 1 and stale.evidence == ["q1"]
    assert "version 1, delivered at version 2" in stale.reason
    assert bad.stale_deliveries == 1
    assert bad.check("delivery_correctness").passed is False
    assert bad.check("goal_completion").passed is True  # nothing was booked
    sl = task_failure_slice(stale, events)
    assert sl["layer"] == "playback" and sl["last_passing_gate"] == "heard"
    assert sl["chain"][0]["step"] == "delivery" and sl["chain"][0]["id"] == "r3"
    assert sl["chain"][-1]["id"] == "ask"
    assert task_failure_slice(bad.check("delivery_correctness"), events)["layer"] == "playback"


def test_stale_by_scenario_truth_when_agent_keeps_its_version() -> None:
    # the agent never bumped its task version: the scenario's topic change still counts
    aud, events = topic_session(delivered=True, bump_version=False)
    r = score_task(TOPIC, {"taxi_booked": False}, aud, events)
    stale = r.check("stale_result_interception")
    assert stale.passed is False
    assert "requested before the user changed the task (topic)" in stale.reason
    assert r.check("delivery_correctness").passed is False


# --------------------------------------------------------------------------- reconnect

_net_doc = load_scenario(SCENARIOS_DIR / "network-jitter-loss-drop.yaml").model_dump(mode="json")
RECONNECT = scenario(
    "network-jitter-loss-drop",
    segments=[
        {**_net_doc["segments"][0], "say": "Book a table for two at seven."},
        _net_doc["segments"][1],
    ],
    tools=[
        {
            "name": "book_table",
            "side_effect": True,
            "arguments": {
                "type": "object",
                "properties": {"party": {"type": "integer"}, "time": {"type": "string"}},
            },
        }
    ],
    business_truth={
        "expected_final_state": {"reservations": 1},
        "allowed_side_effects": ["book_table"],
    },
)
TABLE = {"party": 2, "time": "19:00"}


def reconnect_session(
    replay: bool, after_state: dict[str, Any] | None = None
) -> tuple[dict[str, Any], ToolAudit, list[Event]]:
    led = Ledger()
    led.user("ask", 500, 2300, "Book a table for two at seven.")
    led.add("response.created", 2500, response_id="r1", utterance_id="u-ask")
    led.state(2500, 1, "u-ask", fields=TABLE)
    led.add("tool.requested", 2600, task_id="t1", response_id="r1", data={"call_id": "c1"})
    led.add("session.disconnected", 3000, producer="harness", data={"state": {"reservations": 0}})
    state_after = {"reservations": 1} if after_state is None else after_state
    led.add("session.resumed", 4500, producer="harness", data={"state": state_after})
    first = call(
        "c1", "book_table", TABLE, 2600, 3200, result={"reservation_id": "R1", "reservations": 1}
    )
    calls = [first]
    if replay:
        led.add("tool.requested", 4600, task_id="t1", response_id="r1", data={"call_id": "c2"})
        led.add("tool.completed", 4900, task_id="t1", response_id="r1", data={"call_id": "c2"})
        calls.append(
            call(
                "c2",
                "book_table",
                TABLE,
                4600,
                4900,
                result={"reservation_id": "R2", "reservations": 2},
            )
        )
    return {"reservations": 2 if replay else 1}, audit(*calls), led.events


def test_reconnect_consistent_without_replay() -> None:
    state, aud, events = reconnect_session(replay=False)
    r = score_task(RECONNECT, state, aud, events)
    rc = r.check("reconnect_consistency")
    assert rc.passed is True, rc.reason
    assert r.check("goal_completion").passed is True
    assert r.check("duplicate_side_effects").passed is True


def test_reconnect_replaying_a_call() -> None:
    state, aud, events = reconnect_session(replay=True)
    r = score_task(RECONNECT, state, aud, events)
    rc = r.check("reconnect_consistency")
    assert rc.passed is False and "c2 replays c1" in rc.reason
    assert r.check("duplicate_side_effects").value == 1
    assert r.check("goal_completion").passed is False
    sl = task_failure_slice(rc, events)
    assert sl["layer"] == "control" and sl["outcome"]["call_id"] == "c2"


def test_reconnect_state_changed_without_a_write() -> None:
    state, aud, events = reconnect_session(replay=False, after_state={"reservations": 3})
    rc = score_task(RECONNECT, state, aud, events).check("reconnect_consistency")
    assert rc.passed is False and "without a write in between" in rc.reason
    state, aud, events = reconnect_session(replay=False, after_state={})
    rc = score_task(RECONNECT, state, aud, events).check("reconnect_consistency")
    assert rc.passed is False and "lost" in rc.reason


def test_reconnect_task_version_regression() -> None:
    led = Ledger()
    led.state(1000, 2, "u-ask", fields={"party": 3})
    led.add("session.disconnected", 2000, producer="harness")
    led.add("session.resumed", 3000, producer="harness")
    led.state(3100, 1, "u-ask", fields={"party": 2})
    rc = score_task(RECONNECT, {"reservations": 1}, None, led.events).check("reconnect_consistency")
    assert rc.passed is False and "went back from version 2 to 1" in rc.reason
    same = Ledger()
    same.state(1000, 2, "u-ask", fields={"party": 3})
    same.add("session.disconnected", 2000, producer="harness")
    same.add("session.resumed", 3000, producer="harness")
    same.state(3100, 2, "u-ask", fields={"party": "3"})  # same value, other spelling
    rc = score_task(RECONNECT, {"reservations": 1}, None, same.events).check(
        "reconnect_consistency"
    )
    assert rc.passed is True
    other = Ledger()
    other.state(1000, 2, "u-ask", fields={"party": 3})
    other.add("session.disconnected", 2000, producer="harness")
    other.add("session.resumed", 3000, producer="harness")
    other.state(3100, 2, "u-ask", fields={"party": 2})
    rc = score_task(RECONNECT, {"reservations": 1}, None, other.events).check(
        "reconnect_consistency"
    )
    assert rc.passed is False and "version 2 changed its fields" in rc.reason


# --------------------------------------------------------------------------- applicability, aggregate


def test_missing_evidence_is_unscored_not_failed() -> None:
    r = score_task(CANCEL, None, None, [])
    goal = r.check("goal_completion")
    assert goal.passed is None and goal.unscored and "final-state.json" in goal.reason
    assert r.check("duplicate_side_effects").unscored
    assert r.duplicate_side_effects is None
    agg = aggregate_tasks([r])
    assert agg["checks"]["goal_completion"]["n"] == 0
    assert agg["checks"]["goal_completion"]["unscored"] == 1
    assert agg["counts"]["duplicate_side_effects"]["sessions_counted"] == 0


def test_aggregate_rates_denominators_and_counts() -> None:
    results = []
    for kind in ("ok", "decision"):
        state, aud, events = correction_session(kind)
        results.append(score_task(CORRECTION, state, aud, events))
    led = cancel_ledger(agent_cancels=False)
    results.append(
        score_task(
            CANCEL,
            {"taxi_booked": True},
            audit(call("c1", "book_taxi", TAXI, 2800, 6800)),
            led.events,
        )
    )
    aud, events = topic_session(delivered=True, bump_version=True)
    results.append(score_task(TOPIC, {"taxi_booked": False}, aud, events))
    state, aud, events = reconnect_session(replay=True)
    results.append(score_task(RECONNECT, state, aud, events))

    agg = aggregate_tasks(results)
    assert agg["sessions"] == 5
    goal = agg["checks"]["goal_completion"]
    # ok correction and the topic change pass; the rest fail
    assert (goal["n"], goal["passed"], goal["failed"]) == (5, 2, 3)
    assert goal["rate"] == pytest.approx(0.4)
    assert (goal["ci_low"], goal["ci_high"]) == pytest.approx(wilson_interval(2, 5))
    param = agg["checks"]["parameter_consistency"]
    assert (param["n"], param["passed"], param["not_applicable"]) == (2, 1, 3)
    canc = agg["checks"]["cancellation"]
    assert (canc["n"], canc["passed"]) == (2, 1)  # the cancel and the topic change
    rec = agg["checks"]["reconnect_consistency"]
    assert (rec["n"], rec["passed"], rec["not_applicable"]) == (1, 0, 4)
    counts = agg["counts"]
    assert counts["duplicate_side_effects"] == {
        "total": 1,
        "sessions_with_any": 1,
        "sessions_counted": 5,
    }
    assert counts["stale_deliveries"]["total"] == 1
    assert counts["writes_after_stop"]["total"] == 1
    assert agg["metrics"]["grounded_completion"] == pytest.approx(0.4)
    assert agg["metrics"]["duplicate_side_effects"] == 1
    assert agg["all_checks"]["passed"] == 1 and agg["all_checks"]["n"] == 5
    assert set(agg["checks"]) == set(CHECKS)
    json.dumps(agg)
    json.dumps([r.to_dict() for r in results])


def test_slice_of_a_passing_check_has_no_layer() -> None:
    state, aud, events = correction_session("ok")
    sl = task_failure_slice(
        score_task(CORRECTION, state, aud, events).check("goal_completion"), events
    )
    assert sl["layer"] is None


def test_tool_choice_problems() -> None:
    led = booking_ledger()
    wrong_tool = call("c1", "cancel_taxi", {"booking_id": "X"}, 2800, 3000)
    r = score_task(BOOKING, {"taxi_booked": True}, audit(wrong_tool), led.events)
    tc = r.check("tool_choice")
    assert tc.passed is False
    assert any("not allowed" in p for p in tc.details["problems"])
    assert any("no committed write to an allowed tool" in p for p in tc.details["problems"])
    assert task_failure_slice(tc, led.events)["layer"] == "decision"
    bad_args = call("c1", "book_taxi", {"destination": 5}, 2800, 3000)
    tc = score_task(BOOKING, {"taxi_booked": True}, audit(bad_args), led.events).check(
        "tool_choice"
    )
    assert "missing required argument 'pickup_time'" in tc.reason
    assert "argument 'destination' is not string" in tc.reason
    ghost = call("c1", "teleport", {}, 2800, 3000, write=False)
    ok_book = call("c2", "book_taxi", TAXI, 2800, 3000)
    tc = score_task(BOOKING, {"taxi_booked": True}, audit(ghost, ok_book), led.events).check(
        "tool_choice"
    )
    assert "'teleport' is not in the scenario" in tc.reason
    explicit = score_task(
        BOOKING,
        {"taxi_booked": True},
        audit(ok_book),
        led.events,
        required_tools=["book_taxi", "taxi_quote"],
    ).check("tool_choice")
    assert explicit.passed is False and "'taxi_quote' was never called" in explicit.reason
    date_bad = call("c1", RESCHEDULE, {"date": "Aug 10"}, 6100, 6500)
    tc = score_task(CORRECTION, {"final_date": NEW}, audit(date_bad), []).check("tool_choice")
    assert "not an ISO date" in tc.reason


# --------------------------------------------------------------------------- formats


def test_value_normalization() -> None:
    assert values_equal("2026-08-10", dt.date(2026, 8, 10))
    assert values_equal(10, "10") and values_equal(10.0, "10") and values_equal("10.50", 10.5)
    assert values_equal(" Booked ", "booked")
    assert values_equal("2026-08-10T09:00:00+02:00", dt.datetime(2026, 8, 10, 7, 0, tzinfo=dt.UTC))
    assert not values_equal("2026-08-10", "2026-08-12")
    goal = score_task(CORRECTION, {"date": NEW}, None, []).check("goal_completion")
    assert goal.passed is False and goal.reason == "final_date: missing"
    assert not values_equal(True, "1")
    assert normalize_value({"a": [1.50, "X"]}) == {"a": ["1.5", "x"]}
    assert text_mentions("no wait, the tenth", "2026-08-10")
    assert text_mentions("make it the 21st", "2026-08-21")
    assert text_mentions("twenty-first of august", "2026-08-21")
    assert not text_mentions("the tent not the twelfth", "2026-08-10")


def good_audit_doc() -> dict[str, Any]:
    _, aud, _ = correction_session("ok")
    return aud.model_dump(mode="json")


def test_tool_audit_json_schema_accepts_and_refuses() -> None:
    schema = task_json_schema("tool-audit")
    assert schema["$id"] == "urn:voxassay:duplex:tool-audit:v1"
    validator = jsonschema.Draft202012Validator(schema)
    doc = good_audit_doc()
    validator.validate(doc)
    bad = json.loads(json.dumps(doc))
    bad["calls"][0]["status"] = "done"
    del bad["calls"][0]["requested_ns"]
    assert len(list(validator.iter_errors(bad))) == 2
    bad2 = json.loads(json.dumps(doc))
    bad2["calls"][0]["comitted"] = True  # typo: refused, not ignored
    assert not validator.is_valid(bad2)


def test_final_state_json_schema() -> None:
    validator = jsonschema.Draft202012Validator(task_json_schema("final-state"))
    assert validator.is_valid({"final_date": NEW, "_meta": {"exported_ns": 5, "source": "sqlite"}})
    assert validator.is_valid({"anything": [1, 2]})
    assert not validator.is_valid({"_meta": {"exported_ns": "soon"}})
    assert not validator.is_valid({"_meta": {"who": "me"}})
    assert not validator.is_valid(["not", "an", "object"])


def test_tool_audit_model_cross_checks() -> None:
    with pytest.raises(ValueError, match="duplicate call_id"):
        audit(call("c1", "x", {}, 1, 2), call("c1", "x", {}, 3, 4))
    with pytest.raises(ValueError, match="compensates unknown call"):
        audit(call("c1", "x", {}, 1, 2, compensates="nope"))
    with pytest.raises(ValueError, match="only meaningful for a side_effect"):
        call("c1", "x", {}, 1, 2, write=False, committed=True)
    with pytest.raises(ValueError, match="delivered_ns is before completed_ns"):
        call("c1", "x", {}, 1, 5, delivered_ms=3)
    with pytest.raises(ValueError, match="needs committed"):
        call("c1", "x", {}, 1, 5, status="compensated", committed=False)


def test_files_load_and_bundle_scores(tmp_path: Path) -> None:
    state, aud, events = correction_session("decision")
    (tmp_path / "tool-audit.json").write_text(aud.model_dump_json(indent=2))
    (tmp_path / "final-state.json").write_text(
        json.dumps({**state, "_meta": {"exported_ns": 9_000_000_000, "source": "test"}})
    )
    write_events(tmp_path / "events.jsonl", events)
    (tmp_path / "scenario.yaml").write_text((SCENARIOS_DIR / "correction-date.yaml").read_text())
    loaded_state, meta = load_final_state(tmp_path / "final-state.json")
    assert loaded_state == state and meta is not None and meta.source == "test"
    assert load_tool_audit(tmp_path / "tool-audit.json") == aud
    r = score_bundle(tmp_path)
    assert r.check("parameter_consistency").passed is False
    assert r.session_id == "s1"
    (tmp_path / "bad.json").write_text('{"session_id": "s1", "calls": [{"call_id": "c"}]}')
    with pytest.raises(InputError, match="invalid tool audit"):
        load_tool_audit(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(InputError, match="must be a JSON object"):
        load_final_state(tmp_path / "list.json")
    paths = export_task_schemas(tmp_path / "schemas")
    assert sorted(p.name for p in paths) == ["final-state.json", "tool-audit.json"]


def test_parameter_consistency_reads_dotted_truth_keys() -> None:
    sc = Scenario.model_validate(
        {
            "id": "dotted",
            "version": 1,
            "category": "correction_entity",
            "segments": [
                {
                    "id": "ask",
                    "role": "user",
                    "say": "Move it to the twelfth.",
                    "voice": "piper",
                    "at_ms": 500,
                    "intents": ["start"],
                },
                {
                    "id": "fix",
                    "role": "user",
                    "say": "No, the tenth.",
                    "voice": "piper",
                    "at_ms": 4000,
                    "intents": ["correction"],
                    "expected_task_action": "modify",
                },
            ],
            "tools": [{"name": "reschedule_appointment", "side_effect": True}],
            "business_truth": {
                "expected_final_state": {"appointments.A1.date": "2026-08-10"},
                "allowed_side_effects": ["reschedule_appointment"],
            },
        }
    )
    led = Ledger()
    led.user("ask", 500, 2000, "Move it to the twelfth.")
    led.user("fix", 4000, 5000, "No, the tenth.")
    args = {"appointment_id": "A1", "date": "2026-08-10"}
    calls = audit(call("c1", "reschedule_appointment", args, 5500, 5900))
    good = {"appointments": {"A1": {"date": "2026-08-10"}}}
    res = score_task(sc, good, calls, led.events)
    assert res.check("parameter_consistency").passed is True
    bad = {"appointments": {"A1": {"date": "2026-08-12"}}}
    res = score_task(sc, bad, calls, led.events)
    check = res.check("parameter_consistency")
    assert check.passed is False
    assert check.details["mismatches"][0]["got"] == "2026-08-12"


# --------------------------------------------------------------------------- agent utterance ids

ASK_TEXT = "Move my dentist appointment to August twelfth."


def truth(led: Ledger, segment: str, start_ms: float, end_ms: float, role: str = "user") -> None:
    """Scenario truth as the live harness writes it: the segment id is the utterance id."""
    data = {"segment_id": segment, "role": role}
    led.add("user.speech_started", start_ms, producer="harness", utterance_id=segment, data=data)
    led.add("user.speech_stopped", end_ms, producer="harness", utterance_id=segment, data=data)


def own_ids_session(
    kind: str, *, lag_ms: float = 0.0
) -> tuple[dict[str, Any], ToolAudit, list[Event]]:
    """``correction_session`` as a live agent logs it: its VAD, ASR, decisions and responses
    name its own utterances (u1, u2), never the scenario's segment ids; its events come
    ``lag_ms`` late. Truth: ask 0.5-2.5 s, correct 4.2-5.8 s; the agent's u2 runs from its
    VAD onset 4.26 s to its VAD end 6.2 s (+ lag): 1540 ms overlap with correct."""
    led = Ledger()
    truth(led, "ask", 500, 2500)
    led.add("vad.speech_started", 560, utterance_id="u1")
    led.add("vad.speech_stopped", 2900, utterance_id="u1")
    led.add("asr.final", 3000, utterance_id="u1", data={"text": ASK_TEXT})
    led.add("turn.decision", 3000, utterance_id="u1", data={"action": "respond"})
    led.add("response.created", 3000, response_id="r1", utterance_id="u1")
    led.state(3000, 1, "u1", fields={"date": OLD})
    led.add("playback.started", 3100, response_id="r1", playback_id="p1")
    truth(led, "correct", 4200, 5800)
    heard = MISHEARD if kind == "perception" else HEARD
    lag = lag_ms
    led.add("vad.speech_started", 4260 + lag, utterance_id="u2")
    led.add("turn.decision", 4300 + lag, utterance_id="u2", data={"action": "interrupt"})
    led.add("vad.speech_stopped", 6200 + lag, utterance_id="u2")
    led.add("asr.final", 6300 + lag, utterance_id="u2", data={"text": heard})
    led.add("response.created", 6400 + lag, response_id="r2", utterance_id="u2")
    if kind != "perception":
        led.state(6400 + lag, 2, "u2", fields={"date": NEW})
    if kind == "control":  # the old request's call, in flight across the correction
        led.tool("c0", "r1", 3500, 6600 + lag)
        calls = [call("c0", RESCHEDULE, {"date": OLD}, 3500, 6600 + lag)]
    else:
        led.tool("c1", "r2", 6500 + lag, 6700 + lag)
        version = 1 if kind == "perception" else 2
        calls = [call("c1", RESCHEDULE, {"date": OLD}, 6500 + lag, 6700 + lag, version=version)]
        calls[0] = calls[0].model_copy(update={"response_id": "r2"})
    return {"final_date": OLD}, audit(*calls), led.events


@pytest.mark.parametrize(
    ("kind", "layer", "gate", "last", "segment", "overlap"),
    [
        ("decision", "decision", "arguments", "in_flight_cancelled", "correct", 1540.0),
        ("perception", "perception", "heard", None, "correct", 1540.0),
        # the in-flight call answers the first request: u1 (0.56-2.9 s) vs ask (0.5-2.5 s)
        ("control", "control", "in_flight_cancelled", "understood", "ask", 1940.0),
    ],
)
def test_agent_utterance_ids_link_to_the_truth_segment_by_time(
    kind: str, layer: str, gate: str, last: str | None, segment: str, overlap: float
) -> None:
    state, aud, events = own_ids_session(kind)
    r = score_task(CORRECTION, state, aud, events)
    sl = task_failure_slice(r.check("parameter_consistency"), events)
    # the chain does not break on the agent's own ids: it reaches the scenario segment
    assert "chain breaks" not in sl["reason"]
    assert (sl["layer"], sl["first_failing_gate"]) == (layer, gate)
    utt = next(link for link in sl["chain"] if link["step"] == "utterance")
    assert utt["id"] == ("u1" if kind == "control" else "u2")
    inp = sl["chain"][-1]
    assert inp["step"] == "input" and inp["id"] == segment
    assert inp["event_type"] == "user.speech_started"
    assert inp["link"] == "time" and inp["overlap_ms"] == pytest.approx(overlap)
    assert "linked by time" in inp["note"] and f"by {overlap:.0f} ms" in inp["note"]
    assert inp["also"] == []
    # the heard gate found the agent's transcript of the correction through the same link
    heard = next(g for g in sl["gates"] if g["gate"] == "heard")
    assert heard["passed"] is (kind != "perception")
    assert "u2" in heard["note"] and "linked by time" in heard["note"]
    # the last passing gate comes before the first failing one (none for a mishearing)
    assert sl["last_passing_gate"] == last


def test_largest_overlap_wins_and_the_others_are_named() -> None:
    # one agent utterance runs across the end of ask into most of correct: correct wins
    led = Ledger()
    truth(led, "ask", 500, 2500)
    truth(led, "correct", 2700, 5800)
    led.add("vad.speech_started", 2000, utterance_id="u1")
    led.add("asr.final", 6000, utterance_id="u1", data={"text": f"{ASK_TEXT} {HEARD}"})
    led.add("response.created", 6100, response_id="r2", utterance_id="u1")
    led.tool("c1", "r2", 6200, 6300)
    c1 = call("c1", RESCHEDULE, {"date": OLD}, 6200, 6300, version=2, response="r2")
    r = score_task(CORRECTION, {"final_date": OLD}, audit(c1), led.events)
    sl = task_failure_slice(r.check("parameter_consistency"), led.events)
    inp = sl["chain"][-1]
    # no vad.speech_stopped: the span ends at its asr.final (6.0 s); 3100 ms vs 500 ms
    assert (inp["id"], inp["overlap_ms"]) == ("correct", 3100.0)
    assert inp["also"] == [
        {"utterance_id": "u1", "segment_id": "ask", "link": "time", "overlap_ms": 500.0}
    ]
    assert "also overlaps ask (500 ms)" in inp["note"]


def test_no_overlapping_segment_still_breaks_the_chain_with_the_reason() -> None:
    # the agent's events come 3 s late: its u2 (7.26-9.2 s) overlaps no truth span
    state, aud, events = own_ids_session("decision", lag_ms=3000)
    r = score_task(CORRECTION, state, aud, events)
    sl = task_failure_slice(r.check("parameter_consistency"), events)
    assert sl["layer"] == "unknown" and sl["root_cause"] == "unknown root cause"
    assert sl["reason"].startswith("chain breaks: utterance u2 (7.260-9.200 s) overlaps no ")
    assert "user segment's truth span" in sl["reason"]
    assert "the latest user segment before it, correct, ended 1.460 s before" in sl["reason"]
    assert sl["chain"][-1]["step"] == "utterance"  # walked as far as the agent's utterance
    # without any VAD/ASR span the agent utterance cannot be placed at all
    led = Ledger()
    truth(led, "ask", 500, 2500)
    led.add("response.created", 2700, response_id="r1", utterance_id="u9")
    led.tool("c1", "r1", 2800, 2900)
    c1 = call("c1", RESCHEDULE, {"date": OLD}, 2800, 2900)
    r = score_task(CORRECTION, {"final_date": OLD}, audit(c1), led.events)
    sl = task_failure_slice(r.check("parameter_consistency"), led.events)
    assert sl["reason"].startswith("chain breaks: utterance u9 has no user.speech_started")
    assert "no vad.speech_started or asr.partial" in sl["reason"]


def test_only_user_segments_are_linked() -> None:
    led = Ledger()
    truth(led, "ask", 500, 2500)
    truth(led, "tv", 3000, 5000, role="bystander")
    led.add("vad.speech_started", 3100, utterance_id="u2")
    led.add("vad.speech_stopped", 4900, utterance_id="u2")
    led.add("response.created", 5000, response_id="r2", utterance_id="u2")
    led.tool("c1", "r2", 5100, 5200)
    c1 = call("c1", RESCHEDULE, {"date": OLD}, 5100, 5200, response="r2")
    r = score_task(CORRECTION, {"final_date": OLD}, audit(c1), led.events)
    sl = task_failure_slice(r.check("parameter_consistency"), led.events)
    assert "chain breaks" in sl["reason"]
    assert "it overlaps only bystander segment tv" in sl["reason"]


def test_links_by_id_unless_the_times_contradict_it() -> None:
    from voxassay.suites.duplex.scoring.task_slice import UtteranceLinks

    led = Ledger()
    truth(led, "u1", 500, 2500)
    truth(led, "u2", 4000, 6000)
    # a harness that shares ids, no VAD span: linked by id
    led.add("asr.final", 2600, utterance_id="u1", data={"text": "x"})
    # the agent's own "u2" runs 0.55-2.9 s: it heard segment u1, whatever its name says
    led.add("vad.speech_started", 550, utterance_id="u2")
    led.add("vad.speech_stopped", 2900, utterance_id="u2")
    links = UtteranceLinks((e, e.monotonic_ns / 1e9) for e in led.events)
    (by_id,), _ = links.segments_for("u1")
    assert (by_id.segment_id, by_id.how, by_id.overlap_ms) == ("u1", "id", None)
    found, _ = links.segments_for("u2")
    assert [(lk.segment_id, lk.how, lk.overlap_ms) for lk in found] == [("u1", "time", 1950.0)]
    # from the segment's side: who heard u1? the id holder first, then by time
    assert [(lk.utterance_id, lk.how) for lk in links.utterances_for("u1")] == [
        ("u1", "id"),
        ("u2", "time"),
    ]
    # segment u2 was heard by nobody: the agent's "u2" lies elsewhere in time
    assert links.utterances_for("u2") == []
