"""Report of a duplex run scored from recordings: recomputed from the run folder alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from voxeval.core.runstore import RunStore, utc_now
from voxeval.suites.duplex.stereo import METRICS_VERSION, CallInput, analyze_output

RATE_ORDER = (
    "correct_yield_rate",
    "missed_interruption_rate",
    "false_yield_rate",
    "talk_over_rate",
    "premature_takeover_rate",
    "false_silence_rate",
    "bystander_false_response_rate",
    "ambient_false_activation_rate",
)


def build_report(store: RunStore, **_: Any) -> dict[str, Any]:
    """Turn-taking metrics per system and per call, with denominators, CIs and timelines."""
    from voxeval.suites.duplex.turns import aggregate, compat_metrics

    info = store.info()
    config = info.get("config", {})
    items = {it.id: it for it in store.items()}
    loaded = store.load_records()
    systems_out = []
    calls_out = []
    for spec in config.get("systems") or sorted({r.system for r in loaded.records}):
        recs = [r for r in loaded.records if r.system == spec]
        analyses = []
        for rec in recs:
            if rec.status != "ok":
                continue
            labels = CallInput.from_item(items[rec.id]).labels if rec.id in items else []
            analysis = analyze_output(rec.id, rec.output, labels)
            analyses.append(analysis)
            d = analysis.to_dict()
            calls_out.append(
                {
                    "system": spec,
                    "id": rec.id,
                    "audio": (items[rec.id].audio if rec.id in items else None),
                    "duration_s": d["duration_s"],
                    "user_ref_level_dbfs": d["user_ref_level_dbfs"],
                    "expected_action_source": d["expected_action_source"],
                    "labels": d["labels"],
                    "turns": d["turns"],
                    "events": d["events"],
                    "takeovers": d["takeovers"],
                    "segments": rec.output.get("segments"),
                    "compat": compat_metrics(analysis),
                }
            )
        status = Counter(r.status for r in recs)
        overall = aggregate(analyses) if analyses else {"n_calls": 0}
        overall.pop("calls", None)
        systems_out.append(
            {
                "system": spec,
                "overall": overall,
                "groups": [],
                "status_counts": dict(status),
                "failures": [
                    {"id": r.id, "status": r.status, **(r.error or {})}
                    for r in recs
                    if r.status != "ok"
                ],
            }
        )
    detector = config.get("detector", {})
    return {
        "suite": "duplex",
        "metrics_version": METRICS_VERSION,
        "run_id": info.get("run_id", store.run_id),
        "generated_at": utc_now(),
        "mode": config.get("mode", "stereo"),
        "detector": detector,
        "evidence": {
            "level": None,
            "status": "provenance not declared",
            "note": "Recordings scored without a bundle manifest: how they were captured is "
            "unknown, so no evidence level is derived. Metric rows are measured from these "
            "recordings' audio (acoustic events), not from agent-reported events.",
        },
        "systems": systems_out,
        "calls": calls_out,
        "rate_order": list(RATE_ORDER),
        "malformed_record_lines": [{"line": ln, "reason": why} for ln, why in loaded.malformed],
    }
