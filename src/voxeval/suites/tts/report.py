"""The TTS report: every number recomputed from the run folder alone.

Inputs (all inside ``RUN/``): ``run.json``, ``items.jsonl`` (the items snapshot, labels
``{dimension, eval, group, condition, emotion, ...}`` and meta ``{instructions,
critical_tokens, contrast, segments}``), ``records.jsonl`` and two optional files:

``RUN/human.json`` (human study results merged into the profile)::

    {"source": "<study run id or path>",            # free text, shown in the report
     "scale": {"min": 1, "max": 5},                  # optional default scale
     "evals": {"<eval id>": {
         "dimension": "<dimension id>",              # optional
         "scale": {"min": 1, "max": 5},              # optional
         "systems": {"<system spec>": {"mean": 3.9, "ci_lo": 3.6, "ci_hi": 4.2, "n": 60}},
         "judge_agreement": {"spearman": 0.41, "ci_lo": 0.1, "ci_hi": 0.65, "n": 40,
                             "level": "item"}}},     # optional
     "dimensions": {"<dimension id>": {"systems": {"<spec>": {"mean", "ci_lo", "ci_hi", "n"}}}}}

``mean`` is the rater-controlled mean on the eval's scale (z-scale for dimensions);
unknown keys are ignored, a malformed file is reported, never fatal.

``RUN/validation.json``: the MUSHRA validation of the quality metrics written by
``suites/tts/validation.py`` (rendered by its ``render_validation_markdown`` when present).

Eval definitions (primary metric, question, humans only) come from ``run.json``
``config.evals`` (``{eval: {dimension, title, question, scale, automatic, primary}}``); when
the run has none, from the installed item sets (``suites/tts/items.py``), else inferred
(:func:`voxeval.suites.tts.profile.infer_primary`); the report says which.

There is deliberately no overall score: per system an ``overall`` block of counts (items,
errors by kind, unscored and unavailable measures) and per dimension / eval scores with CIs.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from voxeval.core.items import Item
from voxeval.core.records import Record
from voxeval.core.runstore import RunStore, utc_now
from voxeval.stats.intervals import DEFAULT_BOOT, bootstrap_ratio_ci, wilson_interval
from voxeval.suites.tts import profile as pf

REPORT_VERSION = "tts-report-1"
DIMENSION_ORDER = (
    "performance",
    "expressiveness",
    "identity_stress",
    "linguistic",
    "critical_content",
    "long_form",
    "audio_quality",
)
HUMAN_FILE = "human.json"
VALIDATION_FILE = "validation.json"
# A system "follows" instructions only if the share of expected directions met can exceed
# one half (a change in a random direction meets an expected direction about half the time).
FOLLOWS_SHARE = 0.5
TOP_K = 5
WORST_ITEMS = 5

MEASURE_LABELS = {
    "dnsmos": "DNSMOS quality",
    "speaker": "speaker similarity",
    "longform_speaker": "long-form speaker similarity",
    "longform_drift": "long-form drift",
    "asr": "ASR round trip",
    "round_trip": "ASR round trip",
    "prosody": "prosody features",
    "artifacts": "artifact detectors",
    "rate": "speaking rate",
    "judge": "judge",
}
"""Readable names of ``output.unavailable`` keys."""

PRIMARY_MEASURE = {
    "critical_accuracy": ("asr", "round_trip"),
    "intelligibility": ("asr", "round_trip"),
    "prosody_following": ("prosody",),
    "identity": ("speaker",),
    "longform_stability": ("longform_speaker", "speaker"),
    "quality": ("dnsmos",),
}
"""Which ``output.unavailable`` entries explain a missing primary metric."""

ARTIFACT_RULES: dict[str, tuple[str, str, float]] = {
    "clipping": ("clipping_fraction", ">", 0.001),
    "dropouts": ("dropout_count", ">=", 1.0),
    "long_silence": ("longest_silence_s", ">", 2.0),
    "dc_offset": ("dc_offset", "abs>", 0.01),
    "narrow_band": ("bandwidth_hz", "<", 4000.0),
}
"""An item has the artifact when ``metric OP threshold`` (rates over items with the metric)."""


# -- helpers ---------------------------------------------------------------------------------


def _f(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    if not path.exists():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path.name} could not be read: {exc}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _eval_defs(
    config: Mapping[str, Any], items: Sequence[Item]
) -> tuple[dict[str, dict[str, Any]], str]:
    """``{eval: {dimension, title, question, scale, automatic, primary}}`` and its source."""
    present: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        present[str(it.labels.get("eval") or "unlabelled")].append(it)
    raw = config.get("evals")
    source = "run.json"
    defs: dict[str, dict[str, Any]] = {}
    if isinstance(raw, list):
        raw = {str(e.get("id")): e for e in raw if isinstance(e, dict)}
    if isinstance(raw, dict) and raw:
        defs = {str(k): dict(v) for k, v in raw.items() if isinstance(v, dict)}
    else:
        try:
            from voxeval.suites.tts.items import load_item_set

            evs, _ = load_item_set("default")
            for k, e in evs.items():
                defs[k] = {
                    "dimension": e.dimension,
                    "title": e.title,
                    "question": e.question,
                    "scale": e.scale,
                    "automatic": list(e.automatic),
                    "primary": e.primary,
                }
            source = "installed item sets (run.json names no evals)"
        except Exception:  # the item module is optional here: fall back to inference
            defs = {}
            source = "inferred from the items (run.json names no evals)"
    out: dict[str, dict[str, Any]] = {}
    for ev, its in present.items():
        d = dict(defs.get(ev) or {})
        dim = str(d.get("dimension") or its[0].labels.get("dimension") or "unlabelled")
        if ev not in defs:
            metas = [{**it.labels, **it.meta} for it in its]
            d["primary"] = pf.infer_primary(dim, metas)
            if source == "run.json":
                source = "run.json (some evals inferred)"
        d["dimension"] = dim
        d.setdefault("title", ev.replace("_", " "))
        d.setdefault("question", None)
        d.setdefault("automatic", [d["primary"]] if d.get("primary") else [])
        d["id"] = ev
        d["n_items"] = len(its)
        d["humans_only"] = not d.get("primary")
        out[ev] = d
    return out, source


def _describe(info: Mapping[str, Any], spec: str, recs: Sequence[Record]) -> dict[str, Any]:
    """The adapter's ``describe()`` from run.json (systems/<spec>/describe, or config voices),
    else from the first record that carries ``output.system_info``."""
    sysinfo = (info.get("systems") or {}).get(spec) or {}
    d = sysinfo.get("describe") if isinstance(sysinfo, dict) else None
    if not isinstance(d, dict):
        voices = (info.get("config") or {}).get("voices") or {}
        d = voices.get(spec) if isinstance(voices, dict) else None
    if not isinstance(d, dict):
        for r in recs:
            si = r.output.get("system_info")
            if isinstance(si, dict):
                d = si
                break
    return d if isinstance(d, dict) else {}


def accepts_instructions(describe: Mapping[str, Any]) -> bool | None:
    """What the adapter said: ``describe()['instructions']`` (or ``accepts_instructions``)
    False or a text starting with "ignored"/"not" -> False; True or other text -> True;
    absent -> None (unknown)."""
    for key in ("accepts_instructions", "instructions"):
        if key not in describe:
            continue
        v = describe[key]
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            low = v.strip().lower()
            return not low.startswith(("ignored", "not ", "no ", "unsupported", "none"))
    return None


# -- scoring one system ----------------------------------------------------------------------


class _SystemScorer:
    """Per-item primary scores, contrast outcomes and identity cosines of one system."""

    def __init__(
        self,
        spec: str,
        recs: Sequence[Record],
        items: Mapping[str, Item],
        evals: Mapping[str, dict[str, Any]],
    ) -> None:
        self.spec = spec
        self.items = items
        self.evals = evals
        self.recs = [r for r in recs if r.id in items]
        self.by_key = {(r.id, r.repeat): r for r in self.recs}
        self.anchor_of: dict[str, str] = {}
        groups: dict[str, list[Item]] = defaultdict(list)
        for it in items.values():
            g = it.labels.get("group")
            if g is not None and it.labels.get("dimension") == "identity_stress":
                groups[str(g)].append(it)
        for its in groups.values():
            anchors = [
                it.id
                for it in its
                if str(it.labels.get("condition", "")).lower() == pf.NEUTRAL_CONDITION
            ]
            if len(anchors) == 1:
                for it in its:
                    self.anchor_of[it.id] = anchors[0]
        self.units: dict[str, list[pf.Unit]] = defaultdict(list)
        self.skips: dict[str, list[pf.Skip]] = defaultdict(list)
        self.contrasts: dict[tuple[str, int], pf.ContrastOutcome] = {}
        self.cosines: dict[tuple[str, int], float] = {}
        self._score_all()

    def partner(self, item_id: str, repeat: int) -> Record | None:
        return self.by_key.get((item_id, repeat)) or self.by_key.get((item_id, 0))

    def _why_missing(self, rec: Record, primary: str, base: str) -> str:
        unav = rec.output.get("unavailable") or {}
        for key in PRIMARY_MEASURE.get(primary, ()):
            if isinstance(unav, dict) and unav.get(key):
                return f"{MEASURE_LABELS.get(key, key)} unavailable: {unav[key]}"
        return base

    def _contrast(self, rec: Record, item: Item) -> pf.ContrastOutcome | str | None:
        c = item.meta.get("contrast")
        if not isinstance(c, dict) or not c.get("reference"):
            return None
        ref_id = str(c["reference"])
        ref = self.partner(ref_id, rec.repeat)
        if ref is None:
            return f"neutral partner {ref_id} has no record"
        if ref.status != "ok":
            kind = (ref.error or {}).get("kind", ref.status)
            return f"neutral partner {ref_id} failed ({kind})"
        expect = c.get("expect") or {}
        if not isinstance(expect, dict) or not expect:
            return "contrast names no expected direction"
        return pf.contrast_outcome(expect, rec.metrics, ref.metrics)

    def _cosine(self, rec: Record, item: Item) -> float | str | None:
        anchor = self.anchor_of.get(item.id)
        if anchor is None:
            if item.labels.get("group") is not None:
                return f"group {item.labels.get('group')} has no single neutral anchor"
            return "item has no identity group"
        if anchor == item.id:
            return None
        ref = self.partner(anchor, rec.repeat)
        if ref is None:
            return f"anchor {anchor} has no record"
        if ref.status != "ok":
            return f"anchor {anchor} failed ({(ref.error or {}).get('kind', ref.status)})"
        a, b = rec.output.get("embedding"), ref.output.get("embedding")
        if not a or not b:
            unav = rec.output.get("unavailable") or ref.output.get("unavailable") or {}
            if isinstance(unav, dict) and unav.get("speaker"):
                return f"speaker similarity unavailable: {unav['speaker']}"
            return "no speaker embedding"
        cos = pf.cosine(a, b)
        return cos if cos is not None else "speaker embedding is empty or zero"

    def _score_all(self) -> None:
        for rec in self.recs:
            if rec.status != "ok":
                continue
            item = self.items[rec.id]
            ev = str(item.labels.get("eval") or "unlabelled")
            primary = self.evals.get(ev, {}).get("primary")
            oc = self._contrast(rec, item)
            if isinstance(oc, pf.ContrastOutcome):
                self.contrasts[(rec.id, rec.repeat)] = oc
            cos = self._cosine(rec, item) if rec.id in self.anchor_of else None
            if isinstance(cos, float):
                self.cosines[(rec.id, rec.repeat)] = cos
            if not primary:
                continue
            if primary == "prosody_following":
                if oc is None:
                    self.skips[ev].append(
                        pf.Skip(rec.id, "reference", "neutral partner (no contrast)")
                    )
                    continue
                if isinstance(oc, str):
                    self.skips[ev].append(pf.Skip(rec.id, "unscored", oc))
                    continue
                res = pf.item_score(primary, rec.metrics, contrast=oc)
            elif primary == "identity":
                if rec.id not in self.anchor_of:
                    cos = self._cosine(rec, item)
                if cos is None:
                    self.skips[ev].append(pf.Skip(rec.id, "reference", "identity anchor"))
                    continue
                if isinstance(cos, str):
                    self.skips[ev].append(pf.Skip(rec.id, "unscored", cos))
                    continue
                res = pf.item_score(primary, rec.metrics, anchor_cosine=cos)
            else:
                res = pf.item_score(primary, rec.metrics)
            if isinstance(res, str):
                reason = self._why_missing(rec, primary, res)
                self.skips[ev].append(pf.Skip(rec.id, "unscored", reason))
            else:
                self.units[ev].append(pf.Unit(rec.id, res[0], res[1]))


# -- raw metrics -----------------------------------------------------------------------------


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


def build_report(
    store: RunStore,
    *,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    top: int = TOP_K,
    worst: int = WORST_ITEMS,
    **_: Any,
) -> dict[str, Any]:
    """Every number of the TTS report, recomputed from the run folder (pure: same folder and
    seed give the same dict, except ``generated_at``)."""
    info = store.info()
    config = info.get("config") or {}
    all_items = store.items()
    items = {it.id: it for it in all_items}
    loaded = store.load_records()
    records = loaded.records
    systems = [str(s) for s in (config.get("systems") or [])]
    for r in sorted(records, key=lambda r: r.system):
        if r.system not in systems:
            systems.append(r.system)
    evals, eval_source = _eval_defs(config, all_items)
    dims_present = {d["dimension"] for d in evals.values()}
    dimensions = [d for d in DIMENSION_ORDER if d in dims_present] + sorted(
        dims_present - set(DIMENSION_ORDER)
    )
    eval_order = sorted(evals, key=lambda e: (dimensions.index(evals[e]["dimension"]), e))
    auto_dims = [
        d
        for d in dimensions
        if any(evals[e]["dimension"] == d and not evals[e]["humans_only"] for e in eval_order)
    ]
    unknown_ids = Counter(r.system for r in records if r.id not in items)

    scorers: dict[str, _SystemScorer] = {}
    out_systems: list[dict[str, Any]] = []
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in systems:
        recs = [r for r in records if r.system == spec and r.id in items]
        sc = _SystemScorer(spec, recs, items, evals)
        scorers[spec] = sc
        describe = _describe(info, spec, recs)
        bad = [r for r in recs if r.status != "ok"]
        n_ok = sum(1 for r in recs if r.status == "ok")
        unav = _unavailable(recs)
        unscored = Counter(s.reason for ss in sc.skips.values() for s in ss if s.kind == "unscored")
        overall = {
            "n_items": len({r.id for r in recs}),
            "n_records": len(recs),
            "n_ok": n_ok,
            "n_error": len(bad),
            "errors_by_kind": dict(Counter((r.error or {}).get("kind", r.status) for r in bad)),
            "n_unscored": sum(unscored.values()),
            "unscored_by_reason": dict(unscored),
            "unavailable": unav,
            "unavailable_statements": unavailable_statements(unav, n_ok),
            "n_unknown_item_records": unknown_ids.get(spec, 0),
            "compute_s": sum(
                _f(r.timing.get("compute_s")) or 0.0 for r in recs if r.status == "ok"
            ),
            "audio_s": sum(_f(r.timing.get("audio_s")) or 0.0 for r in recs if r.status == "ok"),
        }
        groups: list[dict[str, Any]] = []
        matrix[spec] = {}
        for dim in dimensions:
            dim_evals = [e for e in eval_order if evals[e]["dimension"] == dim]
            auto = [e for e in dim_evals if not evals[e]["humans_only"]]
            ds = pf.dimension_score(
                {e: sc.units.get(e, []) for e in auto}, seed=seed, n_boot=n_boot
            )
            entry = {
                "group": "dimension",
                "name": dim,
                "score": ds["score"],
                "ci_lo": ds["ci_lo"],
                "ci_hi": ds["ci_hi"],
                "n": ds["n"],
                "evals": ds["evals"],
                "automatic_evals": auto,
                "humans_only_evals": [e for e in dim_evals if evals[e]["humans_only"]],
            }
            groups.append(entry)
            if auto:
                matrix[spec][dim] = {k: entry[k] for k in ("score", "ci_lo", "ci_hi", "n", "evals")}
        for ev in eval_order:
            d = evals[ev]
            ev_recs = [r for r in recs if r.id in items and items[r.id].labels.get("eval") == ev]
            ok_recs = [r for r in ev_recs if r.status == "ok"]
            skips = sc.skips.get(ev, [])
            es = (
                pf.eval_score(sc.units.get(ev, []), seed=seed, n_boot=n_boot)
                if not d["humans_only"]
                else {"score": None, "ci_lo": None, "ci_hi": None, "n": 0}
            )
            groups.append(
                {
                    "group": "eval",
                    "name": ev,
                    "dimension": d["dimension"],
                    "primary": d.get("primary"),
                    "humans_only": d["humans_only"],
                    **es,
                    "n_records": len(ev_recs),
                    "n_error": len(ev_recs) - len(ok_recs),
                    "n_unscored": sum(1 for s in skips if s.kind == "unscored"),
                    "n_reference": sum(1 for s in skips if s.kind == "reference"),
                    "unscored_reasons": dict(
                        Counter(s.reason for s in skips if s.kind == "unscored")
                    ),
                    "raw": raw_metrics(ok_recs, seed=seed),
                }
            )
        identity = _identity_block(sc, seed)
        for row in identity["conditions"]:
            groups.append(
                {
                    "group": "identity_condition",
                    "name": row["condition"],
                    "cosine": row["cosine"],
                    "ci_lo": row["ci_lo"],
                    "ci_hi": row["ci_hi"],
                    "n": row["n"],
                }
            )
        out_systems.append(
            {
                "system": spec,
                "overall": overall,
                "groups": groups,
                "describe": describe,
                "instructions": _instructions_block(sc, describe, spec),
                "identity": identity,
                "long_form": _longform_block(sc, seed),
                "judge": _judge_block(recs, items, seed),
                "worst_items": _worst(sc, worst),
            }
        )

    # paired comparisons on the same items
    paired = []
    for i, a in enumerate(systems):
        for b in systems[i + 1 :]:
            sa, sb = scorers[a], scorers[b]
            for dim in auto_dims:
                auto = [
                    e
                    for e in eval_order
                    if evals[e]["dimension"] == dim and not evals[e]["humans_only"]
                ]
                pdd = pf.paired_dimension_diff(
                    {e: sa.units.get(e, []) for e in auto},
                    {e: sb.units.get(e, []) for e in auto},
                    seed=seed,
                    n_boot=n_boot,
                )
                paired.append(
                    {
                        "a": a,
                        "b": b,
                        "group": "dimension",
                        "name": dim,
                        "a_score": pdd["a"],
                        "b_score": pdd["b"],
                        **{k: pdd[k] for k in ("diff", "ci_lo", "ci_hi", "p_value", "n")},
                    }
                )
            for ev in eval_order:
                if evals[ev]["humans_only"]:
                    continue
                pd = pf.paired_eval_diff(
                    sa.units.get(ev, []), sb.units.get(ev, []), seed=seed, n_boot=n_boot
                )
                paired.append(
                    {
                        "a": a,
                        "b": b,
                        "group": "eval",
                        "name": ev,
                        "dimension": evals[ev]["dimension"],
                        "a_score": pd.a,
                        "b_score": pd.b,
                        "diff": pd.diff,
                        "ci_lo": pd.ci_lo,
                        "ci_hi": pd.ci_hi,
                        "p_value": pd.p_value,
                        "n": pd.n,
                    }
                )

    # no system leads everywhere
    dim_scores = {s: {d: v["score"] for d, v in matrix[s].items()} for s in systems}
    correlation = pf.dimension_correlation(dim_scores, auto_dims)
    tops = {
        d: pf.top_k({s: matrix[s][d] for s in systems if d in matrix[s]}, k=top) for d in auto_dims
    }
    leadership = {
        "correlation": correlation,
        "top_k": tops,
        "k": top,
        "statement": lead_statement(systems, tops),
    }

    human, human_problem = _load_human(store.path / HUMAN_FILE)
    validation, validation_problem = _read_json(store.path / VALIDATION_FILE)
    humans_only = []
    for ev in eval_order:
        d = evals[ev]
        if d["humans_only"]:
            humans_only.append(
                {
                    "eval": ev,
                    "dimension": d["dimension"],
                    "title": d.get("title"),
                    "question": d.get("question"),
                    "n_items": d["n_items"],
                    "human": (human or {}).get("evals", {}).get(ev),
                }
            )
    notes = []
    if len(systems) < 2:
        notes.append("One system only: no paired comparisons and no cross-system reading.")
    if not any(s["judge"]["available"] for s in out_systems):
        why = next((s["judge"]["statement"] for s in out_systems if s["judge"]["n_judged"]), None)
        notes.append(
            (why or "No judge was available: no record carries a judge answer")
            + f" (judge spec in run.json: {config.get('judge') or 'none'})."
        )
    if human is None:
        notes.append(
            "No human results (RUN/human.json) yet: humans-only evals have no score here; "
            "export the study with --study and merge its results."
        )
    for problem in (human_problem, validation_problem):
        if problem:
            notes.append(problem)
    if sum(unknown_ids.values()):
        notes.append(
            f"{sum(unknown_ids.values())} record(s) name items that are not in items.jsonl; they are ignored."
        )
    return {
        "suite": "tts",
        "metrics_version": config.get("metrics_version") or _metrics_version(),
        "report_version": REPORT_VERSION,
        "run_id": info.get("run_id", store.run_id),
        "generated_at": utc_now(),
        "items": {
            "set": config.get("items") or config.get("item_set"),
            "version": config.get("items_version"),
            "sha256": config.get("items_sha256"),
            "n": len(all_items),
        },
        "asr": config.get("asr"),
        "judge_spec": config.get("judge"),
        "seed": seed,
        "n_boot": n_boot,
        "eval_source": eval_source,
        "dimensions": dimensions,
        "evals": [evals[e] for e in eval_order],
        "systems": out_systems,
        "profile": {
            "dimensions": auto_dims,
            "matrix": matrix,
            "humans_only": humans_only,
            "rule": (
                "per-item score in [0, 1] from the eval's primary metric; eval score = mean over "
                "items (critical content: corpus ratio of tokens); dimension = equal-weight mean "
                "of its automatic evals; 95 % CIs by bootstrap over items (within evals)"
            ),
        },
        "paired": paired,
        "leadership": leadership,
        "dead_band": dict(pf.DEAD_BAND),
        "human": human,
        "validation": validation,
        "notes": notes,
        "malformed_record_lines": [{"line": ln, "reason": why} for ln, why in loaded.malformed],
    }


def _metrics_version() -> str:
    try:
        from voxeval.suites.tts.metrics import METRICS_VERSION

        return str(METRICS_VERSION)
    except Exception:  # metrics module absent: the run did not say either
        return "unknown"


def lead_statement(systems: Sequence[str], tops: Mapping[str, Mapping[str, Any]]) -> str:
    """Whether one system leads (or ties for first by CI overlap) in every dimension."""
    if len(systems) < 2:
        return "One system only: leadership across dimensions cannot be read."
    dims = [d for d, t in tops.items() if t["ranked"]]
    if not dims:
        return "No dimension has scores for any system."
    everywhere = [s for s in systems if all(s in tops[d]["leaders"] for d in dims)]
    if everywhere:
        return (
            f"{', '.join(everywhere)} lead(s) or tie(s) for first (CI overlap) in every one of "
            f"the {len(dims)} scored dimensions."
        )
    parts = [f"{d}: {', '.join(tops[d]['leaders'])}" for d in dims]
    return (
        "No system leads everywhere. Leaders (tied by CI overlap) per dimension: "
        + "; ".join(parts)
        + "."
    )


# -- rendering -------------------------------------------------------------------------------


def _ci(lo: Any, hi: Any) -> str:
    from voxeval.report.html import fmt

    return f"[{fmt(lo)}, {fmt(hi)}]"


def _cell(v: Mapping[str, Any] | None) -> str:
    from voxeval.report.html import fmt

    if not v or _f(v.get("score")) is None:
        return "–"
    return f"{fmt(v['score'])} {_ci(v.get('ci_lo'), v.get('ci_hi'))} n={v.get('n')}"


def _sections(report: Mapping[str, Any]) -> list[tuple[str, str, list[str], list[list[Any]]]]:
    """(heading, text, headers, rows) shared by the Markdown and HTML views (profile aside)."""
    out: list[tuple[str, str, list[str], list[list[Any]]]] = []
    systems = report["systems"]
    out.append(
        (
            "Systems",
            "Counts only: there is no overall score. Errors are counted, never scored as zero.",
            [
                "system",
                "items",
                "records",
                "ok",
                "errors",
                "errors by kind",
                "unscored",
                "unavailable measures",
            ],
            [
                [
                    s["system"],
                    s["overall"]["n_items"],
                    s["overall"]["n_records"],
                    s["overall"]["n_ok"],
                    s["overall"]["n_error"],
                    ", ".join(
                        f"{k}: {v}" for k, v in sorted(s["overall"]["errors_by_kind"].items())
                    )
                    or "–",
                    s["overall"]["n_unscored"],
                    "; ".join(s["overall"]["unavailable_statements"]) or "none",
                ]
                for s in systems
            ],
        )
    )
    return out


def _profile_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    dims = report["profile"]["dimensions"]
    rows = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        rows.append([s["system"], *[_cell(m.get(d)) for d in dims]])
    return ["system", *dims], rows


def _eval_rows(s: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for g in s["groups"]:
        if g["group"] != "eval":
            continue
        raw = g["raw"]
        score = "humans only" if g["humans_only"] else g["score"]
        rows.append(
            [
                g["dimension"],
                g["name"],
                g.get("primary") or "–",
                score,
                _ci(g["ci_lo"], g["ci_hi"]) if not g["humans_only"] else "",
                g["n"],
                g["n_error"],
                g["n_unscored"],
                _rawcell(raw["wer"]),
                _rawcell(raw["cer"]),
                _rawcell(raw["critical_accuracy"]),
                _rawcell(raw["dnsmos_ovrl"]),
                _rawcell(raw["rate_ok"]),
            ]
        )
    return rows


EVAL_HEADERS = [
    "dimension",
    "eval",
    "primary",
    "score",
    "95% CI",
    "n",
    "errors",
    "unscored",
    "WER",
    "CER",
    "critical acc.",
    "DNSMOS ovrl",
    "rate ok",
]


def _rawcell(v: Mapping[str, Any]) -> str:
    from voxeval.report.html import fmt

    if not v or not v.get("n") or v.get("value") is None:
        return "–"
    return f"{fmt(v['value'])} {_ci(v.get('ci_lo'), v.get('ci_hi'))}"


def _identity_rows(conditions: list[dict[str, Any]]) -> list[list[Any]]:
    """Identity-under-stress table rows: condition, cosine to the anchor, CI, n."""
    return [[r["condition"], r["cosine"], _ci(r["ci_lo"], r["ci_hi"]), r["n"]] for r in conditions]


def _artifact_rows(s: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for g in s["groups"]:
        if g["group"] != "eval":
            continue
        a = g["raw"]["artifacts"]
        if not any(v["n"] for v in a.values()):
            continue
        rows.append([g["name"], *[_rawcell(a[k]) for k in ARTIFACT_RULES]])
    return rows


def _instruction_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for s in report["systems"]:
        ins = s["instructions"]
        feats = "; ".join(
            f"{f}: {v['met']}/{v['n']} met, mean |change| {v['mean_abs_change']:.3g} (band {v['dead_band']:g})"
            for f, v in ins["features"].items()
        )
        rows.append(
            [
                s["system"],
                {True: "yes", False: "no", None: "unknown"}[ins["accepts_instructions"]],
                ins["n_contrasts"],
                f"{ins['met']}/{ins['expected']}",
                ins["share"],
                _ci(ins["ci_lo"], ins["ci_hi"]),
                feats or "–",
            ]
        )
    return rows


INSTR_HEADERS = [
    "system",
    "accepts instructions",
    "contrasts",
    "met / expected",
    "share",
    "95% CI",
    "by feature",
]


def _paired_rows(report: Mapping[str, Any], group: str) -> list[list[Any]]:
    return [
        [
            f"{p['a']} − {p['b']}",
            p["name"],
            p.get("a_score"),
            p.get("b_score"),
            p["diff"],
            _ci(p["ci_lo"], p["ci_hi"]),
            p["p_value"],
            p["n"],
        ]
        for p in report["paired"]
        if p["group"] == group
    ]


PAIRED_HEADERS = ["a − b", "name", "a", "b", "difference", "95% CI", "p", "n items"]


def _corr_table(report: Mapping[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    c = report["leadership"]["correlation"]
    if c["status"] != "ok":
        return f"Not read: {c['reason']}.", [], []
    dims = c["dimensions"]
    rows = [[da, *[cell["rho"] for cell in row]] for da, row in zip(dims, c["matrix"], strict=True)]
    return (
        f"Spearman's rho between dimension scores across {c['n_systems']} systems.",
        ["", *dims],
        rows,
    )


def _top_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    L = report["leadership"]
    return [
        [d, ", ".join(t["top"]), ", ".join(t["leaders"]), ", ".join(t["ranked"])]
        for d, t in L["top_k"].items()
    ]


def _judge_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for s in report["systems"]:
        for e in s["judge"]["evals"]:
            rows.append(
                [
                    s["system"],
                    e["eval"],
                    e["mean"],
                    _ci(e["ci_lo"], e["ci_hi"]),
                    e["n"],
                    e["unparseable"],
                    e["error"],
                ]
            )
    return rows


def _human_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for h in report["profile"]["humans_only"]:
        hum = h.get("human") or {}
        systems = hum.get("systems") or {}
        scores = (
            "; ".join(
                f"{s}: {_num(v.get('mean'))} {_ci(v.get('ci_lo'), v.get('ci_hi'))}"
                for s, v in systems.items()
            )
            or "no human results yet"
        )
        ja = hum.get("judge_agreement") or {}
        rows.append(
            [
                h["dimension"],
                h["eval"],
                h.get("question") or "",
                h["n_items"],
                scores,
                _num(ja.get("spearman")) if ja else "–",
            ]
        )
    return rows


def _human_all_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    """Every eval and dimension in human.json: system, rater-controlled mean, CI, n, judge rho."""
    hum = report.get("human") or {}
    rows = []
    for level, block in (
        ("eval", hum.get("evals") or {}),
        ("dimension", hum.get("dimensions") or {}),
    ):
        for name, e in block.items():
            ja = e.get("judge_agreement") or {}
            for spec, v in (e.get("systems") or {}).items():
                rows.append(
                    [
                        level,
                        name,
                        spec,
                        _num(v.get("mean")),
                        _ci(v.get("ci_lo"), v.get("ci_hi")),
                        v.get("n"),
                        _num(ja.get("spearman")) if ja else "–",
                    ]
                )
    return rows


HUMAN_HEADERS = ["level", "name", "system", "human mean", "95% CI", "n", "judge vs human rho"]


def _num(v: Any) -> str:
    from voxeval.report.html import fmt

    return fmt(_f(v))


def _validation_md(report: Mapping[str, Any]) -> str:
    head = "## Quality metrics vs human MUSHRA scores\n\n"
    val = report.get("validation")
    if not val:
        return (
            head
            + "No validation of the quality metrics in this run (RUN/validation.json absent).\n"
        )
    try:
        from voxeval.suites.tts.validation import render_validation_markdown

        return str(render_validation_markdown(val))
    except Exception as exc:  # renderer absent or incompatible: show the numbers raw
        raw = json.dumps(val, indent=1)[:6000]
        return head + f"(validation renderer failed: {exc})\n\n```\n{raw}\n```\n"


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (numbers only from ``report``)."""
    from voxeval.report.markdown import md_table

    out = [f"# TTS report `{report['run_id']}`\n"]
    out.append(
        f"Metrics `{report['metrics_version']}`, {report['items']['n']} items, "
        f"{len(report['systems'])} system(s). Eval definitions: {report['eval_source']}. "
        f"{report['profile']['rule']}. No single overall score is computed.\n"
    )
    out += [f"> {n}\n" for n in report["notes"]]
    for title, text, headers, rows in _sections(report):
        out.append(f"## {title}\n\n{text}\n")
        out.append(md_table(headers, rows))
    out.append("\n## Capability profile (systems × dimensions)\n")
    headers, rows = _profile_rows(report)
    out.append(
        md_table(headers, rows)
        if report["profile"]["dimensions"]
        else "No automatic dimension was scored.\n"
    )
    out.append("\n### Humans only\n")
    human_rows = _human_rows(report)
    if not human_rows:
        out.append("No humans-only eval in this run's item set.\n")
    out.append(
        ""
        if not human_rows
        else md_table(
            [
                "dimension",
                "eval",
                "question",
                "items",
                "human score (rater-controlled)",
                "judge vs human rho",
            ],
            human_rows,
        )
    )
    if report.get("human"):
        out.append(f"\n### Human ratings (from {report['human'].get('source')})\n")
        out.append(md_table(HUMAN_HEADERS, _human_all_rows(report)))
    out.append("\n## Instruction and emotion following\n")
    out += [f"- {s['instructions']['statement']}" for s in report["systems"]]
    out.append("")
    out.append(md_table(INSTR_HEADERS, _instruction_rows(report)))
    out.append("\n## Paired comparisons (same items)\n")
    out.append(
        md_table(PAIRED_HEADERS, _paired_rows(report, "dimension") + _paired_rows(report, "eval"))
        if report["paired"]
        else "One system: nothing to pair.\n"
    )
    out.append("\n## No system leads everywhere?\n")
    out.append(report["leadership"]["statement"] + "\n")
    text, h, r = _corr_table(report)
    out.append(text + "\n")
    if r:
        out.append(md_table(h, r))
    out.append(f"\nTop {report['leadership']['k']} per dimension (ties by CI overlap):\n")
    out.append(md_table(["dimension", "top", "leaders (tied first)", "ranked"], _top_rows(report)))
    out.append("\n## Judge\n")
    out += [f"- {s['system']}: {s['judge']['statement']}" for s in report["systems"]]
    out.append("")
    jr = _judge_rows(report)
    out.append(
        md_table(["system", "eval", "mean", "95% CI", "n", "unparseable", "errors"], jr)
        if jr
        else "No judge was available for this run.\n"
    )
    for s in report["systems"]:
        out.append(f"\n## {s['system']}\n")
        for st in s["overall"]["unavailable_statements"]:
            out.append(f"- {st}")
        out.append(md_table(EVAL_HEADERS, _eval_rows(s)))
        ar = _artifact_rows(s)
        if ar:
            out.append("\nArtifact rates (share of items, Wilson CI):\n")
            out.append(md_table(["eval", *ARTIFACT_RULES], ar))
        idr = s["identity"]["conditions"]
        if idr:
            out.append("\nIdentity under stress (cosine to the group's neutral anchor):\n")
            out.append(
                md_table(
                    ["condition", "cosine", "95% CI", "n"],
                    _identity_rows(idr),
                )
            )
        lf = s["long_form"]
        if lf["items"]:
            out.append(
                "\nLong form (window similarity to the first window; drifts last vs first third):\n"
            )
            out.append(
                md_table(
                    ["id", "sim min", "sim mean", "rate drift", "loudness drift dB"],
                    [
                        [
                            r["id"],
                            r["longform_sim_min"],
                            r["longform_sim_mean"],
                            r["longform_rate_drift"],
                            r["longform_loudness_drift_db"],
                        ]
                        for r in lf["items"]
                    ],
                )
            )
        if s["worst_items"]:
            out.append("\nWorst items:\n")
            out.append(
                md_table(
                    ["kind", "id", "eval", "score", "text", "ASR round trip"],
                    [
                        [w["kind"], w["id"], w["eval"], w["score"], w["text"], w.get("asr_text")]
                        for w in s["worst_items"]
                    ],
                )
            )
    out.append("\n" + _validation_md(report))
    return "\n".join(out)


def _heat_colour(score: float) -> str:
    """Red (0) through yellow to green (1) as an HSL background."""
    s = min(1.0, max(0.0, score))
    return f"hsl({s * 120:.0f},65%,78%)"


def heatmap_html(report: Mapping[str, Any]) -> str:
    """The capability profile as a table with coloured cells (score, CI, n per cell)."""
    from voxeval.report.html import esc, fmt

    dims = report["profile"]["dimensions"]
    if not dims:
        return "<p class='muted'>No automatic dimension was scored.</p>"
    head = "".join(f"<th>{esc(d)}</th>" for d in dims)
    rows = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        cells = []
        for d in dims:
            v = m.get(d)
            score = _f((v or {}).get("score"))
            if score is None:
                cells.append("<td class='heat' style='background:#eee'>–</td>")
                continue
            cells.append(
                f"<td class='heat' style='background:{_heat_colour(score)}' "
                f"title='{esc(s['system'])} · {esc(d)}'><b>{fmt(score)}</b><br>"
                f"<span class='muted'>{esc(_ci(v.get('ci_lo'), v.get('ci_hi')))} n={v.get('n')}</span></td>"
            )
        rows.append(f"<tr><th class='l'>{esc(s['system'])}</th>{''.join(cells)}</tr>")
    return (
        "<div class='tw'><table class='heatmap'><thead><tr><th class='l'>system</th>"
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        "<p class='muted'>Colour: score 0 (red) to 1 (green); 95 % bootstrap CI and scored items "
        "below each score. Each dimension stands alone: there is no overall score.</p>"
    )


def _player(path: Any, store: RunStore | None) -> str:
    from voxeval.core.audio import load_audio, wav_data_uri
    from voxeval.core.errors import AudioError
    from voxeval.report.html import audio_player, esc

    if not path:
        return "<span class='muted'>no audio</span>"
    p = Path(str(path))
    if not p.is_absolute() and store is not None:
        p = store.path / p
    try:
        return audio_player(wav_data_uri(load_audio(p, sr=None), max_seconds=20))
    except AudioError as exc:
        return f"<span class='muted'>{esc(exc)}</span>"


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    """Self-contained HTML page of the report."""
    from voxeval.report.html import page

    return page(f"TTS · {report['run_id']}", render_html_body(report, store))


def render_html_body(report: dict[str, Any], store: RunStore | None = None) -> str:
    """The page body (also the TTS section of the combined demo report)."""
    from voxeval.report.html import Raw, bar_chart, esc, table

    body = [
        f"<p class='muted'>Run <code>{esc(report['run_id'])}</code> · metrics "
        f"<code>{esc(report['metrics_version'])}</code> · {report['items']['n']} items · "
        f"eval definitions: {esc(report['eval_source'])} · generated {esc(report.get('generated_at'))}</p>",
        f"<p>{esc(report['profile']['rule'])}. No single overall score is computed.</p>",
    ]
    body += [f"<div class='note'>{esc(n)}</div>" for n in report["notes"]]
    for title, text, headers, rows in _sections(report):
        body.append(f"<h2>{esc(title)}</h2><p>{esc(text)}</p>" + table(headers, rows))
    body.append("<h2>Capability profile</h2>" + heatmap_html(report))
    dims = report["profile"]["dimensions"]
    if dims:
        series = []
        for s in report["systems"]:
            m = report["profile"]["matrix"].get(s["system"], {})
            series.append(
                (
                    s["system"],
                    [
                        (
                            _f((m.get(d) or {}).get("score")),
                            _f((m.get(d) or {}).get("ci_lo")),
                            _f((m.get(d) or {}).get("ci_hi")),
                        )
                        for d in dims
                    ],
                )
            )
        body.append(bar_chart(dims, series, x_label="dimension score (95 % CI)"))
    body.append("<h3>Humans only</h3>")
    human_rows = _human_rows(report)
    body.append(
        "<p>No humans-only eval in this run's item set.</p>"
        if not human_rows
        else table(
            [
                "dimension",
                "eval",
                "question",
                "items",
                "human score (rater-controlled)",
                "judge vs human rho",
            ],
            human_rows,
            left=3,
        )
    )
    if report.get("human"):
        body.append(f"<h3>Human ratings (from {esc(report['human'].get('source'))})</h3>")
        body.append(table(HUMAN_HEADERS, _human_all_rows(report), left=3))
    body.append("<h2>Instruction and emotion following</h2>")
    for s in report["systems"]:
        cls = "bad" if s["instructions"]["ignores_instructions"] else ""
        body.append(f"<p class='{cls}'>{esc(s['instructions']['statement'])}</p>")
    body.append(table(INSTR_HEADERS, _instruction_rows(report), left=2))
    body.append("<h2>Paired comparisons (same items)</h2>")
    if report["paired"]:
        body.append(
            "<h3>Dimensions</h3>" + table(PAIRED_HEADERS, _paired_rows(report, "dimension"), left=2)
        )
        body.append("<h3>Evals</h3>" + table(PAIRED_HEADERS, _paired_rows(report, "eval"), left=2))
    else:
        body.append("<p class='muted'>One system: nothing to pair.</p>")
    body.append("<h2>No system leads everywhere?</h2>")
    body.append(f"<p>{esc(report['leadership']['statement'])}</p>")
    text, h, r = _corr_table(report)
    body.append(f"<p>{esc(text)}</p>" + (table(h, r) if r else ""))
    body.append(
        table(
            ["dimension", f"top {report['leadership']['k']}", "leaders (tied first)", "ranked"],
            _top_rows(report),
            left=4,
        )
    )
    body.append("<h2>Judge</h2>")
    body += [
        f"<p>{esc(s['system'])}: {esc(s['judge']['statement'])}</p>" for s in report["systems"]
    ]
    jr = _judge_rows(report)
    body.append(
        table(["system", "eval", "mean", "95% CI", "n", "unparseable", "errors"], jr, left=2)
        if jr
        else "<p>No judge was available for this run.</p>"
    )
    for s in report["systems"]:
        body.append(f"<h2>{esc(s['system'])}</h2>")
        body += [
            f"<div class='note'>{esc(st)}</div>" for st in s["overall"]["unavailable_statements"]
        ]
        body.append(table(EVAL_HEADERS, _eval_rows(s), left=3))
        ar = _artifact_rows(s)
        if ar:
            rules = "; ".join(f"{k}: {k2} {op} {t:g}" for k, (k2, op, t) in ARTIFACT_RULES.items())
            body.append(
                f"<h3>Artifact rates</h3><p class='muted'>{esc(rules)}</p>"
                + table(["eval", *ARTIFACT_RULES], ar)
            )
        idr = s["identity"]["conditions"]
        if idr:
            body.append("<h3>Identity under stress</h3>")
            body.append(
                table(
                    ["condition", "cosine to anchor", "95% CI", "n"],
                    _identity_rows(idr),
                )
            )
        lf = s["long_form"]
        if lf["items"]:
            body.append("<h3>Long form</h3>")
            body.append(
                table(
                    ["id", "sim min", "sim mean", "rate drift", "loudness drift dB"],
                    [
                        [
                            x["id"],
                            x["longform_sim_min"],
                            x["longform_sim_mean"],
                            x["longform_rate_drift"],
                            x["longform_loudness_drift_db"],
                        ]
                        for x in lf["items"]
                    ],
                )
            )
        if s["worst_items"]:
            body.append("<h3>Worst items</h3>")
            rows = []
            for w in s["worst_items"]:
                if w["kind"] == "critical":
                    det = ", ".join(
                        f"{d['token']} {'✓' if d['ok'] else '✗ heard ' + repr(d.get('heard'))}"
                        for d in w["details"]
                    )
                    audio = _player(w.get("audio_path"), store)
                else:
                    det = ", ".join(
                        f"{d['feature']} {d['expect']} ({d['change']:+.3g}) {'✓' if d['met'] else '✗'}"
                        for d in w["details"]
                    )
                    audio = (
                        _player(w.get("audio_path"), store)
                        + "<br><span class='muted'>neutral:</span> "
                        + _player(w.get("reference_audio_path"), store)
                    )
                rows.append(
                    [w["kind"], w["id"], w["score"], w["text"], w.get("asr_text"), det, Raw(audio)]
                )
            body.append(
                table(
                    ["kind", "id", "score", "text", "ASR round trip", "details", "audio"],
                    rows,
                    left=2,
                )
            )
    val_md = _validation_md(report).split("\n", 2)
    body.append(f"<h2>{esc(val_md[0].lstrip('# '))}</h2><pre>{esc(val_md[-1].strip())}</pre>")
    return "".join(body)


__all__ = [
    "ARTIFACT_RULES",
    "accepts_instructions",
    "build_report",
    "heatmap_html",
    "raw_metrics",
    "render_html",
    "render_html_body",
    "render_markdown",
    "unavailable_statements",
]
