"""Orthographic switch audit: does a system follow the reference's arm of arbitrary written
conventions (colour/color, 20/twenty, %/percent, ...) item by item?"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voxassay.stats.intervals import newcombe_diff
from voxassay.suites.asr.audits._common import AUDITS_VERSION, _rate

CONVENTIONS_VERSION = "orth-conventions/1"


@dataclass(frozen=True)
class Convention:
    """Two arbitrary ways of writing the same spoken words.

    ``classes`` pairs the forms of arm 0 with the forms of arm 1 for one spoken item
    (``(("colour",), ("color",))``); forms are lower-case and may be several tokens
    (``"per cent"``). ``kind = "number"`` uses the built-in number reader instead of classes:
    number words (arm 0) vs digits (arm 1), matched on their value.
    """

    name: str
    arms: tuple[str, str]
    classes: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    kind: str = "lexical"
    note: str = ""


def _stems(
    rows: Sequence[tuple[str, str, tuple[str, ...]]],
) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    return tuple(((b + suf,), (a + suf,)) for b, a, sufs in rows for suf in sufs)


# British vs American spellings: (British stem, American stem, suffixes both take). Pairs
# whose American form is also a British word with another meaning (meter, program, tire,
# check, license, practice, draft) or whose inflection collides with a shared word
# (analyses, emphasis) are left out on purpose.
_BRITISH_AMERICAN = (
    *_stems(
        (
            ("colour", "color", ("", "s", "ed", "ing", "ful")),
            ("favour", "favor", ("", "s", "ed", "able", "ite", "ites")),
            ("honour", "honor", ("", "s", "ed", "able")),
            ("labour", "labor", ("", "s", "ed", "ing", "er", "ers")),
            ("neighbour", "neighbor", ("", "s", "hood", "ing", "ly")),
            ("behaviour", "behavior", ("", "s", "al")),
            ("humour", "humor", ("", "ed")),
            ("flavour", "flavor", ("", "s", "ed", "ing")),
            ("harbour", "harbor", ("", "s", "ed")),
            ("rumour", "rumor", ("", "s", "ed")),
            ("vapour", "vapor", ("", "s")),
            ("odour", "odor", ("", "s")),
            ("armour", "armor", ("", "ed", "y")),
            ("endeavour", "endeavor", ("", "s", "ed", "ing")),
            ("savour", "savor", ("", "y", "ed")),
            ("splendour", "splendor", ("",)),
            ("centre", "center", ("", "s")),
            ("theatre", "theater", ("", "s")),
            ("fibre", "fiber", ("", "s")),
            ("litre", "liter", ("", "s")),
            ("sombre", "somber", ("",)),
            ("calibre", "caliber", ("",)),
            ("spectre", "specter", ("",)),
            ("organis", "organiz", ("e", "ed", "es", "ing", "ation", "ations", "er", "ers")),
            ("realis", "realiz", ("e", "ed", "es", "ing", "ation")),
            ("recognis", "recogniz", ("e", "ed", "es", "ing", "able")),
            ("apologis", "apologiz", ("e", "ed", "es", "ing")),
            ("criticis", "criticiz", ("e", "ed", "es", "ing")),
            ("emphasis", "emphasiz", ("e", "ed", "es", "ing")),
            ("memoris", "memoriz", ("e", "ed", "es", "ing")),
            ("summaris", "summariz", ("e", "ed", "es", "ing")),
            ("prioritis", "prioritiz", ("e", "ed", "es", "ing")),
            ("minimis", "minimiz", ("e", "ed", "es", "ing")),
            ("maximis", "maximiz", ("e", "ed", "es", "ing")),
            ("civilis", "civiliz", ("ation", "ations", "ed")),
            ("authoris", "authoriz", ("e", "ed", "es", "ing", "ation")),
            ("analys", "analyz", ("e", "ed", "ing")),
            ("paralys", "paralyz", ("e", "ed", "ing")),
            ("travell", "travel", ("ed", "ing", "er", "ers")),
            ("cancell", "cancel", ("ed", "ing")),
            ("labell", "label", ("ed", "ing")),
            ("modell", "model", ("ed", "ing")),
            ("defence", "defense", ("", "s", "less")),
            ("offence", "offense", ("", "s")),
            ("catalogue", "catalog", ("", "s", "d")),
            ("jewellery", "jewelry", ("",)),
            ("grey", "gray", ("", "er", "est", "ish")),
            ("aluminium", "aluminum", ("",)),
            ("pyjama", "pajama", ("", "s")),
            ("sceptic", "skeptic", ("", "s", "al", "ism")),
            ("manoeuvre", "maneuver", ("", "s", "d")),
            ("plough", "plow", ("", "s", "ed", "ing")),
            ("mould", "mold", ("", "s", "y", "ed")),
            ("moustache", "mustache", ("", "s")),
            ("cosy", "cozy", ("",)),
            ("fulfil", "fulfill", ("", "s", "ment")),
            ("enrol", "enroll", ("", "s", "ment")),
            ("ageing", "aging", ("",)),
        )
    ),
    (("centred",), ("centered",)),
)

DEFAULT_CONVENTIONS: tuple[Convention, ...] = (
    Convention("okay", ("okay", "OK"), ((("okay",), ("ok", "o.k")),)),
    Convention("percent", ("percent", "%"), ((("percent", "per cent"), ("%",)),)),
    Convention(
        "british_american",
        ("british", "american"),
        _BRITISH_AMERICAN,
        note="-our/-re/-ise/-ll- spellings vs -or/-er/-ize/-l-; Oxford -ize counts as the "
        "american arm",
    ),
    Convention("numbers", ("words", "digits"), kind="number", note="matched by value"),
    Convention(
        "titles",
        ("abbreviated", "spelled"),
        ((("mr",), ("mister",)), (("mrs",), ("missus",)), (("dr",), ("doctor",))),
    ),
    Convention("ampersand", ("&", "and"), ((("&",), ("and",)),)),
)
"""The conventions table (versioned by :data:`CONVENTIONS_VERSION`)."""

_UNITS_TEXT = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
)
_TENS_TEXT = "twenty thirty forty fifty sixty seventy eighty ninety"
_UNITS = {w: i for i, w in enumerate(_UNITS_TEXT.split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(_TENS_TEXT.split())}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORDS = set(_UNITS) | set(_TENS) | set(_SCALES)

_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+(?:['\u2019.\-][^\W\d_]+)*\.?|[%&]")


@dataclass(frozen=True)
class _Tok:
    key: str  # what alignment compares: a class key for convention tokens, else the word
    convention: str | None = None
    arm: int = -1


def _lookup(conventions: Sequence[Convention]) -> tuple[dict[tuple[str, ...], _Tok], bool]:
    table: dict[tuple[str, ...], _Tok] = {}
    numbers = False
    for conv in conventions:
        if conv.kind == "number":
            numbers = True
            continue
        for ci, arms in enumerate(conv.classes):
            for arm, forms in enumerate(arms):
                for form in forms:
                    toks = tuple(form.lower().split())
                    if toks in table:
                        raise ValueError(f"form {form!r} appears twice in the conventions table")
                    table[toks] = _Tok(f"\x01{conv.name}:{ci}", conv.name, arm)
    return table, numbers


def _parse_number_words(words: list[str]) -> list[int]:
    """Values of the numbers spelled by ``words`` (all number words), split where a new number
    must start ("one two" is two numbers, "twenty one" and "three hundred five" are one)."""
    values: list[int] = []
    total = current = 0
    last = ""  # kind of the previous word: unit, teen, tens, hundred, scale
    started = False

    def flush() -> None:
        nonlocal total, current, last, started
        if started:
            values.append(total + current)
        total = current = 0
        last = ""
        started = False

    for w in words:
        if w in _UNITS:
            v = _UNITS[w]
            kind = "teen" if v >= 10 else "unit"
            ok = (
                not started
                or (last == "tens" and kind == "unit" and v > 0)
                or last in ("hundred", "scale")
            )
            if w == "zero" and started:
                ok = False
            if not ok:
                flush()
            current += v
            last, started = kind, True
        elif w in _TENS:
            if started and last not in ("hundred", "scale"):
                flush()
            current += _TENS[w]
            last, started = "tens", True
        elif w == "hundred":
            if started and last in ("unit", "teen") and 0 < current < 100:
                current *= 100
            else:
                flush()
                current = 100
            last, started = "hundred", True
        else:  # thousand, million
            scale = _SCALES[w]
            if started and last != "scale" and 0 < current < scale and total % (scale * 1000) == 0:
                total += current * scale
                current = 0
            else:
                flush()
                total = scale
            last, started = "scale", True
    flush()
    return values


def _ortho_tokens(
    text: str, table: Mapping[tuple[str, ...], _Tok], numbers: bool, max_len: int
) -> list[_Tok]:
    """Class tokens of ``text``; ``max_len`` is the longest multi-word form in ``table``."""
    raw = [t.replace("\u2019", "'").lower() for t in _TOKEN.findall(text)]
    raw = [t[:-1] if t.endswith(".") and len(t) > 1 else t for t in raw]
    out: list[_Tok] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        # multi-token forms first ("per cent")
        for k in range(min(max_len, len(raw) - i), 1, -1):
            hit = table.get(tuple(raw[i : i + k]))
            if hit is not None:
                out.append(hit)
                i += k
                break
        else:
            parts = tok.split("-")
            if numbers and all(p in _NUMBER_WORDS for p in parts):
                j = i + 1
                words = list(parts)
                while j < len(raw):
                    nxt = raw[j].split("-")
                    if all(p in _NUMBER_WORDS for p in nxt):
                        words.extend(nxt)
                        j += 1
                    elif (
                        raw[j] == "and"
                        and j + 1 < len(raw)
                        and words[-1] in ("hundred", "thousand", "million")
                        and all(p in _UNITS or p in _TENS for p in raw[j + 1].split("-"))
                    ):
                        j += 1  # "one hundred and five"
                    else:
                        break
                out.extend(_Tok(f"\x02num:{v}", "numbers", 0) for v in _parse_number_words(words))
                i = j
                continue
            if numbers and re.fullmatch(r"\d{1,3}(?:,\d{3})+|\d+", tok):
                out.append(_Tok(f"\x02num:{int(tok.replace(',', ''))}", "numbers", 1))
            elif (tok,) in table:
                out.append(table[(tok,)])
            else:
                out.append(_Tok(tok))
            i += 1
    return out


def _follow_row(followed: int, n: int) -> dict[str, Any]:
    r = _rate(followed, n)
    return {
        "n": n,
        "followed": followed,
        "rate": r["rate"],
        "ci_lo": r["ci_lo"],
        "ci_hi": r["ci_hi"],
    }


def orthographic_switch(
    pairs: Mapping[str, Sequence[tuple[str, str]]],
    conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
) -> dict[str, Any]:
    """Does each system write what the reference writes where the convention is arbitrary?

    ``pairs`` maps system -> [(reference, hypothesis)] in raw, un-normalized text. Both sides
    are tokenized (case-folded; convention forms and number runs become class tokens, numbers
    keyed by value) and aligned word by word. A *position* is an aligned reference/hypothesis
    token pair of the same convention class, i.e. the reference uses one arm and the
    hypothesis realises the same spoken item in either arm; other tokens are ignored.

    Per system, convention and reference arm: ``n`` positions, ``followed`` = hypothesis
    uses the reference's arm, ``rate = followed / n`` with a Wilson CI. The ``switch_index``
    = P(hyp writes arm 0 | ref arm 0) - P(hyp writes arm 0 | ref arm 1) (Newcombe CI) is
    about 0 for a system with a fixed house style, whichever style it is, and near 1 for a
    system that copies the references' convention item by item (NaN until both arms occur).
    ``house_style`` is the share of positions the hypothesis wrote in arm 0.
    """
    import kaldialign

    table, numbers = _lookup(conventions)
    max_len = max((len(k) for k in table), default=1)
    eps = "\x00eps"
    names = [c.name for c in conventions]
    arms = {c.name: c.arms for c in conventions}
    rows = []
    for system in sorted(pairs):
        counts = {name: [[0, 0], [0, 0]] for name in names}  # [ref arm][hyp arm]
        for ref_raw, hyp_raw in pairs[system]:
            ref = _ortho_tokens(ref_raw or "", table, numbers, max_len)
            hyp = _ortho_tokens(hyp_raw or "", table, numbers, max_len)
            if not ref:
                continue
            ri = hj = 0
            for rk, hk in kaldialign.align([t.key for t in ref], [t.key for t in hyp], eps):
                r = ref[ri] if rk != eps else None
                h = hyp[hj] if hk != eps else None
                ri += rk != eps
                hj += hk != eps
                if r is None or h is None or r.convention is None or r.key != h.key:
                    continue
                counts[r.convention][r.arm][h.arm] += 1
        per_conv: dict[str, Any] = {}
        for name in names:
            c = counts[name]
            n0, n1 = sum(c[0]), sum(c[1])
            arm_rows = {
                arms[name][0]: _follow_row(c[0][0], n0),
                arms[name][1]: _follow_row(c[1][1], n1),
            }
            d, lo, hi = newcombe_diff(c[0][0], n0, c[1][0], n1)
            per_conv[name] = {
                "n": n0 + n1,
                "arms": arm_rows,
                "switch_index": d,
                "switch_ci_lo": lo,
                "switch_ci_hi": hi,
                "house_style": {
                    arms[name][0]: (c[0][0] + c[1][0]) / (n0 + n1) if n0 + n1 else math.nan
                },
            }
        rows.append(
            {
                "system": system,
                "n_pairs": len(pairs[system]),
                "n_positions": sum(v["n"] for v in per_conv.values()),
                "conventions": per_conv,
            }
        )
    return {
        "audit": "orthographic_switch",
        "version": AUDITS_VERSION,
        "conventions_version": CONVENTIONS_VERSION,
        "status": "ok",
        "formula": "followed / positions where the hypothesis realises the reference's "
        "convention class (either arm); switch_index = P(arm0|ref arm0) - P(arm0|ref arm1)",
        "conventions": [
            {"name": c.name, "arms": list(c.arms), "note": c.note} for c in conventions
        ],
        "systems": rows,
    }
