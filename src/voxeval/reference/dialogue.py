"""The reference agent's text-level dialogue manager: ASR text in, actions out.

``DialogueManager`` runs the appointment desk of Riverside Dental on top of ``ClinicDB``:
rule-based understanding of ASR text (faster-whisper tiny.en style: case, punctuation, digits
or words all vary), tasks with versions, background tool calls with latency, stale results,
stop and compensation, idempotent retries, and a conversation history that can be truncated
to what the user actually heard. No audio here and no clock of its own: every entry point
takes ``now_ms`` on the session clock and first runs everything that became due by then. The
same inputs always give the same outputs.

Grammar (what the rules understand; case and punctuation never matter; numbers may be digits
or words; tiny.en spellings such as ``10 a.m.``, ``10am``, ``3.30pm``, ``Mm-hmm.`` work)::

    intent          example utterances
    --------------  ----------------------------------------------------------------------
    book            "I'd like to book a cleaning on August tenth at ten a.m., my name is
                    Sam Lee, my number is 555 0100" / "Can I make an appointment for
                    Tuesday?" / "I need a checkup next week" / "Do you have anything on
                    the 12th?" (availability: starts a booking and checks the free times)
    reschedule      "Can you move my appointment to August twelfth?" / "I need to
                    reschedule to the 14th at 3 p.m." / "Move my August 3rd appointment
                    to Friday" / "Push it back to half past three"
    cancel          "Cancel my appointment" / "I need to cancel my booking on the 3rd"
    (appointment)   (careful asks "Just to confirm...?" first; "yes" cancels)
    update contact  "Can you update my phone number to 555 0199?" / "My new number is
                    five five five, zero one nine nine"
    ask             "When is my appointment?" / "What are your opening hours?" / "What's
                    your cancellation policy?" / "Where can I park?" / "What's your
                    address?" (also after a task: "Also, where can I park?")
    correction      "No wait, the tenth" / "Sorry, I meant Tuesday the 11th" / "Not the
                    twelfth, the tenth" / "Make that 11 a.m." / "My number is 555 0199"
                    (any date, time, phone or name while a task is open, or right after it
                    finished, updates that task; a value after "not" or "instead of" is
                    the old one)
    stop            "Stop" / "Cancel that" / "Actually, cancel that" / "Never mind" /
                    "Forget it" / "Hold on, don't" / "Don't do that" / "Scratch that"
                    (cancels the current or just-finished task: pending writes are
                    dropped, committed ones undone)
    hold            "Hold on" / "Wait" / "One moment" / "Hang on" (no task change; careful
                    holds pending writes a little longer)
    confirm / deny  "Yes" / "Yes, please" / "Yeah, go ahead" / "That's right" / "Correct"
                    / "No" / "No, thanks" / "Don't cancel it"
    backchannel     "Uh-huh" / "Mm-hmm" / "Mhm" / "Okay" / "Right" / "Yeah" / "I see" /
                    "Got it" / "Alright" (no answer; an affirmative one confirms when the
                    agent is waiting for a yes)
    greeting/thanks "Hi" / "Good morning" / "Thank you" / "That's all, bye" / "Are you
                    still there?"
    unknown         anything else -> a polite clarification question

Values: dates ``August 10th``, ``august tenth``, ``the 10th``, ``10th of August``,
``Tuesday``, ``Tuesday the 11th``, ``tomorrow`` (year 2026 unless said; a day without a month
takes the month of the date being corrected, else the next such day); times ``10 a.m.``,
``ten am``, ``3:30 p.m.``, ``3.30pm``, ``half past three``, ``quarter to four``, ``ten
thirty``, ``10 o'clock``, ``noon``, ``at 2`` (no a.m./p.m.: 7-11 morning, 12-6 afternoon, or
the offered slot with that hour); phone numbers as digits (``555 0100``, ``555-0100``) or
words (``five five five zero one zero zero``, ``oh``, ``double five``, ``one hundred``), 7 to
11 digits; names after ``my name is``, ``name's``, ``this is``, ``I'm`` (capitalized), ``under
the name``, or as the whole answer when the agent asked for a name.

Policy effects (``policy.Policy``; turn-layer switches are read by the audio layer, not here):
``delivers_stale_results`` announces a result whose task version was superseded (careful
drops it, cancels the superseded pending write and re-queries); ``repeats_side_effects``
retries a write whose result was lost in a disconnect with a new idempotency key (careful
reuses the key, so the backend replays the stored result); ``writes_after_stop`` lets a
pending write commit after "stop" and ignores the write hold (careful drops it; both undo a
write that committed before or after the stop with a compensating call);
``keeps_unheard_text`` keeps the whole response in history after a cut (careful keeps the
words heard); ``confirms_irreversible`` asks before cancelling an appointment;
``answers_backchannels`` answers a backchannel the turn layer passed on as a turn.

Contract with the audio layer (all times are session-clock ms; call ``tick`` every frame):

- ``on_user_speech(True/False, now)`` at VAD speech start/stop of the user (not of speech the
  turn layer already judged a bystander): careful holds writes and result announcements
  while a stop or correction may be on its way. Without these calls a write that falls due
  while the user says "stop" commits (a ``write_after_stop`` failure).
- ``on_user_text(text, utterance_id, now)`` for every final transcript the turn layer treats
  as the user's (careful: backchannels too; the DM answers nothing to them and ends the
  hold). Returns ``Say`` and ``Event`` actions; emit the events as ``producer=agent``
  (``Event.at_ms`` when set is the true time) and speak the ``Say``.
- ``on_playback_started(response_id, now)`` when a response's audio starts playing (that is
  when an announced result counts as delivered); ``on_heard(response_id, heard_ms,
  total_ms, now)`` when it was cut (``heard_ms`` 0 for one dropped before it played);
  ``set_word_times`` before that if the TTS gives per-word timings.
- ``on_connection(False/True, now)`` when the link drops and comes back.
- The DM never emits ``turn.decision``, ``response.*`` or ``playback.*``: those belong to the
  turn and audio layers. ``is_backchannel`` and ``is_stop`` help the turn layer decide.

Write hold (careful): between ``on_user_speech(True)`` and the text of that speech (or
``hold_grace_ms`` after the speech ends), writes that fall due wait, so a "stop" that is
still being spoken or transcribed can drop them. A booking that was already committed
when the user said "cancel that" is undone (``cancel_appointment`` with ``compensates``); a
correction of a committed booking cancels it and books again (so every standing write holds
the latest values); a correction of a committed reschedule or contact change repeats that
tool with the new value.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from voxeval.reference.db import TOOLS, CallOutcome, ClinicDB, normalize_phone
from voxeval.reference.policy import Policy

if TYPE_CHECKING:
    from voxeval.contracts.duplex.scenario import Scenario

__all__ = [
    "DEFAULT_LATENCY_MS",
    "HOURS_TEXT",
    "LOCATION_TEXT",
    "POLICY_TEXT",
    "Action",
    "DateMention",
    "DialogueManager",
    "Event",
    "Say",
    "TimeMention",
    "Understanding",
    "say_date",
    "say_phone",
    "say_time",
    "understand",
]

SayKind = Literal["answer", "confirm", "announce", "clarify", "backchannel"]


@dataclass(frozen=True)
class Say:
    """Speak ``text`` as response ``response_id`` (the audio layer synthesizes and plays it)."""

    response_id: str
    text: str
    task_id: str | None = None
    kind: SayKind = "answer"


@dataclass(frozen=True)
class Event:
    """A ledger event the dialogue manager owns (``task.state``, ``tool.*``,
    ``history.updated``). ``at_ms``: when it happened on the session clock, when that is
    earlier than the call that returned it (a tool that finished between two calls)."""

    event_type: str
    data: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    response_id: str | None = None
    utterance_id: str | None = None
    at_ms: float | None = None


Action = Say | Event

DEFAULT_LATENCY_MS = {"read": 1500, "write": 800}

POLICY_TEXT = (
    "Our cancellation policy is simple. If you need to cancel or move an appointment, please "
    "let us know at least twenty-four hours ahead and there is no charge at all. With less "
    "than twenty-four hours' notice, or if you miss the appointment, we may charge a fifty "
    "dollar fee, although we always make an exception for emergencies."
)
HOURS_TEXT = (
    "We're open Monday to Friday from eight in the morning until six in the evening, and on "
    "Saturdays and Sundays from nine in the morning until four in the afternoon. The last "
    "appointment of the day starts one hour before closing, and we're closed on public "
    "holidays."
)
LOCATION_TEXT = (
    "We're at 42 River Street, right next to the public library. There's free patient "
    "parking behind the building: use the entrance on Mill Lane, take a ticket at the gate, "
    "and we'll validate it at the front desk."
)
GREETING_TEXT = "Hello, thanks for calling Riverside Dental. How can I help you today?"
CLARIFY_TEXT = (
    "Sorry, I didn't quite catch that. I can book, move or cancel an appointment, or answer "
    "questions about the clinic. What would you like to do?"
)

# =========================================================================== understanding


def _words(text: str) -> list[str]:
    return text.split()


_UNITS = {w: i for i, w in enumerate(_words("zero one two three four five six seven eight nine"))}
_UNITS["oh"] = 0
_TEENS = {
    w: i
    for i, w in enumerate(
        _words("ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen"),
        start=10,
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate(_words("twenty thirty forty fifty sixty seventy eighty ninety"), start=2)
}
_ORDINALS = {
    w: i
    for i, w in enumerate(
        _words("""first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth
        thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"""),
        start=1,
    )
}
_ORDINALS["thirtieth"] = 30
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS = {w: i for i, w in enumerate(_MONTH_NAMES.split(), start=1)}
_MONTHS |= {"jan": 1, "feb": 2, "apr": 4, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11}
_MONTHS |= {"dec": 12}
_WEEKDAYS = {
    w: i
    for i, w in enumerate(
        _words("monday tuesday wednesday thursday friday saturday sunday"), start=0
    )
}
_AMPM = {"am": "am", "pm": "pm"}
_DAYPART = {"morning": "am", "afternoon": "pm", "evening": "pm", "night": "pm"}

_BACKCHANNEL_PHRASES = [
    tuple(_words(p))
    for p in (
        "uh huh",
        "uh hu",
        "mm hmm",
        "mm hm",
        "mhm",
        "mmhmm",
        "mm",
        "mmm",
        "hmm",
        "hm",
        "uhhuh",
        "okay",
        "ok",
        "right",
        "yeah",
        "yep",
        "yup",
        "i see",
        "got it",
        "alright",
        "all right",
        "aha",
        "ah",
        "oh",
        "sure",
        "cool",
        "uh",
        "um",
    )
]
_AFFIRMATIVE_RE = re.compile(
    r"\b(?:uh huh|uh hu|uhhuh|mm hmm|mm hm|mhm|mmhmm|okay|ok|right|yeah|yep|yup|alright"
    r"|all right|sure|got it)\b"
)
_HOLD_PHRASE = (
    r"(?:hold on|hang on|wait|one (?:second|sec|moment|minute)|just a (?:second|sec|moment|minute)"
    r"|give me a (?:second|sec|moment|minute)|let me think|let me see"
    r"|wait a (?:second|sec|moment|minute)|hold on a (?:second|sec|moment|minute))"
)
_HOLD_RE = re.compile(
    rf"^(?:(?:um|uh|oh|okay|ok|so) )*{_HOLD_PHRASE}(?: {_HOLD_PHRASE})*(?: please)?$"
)
_STOP_RE = re.compile(
    r" (?:stop|stop that|stop it|cancel that|cancel this|cancel it|never ?mind|nevermind"
    r"|forget (?:it|that|about it)|scratch that|don'?t do (?:it|that)|do not do (?:it|that)"
    r"|don'?t book (?:it|that)|hold on don'?t|wait don'?t|hang on don'?t|no don'?t"
    r"|hold on do not|wait do not|abort|no no no|please don'?t) "
)
_BARE_DONT_RE = re.compile(r"^(?:(?:no|oh|um|uh) )*(?:don'?t|do not)(?: please)?$")
_CANCEL_APPT_RE = re.compile(
    r" (?:cancel|cancelling|canceling) (?:my |the |our |this |that |an |)"
    r"(?:\w+ )?(?:appointment|booking|visit|cleaning|checkup|check up|reservation)"
    r"| (?:need|want|like|have|going) to cancel (?!that |it |this )"
    r"| (?:can'?t|cannot|won'?t be able to) make (?:it|my appointment|the appointment) "
)
_UPDATE_CONTACT_RE = re.compile(
    r" (?:update|change|new|different|correct|changed) (?:my |the |your |a )?"
    r"(?:phone number|number|phone|contact number|contact|cell|mobile|telephone)"
)
_RESCHEDULE_RE = re.compile(
    r" (?:reschedule|rescheduling|move|moving|postpone|push (?:it|my appointment|the appointment)"
    r" (?:back|forward)|bring (?:it|my appointment|the appointment) forward"
    r"|change (?:my|the) (?:appointment|booking|date|time)|different (?:day|date|time)"
    r"|another (?:day|date|time)) "
)
_BOOK_RE = re.compile(
    r" (?:book|booking|schedule|make (?:an|a) appointment|set up (?:an|a) appointment"
    r"|(?:need|want|like|get|have) (?:an|a|to make an|to book an|to book a) (?:appointment|cleaning"
    r"|checkup|check up|filling|consultation|exam)|come in|see (?:the|a) dentist"
    r"|(?:an|a) (?:appointment|cleaning|checkup|check up) (?:on|for|at|next|this|tomorrow))"
)
_AVAIL_RE = re.compile(
    r" (?:(?:do|did) you have (?:anything|any|a slot|an opening|openings|availability|time|times"
    r"|space|room|something)|have you got (?:anything|any)|is there (?:anything|any|a slot|an "
    r"opening)|any (?:openings|slots|availability|free)"
    r"|(?:what|which) (?:times?|slots?|days?) (?:are|is|do you have|have you got)"
    r"|(?:free|available|open) (?:slots|times|on)) "
)
_ASK_POLICY_RE = re.compile(
    r" (?:cancellation|cancel|cancelling|canceling) (?:policy|fee|fees|charge|rules)"
    r"| (?:policy|fee|charge) (?:on|for|if) (?:i )?(?:cancel|cancellation|cancelling)"
    r"| what happens if i (?:cancel|miss)| late cancellation"
)
_ASK_HOURS_RE = re.compile(
    r" (?:opening hours|office hours|your hours|hours|when are you open|what time do you "
    r"(?:open|close)|when do you (?:open|close)|are you open|open on (?:saturdays?|sundays?"
    r"|weekends?)|how late are you open) "
)
_ASK_LOCATION_RE = re.compile(
    r" (?:park|parking|address|where are you|where is the clinic|where's the clinic|where is it"
    r"|located|location|directions|how do i get there|find you|get to you) "
)
_ASK_APPT_RE = re.compile(
    r" (?:when is my|when's my|what time is my|what day is my|which day is my|when is the"
    r"|when am i booked|do i have an|remind me when|what date is my) "
    r"|my appointment (?:is )?when "
)
_CONFIRM_RE = re.compile(
    r"^(?:(?:oh|um|uh|well) )*(?:yes|yeah|yep|yup|sure|correct|exactly|absolutely|definitely"
    r"|please do|go ahead|sounds good|that's right|that is right|that's correct|that is correct"
    r"|that works|perfect|great|do it|ok|okay|right|alright|please)\b"
)
_DENY_RE = re.compile(
    r"^(?:(?:oh|um|uh|well) )*(?:no|nope|nah|not really|don'?t|do not|negative)\b"
)
_MARKER_RE = re.compile(
    r"^(?:(?:oh|um|uh|well|wait|so) )*(?:no|sorry|actually|i meant|i mean|make (?:that|it)"
    r"|change (?:that|it)|not|instead|rather|oops|correction|my mistake|wait)\b"
    r"| not (?:the |on |at )| instead | i meant | i mean "
)
_PRESENCE_RE = re.compile(
    r" (?:are you (?:still )?there|can you hear me|you still there|anyone there|is anybody there) "
)
_GREETING_RE = re.compile(r"^(?:hi|hello|hey|good (?:morning|afternoon|evening)|hiya|howdy)\b")
_THANKS_RE = re.compile(r" (?:thank you|thanks|thank|cheers) ")
_BYE_RE = re.compile(r" (?:bye|goodbye|good bye|that's all|that's it|that is all) ")
_TOPICS = {
    "cleaning": "cleaning",
    "checkup": "checkup",
    "check": "checkup",
    "filling": "filling",
    "consultation": "consultation",
    "whitening": "whitening",
    "exam": "exam",
}
_NAME_CUES = re.compile(
    r"\b(my name is|my name's|name is|name's|the name is|under the name of|under the name"
    r"|this is|i'm|i am|it's for|it is for)\s+",
    re.IGNORECASE,
)
_CAPITAL_CUES = {"this is", "i'm", "i am", "it's for", "it is for"}
_NAME_STOP = set(
    _words(
        """my and at on for i i'd i'm please calling ringing to the number phone here speaking from
    with a an in is it it's that this so but just okay ok yes yeah no um uh like would want need
    book appointment looking trying going not sure hoping wondering sorry actually thanks thank
    hi hello wait can could do you your we our new about also still"""
    )
)
_NAME_STOP |= set(_UNITS) | set(_TEENS) | set(_TENS) | set(_ORDINALS) | set(_MONTHS)
_NAME_STOP |= set(_WEEKDAYS) | {"today", "tomorrow", "am", "pm", "noon"}

# intents
EMPTY, BACKCHANNEL, HOLD, STOP = "empty", "backchannel", "hold", "stop"
BOOK, RESCHEDULE, CANCEL_APPT, UPDATE_CONTACT, AVAILABILITY = (
    "book",
    "reschedule",
    "cancel_appointment",
    "update_contact",
    "availability",
)
ASK_APPOINTMENT, ASK_HOURS, ASK_POLICY, ASK_LOCATION = (
    "ask_appointment",
    "ask_hours",
    "ask_policy",
    "ask_location",
)
CONFIRM, DENY, CORRECTION, INFORM = "confirm", "deny", "correction", "inform"
GREETING, THANKS, BYE, UNKNOWN = "greeting", "thanks", "bye", "unknown"
PRESENCE = "presence"
_NEUTRAL = frozenset(
    {"ask_appointment", "ask_hours", "ask_policy", "ask_location", "greeting", "thanks", "bye"}
    | {"presence", "confirm"}
)
"""Intents that change no task: writes held for the utterance are released before the
answer (stop, correction, new values and new requests are handled first)."""
TASK_INTENTS = (CANCEL_APPT, UPDATE_CONTACT, RESCHEDULE, BOOK, AVAILABILITY)
QUESTION_INTENTS = (ASK_POLICY, ASK_HOURS, ASK_LOCATION, ASK_APPOINTMENT)


@dataclass(frozen=True)
class DateMention:
    """A date said in the utterance (token span ``start:end``), not yet resolved."""

    start: int
    end: int
    month: int | None = None
    day: int | None = None
    weekday: int | None = None
    rel_days: int | None = None
    year: int | None = None
    negated: bool = False
    """Said as the old value ("not the twelfth", "instead of the 12th")."""
    ref: bool = False
    """Names the appointment being changed ("from the 3rd", "my August 3rd appointment")."""


@dataclass(frozen=True)
class TimeMention:
    """A time of day said in the utterance (``ampm`` None: not said)."""

    start: int
    end: int
    hour: int
    minute: int
    ampm: str | None = None
    negated: bool = False


@dataclass
class Understanding:
    """What ``understand`` made of one utterance."""

    text: str
    tokens: list[str]
    intent: str
    questions: list[str] = field(default_factory=list)
    dates: list[DateMention] = field(default_factory=list)
    times: list[TimeMention] = field(default_factory=list)
    phone: str | None = None
    partial_phone: str | None = None
    """Digits after a phone cue that are too few for a number (3 to 6)."""
    name: str | None = None
    bare_numbers: list[int] = field(default_factory=list)
    """Numbers 1-12 said alone (an answer to "which time?")."""
    marker: bool = False
    """A correction marker ("no", "sorry", "actually", "I meant", "not ...")."""
    affirmative: bool = False
    """A backchannel that can mean yes ("uh-huh", "okay", "yeah")."""
    topic: str | None = None

    @property
    def has_values(self) -> bool:
        return bool(self.dates or self.times or self.phone or self.name)


def _tokens(text: str) -> list[str]:
    s = text.casefold().replace("’", "'").replace("‘", "'")
    s = re.sub(r"\b([ap])\.\s?m\b\.?", r"\1m", s)
    s = re.sub(r"(\d)\s?([ap])\.?m\b\.?", r"\1 \2m", s)
    s = re.sub(r"\b(\d{1,2})\.(\d{2})\b", r"\1:\2", s)
    s = re.sub(r"\bo'?\s?clock\b", " oclock ", s)
    s = s.replace("-", " ").replace("/", " ")
    s = re.sub(r"[^a-z0-9:' ]+", " ", s)
    out = []
    for tok in s.split():
        tok = tok.strip("':")
        if tok:
            out.append(tok)
    return out


def _cardinal(toks: Sequence[str], i: int) -> tuple[int, int] | None:
    """A number 0-99 at ``i`` (digits or words): (value, next index)."""
    if i >= len(toks):
        return None
    t = toks[i]
    if t.isdigit() and len(t) <= 2:
        return int(t), i + 1
    if t in _TENS:
        if i + 1 < len(toks) and toks[i + 1] in _UNITS and _UNITS[toks[i + 1]] > 0:
            return _TENS[t] + _UNITS[toks[i + 1]], i + 2
        return _TENS[t], i + 1
    if t in _TEENS:
        return _TEENS[t], i + 1
    if t in _UNITS and t != "oh":
        return _UNITS[t], i + 1
    return None


def _ordinal(toks: Sequence[str], i: int) -> tuple[int, int] | None:
    """A day ordinal at ``i`` (``10th``, ``tenth``, ``twenty first``): (value, next index)."""
    if i >= len(toks):
        return None
    t = toks[i]
    m = re.fullmatch(r"(\d{1,2})(st|nd|rd|th)", t)
    if m:
        return int(m.group(1)), i + 1
    if t in ("twenty", "thirty") and i + 1 < len(toks) and toks[i + 1] in _ORDINALS:
        unit = _ORDINALS[toks[i + 1]]
        if unit < 10:
            return _TENS[t] + unit, i + 2
    if t in _ORDINALS:
        return _ORDINALS[t], i + 1
    return None


def _number_run(toks: Sequence[str], i: int, used: Sequence[bool]) -> tuple[str, int]:
    """Digits of a spoken or written number starting at ``i`` (phone style)."""
    pieces: list[str] = []
    j = i
    n = len(toks)
    while j < n and not used[j]:
        t = toks[j]
        if t.isdigit():
            pieces.append(t)
            j += 1
        elif t in ("double", "triple") and j + 1 < n:
            nxt = toks[j + 1]
            d = (
                str(_UNITS[nxt])
                if nxt in _UNITS
                else (nxt if nxt.isdigit() and len(nxt) == 1 else "")
            )
            if not d:
                break
            pieces.append(d * (2 if t == "double" else 3))
            j += 2
        elif t in _TENS:
            if j + 1 < n and toks[j + 1] in _UNITS and _UNITS[toks[j + 1]] > 0:
                pieces.append(str(_TENS[t] + _UNITS[toks[j + 1]]))
                j += 2
            else:
                pieces.append(str(_TENS[t]))
                j += 1
        elif t in _TEENS:
            pieces.append(str(_TEENS[t]))
            j += 1
        elif t in _UNITS or t == "o":
            if not pieces and t in ("oh", "o"):
                break
            pieces.append(str(_UNITS.get(t, 0)))
            j += 1
        elif t == "hundred" and pieces and len(pieces[-1]) == 1:
            pieces[-1] += "00"
            j += 1
        elif t == "thousand" and pieces and len(pieces[-1]) == 1:
            pieces[-1] += "000"
            j += 1
        else:
            break
    return "".join(pieces), j


def _starts_number(t: str) -> bool:
    return (
        t.isdigit()
        or t in _TENS
        or t in _TEENS
        or t in ("double", "triple")
        or (t in _UNITS and t != "oh")
    )


def _extract_phone(toks: list[str], used: list[bool], u: Understanding) -> None:
    s = " " + " ".join(toks) + " "
    cue = bool(re.search(r" (?:number|phone|reach me|call me|text me|contact|cell|mobile) ", s))
    i = 0
    while i < len(toks):
        if used[i] or not _starts_number(toks[i]):
            i += 1
            continue
        digits, j = _number_run(toks, i, used)
        if 7 <= len(digits) <= 11:
            u.phone = normalize_phone(digits)
            for k in range(i, j):
                used[k] = True
            return
        if cue and 3 <= len(digits) < 7 and j > i + 1 and u.partial_phone is None:
            u.partial_phone = digits
        i = max(j, i + 1)


def _negated(toks: Sequence[str], start: int) -> bool:
    k = start - 1
    while k >= 0 and toks[k] in ("the", "on", "at", "for"):
        k -= 1
    if k >= 0 and toks[k] == "not":
        return True
    return k >= 1 and toks[k] == "of" and toks[k - 1] == "instead"


def _ampm_after(toks: Sequence[str], j: int) -> tuple[str | None, int]:
    if j < len(toks) and toks[j] in _AMPM:
        return _AMPM[toks[j]], j + 1
    if toks[j : j + 2] == ["in", "the"] and j + 2 < len(toks) and toks[j + 2] in _DAYPART:
        return _DAYPART[toks[j + 2]], j + 3
    if j < len(toks) and toks[j] == "tonight":
        return "pm", j + 1
    return None, j


_MINUTE_WORDS = (10, 15, 20, 25, 30, 35, 40, 45, 50, 55)


def _time_at(toks: Sequence[str], i: int) -> tuple[int, int, str | None, int] | None:
    """A time of day starting at token ``i``: (hour, minute, am/pm or None, end)."""
    n = len(toks)
    t = toks[i]
    prev = toks[i - 1] if i > 0 else ""
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", t)
    if m:
        ampm, j = _ampm_after(toks, i + 1)
        return int(m.group(1)), int(m.group(2)), ampm, j
    if t in ("noon", "midday"):
        return 12, 0, "pm", i + 1
    if t in ("half", "quarter") and i + 2 < n and toks[i + 1] in ("past", "after", "to"):
        hr = _cardinal(toks, i + 2)
        if hr is None or not 1 <= hr[0] <= 12:
            return None
        ampm, j = _ampm_after(toks, hr[1])
        if toks[i + 1] == "to":
            return (hr[0] - 1) or 12, 45, ampm, j
        return hr[0], 30 if t == "half" else 15, ampm, j
    hr = _cardinal(toks, i)
    if hr is None or (t.isdigit() and len(t) > 2):
        return None
    hour, j = hr
    minute: int | None = None
    if j < n and toks[j] == "oclock":
        minute, j = 0, j + 1
    elif j < n and re.fullmatch(r"\d{2}", toks[j]) and int(toks[j]) < 60:
        minute, j = int(toks[j]), j + 1
    elif j + 1 < n and toks[j] in ("oh", "o") and toks[j + 1] in _UNITS:
        minute, j = _UNITS[toks[j + 1]], j + 2
    elif j < n and (toks[j] in _TENS or toks[j] in ("ten", "fifteen")):
        mn = _cardinal(toks, j)
        if mn is not None and mn[0] in _MINUTE_WORDS:
            minute, j = mn
    ampm, end = _ampm_after(toks, j)
    if prev in _MONTHS and ampm is None:
        return None  # "august ten ..." is a date
    if ampm is not None:
        return hour, minute or 0, ampm, end
    if minute is not None:
        return hour, minute, None, end
    nxt = toks[j] if j < n else ""
    if (
        prev in ("at", "around", "by")
        and 1 <= hour <= 12
        and nxt not in _MONTHS
        and not re.fullmatch(r"\d+(st|nd|rd|th)", nxt)
    ):
        return hour, 0, None, j
    return None


def _extract_times(toks: list[str], used: list[bool], u: Understanding) -> None:
    i = 0
    while i < len(toks):
        found = None if used[i] else _time_at(toks, i)
        if found is None:
            i += 1
            continue
        hour, minute, ampm, end = found
        if hour > 23 or minute > 59 or (ampm is not None and not 1 <= hour <= 12):
            i += 1
            continue
        if any(used[i:end]):
            i += 1
            continue
        start = i - 1 if i > 0 and toks[i - 1] in ("at", "around", "by") and not used[i - 1] else i
        u.times.append(TimeMention(start, end, hour, minute, ampm, _negated(toks, start)))
        for k in range(start, end):
            used[k] = True
        i = end


def _day_at(toks: Sequence[str], i: int, *, loose: bool) -> tuple[int, int] | None:
    """A day of month at ``i``: an ordinal, or (``loose``) a plain number (not "one")."""
    o = _ordinal(toks, i)
    if o and 1 <= o[0] <= 31:
        return o
    if loose and i < len(toks) and toks[i] != "one":
        c = _cardinal(toks, i)
        if c and 1 <= c[0] <= 31:
            return c
    return None


def _extract_dates(toks: list[str], used: list[bool], u: Understanding) -> None:
    n = len(toks)

    def free(k: int) -> bool:
        return 0 <= k < n and not used[k]

    i = 0
    while i < n:
        if used[i]:
            i += 1
            continue
        t = toks[i]
        start, j = i, i
        month = day = weekday = rel = year = None
        if t == "today":
            rel, j = 0, i + 1
        elif t == "tomorrow":
            rel, j = 1, i + 1
            if toks[max(0, i - 2) : i] == ["day", "after"]:
                rel, start = 2, i - 2
        else:
            if t in _WEEKDAYS:
                weekday, j = _WEEKDAYS[t], i + 1
                if free(i - 1) and toks[i - 1] in ("next", "this", "coming"):
                    start = i - 1
            k = j + 1 if weekday is not None and free(j) and toks[j] == "the" else j
            if free(k) and toks[k] in _MONTHS:
                k2 = k + 1 + (1 if free(k + 1) and toks[k + 1] == "the" else 0)
                d = _day_at(toks, k2, loose=True) if free(k2) else None
                if d is not None:
                    month, (day, j) = _MONTHS[toks[k]], d
                elif weekday is None:
                    i += 1  # a month alone ("in august", "may i") is not a date
                    continue
            else:
                had_the = free(j) and toks[j] == "the"
                k = j + 1 if had_the else j
                if free(k):
                    d = _day_at(toks, k, loose=had_the or weekday is not None)
                    if (
                        d is not None
                        and toks[k] in ("first", "second")
                        and not (had_the or weekday is not None or toks[i - 1 : i] == ["on"])
                    ):
                        d = None
                    if d is not None:
                        day, j = d
                        if free(j) and toks[j] == "of" and free(j + 1) and toks[j + 1] in _MONTHS:
                            month, j = _MONTHS[toks[j + 1]], j + 2
                        elif free(j) and toks[j] in _MONTHS and toks[j] != "may":
                            month, j = _MONTHS[toks[j]], j + 1
            if day is None and weekday is None:
                i += 1
                continue
            if day is not None and free(j) and re.fullmatch(r"20\d\d", toks[j]):
                year, j = int(toks[j]), j + 1
        end = max(j, i + 1)
        before = toks[max(0, start - 2) : start]
        ref = (
            before[-1:] == ["from"]
            or (before[-1:] == ["on"] and before[:1] in (["appointment"], ["booking"], ["one"]))
            or (end < n and toks[end] in ("appointment", "booking", "one", "visit"))
        )
        u.dates.append(
            DateMention(start, end, month, day, weekday, rel, year, _negated(toks, start), ref)
        )
        for k in range(start, end):
            used[k] = True
        i = end


def _extract_name(text: str, u: Understanding) -> None:
    for m in _NAME_CUES.finditer(text):
        cue = " ".join(m.group(1).casefold().split())
        rest = text[m.end() :]
        words = []
        for raw in re.split(r"\s+", rest):
            w = raw.strip('.,!?;:"()')
            if not w or not re.fullmatch(r"[A-Za-z][A-Za-z'\-]*", w):
                break
            if w.casefold() in _NAME_STOP:
                break
            words.append(w)
            if raw != w and raw.rstrip(".,!?;:") != raw:
                break  # punctuation ends the name
            if len(words) == 3:
                break
        if not words:
            continue
        if cue in _CAPITAL_CUES and not words[0][0].isupper():
            continue
        u.name = " ".join(w[0].upper() + w[1:] for w in words)
        return


def _free_name(text: str) -> str | None:
    """A bare answer to "what name?": 1-3 name-like words after fillers."""
    words = [w.strip('.,!?;:"()') for w in text.split()]
    words = [w for w in words if w]
    fillers = {"it's", "its", "it", "is", "yeah", "yes", "sure", "um", "uh", "oh", "okay"}
    fillers |= {"ok", "the", "name", "my", "under", "please", "that's", "thats"}
    while words and words[0].casefold() in fillers:
        words.pop(0)
    while words and words[-1].casefold() in {"please", "thanks", "thank", "you"}:
        words.pop()
    if not 1 <= len(words) <= 3:
        return None
    if not all(re.fullmatch(r"[A-Za-z][A-Za-z'\-]*", w) for w in words):
        return None
    if any(w.casefold() in _NAME_STOP for w in words):
        return None
    return " ".join(w[0].upper() + w[1:] for w in words)


def _is_backchannel_tokens(toks: Sequence[str]) -> bool:
    if not toks:
        return False
    i = 0
    while i < len(toks):
        for phrase in sorted(_BACKCHANNEL_PHRASES, key=len, reverse=True):
            if tuple(toks[i : i + len(phrase)]) == phrase:
                i += len(phrase)
                break
        else:
            return False
    return True


def understand(text: str) -> Understanding:
    """Intent and values of one utterance (see the grammar in the module docstring)."""
    toks = _tokens(text)
    u = Understanding(text=text, tokens=toks, intent=EMPTY)
    if not toks:
        return u
    s = " " + " ".join(toks) + " "
    core = " ".join(toks)
    if _is_backchannel_tokens(toks):
        u.intent = BACKCHANNEL
        u.affirmative = bool(_AFFIRMATIVE_RE.search(core))
        return u
    used = [False] * len(toks)
    _extract_phone(toks, used, u)
    _extract_times(toks, used, u)
    _extract_dates(toks, used, u)
    _extract_name(text, u)
    for k, t in enumerate(toks):
        if not used[k]:
            c = _cardinal(toks, k)
            if c and c[1] == k + 1 and 1 <= c[0] <= 12 and t not in ("one",):
                u.bare_numbers.append(c[0])
            elif t == "one" and k > 0 and toks[k - 1] in ("the", "at"):
                u.bare_numbers.append(1)
    u.topic = next((_TOPICS[t] for t in toks if t in _TOPICS), None)
    u.marker = bool(_MARKER_RE.search(core) or _MARKER_RE.search(s))
    u.questions = [
        q
        for q, rx in (
            (ASK_POLICY, _ASK_POLICY_RE),
            (ASK_HOURS, _ASK_HOURS_RE),
            (ASK_LOCATION, _ASK_LOCATION_RE),
            (ASK_APPOINTMENT, _ASK_APPT_RE),
        )
        if rx.search(s)
    ]
    values = bool(u.dates or u.times or u.phone)
    if _HOLD_RE.match(core):
        u.intent = HOLD
    elif (_STOP_RE.search(s) or _BARE_DONT_RE.match(core)) and not (
        _CANCEL_APPT_RE.search(s) or values
    ):
        u.intent = STOP
    elif ASK_POLICY in u.questions and not _CANCEL_APPT_RE.search(s.replace(" policy", "")):
        u.intent = ASK_POLICY
    elif _CANCEL_APPT_RE.search(s):
        u.intent = CANCEL_APPT
    elif _UPDATE_CONTACT_RE.search(s) and not u.dates and not u.times:
        u.intent = UPDATE_CONTACT
    elif _RESCHEDULE_RE.search(s):
        u.intent = RESCHEDULE
    elif _BOOK_RE.search(s):
        u.intent = BOOK
    elif _AVAIL_RE.search(s) and not u.times:
        u.intent = AVAILABILITY
    elif u.questions and not (u.phone or u.name or u.marker):
        u.intent = u.questions[0]  # "what time do you close on Saturday?" is not a request
    elif values and (u.marker or _STOP_RE.search(s)):
        u.intent = CORRECTION
    elif values or u.name:
        u.intent = INFORM
    elif u.questions:
        u.intent = u.questions[0]
    elif _DENY_RE.match(core):
        u.intent = DENY
    elif _CONFIRM_RE.match(core):
        u.intent = CONFIRM
    elif _PRESENCE_RE.search(s):
        u.intent = PRESENCE
    elif _BYE_RE.search(s):
        u.intent = BYE
    elif _THANKS_RE.search(s):
        u.intent = THANKS
    elif _GREETING_RE.match(core):
        u.intent = GREETING
    elif u.bare_numbers:
        u.intent = INFORM
    else:
        u.intent = UNKNOWN
    if u.intent in QUESTION_INTENTS:
        u.questions = [q for q in u.questions if q != u.intent]
    return u


# =========================================================================== phrasing


def _ordinal_suffix(n: int) -> str:
    if 11 <= n % 100 <= 13:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }".replace(" ", "")


def say_date(iso: str) -> str:
    """``2026-08-10`` -> ``Monday, August 10th``."""
    d = dt.date.fromisoformat(iso)
    return f"{d.strftime('%A')}, {d.strftime('%B')} {_ordinal_suffix(d.day)}"


def say_time(hhmm: str) -> str:
    """``14:30`` -> ``2:30 p.m.``; ``10:00`` -> ``10 a.m.``; ``12:00`` -> ``noon``."""
    h, m = (int(x) for x in hhmm.split(":"))
    if (h, m) == (12, 0):
        return "noon"
    suffix = "a.m." if h < 12 else "p.m."
    h12 = h % 12 or 12
    return f"{h12} {suffix}" if m == 0 else f"{h12}:{m:02d} {suffix}"


def say_phone(phone: str) -> str:
    """``555 0100`` -> ``5 5 5, 0 1 0 0`` (read digit by digit)."""
    return ", ".join(" ".join(group) for group in phone.split())


def _say_list(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _say_field(key: str, value: Any) -> str:
    if value is None:
        return "nothing"
    if key == "date":
        return say_date(str(value))
    if key == "time":
        return say_time(str(value))
    if key == "contact":
        return say_phone(str(value))
    return str(value)


# =========================================================================== tasks and calls

_STRENGTH = {"backchannel": 0, "answer": 1, "clarify": 2, "confirm": 3, "announce": 4}
_FIELDS = {
    "book": ("date", "time", "name", "contact"),
    "reschedule": ("appointment_id", "date", "time"),
    "cancel": ("appointment_id",),
    "update_contact": ("appointment_id", "contact"),
}


@dataclass
class _Task:
    task_id: str
    kind: str
    fields: dict[str, Any]
    version: int = 1
    status: str = "active"
    awaiting: str | None = None
    appointment_id: str | None = None
    """book: the appointment it created."""
    confirmed: bool = False
    confirm_rid: str | None = None
    confirm_heard: bool = True
    offered: list[str] = field(default_factory=list)
    queried: tuple[str, int] | None = None
    blocked_version: int | None = None
    attempts: int = 0
    writes: list[str] = field(default_factory=list)
    response_id: str | None = None
    utterance_id: str | None = None
    topic: str | None = None
    seq: int = 0


@dataclass
class _Pending:
    call_id: str
    task_id: str
    tool: str
    arguments: dict[str, Any]
    version: int
    due_ms: float
    key: str | None
    write: bool
    response_id: str | None
    seq: int
    compensates: str | None = None
    retries: int = 0
    requested_ms: float = 0.0
    noticed: bool = False


@dataclass
class _Entry:
    role: Literal["user", "assistant"]
    text: str
    full: str
    response_id: str | None = None
    utterance_id: str | None = None
    task_id: str | None = None
    truncated: bool = False


@dataclass
class _Speech:
    text: str
    kind: SayKind
    task_id: str | None
    calls: tuple[str, ...] = ()
    version: int | None = None
    status: str | None = None
    """The task's status when this was queued."""


class DialogueManager:
    """Rule-based appointment desk (see the module docstring).

    ``latencies``: ms per tool name, or ``read`` / ``write`` for every read / write tool
    (defaults ``DEFAULT_LATENCY_MS``: 1500 / 800). ``hold_grace_ms``: how long after the user
    stops speaking careful still holds pending writes while the text is not in.
    ``hold_on_ms``: how long "hold on" holds them. ``slow_notice_ms``: a call still running
    this long gets one "this is taking longer than usual" (0: never).
    """

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        policy: Policy | str = "careful",
        session_id: str = "session",
        *,
        db_path: str | Path = ":memory:",
        **options: Any,
    ) -> DialogueManager:
        """A fresh desk for a scenario: the database seeded from ``initial_state``, the
        latency of each clinic tool the scenario sets (``latency_ms``), and its scripted
        ``error`` results as component faults (``ClinicDB.set_tool_faults``). Scripted
        ``result`` values are not used: the database computes the real ones. The scenario's
        truth is never read."""
        db = ClinicDB(getattr(scenario, "initial_state", None) or {}, path=db_path)
        latencies: dict[str, int] = {}
        for tool in scenario.tools:
            if tool.name not in TOOLS:
                continue
            if "latency_ms" in tool.model_fields_set:
                latencies[tool.name] = tool.latency_ms
            if any(r.error for r in tool.results):
                db.set_tool_faults(tool.name, [(r.match, r.error) for r in tool.results])
        latencies.update(options.pop("latencies", None) or {})
        return cls(db, policy, session_id, latencies=latencies, **options)

    def __init__(
        self,
        db: ClinicDB,
        policy: Policy | str = "careful",
        session_id: str = "session",
        *,
        latencies: Mapping[str, int] | None = None,
        hold_grace_ms: float = 2000.0,
        hold_on_ms: float = 5000.0,
        slow_notice_ms: float = 5000.0,
    ) -> None:
        self.db = db
        self.policy = Policy.parse(policy)
        self.session_id = session_id
        self.latencies = {**DEFAULT_LATENCY_MS, **dict(latencies or {})}
        self.hold_grace_ms = float(hold_grace_ms)
        self.hold_on_ms = float(hold_on_ms)
        self.slow_notice_ms = float(slow_notice_ms)
        self.today = db.today
        self.tasks: dict[str, _Task] = {}
        self.caller_name: str | None = None
        self.caller_contact: str | None = None
        self._pending: dict[str, _Pending] = {}
        self._lost: list[_Pending] = []
        self._deferred: list[tuple[_Pending, CallOutcome, float]] = []
        self._history: list[_Entry] = []
        self._word_times: dict[str, list[tuple[str, float, float]]] = {}
        self._deliveries: dict[str, list[str]] = {}
        self._session_appts: list[str] = []
        self._lookup_pending = False
        self._n_resp = 0
        self._n_task = 0
        self._n_seq = 0
        self._now_ms = 0.0
        self._connected = True
        self._user_active = False
        self._hold_until: float | None = None
        self._out: list[Action] = []
        self._speech: list[_Speech] = []
        self._rid: str | None = None
        self._user_turn = False
        self._utt: str | None = None

    # ------------------------------------------------------------------ for the turn layer

    @staticmethod
    def is_backchannel(text: str) -> bool:
        """Only backchannel tokens ("uh-huh", "mm-hmm", "okay", "right", "yeah", "I see")."""
        return understand(text).intent == BACKCHANNEL

    @staticmethod
    def is_stop(text: str) -> bool:
        """A request to stop: the task ("stop", "cancel that", "never mind", "hold on, don't")
        or just the speech ("hold on", "wait"). The turn layer should stop playback on both."""
        return understand(text).intent in (STOP, HOLD)

    @property
    def history(self) -> list[tuple[str, str]]:
        """The conversation as the agent remembers it: (role, text), cut to what was heard."""
        return [(e.role, e.text) for e in self._history]

    # ------------------------------------------------------------------ entry points

    def greet(self, now_ms: float) -> list[Action]:
        """The opening line (optional: most scenarios start with the user)."""
        self._begin(now_ms)
        self._speak(GREETING_TEXT, "answer")
        return self._end()

    def on_user_text(self, text: str, utterance_id: str | None, now_ms: float) -> list[Action]:
        """A final transcript of the user's speech."""
        self._begin(now_ms, user_turn=True, utterance_id=utterance_id)
        u = understand(text)
        if u.intent != EMPTY:
            self._history.append(_Entry("user", text, text, utterance_id=utterance_id))
        if u.name:
            self.caller_name = u.name
        if self._user_active or self._hold_until is not None:
            # writes held for this utterance commit (if still wanted) now, not at their due time
            for p in self._pending.values():
                if p.write and p.compensates is None and p.due_ms < self._now_ms:
                    p.due_ms = self._now_ms
        self._user_active = False
        self._hold_until = None
        if u.intent in _NEUTRAL:
            self._advance(self._now_ms)  # nothing to stop or correct: release what was held
        self._dispatch(u)
        self._advance(self._now_ms)
        return self._end()

    def on_user_speech(self, active: bool, now_ms: float) -> list[Action]:
        """The user started (True) or stopped (False) speaking (VAD). Careful holds writes
        that fall due from the start of the speech until its text arrives (at most
        ``hold_grace_ms`` after the speech ends)."""
        self._begin(now_ms)
        self._user_active = bool(active)
        self._hold_until = None if active else self._now_ms + self.hold_grace_ms
        return self._end()

    def tick(self, now_ms: float) -> list[Action]:
        """Time passes: tool calls that are due finish and their results are handled."""
        self._begin(now_ms)
        return self._end()

    def on_heard(
        self, response_id: str, heard_ms: float, total_ms: float, now_ms: float
    ) -> list[Action]:
        """The user heard only the first ``heard_ms`` of response ``response_id`` (of
        ``total_ms``). Careful keeps the words heard (per-word timings from
        ``set_word_times`` if given: words that ended by ``heard_ms``; else the same share of
        words as of time); ``keeps_unheard_text`` keeps everything. Emits
        ``history.updated`` (data: action truncate|keep, heard_until_ms, total_ms, text_kept,
        words_kept, words_total, text_full)."""
        self._begin(now_ms)
        entry = next(
            (e for e in self._history if e.role == "assistant" and e.response_id == response_id),
            None,
        )
        if entry is None:
            return self._end()
        words = entry.full.split()
        heard = max(0.0, float(heard_ms))
        cut = total_ms > 0 and heard < total_ms
        action = "keep"
        kept_words = words
        if cut and not self.policy.keeps_unheard_text:
            times = self._word_times.get(response_id)
            if times:
                kept_words = [w for (w, _start, end) in times if end <= heard]
            else:
                kept_words = words[: int(len(words) * heard / total_ms)]
            action = "truncate"
            entry.truncated = True
            for task in self.tasks.values():
                if task.confirm_rid == response_id:
                    task.confirm_heard = False
        entry.text = " ".join(kept_words)
        if cut and heard <= 0:
            for call_id in self._deliveries.pop(response_id, []):
                self.db.clear_delivery(call_id)
        self._event(
            "history.updated",
            {
                "action": action,
                "heard_until_ms": heard,
                "total_ms": float(total_ms),
                "text_kept": entry.text,
                "words_kept": len(kept_words),
                "words_total": len(words),
                "text_full": entry.full,
            },
            task_id=entry.task_id,
            response_id=response_id,
        )
        return self._end()

    def set_word_times(self, response_id: str, words: Sequence[tuple[str, float, float]]) -> None:
        """Per-word timings of a response: (word, start_ms, end_ms) from its start."""
        self._word_times[response_id] = [(str(w), float(s), float(e)) for w, s, e in words]

    def on_playback_started(self, response_id: str, now_ms: float) -> list[Action]:
        """Playback of ``response_id`` began: the results it announces count as delivered now
        (until this is called, the time the Say was returned stands in)."""
        self._begin(now_ms)
        for call_id in self._deliveries.get(response_id, []):
            task_id = self.db.call(call_id).get("task_id")
            task = self.tasks.get(str(task_id))
            self.db.mark_delivered(
                call_id, _ns(self._now_ms), task.version if task else None, response_id
            )
        return self._end()

    def on_connection(self, connected: bool, now_ms: float) -> list[Action]:
        """The link dropped (False) or came back (True). Calls that finish while it is down
        run on the backend but their results are lost; after the reconnect each is retried:
        with the same idempotency key (careful: the backend replays the stored result and
        commits nothing) or a new one (``repeats_side_effects``: the write commits again)."""
        self._begin(now_ms)
        if not connected:
            self._connected = False
            return self._end()
        self._connected = True
        lost, self._lost = self._lost, []
        wrote = False
        for p in lost:
            self._event(
                "tool.failed",
                {
                    "call_id": p.call_id,
                    "tool": p.tool,
                    "arguments": p.arguments,
                    "idempotency_key": p.key,
                    "task_version": p.version,
                    "status": "failed",
                    "error": "result lost: the connection dropped",
                },
                task_id=p.task_id,
                response_id=p.response_id,
            )
            key = p.key
            if p.write and p.compensates is None and self.policy.repeats_side_effects:
                key = f"{p.key}/retry{p.retries + 1}"
            self._request(
                self.tasks[p.task_id],
                p.tool,
                p.arguments,
                key=key,
                version=p.version,
                response_id=p.response_id,
                compensates=p.compensates,
                retries=p.retries + 1,
            )
            wrote = wrote or p.write
        if wrote:
            self._speak(
                "Sorry, we were cut off for a moment. I'm just finishing that for you.", "answer"
            )
        return self._end()

    def export_final_state(self) -> dict[str, Any]:
        """``final-state.json`` (see ``ClinicDB.export_final_state``)."""
        return self.db.export_final_state(exported_ns=_ns(self._now_ms))

    def export_tool_audit(self) -> dict[str, Any]:
        """``tool-audit.json`` of this session (validates as ``task.ToolAudit``)."""
        return self.db.export_tool_audit(self.session_id)

    def snapshot(self) -> dict[str, Any]:
        """The business state without ``_meta`` (for ``session.*`` events' ``data.state``)."""
        state = self.db.export_final_state()
        state.pop("_meta", None)
        return state

    # ------------------------------------------------------------------ plumbing

    def _begin(
        self, now_ms: float, *, user_turn: bool = False, utterance_id: str | None = None
    ) -> None:
        self._now_ms = max(self._now_ms, float(now_ms))
        self._out, self._speech, self._rid = [], [], None
        self._user_turn, self._utt = user_turn, utterance_id
        self._advance(self._now_ms)

    def _fresh(self, s: _Speech) -> bool:
        """Careful says nothing about a result whose task changed since it arrived."""
        if not s.calls or s.task_id is None or self.policy.delivers_stale_results:
            return True
        task = self.tasks[s.task_id]
        dropped = ("cancelled", "superseded")
        if task.status in dropped and s.status not in dropped:
            return False  # stopped after the result was queued
        return s.version is None or task.version <= s.version

    def _end(self) -> list[Action]:
        out = list(self._out)
        speech = [s for s in self._speech if self._fresh(s)]
        if speech:
            rid = self._turn_rid()
            text = " ".join(s.text for s in speech)
            kind = max((s.kind for s in speech), key=lambda k: _STRENGTH[k])
            task_id = next((s.task_id for s in speech if s.task_id), None)
            out.append(Say(rid, text, task_id, kind))
            self._history.append(_Entry("assistant", text, text, response_id=rid, task_id=task_id))
            for s in speech:
                task = self.tasks.get(s.task_id or "")
                for call_id in s.calls:
                    self.db.mark_delivered(
                        call_id, _ns(self._now_ms), task.version if task else None, rid
                    )
                    self._deliveries.setdefault(rid, []).append(call_id)
                if task is not None and s.kind == "confirm" and task.awaiting == "confirm":
                    task.confirm_rid = rid
                    task.confirm_heard = True
        self._out, self._speech, self._rid = [], [], None
        self._user_turn, self._utt = False, None
        return out

    def _turn_rid(self) -> str:
        if self._rid is None:
            self._n_resp += 1
            self._rid = f"r{self._n_resp}"
        return self._rid

    def _speak(
        self,
        text: str,
        kind: SayKind,
        task: _Task | None = None,
        calls: Sequence[str] = (),
        version: int | None = None,
    ) -> None:
        text = text.replace("..", ".")  # "at 10 a.m.." -> "at 10 a.m."
        self._speech.append(
            _Speech(
                text,
                kind,
                task.task_id if task else None,
                tuple(calls),
                version,
                task.status if task else None,
            )
        )

    def _event(
        self,
        event_type: str,
        data: dict[str, Any],
        *,
        task_id: str | None = None,
        response_id: str | None = None,
        at_ms: float | None = None,
    ) -> None:
        utt = self._utt if self._user_turn else None
        self._out.append(Event(event_type, data, task_id, response_id, utt, at_ms))

    def _state(self, task: _Task, action: str) -> None:
        if self._user_turn:
            task.response_id = self._turn_rid()
            task.utterance_id = self._utt
        self._event(
            "task.state",
            {
                "version": task.version,
                "fields": {k: v for k, v in task.fields.items() if v is not None},
                "status": task.status,
                "action": action,
                "kind": task.kind,
            },
            task_id=task.task_id,
            response_id=task.response_id,
        )

    def _new_task(self, kind: str, fields: dict[str, Any], topic: str | None = None) -> _Task:
        for old in self.tasks.values():
            if old.status == "active" and old.awaiting and not self._task_pending(old):
                old.status = "superseded"
                self._state(old, "cancel")
        self._n_task += 1
        self._n_seq += 1
        task = _Task(f"t{self._n_task}", kind, dict(fields), topic=topic, seq=self._n_seq)
        self.tasks[task.task_id] = task
        self._state(task, "keep")
        return task

    def _touch(self, task: _Task) -> None:
        self._n_seq += 1
        task.seq = self._n_seq

    def _task_pending(self, task: _Task) -> list[_Pending]:
        return [p for p in self._pending.values() if p.task_id == task.task_id]

    def _latency(self, tool: str, write: bool) -> float:
        return float(self.latencies.get(tool, self.latencies["write" if write else "read"]))

    def _request(
        self,
        task: _Task,
        tool: str,
        arguments: dict[str, Any],
        *,
        key: str | None = None,
        version: int | None = None,
        response_id: str | None = None,
        compensates: str | None = None,
        retries: int = 0,
    ) -> _Pending:
        write = tool != "check_availability"
        if write and key is None:
            task.attempts += 1
            key = f"{self.session_id}/{task.task_id}/w{task.attempts}"
        if response_id is None:
            response_id = (
                self._turn_rid() if self._user_turn else (task.response_id or self._turn_rid())
            )
        version = task.version if version is None else version
        call_id = self.db.request(
            tool,
            arguments,
            idempotency_key=key,
            task_id=task.task_id,
            task_version=version,
            response_id=response_id,
            requested_ns=_ns(self._now_ms),
            compensates=compensates,
            meta={"retry": retries} if retries else None,
        )
        self._n_seq += 1
        p = _Pending(
            call_id,
            task.task_id,
            tool,
            dict(arguments),
            version,
            self._now_ms + self._latency(tool, write),
            key if write else None,
            write,
            response_id,
            self._n_seq,
            compensates,
            retries,
            self._now_ms,
        )
        self._pending[call_id] = p
        data: dict[str, Any] = {
            "call_id": call_id,
            "tool": tool,
            "arguments": dict(arguments),
            "idempotency_key": p.key,
            "task_version": version,
        }
        if compensates:
            data["compensates"] = compensates
        if retries:
            data["retry"] = retries
        self._event("tool.requested", data, task_id=task.task_id, response_id=response_id)
        return p

    def _holding(self, now: float) -> bool:
        """The user is speaking, or their text is not in yet (careful waits for it)."""
        return self._user_active or (self._hold_until is not None and self._hold_until > now)

    def _advance(self, now: float) -> None:
        """Finish every call that is due by ``now``, in time order: careful holds writes
        (no commit) and results (no announcement) while the user is speaking."""
        while True:
            self._finish_due(now)
            if self._hold_until is not None and self._hold_until <= now:
                self._hold_until = None
            if not self._deferred or self._holding(now):
                break
            deferred, self._deferred = self._deferred, []
            for p, out, t in deferred:
                self._on_outcome(p, out, t)
        self._notice_slow(now)

    def _finish_due(self, now: float) -> None:
        while True:
            ready: list[tuple[float, int, _Pending]] = []
            for p in self._pending.values():
                t = p.due_ms
                if p.write and p.compensates is None and not self.policy.writes_after_stop:
                    if self._user_active:
                        continue
                    if self._hold_until is not None and t < self._hold_until:
                        if self._hold_until > now:
                            continue
                        t = self._hold_until
                if t <= now:
                    ready.append((t, p.seq, p))
            if not ready:
                break
            t, _, p = min(ready, key=lambda r: (r[0], r[1]))
            self._complete(p, t, now)

    def _notice_slow(self, now: float) -> None:
        if self.slow_notice_ms > 0:
            slow = [
                p
                for p in self._pending.values()
                if not p.noticed and now - p.requested_ms >= self.slow_notice_ms
            ]
            for p in slow:
                p.noticed = True
            if slow and self._connected:
                self._speak(
                    "Sorry, this is taking a little longer than usual. I'm still working on it.",
                    "answer",
                    self.tasks[slow[0].task_id],
                )

    def _complete(self, p: _Pending, t: float, now: float) -> None:
        del self._pending[p.call_id]
        if not self._connected:
            self.db.execute(p.call_id, _ns(t), lost=True)
            self._lost.append(p)
            return
        out = self.db.execute(p.call_id, _ns(t))
        if not self.policy.delivers_stale_results and self._holding(now):
            self._deferred.append((p, out, t))  # handled once the user's words are in
            return
        self._on_outcome(p, out, t)

    # ------------------------------------------------------------------ results

    def _on_outcome(self, p: _Pending, out: CallOutcome, t: float) -> None:
        task = self.tasks[p.task_id]
        data: dict[str, Any] = {
            "call_id": p.call_id,
            "tool": p.tool,
            "arguments": p.arguments,
            "idempotency_key": p.key,
            "task_version": p.version,
            "status": "ok" if out.ok else "failed",
            "committed": out.committed,
            "replayed": out.replayed,
            "result": out.result,
        }
        if out.error:
            data["error"] = out.error
        self._event(
            "tool.completed" if out.ok else "tool.failed",
            data,
            task_id=task.task_id,
            response_id=p.response_id,
            at_ms=t,
        )
        res = out.result if isinstance(out.result, dict) else {}
        if p.compensates is not None:
            if not out.ok:
                self._speak(
                    "I'm sorry, I couldn't undo that change. A colleague will call you back "
                    "to sort it out.",
                    "announce",
                    task,
                )
            elif task.kind == "book" and task.appointment_id == res.get("appointment_id"):
                task.appointment_id = None
            if out.ok and task.status == "cancelled":
                # the undo is the task's last word: say it is done (its final result)
                self._speak(_undone_text(p.tool, res), "announce", task, (p.call_id,), p.version)
            if task.status == "active":
                self._reconcile(task, quiet=True)
            return
        if out.ok and p.write:
            task.writes.append(p.call_id)
            if p.tool == "book_appointment" and res.get("appointment_id"):
                task.appointment_id = str(res["appointment_id"])
                self._session_appts.append(task.appointment_id)
        if task.status in ("cancelled", "superseded"):
            if out.ok and p.write:
                self._compensate(task, p.call_id)
            return
        stale = p.version < task.version
        if stale and not self.policy.delivers_stale_results:
            self._reconcile(task, quiet=True)
            return
        self._announce(task, p, out.ok, res)
        self._reconcile(task, quiet=True)

    def _announce(self, task: _Task, p: _Pending, ok: bool, res: dict[str, Any]) -> None:
        calls = (p.call_id,)
        if p.tool == "check_availability" and ok:
            day, slots = str(res.get("date")), [str(x) for x in res.get("slots") or []]
            task.queried = (day, p.version)
            task.offered = slots
            if slots:
                text = (
                    f"On {say_date(day)} I have {_say_list([say_time(x) for x in slots])}. "
                    "Which time would you like?"
                )
                task.awaiting = "time"
            else:
                text = f"I'm sorry, {say_date(day)} is fully booked. Would another day work?"
                task.awaiting = "date"
                task.blocked_version = task.version
            self._speak(text, "announce", task, calls, p.version)
            return
        if ok:
            if p.tool == "book_appointment":
                what = task.topic or "appointment"
                text = (
                    f"You're all set, {res.get('name')}. Your {what} is booked for "
                    f"{say_date(str(res['date']))} at {say_time(str(res['time']))}, and we'll "
                    f"text a reminder to {say_phone(str(res.get('contact')))}."
                )
            elif p.tool == "reschedule_appointment":
                text = (
                    f"Done. Your appointment is now on {say_date(str(res['date']))} at "
                    f"{say_time(str(res['time']))}."
                )
            elif p.tool == "cancel_appointment":
                text = (
                    f"Your appointment on {say_date(str(res['date']))} at "
                    f"{say_time(str(res['time']))} has been cancelled."
                )
            elif p.tool == "update_contact":
                text = f"I've updated your phone number to {say_phone(str(res.get('contact')))}."
            else:
                text = "That's done."
            task.awaiting = None
            self._speak(text, "announce", task, calls, p.version)
            return
        code = str(res.get("status") or "error")
        task.blocked_version = task.version
        if code == "unavailable":
            alts = [str(a) for a in res.get("alternatives") or []]
            day, time = str(res.get("date")), str(res.get("time"))
            task.offered = alts
            if alts:
                task.awaiting = "time"
                text = (
                    f"I'm sorry, {say_time(time)} on {say_date(day)} isn't available. That day "
                    f"I have {_say_list([say_time(a) for a in alts])}. Which would you like?"
                )
            else:
                task.awaiting = "date"
                text = f"I'm sorry, {say_date(day)} is fully booked. Would another day work?"
        elif code == "past_date":
            task.awaiting = "date"
            text = "I'm sorry, that date has already passed. What day would you like instead?"
        elif code in ("not_found", "not_booked", "already_cancelled"):
            task.awaiting = "appointment"
            text = (
                "I'm sorry, I couldn't find a booked appointment for that. "
                "What name is it booked under?"
            )
        else:
            what = {
                "check_availability": "check the calendar",
                "book_appointment": "make the booking",
                "reschedule_appointment": "move the appointment",
                "cancel_appointment": "cancel the appointment",
                "update_contact": "change the phone number",
            }.get(p.tool, "do that")
            text = (
                f"I'm sorry, our system isn't working right now, so I couldn't {what} and "
                "nothing has been changed. Please try again a little later, or I can ask a "
                "colleague to call you back."
            )
            task.status = "cancelled"  # refused: nothing more will be tried for it
            task.awaiting = None
            self._state(task, "refuse")
        self._speak(text, "announce", task, calls, p.version)

    def _compensate(self, task: _Task, call_id: str) -> None:
        """Request the inverse of a committed write (once)."""
        row = self.db.call(call_id)
        if row["status"] == "compensated" or not row["committed"]:
            return
        if any(p.compensates == call_id for p in self._pending.values()):
            return
        tool, args = self.db.compensation_for(call_id)
        key = f"{row.get('idempotency_key') or call_id}:compensate"
        self._request(task, tool, args, key=key, compensates=call_id)

    def _standing_writes(self, task: _Task) -> list[str]:
        out = []
        for call_id in task.writes:
            row = self.db.call(call_id)
            if row["committed"] and row["status"] != "compensated":
                out.append(call_id)
        return out

    # ------------------------------------------------------------------ the task engine

    def _blocking(self, task: _Task) -> bool:
        """A call of the task is in flight (or its result waits) that the next step must
        wait for; careful does not wait for a read made for an older version (its result
        will be dropped)."""
        waiting = [*self._task_pending(task)]
        waiting += [p for p, _, _ in self._deferred if p.task_id == task.task_id]
        return any(
            p.write or p.version >= task.version or self.policy.delivers_stale_results
            for p in waiting
        )

    def _ask(self, task: _Task, what: str, text: str) -> None:
        task.awaiting = what
        self._speak(text, "clarify", task)

    def _reconcile(self, task: _Task, *, quiet: bool = False) -> None:
        """The next step that brings the backend to the task's fields: a tool call, a
        question for what is missing, or the task is completed."""
        if task.status != "active" or self._blocking(task):
            return
        if task.blocked_version == task.version:
            return
        f = task.fields
        if task.kind == "book":
            self._reconcile_book(task, f, quiet)
            return
        appt = self.db.appointment(str(f.get("appointment_id") or ""))
        if appt is None:
            self._ask(task, "appointment", "Which appointment is it? What name is it under?")
            return
        when = f"{say_date(appt['date'])} at {say_time(appt['time'])}"
        if task.kind == "reschedule":
            if not f.get("date"):
                self._ask(
                    task,
                    "date",
                    f"Your appointment is on {when}. What day would you like to move it to?",
                )
                return
            target = f.get("time") or appt["time"]
            if appt["status"] == "booked" and (appt["date"], appt["time"]) == (f["date"], target):
                self._complete_task(task)
                return
            args: dict[str, Any] = {"appointment_id": appt["id"], "date": f["date"]}
            if f.get("time"):
                args["time"] = f["time"]
            if not quiet:
                self._speak(
                    f"Sure, I'll move your appointment from {say_date(appt['date'])} to "
                    f"{say_date(f['date'])} at {say_time(target)}.",
                    "confirm",
                    task,
                )
            self._request(task, "reschedule_appointment", args)
        elif task.kind == "cancel":
            if appt["status"] == "cancelled":
                self._complete_task(task)
                return
            if self.policy.confirms_irreversible and not task.confirmed:
                task.awaiting = "confirm"
                self._speak(
                    f"Just to confirm, you'd like to cancel your appointment on {when}? "
                    "Please say yes to go ahead.",
                    "confirm",
                    task,
                )
                return
            task.awaiting = None
            self._speak(f"Okay, I'm cancelling your appointment on {when}.", "confirm", task)
            self._request(task, "cancel_appointment", {"appointment_id": appt["id"]})
        elif task.kind == "update_contact":
            if not f.get("contact"):
                self._ask(task, "contact", "Sure. What's the new phone number?")
                return
            if appt["contact"] == f["contact"]:
                self._complete_task(task)
                return
            if not quiet:
                self._speak(
                    f"Okay, I'm changing your number to {say_phone(str(f['contact']))}.",
                    "confirm",
                    task,
                )
            self._request(
                task, "update_contact", {"appointment_id": appt["id"], "contact": f["contact"]}
            )

    def _reconcile_book(self, task: _Task, f: dict[str, Any], quiet: bool) -> None:
        if not f.get("date"):
            self._ask(task, "date", "Sure. What day would you like to come in?")
            return
        if not f.get("time"):
            if task.queried == (f["date"], task.version) and task.offered:
                task.awaiting = "time"
                return  # the free times were offered: waiting for the user's pick
            self._speak(f"Let me check what we have on {say_date(f['date'])}.", "answer", task)
            self._request(task, "check_availability", {"date": f["date"]})
            return
        if not f.get("name"):
            if not self.caller_name:
                self._ask(task, "name", "What name should I put the appointment under?")
                return
            f["name"] = self.caller_name
        if not f.get("contact"):
            if not self.caller_contact:
                self._ask(task, "contact", "And what's the best phone number to reach you?")
                return
            f["contact"] = self.caller_contact
        task.awaiting = None
        if task.appointment_id is None:
            if not quiet:
                what = f"a {task.topic}" if task.topic else "an appointment"
                self._speak(
                    f"Great, I'm booking {what} for {f['name']} on {say_date(f['date'])} at "
                    f"{say_time(f['time'])}.",
                    "confirm",
                    task,
                )
            args = {k: f[k] for k in ("name", "date", "time", "contact")}
            self._request(task, "book_appointment", args)
            return
        appt = self.db.appointment(task.appointment_id)
        if appt is None or appt["status"] != "booked":
            task.appointment_id = None
            self._reconcile_book(task, f, quiet)
            return
        held = (appt["date"], appt["time"], appt["contact"], str(appt["name"]).casefold())
        want = (f["date"], f["time"], normalize_phone(str(f["contact"])), str(f["name"]).casefold())
        if held == want:
            self._complete_task(task)
            return
        # The booking committed with old values: cancel it (a compensation) and book again,
        # so that every write left standing carries the latest values.
        for call_id in self._standing_writes(task):
            self._compensate(task, call_id)

    def _complete_task(self, task: _Task) -> None:
        if task.status != "completed":
            task.status = "completed"
            task.awaiting = None
            self._state(task, "keep")

    # ------------------------------------------------------------------ dialogue

    def _dispatch(self, u: Understanding) -> None:
        intent = u.intent
        waiting = self._awaiting()
        wants_name = self._lookup_pending or (
            waiting is not None and waiting.awaiting in ("name", "appointment")
        )
        if intent in (UNKNOWN, GREETING) and wants_name and _free_name(u.text):
            intent = INFORM  # a bare name answering "what name is it under?"
        if intent == EMPTY:
            return
        if intent == BACKCHANNEL:
            task = self._awaiting("confirm")
            if task is not None and u.affirmative:
                self._confirm(task)
            elif self.policy.answers_backchannels:
                self._speak("Sorry, did you want to add something?", "answer")
            return
        if intent == HOLD:
            if not self.policy.writes_after_stop:
                self._hold_until = self._now_ms + self.hold_on_ms
            self._speak("Sure, take your time.", "backchannel")
            return
        if intent == STOP:
            self._stop()
        elif intent in TASK_INTENTS:
            self._start(u)
        elif intent == CONFIRM:
            task = self._awaiting("confirm")
            if task is not None:
                self._confirm(task)
            elif not self._reask():
                self._speak("Okay. What else can I help you with?", "answer")
        elif intent == DENY:
            task = self._awaiting("confirm")
            if task is not None:
                task.status = "cancelled"
                task.awaiting = None
                self._state(task, "cancel")
                self._speak("Okay, I'll leave your appointment as it is.", "answer", task)
            elif not self._reask():
                self._speak("Alright. Is there anything else I can help you with?", "answer")
        elif intent in (CORRECTION, INFORM):
            self._inform(u)
        elif intent == GREETING:
            self._speak(GREETING_TEXT, "answer")
        elif intent == PRESENCE:
            self._speak("Yes, I'm still here.", "answer")
            if not self._reask():
                self._speak("How can I help?", "answer")
        elif intent == THANKS:
            self._speak("You're welcome! Is there anything else I can help you with?", "answer")
        elif intent == BYE:
            self._speak("Thanks for calling Riverside Dental. Have a great day!", "answer")
        elif intent == UNKNOWN:
            self._speak(CLARIFY_TEXT, "clarify")
        questions = ([intent] if intent in QUESTION_INTENTS else []) + list(u.questions)
        for q in questions:
            self._answer(q)
        if intent in QUESTION_INTENTS:
            self._reask()

    def _awaiting(self, what: str | None = None) -> _Task | None:
        for task in sorted(self.tasks.values(), key=lambda t: -t.seq):
            if task.status == "active" and task.awaiting and what in (None, task.awaiting):
                return task
        return None

    def _reask(self) -> bool:
        """Repeat the open question of the task waiting for input, if any."""
        task = self._awaiting()
        if task is None:
            return False
        if task.awaiting == "confirm":
            task.confirmed = False
            task.awaiting = None
            self._reconcile(task)
            return True
        offered = _say_list([say_time(x) for x in task.offered])
        questions = {
            "date": "What day would you like?",
            "time": f"Which time would you like: {offered}?" if offered else "What time?",
            "name": "What name should I put the appointment under?",
            "contact": "What's the best phone number to reach you?",
            "appointment": "What name is the appointment booked under?",
        }
        self._speak(questions.get(task.awaiting or "", "How can I help?"), "clarify", task)
        return True

    def _confirm(self, task: _Task) -> None:
        if not task.confirm_heard and not self.policy.keeps_unheard_text:
            # the question was cut before the user heard all of it: ask again, don't act
            appt = self.db.appointment(str(task.fields.get("appointment_id") or ""))
            when = f"{say_date(appt['date'])} at {say_time(appt['time'])}" if appt else "then"
            self._speak(
                f"Sorry, just to be sure: should I cancel your appointment on {when}?",
                "confirm",
                task,
            )
            return
        task.confirmed = True
        task.awaiting = None
        self._touch(task)
        self._reconcile(task)

    def _answer(self, q: str) -> None:
        if q == ASK_POLICY:
            self._speak(POLICY_TEXT, "answer")
        elif q == ASK_HOURS:
            self._speak(HOURS_TEXT, "answer")
        elif q == ASK_LOCATION:
            self._speak(LOCATION_TEXT, "answer")
        elif q == ASK_APPOINTMENT:
            appts = self._my_appointments()
            booking = [
                t
                for t in self.tasks.values()
                if t.status == "active" and t.kind == "book" and t.fields.get("time")
                if any(p.write for p in self._task_pending(t))
            ]
            if booking and not any(a["id"] in self._session_appts for a in appts):
                f = booking[-1].fields
                self._speak(
                    f"I'm still booking your appointment for {say_date(f['date'])} at "
                    f"{say_time(f['time'])}. I'll confirm as soon as it's done.",
                    "answer",
                )
                return
            if not appts or (len(appts) > 1 and self.caller_name is None):
                self._lookup_pending = True
                self._speak(
                    "Let me look that up. What name is the appointment booked under?", "clarify"
                )
                return
            self._lookup_pending = False
            parts = [f"{say_date(a['date'])} at {say_time(a['time'])}" for a in appts]
            if len(parts) == 1:
                text = f"Your appointment is on {parts[0]}."
            else:
                text = f"You have {len(parts)} appointments: on {_say_list(parts)}."
            moving = [
                t
                for t in self.tasks.values()
                if t.status == "active"
                and t.kind == "reschedule"
                and t.fields.get("date")
                and any(p.write for p in self._task_pending(t))
            ]
            if moving:
                text += f" I'm moving it to {say_date(moving[-1].fields['date'])} right now."
            self._speak(text, "answer")

    def _my_appointments(self, date: str | None = None) -> list[dict[str, Any]]:
        """The caller's booked appointments: the one booked in this session, else those
        under the caller's name once it is known, else every booked one (on ``date``)."""
        booked = self.db.appointments(date=date)
        session = [a for a in booked if a["id"] in self._session_appts]
        if session and date is None:
            return [max(session, key=lambda a: self._session_appts.index(a["id"]))]
        if self.caller_name:
            name = self.caller_name.casefold()
            return [a for a in booked if str(a["name"]).casefold() == name]
        return booked

    def _find_appointment(
        self, u: Understanding, all_dates: bool = False
    ) -> tuple[str | None, list[dict[str, Any]]]:
        refs = [d for d in u.dates if all_dates or d.ref]
        date = self._resolve_date(refs[-1], None) if refs else None
        cands = self._my_appointments(date)
        if len(cands) == 1:
            return str(cands[0]["id"]), cands
        return None, cands

    def _start(self, u: Understanding) -> None:
        kind = {
            BOOK: "book",
            AVAILABILITY: "book",
            RESCHEDULE: "reschedule",
            CANCEL_APPT: "cancel",
            UPDATE_CONTACT: "update_contact",
        }[u.intent]
        current = self._current()
        if kind == "book":
            if current is not None and current.kind == "book" and current.status == "active":
                self._inform(u)
                return
            values = self._values(u, None, None, include_refs=True)
            if values.get("contact"):
                self.caller_contact = values["contact"]
            book = {k: values.get(k) for k in _FIELDS["book"]}
            self._reconcile(self._new_task("book", book, u.topic))
            return
        appt_id, cands = self._find_appointment(u, all_dates=kind == "cancel")
        if (
            current is not None
            and current.status == "active"
            and current.kind == kind
            and current.fields.get("appointment_id") in (appt_id, None)
        ):
            self._inform(u)  # the same request again (after a drop, or reworded)
            return
        appt = self.db.appointment(appt_id) if appt_id else None
        values = self._values(u, appt["date"] if appt else None, None)
        fields: dict[str, Any] = {"appointment_id": appt_id}
        if kind == "reschedule":
            fields.update(date=values.get("date"), time=values.get("time"))
        elif kind == "update_contact":
            fields["contact"] = values.get("contact")
            if values.get("contact"):
                self.caller_contact = values["contact"]
        task = self._new_task(kind, fields)
        if appt_id is None:
            if len(cands) > 1:
                listed = _say_list(
                    [f"{say_date(a['date'])} at {say_time(a['time'])}" for a in cands[:4]]
                )
                self._ask(
                    task, "appointment", f"I see appointments on {listed}. Which one is yours?"
                )
            else:
                self._ask(task, "appointment", "Sure. What name is the appointment booked under?")
            return
        self._reconcile(task)

    def _current(self) -> _Task | None:
        """The task values go to: one awaiting input, else the latest active, else the latest
        completed (a correction right after a task finished reopens it)."""
        order = sorted(self.tasks.values(), key=lambda t: -t.seq)
        for status, needs_wait in (("active", True), ("active", False), ("completed", False)):
            for t in order:
                if t.status == status and (t.awaiting is not None or not needs_wait):
                    return t
        return None

    def _values(
        self,
        u: Understanding,
        ref_date: str | None,
        task: _Task | None,
        *,
        include_refs: bool = False,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        dates = [d for d in u.dates if not d.negated and (include_refs or not d.ref)]
        if dates:
            resolved = self._resolve_date(dates[-1], ref_date)
            if resolved:
                out["date"] = resolved
        offered = task.offered if task is not None else []
        times = [t for t in u.times if not t.negated]
        if times:
            t = times[-1]
            out["time"] = _resolve_time(t.hour, t.minute, t.ampm, offered)
        elif task is not None and task.awaiting == "time" and u.bare_numbers:
            out["time"] = _resolve_time(u.bare_numbers[-1], 0, None, offered)
        if u.phone:
            out["contact"] = u.phone
        name = u.name
        if name is None and task is not None and task.awaiting in ("name", "appointment"):
            name = _free_name(u.text)
        if name:
            out["name"] = name
        return out

    def _resolve_date(self, m: DateMention, ref: str | None) -> str | None:
        """A date mention as ISO: the year is this year (next year once the date passed); a
        day alone takes the month of ``ref`` (the date being corrected) or the next month
        that has it (and the weekday, when one was said); a weekday alone is that day in
        the week of ``ref``, else the next one."""
        today = self.today
        base = dt.date.fromisoformat(ref) if ref else None
        if m.rel_days is not None:
            return (today + dt.timedelta(days=m.rel_days)).isoformat()
        if m.day is not None and m.month is not None:
            year = m.year or today.year
            for y in (year, year + 1):
                try:
                    d = dt.date(y, m.month, m.day)
                except ValueError:
                    return None
                if d >= today or m.year is not None:
                    return d.isoformat()
            return None
        if m.day is not None:
            start = base or today
            for k in range(14):
                y, mo = divmod(start.month - 1 + k, 12)
                try:
                    d = dt.date(start.year + y, mo + 1, m.day)
                except ValueError:
                    continue
                if d >= today and (m.weekday is None or d.weekday() == m.weekday):
                    return d.isoformat()
            return None
        if m.weekday is not None:
            if base is not None:
                d = base + dt.timedelta(days=m.weekday - base.weekday())
                if d > today:
                    return d.isoformat()
            ahead = (m.weekday - today.weekday()) % 7 or 7
            return (today + dt.timedelta(days=ahead)).isoformat()
        return None

    def _inform(self, u: Understanding) -> None:
        """Values (date, time, phone, name) for the current task, or a new booking."""
        if self._lookup_pending and (u.name or u.dates or _free_name(u.text)):
            self._lookup_pending = False
            self.caller_name = u.name or _free_name(u.text) or self.caller_name
            self._answer(ASK_APPOINTMENT)
            return
        task = self._current()
        if task is None:
            values = self._values(u, None, None, include_refs=True)
            if values.get("contact"):
                self.caller_contact = values["contact"]
            if values.get("date") or values.get("time"):
                fields = {k: values.get(k) for k in _FIELDS["book"]}
                self._reconcile(self._new_task("book", fields, u.topic))
            elif values.get("name"):
                self._speak(f"Thanks, {values['name']}. How can I help you today?", "answer")
            elif values.get("contact"):
                self._speak("Thanks, I've noted your number. How can I help you today?", "answer")
            else:
                self._speak(CLARIFY_TEXT, "clarify")
            return
        if task.awaiting == "appointment":
            self._identify(task, u)
            return
        appt = self.db.appointment(
            str(task.fields.get("appointment_id") or task.appointment_id or "")
        )
        ref = task.fields.get("date") or (appt["date"] if appt else None)
        values = self._values(u, ref, task, include_refs=task.kind == "book")
        if "contact" in values:
            self.caller_contact = values["contact"]
        if u.partial_phone and "contact" not in values and task.awaiting == "contact":
            self._speak(
                f"Sorry, I only caught {len(u.partial_phone)} digits. Could you say the whole "
                "number again?",
                "clarify",
                task,
            )
            return
        fits = {k: v for k, v in values.items() if k in _FIELDS[task.kind]}
        spill = {k: v for k, v in values.items() if k not in fits and k != "name"}
        if fits:
            self._set_fields(task, fits)
        if spill:
            self._spill(task, spill)
        if not fits and not spill and not self._reask():
            self._speak(CLARIFY_TEXT, "clarify")

    def _identify(self, task: _Task, u: Understanding) -> None:
        """The answer to "which appointment / what name is it under?"."""
        name = u.name or _free_name(u.text)
        hits: list[dict[str, Any]] = []
        if name:
            self.caller_name = name
            hits = self.db.appointments(name=name)
        if u.dates and len(hits) != 1:
            d = self._resolve_date(u.dates[-1], None)
            pool = hits or self.db.appointments()
            hits = [a for a in pool if a["date"] == d]
        if len(hits) != 1:
            self._speak(
                "I'm sorry, I can't find that appointment. Could you tell me the name and the "
                "date it's booked for?",
                "clarify",
                task,
            )
            return
        task.awaiting = None
        self._set_fields(task, {"appointment_id": hits[0]["id"]})

    def _spill(self, task: _Task, values: dict[str, Any]) -> None:
        """Values that belong to another task on the same appointment (a new number while
        rescheduling, a new date after a contact change)."""
        appt_id = task.fields.get("appointment_id") or task.appointment_id
        if not appt_id:
            self._speak(CLARIFY_TEXT, "clarify")
            return
        if "contact" in values:
            fields = {"appointment_id": appt_id, "contact": values["contact"]}
            self._reconcile(self._new_task("update_contact", fields))
        if "date" in values or "time" in values:
            fields = {
                "appointment_id": appt_id,
                "date": values.get("date") or (self.db.appointment(str(appt_id)) or {}).get("date"),
                "time": values.get("time"),
            }
            self._reconcile(self._new_task("reschedule", fields))

    def _set_fields(self, task: _Task, values: dict[str, Any]) -> None:
        """Apply new field values: a new task version; careful drops writes in flight for
        the old version; then the next step."""
        changes = {k: v for k, v in values.items() if task.fields.get(k) != v}
        self._touch(task)
        if not changes:
            if not self._reask() and not self._task_pending(task):
                self._speak("Yes, that's what I have.", "answer", task)
            return
        picked = task.awaiting in changes  # an answer to the open question, not a correction
        corrected = {
            k: (task.fields.get(k), v)
            for k, v in changes.items()
            if task.fields.get(k) and not (picked and k == task.awaiting)
        }
        task.fields.update(changes)
        task.version += 1
        task.blocked_version = None
        if task.awaiting in changes or task.awaiting in ("date", "time", "confirm"):
            task.awaiting = None
        if task.kind == "cancel":
            task.confirmed = False
        if task.status == "completed":
            task.status = "active"
        self._state(task, "modify" if corrected else "keep")
        if not self.policy.delivers_stale_results:
            for p in self._task_pending(task):
                if p.write and p.compensates is None and p.version < task.version:
                    self._drop(p, f"superseded by task version {task.version}")
        parts = [
            f"{_say_field(k, new)} instead of {_say_field(k, old)}"
            for k, (old, new) in corrected.items()
            if k != "appointment_id"
        ]
        if parts:
            self._speak(f"Got it: {_say_list(parts)}.", "confirm", task)
        before = {p.call_id for p in self._task_pending(task)}
        self._reconcile(task, quiet=bool(parts))
        if parts and any(p.write for p in self._task_pending(task) if p.call_id not in before):
            self._speak("I'm updating that now.", "confirm", task)

    def _drop(self, p: _Pending, reason: str) -> None:
        """A pending call that will not run (nothing commits)."""
        self._pending.pop(p.call_id, None)
        self.db.cancel_call(p.call_id, _ns(self._now_ms), reason)
        self._event(
            "tool.failed",
            {
                "call_id": p.call_id,
                "tool": p.tool,
                "arguments": p.arguments,
                "idempotency_key": p.key,
                "task_version": p.version,
                "status": "cancelled",
                "committed": False,
                "error": reason,
            },
            task_id=p.task_id,
            response_id=p.response_id,
        )

    def _stop(self) -> None:
        """Cancel the current (or just-finished) task: pending calls are dropped (a write is
        let through with ``writes_after_stop``), committed writes are compensated."""
        order = sorted(self.tasks.values(), key=lambda t: -t.seq)
        task = next((t for t in order if t.status == "active"), None) or next(
            (t for t in order if t.status == "completed"), None
        )
        if task is None:
            self._speak("Okay, no problem. What else can I help you with?", "answer")
            return
        dropped = False
        for p in self._task_pending(task):
            if p.compensates is not None or (p.write and self.policy.writes_after_stop):
                dropped = dropped or p.write
                continue
            self._drop(p, "cancelled: the user said stop")
            dropped = dropped or p.write
        undo = self._standing_writes(task)
        task.status = "cancelled"
        task.awaiting = None
        self._touch(task)
        self._state(task, "compensate" if undo else "cancel")
        for call_id in reversed(undo):
            self._compensate(task, call_id)
        appt = self.db.appointment(str(task.fields.get("appointment_id") or ""))
        if task.kind == "book":
            tail = (
                "I'm cancelling the booking I just made, so nothing is booked."
                if undo
                else "Nothing has been booked."
            )
        elif task.kind == "reschedule" and appt is not None:
            prev = (self.db.call(undo[0]).get("result") or {}).get("previous") if undo else None
            if prev:
                tail = (
                    f"I'm moving your appointment back to {say_date(prev['date'])} at "
                    f"{say_time(prev['time'])}."
                )
            else:
                tail = (
                    f"Your appointment stays on {say_date(appt['date'])} at "
                    f"{say_time(appt['time'])}."
                )
        elif task.kind == "cancel":
            tail = (
                "I'm restoring your appointment." if undo else "Your appointment is still booked."
            )
        elif task.kind == "update_contact":
            tail = "I'm changing your number back." if undo else "Your number stays the same."
        else:
            tail = "Nothing has been changed."
        head = "Okay, I've stopped that." if dropped or undo else "Okay, no problem."
        self._speak(f"{head} {tail}", "answer", task)


def _undone_text(tool: str, res: Mapping[str, Any]) -> str:
    when = ""
    if res.get("date") and res.get("time"):
        when = f" for {say_date(str(res['date']))} at {say_time(str(res['time']))}"
    if tool == "cancel_appointment":
        return f"That's undone: the booking{when} is cancelled."
    if tool == "reschedule_appointment":
        return f"That's undone: your appointment is back{when.replace(' for', ' on')}."
    if tool == "restore_appointment":
        return f"That's undone: your appointment{when} is booked again."
    if tool == "update_contact":
        return f"That's undone: your number is {say_phone(str(res.get('contact')))} again."
    return "That's undone."


def _resolve_time(hour: int, minute: int, ampm: str | None, offered: Sequence[str]) -> str:
    h = hour
    if ampm == "am":
        h = hour % 12
    elif ampm == "pm":
        h = hour % 12 + 12
    elif hour <= 12:
        options = [f"{(hour % 12) + add:02d}:{minute:02d}" for add in (0, 12)]
        for opt in options:
            if opt in offered:
                return opt
        if 7 <= hour <= 11:
            h = hour
        elif hour == 12:
            h = 12
        elif 1 <= hour <= 6:
            h = hour + 12
    return f"{h:02d}:{minute:02d}"


def _ns(ms: float) -> int:
    return round(float(ms) * 1_000_000)
