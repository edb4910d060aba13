"""Audio masking audit: replace one content word with quiet noise and count how often a system
still outputs it."""

from __future__ import annotations

import random
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, write_wav
from voxassay.core.items import Item, load_item_audio
from voxassay.suites.asr.audits._common import (
    AUDITS_VERSION,
    DEFAULT_NORMALIZER,
    DITHER_DBFS,
    FUNCTION_WORDS,
    Normalizer,
    _count_ngram,
    _normalizer_info,
    _rate,
    _resolve_normalizer,
    _safe_name,
)

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
        source = load_item_audio(item, sr=None)
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
