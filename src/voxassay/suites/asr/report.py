"""Build the ASR report dict from a run directory alone (``voxassay report RUN_DIR``)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import system_key
from voxassay.report.leaders import Unit, paired_leader
from voxassay.suites.asr.analyses import DERIVED_GROUPS, derived_labels, rank_stability
from voxassay.suites.asr.wer import (
    DEFAULT_NORMALIZER,
    METRICS_VERSION,
    Scored,
    aggregate,
    group_values,
    normalizer_version,
    score_text,
)

# Label keys that describe provenance, not a subgroup to break WER down by.
NON_GROUP_LABELS = frozenset(
    {
        "condition",
        "source_item",
        "constructed",
        "recipe",
        "audit",
        "masked_word",
        "masked_index",
        "tts",
        "native",
        "text_source",
    }
)
MAX_GROUP_VALUES = 50
WORST_ITEMS = 8
MAX_REPORT_CHARS = 2000
"""Texts stored in a report (worst items) are cut to this many characters; records keep
the full text."""
MAX_ALIGNMENT_OPS = 400
"""Alignment steps stored per worst item (the first ones); the count of all is kept."""


def capped_text(text: str | None, limit: int = MAX_REPORT_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters in records.jsonl]"


def rescore(records: list[Record], items: dict[str, Item], normalizer: str) -> list[Record]:
    """Make sure every ok record carries counts from ``normalizer`` (recomputed if not)."""
    version = normalizer_version(normalizer)
    for rec in records:
        if rec.status != "ok":
            continue
        item = items.get(rec.id)
        if item is None or item.text is None:
            continue
        if rec.metrics.get("normalizer") != version:
            rec.metrics = score_text(item.text, str(rec.output.get("pred_text", "")), normalizer)
    return records


def group_keys(items: list[Item]) -> list[str]:
    """``condition`` first, then label keys (and derived groupings) with 1..50 values.

    A key that splits the items exactly like an earlier one (``codec`` = ``channel``,
    a derived ``background_type`` = ``background``) adds nothing and is left out.
    """
    members: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for item in items:
        members["condition"][item.condition].add(item.id)
        labels = {**item.labels, **derived_labels(item.labels)}
        for key, value in labels.items():
            if key in NON_GROUP_LABELS or isinstance(value, dict | list):
                continue
            members[key][str(value)].add(item.id)
    keys: list[str] = []
    seen: set[frozenset[frozenset[str]]] = set()
    derived = set(DERIVED_GROUPS)
    ordered = ["condition", *sorted(k for k in members if k != "condition" and k not in derived)]
    ordered += sorted(k for k in members if k in derived)
    for key in ordered:
        groups = members[key]
        if not 1 <= len(groups) <= MAX_GROUP_VALUES:
            continue
        partition = frozenset(frozenset(ids) for ids in groups.values())
        if partition in seen:
            continue
        seen.add(partition)
        keys.append(key)
    return keys


def build_report(store: RunStore, normalizer: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Every number in the ASR report, recomputed from ``items.jsonl`` and ``records.jsonl``."""
    info = store.info()
    config = info.get("config", {})
    normalizer = normalizer or config.get("normalizer") or DEFAULT_NORMALIZER
    all_items = store.items()
    items = {it.id: it for it in all_items}
    loaded = store.load_records()
    records = rescore(loaded.records, items, normalizer)
    systems = [system_key(x) for x in config.get("systems") or sorted({r.system for r in records})]
    for r in records:
        if r.system not in systems:
            systems.append(r.system)
    main_items = [it for it in all_items if not it.labels.get("audit")]
    keys = group_keys(main_items)

    out_systems = []
    paired: dict[str, dict[str, dict[str, Unit]]] = defaultdict(lambda: defaultdict(dict))
    for spec in systems:
        recs = [r for r in records if r.system == spec and r.id in items]
        main = [r for r in recs if not items[r.id].labels.get("audit")]
        status = Counter(r.status for r in main)
        scored = [_scored(r, items[r.id]) for r in main if r.status == "ok" and r.metrics]
        for sc in scored:
            if not sc.metrics.get("empty_ref"):
                unit = _unit(sc)
                paired["overall"][spec][sc.id] = unit
                paired["condition:" + items[sc.id].condition][spec][sc.id] = unit
        failed_ids = {r.id for r in main if r.status not in ("ok", "unscored")}
        overall = aggregate(scored, n_failed=len(failed_ids), seed=seed)
        groups = []
        for key in keys:
            buckets: dict[str, list[Scored]] = defaultdict(list)
            fails: Counter[str] = Counter()
            for r in main:
                it = items[r.id]
                labels = {**it.labels, **derived_labels(it.labels)}
                if key == "condition":
                    pairs = [("condition", it.condition)]
                else:
                    pairs = group_values(labels, [key])
                for _, name in pairs:
                    if r.status == "ok" and r.metrics:
                        buckets[name].append(_scored(r, it))
                    elif r.status != "unscored":
                        fails[name] += 1
            for name in sorted(set(buckets) | set(fails), key=_natural):
                agg = aggregate(buckets.get(name, []), n_failed=fails[name], seed=seed)
                groups.append({"group": key, "name": name, **agg})
        out_systems.append(
            {
                "system": spec,
                "overall": overall,
                "groups": groups,
                "status_counts": dict(status),
                "failures": _failures(main),
                "load": info.get("systems", {}).get(spec, {}),
                "worst_items": _worst(main, items),
            }
        )

    report: dict[str, Any] = {
        "suite": "asr",
        "metrics_version": METRICS_VERSION,
        "run_id": info.get("run_id", store.run_id),
        "generated_at": utc_now(),
        "normalizer": {"name": normalizer, "version": normalizer_version(normalizer)},
        "systems": out_systems,
        "n_items": len(main_items),
        "n_audit_items": len(all_items) - len(main_items),
        "conditions": sorted({it.condition for it in main_items}, key=_natural),
        "group_keys": keys,
        "constructed_items": sum(1 for it in main_items if it.labels.get("constructed")),
        "malformed_record_lines": [{"line": ln, "reason": why} for ln, why in loaded.malformed],
        "rank_stability": rank_stability(
            {
                key.removeprefix("condition:"): by
                for key, by in paired.items()
                if key.startswith("condition:")
            },
            seed=seed,
        ),
        "config": {k: v for k, v in config.items() if k not in ("manifest_items",)},
        "notes": _notes(main_items, systems),
    }
    report["audits"] = _audits(all_items, records, normalizer)
    report["leaders"] = {
        "overall": paired_leader(paired["overall"], lower_is_better=True, seed=seed),
        "conditions": {
            key.removeprefix("condition:"): paired_leader(by, lower_is_better=True, seed=seed)
            for key, by in paired.items()
            if key.startswith("condition:")
        },
    }
    return report


def _unit(sc: Scored) -> Unit:
    """(word errors, reference words, speaker or the utterance): one WER resampling unit."""
    m = sc.metrics
    errors = float(m["sub"]) + float(m["del"]) + float(m["ins"])
    return errors, float(m["ref_words"]), sc.speaker or f"utterance:{sc.id}"


def _scored(rec: Record, item: Item) -> Scored:
    return Scored(
        id=rec.id,
        speaker=item.speaker,
        metrics=rec.metrics,
        compute_s=float(rec.timing.get("compute_s", 0.0)),
        audio_s=float(rec.timing.get("audio_s", 0.0)),
    )


def _failures(records: list[Record], limit: int = 20) -> dict[str, Any]:
    bad = [r for r in records if r.status not in ("ok",)]
    kinds = Counter((r.error or {}).get("kind", r.status) for r in bad)
    return {
        "by_kind": dict(kinds),
        "examples": [{"id": r.id, "status": r.status, **(r.error or {})} for r in bad[:limit]],
    }


def _worst(records: list[Record], items: dict[str, Item]) -> list[dict[str, Any]]:
    from voxassay.suites.asr.align import align_words

    ok = [r for r in records if r.status == "ok" and r.metrics and not r.metrics.get("empty_ref")]
    ok.sort(key=lambda r: (-(r.metrics["sub"] + r.metrics["del"] + r.metrics["ins"]), r.id))
    out = []
    for r in ok[:WORST_ITEMS]:
        m = r.metrics
        errors = m["sub"] + m["del"] + m["ins"]
        if errors == 0:
            break
        item = items[r.id]
        alignment = align_words(
            m["ref_norm"].split(),
            m["hyp_norm"].split(),
            merge_compounds=m.get("merge_compounds", True),
        )
        out.append(
            {
                "id": r.id,
                "condition": item.condition,
                "audio_filepath": item.audio_filepath,
                "errors": errors,
                "ref_words": m["ref_words"],
                "wer": errors / m["ref_words"] if m["ref_words"] else math.nan,
                "text": capped_text(item.text),
                "pred_text": capped_text(r.output.get("pred_text")),
                "alignment": alignment[:MAX_ALIGNMENT_OPS],
                "alignment_steps": len(alignment),
            }
        )
    return out


def _notes(items: list[Item], systems: list[str]) -> list[str]:
    notes = []
    constructed = sum(1 for it in items if it.labels.get("constructed"))
    if constructed:
        notes.append(
            f"{constructed} of {len(items)} items were constructed (mixed, synthesised or "
            "interleaved by voxassay); see each item's labels and meta.recipe."
        )
    if len(systems) < 3:
        notes.append("Consensus-dissent audit needs a panel of at least 3 distinct systems.")
    return notes


def _audits(items: list[Item], records: list[Record], normalizer: str) -> dict[str, Any]:
    try:
        from voxassay.suites.asr.audits import run_audits
    except ImportError as exc:  # pragma: no cover - audits module is part of the package
        return {"status": "not_run", "reason": f"audits unavailable: {exc}"}
    return dict(run_audits(items, records, normalizer=normalizer))


def _natural(name: str) -> tuple[int, float, str]:
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)
