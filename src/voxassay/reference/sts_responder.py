"""The reference speech-to-speech responder: rules from words (both modes) and, when it is
allowed to listen (``prosody_aware`` in AO), from measured prosody.

Inputs are only what a system would have: the text it heard or read, the dialogue so far and,
in AO, cues measured on the user's audio (``read_cues``). It never sees an item's labels or
rubric (tested). From words: the topic (keywords of the text and the history), insults (calm,
then back to the topic), urgency words, an agreement ("yes", "okay", "fine") that it acts on.
From prosody (``Cues``): hesitation (quiet), fear (quiet with a raised pitch), low mood (quiet
with a lowered pitch) and agitation (loud): it acknowledges the tone and, for an agreement
said that way, does not act on it but asks first.

Thresholds are set on the shipped renders' voice (piper joe at its default pitch; 0 st = 100
Hz); another speaker's recordings move the pitch cues (a calibration instrument, not a
product).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Cues", "read_cues", "respond"]


@dataclass(frozen=True)
class Cues:
    """What the voice says beyond the words (AO with ``prosody_aware`` only)."""

    hesitant: bool = False
    afraid: bool = False
    low: bool = False
    agitated: bool = False

    def any(self) -> bool:
        return self.hesitant or self.afraid or self.low or self.agitated


def read_cues(features: Mapping[str, float]) -> Cues:
    """Cues from ``measures.prosody.prosody_features`` of the user's turn: agitated when loud
    (active level >= -23.5 dBFS); when quiet (<= -30 dBFS), afraid with a raised pitch (median
    F0 >= 0.5 st re 100 Hz), low with a lowered one (<= -3.8 st), hesitant otherwise. Set on
    the shipped renders (neutral speech sits at -26 dBFS): levels depend on the recording
    chain, so another microphone moves these cues."""
    energy = features.get("energy_db", -26.0)
    f0 = features.get("f0_median_st", 0.0)
    quiet = energy <= -30.0
    afraid = quiet and f0 >= 0.5
    low = quiet and not afraid and f0 <= -3.8
    return Cues(
        hesitant=quiet and not afraid and not low,
        afraid=afraid,
        low=low,
        agitated=energy >= -23.5,
    )


# topic: keywords -> (what it is about, the next step offered)
TOPICS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("parcel", "package", "box", "delivery"),
        "your parcel",
        "I can send a replacement or refund you, and I'll check with the courier.",
    ),
    (
        ("card", "charge", "spending"),
        "the charge on your card",
        "I can freeze the card now and look into the payment with you.",
    ),
    (
        ("dentist", "tooth", "check up"),
        "your dental appointment",
        "I can find you a time, and we'll explain each step as we go.",
    ),
    (
        ("appointment", "doctor", "receptionist"),
        "your appointment",
        "I can move it to another day or find you a new time this week.",
    ),
    (
        ("flight", "gate", "boarding", "wedding"),
        "your flight",
        "Let me find you the next flight and check the gate and departure time.",
    ),
    (
        ("internet", "router", "connection", "wifi"),
        "your internet connection",
        "Let's reset the router together, and if that fails I'll book an engineer.",
    ),
    (
        ("heating", "ceiling", "mould", "engineer", "water"),
        "the repair at your home",
        "I'll send someone, and if water is coming in, turn the water off at the stopcock.",
    ),
    (
        ("accident", "claim", "policy", "fault"),
        "your claim",
        "I'll take the details of the accident and start the claim.",
    ),
    (
        ("bill", "plan", "line", "calls"),
        "your bill",
        "Let me check the charges on your bill and the plan you're on.",
    ),
    (
        ("prescription", "tablets", "medicine", "amoxicillin", "pharmacy"),
        "your prescription",
        "Please speak to the pharmacist or your doctor before the next dose; I'll check your prescription.",
    ),
    (
        ("headphones", "refund", "order", "money back"),
        "your refund",
        "I can arrange a repair, an exchange or a refund for the order.",
    ),
    (
        ("blood", "test", "results", "surgery"),
        "your test results",
        "The doctor will call you to explain the results, and I can book that call.",
    ),
    (
        ("loan", "bank", "deposit", "application"),
        "your loan application",
        "I'll check the decision on your application and the options you have.",
    ),
    (
        ("gym", "membership"),
        "your membership",
        "I can cancel the membership today and email you to confirm.",
    ),
    (
        ("hotel", "room", "breakfast", "park"),
        "your room tonight",
        "I'll find you a room tonight, and parking and breakfast are on us.",
    ),
    (
        ("brakes", "car", "registration", "mechanic"),
        "your car",
        "I'll check when the brakes will be ready and break down the cost for you.",
    ),
    (
        ("table", "movers", "moved", "scratched"),
        "your table",
        "I'm sorry; we'll arrange a repair or a claim for the table.",
    ),
    (
        ("laptop", "battery", "report"),
        "your laptop",
        "Try the charger for a minute; if it stays dark we can repair it and recover your files.",
    ),
    (
        ("gas", "cut off", "supply", "receipt", "oxygen"),
        "your gas supply",
        "I'll put a hold on the cut off now, and you can email the receipt.",
    ),
)

INSULTS = (
    "useless", "ridiculous", "scam", "rude", "hopeless", "rubbish", "thieves", "parasites",
    "crooks", "worst", "cowboys", "idiots", "junk", "heartless", "hiding", "messing",
)  # fmt: skip
URGENT = ("right now", "today", "immediately", "emergency", "ten minutes", "now,", "now.")
SAD_WORDS = ("funeral", "on my own", "grandfather", "daughter", "kids", "coats")
YES = re.compile(r"^(um,? |uh,? )*(yes|yeah|okay|ok|fine|sure)\b")


def _topic(text: str, history: Sequence[tuple[str, str]]) -> tuple[str, str]:
    said = " ".join([text, *(t for role, t in history if role == "user")]).lower()
    for words, noun, step in TOPICS:
        if any(w in text.lower() for w in words):
            return noun, step
    for words, noun, step in TOPICS:
        if any(w in said for w in words):
            return noun, step
    return "this", "Let me look into it for you."


def respond(text: str, history: Sequence[tuple[str, str]], cues: Cues | None = None) -> str:
    """The answer to ``text`` after ``history`` ((role, text) pairs), given ``cues``."""
    heard = " ".join(text.lower().split())
    noun, step = _topic(heard, history)
    cues = cues or Cues()
    agreeing = bool(YES.match(heard))
    parts: list[str] = []
    if agreeing and (cues.hesitant or cues.afraid or cues.low):
        parts.append("It sounds like you're not sure about that, and there's no rush.")
        parts.append("Would you like me to look at another option before we go ahead?")
        return " ".join(parts)
    if cues.afraid:
        parts.append("I can hear that this is worrying you, and I understand.")
    elif cues.low:
        parts.append("I'm sorry, that sounds really hard.")
    elif cues.hesitant:
        parts.append("Take your time, there's no rush.")
    if any(w in heard for w in INSULTS):
        parts.append(f"I understand you're frustrated. Let's focus on {noun}.")
    elif cues.agitated:
        parts.append("I can hear this is stressful, so let's sort it out straight away.")
    if any(w in heard for w in SAD_WORDS) and not (cues.low or cues.afraid):
        parts.append("I'm sorry to hear that.")
    if any(w in heard + "." for w in URGENT):
        parts.append("Let's deal with this right away.")
    if agreeing:
        parts.append("Great, that's all booked and confirmed.")
        return " ".join(parts)
    parts.append(step)
    return " ".join(parts)
