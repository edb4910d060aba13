"""Spoken numbers to digits, with the exact behaviour of Whisper's English number normalizer.

The leaderboard uses Whisper's number normalizer unchanged, quirks included; every one of them
is kept here because each changes WER:

* digit runs read one by one concatenate ("three two one" -> ``321``, "nineteen oh five" ->
  ``1905``), but digits written with spaces do not ("3 2 1" stays three tokens);
* ``o``/``oh``/``zero`` are digits anywhere ("four o'clock" -> ``40 clock``);
* "point" followed by a number word that is not a digit word vanishes ("point point five" ->
  ``.5``); before an ordinary word it stays;
* "and" after a multiplier disappears ("one hundred and ten" -> ``110``);
* currency words become a prefix symbol (``$``, ``£``, ``€``, ``¢``), "percent"/"per cent" a
  ``%`` suffix, "minus"/"plus" a ``-``/``+`` prefix -- even before a non-number word
  ("plus and" -> ``+and``);
* ``1``/``1s`` standing alone are written ``one``/``ones``, also inside ``1.75%`` (``one.75%``);
* "<number> and a half" becomes ``.5`` after the number; a text that *starts* with "and a
  half" loses those words;
* dollars and cents merge ("$2 and ¢7" -> ``$2.07``) and amounts under one become cents
  (``$0.50`` -> ``¢50``);
* only "ninth" is missing from the ordinals (Whisper spells it "nineth").

The state machine below is our own code; its rules follow Whisper's ``EnglishNumberNormalizer``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

from voxassay.core.english import SMALL_CARDINALS, TENS_CARDINALS

Value = int | str

_ONES_NAMES: Final = SMALL_CARDINALS[1:]
_TENS_NAMES: Final = TENS_CARDINALS
_MULTIPLIER_NAMES: Final = (
    "hundred",
    "thousand",
    "million",
    "billion",
    "trillion",
    "quadrillion",
    "quintillion",
    "sextillion",
    "septillion",
    "octillion",
    "nonillion",
    "decillion",
)

ZEROS: Final = frozenset({"o", "oh", "zero"})
ONES: Final = {name: i for i, name in enumerate(_ONES_NAMES, start=1)}
TENS: Final = {name: 10 * i for i, name in enumerate(_TENS_NAMES, start=2)}
MULTIPLIERS: Final = {name: 100 if i == 0 else 1000**i for i, name in enumerate(_MULTIPLIER_NAMES)}


def _suffixed_ones() -> dict[str, tuple[int, str]]:
    table: dict[str, tuple[int, str]] = {}
    for name, value in ONES.items():
        table["sixes" if name == "six" else name + "s"] = (value, "s")
    irregular = {"zeroth": 0, "first": 1, "second": 2, "third": 3, "fifth": 5, "twelfth": 12}
    suffix_of = {0: "th", 1: "st", 2: "nd", 3: "rd"}
    for name, value in irregular.items():
        table[name] = (value, suffix_of.get(value, "th"))
    for name, value in ONES.items():
        if value not in irregular.values():
            table[name + ("h" if name.endswith("t") else "th")] = (value, "th")
    return table


ONES_SUFFIXED: Final = _suffixed_ones()
TENS_SUFFIXED: Final = {
    **{name[:-1] + "ies": (value, "s") for name, value in TENS.items()},
    **{name[:-1] + "ieth": (value, "th") for name, value in TENS.items()},
}
MULTIPLIERS_SUFFIXED: Final = {
    **{name + "s": (value, "s") for name, value in MULTIPLIERS.items()},
    **{name + "th": (value, "th") for name, value in MULTIPLIERS.items()},
}
DECIMAL_WORDS: Final = frozenset(ONES) | frozenset(TENS) | ZEROS

SIGN_WORDS: Final = {"minus": "-", "negative": "-", "plus": "+", "positive": "+"}
CURRENCY_WORDS: Final = {
    "pound": "£",
    "pounds": "£",
    "euro": "€",
    "euros": "€",
    "dollar": "$",
    "dollars": "$",
    "cent": "¢",
    "cents": "¢",
}
PREFIX_CHARS: Final = frozenset(SIGN_WORDS.values()) | frozenset(CURRENCY_WORDS.values())
PERCENT_WORDS: Final[dict[str, str | dict[str, str]]] = {"per": {"cent": "%"}, "percent": "%"}
SPECIAL_WORDS: Final = frozenset({"and", "double", "triple", "point"})

NUMBER_WORDS: Final = frozenset().union(
    ZEROS,
    ONES,
    ONES_SUFFIXED,
    TENS,
    TENS_SUFFIXED,
    MULTIPLIERS,
    MULTIPLIERS_SUFFIXED,
    SIGN_WORDS,
    CURRENCY_WORDS,
    PERCENT_WORDS,
    SPECIAL_WORDS,
)

#: Words whose presence means the converter may change something. "and" alone never does
#: (it is only dropped after a multiplier, which is itself a trigger).
TRIGGER_WORDS: Final = NUMBER_WORDS - {"and"}

_NUMERIC = re.compile(r"\d+(?:\.\d+)?")  # used with fullmatch
_ANY_DIGIT = re.compile(r"\d")
_ASCII_DIGIT = re.compile(r"[0-9]")
_AND_A_HALF = re.compile(r"\band\s+a\s+half\b")
_LETTER_DIGIT = re.compile(r"([a-z])([0-9])")
_DIGIT_LETTER = re.compile(r"([0-9])([a-z])")
_DIGIT_SPACE_SUFFIX = re.compile(r"([0-9])\s+(st|nd|rd|th|s)\b")
_CURRENCY_AND_CENTS = re.compile(r"([€£$])([0-9]+) (?:and )?¢([0-9]{1,2})\b")
_CURRENCY_ZERO_CENTS = re.compile(r"[€£$]0.([0-9]{1,2})\b")
_LONE_ONE = re.compile(r"\b1(s?)\b")


def _fraction(text: Value) -> Fraction | None:
    try:
        return Fraction(text)
    except ValueError:
        return None


def _is_numeral(word: str | None) -> bool:
    """Digits, optionally with one decimal part (``12``, ``3.5``); Unicode digits count."""
    return word is not None and _NUMERIC.fullmatch(word) is not None


def _text(value: Value | None) -> str:
    """``str(value or "")``: None, ``0`` and ``""`` all read as empty."""
    return str(value) if value else ""


def _numeric_value(digits: str) -> Value:
    """An integer when ``digits`` is one (also ``4.0``), else the decimal text as written."""
    whole, dot, frac = digits.partition(".")
    if not dot or int(frac) == 0:
        return int(whole)
    return digits


class _Converter:
    """One left-to-right pass over the tokens of a text (see :meth:`run`)."""

    __slots__ = ("out", "prefix", "value")

    def __init__(self) -> None:
        self.out: list[str] = []
        self.prefix: str | None = None
        self.value: Value | None = None

    def emit(self, text: Value) -> None:
        """Write ``text`` with the pending prefix, and clear the pending number and prefix."""
        item = str(text)
        if self.prefix is not None:
            item = self.prefix + item
        self.out.append(item)
        self.value = None
        self.prefix = None

    def flush(self) -> None:
        if self.value is not None:
            self.emit(self.value)

    def run(self, words: list[str]) -> list[str]:
        """Convert ``words``; one branch per class of word (Whisper's classes and rules).

        Number words and numerals are disjoint classes, so testing for a number word first
        (a set lookup) and for a numeral only otherwise gives Whisper's results.
        """
        last = len(words) - 1
        skip_next = False
        out = self.out
        for i, word in enumerate(words):
            if skip_next:
                skip_next = False
                continue
            value = self.value

            if word not in NUMBER_WORDS:
                signed = word[0] in PREFIX_CHARS
                bare = word[1:] if signed else word
                if bare[:1].isdecimal() and _NUMERIC.fullmatch(bare):
                    if value is not None:
                        if isinstance(value, str) and value.endswith("."):
                            self.value = value + word  # decimal / dotted parts, prefix and all
                            continue
                        self.emit(value)
                    if signed:
                        self.prefix = word[0]
                    self.value = _numeric_value(bare)
                elif value is None and self.prefix is None:
                    out.append(word)  # the common case: an ordinary word
                else:
                    self.flush()
                    self.emit(word)
                continue

            prev = words[i - 1] if i > 0 else None
            nxt = words[i + 1] if i < last else None
            if word in ZEROS:
                self.value = _text(value) + "0"
            elif word in ONES:
                self._ones(ONES[word], prev, value)
            elif word in ONES_SUFFIXED:
                digit, suffix = ONES_SUFFIXED[word]
                self.emit(self._with_ones(digit, prev, value, suffix))
            elif word in TENS:
                tens = TENS[word]
                if value is None:
                    self.value = tens
                elif isinstance(value, str) or value % 100:
                    self.value = str(value) + str(tens)
                else:
                    self.value = value + tens
            elif word in TENS_SUFFIXED:
                tens, suffix = TENS_SUFFIXED[word]
                if value is None:
                    self.emit(f"{tens}{suffix}")
                elif isinstance(value, str) or value % 100:
                    self.emit(f"{value}{tens}{suffix}")
                else:
                    self.emit(f"{value + tens}{suffix}")
            elif word in MULTIPLIERS:
                self._multiply(MULTIPLIERS[word], value)
            elif word in MULTIPLIERS_SUFFIXED:
                self._multiply_suffixed(*MULTIPLIERS_SUFFIXED[word], value)
            elif word in SIGN_WORDS:
                self.flush()
                if nxt in NUMBER_WORDS or _is_numeral(nxt):
                    self.prefix = SIGN_WORDS[word]
                else:
                    self.emit(word)
            elif word in CURRENCY_WORDS:
                if value is not None:
                    self.prefix = CURRENCY_WORDS[word]
                    self.emit(value)
                else:
                    self.emit(word)
            elif word in PERCENT_WORDS:
                skip_next = self._percent(word, nxt, value)
            else:
                skip_next = self._special(word, prev, nxt, value)
        self.flush()
        return out

    def _ones(self, digit: int, prev: str | None, value: Value | None) -> None:
        if value is None:
            self.value = digit
        elif isinstance(value, str) or prev in ONES:
            if prev in TENS and digit < 10:
                self.value = str(value)[:-1] + str(digit)  # "twenty" "one": 20 -> 21
            else:
                self.value = str(value) + str(digit)
        elif value % (10 if digit < 10 else 100) == 0:
            self.value = value + digit
        else:
            self.value = str(value) + str(digit)

    @staticmethod
    def _with_ones(digit: int, prev: str | None, value: Value | None, suffix: str) -> str:
        if value is None:
            return f"{digit}{suffix}"
        if isinstance(value, str) or prev in ONES:
            if prev in TENS and digit < 10:
                return f"{str(value)[:-1]}{digit}{suffix}"
            return f"{value}{digit}{suffix}"
        if value % (10 if digit < 10 else 100) == 0:
            return f"{value + digit}{suffix}"
        return f"{value}{digit}{suffix}"

    def _multiply(self, multiplier: int, value: Value | None) -> None:
        if value is None:
            self.value = multiplier
        elif isinstance(value, str) or value == 0:
            base = _fraction(value)
            product = base * multiplier if base is not None else None
            if product is not None and product.denominator == 1:
                self.value = product.numerator
            else:
                self.emit(value)
                self.value = multiplier
        else:
            self.value = value // 1000 * 1000 + value % 1000 * multiplier

    def _multiply_suffixed(self, multiplier: int, suffix: str, value: Value | None) -> None:
        if value is None:
            self.emit(f"{multiplier}{suffix}")
        elif isinstance(value, str):
            base = _fraction(value)
            product = base * multiplier if base is not None else None
            if product is not None and product.denominator == 1:
                self.emit(f"{product.numerator}{suffix}")
            else:
                self.emit(value)
                self.emit(f"{multiplier}{suffix}")
        else:
            self.emit(f"{value // 1000 * 1000 + value % 1000 * multiplier}{suffix}")
        self.value = None

    def _percent(self, word: str, nxt: str | None, value: Value | None) -> bool:
        """Returns True when the next word was consumed ("per cent")."""
        if value is None:
            self.emit(word)
            return False
        suffix = PERCENT_WORDS[word]
        if isinstance(suffix, str):
            self.emit(f"{value}{suffix}")
            return False
        if nxt is not None and nxt in suffix:
            self.emit(f"{value}{suffix[nxt]}")
            return True
        self.emit(value)
        self.emit(word)
        return False

    def _special(self, word: str, prev: str | None, nxt: str | None, value: Value | None) -> bool:
        """and / double / triple / point. Returns True when the next word was consumed."""
        next_numeric = _is_numeral(nxt)
        if nxt not in NUMBER_WORDS and not next_numeric:
            self.flush()
            self.emit(word)
        elif word == "and":
            if prev not in MULTIPLIERS:
                self.flush()
                self.emit(word)
        elif word in ("double", "triple"):
            if nxt in ONES or nxt in ZEROS:
                digit = ONES.get(nxt, 0) if nxt is not None else 0
                self.value = _text(value) + str(digit) * (2 if word == "double" else 3)
                return True
            self.flush()
            self.emit(word)
        elif nxt in DECIMAL_WORDS or next_numeric:  # "point"
            self.value = _text(value) + "."
        return False


def _split_and_a_half(text: str) -> str:
    """Turn "<number> and a half" into "<number> point five"; other halves stay."""
    pieces = _AND_A_HALF.split(text)
    kept: list[str] = []
    for i, piece in enumerate(pieces):
        if not piece.strip():
            continue
        kept.append(piece)
        if i < len(pieces) - 1:
            last_word = piece.rsplit(maxsplit=2)[-1]
            number_like = last_word in DECIMAL_WORDS or last_word in MULTIPLIERS
            kept.append("point five" if number_like else "and a half")
    return " ".join(kept)


def _cents_joined(match: re.Match[str]) -> str:
    return f"{match[1]}{match[2]}.{int(match[3]):02d}"


def _cents_only(match: re.Match[str]) -> str:
    return f"¢{int(match[1])}"


def convert_numbers(text: str) -> str:
    """Rewrite spelled-out numbers in lower-cased, punctuation-free ``text`` as digits.

    The result is single-spaced (tokens joined by one space).
    """
    if "half" not in text and _ANY_DIGIT.search(text) is None:
        words = text.split()
        if TRIGGER_WORDS.isdisjoint(words):
            return " ".join(words)  # provably what the full pass returns

    if "half" in text:
        text = _split_and_a_half(text)
    if _ASCII_DIGIT.search(text):  # the three rules need an ASCII digit
        text = _LETTER_DIGIT.sub(r"\1 \2", text)
        text = _DIGIT_LETTER.sub(r"\1 \2", text)
        text = _DIGIT_SPACE_SUFFIX.sub(r"\1\2", text)

    text = " ".join(_Converter().run(text.split()))

    if "¢" in text:
        text = _CURRENCY_AND_CENTS.sub(_cents_joined, text)
    if "0" in text:
        text = _CURRENCY_ZERO_CENTS.sub(_cents_only, text)
    if "1" in text:
        text = _LONE_ONE.sub(r"one\1", text)
    return text
