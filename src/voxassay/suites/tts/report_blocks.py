"""Blocks of the TTS report computed per system: raw metrics with CIs, unavailable measures,
the judge, instruction following, identity under stress, long form, worst items, human
results."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.items import Item
from voxassay.core.numbers import finite as _f
from voxassay.core.records import Record
from voxassay.stats.intervals import bootstrap_ratio_ci, wilson_interval
from voxassay.suites.tts import profile as pf
from voxassay.suites.tts.report_scorer import (
    ARTIFACT_RULES,
    FOLLOWS_SHARE,
    MEASURE_LABELS,
    _read_json,
    _SystemScorer,
    accepts_instructions,
)


def _ratio(recs: Sequence[Record], num_key: str, den_key: str, seed: int) -> dict[str, Any]:
    """Corpus ratio ``sum(num) / sum(den)`` over records with both, bootstrap CI over items."""
    per: dict[str, list[float]] = {}
    for r in recs:
        n, d = _f(r.metrics.get(num_key)), _f(r.metrics.get(den_key))
        if n is None or d is None:
            continue
        acc = per.setdefault(r.id, [0.0, 0.0])
        acc[0] += n
        acc[1] += d
    if not per or sum(v[1] for v in per.values()) <= 0:
        return {"value": None, "ci_lo": None, "ci_hi": None, "n": len(per)}
    num = [v[0] for v in per.values()]
    den = [v[1] for v in per.values()]
    lo, hi = bootstrap_ratio_ci(num, den, seed=seed)
    return {"value": sum(num) / sum(den), "ci_lo": lo, "ci_hi": hi, "n": len(per)}


def _mean(recs: Sequence[Record], key: str, seed: int) -> dict[str, Any]:
    m = pf.mean_ci([v for r in recs if (v := _f(r.metrics.get(key))) is not None], seed=seed)
    return {"value": m["mean"], "ci_lo": m["ci_lo"], "ci_hi": m["ci_hi"], "n": m["n"]}


def _rate(flags: Sequence[bool]) -> dict[str, Any]:
    k, n = sum(flags), len(flags)
    lo, hi = wilson_interval(k, n)
    return {"value": k / n if n else None, "ci_lo": lo, "ci_hi": hi, "n": n, "count": k}


def _has_artifact(value: float, op: str, thr: float) -> bool:
    if op == ">":
        return value > thr
    if op == ">=":
        return value >= thr
    if op == "<":
        return value < thr
    return abs(value) > thr


def raw_metrics(recs: Sequence[Record], seed: int = 0) -> dict[str, Any]:
    """The metrics behind an eval score, over its ok records: corpus WER/CER (bootstrap CI
    over items), critical-token accuracy ``sum ok / sum total`` (Wilson CI over tokens),
    DNSMOS means, artifact rates (:data:`ARTIFACT_RULES`, Wilson, over items with the
    metric), rate sanity share (``rate_ok``), speaking rate, long-form similarity and drifts.
    Entries with no data have ``n = 0``."""
    out: dict[str, Any] = {
        "wer": _ratio(recs, "wer_errors", "wer_words", seed),
        "cer": _ratio(recs, "cer_errors", "cer_chars", seed),
    }
    ok = sum(_f(r.metrics.get("critical_ok")) or 0.0 for r in recs)
    tot = sum(_f(r.metrics.get("critical_total")) or 0.0 for r in recs)
    lo, hi = wilson_interval(round(ok), round(tot))
    out["critical_accuracy"] = {
        "value": ok / tot if tot else None,
        "ci_lo": lo,
        "ci_hi": hi,
        "n": round(tot),
        "ok": round(ok),
    }
    for key in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808", "words_per_min"):
        out[key] = _mean(recs, key, seed)
    artifacts = {}
    for name, (key, op, thr) in ARTIFACT_RULES.items():
        vals = [_f(r.metrics.get(key)) for r in recs]
        flags = [_has_artifact(v, op, thr) for v in vals if v is not None]
        artifacts[name] = {**_rate(flags), "rule": f"{key} {op} {thr:g}"}
    out["artifacts"] = artifacts
    out["rate_ok"] = _rate(
        [v >= 0.5 for r in recs if (v := _f(r.metrics.get("rate_ok"))) is not None]
    )
    for key in (
        "longform_sim_min",
        "longform_sim_mean",
        "longform_rate_drift",
        "longform_loudness_drift_db",
    ):
        out[key] = _mean(recs, key, seed)
    return out


# -- the report ------------------------------------------------------------------------------


def _unavailable(recs: Sequence[Record]) -> dict[str, dict[str, Any]]:
    """``{measure: {n, reasons: {reason: count}}}`` from ``output.unavailable`` of ok records."""
    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        unav = r.output.get("unavailable")
        if r.status != "ok" or not isinstance(unav, dict):
            continue
        for key, reason in unav.items():
            e = out.setdefault(str(key), {"n": 0, "reasons": Counter()})
            e["n"] += 1
            e["reasons"][str(reason)] += 1
    return {k: {"n": v["n"], "reasons": dict(v["reasons"])} for k, v in sorted(out.items())}


def unavailable_statements(unav: Mapping[str, Mapping[str, Any]], n_ok: int) -> list[str]:
    """One sentence per unavailable measure: "speaker similarity unavailable (12/12 items):
    resemblyzer not installed"."""
    out = []
    for key, e in unav.items():
        reasons = "; ".join(f"{r}" for r in sorted(e["reasons"], key=lambda r: -e["reasons"][r]))
        out.append(f"{MEASURE_LABELS.get(key, key)} unavailable ({e['n']}/{n_ok} items): {reasons}")
    return out


def _judge_block(recs: Sequence[Record], items: Mapping[str, Item], seed: int) -> dict[str, Any]:
    """Judge scores per eval (mean over ``status == ok`` with bootstrap CI) and counts of
    unparseable and error answers; ``available`` is False when no judge answered (no record
    carries a judge, or every call failed: the statement gives the reasons)."""
    per: dict[str, dict[str, Any]] = {}
    seen = 0
    for r in recs:
        j = r.output.get("judge")
        if r.status != "ok" or not isinstance(j, dict):
            continue
        seen += 1
        ev = str(items[r.id].labels.get("eval") or "unlabelled")
        e = per.setdefault(ev, {"scores": [], "unparseable": 0, "error": 0, "reasons": Counter()})
        status = j.get("status")
        score = _f(j.get("score"))
        if status == "ok" and score is not None:
            e["scores"].append(score)
        elif status == "unparseable":
            e["unparseable"] += 1
        else:
            e["error"] += 1
            if j.get("reason"):
                e["reasons"][str(j["reason"])[:200]] += 1
    evals = []
    for ev in sorted(per):
        e = per[ev]
        m = pf.mean_ci(e["scores"], seed=seed)
        evals.append(
            {
                "eval": ev,
                "mean": m["mean"],
                "ci_lo": m["ci_lo"],
                "ci_hi": m["ci_hi"],
                "n": m["n"],
                "unparseable": e["unparseable"],
                "error": e["error"],
                "error_reasons": dict(e["reasons"]),
            }
        )
    spec = None
    for r in recs:
        j = r.output.get("judge")
        if isinstance(j, dict) and j.get("spec"):
            spec = j["spec"]
            break
    answered = sum(len(per[ev]["scores"]) + per[ev]["unparseable"] for ev in per)
    reasons: Counter[str] = Counter()
    for e in per.values():
        reasons.update(e["reasons"])
    if answered:
        statement = f"judge {spec}: {answered} of {seen} judged records answered"
    elif seen:
        why = "; ".join(r for r, _ in reasons.most_common(3)) or "every call failed"
        statement = f"No judge was available: {why}"
    else:
        statement = "No judge was available: no record carries a judge answer"
    return {
        "available": answered > 0,
        "statement": statement,
        "spec": spec,
        "n_judged": seen,
        "unparseable": sum(e["unparseable"] for e in evals),
        "error": sum(e["error"] for e in evals),
        "evals": evals,
    }


def _instructions_block(
    scorer: _SystemScorer, describe: Mapping[str, Any], spec: str
) -> dict[str, Any]:
    """Instruction/emotion following of one system with its plain statement."""
    outcomes = list(scorer.contrasts.values())
    block = pf.instruction_following(outcomes)
    accepts = accepts_instructions(describe)
    asked = [
        r for r in scorer.recs if r.status == "ok" and scorer.items[r.id].meta.get("instructions")
    ]
    sent = [r for r in asked if r.output.get("instructions_sent") is True]
    block.update(
        accepts_instructions=accepts,
        adapter_says=describe.get("instructions"),
        items_with_instructions=len(asked),
        instructions_sent=len(sent),
    )
    by_label: dict[str, list[pf.ContrastOutcome]] = defaultdict(list)
    for (iid, _), oc in scorer.contrasts.items():
        labels = scorer.items[iid].labels
        by_label[str(labels.get("emotion") or labels.get("role") or "other")].append(oc)
    block["by_target"] = {
        k: {
            "n_contrasts": len(v),
            "met": sum(o.n_met for o in v),
            "expected": sum(o.n_expected for o in v),
        }
        for k, v in sorted(by_label.items())
    }
    if not block["n_contrasts"]:
        statement = (
            f"{spec}: no contrast item could be scored, so instruction following is unknown."
        )
    elif block["ignores_instructions"]:
        feats = ", ".join(
            f"{f} {v['mean_abs_change']:.2f} {v['unit']} < {v['dead_band']:g}"
            for f, v in block["features"].items()
        )
        statement = (
            f"{spec}: this system ignores style instructions - over {block['n_contrasts']} "
            f"contrasts its prosody did not change beyond the dead band on any feature "
            f"(mean |change|: {feats})."
        )
    elif block.get("ci_hi") is not None and block["ci_hi"] < FOLLOWS_SHARE:
        statement = (
            f"{spec}: prosody differs between the instructed and the neutral readings, but "
            f"not in the asked directions: {block['met']}/{block['expected']} expected "
            f"directions met ({block['share']:.0%}, 95 % CI up to {block['ci_hi']:.0%}); "
            f"no evidence that it follows style instructions."
        )
    else:
        statement = (
            f"{spec}: prosody changed with the asked style or emotion; "
            f"{block['met']}/{block['expected']} expected directions met "
            f"({block['share']:.0%})."
        )
    if accepts is False:
        statement += " The adapter states it does not accept instructions"
        statement += f" ({describe.get('instructions')})." if describe.get("instructions") else "."
    elif accepts is True:
        statement += " The adapter states it accepts instructions."
    block["statement"] = statement
    return block


def _identity_block(scorer: _SystemScorer, seed: int) -> dict[str, Any]:
    """Cosine to the group's neutral anchor per stress condition (mean, bootstrap CI)."""
    by_cond: dict[str, list[float]] = defaultdict(list)
    for (iid, _), cos in scorer.cosines.items():
        by_cond[str(scorer.items[iid].labels.get("condition") or "unlabelled")].append(cos)
    rows = []
    for cond in sorted(by_cond):
        m = pf.mean_ci(by_cond[cond], seed=seed)
        rows.append(
            {"condition": cond, "cosine": m["mean"], **{k: m[k] for k in ("ci_lo", "ci_hi", "n")}}
        )
    return {"conditions": rows, "n_groups": len(set(scorer.anchor_of.values()))}


def _longform_block(scorer: _SystemScorer, seed: int) -> dict[str, Any]:
    """Per long-form item the window similarities and drifts, and their means."""
    keys = (
        "longform_sim_min",
        "longform_sim_mean",
        "longform_rate_drift",
        "longform_loudness_drift_db",
    )
    rows: list[dict[str, Any]] = []
    for r in scorer.recs:
        if r.status != "ok" or scorer.items[r.id].labels.get("dimension") != "long_form":
            continue
        rows.append({"id": r.id, "repeat": r.repeat, **{k: _f(r.metrics.get(k)) for k in keys}})
    means = {k: pf.mean_ci([row[k] for row in rows if row[k] is not None], seed=seed) for k in keys}
    return {"items": rows, "means": means}


def _worst(scorer: _SystemScorer, k: int) -> list[dict[str, Any]]:
    """Lowest critical-token accuracy and biggest contrasts missed (audio path, ASR text)."""
    out: list[dict[str, Any]] = []
    crit = []
    for r in scorer.recs:
        tot, ok = _f(r.metrics.get("critical_total")), _f(r.metrics.get("critical_ok"))
        if r.status == "ok" and tot and ok is not None and ok < tot:
            crit.append((ok / tot, r))
    crit.sort(key=lambda t: (t[0], t[1].id))
    for acc, r in crit[:k]:
        it = scorer.items[r.id]
        out.append(
            {
                "kind": "critical",
                "id": r.id,
                "eval": it.labels.get("eval"),
                "score": acc,
                "text": it.text,
                "asr_text": r.output.get("asr_text"),
                "audio_path": r.output.get("audio_path"),
                "details": [
                    {"token": c.get("token"), "ok": c.get("ok"), "heard": c.get("heard")}
                    for c in (r.output.get("critical") or [])
                    if isinstance(c, dict)
                ],
            }
        )
    missed = [
        (oc, key)
        for key, oc in scorer.contrasts.items()
        if oc.n_expected and oc.n_met < oc.n_expected
    ]
    missed.sort(key=lambda t: (t[0].score, -(t[0].n_expected - t[0].n_met), t[1][0]))
    for oc, (iid, rep) in missed[:k]:
        r = scorer.by_key[(iid, rep)]
        it = scorer.items[iid]
        ref_id = str((it.meta.get("contrast") or {}).get("reference"))
        ref = scorer.partner(ref_id, rep)
        out.append(
            {
                "kind": "contrast",
                "id": iid,
                "eval": it.labels.get("eval"),
                "score": oc.score,
                "text": it.text,
                "instructions": it.meta.get("instructions"),
                "asr_text": r.output.get("asr_text"),
                "audio_path": r.output.get("audio_path"),
                "reference": ref_id,
                "reference_audio_path": ref.output.get("audio_path") if ref else None,
                "details": [{"feature": f, **d} for f, d in oc.features.items()],
            }
        )
    return out


def _load_human(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    data, problem = _read_json(path)
    if data is None:
        return None, problem
    evals = data.get("evals")
    if not isinstance(evals, dict):
        return None, f"{path.name} has no 'evals' object"
    clean: dict[str, Any] = {}
    for ev, e in evals.items():
        if not isinstance(e, dict) or not isinstance(e.get("systems"), dict):
            continue
        systems = {
            str(s): {
                k: _f(v.get(k)) if k != "n" else v.get("n") for k in ("mean", "ci_lo", "ci_hi", "n")
            }
            for s, v in e["systems"].items()
            if isinstance(v, dict)
        }
        clean[str(ev)] = {
            "dimension": e.get("dimension"),
            "scale": e.get("scale") or data.get("scale"),
            "systems": systems,
            "judge_agreement": e.get("judge_agreement")
            if isinstance(e.get("judge_agreement"), dict)
            else None,
        }
    dims = data.get("dimensions") if isinstance(data.get("dimensions"), dict) else {}
    return {"source": data.get("source"), "evals": clean, "dimensions": dims}, None
