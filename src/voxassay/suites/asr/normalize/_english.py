"""English text normalizers: Whisper's and the Open ASR Leaderboard's (a superset of it).

Both run the same pipeline on lower-cased text. The leaderboard switches on three more steps
(6, the name folding of 8, and 9) and uses its own tables (see ``_tables.py``):

1. drop ``[...]``/``<...>`` spans (from ``[`` or ``<`` to the next ``]`` or ``>``), then
   non-empty ``(...)`` spans;
2. drop filler words (the leaderboard's list is longer);
3. glue a space-separated apostrophe to its word, expand informal forms (``gonna``), titles
   (``dr`` -> ``doctor``), perfect tenses (``'s been``) and clitics (``n't``, ``'re``, ``'s``,
   ...). Whisper expands every ``'s`` to "is"; the leaderboard only after pronouns;
4. drop commas between digits and periods not followed by a digit;
5. NFKD, then every mark/symbol/punctuation character becomes a space, except ``. % $ ¢ € £``;
   combining marks vanish and a few letters are folded (``æ`` -> ``ae``);
6. (leaderboard) join listed split compounds: ``e mail`` -> ``email``;
7. spoken numbers to digits (``_numbers.py``);
8. British -> American spelling, then (leaderboard) name variants, per word;
9. (leaderboard) runs of single-character words collapse into one word: ``b b c`` -> ``bbc``,
   ``9 5`` -> ``95``; a run containing ``a`` or ``i`` needs three or more members;
10. ``. $ ¢ € £`` not followed by a digit and ``%`` not preceded by one become spaces; all
    whitespace runs become one space.

The implementation is ours; it is built for speed (regexes compiled once, steps skipped when
a cheap test proves they cannot match, a cached translation table for step 5).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from voxassay.suites.asr.normalize._numbers import convert_numbers
from voxassay.suites.asr.normalize._tables import (
    WHISPER_CLITICS_AFTER_S,
    WHISPER_CLITICS_BEFORE_S,
    WHISPER_INFORMAL,
    WHISPER_PERFECT,
    WHISPER_TITLES,
)

Rule = tuple[str, str, str]  # (regex, replacement template, literal needed for a match)

_BRACKETED: Final = re.compile(r"[<\[][^>\]]*[>\]]")
_PARENTHESIZED: Final = re.compile(r"\(([^)]+?)\)")
_SPACE_BEFORE_APOSTROPHE: Final = re.compile(r"\s+'")
_TITLE: Final = re.compile(
    r"\b(?:" + "|".join(sorted(WHISPER_TITLES, key=len, reverse=True)) + r")\b"
)
_DIGIT_COMMA_DIGIT: Final = re.compile(r"(\d),(\d)")
_WHITESPACE_RUN: Final = re.compile(r"\s+")

# The three rules below consume the character next to the one they replace, so that character
# cannot start (or end) another match. That only matters when two candidates touch ("..",
# "$.", "%%"); otherwise a lookaround form, which needs no replacement template, is equivalent
# and several times faster.
_PERIOD_NOT_BEFORE_DIGIT: Final = re.compile(r"\.([^0-9]|$)")
_PERIOD_NOT_BEFORE_DIGIT_FAST: Final = re.compile(r"\.(?![0-9])")
_SYMBOL_NOT_BEFORE_DIGIT: Final = re.compile(r"[.$¢€£]([^0-9])")
_SYMBOL_NOT_BEFORE_DIGIT_FAST: Final = re.compile(r"[.$¢€£](?=[^0-9])")
_SYMBOLS_TOUCHING: Final = re.compile(r"[.$¢€£]{2}")
_PERCENT_NOT_AFTER_DIGIT: Final = re.compile(r"([^0-9])%")
_PERCENT_NOT_AFTER_DIGIT_FAST: Final = re.compile(r"(?<=[^0-9])%")

#: Characters that survive step 5 although they are punctuation or symbols.
NUMERIC_SYMBOLS: Final = ".%$¢€£"
_FINAL_SYMBOLS: Final = ".$¢€£"

#: Letters that NFKD does not split into base letter + mark.
LETTER_FOLDS: Final = {
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "æ": "ae",
    "Æ": "AE",
    "ß": "ss",
    "ẞ": "SS",
    "đ": "d",
    "Đ": "D",
    "ð": "d",
    "Ð": "D",
    "þ": "th",
    "Þ": "th",
    "ł": "l",
    "Ł": "L",
}


class _SymbolTable(dict[int, str]):
    """``str.translate`` table for step 5, filled lazily, one entry per code point seen."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if char in NUMERIC_SYMBOLS:
            out = char
        elif char in LETTER_FOLDS:
            out = LETTER_FOLDS[char]
        else:
            category = unicodedata.category(char)
            if category == "Mn":
                out = ""
            elif category[0] in "MSP":
                out = " "
            else:
                out = char
        self[code] = out
        return out


_SYMBOLS: Final = _SymbolTable()
for _code in range(128):  # prefill the ASCII range
    _SYMBOLS[_code]


def strip_symbols(text: str) -> str:
    """Step 5: NFKD, drop combining marks, symbols/punctuation to spaces (keeping ``.%$¢€£``)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
    return text.translate(_SYMBOLS)


def _expand_title(match: re.Match[str]) -> str:
    return WHISPER_TITLES[match.group()] + " "


#: Two or more single-character alphanumeric words in a row, in single-spaced text.
#: (``[^\W_]`` is exactly ``str.isalnum`` for one character.)
_LETTER_RUN: Final = re.compile(r"(?<![^ ])[^\W_](?: [^\W_])+(?![^ ])")


def _join_run(match: re.Match[str]) -> str:
    run = match.group()
    members = run.split(" ")
    if len(members) >= 3 or ("a" not in members and "i" not in members):
        return "".join(members)
    return run


def collapse_letter_runs(text: str) -> str:
    """Step 9 on single-spaced ``text``: join runs of single-character alphanumeric words.

    A run joins when it has at least two members, or at least three if one of them is ``a`` or
    ``i`` (so "a big" and "i am" are left alone but "i i i" becomes ``iii``).
    """
    return _LETTER_RUN.sub(_join_run, text)


def _compile_rules(rules: Sequence[Rule]) -> tuple[tuple[str, re.Pattern[str], str], ...]:
    return tuple((needle, re.compile(pattern), repl) for pattern, repl, needle in rules)


@dataclass(frozen=True)
class EnglishRules:
    """What distinguishes one English normalizer from another."""

    fillers: Sequence[str]
    s_clitic: Rule
    spellings: Mapping[str, str]
    names: Mapping[str, str]
    compounds: Sequence[tuple[str, str, str]] = ()
    collapse_letter_runs: bool = False


class EnglishNormalizer:
    """Callable text normalizer; see the module docstring for the steps."""

    def __init__(self, name: str, version: str, rules: EnglishRules) -> None:
        self.name = name
        self.version = version
        self.rules = rules
        self._fillers = re.compile(r"\b(?:" + "|".join(rules.fillers) + r")\b")
        self._informal = _compile_rules(WHISPER_INFORMAL)
        self._clitics = _compile_rules(
            (*WHISPER_PERFECT, *WHISPER_CLITICS_BEFORE_S, rules.s_clitic, *WHISPER_CLITICS_AFTER_S)
        )
        self._compounds = tuple(
            (re.compile(rf"\b{first}\s+{second}\b"), joined)
            for first, second, joined in rules.compounds
        )
        self._compound_probe = (
            re.compile(
                r"\b(?:"
                + "|".join(rf"{first}\s+{second}" for first, second, _ in rules.compounds)
                + r")\b"
            )
            if rules.compounds
            else None
        )
        self._word_map, self._word_map_splits = _compose_word_maps(rules.spellings, rules.names)
        self._collapse = rules.collapse_letter_runs

    def __repr__(self) -> str:
        return f"EnglishNormalizer(name={self.name!r}, version={self.version!r})"

    def __call__(self, text: str) -> str:
        s = text.lower()
        if "[" in s or "<" in s:
            s = _BRACKETED.sub("", s)
        if "(" in s:
            s = _PARENTHESIZED.sub("", s)
        s = self._fillers.sub("", s)
        if "'" in s:
            s = _SPACE_BEFORE_APOSTROPHE.sub("'", s)
        for needle, pattern, repl in self._informal:
            if needle in s:
                s = pattern.sub(repl, s)
        s = _TITLE.sub(_expand_title, s)
        if "'" in s:
            for needle, pattern, repl in self._clitics:
                if needle in s:
                    s = pattern.sub(repl, s)
        if "," in s and _DIGIT_COMMA_DIGIT.search(s):
            s = _DIGIT_COMMA_DIGIT.sub(r"\1\2", s)
        if "." in s:
            if ".." in s:
                s = _PERIOD_NOT_BEFORE_DIGIT.sub(r" \1", s)
            else:
                s = _PERIOD_NOT_BEFORE_DIGIT_FAST.sub(" ", s)
        s = strip_symbols(s)
        if self._compound_probe is not None and self._compound_probe.search(s):
            for pattern, joined in self._compounds:
                s = pattern.sub(joined, s)
        s = convert_numbers(s)

        word_map = self._word_map
        words = [word_map.get(w, w) for w in s.split()]
        if self._word_map_splits:
            words = " ".join(words).split()
        s = " ".join(words)
        if self._collapse:
            s = collapse_letter_runs(s)

        return _drop_stray_symbols(s)


def _drop_stray_symbols(s: str) -> str:
    """Step 10: ``. $ ¢ € £`` not before a digit and ``%`` not after one become spaces."""
    replaced = 0
    for char in _FINAL_SYMBOLS:
        if char in s:
            if _SYMBOLS_TOUCHING.search(s):
                s, replaced = _SYMBOL_NOT_BEFORE_DIGIT.subn(r" \1", s)
            else:
                s, replaced = _SYMBOL_NOT_BEFORE_DIGIT_FAST.subn(" ", s)
            break
    if "%" in s:
        if "%%" in s:
            s, count = _PERCENT_NOT_AFTER_DIGIT.subn(r"\1 ", s)
        else:
            s, count = _PERCENT_NOT_AFTER_DIGIT_FAST.subn(" ", s)
        replaced += count
    if replaced:
        s = _WHITESPACE_RUN.sub(" ", s)
    return s


def _compose_word_maps(
    spellings: Mapping[str, str], names: Mapping[str, str]
) -> tuple[dict[str, str], bool]:
    """One per-word table for "spelling, then name" (keys that hold spaces can never match a
    word and are left out). Also says whether some value holds several words."""
    composed: dict[str, str] = {}
    for key, value in spellings.items():
        if key.split() != [key]:
            continue
        composed[key] = " ".join(names.get(part, part) for part in value.split())
    for key, value in names.items():
        composed.setdefault(key, value)
    splits = any(len(value.split()) != 1 for value in composed.values())
    return composed, splits
