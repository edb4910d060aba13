"""Constants and helpers shared by the ASR overfitting audits: versions, the masking word
list, Wilson rates, normalizer resolution and small text utilities."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from voxassay.stats.intervals import wilson_interval

AUDITS_VERSION = "asr-audits/1"
DITHER_DBFS = -60.0
"""Level of the noise that replaces a masked word (RMS, dBFS): quiet, but not digital zero,
which some engines (pocketsphinx) cannot decode at all."""

DEFAULT_NORMALIZER = "oal-en"
MAX_POINTS = 200

Normalizer = Callable[[str], str]

_FUNCTION_WORDS_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either else
    ever every few for from further had has have having he her here hers herself him himself
    his how however i if in into is it its itself just least less let like may me might mine
    more most much must my myself neither no nor not now of off on once one only or other ought
    our ours ourselves out over own same shall she should since so some such than that the
    their theirs them themselves then there these they this those though through thus till to
    too under until unto up upon us very was we were what whatever when where whether which
    while who whom whose why will with within without would yet you your yours yourself
    yourselves shall should therefore whereas whereby wherein herein thereof
"""
FUNCTION_WORDS: frozenset[str] = frozenset(_FUNCTION_WORDS_TEXT.split())
"""Words never chosen for masking: they are short or predictable from grammar alone."""


def _rate(k: int, n: int) -> dict[str, Any]:
    """``k / n`` with its 95 % Wilson interval (NaN when ``n == 0``)."""
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else math.nan, "ci_lo": lo, "ci_hi": hi}


def _resolve_normalizer(normalizer: str | Normalizer) -> Normalizer:
    if isinstance(normalizer, str):
        from voxassay.suites.asr.normalize import get_normalizer

        return get_normalizer(normalizer)
    return normalizer


def _normalizer_info(norm: Normalizer) -> dict[str, str]:
    return {
        "name": str(getattr(norm, "name", getattr(norm, "__name__", type(norm).__name__))),
        "version": str(getattr(norm, "version", "unversioned")),
    }


def _safe_name(item_id: str) -> str:
    return re.sub(r"[^\w.-]+", "_", item_id).strip("._") or "item"


def _count_ngram(tokens: Sequence[str], gram: Sequence[str]) -> int:
    """Occurrences of ``gram`` (possibly overlapping) in ``tokens``."""
    k = len(gram)
    if k == 0:
        return 0
    g = list(gram)
    return sum(1 for i in range(len(tokens) - k + 1) if list(tokens[i : i + k]) == g)
