"""What the reference agent understands in a caller's words (no model: lexicons and patterns): intents, topics, dates, times, names, phone numbers, backchannels and stop words (``understand`` -> ``Understanding``), and how it says dates, times and phone numbers back."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from voxassay.core.english import MONTHS, SMALL_CARDINALS, SMALL_ORDINALS, TENS_CARDINALS
from voxassay.reference.clinic import normalize_phone

if TYPE_CHECKING:
    pass


__all__ = [
    "PRESENCE",
    "QUESTION_INTENTS",
    "TASK_INTENTS",
    "DateMention",
    "TimeMention",
    "Understanding",
    "understand",
]


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


def _words(text: str) -> list[str]:
    return text.split()


_UNITS = {w: i for i, w in enumerate(SMALL_CARDINALS[:10])} | {"oh": 0}
_TEENS = {w: i for i, w in enumerate(SMALL_CARDINALS[10:], start=10)}
_TENS = {w: 10 * i for i, w in enumerate(TENS_CARDINALS, start=2)}
_ORDINALS = {w: i for i, w in enumerate(SMALL_ORDINALS) if i} | {"twentieth": 20, "thirtieth": 30}
_MONTH_ABBR = {"jan": 1, "feb": 2, "apr": 4, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11}
_MONTHS = {w: i for i, w in enumerate(MONTHS, start=1)} | _MONTH_ABBR | {"dec": 12}
_MONTH_NAMES = " ".join(MONTHS)


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


PRESENCE = "presence"


NEUTRAL = frozenset(
    {"ask_appointment", "ask_hours", "ask_policy", "ask_location", "greeting", "thanks", "bye"}
    | {"presence", "confirm"}
)
"""Intents that change no task: writes held for the utterance are released before the
answer (stop, correction, new values and new requests are handled first)."""


TASK_INTENTS = (CANCEL_APPT, UPDATE_CONTACT, RESCHEDULE, BOOK, AVAILABILITY)


QUESTION_INTENTS = (ASK_POLICY, ASK_HOURS, ASK_LOCATION, ASK_APPOINTMENT)


_NAME_STOP |= set(_UNITS) | set(_TEENS) | set(_TENS) | set(_ORDINALS) | set(_MONTHS)
_NAME_STOP |= set(_WEEKDAYS) | {"today", "tomorrow", "am", "pm", "noon"}


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


def free_name(text: str) -> str | None:
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
