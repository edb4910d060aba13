"""``voxassay su build-pairs``: pair manifests from any labelled manifest, seeded.

Speaker match: balanced same/different-speaker pairs (``speaker`` field); each clip pair is
used once, ordered at random. Emotion comparison: for a target emotion X, a clip's strength
is ``labels.emotion_scores[X]`` when present, else ``labels.intensity`` (a number, or
LO/MD/HI/XX as 1/2/3/none) of a clip whose ``labels.emotion`` is X; a pair is kept only when
the strengths differ by at least ``margin``, and the stronger clip is put first or second
at random so the truth is balanced between A and B.

Every output item carries ``labels.su_task`` (the family), ``labels.truth`` and
``labels.split``: ``calibration`` for a seeded, class-balanced share (default 25 %) that
threshold-based baselines may fit on, ``test`` for the rest; reports score test items only.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.items import Item
from voxassay.suites.su.tasks import CREMA_D_CODES, EVALS

__all__ = [
    "INTENSITY_LEVELS",
    "PAIRS_VERSION",
    "build_pairs",
    "emotion_strength",
    "items_from_crema_d_votes",
]

PAIRS_VERSION = "su-pairs-1"
MAX_ENUMERATE_CLIPS = 2000
MAX_ENUMERATE_PAIRS = 200_000
INTENSITY_LEVELS = {"LO": 1.0, "MD": 2.0, "HI": 3.0, "XX": None}


def _family(task: str) -> str:
    key = task.replace("-", "_")
    if key in EVALS:
        return EVALS[key].family
    if key in ("speaker_match", "emotion_compare", "synthetic_detection", "emotion"):
        return key
    raise InputError(
        f"build-pairs: unknown task {task!r}; use speaker_match, emotion_compare, "
        "synthetic_detection or emotion (or an eval name of those families)"
    )


def _source_path(item: Item) -> str | None:
    if item.audio_filepath:
        return item.audio_filepath
    return item.audio[0] if item.audio and len(item.audio) == 1 else None


def _split(ids_by_class: dict[str, list[str]], fraction: float, rng: random.Random) -> set[str]:
    """Calibration ids: ``round(fraction * n_class)`` per class (at least one when the
    class has >= 4 members and fraction > 0)."""
    calib: set[str] = set()
    for cls in sorted(ids_by_class):
        ids = sorted(ids_by_class[cls])
        rng.shuffle(ids)
        k = round(fraction * len(ids))
        if fraction > 0 and k == 0 and len(ids) >= 4:
            k = 1
        calib.update(ids[:k])
    return calib


def build_pairs(
    items: Sequence[Item],
    task: str,
    *,
    n: int | None = None,
    seed: int = 0,
    margin: float = 1.0,
    calibration_fraction: float = 0.25,
    emotions: Sequence[str] | None = None,
) -> list[Item]:
    """Pair (or split) ``items`` for ``task``'s family; see the module docstring.

    ``n`` caps the number of output items (balanced classes kept); ``None`` takes all.
    """
    if not 0.0 <= calibration_fraction < 1.0:
        raise InputError("calibration fraction must be in [0, 1)")
    family = _family(task)
    rng = random.Random(seed)
    if family == "speaker_match":
        out = _speaker_pairs(items, n, rng)
    elif family == "emotion_compare":
        out = _emotion_pairs(items, n, rng, margin, emotions)
    else:
        out = _single(items, family, n, rng)
    by_class: dict[str, list[str]] = defaultdict(list)
    for it in out:
        by_class[str(it.labels["truth"])].append(it.id)
    calib = _split(by_class, calibration_fraction, rng)
    for it in out:
        it.labels["split"] = "calibration" if it.id in calib else "test"
        it.meta.setdefault(
            "built_by", {"tool": "voxassay su build-pairs", "version": PAIRS_VERSION}
        )
        it.meta["built_by"].update(seed=seed, task=family)
    return out


def _speaker_pairs(items: Sequence[Item], n: int | None, rng: random.Random) -> list[Item]:
    by_spk: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        if it.speaker and _source_path(it):
            by_spk[it.speaker].append(it)
    speakers = sorted(by_spk)
    if len(speakers) < 2:
        raise InputError("speaker pairs need items of at least two speakers (field 'speaker')")
    same = [
        (a, b)
        for s in speakers
        for a, b in itertools.combinations(sorted(by_spk[s], key=lambda i: i.id), 2)
    ]
    if not same:
        raise InputError("speaker pairs need at least one speaker with two clips")
    n_clips = sum(len(v) for v in by_spk.values())
    if n_clips <= MAX_ENUMERATE_CLIPS:
        diff = [
            (a, b)
            for s1, s2 in itertools.combinations(speakers, 2)
            for a in sorted(by_spk[s1], key=lambda i: i.id)
            for b in sorted(by_spk[s2], key=lambda i: i.id)
        ]
    else:  # sample (deduplicated) instead of enumerating ~n_clips^2 pairs
        want = min(len(same), n // 2 if n else len(same))
        seen: set[tuple[str, str]] = set()
        diff = []
        for _ in range(50 * want):
            if len(diff) >= 3 * want:
                break
            s1, s2 = rng.sample(speakers, 2)
            a, b = rng.choice(by_spk[s1]), rng.choice(by_spk[s2])
            key = (min(a.id, b.id), max(a.id, b.id))
            if key not in seen:
                seen.add(key)
                diff.append((a, b))
    rng.shuffle(same)
    rng.shuffle(diff)
    k = min(len(same), len(diff))
    if n is not None:
        k = min(k, n // 2)
    if k == 0:
        raise InputError("--n too small: no balanced pairs")
    same = [same[i] for i in _spread([(a.id, b.id) for a, b in same], k)]
    diff = [diff[i] for i in _spread([(a.id, b.id) for a, b in diff], k)]
    out = []
    for truth, group in (("same", same), ("different", diff)):
        for a, b in group:
            if rng.random() < 0.5:
                a, b = b, a
            out.append(
                Item(
                    id=f"spk-{truth[:4]}-{a.id}--{b.id}".replace("/", "_"),
                    audio=[str(_source_path(a)), str(_source_path(b))],
                    labels={
                        "su_task": "speaker_match",
                        "truth": truth,
                        "speaker_a": a.speaker,
                        "speaker_b": b.speaker,
                        "source_a": a.id,
                        "source_b": b.id,
                        **_shared_labels(a, b),
                    },
                )
            )
    rng.shuffle(out)
    return out


def _spread(clip_ids: list[tuple[str, str]], k: int) -> list[int]:
    """Indices of ``k`` pairs preferring clips used least: passes over the (shuffled) pool
    accept a pair while both clips are below the pass's use cap (1, 2, ...); O(pool) per
    pass, order of the pool kept."""
    used: dict[str, int] = defaultdict(int)
    chosen: list[int] = []
    taken: set[int] = set()
    cap = 1
    while len(chosen) < k and len(taken) < len(clip_ids):
        for i, (a, b) in enumerate(clip_ids):
            if len(chosen) >= k:
                break
            if i in taken or used[a] >= cap or used[b] >= cap:
                continue
            taken.add(i)
            used[a] += 1
            used[b] += 1
            chosen.append(i)
        cap += 1
    return sorted(chosen)


def _shared_labels(a: Item, b: Item) -> dict[str, Any]:
    """Labels both clips agree on (e.g. ``gender``, ``condition``) for report groups."""
    keep: dict[str, Any] = {}
    for key in ("gender", "condition", "accent", "language"):
        if key in a.labels and a.labels.get(key) == b.labels.get(key):
            keep[key] = a.labels[key]
    return keep


def emotion_strength(item: Item, emotion: str) -> float | None:
    """How strongly ``item`` expresses ``emotion`` (module docstring), or None if unknown."""
    scores = item.labels.get("emotion_scores")
    if isinstance(scores, dict) and emotion in scores:
        try:
            return float(scores[emotion])
        except (TypeError, ValueError):
            return None
    if item.labels.get("emotion") == emotion:
        value = item.labels.get("intensity")
        if isinstance(value, str) and value.upper() in INTENSITY_LEVELS:
            return INTENSITY_LEVELS[value.upper()]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _emotion_pairs(
    items: Sequence[Item],
    n: int | None,
    rng: random.Random,
    margin: float,
    emotions: Sequence[str] | None,
) -> list[Item]:
    if margin < 0:
        raise InputError("--margin must be >= 0")
    targets: set[str] = set()
    for it in items:
        scores = it.labels.get("emotion_scores")
        if isinstance(scores, dict):
            targets.update(str(k) for k in scores)
        if it.labels.get("emotion") and it.labels.get("intensity") is not None:
            targets.add(str(it.labels["emotion"]))
    if emotions:
        targets &= set(emotions)
    scored_by: dict[str, list[tuple[Item, float]]] = {}
    for emo in sorted(targets):
        scored = [
            (it, s)
            for it in sorted(items, key=lambda i: i.id)
            if _source_path(it) and (s := emotion_strength(it, emo)) is not None
        ]
        scored_by[emo] = sorted(scored, key=lambda x: (x[1], x[0].id))
    possible = sum(len(v) * (len(v) - 1) // 2 for v in scored_by.values())
    candidates: list[tuple[str, Item, Item, float, float]] = []

    def add(emo: str, a: tuple[Item, float], b: tuple[Item, float]) -> None:
        (_ia, sa), (_ib, sb) = a, b
        if abs(sa - sb) >= margin and sa != sb:
            strong, weak = (a, b) if sa > sb else (b, a)
            candidates.append((emo, strong[0], weak[0], strong[1], weak[1]))

    if possible <= MAX_ENUMERATE_PAIRS:
        for emo, scored in scored_by.items():
            for a, b in itertools.combinations(scored, 2):
                add(emo, a, b)
    else:
        if n is None:
            raise InputError(f"{possible} possible emotion pairs: give --n to sample that many")
        # sample: a random clip, then a random partner at least `margin` away (bisect on
        # the strength-sorted list), round-robin over target emotions; deduplicated
        seen: set[tuple[str, str, str]] = set()
        emos = [e for e in scored_by if len(scored_by[e]) >= 2]
        values_by = {e: [x[1] for x in scored_by[e]] for e in emos}
        for attempt in range(200 * n):
            if len(candidates) >= 3 * n or not emos:
                break
            emo = emos[attempt % len(emos)]
            scored = scored_by[emo]
            values = values_by[emo]
            ia = rng.randrange(len(scored))
            lo = bisect.bisect_right(values, values[ia] - margin)
            hi = bisect.bisect_left(values, values[ia] + margin)
            partners = lo + (len(scored) - hi)
            if partners <= 0:
                continue
            j = rng.randrange(partners)
            ib = j if j < lo else hi + (j - lo)
            id1, id2 = sorted((scored[ia][0].id, scored[ib][0].id))
            key = (emo, id1, id2)
            if key in seen:
                continue
            seen.add(key)
            add(emo, scored[ia], scored[ib])
    if not candidates:
        raise InputError(
            "no emotion-comparison pair reaches the margin: items need labels.emotion_scores "
            f"or labels.emotion + labels.intensity differing by >= {margin}"
        )
    rng.shuffle(candidates)
    limit = n if n is not None else len(candidates)
    chosen = [candidates[i] for i in _spread([(c[1].id, c[2].id) for c in candidates], limit)]
    out = []
    for idx, (emo, strong, weak, s_hi, s_lo) in enumerate(chosen):
        strong_first = idx % 2 == 0  # balanced truth A/B, order fixed by the shuffle
        first, second = (strong, weak) if strong_first else (weak, strong)
        out.append(
            Item(
                id=f"emo-{emo}-{first.id}--{second.id}".replace("/", "_").replace(" ", "_"),
                audio=[str(_source_path(first)), str(_source_path(second))],
                labels={
                    "su_task": "emotion_compare",
                    "truth": "A" if strong_first else "B",
                    "target_emotion": emo,
                    "strength_a": s_hi if strong_first else s_lo,
                    "strength_b": s_lo if strong_first else s_hi,
                    "margin": round(s_hi - s_lo, 6),
                    "source_a": first.id,
                    "source_b": second.id,
                },
            )
        )
    rng.shuffle(out)
    return out


def _single(items: Sequence[Item], family: str, n: int | None, rng: random.Random) -> list[Item]:
    """Emotion / synthetic detection: copy the items, set ``truth`` from their labels."""
    out = []
    for it in items:
        labels = dict(it.labels)
        if family == "synthetic_detection":
            if not isinstance(labels.get("synthetic"), bool):
                raise InputError(f"item {it.id!r} has no boolean labels.synthetic")
            labels["truth"] = "synthetic" if labels["synthetic"] else "human"
        else:
            if not labels.get("emotion"):
                raise InputError(f"item {it.id!r} has no labels.emotion")
            labels["truth"] = labels["emotion"]
        labels["su_task"] = family
        out.append(
            Item(
                id=it.id,
                audio_filepath=it.audio_filepath,
                audio=it.audio,
                duration=it.duration,
                text=it.text,
                speaker=it.speaker,
                labels=labels,
                meta=dict(it.meta),
            )
        )
    rng.shuffle(out)
    if n is not None:
        by: dict[str, list[Item]] = defaultdict(list)
        for it in out:
            by[str(it.labels["truth"])].append(it)
        per = max(1, n // max(1, len(by)))
        out = [it for cls in sorted(by) for it in by[cls][:per]]
        rng.shuffle(out)
    return out


def items_from_crema_d_votes(
    path: str | Path, *, modality: str = "voice", audio_dir: str | Path | None = None
) -> list[Item]:
    """Labelled items from CREMA-D's ``tabulatedVotes.csv`` (one row per clip and modality).

    Row ids 1xxxxx are voice-only ratings, 2xxxxx face-only, 3xxxxx audio-visual.
    ``labels``: ``emotion`` (intended, from the file name), ``intensity`` (LO/MD/HI/XX from
    the file name), ``vote`` (the raters' majority), ``agreement`` (share of the majority),
    ``n_raters`` and ``emotion_scores`` = votes per emotion / responses (vote shares in
    [0, 1]). Audio paths are ``audio_dir/<file>.wav`` (CREMA-D's AudioWAV layout).
    """
    prefix = {"voice": "1", "face": "2", "multimodal": "3"}.get(modality)
    if prefix is None:
        raise InputError("modality must be voice, face or multimodal")
    base = Path(audio_dir) if audio_dir is not None else Path("AudioWAV")
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if not str(row.get("", "")).startswith(prefix):
                continue
            name = row["fileName"]
            parts = name.split("_")
            if len(parts) != 4:
                continue
            actor, sentence, emo_code, level = parts
            n_resp = int(row["numResponses"])
            if n_resp <= 0:
                continue
            scores = {
                CREMA_D_CODES[c]: round(int(row[c]) / n_resp, 6)
                for c in ("A", "D", "F", "H", "N", "S")
            }
            out.append(
                Item(
                    id=name,
                    audio_filepath=str(base / f"{name}.wav"),
                    speaker=actor,
                    labels={
                        "emotion": CREMA_D_CODES[emo_code],
                        "intensity": level,
                        "vote": CREMA_D_CODES.get(row["emoVote"], row["emoVote"]),
                        "agreement": float(row["agreement"]),
                        "n_raters": n_resp,
                        "emotion_scores": scores,
                        "sentence": sentence,
                    },
                    meta={"source": "CREMA-D tabulatedVotes.csv", "modality": modality},
                )
            )
    if not out:
        raise InputError(f"no {modality} rows in {path}")
    return out
