"""Analyses the ASR findings rest on: subgroup groupings and rank stability across conditions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voxassay.stats.ranks import RANK_METHOD, RatioUnit, rank_change

# Accents of speakers whose first language is English (lower-cased label values or words in
# them). Anything else with an accent label counts as non-native; ``labels.native`` wins.
NATIVE_ACCENT_WORDS = frozenset(
    [
        "american",
        "us",
        "usa",
        "english",
        "england",
        "british",
        "uk",
        "scottish",
        "scotland",
        "irish",
        "ireland",
        "welsh",
        "wales",
        "australian",
        "australia",
        "canadian",
        "canada",
        "newzealand",
        "zealand",
        "southafrican",
        "northern",
        "southern",
        "midlands",
        "yorkshire",
        "en-us",
        "en-gb",
        "en-gb-scotland",
        "en-au",
        "en-ie",
    ]
)
HIGH_AROUSAL = frozenset(
    [
        "anger",
        "angry",
        "fear",
        "fearful",
        "happy",
        "happiness",
        "joy",
        "excitement",
        "excited",
        "surprise",
        "surprised",
        "disgust",
        "ecstasy",
        "triumph",
        "amusement",
        "anxiety",
        "distress",
        "horror",
        "rage",
        "panic",
    ]
)
LOW_AROUSAL = frozenset(
    [
        "neutral",
        "sad",
        "sadness",
        "calm",
        "calmness",
        "boredom",
        "bored",
        "tiredness",
        "tired",
        "contentment",
        "contemplation",
        "relief",
        "sympathy",
        "nostalgia",
    ]
)


def accent_group(labels: Mapping[str, Any]) -> str | None:
    """``native`` / ``non-native`` from ``labels.native`` or the accent label; None if neither."""
    if "native" in labels and labels["native"] is not None:
        return "native" if _truthy(labels["native"]) else "non-native"
    accent = labels.get("accent")
    if not accent:
        return None
    words = str(accent).lower().replace("_", " ").replace("/", " ").split()
    joined = str(accent).lower().replace(" ", "")
    if joined in NATIVE_ACCENT_WORDS or any(w in NATIVE_ACCENT_WORDS for w in words):
        return "native"
    return "non-native"


def arousal_group(labels: Mapping[str, Any]) -> str | None:
    """``high`` / ``low`` arousal from ``labels.arousal`` or the emotion label."""
    if labels.get("arousal"):
        return str(labels["arousal"]).lower()
    emotion = str(labels.get("emotion") or "").lower()
    if not emotion:
        return None
    if emotion in HIGH_AROUSAL:
        return "high"
    if emotion in LOW_AROUSAL:
        return "low"
    return "unknown"


def background_type(labels: Mapping[str, Any]) -> str | None:
    """``babble`` / ``music`` / ``other-noise`` from ``labels.background``."""
    bg = labels.get("background")
    if not bg:
        return None
    bg = str(bg).lower()
    if bg in ("babble", "music"):
        return bg
    return "other-noise"


DERIVED_GROUPS = {
    "accent_group": accent_group,
    "arousal": arousal_group,
    "background_type": background_type,
}


def derived_labels(labels: Mapping[str, Any]) -> dict[str, str]:
    """The analysis groupings an item falls into (only those its labels support)."""
    out = {}
    for name, fn in DERIVED_GROUPS.items():
        if name in labels:
            out[name] = str(labels[name])
            continue
        value = fn(labels)
        if value is not None:
            out[name] = value
    return out


def _truthy(v: Any) -> bool:
    return str(v).lower() in ("1", "true", "yes", "y", "native")


def rank_stability(
    units_by_condition: Mapping[str, Mapping[str, Mapping[str, RatioUnit]]],
    reference: str = "clean",
    seed: int = 0,
) -> dict[str, Any]:
    """How each system's rank moves between the reference condition and every other one.

    ``units_by_condition[condition][system][item]`` is (word errors, reference words,
    speaker). For each non-reference condition: Kendall's tau-b between the reference
    ranking and that condition's (1 = same order) with its 95 % cluster-bootstrap interval,
    and each system's rank shift with the share of bootstrap draws in which its rank differs
    (``stats.ranks.rank_change``). Needs the reference condition and at least 2 systems;
    otherwise says why not.
    """
    if reference not in units_by_condition:
        return {"status": "not_run", "reason": f"no '{reference}' condition in this run"}
    ref = units_by_condition[reference]
    if len(ref) < 2:
        return {"status": "not_run", "reason": "rank stability needs at least 2 systems"}
    rows = []
    for cond, units in sorted(units_by_condition.items()):
        if cond == reference:
            continue
        change = rank_change(ref, units, seed=seed)
        rows.append(
            {
                "condition": cond,
                "kendall_tau": change.kendall_tau,
                "ci_lo": change.ci_lo,
                "ci_hi": change.ci_hi,
                "units": change.units,
                "n_systems": change.n_systems,
                "rank_shift": change.shift,
                "rank_shift_share": change.shift_share,
            }
        )
    return {
        "status": "ok",
        "reference": reference,
        "conditions": rows,
        "method": RANK_METHOD,
        "note": "tau near 1: same order as on clean audio; low or negative: the ranking on "
        "clean audio does not predict this condition. With fewer than 4 systems tau can only "
        "take a few values; a rank shift is claimed only where at least 95 % of bootstrap "
        "draws show it.",
    }
