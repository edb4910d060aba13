"""WER and CER: per-item error counts and corpus-level aggregation with bootstrap CIs.

WER = (S + D + I) / N where N is the number of reference words after normalization,
summed over the utterances of a group (corpus level, never a mean of per-item rates).
CER = character edits / reference characters, likewise pooled. Utterances whose reference
normalizes to nothing are kept out of both denominators and reported apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from voxassay.stats.intervals import bootstrap_ratio_ci

METRICS_VERSION = "asr/1"
DEFAULT_NORMALIZER = "oal-en"


@lru_cache(maxsize=8)
def _normalizer(name: str) -> Any:
    from voxassay.suites.asr.normalize import get_normalizer

    return get_normalizer(name)


def normalizer_version(name: str) -> str:
    return str(_normalizer(name).version)


def merges_compounds(normalizer: str) -> bool:
    """The compound rule that goes with a normalizer: the leaderboard-style ones (``oal-en``,
    ``whisper-en``) count a split or joined compound ("white board" / "whiteboard") as equal;
    ``raw`` is plain word error rate."""
    return normalizer != "raw"


def score_text(
    ref: str, hyp: str, normalizer: str = DEFAULT_NORMALIZER, merge_compounds: bool | None = None
) -> dict[str, Any]:
    """Per-item counts after normalizing both sides with ``normalizer`` (see
    :func:`metrics_from_normalized`); ``merge_compounds`` None: :func:`merges_compounds`."""
    norm = _normalizer(normalizer)
    merge = merges_compounds(normalizer) if merge_compounds is None else merge_compounds
    return metrics_from_normalized(norm(ref), norm(hyp), norm.version, merge)


def metrics_from_normalized(
    ref_n: str, hyp_n: str, version: str, merge_compounds: bool = True
) -> dict[str, Any]:
    """Counts for one normalized pair: ``sub, del, ins, ref_words, hyp_words, char_errors,
    ref_chars, empty_ref``, the normalized texts and the normalizer version.

    Words are the whitespace split; with ``merge_compounds`` split/joined compounds cost
    nothing (the flag is recorded when off).
    """
    from voxassay.suites.asr.align import count_char_errors, count_errors

    rt, ht = ref_n.split(), hyp_n.split()
    counts = count_errors(rt, ht, merge_compounds=merge_compounds)
    chars = count_char_errors(ref_n, hyp_n)
    return {
        "normalizer": version,
        "sub": counts.sub,
        "del": counts.dele,
        "ins": counts.ins,
        "ref_words": counts.ref_words,
        "hyp_words": len(ht),
        "char_errors": chars.errors,
        "ref_chars": chars.ref_words,
        "empty_ref": len(rt) == 0,
        "ref_norm": ref_n,
        "hyp_norm": hyp_n,
        **({} if merge_compounds else {"merge_compounds": False}),
    }


@dataclass
class Scored:
    """One scored utterance as the aggregator sees it."""

    id: str
    speaker: str | None
    metrics: dict[str, Any]
    compute_s: float = 0.0
    audio_s: float = 0.0


def aggregate(
    scored: Sequence[Scored], n_failed: int = 0, *, seed: int = 0, n_boot: int = 1000
) -> dict[str, Any]:
    """Corpus WER/CER of a group with S/D/I, n, and a 95 % bootstrap CI.

    The CI resamples speakers; an utterance without a speaker is its own cluster
    (``ci_unit`` says which: speaker, utterance or speaker+utterance). A group with a
    single speaker resamples its utterances (``utterance (1 speaker)``): that interval
    speaks for this talker only. ``n`` counts utterances in the WER
    denominator; ``n_empty_ref`` those kept out; ``n_failed`` records that were not ok.
    RTFx = total audio seconds / total compute seconds over the same utterances.
    """
    rows = [s for s in scored if not s.metrics.get("empty_ref")]
    empty = [s for s in scored if s.metrics.get("empty_ref")]
    sub = sum(int(s.metrics["sub"]) for s in rows)
    dele = sum(int(s.metrics["del"]) for s in rows)
    ins = sum(int(s.metrics["ins"]) for s in rows)
    ref_words = sum(int(s.metrics["ref_words"]) for s in rows)
    errors = sub + dele + ins
    char_err = sum(int(s.metrics.get("char_errors", 0)) for s in rows)
    ref_chars = sum(int(s.metrics.get("ref_chars", 0)) for s in rows)
    clusters = [s.speaker or f"utterance:{s.id}" for s in rows]
    known = sum(1 for s in rows if s.speaker)
    ci_unit = (
        "speaker" if known == len(rows) else ("utterance" if known == 0 else "speaker+utterance")
    )
    if len(set(clusters)) == 1 and len(rows) > 1:
        # One talker: nothing can be said across speakers; resample that talker's utterances.
        clusters = [f"utterance:{s.id}" for s in rows]
        ci_unit = "utterance (1 speaker)"
    lo, hi = bootstrap_ratio_ci(
        [int(s.metrics["sub"]) + int(s.metrics["del"]) + int(s.metrics["ins"]) for s in rows],
        [int(s.metrics["ref_words"]) for s in rows],
        clusters,
        seed=seed,
        n_boot=n_boot,
    )
    compute = sum(s.compute_s for s in scored)
    audio = sum(s.audio_s for s in scored)
    return {
        "wer": errors / ref_words if ref_words else math.nan,
        "ci_lo": lo,
        "ci_hi": hi,
        "ci_unit": ci_unit,
        "n_clusters": len(set(clusters)),
        "sub": sub,
        "del": dele,
        "ins": ins,
        "errors": errors,
        "ref_words": ref_words,
        "cer": char_err / ref_chars if ref_chars else math.nan,
        "n": len(rows),
        "n_empty_ref": len(empty),
        "empty_ref_hyp_words": sum(int(s.metrics.get("hyp_words", 0)) for s in empty),
        "n_failed": n_failed,
        "audio_s": round(audio, 3),
        "compute_s": round(compute, 3),
        "rtfx": audio / compute if compute > 0 else math.nan,
    }


def group_values(labels: dict[str, Any], keys: Iterable[str]) -> list[tuple[str, str]]:
    """The (group, name) pairs an item belongs to for the given label keys."""
    out = []
    for key in keys:
        value = labels.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            value = str(value).lower()
        out.append((key, str(value)))
    return out
