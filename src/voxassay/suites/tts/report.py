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
(:func:`voxassay.suites.tts.profile.infer_primary`); the report says which.

There is deliberately no overall score: per system an ``overall`` block of counts (items,
errors by kind, unscored and unavailable measures) and per dimension / eval scores with CIs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from voxassay.core.numbers import finite as _f
from voxassay.core.runstore import RunStore, utc_now
from voxassay.stats.intervals import DEFAULT_BOOT
from voxassay.suites.tts import profile as pf
from voxassay.suites.tts.report_blocks import (
    _identity_block,
    _instructions_block,
    _judge_block,
    _load_human,
    _longform_block,
    _unavailable,
    _worst,
    raw_metrics,
    unavailable_statements,
)
from voxassay.suites.tts.report_scorer import (
    ARTIFACT_RULES,
    DIMENSION_ORDER,
    HUMAN_FILE,
    REPORT_VERSION,
    TOP_K,
    VALIDATION_FILE,
    WORST_ITEMS,
    _describe,
    _eval_defs,
    _read_json,
    _SystemScorer,
    accepts_instructions,
)


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
        from voxassay.suites.tts.metrics import METRICS_VERSION

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
    decided = [d for d in dims if tops[d]["leaders"]]
    if not decided:
        return (
            "No dimension has a leader: the intervals are not estimable (fewer than 2 items) "
            "or nothing scored above 0."
        )
    undecided = [d for d in dims if d not in decided]
    aside = (
        f" ({', '.join(undecided)}: no leader, interval not estimable or nothing above 0)"
        if undecided
        else ""
    )
    everywhere = [s for s in systems if all(s in tops[d]["leaders"] for d in decided)]
    if everywhere:
        return (
            f"{', '.join(everywhere)} lead(s) or tie(s) for first (CI overlap) in every one of "
            f"the {len(decided)} dimensions where a leader can be named{aside}."
        )
    parts = [f"{d}: {', '.join(tops[d]['leaders'])}" for d in decided]
    return (
        "No system leads everywhere. Leaders (tied by CI overlap) per dimension: "
        + "; ".join(parts)
        + aside
        + "."
    )


__all__ = [
    "ARTIFACT_RULES",
    "accepts_instructions",
    "build_report",
    "lead_statement",
    "raw_metrics",
    "unavailable_statements",
]
