"""Consensus dissent audit: does a system reproduce the reference where a supermajority of the
other systems hears something else?"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from voxassay.suites.asr.audits._common import (
    AUDITS_VERSION,
    DEFAULT_NORMALIZER,
    MAX_POINTS,
    Normalizer,
    _normalizer_info,
    _rate,
    _resolve_normalizer,
)

_ABSENT = "\x00absent"  # a reference word the hypothesis deleted
_NOTHING = ""  # no hypothesis words in an insertion gap


def _realise(ref: list[str], hyp: list[str]) -> tuple[list[str], list[str]]:
    """Map a hypothesis onto reference positions via the word alignment.

    Returns ``(at, gaps)``: ``at[p]`` is what the hypothesis says at reference word ``p`` (the
    reference word itself for a match or an equivalent split/joined compound, the hypothesis
    word for a substitution, ``_ABSENT`` for a deletion); ``gaps[g]`` (``g`` in ``0..len(ref)``)
    is the space-joined run of words inserted before reference word ``g`` (``""`` for none).
    """
    from voxassay.suites.asr.align import align_words

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
