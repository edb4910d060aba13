"""The STS report: a profile per system and dimension, and the audio-vs-transcript ablation.

Per score source (each automatic proxy of ``scoring.PROXIES``; human and judge blocks join
when a run has them), never merged across sources:

- ``profile``: per system, mode and dimension, the mean per-item score with a bootstrap 95 %
  CI over items (``stats.intervals.bootstrap_ratio_ci`` with unit denominators).
- ``ao_minus_to``: per system, the paired per-item difference AO - TO (``stats.paired``) over
  every item scored in both modes, then per dimension, scenario type and stressor; Holm's
  adjustment over one system's family of tests in one source (``p_holm``).
- ``k_of_n``: per scenario type (and overall), how many of the n systems score higher with
  audio, counted by the point estimate and by the CI (its lower bound above 0).

Counts: records per status, empty answers, refusals, text-only answers (unscored on audio
dimensions). The renders' provenance is stated (constructed unless recordings were given).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from voxassay.core.records import Record
from voxassay.core.runstore import RunStore
from voxassay.stats.intervals import bootstrap_ratio_ci
from voxassay.stats.paired import holm, paired_difference
from voxassay.suites.sts.items import AUDIO_DIMENSIONS, DIMENSIONS
from voxassay.suites.sts.scoring import PROXIES

__all__ = ["build_report"]

GROUPS = ("dimension", "scenario_type", "stressor")


def _mean_ci(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    x = np.asarray(values, float)
    lo, hi = bootstrap_ratio_ci(x, np.ones(x.size)) if x.size > 1 else (None, None)
    return {"mean": float(x.mean()), "ci_low": lo, "ci_high": hi, "n": int(x.size)}


HUMAN = ("people: rater-controlled score (mean within-rater z)", True)
JUDGE = ("judge: the rater question on the 1-5 scale", True)


def _score(
    rec: Record, source: str, dimension: str, human: dict[tuple[str, str], float] | None = None
) -> float | None:
    if rec.status != "ok":
        return None
    if source == "human":
        return (human or {}).get((rec.id, rec.system))
    if dimension in AUDIO_DIMENSIONS and rec.metrics.get("text_only") and source != "checklist":
        return None
    v = rec.metrics.get(source)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _ablation(
    pairs: dict[str, tuple[float, float]], labels: dict[str, dict[str, Any]], seed: int
) -> dict[str, Any]:
    """AO - TO overall and per group value, Holm over the whole family."""
    blocks: dict[str, Any] = {"overall": None, **{g: {} for g in GROUPS}}
    tests: list[dict[str, Any]] = []

    def test(ids: list[str]) -> dict[str, Any]:
        a = [pairs[i][0] for i in ids]
        b = [pairs[i][1] for i in ids]
        d = paired_difference(a, b, seed=seed).as_dict()
        tests.append(d)
        return d

    ids = sorted(pairs)
    blocks["overall"] = test(ids)
    for group in GROUPS:
        by: dict[str, list[str]] = defaultdict(list)
        for i in ids:
            lab = labels[i]
            values = lab.get("stressors") or ["none"] if group == "stressor" else [lab.get(group)]
            for v in values:
                by[str(v)].append(i)
        blocks[group] = {k: test(v) for k, v in sorted(by.items())}
    for d, p in zip(tests, holm([t["p"] for t in tests]), strict=True):
        d["p_holm"] = p
    return blocks


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    """The report dict of an STS run (module docstring)."""
    from voxassay.suites.sts.study import load_human

    del options
    info = store.info()
    human = load_human(store)
    judged = any("judge" in r.metrics for r in store.load_records().records)
    sources = {
        **PROXIES,
        **({"judge": JUDGE} if judged else {}),
        **({"human": HUMAN} if human else {}),
    }
    items = {it.id: it for it in store.items()}
    records = store.load_records().records
    systems = list(dict.fromkeys(r.system for r in records))
    out_systems = []
    for si, system in enumerate(systems):
        recs = {r.id: r for r in records if r.system == system and r.repeat == 0}
        status: dict[str, int] = defaultdict(int)
        for r in recs.values():
            status[r.status] += 1
        ok = [r for r in recs.values() if r.status == "ok"]
        block: dict[str, Any] = {
            "system": system,
            "status": dict(status),
            "empty": sum(1 for r in recs.values() if (r.error or {}).get("kind") == "empty"),
            "refusals": sum(1 for r in ok if r.metrics.get("refusal")),
            "text_only": sum(1 for r in ok if r.metrics.get("text_only")),
            "profile": {},
            "ao_minus_to": {},
        }
        for source in sources:
            prof: dict[str, Any] = {}
            for mode in ("ao", "to"):
                for dim in DIMENSIONS:
                    vals = [
                        v
                        for rid, r in recs.items()
                        if items.get(rid) is not None
                        and items[rid].labels.get("mode") == mode
                        and items[rid].labels.get("dimension") == dim
                        and (v := _score(r, source, dim, human)) is not None
                    ]
                    prof.setdefault(mode, {})[dim] = _mean_ci(vals)
            block["profile"][source] = prof
            pairs: dict[str, tuple[float, float]] = {}
            labels: dict[str, dict[str, Any]] = {}
            for rid, r in recs.items():
                it = items.get(rid)
                if it is None or it.labels.get("mode") != "ao":
                    continue
                base = str(it.labels["item"])
                other = recs.get(f"{base}#to")
                dim = str(it.labels.get("dimension"))
                a = _score(r, source, dim, human)
                b = _score(other, source, dim, human) if other is not None else None
                if a is not None and b is not None:
                    pairs[base] = (a, b)
                    labels[base] = it.labels
            if pairs:
                block["ao_minus_to"][source] = _ablation(pairs, labels, seed=si)
        if human and judged:
            block["judge_vs_human"] = _agreement(recs, items, human)
        block["worst"] = _worst(recs, items)
        out_systems.append(block)
    return {
        "suite": "sts",
        "run_id": store.run_id,
        "item_set": info.get("config", {}).get("item_set"),
        "renders": info.get("renders"),
        "neutral_render": info.get("config", {}).get("neutral_render", False),
        "sources": {
            k: {
                "label": v[0],
                "higher_is_better": v[1],
                "kind": {"human": "people", "judge": "judge"}.get(k, "automatic proxy"),
            }
            for k, v in sources.items()
        },
        "systems": out_systems,
        "k_of_n": _k_of_n(out_systems, sources),
    }


def _worst(recs: dict[str, Record], items: dict[str, Any], k: int = 3) -> list[dict[str, Any]]:
    """The ``k`` items whose two answers met the fewest checklist lines (then where hearing
    the user cost the most): the item, both answers' texts, scores and audio files."""
    rows = []
    for rid, r in recs.items():
        it = items.get(rid)
        if it is None or it.labels.get("mode") != "ao":
            continue
        base = str(it.labels["item"])
        to = recs.get(f"{base}#to")
        if to is None:
            continue
        a, b = r.metrics.get("checklist"), to.metrics.get("checklist")
        if a is None or b is None:
            continue
        rows.append(
            {
                "item": base,
                "dimension": it.labels.get("dimension"),
                "said": it.text,
                "input": f"inputs/{base}.wav",
                "ao": {
                    "text": r.output.get("text"),
                    "checklist": a,
                    "audio": r.output.get("audio_path"),
                },
                "to": {
                    "text": to.output.get("text"),
                    "checklist": b,
                    "audio": to.output.get("audio_path"),
                },
            }
        )
    rows.sort(
        key=lambda x: (
            x["ao"]["checklist"] + x["to"]["checklist"],
            x["ao"]["checklist"] - x["to"]["checklist"],
        )
    )
    return rows[:k]


def _agreement(
    recs: dict[str, Record], items: dict[str, Any], human: dict[tuple[str, str], float]
) -> dict[str, Any]:
    """Per dimension (and overall): Spearman of the judge's scores with people's
    rater-controlled scores over the answers both scored."""
    from voxassay.stats.ranks import rank_agreement

    by: dict[str, tuple[dict[str, float], dict[str, float]]] = defaultdict(lambda: ({}, {}))
    for rid, r in recs.items():
        j, h = r.metrics.get("judge"), human.get((rid, r.system))
        if r.status != "ok" or j is None or h is None or rid not in items:
            continue
        for key in ("overall", str(items[rid].labels.get("dimension"))):
            by[key][0][rid], by[key][1][rid] = float(j), float(h)
    out = {}
    for key, (js, hs) in sorted(by.items()):
        ra = rank_agreement(js, hs)
        out[key] = {"spearman": ra.spearman_rho, "n": ra.n_systems}
    return out


def _k_of_n(systems: list[dict[str, Any]], sources: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    """Per source and scenario type: systems scoring higher with audio (point, CI)."""
    out: dict[str, Any] = {}
    for source, (_, higher) in sources.items():
        rows: dict[str, Any] = {}
        for scope in ("overall", "natural", "scripted"):
            blocks = []
            for s in systems:
                ab = s["ao_minus_to"].get(source)
                if not ab:
                    continue
                d = ab["overall"] if scope == "overall" else ab["scenario_type"].get(scope)
                if d and d.get("mean") is not None:
                    blocks.append(d)
            sign = 1.0 if higher else -1.0
            rows[scope] = {
                "n": len(blocks),
                "k_point": sum(1 for d in blocks if sign * d["mean"] > 0),
                "k_ci": sum(
                    1
                    for d in blocks
                    if d["ci_low"] is not None and (d["ci_low"] > 0 if higher else d["ci_high"] < 0)
                ),
            }
        out[source] = rows
    return out
