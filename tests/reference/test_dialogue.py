"""The dialogue manager end to end at text level: flows, business truth, and the failure
switches each caught by the task check named for them (and not by the others)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reference.sim import BOOK_TEXT, SEED, Sim, Turn, desk, make_scenario
from voxassay.contracts.duplex.business import ToolAudit
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.reference.clinic import tool_specs
from voxassay.reference.db import ClinicDB
from voxassay.reference.dialogue import (
    HOURS_TEXT,
    POLICY_TEXT,
    DeskEvent,
    DialogueManager,
    Say,
)
from voxassay.suites.duplex.scoring.task_context import TaskResult

EMPTY_BOOK: dict[str, Any] = {**SEED, "appointments": []}
BOOKED_TRUTH = {
    "final_date": "2026-08-10",
    "final_time": "10:00",
    "contact": "555 0100",
    "booked_count": 1,
}


def checks(result: TaskResult) -> dict[str, bool | None]:
    return {c.name: c.passed for c in result.checks}


def says(actions: list[Any]) -> list[Say]:
    return [a for a in actions if isinstance(a, Say)]


def events(actions: list[Any], event_type: str) -> list[DeskEvent]:
    return [a for a in actions if isinstance(a, DeskEvent) and a.event_type == event_type]


# --------------------------------------------------------------------------- flows


def test_booking_end_to_end() -> None:
    turns = [Turn("ask", BOOK_TEXT, 500, 3000)]
    sc = make_scenario(turns, BOOKED_TRUTH, ["book_appointment"], initial_state=EMPTY_BOOK)
    sim = Sim(desk("careful", EMPTY_BOOK)).run(turns, 8000)
    texts = sim.texts()
    assert texts[0].startswith("Great, I'm booking a cleaning for Sam Lee on Monday, August 10th")
    assert "You're all set, Sam Lee" in texts[1] and "5 5 5, 0 1 0 0" in texts[1]
    result = sim.score(sc)
    assert result.passed, [c.reason for c in result.failures]
    got = checks(result)
    assert got["goal_completion"] and got["tool_choice"] and got["delivery_correctness"]
    (call,) = sim.audit().calls
    assert call.tool == "book_appointment" and call.committed and call.task_version == 1
    assert call.idempotency_key == "s1/t1/w1"
    announce = next(t for t, s in sim.says if s.kind == "announce")
    assert call.delivered_ns == round((announce + 300) * 1e6)  # at its playback start
    state = sim.dm.export_final_state()
    assert state["appointments"]["A1"]["name"] == "Sam Lee" and state["_meta"]["exported_ns"]
    kinds = [e.event_type for e in sim.events if e.producer == "agent"]
    assert kinds.index("task.state") < kinds.index("tool.requested") < kinds.index("tool.completed")


def test_booking_asks_for_what_is_missing_then_offers_free_times() -> None:
    dm = desk("careful", EMPTY_BOOK)
    (ask,) = says(dm.on_user_text("Hi, I'd like to book a cleaning please", "u1", 0))
    assert ask.kind == "clarify" and "What day" in ask.text
    (check,) = says(dm.on_user_text("Do you have anything on the 10th?", "u2", 2000))
    assert "Let me check what we have on Monday, August 10th" in check.text
    (offer,) = says(dm.tick(3500))
    assert offer.kind == "announce"
    assert "9 a.m., 10 a.m. and 2:30 p.m." in offer.text
    (name,) = says(dm.on_user_text("two thirty works", "u3", 6000))
    assert "What name" in name.text
    (contact,) = says(dm.on_user_text("Sam Lee", "u4", 8000))
    assert "phone number" in contact.text
    (booking,) = says(dm.on_user_text("it's five five five oh one oh oh", "u5", 10000))
    assert "2:30 p.m." in booking.text
    dm.tick(11000)
    state = dm.export_final_state()
    assert (state["final_date"], state["final_time"], state["contact"]) == (
        "2026-08-10",
        "14:30",
        "555 0100",
    )
    ToolAudit.model_validate(dm.export_tool_audit())


def test_reschedule_with_a_correction_after_the_write() -> None:
    turns = [
        Turn("ask", "Can you move my appointment to August twelfth?", 500, 2000),
        Turn(
            "correct",
            "No wait, the tenth, not the twelfth.",
            4300,
            1800,
            intents=["correction", "interrupt"],
            task_action="modify",
        ),
    ]
    sc = make_scenario(
        turns,
        {"final_date": "2026-08-10", "final_time": "10:00"},
        ["reschedule_appointment"],
        category="correction_entity",
    )
    sim = Sim(desk("careful")).run(turns, 10000)
    result = sim.score(sc)
    assert result.passed, [c.reason for c in result.failures]
    assert checks(result)["parameter_consistency"] is True
    calls = sim.audit().calls
    assert [c.arguments["date"] for c in calls] == ["2026-08-12", "2026-08-10"]
    assert [c.task_version for c in calls] == [1, 2]
    assert any("Monday, August 10th instead of Wednesday, August 12th" in t for t in sim.texts())
    states = [e.data for e in sim.events if e.event_type == "task.state"]
    assert next(s["action"] for s in states if s["version"] == 2) == "modify"


def _correction_during_write(policy: str) -> tuple[Sim, TaskResult]:
    turns = [
        Turn("ask", "Can you move my appointment to August twelfth?", 500, 2000),
        Turn(
            "correct",
            "Sorry, I meant August tenth.",
            3500,
            1500,
            intents=["correction"],
            task_action="modify",
        ),
    ]
    sc = make_scenario(
        turns,
        {"final_date": "2026-08-10"},
        ["reschedule_appointment"],
        category="correction_entity",
    )
    dm = desk(policy, latencies={"reschedule_appointment": 4000})
    sim = Sim(dm).run(turns, 16000)
    return sim, sim.score(sc)


def test_a_correction_drops_the_write_in_flight_careful() -> None:
    sim, result = _correction_during_write("careful")
    assert result.passed, [c.reason for c in result.failures]
    first, second = sim.audit().calls
    assert first.status == "cancelled" and not first.committed and first.delivered_ns is None
    assert second.committed and second.arguments["date"] == "2026-08-10"


def test_naive_delivers_the_stale_write_result() -> None:
    sim, result = _correction_during_write("careful+delivers_stale_results")
    got = checks(result)
    assert got["stale_result_interception"] is False
    assert result.stale_deliveries == 1
    assert got["goal_completion"] and got["parameter_consistency"]  # the end state is right
    assert got["duplicate_side_effects"] and got["write_after_stop"] in (True, None)
    assert any("Wednesday, August 12th" in t and "Done" in t for t in sim.texts())


def test_cancel_asks_first_when_careful() -> None:
    dm = desk("careful")
    (q,) = says(dm.on_user_text("Please cancel my appointment.", "u1", 0))
    assert q.kind == "confirm" and "Just to confirm" in q.text and "August 3rd" in q.text
    assert dm.db.calls() == []
    assert says(dm.on_user_text("Mm hmm.", "u2", 3000))  # an affirmative backchannel confirms
    dm.tick(5000)
    assert dm.export_final_state()["appointments"]["A1"]["status"] == "cancelled"

    kept = desk("careful")
    kept.on_user_text("Please cancel my appointment.", "u1", 0)
    (a,) = says(kept.on_user_text("No.", "u2", 3000))
    assert "leave your appointment" in a.text
    kept.tick(6000)
    assert kept.export_final_state()["booked_count"] == 1 and kept.db.calls() == []

    naive = desk("naive")
    (done,) = says(naive.on_user_text("Please cancel my appointment.", "u1", 0))
    assert "I'm cancelling your appointment" in done.text
    naive.tick(2000)
    assert naive.export_final_state()["booked_count"] == 0


def test_a_confirmation_cut_before_it_was_heard_is_asked_again() -> None:
    dm = desk("careful")
    (q,) = says(dm.on_user_text("Please cancel my appointment.", "u1", 0))
    (ev,) = events(dm.on_heard(q.response_id, 600, 5000, 1500), "history.updated")
    assert ev.data["action"] == "truncate"
    (again,) = says(dm.on_user_text("Yes.", "u2", 2000))
    assert "just to be sure" in again.text and dm.db.calls() == []
    dm.on_user_text("Yes.", "u3", 5000)
    dm.tick(7000)
    assert dm.export_final_state()["booked_count"] == 0
    # keeping the unheard text, the agent believes the question was heard
    naive = desk("careful+keeps_unheard_text")
    (q2,) = says(naive.on_user_text("Please cancel my appointment.", "u1", 0))
    naive.on_heard(q2.response_id, 600, 5000, 1500)
    naive.on_user_text("Yes.", "u2", 2000)
    assert [c["tool"] for c in naive.db.calls()] == ["cancel_appointment"]


def test_questions_are_answered_while_a_task_runs() -> None:
    dm = desk("careful", latencies={"check_availability": 3000})
    dm.on_user_text("Do you have any openings on August twelfth?", "u1", 0)
    (park,) = says(dm.on_user_text("Also, where can I park?", "u2", 800))
    assert "parking" in park.text and dm.tasks["t1"].status == "active"
    (offer,) = says(dm.tick(3100))
    assert "Wednesday, August 12th" in offer.text and "4 p.m." in offer.text
    dm.on_user_text("I'll take two p.m., my name is Sam Lee, my number is 555 0100.", "u3", 6000)
    dm.tick(8000)
    assert dm.export_final_state()["final_time"] == "14:00"


@pytest.mark.parametrize("text", [POLICY_TEXT, HOURS_TEXT])
def test_long_answers_can_be_cut_at_5_s(text: str) -> None:
    assert len(text.split()) >= 35


def test_answers_and_clarifications() -> None:
    dm = desk("careful")
    (a,) = says(dm.on_user_text("When is my appointment?", "u1", 0))
    assert a.text == "Your appointment is on Monday, August 3rd at 10 a.m."
    (b,) = says(dm.on_user_text("What's your cancellation policy?", "u2", 1000))
    assert b.text == POLICY_TEXT
    (c,) = says(dm.on_user_text("Did you remember to feed the cat?", "u3", 2000))
    assert c.kind == "clarify"
    assert says(dm.on_user_text("Uh-huh.", "u4", 3000)) == []
    assert says(desk("careful+answers_backchannels").on_user_text("Uh-huh.", "u1", 0))
    (d,) = says(dm.on_user_text("Stop, never mind.", "u5", 4000))
    assert d.text.startswith("Okay")
    assert dm.db.calls() == []


def test_my_appointment_is_the_callers() -> None:
    seed = {
        **SEED,
        "appointments": [
            *SEED["appointments"],
            {
                "id": "A2",
                "name": "Maria Gomez",
                "date": "2026-08-05",
                "time": "09:00",
                "contact": "555 0177",
            },
        ],
    }
    dm = desk("careful", seed)
    (ask,) = says(dm.on_user_text("When is my appointment?", "u1", 0))
    assert "What name" in ask.text  # two patients: ask, don't guess
    (a,) = says(dm.on_user_text("Maria Gomez", "u2", 1000))
    assert a.text == "Your appointment is on Wednesday, August 5th at 9 a.m."
    other = desk("careful")
    (b,) = says(other.on_user_text("Hi, this is Maria Gomez. When is my appointment?", "u1", 0))
    assert "What name" in b.text  # the only booking is Sam Lee's
    (c,) = says(desk("careful").on_user_text("Greet me. When is my appointment?", "u1", 0))
    assert "August 3rd" in c.text
    assert says(desk("careful").greet(0))[0].text.startswith("Hello, thanks for calling")


def test_a_request_split_by_a_pause() -> None:
    dm = desk("careful")
    (q,) = says(dm.on_user_text("Can you move my appointment to", "u1", 0))
    assert "What day would you like to move it to?" in q.text
    dm.on_user_text("August twelfth?", "u2", 1500)
    dm.tick(3000)
    assert dm.export_final_state()["final_date"] == "2026-08-12"
    dm2 = desk("careful")
    dm2.on_user_text("My new number is", "u1", 0)
    dm2.on_user_text("555 0199.", "u2", 1500)
    dm2.tick(3000)
    assert dm2.export_final_state()["appointments"]["A1"]["contact"] == "555 0199"


def test_the_same_request_again_does_not_write_twice() -> None:
    dm = desk("careful")
    dm.on_user_text("Can you move my appointment to August twelfth?", "u1", 0)
    dm.on_user_text("Can you move my appointment to August twelfth?", "u2", 400)
    dm.tick(3000)
    assert [c["tool"] for c in dm.db.calls()] == ["reschedule_appointment"]


# --------------------------------------------------------------------------- failure switches


def _stop_during_booking(policy: str, *, vad: bool = True) -> tuple[Sim, TaskResult]:
    """The booking takes 2 s; "Actually, cancel that" starts before it would commit and is
    transcribed after (tools-cancel-while-booking)."""
    turns = [
        Turn("ask", BOOK_TEXT, 500, 3000),
        Turn(
            "cancel", "Actually, cancel that.", 5300, 1000, intents=["cancel"], task_action="cancel"
        ),
    ]
    sc = make_scenario(
        turns,
        {"booked_count": 0},
        ["book_appointment", "cancel_appointment"],
        initial_state=EMPTY_BOOK,
    )
    dm = desk(policy, EMPTY_BOOK, latencies={"book_appointment": 2000})
    sim = Sim(dm, vad=vad).run(turns, 12000)
    return sim, sim.score(sc)


def test_stop_drops_the_pending_write_careful() -> None:
    sim, result = _stop_during_booking("careful")
    assert result.passed, [c.reason for c in result.failures]
    (call,) = sim.audit().calls
    assert call.status == "cancelled" and not call.committed
    assert result.writes_after_stop == 0
    assert any("Nothing has been booked" in t for t in sim.texts())
    cancel_state = [
        e for e in sim.events if e.event_type == "task.state" and e.data["status"] == "cancelled"
    ]
    assert cancel_state and cancel_state[0].utterance_id == "u-cancel"


def test_writes_after_stop_is_caught_by_write_after_stop_only() -> None:
    sim, result = _stop_during_booking("careful+writes_after_stop")
    got = checks(result)
    assert got["write_after_stop"] is False and result.writes_after_stop == 1
    # the write was undone afterwards: the end state and the other checks hold
    assert got["goal_completion"] and got["cancellation"] and got["compensation"]
    assert got["duplicate_side_effects"] and got["stale_result_interception"] in (True, None)
    book, undo = sim.audit().calls
    assert book.status == "compensated" and undo.compensates == book.call_id
    _, naive = _stop_during_booking("naive")
    assert checks(naive)["write_after_stop"] is False


def test_without_vad_the_write_commits_before_the_stop_is_understood() -> None:
    """Why the audio layer must call on_user_speech: careful holds writes only while it
    knows the user is speaking."""
    _, result = _stop_during_booking("careful", vad=False)
    assert checks(result)["write_after_stop"] is False


def test_stop_after_a_committed_booking_compensates() -> None:
    turns = [
        Turn("ask", BOOK_TEXT, 500, 3000),
        Turn(
            "cancel", "Actually, cancel that.", 7000, 1000, intents=["cancel"], task_action="cancel"
        ),
    ]
    sc = make_scenario(
        turns,
        {"booked_count": 0, "appointments.A1.status": "cancelled"},
        ["book_appointment", "cancel_appointment"],
        initial_state=EMPTY_BOOK,
    )
    sim = Sim(desk("careful", EMPTY_BOOK)).run(turns, 12000)
    result = sim.score(sc)
    assert result.passed, [c.reason for c in result.failures]
    got = checks(result)
    assert got["compensation"] and got["cancellation"] and got["write_after_stop"]
    book, undo = sim.audit().calls
    assert (book.status, undo.tool, undo.compensates) == ("compensated", "cancel_appointment", "c1")
    assert any("cancelling the booking I just made" in t for t in sim.texts())


def _drop_during_booking(policy: str) -> tuple[Sim, TaskResult]:
    """The link drops 300 ms after the booking call for 2.5 s; the write commits on the
    backend while it is down (recovery-disconnect-during-write)."""
    turns = [
        Turn("ask", BOOK_TEXT, 500, 3000),
        Turn("question", "When is my appointment?", 7600, 1200),
    ]
    sc = make_scenario(
        turns,
        BOOKED_TRUTH,
        ["book_appointment"],
        category="recovery_degradation",
        initial_state=EMPTY_BOOK,
    )
    dm = desk(policy, EMPTY_BOOK, latencies={"book_appointment": 1500})
    sim = Sim(dm)

    def drop(t: float) -> None:
        sim._add("session.disconnected", t, producer="harness")
        sim.handle(dm.on_connection(False, t), t)

    def back(t: float) -> None:
        sim._add("session.resumed", t, producer="harness")
        sim.handle(dm.on_connection(True, t), t)

    sim.at(4100, drop)
    sim.at(6600, back)
    sim.run(turns, 12000)
    return sim, sim.score(sc)


def test_a_retry_after_a_drop_reuses_the_idempotency_key_careful() -> None:
    sim, result = _drop_during_booking("careful")
    assert result.passed, [c.reason for c in result.failures]
    first, retry = sim.audit().calls
    assert first.status == "failed" and first.committed  # ran, but the answer was lost
    assert retry.idempotency_key == first.idempotency_key and not retry.committed
    assert retry.meta["idempotent_replay_of"] == first.call_id
    assert retry.delivered_ns is not None
    assert any("cut off" in t for t in sim.texts())
    assert any("Your appointment is on Monday, August 10th" in t for t in sim.texts())


def test_repeats_side_effects_is_caught_by_duplicate_side_effects() -> None:
    sim, result = _drop_during_booking("careful+repeats_side_effects")
    got = checks(result)
    assert got["duplicate_side_effects"] is False and result.duplicate_side_effects == 1
    assert got["reconnect_consistency"] is False  # the replay across the drop, same evidence
    assert got["write_after_stop"] in (True, None) and got["stale_result_interception"]
    first, retry = sim.audit().calls
    assert retry.idempotency_key != first.idempotency_key and retry.committed
    assert sim.dm.export_final_state()["booked_count"] == 2


def _stale_availability(policy: str) -> tuple[Sim, TaskResult]:
    """A 3 s check for the 10th; the caller switches to the 12th while it runs; only the 12th
    has 4 p.m. (tools-stale-availability)."""
    turns = [
        Turn("ask", "Do you have any openings on August tenth?", 500, 2500),
        Turn(
            "switch",
            "Sorry, I meant August twelfth.",
            4800,
            1500,
            intents=["correction"],
            task_action="modify",
        ),
        Turn(
            "take", "I'll take four p.m., my name is Sam Lee, my number is 555 0100.", 14000, 3000
        ),
    ]
    sc = make_scenario(
        turns,
        {
            "final_date": "2026-08-12",
            "final_time": "16:00",
            "contact": "555 0100",
            "booked_count": 1,
        },
        ["book_appointment"],
        initial_state=EMPTY_BOOK,
    )
    dm = desk(policy, EMPTY_BOOK, latencies={"check_availability": 3000})
    sim = Sim(dm).run(turns, 22000)
    return sim, sim.score(sc)


def test_careful_drops_the_stale_availability() -> None:
    sim, result = _stale_availability("careful")
    assert result.passed, [c.reason for c in result.failures]
    old, new, book = sim.audit().calls
    assert book.tool == "book_appointment" and book.arguments["time"] == "16:00"
    assert old.arguments == {"date": "2026-08-10"} and old.delivered_ns is None
    assert new.arguments == {"date": "2026-08-12"} and new.delivered_ns is not None
    assert not any("Monday, August 10th I have" in t for t in sim.texts())


@pytest.mark.parametrize("policy", ["careful+delivers_stale_results", "naive"])
def test_delivering_the_stale_availability_is_caught(policy: str) -> None:
    sim, result = _stale_availability(policy)
    got = checks(result)
    assert got["stale_result_interception"] is False
    assert any("On Monday, August 10th I have" in t for t in sim.texts())
    if policy != "naive":
        assert got["goal_completion"] and got["duplicate_side_effects"]
        assert got["write_after_stop"] in (True, None)


# --------------------------------------------------------------------------- history


def test_history_is_truncated_to_what_was_heard() -> None:
    dm = desk("careful")
    (say,) = says(dm.on_user_text("What's your cancellation policy?", "u1", 0))
    words = POLICY_TEXT.split()
    (ev,) = events(dm.on_heard(say.response_id, 2000, 10000, 2500), "history.updated")
    kept = words[: len(words) * 2000 // 10000]
    assert ev.data["action"] == "truncate" and ev.data["text_kept"] == " ".join(kept)
    assert ev.data["heard_until_ms"] == 2000 and ev.response_id == say.response_id
    assert dm.history[-1] == ("assistant", " ".join(kept))
    assert dm.history[0] == ("user", "What's your cancellation policy?")


def test_history_uses_word_times_when_given() -> None:
    dm = desk("careful")
    (say,) = says(dm.on_user_text("What are your opening hours?", "u1", 0))
    timed = [(w, i * 300.0, i * 300.0 + 250.0) for i, w in enumerate(HOURS_TEXT.split())]
    dm.set_word_times(say.response_id, timed)
    (ev,) = events(dm.on_heard(say.response_id, 1000, 20000, 1500), "history.updated")
    assert ev.data["text_kept"] == "We're open Monday"  # words that ended by 1000 ms
    assert ev.data["words_kept"] == 3


def test_keeps_unheard_text_keeps_the_whole_response() -> None:
    dm = desk("careful+keeps_unheard_text")
    (say,) = says(dm.on_user_text("What's your cancellation policy?", "u1", 0))
    (ev,) = events(dm.on_heard(say.response_id, 2000, 10000, 2500), "history.updated")
    assert ev.data["action"] == "keep" and ev.data["text_kept"] == POLICY_TEXT
    assert dm.history[-1] == ("assistant", POLICY_TEXT)


def test_nothing_heard_means_nothing_delivered() -> None:
    dm = desk("careful", EMPTY_BOOK)
    dm.on_user_text(BOOK_TEXT, "u1", 0)
    (announce,) = says(dm.tick(900))
    assert dm.db.call("c1")["delivered_ns"] == 900_000_000
    dm.on_heard(announce.response_id, 0, 6000, 1000)
    assert "delivered_ns" not in dm.db.call("c1")


# --------------------------------------------------------------------------- faults and scenarios


def _scenario_with_faults() -> Scenario:
    tools = tool_specs()
    for t in tools:
        if t["name"] == "check_availability":
            t["results"] = [{"error": "availability service unavailable"}]
            t["latency_ms"] = 600
        if t["name"] == "book_appointment":
            t["latency_ms"] = 20000
    base = make_scenario(
        [Turn("ask", "Do you have any openings on August tenth?", 500)],
        {"appointments.A1.date": "2026-08-03", "booked_count": 1},
        [],
    )
    return base.model_copy(update={"tools": [type(base.tools[0]).model_validate(t) for t in tools]})


def test_from_scenario_seeds_latencies_and_faults() -> None:
    sc = _scenario_with_faults()
    dm = DialogueManager.from_scenario(sc, "careful", "s9")
    assert dm.latencies["check_availability"] == 600 and dm.latencies["book_appointment"] == 20000
    assert dm.db.appointment("A1") is not None
    dm.on_user_text("Do you have any openings on August tenth?", "u1", 0)
    acts = dm.tick(700)
    (sorry,) = says(acts)
    assert "isn't working" in sorry.text and "nothing has been changed" in sorry.text
    (refuse,) = [e for e in events(acts, "task.state") if e.data["action"] == "refuse"]
    assert refuse.data["status"] == "cancelled"
    audit = ToolAudit.model_validate(dm.export_tool_audit())
    assert audit.session_id == "s9" and audit.calls[0].error == "availability service unavailable"


def test_a_slow_call_gets_one_notice() -> None:
    dm = desk("careful", EMPTY_BOOK, latencies={"book_appointment": 20000})
    dm.on_user_text(BOOK_TEXT, "u1", 0)
    notices = [s.text for t in range(0, 15000, 20) for s in says(dm.tick(t))]
    assert notices == ["Sorry, this is taking a little longer than usual. I'm still working on it."]
    (a,) = says(dm.on_user_text("When is my appointment?", "u2", 16000))
    assert "I'm still booking your appointment for Monday, August 10th at 10 a.m." in a.text


def test_runs_are_deterministic() -> None:
    def run() -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
        sim, _ = _stale_availability("naive")
        return (
            [(t, s) for t, s in sim.says],
            sim.dm.export_tool_audit(),
            sim.dm.export_final_state(),
        )

    assert run() == run()


def test_exports_validate_for_every_policy_on_a_busy_session() -> None:
    for policy in ("careful", "naive", "careful+writes_after_stop,repeats_side_effects"):
        dm = DialogueManager(ClinicDB(SEED), policy, "busy")
        t = 0.0
        for text in [
            BOOK_TEXT,
            "No wait, the eleventh.",
            "My number is 555 0199.",
            "Actually, cancel that.",
            "Can you move my appointment to August twelfth at 4 p.m.?",
            "Please cancel my appointment.",
            "Yes.",
            "Hold on.",
            "What are your opening hours?",
        ]:
            dm.on_user_text(text, None, t)
            t += 700.0
            dm.tick(t)
        dm.tick(t + 20000)
        ToolAudit.model_validate(dm.export_tool_audit())
        assert set(dm.export_final_state()) >= {"appointments", "final_date", "booked_count"}
