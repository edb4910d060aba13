"""Word and character error counts, and word alignments for display.

Word counts come from ``kaldialign`` with ``merge_compounds=True`` by default, the scoring the
Open ASR Leaderboard uses: adjacent words on either side may be joined to match one word on
the other side at no cost ("white board" = "whiteboard"), and ties between equally cheap
alignments are broken the way kaldialign breaks them, so the S/D/I split matches too.

Rates are pooled, never averaged: for a corpus, ``WER = sum(S + D + I) / sum(N)`` with ``N`` the
number of reference words after normalization (see :class:`ErrorCounts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import kaldialign

__all__ = [
    "AlignOp",
    "ErrorCounts",
    "align_words",
    "count_char_errors",
    "count_errors",
]

AlignOp = Literal["ok", "sub", "del", "ins", "merge"]

_EPS = ""  # never a word: words come from str.split()


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """Edit counts of one or more (reference, hypothesis) pairs.

    ``ref_words`` is the denominator: reference words for WER, reference characters for CER.
    Counts add up (``a + b``, ``sum(counts, ErrorCounts())``), so corpus figures are pooled.
    """

    sub: int = 0
    dele: int = 0
    ins: int = 0
    ref_words: int = 0

    @property
    def errors(self) -> int:
        """``S + D + I``."""
        return self.sub + self.dele + self.ins

    @property
    def rate(self) -> float:
        """``(S + D + I) / ref_words``: ``0.0`` for 0/0 and ``inf`` for n/0, as kaldialign."""
        if self.ref_words:
            return self.errors / self.ref_words
        return float("inf") if self.errors else 0.0

    def __add__(self, other: ErrorCounts) -> ErrorCounts:
        if not isinstance(other, ErrorCounts):
            return NotImplemented
        return ErrorCounts(
            self.sub + other.sub,
            self.dele + other.dele,
            self.ins + other.ins,
            self.ref_words + other.ref_words,
        )

    def __radd__(self, other: object) -> ErrorCounts:
        if other == 0:  # sum() starts from 0
            return self
        return NotImplemented


def count_errors(
    ref_tokens: Sequence[str], hyp_tokens: Sequence[str], merge_compounds: bool = True
) -> ErrorCounts:
    """Substitutions, deletions and insertions turning ``ref_tokens`` into ``hyp_tokens``.

    Minimum edit distance with unit costs (kaldialign). With ``merge_compounds`` adjacent
    tokens on either side may be concatenated to equal one token on the other side at zero
    cost. ``ref_words`` is ``len(ref_tokens)``; the utterance WER is ``errors / ref_words``.
    """
    result = kaldialign.edit_distance(ref_tokens, hyp_tokens, merge_compounds=merge_compounds)
    return ErrorCounts(
        sub=int(result["sub"]),
        dele=int(result["del"]),
        ins=int(result["ins"]),
        ref_words=len(ref_tokens),
    )


def align_words(
    ref_tokens: Sequence[str], hyp_tokens: Sequence[str], merge_compounds: bool = True
) -> list[tuple[AlignOp, str | None, str | None]]:
    """The alignment behind :func:`count_errors`, as ``(op, ref_word, hyp_word)`` triples.

    ``op`` is ``"ok"`` (equal words), ``"sub"``, ``"del"`` (``hyp_word`` is None), ``"ins"``
    (``ref_word`` is None) or ``"merge"``: a zero-cost compound match, where the side made of
    several words is given space-joined (``("white board", "whiteboard")``) and the other
    side may be one word or, too, several. Counting ``sub``/``del``/``ins`` triples gives the
    counts of :func:`count_errors`. Tokens must be non-empty; with ``merge_compounds`` they
    must not contain spaces (words from ``str.split`` never do).
    """
    if _EPS in ref_tokens or _EPS in hyp_tokens:
        raise ValueError("tokens must be non-empty strings")
    pairs = kaldialign.align(ref_tokens, hyp_tokens, _EPS, merge_compounds=merge_compounds)
    out: list[tuple[AlignOp, str | None, str | None]] = []
    for ref, hyp in pairs:
        if ref == _EPS:
            out.append(("ins", None, hyp))
        elif hyp == _EPS:
            out.append(("del", ref, None))
        elif merge_compounds and (" " in ref or " " in hyp):
            out.append(("merge", ref, hyp))
        elif ref == hyp:
            out.append(("ok", ref, hyp))
        else:
            out.append(("sub", ref, hyp))
    return out


def count_char_errors(ref: str, hyp: str) -> ErrorCounts:
    """Character edits turning ``ref`` into ``hyp``, for CER; ``ref_words`` = reference chars.

    jiwer's convention (``jiwer.cer`` / ``process_characters`` defaults): both strings are
    stripped of leading and trailing whitespace, and every remaining character, spaces
    included, is one symbol. ``CER = (S + D + I) / len(ref.strip())``, pooled over a corpus
    by adding counts. The total equals jiwer's (it is the Levenshtein distance); on ties the
    split into S, D and I follows kaldialign and may differ from jiwer's.
    """
    ref_chars = list(ref.strip())
    hyp_chars = list(hyp.strip())
    if ref_chars == hyp_chars:
        return ErrorCounts(ref_words=len(ref_chars))
    result = kaldialign.edit_distance(ref_chars, hyp_chars)
    return ErrorCounts(
        sub=int(result["sub"]),
        dele=int(result["del"]),
        ins=int(result["ins"]),
        ref_words=len(ref_chars),
    )
