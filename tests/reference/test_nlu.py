"""Rule-based understanding of ASR text: intents and values on tiny.en-like phrasings."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reference.sim import desk
from voxassay.reference.dialogue import DialogueManager
from voxassay.reference.dialogue_base import resolve_time
from voxassay.reference.phrasing import say_date, say_phone, say_time
from voxassay.reference.understanding import understand

BOOK = (
    "I'd like to book a cleaning on August tenth at ten a.m., my name is Sam Lee, "
    "my number is 555 0100"
)

INTENTS: list[tuple[str, str]] = [
    (BOOK, "book"),
    (
        "i'd like to book a cleaning on august 10th at 10am my name is sam lee my number is 5550100",
        "book",
    ),
    ("Can I make an appointment for Tuesday?", "book"),
    ("Hi, I need a checkup.", "book"),
    ("Can you move my appointment to August twelfth?", "reschedule"),
    ("can you move my appointment to august 12th", "reschedule"),
    ("I need to reschedule to the 14th at 3 p.m.", "reschedule"),
    ("Sorry, can you move my appointment to August twelfth?", "reschedule"),
    ("Please cancel my appointment.", "cancel_appointment"),
    ("Okay, please cancel my appointment.", "cancel_appointment"),
    ("I need to cancel my booking on the 3rd.", "cancel_appointment"),
    ("Can you update my phone number to 555 0199?", "update_contact"),
    ("My new number is 555 0199.", "update_contact"),
    ("My new number is", "update_contact"),
    ("Do you have any openings on August tenth?", "availability"),
    ("What times are free on the 12th?", "availability"),
    ("When is my appointment?", "ask_appointment"),
    ("when's my appointment", "ask_appointment"),
    ("Wait, when is my appointment?", "ask_appointment"),
    ("What are your opening hours?", "ask_hours"),
    ("What time do you close on Saturday?", "ask_hours"),
    ("What's your cancellation policy?", "ask_policy"),
    ("whats your cancellation policy", "ask_policy"),
    ("Is there a fee if I cancel?", "ask_policy"),
    ("Also, where can I park?", "ask_location"),
    ("Sorry, where can I park?", "ask_location"),
    ("What's your address?", "ask_location"),
    ("No wait, the tenth, not the twelfth.", "correction"),
    ("no wait the 10th not the 12th", "correction"),
    ("Sorry, I meant Tuesday the 11th.", "correction"),
    ("Not the twelfth, the tenth.", "correction"),
    ("Sorry, make that ten a.m.", "correction"),
    ("Sorry, I meant August twelfth.", "correction"),
    ("No, my number is 555 0199.", "correction"),
    ("My number is five five five zero one nine nine.", "inform"),
    ("I'll take nine a.m., please.", "inform"),
    ("555 0199.", "inform"),
    ("August twelfth?", "inform"),
    ("Stop.", "stop"),
    ("Stop, never mind.", "stop"),
    ("Cancel that.", "stop"),
    ("Actually, cancel that.", "stop"),
    ("Actually, cancel that, I'll take the train.", "stop"),
    ("Never mind.", "stop"),
    ("nevermind", "stop"),
    ("Hold on, don't.", "stop"),
    ("Don't.", "stop"),
    ("Forget it.", "stop"),
    ("Hold on.", "hold"),
    ("Wait.", "hold"),
    ("One moment, please.", "hold"),
    ("Yes.", "confirm"),
    ("Yes, please.", "confirm"),
    ("Yeah, go ahead.", "confirm"),
    ("That's right.", "confirm"),
    ("Correct.", "confirm"),
    ("No.", "deny"),
    ("No, thanks.", "deny"),
    ("Uh-huh.", "backchannel"),
    ("Uh huh.", "backchannel"),
    ("Mm-hmm.", "backchannel"),
    ("Mm hmm.", "backchannel"),
    ("Mhm.", "backchannel"),
    ("Okay.", "backchannel"),
    ("OK", "backchannel"),
    ("Right.", "backchannel"),
    ("Yeah.", "backchannel"),
    ("I see.", "backchannel"),
    ("Got it.", "backchannel"),
    ("Hello!", "greeting"),
    ("Good morning.", "greeting"),
    ("Thank you.", "thanks"),
    ("That's all, bye.", "bye"),
    ("Are you still there?", "presence"),
    ("Did you remember to feed the cat?", "unknown"),
    ("Are you still on the phone? Dinner is ready.", "unknown"),
    ("", "empty"),
    ("...", "empty"),
]


@pytest.mark.parametrize(("text", "intent"), INTENTS)
def test_intents(text: str, intent: str) -> None:
    assert understand(text).intent == intent


DM = desk()


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("august tenth", "2026-08-10"),
        ("August 10th", "2026-08-10"),
        ("Aug 10", "2026-08-10"),
        ("the 10th of August", "2026-08-10"),
        ("tenth of august", "2026-08-10"),
        ("on august the twenty first", "2026-08-21"),
        ("on the 11th", "2026-08-11"),  # July 11 has passed (today 2026-07-20)
        ("Tuesday the 11th", "2026-08-11"),
        ("Tuesday, August 11th", "2026-08-11"),
        ("next tuesday", "2026-07-21"),
        ("tomorrow", "2026-07-21"),
        ("the day after tomorrow", "2026-07-22"),
        ("july 3rd", "2027-07-03"),  # passed this year
        ("August 10 2026", "2026-08-10"),
    ],
)
def test_dates(text: str, date: str) -> None:
    u = understand(f"book it for {text}")
    assert len(u.dates) == 1, u.dates
    assert DM._resolve_date(u.dates[0], None) == date


def test_day_alone_takes_the_month_being_corrected() -> None:
    u = understand("no wait, the tenth")
    assert DM._resolve_date(u.dates[0], "2026-09-12") == "2026-09-10"
    wd = understand("sorry, I meant Tuesday")
    assert DM._resolve_date(wd.dates[0], "2026-08-10") == "2026-08-11"  # same week


@pytest.mark.parametrize(
    ("text", "hhmm"),
    [
        ("at 10 a.m.", "10:00"),
        ("at 10am", "10:00"),
        ("ten am", "10:00"),
        ("Ten AM", "10:00"),
        ("3:30 p.m.", "15:30"),
        ("3.30pm", "15:30"),
        ("half past three", "15:30"),
        ("quarter past nine", "09:15"),
        ("quarter to four", "15:45"),
        ("ten thirty", "10:30"),
        ("nine fifteen in the morning", "09:15"),
        ("10 o'clock", "10:00"),
        ("at noon", "12:00"),
        ("at 2", "14:00"),
        ("at nine", "09:00"),
        ("14:30", "14:30"),
        ("2 p.m.", "14:00"),
        ("two pm", "14:00"),
    ],
)
def test_times(text: str, hhmm: str) -> None:
    u = understand(f"can I come in {text}")
    assert len(u.times) == 1, u.times
    t = u.times[0]
    assert resolve_time(t.hour, t.minute, t.ampm, []) == hhmm


def test_a_bare_hour_picks_the_offered_slot() -> None:
    assert resolve_time(2, 30, None, ["09:00", "14:30"]) == "14:30"
    assert resolve_time(9, 0, None, ["09:00", "21:00"]) == "09:00"
    assert understand("ten works for me").bare_numbers == [10]


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        ("my number is 555 0100", "555 0100"),
        ("my number is 555-0100.", "555 0100"),
        ("My number is 5550100", "555 0100"),
        ("my number is five five five zero one zero zero", "555 0100"),
        ("my number is five five five, oh one oh oh", "555 0100"),
        ("my number is five five five zero one hundred", "555 0100"),
        ("my number is double five five zero one nine nine", "555 0199"),
        ("call me at 555 123 4567", "555 123 4567"),
        ("it's fifty five five, zero one ninety nine", "555 0199"),
    ],
)
def test_phone_numbers(text: str, phone: str) -> None:
    assert understand(text).phone == phone


def test_values_in_one_booking_utterance() -> None:
    u = understand(BOOK)
    assert [(d.month, d.day) for d in u.dates] == [(8, 10)]
    assert [(t.hour, t.minute, t.ampm) for t in u.times] == [(10, 0, "am")]
    assert (u.phone, u.name, u.topic) == ("555 0100", "Sam Lee", "cleaning")
    # an unpunctuated transcript still cuts the name before "my number"
    assert understand("my name is sam lee my number is 555 0100").name == "Sam Lee"
    assert understand("This is Maria Gomez calling about my appointment").name == "Maria Gomez"
    assert understand("I'm calling to book a cleaning").name is None


def test_old_values_are_negated_and_references_marked() -> None:
    u = understand("No wait, the tenth, not the twelfth.")
    assert [(d.day, d.negated) for d in u.dates] == [(10, False), (12, True)]
    u = understand("the tenth instead of the twelfth")
    assert [(d.day, d.negated) for d in u.dates] == [(10, False), (12, True)]
    u = understand("move my appointment on the 3rd to the 10th")
    assert [(d.day, d.ref) for d in u.dates] == [(3, True), (10, False)]
    u = understand("move it from the 3rd to the 10th")
    assert [(d.day, d.ref) for d in u.dates] == [(3, True), (10, False)]


def test_a_stop_with_new_values_is_a_correction() -> None:
    assert understand("cancel that, make it the tenth").intent == "correction"
    assert understand("Please cancel my appointment.").intent == "cancel_appointment"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Uh-huh.", True),
        ("mm hmm", True),
        ("Okay", True),
        ("Yeah.", True),
        ("I see", True),
        ("Yes, please.", False),
        ("Okay, please cancel my appointment.", False),
        ("Stop", False),
    ],
)
def test_is_backchannel(text: str, expected: bool) -> None:
    assert DialogueManager.is_backchannel(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Stop.", True),
        ("Actually, cancel that.", True),
        ("Hold on, don't.", True),
        ("Wait", True),
        ("Never mind", True),
        ("No wait, the tenth", False),
        ("Uh-huh", False),
        ("Please cancel my appointment", False),
        ("I don't know", False),
    ],
)
def test_is_stop(text: str, expected: bool) -> None:
    assert DialogueManager.is_stop(text) is expected


def test_affirmative_backchannels() -> None:
    assert understand("Mm-hmm.").affirmative and understand("yeah").affirmative
    assert not understand("I see.").affirmative and not understand("hmm").affirmative


@pytest.mark.parametrize(
    ("fn", "value", "text"),
    [
        (say_date, "2026-08-10", "Monday, August 10th"),
        (say_date, "2026-08-03", "Monday, August 3rd"),
        (say_date, "2026-08-22", "Saturday, August 22nd"),
        (say_date, "2026-08-11", "Tuesday, August 11th"),
        (say_time, "10:00", "10 a.m."),
        (say_time, "14:30", "2:30 p.m."),
        (say_time, "12:00", "noon"),
        (say_phone, "555 0100", "5 5 5, 0 1 0 0"),
    ],
)
def test_phrasing(fn: Any, value: str, text: str) -> None:
    assert fn(value) == text
