"""Answers from free text: strict format first, lenient patterns next, else unparseable.

- strict: the last line of the form ``ANSWER: <value>`` whose value is valid for the eval;
- lenient: patterns in the whole reply (a vocabulary term, "clip A", "the same speaker",
  "4/5"), accepted only when they point at exactly one answer;
- otherwise :class:`Unparseable` with a reason. Unparseable answers are counted and
  reported separately; they are never guessed, never scored as wrong, never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voxassay.suites.su.tasks import EVALS, Vocabulary

__all__ = ["PARSER_VERSION", "Parsed", "Unparseable", "parse_answer"]

PARSER_VERSION = "su-parse-1"


@dataclass(frozen=True)
class Parsed:
    """A usable answer: ``value`` is a label, ``A``/``B``, ``same``/``different`` or a float
    rating; ``mode`` is ``strict`` or ``lenient``."""

    value: str | float
    mode: str


@dataclass(frozen=True)
class Unparseable:
    reason: str


_ANSWER_LINE = re.compile(r"^\W*answer\W*[:=\-]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _strict_values(text: str) -> list[str]:
    """Values of ``ANSWER: ...`` lines, last first."""
    return [m.group(1) for m in _ANSWER_LINE.finditer(text)][::-1]


def _clean(value: str) -> str:
    v = value.strip().strip("*`\"'").strip()
    return re.sub(r"[.!]+$", "", v).strip()


_SIDE_STRICT = {
    "a": "A",
    "b": "B",
    "clip a": "A",
    "clip b": "B",
    "1": "A",
    "2": "B",
    "first": "A",
    "second": "B",
    "the first clip": "A",
    "the second clip": "B",
    "first clip": "A",
    "second clip": "B",
}
_SAME_STRICT = {
    "same": "same",
    "different": "different",
    "yes": "same",
    "no": "different",
    "same speaker": "same",
    "different speakers": "different",
    "different speaker": "different",
}

_SIDE_A = re.compile(r"\b(clip\s*a|clip\s*1|first\s+clip|the\s+first(\s+one)?|clip\s+one)\b", re.I)
_SIDE_B = re.compile(
    r"\b(clip\s*b|clip\s*2|second\s+clip|the\s+second(\s+one)?|clip\s+two)\b", re.I
)
_DIFFERENT = re.compile(
    r"\b(different\s+(speakers?|people|persons|voices|individuals)|not\s+the\s+same"
    r"|two\s+different|not\s+spoken\s+by\s+the\s+same)\b",
    re.I,
)
_SAME = re.compile(
    r"\b((the\s+)?same\s+(speaker|person|voice|individual)|spoken\s+by\s+the\s+same)\b", re.I
)
_RATING = re.compile(
    r"(?:\b(?:rating|rate|score)\b[^0-9]{0,20}([1-5](?:\.\d+)?)\b)"
    r"|(?:\b([1-5](?:\.\d+)?)\s*(?:/\s*5|out\s+of\s+5)\b)",
    re.I,
)


def parse_answer(
    task: str, text: str, vocabulary: Vocabulary | None = None
) -> Parsed | Unparseable:
    """Parse the reply ``text`` of eval ``task`` (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        return Unparseable("empty answer")
    kind = EVALS[task].answer
    strict = _strict_values(text)
    if strict:
        value = _clean(strict[0])
        got = _strict_one(kind, value, vocabulary)
        if got is not None:
            return Parsed(got, "strict")
    lenient = _lenient(kind, text, vocabulary)
    if isinstance(lenient, Parsed):
        return lenient
    if strict:
        return Unparseable(f"ANSWER line value {strict[0][:80]!r} is not valid; {lenient.reason}")
    return lenient


def _strict_one(kind: str, value: str, vocabulary: Vocabulary | None) -> str | float | None:
    low = value.lower()
    if kind == "label":
        return vocabulary.lookup(value) if vocabulary is not None else None
    if kind == "side":
        return _SIDE_STRICT.get(low)
    if kind == "same_different":
        return _SAME_STRICT.get(low)
    if kind == "rating":
        m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(?:\s*(?:/\s*5|out of 5))?", low)
        if m:
            r = float(m.group(1))
            return r if 1.0 <= r <= 5.0 else None
    return None


def _lenient(kind: str, text: str, vocabulary: Vocabulary | None) -> Parsed | Unparseable:
    if kind == "label":
        if vocabulary is None:
            return Unparseable("no vocabulary")
        found = _find_labels(text, vocabulary)
        if len(found) == 1:
            return Parsed(found.pop(), "lenient")
        if not found:
            return Unparseable(f"no label of {vocabulary.name} in the answer")
        return Unparseable(f"several labels named: {', '.join(sorted(found))}")
    if kind == "side":
        a, b = bool(_SIDE_A.search(text)), bool(_SIDE_B.search(text))
        if a != b:
            return Parsed("A" if a else "B", "lenient")
        return Unparseable("names both clips" if a else "names neither clip")
    if kind == "same_different":
        diff = bool(_DIFFERENT.search(text))
        # "not the same speaker" must not count as "same speaker"
        same_text = _DIFFERENT.sub(" ", text)
        same = bool(_SAME.search(same_text))
        if diff != same:
            return Parsed("different" if diff else "same", "lenient")
        return Unparseable("says both same and different" if diff else "says neither")
    if kind == "rating":
        values = {float(g) for m in _RATING.finditer(text) for g in m.groups() if g}
        if len(values) == 1:
            v = values.pop()
            if 1.0 <= v <= 5.0:
                return Parsed(v, "lenient")
        if len(values) > 1:
            return Unparseable(f"several ratings: {sorted(values)}")
        return Unparseable("no 1-5 rating in the answer")
    return Unparseable(f"unknown answer kind {kind!r}")


def _find_labels(text: str, vocabulary: Vocabulary) -> set[str]:
    """Labels whose surface forms occur as whole words (longer forms consume their span)."""
    low = " " + re.sub(r"[_\-]", " ", text.lower()) + " "
    found: set[str] = set()
    for surface, label in vocabulary.terms():
        pattern = r"(?<![a-z])" + re.escape(surface).replace(r"\ ", r"[\s,()]+") + r"(?![a-z])"
        if re.search(pattern, low):
            found.add(label)
            low = re.sub(pattern, " ", low)
    return found
