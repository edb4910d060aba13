"""Overfitting audits for ASR benchmarks: does a system hear the audio or recall the references?

Four audits, each a pure scoring function plus (where audio must be constructed) an item-set
builder. None of them proves contamination on its own; each gives a rate with its
denominator and a confidence interval that a report can put beside WER.

1. **Consensus dissent** (:func:`consensus_dissent`): where a supermajority of *other*
   systems agree on a word that differs from the reference, does this system reproduce the
   reference instead? Honest systems mostly side with the panel there; a system that keeps
   reproducing the reference's idiosyncrasies probably saw the references.
2. **Audio masking** (:func:`build_masked_items`, :func:`masking_rates`): one content word is
   replaced by -60 dBFS noise; a system that still outputs the word fills it in from
   language-model priors or memory, not from the audio.
3. **Orthographic switch** (:func:`orthographic_switch`): arbitrary written conventions
   (colour/color, 20/twenty, %/percent, OK/okay, Mr./Mister, &/and). A system has a house
   style; following the reference's arm on both sides of a convention means it knows the
   references' text.
4. **Synthetic speech gap** (:func:`build_synthetic_items`, :func:`synthetic_gap`): WER on
   TTS renderings of the same transcripts minus WER on the real recordings, paired by item.

:func:`run_audits` computes every audit the items and records support and says why the
others were not run; its result is JSON-serialisable and goes into ``report.json`` under
``audits``.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from voxeval.core.audio import Audio, load_audio, write_wav
from voxeval.core.items import Item
from voxeval.core.records import Record
from voxeval.stats.intervals import paired_bootstrap_ratio_diff, wilson_interval

__all__ = [
    "AUDITS_VERSION",
    "CONVENTIONS_VERSION",
    "DEFAULT_CONVENTIONS",
    "DITHER_DBFS",
    "FUNCTION_WORDS",
    "Convention",
    "build_masked_items",
    "build_synthetic_items",
    "consensus_dissent",
    "masking_rates",
    "orthographic_switch",
    "run_audits",
    "synthetic_gap",
]

AUDITS_VERSION = "asr-audits/1"
CONVENTIONS_VERSION = "orth-conventions/1"
DITHER_DBFS = -60.0
"""Level of the noise that replaces a masked word (RMS, dBFS): quiet, but not digital zero,
which some engines (pocketsphinx) cannot decode at all."""

DEFAULT_NORMALIZER = "oal-en"
MAX_POINTS = 200

Normalizer = Callable[[str], str]


# --------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------


def _rate(k: int, n: int) -> dict[str, Any]:
    """``k / n`` with its 95 % Wilson interval (NaN when ``n == 0``)."""
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else math.nan, "ci_lo": lo, "ci_hi": hi}


def _resolve_normalizer(normalizer: str | Normalizer) -> Normalizer:
    if isinstance(normalizer, str):
        from voxeval.suites.asr.normalize import get_normalizer

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


# --------------------------------------------------------------------------------------
# 1. consensus dissent
# --------------------------------------------------------------------------------------

_ABSENT = "\x00absent"  # a reference word the hypothesis deleted
_NOTHING = ""  # no hypothesis words in an insertion gap


def _realise(ref: list[str], hyp: list[str]) -> tuple[list[str], list[str]]:
    """Map a hypothesis onto reference positions via the word alignment.

    Returns ``(at, gaps)``: ``at[p]`` is what the hypothesis says at reference word ``p`` (the
    reference word itself for a match or an equivalent split/joined compound, the hypothesis
    word for a substitution, ``_ABSENT`` for a deletion); ``gaps[g]`` (``g`` in ``0..len(ref)``)
    is the space-joined run of words inserted before reference word ``g`` (``""`` for none).
    """
    from voxeval.suites.asr.align import align_words

    at: list[str] = []
    gaps: list[list[str]] = [[]]
    for op, r, h in align_words(ref, hyp, merge_compounds=True):
        if op == "ins":
            gaps[-1].append(str(h))
            continue
        if op == "merge":
            # A compound written split or joined: equivalent, so it realises the reference.
            k = max(1, len(str(r).split()))
            span = ref[len(at) : len(at) + k]
            at.extend(span)
            gaps.extend([] for _ in span)
            continue
        if op == "ok":
            at.append(ref[len(at)])
        elif op == "sub":
            at.append(str(h))
        elif op == "del":
            at.append(_ABSENT)
        else:
            raise ValueError(f"unknown alignment op {op!r}")
        gaps.append([])
    if len(at) != len(ref):
        raise ValueError(f"alignment covers {len(at)} of {len(ref)} reference words")
    return at, [" ".join(g) for g in gaps]


def _top(counts: Counter[str], without: str | None = None) -> tuple[str, int]:
    """The most frequent value and its count, optionally with one vote for ``without`` removed.

    Ties go to the first value seen; a tie can never reach a supermajority above 0.5.
    """
    best, best_n = _NOTHING, 0
    for value, n in counts.items():
        n -= int(value == without)
        if n > best_n:
            best, best_n = value, n
    return best, best_n


def consensus_dissent(
    panel: Mapping[str, Mapping[str, str]],
    refs: Mapping[str, str],
    *,
    normalizer: str | Normalizer = DEFAULT_NORMALIZER,
    supermajority: float = 0.8,
    min_panel: int = 3,
    leave_one_out: bool = True,
    max_points: int = MAX_POINTS,
    flag_above: float = 0.5,
) -> dict[str, Any]:
    """How often each system reproduces the reference where the rest of the panel hears otherwise.

    ``panel`` maps system -> {item_id: pred_text}; ``refs`` maps item_id -> reference. Both
    sides are normalized, and each hypothesis is aligned to its reference word by word.

    A *dissent point* for system ``s`` is a reference slot where at least ``supermajority``
    of the *other* systems that transcribed the item (leave-one-out: ``s`` never votes in the
    consensus it is measured against, so a memorising system cannot create or break the
    consensus itself) say the same thing and it differs from the reference. Slots are
    reference words (the consensus word is a substitute, or *absent* when the panel deletes
    the word) and the gaps between them (the panel agrees on a word the reference lacks).
    An item counts for ``s`` only when ``s`` and at least ``min_panel - 1`` others have it.

    Per system: ``reproduced / dissent_points`` (the reference-reproduction rate) with a
    Wilson CI, plus how often it follows the consensus instead or says something else, and
    ``agreement_elsewhere`` = reference words it matches / reference words that are not
    dissent points on the same items (its ordinary accuracy, for comparison). A system is
    ``flagged`` when the Wilson lower bound of its reproduction rate exceeds ``flag_above``.

    ``points`` lists dissent slots (capped at ``max_points``; ``n_points`` is exact) with the
    full-panel share agreeing with the consensus and which systems reproduced the reference.
    With ``leave_one_out=False`` the audited system votes too (for comparison only).
    Returns ``status = insufficient_panel`` with a ``reason`` when fewer than ``min_panel``
    distinct systems share items with references.
    """
    if not 0.5 < supermajority <= 1.0:
        raise ValueError("supermajority must be in (0.5, 1]")
    if min_panel < 2:
        raise ValueError("min_panel must be at least 2")
    norm = _resolve_normalizer(normalizer)
    base: dict[str, Any] = {
        "audit": "consensus_dissent",
        "version": AUDITS_VERSION,
        "normalizer": _normalizer_info(norm),
        "supermajority": supermajority,
        "min_panel": min_panel,
        "leave_one_out": leave_one_out,
    }
    systems = sorted(s for s, preds in panel.items() if any(i in refs for i in preds))
    if len(systems) < min_panel:
        return {
            **base,
            "status": "insufficient_panel",
            "reason": f"{len(systems)} system(s) with predictions on referenced items "
            f"({', '.join(systems) or 'none'}); the consensus needs at least {min_panel} "
            "distinct systems",
        }
    stats: dict[str, Counter[str]] = {s: Counter() for s in systems}
    points: list[dict[str, Any]] = []
    n_points = 0
    n_items = 0
    for item_id in sorted(refs):
        members = [s for s in systems if item_id in panel[s]]
        if len(members) < min_panel:
            continue
        ref = norm(refs[item_id]).split()
        if not ref:
            continue
        n_items += 1
        real = {s: _realise(ref, norm(panel[s][item_id]).split()) for s in members}
        for s in members:
            stats[s]["items"] += 1
        slots: list[tuple[str, int, str, dict[str, str]]] = []
        for p, word in enumerate(ref):
            slots.append(("word", p, word, {s: real[s][0][p] for s in members}))
        for g in range(len(ref) + 1):
            slots.append(("gap", g, _NOTHING, {s: real[s][1][g] for s in members}))
        for kind, pos, ref_word, said in slots:
            dissent_for: list[str] = []
            consensus = ""
            votes = Counter(said[v] for v in members)
            n_voters = len(members) - 1 if leave_one_out else len(members)
            for s in members:
                top, count = _top(votes, said[s] if leave_one_out else None)
                is_point = top != ref_word and count / n_voters >= supermajority
                if is_point:
                    dissent_for.append(s)
                    consensus = top
                    c = stats[s]
                    c["points"] += 1
                    sub_kind = (
                        "insertion"
                        if kind == "gap"
                        else "deletion"
                        if top == _ABSENT
                        else "substitution"
                    )
                    c[f"points_{sub_kind}"] += 1
                    if said[s] == ref_word:
                        c["reproduced"] += 1
                        c[f"reproduced_{sub_kind}"] += 1
                    elif said[s] == top:
                        c["followed"] += 1
                    else:
                        c["other"] += 1
                elif kind == "word":
                    c = stats[s]
                    c["elsewhere"] += 1
                    c["elsewhere_match"] += int(said[s] == ref_word)
            if not dissent_for:
                continue
            n_points += 1
            if len(points) < max_points:
                agree = sum(1 for s in members if said[s] == consensus)
                points.append(
                    {
                        "item": item_id,
                        "slot": kind,
                        "position": pos,
                        "kind": (
                            "insertion"
                            if kind == "gap"
                            else "deletion"
                            if consensus == _ABSENT
                            else "substitution"
                        ),
                        "reference_word": ref_word if kind == "word" else None,
                        "consensus_word": None if consensus == _ABSENT else consensus,
                        "agree": agree,
                        "n_panel": len(members),
                        "share": agree / len(members),
                        "dissent_for": dissent_for,
                        "reproduced_reference": [s for s in members if said[s] == ref_word],
                    }
                )
    if n_items == 0:
        return {
            **base,
            "status": "insufficient_panel",
            "reason": f"no item with a non-empty reference was transcribed by at least "
            f"{min_panel} of the {len(systems)} systems",
        }
    rows = []
    for s in systems:
        c = stats[s]
        row: dict[str, Any] = {"system": s, "items": c["items"]}
        r = _rate(c["reproduced"], c["points"])
        row.update(
            {
                "dissent_points": r["n"],
                "reproduced": r["k"],
                "rate": r["rate"],
                "ci_lo": r["ci_lo"],
                "ci_hi": r["ci_hi"],
                "followed_consensus": c["followed"],
                "other": c["other"],
                "by_kind": {
                    k: {"n": c[f"points_{k}"], "reproduced": c[f"reproduced_{k}"]}
                    for k in ("substitution", "deletion", "insertion")
                },
                "agreement_elsewhere": (
                    c["elsewhere_match"] / c["elsewhere"] if c["elsewhere"] else math.nan
                ),
                "flagged": bool(r["n"] > 0 and r["ci_lo"] > flag_above),
            }
        )
        rows.append(row)
    return {
        **base,
        "status": "ok",
        "formula": "reproduced reference words / dissent points on items the system "
        "transcribed (leave-one-out consensus)",
        "n_items": n_items,
        "n_points": n_points,
        "points_truncated": n_points > len(points),
        "flag_above": flag_above,
        "systems": rows,
        "flagged": [r["system"] for r in rows if r["flagged"]],
        "points": points,
    }


# --------------------------------------------------------------------------------------
# 2. audio masking
# --------------------------------------------------------------------------------------

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

_WORD_CLEAN = re.compile(r"[^\w']+")


def _clean_word(word: str) -> str:
    """Lower-case, straight apostrophes, punctuation stripped (builder-side matching only)."""
    return _WORD_CLEAN.sub("", word.replace("\u2019", "'").lower()).strip("'")


def _dither(n: int, rng: np.random.Generator, dbfs: float) -> np.ndarray:
    noise = rng.standard_normal(n)
    rms = float(np.sqrt(np.mean(noise**2))) if n else 1.0
    return (noise * (10 ** (dbfs / 20) / (rms or 1.0))).astype(np.float32)


def build_masked_items(
    items: Sequence[Item],
    word_times: Mapping[str, Sequence[Mapping[str, Any]]],
    out_dir: str | Path,
    *,
    per_item: int = 1,
    seed: int = 0,
    min_word_len: int = 4,
    pad_ms: float = 30.0,
    ramp_ms: float = 5.0,
    dither_dbfs: float = DITHER_DBFS,
    timestamps_from: str | None = None,
) -> list[Item]:
    """Copies of ``items`` with one content word replaced by quiet noise, one word per copy.

    ``word_times[item_id]`` is a list of ``{word, start, end}`` (seconds), e.g. the ``words``
    of any system's record. Eligible words: at least ``min_word_len`` letters, alphabetic
    (apostrophes allowed), not in :data:`FUNCTION_WORDS`, a positive span, and present in the
    item's reference text (so "still hears it" means reproducing a reference word).
    Words that occur once in the reference are preferred. Up to ``per_item`` distinct words
    per item are drawn with ``random.Random(f"{seed}:{item_id}")``.

    The span ``[start - pad, end + pad]`` (clipped to the clip; extended to the clip's start
    for the first timestamped word and to its end for the last, whose times engines often
    clip short) is replaced by Gaussian noise
    at ``dither_dbfs`` RMS (not digital zero), with ``ramp_ms`` raised-cosine cross-fades
    at both edges inside the span. The audio keeps the source's sample rate and is written as
    16-bit PCM, so outside the span the samples equal the source's (bit-exact for 16-bit
    mono sources). Items without audio, timestamps or an eligible word are skipped.
    """
    if per_item < 1:
        raise ValueError("per_item must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    built: list[Item] = []
    for item in items:
        times = word_times.get(item.id)
        if not times or not item.audio_filepath:
            continue
        ref_words = [_clean_word(w) for w in (item.text or "").split()]
        ref_count = Counter(w for w in ref_words if w)
        eligible: list[tuple[int, str]] = []
        for i, wt in enumerate(times):
            w = _clean_word(str(wt.get("word", "")))
            start, end = float(wt.get("start", 0.0)), float(wt.get("end", 0.0))
            if (
                len(w.replace("'", "")) < min_word_len
                or not w.replace("'", "").isalpha()
                or w in FUNCTION_WORDS
                or end <= start
                or (item.text is not None and ref_count[w] == 0)
            ):
                continue
            eligible.append((i, w))
        if not eligible:
            continue
        rng = random.Random(f"{seed}:{item.id}")
        unique = [e for e in eligible if ref_count[e[1]] <= 1]
        repeated = [e for e in eligible if ref_count[e[1]] > 1]
        rng.shuffle(unique)
        rng.shuffle(repeated)
        chosen: list[tuple[int, str]] = []
        for e in unique + repeated:
            if len(chosen) == per_item:
                break
            if all(e[1] != c[1] for c in chosen):
                chosen.append(e)
        source = load_audio(item.audio_filepath, sr=None)
        sr = source.sr
        for index, word in sorted(chosen):
            wt = times[index]
            w_start, w_end = float(wt["start"]), float(wt["end"])
            a = max(0, round((w_start - pad_ms / 1000) * sr))
            b = min(len(source.samples), round((w_end + pad_ms / 1000) * sr))
            # Engines' first/last word times are often clipped (Whisper ends the last word
            # early); the clip edge beyond them holds no other word, so mask up to it.
            if index == 0:
                a = 0
            if index == len(times) - 1:
                b = len(source.samples)
            if b <= a:
                continue
            samples = source.samples.copy()
            crc = zlib.crc32(item.id.encode("utf-8"))
            noise = _dither(b - a, np.random.default_rng([seed, crc, index]), dither_dbfs)
            ramp = min(round(ramp_ms / 1000 * sr), (b - a) // 2)
            weight = np.ones(b - a, dtype=np.float32)
            if ramp > 0:
                rise = (0.5 - 0.5 * np.cos(np.pi * (np.arange(ramp) + 0.5) / ramp)).astype(
                    np.float32
                )
                weight[:ramp] = rise
                weight[-ramp:] = rise[::-1]
            samples[a:b] = samples[a:b] * (1 - weight) + noise * weight
            new_id = f"{item.id}__mask{index}"
            path = out / f"{_safe_name(new_id)}.wav"
            write_wav(path, Audio(samples, sr))
            built.append(
                Item(
                    id=new_id,
                    audio_filepath=str(path),
                    duration=len(samples) / sr,
                    text=item.text,
                    speaker=item.speaker,
                    labels={
                        "audit": "masking",
                        "source_item": item.id,
                        "masked_word": word,
                        "masked_index": index,
                        "condition": "audit",
                        "constructed": True,
                    },
                    meta={
                        "recipe": {
                            "audit": "masking",
                            "version": AUDITS_VERSION,
                            "source_audio": item.audio_filepath,
                            "sample_rate": sr,
                            "word_start_s": w_start,
                            "word_end_s": w_end,
                            "span_start_s": a / sr,
                            "span_end_s": b / sr,
                            "pad_ms": pad_ms,
                            "ramp_ms": ramp / sr * 1000,
                            "dither_dbfs": dither_dbfs,
                            "seed": seed,
                            "timestamps_from": timestamps_from,
                        }
                    },
                )
            )
    return built


def _heard(hyp: list[str], ref: list[str], word: list[str]) -> bool:
    """The masking rule: the word occurs in the hypothesis more often than in the rest of the
    reference (the reference minus the one masked occurrence)."""
    return _count_ngram(hyp, word) > _count_ngram(ref, word) - 1


def masking_rates(
    items: Sequence[Item],
    records_by_system: Mapping[str, Mapping[str, str]],
    normalizer: str | Normalizer = DEFAULT_NORMALIZER,
) -> dict[str, Any]:
    """Share of masked items where a system still outputs the silenced word.

    Items labelled ``audit = masking`` are scored; ``records_by_system`` maps system ->
    {item_id: pred_text}. The masked word, reference and hypothesis are normalized alike
    (the word may become several tokens, matched as a sequence). Rule, position-free so it
    does not depend on how an aligner places words around the gap: the item counts as
    *heard* when the word occurs in the hypothesis more times than in the rest of the
    reference (reference count minus the masked occurrence). Repeated words are thus judged
    conservatively (filling the gap while dropping the other occurrence is not counted).

    Per system: ``rate = heard / n`` where ``n`` = masked items the system has a prediction
    for and whose word normalizes to something, with a Wilson CI. When the system also has a
    prediction on the source item, ``source_rate`` applies the same rule to the unmasked
    audio, and ``rate_given_source`` = heard on masked / items whose source it heard (the
    word was recognisable at all), which is the cleaner denominator.
    """
    norm = _resolve_normalizer(normalizer)
    masked = [it for it in items if it.labels.get("audit") == "masking"]
    rows = []
    for system in sorted(records_by_system):
        preds = records_by_system[system]
        n = heard = skipped = 0
        src_n = src_heard = both = 0
        for it in masked:
            if it.id not in preds:
                continue
            word = norm(str(it.labels.get("masked_word", ""))).split()
            ref = norm(it.text or "").split()
            if not word or _count_ngram(ref, word) == 0:
                skipped += 1
                continue
            hit = _heard(norm(preds[it.id]).split(), ref, word)
            n += 1
            heard += int(hit)
            source_id = str(it.labels.get("source_item", ""))
            if source_id in preds:
                src_n += 1
                if _heard(norm(preds[source_id]).split(), ref, word):
                    src_heard += 1
                    both += int(hit)
        r = _rate(heard, n)
        rows.append(
            {
                "system": system,
                "n": n,
                "heard": heard,
                "rate": r["rate"],
                "ci_lo": r["ci_lo"],
                "ci_hi": r["ci_hi"],
                "n_skipped": skipped,
                "source": _rate(src_heard, src_n),
                "given_source": _rate(both, src_heard),
            }
        )
    return {
        "audit": "masking",
        "version": AUDITS_VERSION,
        "normalizer": _normalizer_info(norm),
        "status": "ok",
        "rule": "heard if count(word in hypothesis) > count(word in reference) - 1",
        "formula": "heard / masked items with a prediction",
        "n_masked_items": len(masked),
        "systems": rows,
    }


# --------------------------------------------------------------------------------------
# 3. orthographic switch
# --------------------------------------------------------------------------------------


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


def _newcombe_diff(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """``p1 - p2`` with Newcombe's hybrid score interval built from Wilson intervals."""
    if n1 == 0 or n2 == 0:
        return (math.nan, math.nan, math.nan)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return (d, max(-1.0, lo), min(1.0, hi))


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
            d, lo, hi = _newcombe_diff(c[0][0], n0, c[1][0], n1)
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


# --------------------------------------------------------------------------------------
# 4. synthetic speech gap
# --------------------------------------------------------------------------------------


class Synthesizer(Protocol):
    def synthesize(self, text: str) -> Audio: ...


def _synth_spec(synthesizer: Any) -> str:
    for attr in ("spec", "name"):
        value = getattr(synthesizer, attr, None)
        if isinstance(value, str) and value:
            return value
        if value is not None and str(value):
            return str(value)
    describe = getattr(synthesizer, "describe", None)
    if callable(describe):
        try:
            info = describe()
            if isinstance(info, dict) and info.get("spec"):
                return str(info["spec"])
        except Exception:
            pass
    return type(synthesizer).__name__


def build_synthetic_items(
    items: Sequence[Item],
    synthesizer: Synthesizer,
    out_dir: str | Path,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    tts_spec: str | None = None,
) -> list[Item]:
    """TTS renderings of each item's reference text, as new items paired to their source.

    ``synthesizer.synthesize(text)`` must return an :class:`Audio` (or ``(samples, sr)``);
    the result is written as 16-bit WAV at its own rate. Items without text are skipped.
    ``progress(done, total, item_id)`` is called after each item. A synthesizer failure
    propagates (with the item id in the message): a silently smaller audit set would bias
    the gap. ``tts_spec`` defaults to the synthesizer's ``spec`` attribute.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = tts_spec or _synth_spec(synthesizer)
    todo = [it for it in items if it.text and it.text.strip()]
    built: list[Item] = []
    for done, item in enumerate(todo, start=1):
        text = str(item.text)
        try:
            result: Any = synthesizer.synthesize(text)
        except Exception as exc:
            raise RuntimeError(f"synthesizing item {item.id!r} with {spec}: {exc}") from exc
        if isinstance(result, Audio):
            audio = result
        elif isinstance(result, tuple) and len(result) == 2:
            audio = Audio(np.asarray(result[0], dtype=np.float32), int(result[1]))
        else:
            raise TypeError(f"{spec} returned {type(result).__name__}, expected Audio")
        samples = np.asarray(audio.samples, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            raise RuntimeError(f"{spec} returned no audio for item {item.id!r}")
        new_id = f"{item.id}__synthetic"
        path = out / f"{_safe_name(new_id)}.wav"
        write_wav(path, Audio(samples, audio.sr))
        built.append(
            Item(
                id=new_id,
                audio_filepath=str(path),
                duration=samples.size / audio.sr,
                text=item.text,
                speaker=f"tts:{spec}",
                labels={
                    "audit": "synthetic",
                    "source_item": item.id,
                    "condition": "audit",
                    "tts": spec,
                    "constructed": True,
                },
                meta={
                    "recipe": {
                        "audit": "synthetic",
                        "version": AUDITS_VERSION,
                        "tts": spec,
                        "source_audio": item.audio_filepath,
                        "sample_rate": audio.sr,
                    }
                },
            )
        )
        if progress is not None:
            progress(done, len(todo), item.id)
    return built


def _errors(c: Mapping[str, Any]) -> int:
    return int(c["sub"]) + int(c["del"]) + int(c["ins"])


def synthetic_gap(
    real_counts: Mapping[str, Mapping[str, Mapping[str, Any]]],
    synth_counts: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """WER on synthetic renderings minus WER on the real recordings of the same transcripts.

    Both arguments map system -> {source_item_id: counts} with ``sub``, ``del``, ``ins`` and
    ``ref_words`` (as :func:`voxeval.suites.asr.wer.score_text` returns). Per system, over the
    source items present on both sides with a non-empty reference (``n``):
    ``wer_synth = sum(S+D+I) / sum(N)`` on synthetic audio, ``wer_real`` likewise, and
    ``gap = wer_synth - wer_real`` with a paired bootstrap CI over items (the same items are
    drawn for both arms). A clearly negative gap means the system finds synthetic speech
    much easier, i.e. a benchmark built from it overstates real-world accuracy.
    """
    rows = []
    for system in sorted(set(real_counts) | set(synth_counts)):
        real = real_counts.get(system, {})
        synth = synth_counts.get(system, {})
        common = sorted(
            i
            for i in set(real) & set(synth)
            if int(real[i].get("ref_words", 0)) > 0 and int(synth[i].get("ref_words", 0)) > 0
        )
        pd = paired_bootstrap_ratio_diff(
            [_errors(synth[i]) for i in common],
            [int(synth[i]["ref_words"]) for i in common],
            [_errors(real[i]) for i in common],
            [int(real[i]["ref_words"]) for i in common],
            n_boot=n_boot,
            seed=seed,
        )
        rows.append(
            {
                "system": system,
                "n": len(common),
                "wer_synth": pd.a,
                "wer_real": pd.b,
                "gap": pd.diff,
                "ci_lo": pd.ci_lo,
                "ci_hi": pd.ci_hi,
                "p_value": pd.p_value,
                "n_real_only": len(set(real) - set(synth)),
                "n_synth_only": len(set(synth) - set(real)),
            }
        )
    return {
        "audit": "synthetic_gap",
        "version": AUDITS_VERSION,
        "status": "ok",
        "formula": "WER(synthetic) - WER(real) over the same source items, corpus-level "
        "(sum of errors / sum of reference words); paired bootstrap over items",
        "systems": rows,
    }


# --------------------------------------------------------------------------------------
# everything the data supports
# --------------------------------------------------------------------------------------


def _not_run(reason: str) -> dict[str, Any]:
    return {"status": "not_run", "reason": reason}


def _item_counts(ref: str, hyp: str, norm: Normalizer) -> dict[str, Any]:
    from voxeval.suites.asr.align import count_errors

    rt, ht = norm(ref).split(), norm(hyp).split()
    c = count_errors(rt, ht)
    return {"sub": c.sub, "del": c.dele, "ins": c.ins, "ref_words": c.ref_words}


def run_audits(
    items: Sequence[Item],
    records: Sequence[Record],
    *,
    normalizer: str | Normalizer = DEFAULT_NORMALIZER,
) -> dict[str, Any]:
    """Run each audit the items and records support; say why the others were not run.

    Records count when ``status == ok`` and ``output.pred_text`` is a string; with several
    repeats the lowest repeat is used. Benchmark items are those without an ``audit`` label.

    - ``consensus``: needs >= 3 systems with records on the same benchmark items.
    - ``masking``: needs items labelled ``audit = masking`` with records (source items'
      records, when present, give the conditional rate).
    - ``orthographic``: any records on benchmark items with reference text.
    - ``synthetic``: items labelled ``audit = synthetic`` and, for the same system,
      records on both the synthetic item and its source item.

    Every computed audit has ``status = ok``; the others ``{"status": "not_run", "reason"}``.
    """
    norm = _resolve_normalizer(normalizer)
    by_id = {it.id: it for it in items}
    preds: dict[str, dict[str, str]] = {}
    chosen_repeat: dict[tuple[str, str], int] = {}
    usage: dict[str, Counter[str]] = {}
    for rec in records:
        u = usage.setdefault(rec.system, Counter())
        text = rec.output.get("pred_text") if rec.status == "ok" else None
        if not isinstance(text, str):
            u["not_ok"] += 1
            continue
        key = (rec.system, rec.id)
        if key in chosen_repeat and chosen_repeat[key] <= rec.repeat:
            continue
        chosen_repeat[key] = rec.repeat
        preds.setdefault(rec.system, {})[rec.id] = text
    for system, u in usage.items():
        u["used"] = len(preds.get(system, {}))

    bench = {
        it.id: it.text
        for it in items
        if not it.labels.get("audit") and it.text is not None and it.text.strip()
    }
    result: dict[str, Any] = {
        "version": AUDITS_VERSION,
        "normalizer": _normalizer_info(norm),
        "records": {s: dict(u) for s, u in sorted(usage.items())},
    }

    # consensus
    panel = {s: {i: t for i, t in p.items() if i in bench} for s, p in preds.items()}
    panel = {s: p for s, p in panel.items() if p}
    refs = {i: str(t) for i, t in bench.items()}
    if len(panel) < 3:
        result["consensus"] = _not_run(
            f"needs ok records from at least 3 distinct systems on the same benchmark items; "
            f"have {len(panel)}"
        )
    else:
        cons = consensus_dissent(panel, refs, normalizer=norm)
        if cons["status"] != "ok":
            cons = {**_not_run(cons["reason"]), "detail": cons["status"]}
        result["consensus"] = cons

    # masking
    masked = [it for it in items if it.labels.get("audit") == "masking"]
    if not masked:
        result["masking"] = _not_run("no items labelled audit=masking")
    else:
        mask_preds = {s: {i: t for i, t in p.items() if i in by_id} for s, p in preds.items()}
        mask_preds = {s: p for s, p in mask_preds.items() if any(it.id in p for it in masked)}
        if not mask_preds:
            result["masking"] = _not_run("no ok records on the masked items")
        else:
            result["masking"] = masking_rates(items, mask_preds, norm)

    # orthographic
    pairs = {
        s: [(str(bench[i]), t) for i, t in sorted(p.items()) if i in bench]
        for s, p in preds.items()
    }
    pairs = {s: v for s, v in pairs.items() if v}
    if not pairs:
        result["orthographic"] = _not_run("no ok records on benchmark items with reference text")
    else:
        result["orthographic"] = orthographic_switch(pairs)

    # synthetic
    synth_items = [it for it in items if it.labels.get("audit") == "synthetic"]
    if not synth_items:
        result["synthetic"] = _not_run("no items labelled audit=synthetic")
    else:
        real_c: dict[str, dict[str, dict[str, Any]]] = {}
        synth_c: dict[str, dict[str, dict[str, Any]]] = {}
        for system, p in preds.items():
            for it in synth_items:
                src = str(it.labels.get("source_item", ""))
                src_item = by_id.get(src)
                if it.id not in p or src not in p or it.text is None:
                    continue
                ref_real = src_item.text if src_item and src_item.text is not None else it.text
                synth_c.setdefault(system, {})[src] = _item_counts(it.text, p[it.id], norm)
                real_c.setdefault(system, {})[src] = _item_counts(ref_real, p[src], norm)
        if not synth_c:
            result["synthetic"] = _not_run(
                "no system has ok records on both a synthetic item and its source item"
            )
        else:
            result["synthetic"] = synthetic_gap(real_c, synth_c)
    return result
