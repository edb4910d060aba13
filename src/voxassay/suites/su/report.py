"""Build the SU report from a run directory alone (``voxassay report RUN_DIR``), and render it.

Metrics use repeat 0 of test-split items (calibration items only fit thresholds).
Per system, ``tasks`` holds one block per eval; ``overall`` carries the record counts (and
the eval's figures when the run has a single eval: SU never folds evals into one number);
``groups`` lists per-eval, per-truth-class and per-label breakdowns with Wilson CIs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any
from urllib.parse import urlparse

from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import system_key
from voxassay.suites.su.parse import PARSER_VERSION
from voxassay.suites.su.prompts import PROMPTS_VERSION, SEPARATOR
from voxassay.suites.su.scoring import (
    FIXED_RATING_THRESHOLD,
    METRICS_VERSION,
    accuracy,
    best_threshold,
    confusion,
    eer,
    paired_accuracy_diff,
    roc_auc,
    threshold_accuracy,
)
from voxassay.suites.su.tasks import EVALS, get_vocabulary

NO_SPECIALIST = {
    "emotion": "No offline specialist for emotion recognition exists on this machine: "
    "this eval has no reference line.",
    "emotion_compare": "No offline specialist for relative emotion comparison exists on this "
    "machine: this eval has no reference line.",
}
GROUP_LABELS = ("target_emotion", "gender", "condition", "source", "vocoder", "accent")
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def system_kind(spec: str, run_kind: str | None) -> str:
    """``specialist``, ``model endpoint``, ``local test endpoint`` (loopback URL) or
    ``in-process callable`` (``python:``/``mock``: not assumed to be a real model)."""
    if run_kind == "specialist":
        return "specialist"
    backend, _, rest = spec.partition(":")
    if backend in ("python", "mock"):
        return "in-process callable"
    if backend == "openai-compat":
        host = urlparse(rest.split("?", 1)[0]).hostname or ""
        return "local test endpoint" if host in _LOOPBACK else "model endpoint"
    return "model endpoint"


def _block(
    task: str, recs: list[Record], calib: list[Record], items: dict[str, Item]
) -> dict[str, Any]:
    spec = EVALS[task]
    status = Counter(r.status for r in recs)
    ok = [r for r in recs if r.status == "ok" and "parsed" in r.output]
    block: dict[str, Any] = {
        "task": task,
        "n_items": len(recs),
        "n_ok": len(ok),
        "n_unparseable": status.get("unparseable", 0),
        "n_error": status.get("error", 0),
        "n_timeout": status.get("timeout", 0),
        "n_lenient": sum(1 for r in ok if r.output.get("parse_mode") == "lenient"),
    }
    block["n_failed"] = block["n_error"] + block["n_timeout"]
    compute = [r.timing.get("compute_s", 0.0) for r in recs if r.status == "ok"]
    audio = [r.timing.get("audio_s", 0.0) for r in recs if r.status == "ok"]
    block["compute_s_mean"] = sum(compute) / len(compute) if compute else None
    block["rtfx"] = sum(audio) / sum(compute) if compute and sum(compute) > 0 else None
    if spec.answer == "rating":
        ratings = [float(r.metrics["rating"]) for r in ok]
        pos = [bool(r.metrics["positive"]) for r in ok]
        fixed = threshold_accuracy(ratings, pos, FIXED_RATING_THRESHOLD) if ok else accuracy([])
        block.update(
            {
                "accuracy": fixed["accuracy"],
                "ci_lo": fixed["ci_lo"],
                "ci_hi": fixed["ci_hi"],
                "n": fixed["n"],
                "k": fixed["k"],
                "accuracy_rule": f"human iff rating >= {FIXED_RATING_THRESHOLD} (fixed)",
                "auc": roc_auc(ratings, pos),
                "eer": eer(ratings, pos)["eer"] if ok else math.nan,
                "eer_threshold": eer(ratings, pos)["threshold"] if ok else math.nan,
                "mean_rating_human": _mean([x for x, p in zip(ratings, pos, strict=True) if p]),
                "mean_rating_synthetic": _mean(
                    [x for x, p in zip(ratings, pos, strict=True) if not p]
                ),
            }
        )
        if ok:
            bt = best_threshold(ratings, pos)
            best = threshold_accuracy(ratings, pos, bt)
            block["best_threshold"] = {**best, "note": "chosen on these items (optimistic)"}
        cal = [r for r in calib if r.status == "ok" and "rating" in r.metrics]
        if ok and cal and len({bool(r.metrics["positive"]) for r in cal}) == 2:
            ct = best_threshold(
                [float(r.metrics["rating"]) for r in cal],
                [bool(r.metrics["positive"]) for r in cal],
            )
            block["calibrated_threshold"] = {
                **threshold_accuracy(ratings, pos, ct),
                "n_calibration": len(cal),
            }
        block["confusion"] = confusion(
            ["human" if p else "synthetic" for p in pos],
            ["human" if x >= FIXED_RATING_THRESHOLD else "synthetic" for x in ratings],
            ["human", "synthetic"],
        )
        return block
    acc = accuracy([bool(r.metrics.get("correct")) for r in ok])
    block.update(acc)
    truths = [str(r.output["truth"]) for r in ok]
    answers = [str(r.output["parsed"]) for r in ok]
    if spec.family == "emotion":
        vocab_name = None
        labels: list[str] = sorted(set(truths))
        for r in ok:
            vocab_name = r.output.get("vocabulary") or vocab_name
        block["confusion"] = confusion(truths, answers, labels)
    elif spec.family == "speaker_match":
        block["confusion"] = confusion(truths, answers, ["same", "different"])
    else:
        block["confusion"] = confusion(truths, answers, ["A", "B"])
    scored = [r for r in ok if r.output.get("score") is not None]
    if spec.family == "speaker_match" and scored and len(scored) == len(ok):
        s = [float(r.output["score"]) for r in scored]
        pos = [r.output["truth"] == "same" for r in scored]
        e = eer(s, pos)
        block.update({"auc": roc_auc(s, pos), "eer": e["eer"], "eer_threshold": e["threshold"]})
        thr = {(r.output.get("threshold"), r.output.get("threshold_source")) for r in scored}
        if len(thr) == 1:
            value, source = thr.pop()
            block["threshold"] = {"value": value, "source": source}
        bt = best_threshold(s, pos)
        block["best_threshold"] = {
            **threshold_accuracy(s, pos, bt),
            "note": "chosen on these items (optimistic)",
        }
    return block


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def build_report(store: RunStore, seed: int = 0) -> dict[str, Any]:
    """Every number of the SU report, recomputed from ``items.jsonl`` and ``records.jsonl``."""
    info = store.info()
    config = info.get("config", {})
    items = {it.id: it for it in store.items()}
    loaded = store.load_records()
    records = [r for r in loaded.records if r.id in items and r.repeat == 0]
    sys_meta = info.get("systems", {})
    systems = [system_key(x) for x in config.get("systems") or sorted({r.system for r in records})]
    for r in records:
        if r.system not in systems:
            systems.append(r.system)
    evals = list(
        config.get("tasks") or sorted({str(it.labels.get("task")) for it in items.values()})
    )
    vocab = config.get("vocabulary", "crema-d-6")

    def task_of(r: Record) -> str:
        return str(items[r.id].labels.get("task"))

    def is_cal(r: Record) -> bool:
        return str(items[r.id].labels.get("split", "test")) == "calibration"

    out_systems: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    for spec in systems:
        recs = [r for r in records if r.system == spec]
        kind = system_kind(spec, (sys_meta.get(spec) or {}).get("kind"))
        kinds[spec] = kind
        tasks: dict[str, Any] = {}
        groups: list[dict[str, Any]] = []
        for task in evals:
            t_recs = [r for r in recs if task_of(r) == task and not is_cal(r)]
            c_recs = [r for r in recs if task_of(r) == task and is_cal(r)]
            if not t_recs:
                continue
            block = _block(task, t_recs, c_recs, items)
            tasks[task] = block
            groups.append({"group": "task", "name": task, **_summary(block)})
            by: dict[tuple[str, str], list[Record]] = defaultdict(list)
            for r in t_recs:
                labels = items[r.id].labels
                truth = r.output.get("truth")
                if truth is not None:
                    by[("truth", f"{task}:{truth}")].append(r)
                for key in GROUP_LABELS:
                    if key in labels and not isinstance(labels[key], dict | list):
                        by[(key, f"{task}:{labels[key]}")].append(r)
            for (g, name), rs in sorted(by.items()):
                groups.append({"group": g, "name": name, **_summary(_block(task, rs, [], items))})
        status = Counter(r.status for r in recs if not is_cal(r))
        overall: dict[str, Any] = {
            "n_records": sum(status.values()),
            "n_ok": status.get("ok", 0),
            "n_unparseable": status.get("unparseable", 0),
            "n_failed": status.get("error", 0) + status.get("timeout", 0),
            "n_calibration_records": sum(1 for r in recs if is_cal(r)),
        }
        if len(tasks) == 1:
            overall.update(_summary(next(iter(tasks.values()))))
        else:
            overall["note"] = "several evals in this run: see tasks (never pooled)"
        out_systems.append(
            {
                "system": spec,
                "kind": kind,
                "score_meaning": (sys_meta.get(spec) or {}).get("score_meaning"),
                "thresholds": (sys_meta.get(spec) or {}).get("thresholds"),
                "not_applicable": (sys_meta.get(spec) or {}).get("not_applicable"),
                "overall": overall,
                "tasks": tasks,
                "groups": groups,
                "unparseable_examples": [
                    {
                        "id": r.id,
                        "answer_text": str(r.output.get("answer_text", ""))[:300],
                        "reason": (r.error or {}).get("message"),
                    }
                    for r in recs
                    if r.status == "unparseable"
                ][:5],
                "error_examples": [
                    {"id": r.id, "status": r.status, **(r.error or {})}
                    for r in recs
                    if r.status in ("error", "timeout")
                ][:5],
            }
        )

    task_rows = []
    for task in evals:
        ev_spec = EVALS[task]
        answered = [s for s in out_systems if task in s["tasks"]]
        real = [s["system"] for s in answered if s["kind"] in ("specialist", "model endpoint")]
        models = [s["system"] for s in answered if s["kind"] != "specialist"]
        specialists = [s["system"] for s in answered if s["kind"] == "specialist"]
        t_items = [
            it
            for it in items.values()
            if it.labels.get("task") == task and it.labels.get("split", "test") != "calibration"
        ]
        notes = []
        if ev_spec.family in NO_SPECIALIST:
            notes.append(NO_SPECIALIST[ev_spec.family])
        if not answered:
            notes.append("No system answered this eval in this run (no real system).")
        elif not real:
            notes.append(
                "No real system answered this eval in this run (only local test endpoints or "
                "in-process callables): its numbers test the harness, not a model."
            )
        if answered and not models:
            notes.append("No audio-language model answered this eval in this run.")
        if not t_items:
            notes.append("No items for this eval in this run.")
        stand_ins = sorted(
            {str(it.labels["stand_in"]) for it in t_items if it.labels.get("stand_in")}
        )
        notes.extend(f"Data: {s}." for s in stand_ins)
        task_rows.append(
            {
                "task": task,
                "title": ev_spec.title,
                "family": ev_spec.family,
                "variant": ev_spec.variant,
                "n_test_items": len(t_items),
                "n_calibration_items": sum(
                    1
                    for it in items.values()
                    if it.labels.get("task") == task and it.labels.get("split") == "calibration"
                ),
                "systems": [s["system"] for s in answered],
                "specialists": specialists,
                "models": models,
                "no_real_system": not real,
                "notes": notes,
            }
        )

    paired = []
    for family in ("speaker_match", "emotion_compare"):
        seg, mer = f"{family}_segmented", f"{family}_merged"
        if seg not in evals or mer not in evals:
            continue
        for s in systems:

            def correct(task: str, s: str = s) -> dict[str, bool]:
                return {
                    str(items[r.id].labels.get("source_id", r.id)): bool(r.metrics.get("correct"))
                    for r in records
                    if r.system == s
                    and task_of(r) == task
                    and r.status == "ok"
                    and not is_cal(r)
                    and "correct" in r.metrics
                }

            d = paired_accuracy_diff(correct(seg), correct(mer), seed=seed)
            if not d["n"]:
                continue
            paired.append(
                {
                    "system": s,
                    "family": family,
                    "a": seg,
                    "b": mer,
                    **d,
                    "method": "accuracy(segmented) - accuracy(merged) on pairs both answered; "
                    "95 % paired bootstrap over pairs",
                }
            )

    return {
        "suite": "su",
        "kind": "su",
        "run_id": store.run_id,
        "generated_at": utc_now(),
        "metrics_version": METRICS_VERSION,
        "prompts_version": config.get("prompts_version", PROMPTS_VERSION),
        "parser_version": config.get("parser_version", PARSER_VERSION),
        "vocabulary": get_vocabulary(vocab).to_dict()
        if any(EVALS[t].family == "emotion" for t in evals)
        else None,
        "separator": SEPARATOR,
        "manifest": config.get("manifest"),
        "tasks": task_rows,
        "systems": out_systems,
        "paired_variants": paired,
        "malformed_record_lines": [list(m) for m in loaded.malformed],
        "method": (
            "accuracy over parsed answers of test items (unparseable, error and timeout "
            "counted beside it, never in n), 95 % Wilson CI; AUC (Mann-Whitney), EER from "
            "continuous scores (specialist scores, 1-5 ratings); metrics use repeat 0"
        ),
    }


def _summary(block: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "accuracy",
        "ci_lo",
        "ci_hi",
        "n",
        "k",
        "n_items",
        "n_unparseable",
        "n_failed",
        "auc",
        "eer",
    )
    return {k: block.get(k) for k in keys if k in block}


# ------------------------------------------------------------------------------ rendering
