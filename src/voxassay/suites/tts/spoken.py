"""Spoken-form canonicalisation for the TTS round trip (synthesize -> ASR -> compare).

A synthesizer reads "atorvastatin 40 mg" aloud; an ASR writes back "atorvastatin forty
milligrams" or "Atorvastatin 40mg". Both must count as the same. :func:`canonical_tokens`
maps written and spoken forms onto one token stream:

* lower case; punctuation, hyphens and apostrophes dropped (``twenty-one`` -> ``21``);
* number words to digits, compositionally (``one thousand two hundred and fifty`` -> ``1250``,
  ``a hundred`` -> ``100``), digit-by-digit readings stay separate digits (``seven nine`` ->
  ``7 9``), ``oh`` next to a number is zero, ``double``/``triple`` repeat the next digit or
  letter, two two-digit groups read as a year are joined (``nineteen eighty-four`` -> ``1984``);
* ordinals to their number (``third``, ``3rd``, ``twenty-first``; ``second`` only in a date);
* dates to ``<month> <day>`` (``3 March``, ``the third of March``, ``March the 3rd`` ->
  ``march 3``); times ``9:30`` -> ``9 30``, ``9:00`` -> ``9``, ``a.m.`` -> ``am``;
* letters and digits glued in codes are split (``AB7`` -> ``ab 7``);
* symbols and units to words: ``%``/``per cent`` -> ``percent``, ``&`` -> ``and``,
  ``+`` before digits -> ``plus``, ``mg``/``milligrams`` -> ``milligram`` (and ml, mcg, kg,
  km, g), ``$12.50`` -> ``12 dollar 50 cent`` (also ``£``, ``€``, ``¥``), plural currency
  words singular, ``and`` between a currency word and a number dropped; decimals ``2.5`` ->
  ``2 point 5``; thousands separators dropped; ``st``/``ave``/``rd``/``apt``/``ext``
  expanded.

:func:`check_critical` compares a critical token with a transcript on the *character string*
``[a-z0-9]`` of the canonical tokens, so spacing and grouping do not matter ("AB79XQ2" =
"a b seventy nine x q two" = "A B 7 9 X Q 2"; "415-555-0132" = "four one five five five five
oh one three two") while every digit and letter, and their order, must survive: a wrong digit
read in a different grouping is still caught ("14 mg" never matches "40 mg"). The match must
start and end on token boundaries of the transcript, so "40 mg" does not match "140 mg".

What it cannot judge: pronunciation (a heteronym read with the wrong vowel, a misplaced
stress, a foreign name mangled into the right spelling by the ASR's language model), letter
case, and anything the ASR repairs or breaks by itself; grouping is deliberately ignored, so
"12 50" and "1250" are the same string; a spoken form that changes the digits is refused
even when a person would accept it ("half past two" for "2:30", "one point two five million"
for "$1,250,000", "December fifth" for "12/05"); unknown spellings of letter names ("bee",
"zed") are not mapped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from voxassay.core.english import MONTHS, SMALL_CARDINALS, SMALL_ORDINALS, TENS_ORDINALS

__all__ = [
    "CriticalCheck",
    "canonical_chars",
    "canonical_string",
    "canonical_tokens",
    "check_critical",
    "round_trip_metrics",
    "wer_tokens",
]

_ONES: Final = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
_TEENS: Final = {
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS: Final = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fourty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES: Final = {"thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINALS: Final = {
    **{o: c for o, c in zip(SMALL_ORDINALS[1:], SMALL_CARDINALS[1:], strict=True) if o != "second"},
    **TENS_ORDINALS,
}
"""Ordinal word -> cardinal word ("second" is left out: ``_second_as_ordinal`` decides it)."""
_MONTHS: Final = frozenset(MONTHS)
_MONTH_ABBR: Final = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}
_WORDS: Final = {
    # units (singular)
    "mg": "milligram",
    "mgs": "milligram",
    "milligrams": "milligram",
    "mcg": "microgram",
    "µg": "microgram",
    "ug": "microgram",
    "micrograms": "microgram",
    "ml": "milliliter",
    "mls": "milliliter",
    "milliliters": "milliliter",
    "millilitre": "milliliter",
    "millilitres": "milliliter",
    "kg": "kilogram",
    "kgs": "kilogram",
    "kilograms": "kilogram",
    "kilo": "kilogram",
    "kilos": "kilogram",
    "km": "kilometer",
    "kilometers": "kilometer",
    "kilometre": "kilometer",
    "kilometres": "kilometer",
    "grams": "gram",
    "gramme": "gram",
    "grammes": "gram",
    # money
    "dollars": "dollar",
    "euros": "euro",
    "pounds": "pound",
    "cents": "cent",
    "pennies": "pence",
    "penny": "pence",
    "quid": "pound",
    # addresses and phones
    "st": "street",
    "ave": "avenue",
    "rd": "road",
    "apt": "apartment",
    "blvd": "boulevard",
    "ext": "extension",
    # times
    "oclock": "",
}
_CURRENCY: Final = {"$": ("dollar", "cent"), "£": ("pound", "pence"), "€": ("euro", "cent")}
_CURRENCY_WORDS: Final = frozenset({"dollar", "pound", "euro", "yen"})
_SUBUNITS: Final = frozenset({"cent", "pence"})

_MONEY = re.compile(r"([$£€¥])\s?(\d[\d,]*)(?:\.(\d+))?(?:\s?(thousand|million|billion|bn|m|k)\b)?")
_THOUSANDS_SEP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PERCENT = re.compile(r"(\d)\s?%")
_DECIMAL = re.compile(r"(\d)\.(\d)")
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_AM_PM = re.compile(r"\b([ap])\.?\s?m\.?(?=\W|$)")
_ORDINAL_DIGITS = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")
_PLUS_DIGIT = re.compile(r"\+\s?(?=\d)")
_LETTER_DIGIT = re.compile(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])")
_NON_WORD = re.compile(r"[^a-z0-9µ¦ ]+")
_BREAK_PUNCT = re.compile(r"[,;!?()\[\]]|\.(?!\d)")
_BREAK: Final = "¦"  # a pause in writing: number words never join across it
_QUOTES = str.maketrans({"’": "'", "‘": "'", "–": "-", "—": " ", "‐": "-", "‑": "-"})


def _money(m: re.Match[str]) -> str:
    symbol, whole, frac, scale = m.group(1), m.group(2).replace(",", ""), m.group(3), m.group(4)
    unit, sub = _CURRENCY.get(symbol, ("yen", "sen"))
    if scale:
        scale_word = {"bn": "billion", "m": "million", "k": "thousand"}.get(scale, scale)
        number = f"{whole} point {frac}" if frac else whole
        return f" {number} {scale_word} {unit} "
    if frac and frac.strip("0"):
        cents = (frac + "0")[:2] if len(frac) <= 2 else frac
        return f" {whole} {unit} {cents.lstrip('0') or '0'} {sub} "
    return f" {whole} {unit} "


def _time(m: re.Match[str]) -> str:
    hour, minute = m.group(1), m.group(2)
    return f" {hour} " if minute == "00" else f" {hour} {minute} "


def _written_forms(text: str) -> str:
    """Lower-case ``text`` and rewrite symbols, decimals, times and codes into words/digits."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).lower()
    text = _THOUSANDS_SEP.sub("", text)
    text = _MONEY.sub(_money, text)
    text = _PERCENT.sub(r"\1 percent ", text)
    text = text.replace("per cent", "percent")
    text = _TIME.sub(_time, text)
    text = _AM_PM.sub(r" \1m ", text)
    text = _DECIMAL.sub(r"\1 point \2", text)
    text = _ORDINAL_DIGITS.sub(r"\1", text)
    text = _PLUS_DIGIT.sub(" plus ", text)
    text = text.replace("&", " and ").replace("@", " at ").replace("#", " number ")
    text = text.replace("'", "")
    text = _BREAK_PUNCT.sub(f" {_BREAK} ", text)
    text = _NON_WORD.sub(" ", text)
    return _LETTER_DIGIT.sub(" ", text)


# --------------------------------------------------------------------------------------------
# Number words
# --------------------------------------------------------------------------------------------


@dataclass
class _Num:
    """A number being assembled from words: ``total`` (above the last scale) + ``chunk``."""

    total: int
    chunk: int
    last: str  # kind of the last word: ones, teens, tens, hundred, scale, digits
    scale: int  # smallest scale used so far (0 = none)
    text: str | None = None  # digit tokens keep their written form ("0132")
    words: int = 1
    decimals: bool = False  # digits after "point": never multiplied by a scale

    def value(self) -> str:
        if self.text is not None:
            return self.text
        return str(self.total + self.chunk)


def _kind(word: str) -> tuple[str, int] | None:
    if word in _ONES:
        return "ones", _ONES[word]
    if word in _TEENS:
        return "teens", _TEENS[word]
    if word in _TENS:
        return "tens", _TENS[word]
    if word == "hundred":
        return "hundred", 100
    if word in _SCALES:
        return "scale", _SCALES[word]
    if word.isdigit():
        return "digits", int(word)
    return None


def _attach(num: _Num, kind: str, val: int) -> bool:
    """Add a word to ``num`` if it continues the same number; ``False`` if it starts a new one."""
    if num.decimals:
        return False
    if num.text is not None:  # written digits: only a scale may follow ("40 thousand")
        if kind in ("hundred", "scale") and num.text.isdigit():
            num.total, num.chunk, num.text = 0, int(num.text), None
            num.last = "ones"
        else:
            return False
    small = num.chunk
    if (
        (kind == "ones" and num.last == "tens" and small % 10 == 0)
        or (kind in ("ones", "teens", "tens") and num.last == "hundred")
        or (kind == "ones" and num.last == "tens_after_hundred")
    ):
        num.chunk += val
    elif kind in ("ones", "teens", "tens") and num.last == "scale":
        num.chunk = val
    elif kind == "hundred" and num.last in ("ones", "teens") and 0 < small < 20:
        num.chunk = small * 100
    elif kind == "scale" and (num.total + small) > 0 and (num.scale == 0 or val < num.scale):
        num.total += (small or 1) * val
        num.chunk = 0
        num.scale = val
    else:
        return False
    if kind == "tens" and num.last == "hundred":
        num.last = "tens_after_hundred"
    else:
        num.last = kind
    num.words += 1
    return True


def _numbers(tokens: list[str]) -> list[str]:
    """Replace runs of number words by digit tokens (see the module docstring)."""
    out: list[str] = []
    cur: _Num | None = None
    pending_and = False
    year_ok: list[bool] = []  # parallel to out: a two-digit number spoken as words

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            value = cur.value()
            two_digit_words = cur.text is None and 10 <= int(value) <= 99 and cur.scale == 0
            if two_digit_words and out and year_ok and year_ok[-1]:
                # "nineteen eighty-four": two spoken two-digit groups form a year.
                out[-1] = out[-1] + value
                year_ok[-1] = False
            else:
                out.append(value)
                year_ok.append(two_digit_words and cur.last != "hundred")
            cur = None

    def emit(word: str) -> None:
        flush()
        out.append(word)
        year_ok.append(False)

    i = 0
    n = len(tokens)
    while i < n:
        word = tokens[i]
        nxt = tokens[i + 1] if i + 1 < n else ""
        if word == "a" and nxt in ("hundred", "thousand", "million", "billion") and cur is None:
            word = "one"
        if word == "oh" and (
            cur is not None
            or _kind(nxt) is not None
            or nxt in ("oh", "double", "triple")
            or (out and out[-1].isdigit())
        ):
            word = "zero"
        if word in ("double", "triple") and nxt and (_kind(nxt) or len(nxt) == 1):
            times = 2 if word == "double" else 3
            nk = _kind(nxt)
            rep = str(nk[1]) if nk and nk[0] == "ones" else nxt
            for _ in range(times):
                emit(rep)
            i += 2
            continue
        if word == _BREAK:
            if pending_and:
                emit("and")
                pending_and = False
            flush()
            i += 1
            continue
        ordinal_end = False
        if word in _ORDINALS:
            word, ordinal_end = _ORDINALS[word], True
        kind = _kind(word)
        if kind is None:
            if word == "and" and cur is not None and _kind(nxt) is not None:
                pending_and = True
                i += 1
                continue
            if pending_and:
                emit("and")
                pending_and = False
            emit(word)
            i += 1
            continue
        k, val = kind
        if cur is not None and pending_and:
            # "two hundred and five" joins; "seven and eight" keeps its "and"
            if cur.last in ("hundred", "scale") and k in ("ones", "teens", "tens"):
                _attach(cur, k, val)
            else:
                emit("and")
                cur = _new(word, k, val)
            pending_and = False
        elif cur is not None and _attach(cur, k, val):
            pass
        elif k == "scale":  # a scale word that continues nothing stays a word ("3.5 million")
            emit(word)
        else:
            flush()
            cur = _new(word, k, val)
            if out and out[-1] == "point":
                cur.decimals = True
        if ordinal_end:
            flush()
        i += 1
    if pending_and:
        emit("and")
    flush()
    return out


def _new(word: str, kind: str, val: int) -> _Num:
    if kind == "digits":
        return _Num(0, 0, "digits", 0, text=word)
    if kind == "hundred":
        return _Num(0, val, "hundred", 0)
    return _Num(0, val, kind, 0)


# --------------------------------------------------------------------------------------------
# Token passes
# --------------------------------------------------------------------------------------------


def _second_as_ordinal(tokens: list[str]) -> list[str]:
    """``second`` is 2 only in a date ("the second of May", "May the second", "May second")."""
    out = list(tokens)
    for i, word in enumerate(tokens):
        if word != "second":
            continue
        prev = tokens[i - 1] if i else ""
        prev2 = tokens[i - 2] if i > 1 else ""
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        nxt2 = tokens[i + 2] if i + 2 < len(tokens) else ""
        if (
            prev in _MONTHS
            or (prev == "the" and prev2 in _MONTHS)
            or (nxt == "of" and nxt2 in _MONTHS)
        ):
            out[i] = "2"
    return out


def _is_day(token: str) -> bool:
    return token.isdigit() and 1 <= int(token) <= 31 and len(token) <= 2


def _dates(tokens: list[str]) -> list[str]:
    """``[the] D [of] MONTH`` and ``MONTH [the] D`` become ``MONTH D``."""
    out: list[str] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        # the 3 of march / 3 of march / 3 march
        j = i + 1 if t == "the" else i
        if j < n and _is_day(tokens[j]):
            k = j + 1
            if k < n and tokens[k] == "of":
                k += 1
            if k < n and tokens[k] in _MONTHS:
                out.extend([tokens[k], tokens[j]])
                i = k + 1
                continue
        if t in _MONTHS and i + 2 < n and tokens[i + 1] == "the" and _is_day(tokens[i + 2]):
            out.extend([t, tokens[i + 2]])
            i += 3
            continue
        out.append(t)
        i += 1
    return out


def _money_and(tokens: list[str]) -> list[str]:
    """Drop ``and`` between a currency word and a number ("twelve dollars and fifty cents")."""
    out: list[str] = []
    for i, t in enumerate(tokens):
        if (
            t == "and"
            and out
            and out[-1] in _CURRENCY_WORDS
            and i + 1 < len(tokens)
            and tokens[i + 1].isdigit()
        ):
            continue
        out.append(t)
    return out


def _double_u(tokens: list[str]) -> list[str]:
    out: list[str] = []
    for t in tokens:
        if t == "u" and out and out[-1] == "double":
            out[-1] = "w"
        else:
            out.append(t)
    return out


def canonical_tokens(text: str) -> list[str]:
    """The canonical spoken-form tokens of ``text`` (module docstring lists the rules).

    Idempotent on its own output: ``canonical_tokens(canonical_string(t)) ==
    canonical_tokens(t)`` for the forms it produces.
    """
    words = _written_forms(text).split()
    words = [
        _MONTH_ABBR.get(w, w) if i + 1 < len(words) and _looks_day(words[i + 1]) else w
        for i, w in enumerate(words)
    ]
    words = [w for w in (_WORDS.get(w, w) for w in words) if w]
    words = _double_u(words)
    words = _second_as_ordinal(words)
    words = [w for w in _numbers(words) if w != _BREAK]
    words = _dates(words)
    words = _units_after_numbers(words)
    return _money_and(words)


def _looks_day(token: str) -> bool:
    return _is_day(token) or token in _ONES or token in _TEENS or token in _TENS


def _units_after_numbers(tokens: list[str]) -> list[str]:
    """``g`` and ``l`` right after a number are grams and liters; a lone letter otherwise."""
    out = list(tokens)
    for i in range(1, len(tokens)):
        if tokens[i - 1].isdigit() and tokens[i] in ("g", "l"):
            out[i] = "gram" if tokens[i] == "g" else "liter"
    return out


def canonical_string(text: str) -> str:
    """``" ".join(canonical_tokens(text))``."""
    return " ".join(canonical_tokens(text))


def canonical_chars(text: str) -> str:
    """The canonical tokens joined without spaces: the ``[a-z0-9]`` string critical checks use."""
    return "".join(canonical_tokens(text))


# --------------------------------------------------------------------------------------------
# Critical tokens
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CriticalCheck:
    """One critical token's verdict: ``ok`` and the ``heard`` canonical span (or the nearest)."""

    token: str
    ok: bool
    heard: str

    def to_dict(self) -> dict[str, Any]:
        return {"token": self.token, "ok": self.ok, "heard": self.heard}


def _variants(tokens: list[str]) -> list[str]:
    """Accepted character strings for a token: itself, plus money read without "cents" or with
    the currency word last, and decimals without a leading zero ("point five")."""
    forms = ["".join(tokens)]
    for i, t in enumerate(tokens):
        if t in _CURRENCY_WORDS and i + 2 < len(tokens) and tokens[i + 2] in _SUBUNITS:
            cents = tokens[i + 1]
            before, after = tokens[:i], tokens[i + 3 :]
            forms.append("".join([*before, t, cents, *after]))  # 12 dollar 50
            forms.append("".join([*before, cents, t, *after]))  # 12 50 dollar
    if len(tokens) >= 2 and tokens[0] == "0" and tokens[1] == "point":
        forms.append("".join(tokens[1:]))
    return list(dict.fromkeys(f for f in forms if f))


def _token_spans(tokens: Sequence[str]) -> tuple[str, list[int], list[int]]:
    """Joined string plus the start and end offsets of every token in it."""
    starts, ends, pos = [], [], 0
    for t in tokens:
        starts.append(pos)
        pos += len(t)
        ends.append(pos)
    return "".join(tokens), starts, ends


def _nearest(needle: str, hay: str) -> tuple[int, int]:
    """Start and end of the substring of ``hay`` with the least edit distance to ``needle``."""
    m = len(needle)
    if not hay or not m:
        return 0, 0
    prev = [0] * (len(hay) + 1)  # free start anywhere
    start_prev = list(range(len(hay) + 1))
    for i in range(1, m + 1):
        cur = [i] + [0] * len(hay)
        start_cur = [0] * (len(hay) + 1)
        for j in range(1, len(hay) + 1):
            options = (
                (prev[j - 1] + (needle[i - 1] != hay[j - 1]), start_prev[j - 1]),
                (prev[j] + 1, start_prev[j]),
                (cur[j - 1] + 1, start_cur[j - 1]),
            )
            cur[j], start_cur[j] = min(options)
        prev, start_prev = cur, start_cur
    best_end = min(range(1, len(hay) + 1), key=lambda j: (prev[j], -j))
    return start_prev[best_end], best_end


def check_critical(token: str, transcript: str) -> tuple[bool, str]:
    """Whether ``token`` survives in ``transcript``, and the heard span.

    Both sides are canonicalised (:func:`canonical_tokens`); the token's ``[a-z0-9]`` string
    (or an accepted variant, see ``_variants``) must occur in the transcript's string starting
    and ending on transcript token boundaries. Returns ``(True, span)`` with the matched
    canonical tokens, else ``(False, nearest)``: the transcript tokens overlapping the
    substring with the least edit distance ("" for an empty transcript). A token without any
    letter or digit can never be checked and returns ``(False, "")``.
    """
    tok = canonical_tokens(token)
    if not "".join(tok):
        return False, ""
    hyp = canonical_tokens(transcript)
    hay, starts, ends = _token_spans(hyp)
    start_set = {s: i for i, s in enumerate(starts)}
    end_set = {e: i for i, e in enumerate(ends)}
    for form in _variants(tok):
        pos = hay.find(form)
        while pos >= 0:
            end = pos + len(form)
            if pos in start_set and end in end_set:
                return True, " ".join(hyp[start_set[pos] : end_set[end] + 1])
            pos = hay.find(form, pos + 1)
    a, b = _nearest("".join(tok), hay)
    covering = [t for t, s, e in zip(hyp, starts, ends, strict=True) if s < b and e > a]
    return False, " ".join(covering)


# --------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------


def wer_tokens(text: str) -> list[str]:
    """Words for WER: :func:`canonical_tokens`, then the ``oal-en`` normalizer's word tables:
    its filler words are dropped and British spellings mapped to American.

    The full ``oal-en`` normalizer is not run on the text: it drops parenthesised spans
    ("(415) 555-0132" loses the area code) and leading zeros ("0132" -> "132"), which would
    hide exactly the errors this round trip is for. Contractions are compared with the
    apostrophe removed ("won't" = "wont"); an expansion ("will not") counts as errors.
    """
    fillers, spellings = _oal_word_tables()
    return [spellings.get(w, w) for w in canonical_tokens(text) if w not in fillers]


def _oal_word_tables() -> tuple[frozenset[str], Mapping[str, str]]:
    global _OAL_TABLES
    if _OAL_TABLES is None:
        from voxassay.suites.asr.normalize._spelling import oal_spellings
        from voxassay.suites.asr.normalize._tables import OAL_FILLERS

        _OAL_TABLES = (frozenset(OAL_FILLERS), oal_spellings())
    return _OAL_TABLES


_OAL_TABLES: tuple[frozenset[str], Mapping[str, str]] | None = None


def round_trip_metrics(
    reference_text: str, transcript: str, critical_tokens: Sequence[str]
) -> dict[str, Any]:
    """Counts for one synthesized item heard back by an ASR.

    * ``wer_errors`` / ``wer_words``: S + D + I over the reference word count, words from
      :func:`wer_tokens` on both sides, kaldialign with ``merge_compounds`` (so "7 9" vs "79"
      is no error); WER = wer_errors / wer_words.
    * ``cer_errors`` / ``cer_chars``: Levenshtein distance between the canonical ``[a-z0-9]``
      strings (spaces removed, so grouping is no error) over the reference string's length.
    * ``critical_total`` / ``critical_ok``: tokens checked / tokens that survived
      (:func:`check_critical`); accuracy = critical_ok / critical_total.
    * ``critical``: the per-token list ``[{token, ok, heard}]`` (not a metric).

    Every count is a float so it can go straight into ``Record.metrics``.
    """
    from voxassay.suites.asr.align import count_char_errors, count_errors

    ref = wer_tokens(reference_text)
    hyp = wer_tokens(transcript)
    words = count_errors(ref, hyp, merge_compounds=True)
    chars = count_char_errors("".join(ref), "".join(hyp))
    checks = [CriticalCheck(t, *check_critical(t, transcript)) for t in critical_tokens]
    return {
        "wer_errors": float(words.errors),
        "wer_words": float(words.ref_words),
        "cer_errors": float(chars.errors),
        "cer_chars": float(chars.ref_words),
        "critical_total": float(len(checks)),
        "critical_ok": float(sum(c.ok for c in checks)),
        "critical": [c.to_dict() for c in checks],
    }
