"""Run every audit the items and records support (:func:`run_audits`), with the reason for
each one that was not run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.suites.asr.audits._common import (
    AUDITS_VERSION,
    DEFAULT_NORMALIZER,
    Normalizer,
    _normalizer_info,
    _resolve_normalizer,
)
from voxassay.suites.asr.audits.consensus import consensus_dissent
from voxassay.suites.asr.audits.masking import masking_rates
from voxassay.suites.asr.audits.orthographic import orthographic_switch
from voxassay.suites.asr.audits.synthetic import synthetic_gap


def _not_run(reason: str) -> dict[str, Any]:
    return {"status": "not_run", "reason": reason}


def _item_counts(ref: str, hyp: str, norm: Normalizer) -> dict[str, Any]:
    from voxassay.suites.asr.align import count_errors

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
