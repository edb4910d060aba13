"""Reports of duplex runs, recomputed from the run folder alone.

Two kinds of run: recordings (``duplex score --stereo``: turn-taking from two-channel audio,
no provenance) and evidence bundles (``duplex score BUNDLE...``: see ``build_bundle_report``).
``paired_units`` feeds ``voxassay compare`` for both.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.scorecard import Scorecard
from voxassay.core.errors import InputError
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.duplex.report_changes import what_changed
from voxassay.suites.duplex.report_rows import metric_rows, min_level
from voxassay.suites.duplex.scoring.recovery import CASE_RATES
from voxassay.suites.duplex.scoring.session_score import SessionScore
from voxassay.suites.duplex.scoring.stereo import METRICS_VERSION, CallInput
from voxassay.suites.duplex.scoring.turn_metrics import TURN_METRICS

RATE_ORDER = tuple(
    m.name
    for m in catalogue.by_group("behaviour", ["rate"])
    if m.derived_from is None and "recordings" in m.modes
)
"""The turn-taking rates of recordings, in catalogue order."""


def build_scorecard(store: RunStore, **options: Any) -> Scorecard:
    """The Scorecard of a duplex run: a bundle run (``config.mode == "bundles"``) or
    recordings, checked against the Scorecard model."""
    if (store.info().get("config") or {}).get("mode") == "bundles":
        return Scorecard.model_validate(build_bundle_report(store, **options))
    return Scorecard.model_validate(build_recordings_report(store))


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    """report.json of a duplex run: its Scorecard's dump (``build_scorecard``)."""
    return build_scorecard(store, **options).dump()


def build_recordings_report(store: RunStore) -> dict[str, Any]:
    """Turn-taking metrics per system and per call, with denominators, CIs and timelines."""
    from voxassay.suites.duplex.scoring.turn_metrics import aggregate
    from voxassay.suites.duplex.scoring.turns_fdb import compat_metrics

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
            analysis = SessionScore.of(rec).analysis(rec.id, labels)
            analyses.append(analysis)
            d = analysis.to_dict()
            evidence = _recording_evidence(rec)
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
                    "acoustic": rec.output.get("acoustic"),
                    "problems": rec.output.get("problems") or [],
                    "compat": compat_metrics(analysis),
                    "evidence_level": evidence.get("level"),
                    "declared_level": evidence.get("declared_level"),
                }
            )
        status = Counter(r.status for r in recs)
        overall: dict[str, Any] = aggregate(analyses) if analyses else {"n_calls": 0}
        overall.pop("calls", None)
        if analyses:
            overall["hours"] = session_hours(a.duration_s for a in analyses)
            add_per_hour(overall["rates"], overall["hours"])
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
        "evidence": _recordings_evidence(loaded.records),
        "systems": systems_out,
        "sessions": calls_out,
        "rate_order": list(RATE_ORDER),
        "malformed_record_lines": [{"line": ln, "reason": why} for ln, why in loaded.malformed],
    }


def _recording_evidence(rec: Record) -> dict[str, Any]:
    """A recording's evidence as its record stores it; records written before sidecars
    existed count as L2, provenance unknown."""
    from voxassay.contracts.duplex.provenance import recording_evidence

    ev = rec.output.get("evidence")
    return dict(ev) if isinstance(ev, dict) else recording_evidence([], None).to_dict()


def _recordings_evidence(records: Sequence[Record]) -> dict[str, Any]:
    """The run's evidence block: per call the derived level (L2: fixed audio) and, where a
    ``provenance.json`` declares how it was captured, the declared level; run-wide the
    weakest of each."""
    ok = [r for r in records if r.status == "ok"]
    details = {r.id: _recording_evidence(r) for r in ok}
    derived = {sid: d.get("level") for sid, d in details.items()}
    declared = {sid: d.get("declared_level") or d.get("level") for sid, d in details.items()}
    n_declared = sum(1 for d in details.values() if d.get("basis") == "declared")
    run_level = min_level(derived.values()) if derived else None
    note = (
        f"{len(ok)} recording(s) scored from their audio (acoustic events, not agent-reported "
        f"events): fixed audio counts as {run_level}."
        if ok
        else "No recording was scored: no evidence level."
    )
    if n_declared:
        note += (
            f" {n_declared} recording(s) declare their provenance in a provenance.json "
            f"sidecar: declared level {min_level(declared.values())} (a gate counts it only "
            "with evidence: declared)."
        )
    if len(ok) > n_declared:
        note += f" {len(ok) - n_declared} recording(s) have no sidecar: provenance unknown."
    return {
        "level": run_level,
        "declared_level": min_level(declared.values()) if n_declared else None,
        "sessions": derived,
        "declared_sessions": {
            sid: declared[sid] for sid, d in details.items() if d.get("basis") == "declared"
        },
        "details": details,
        "counts": dict(sorted(Counter(str(v) for v in derived.values()).items())),
        "status": (
            "derived (fixed audio); declared where a sidecar states the provenance"
            if n_declared
            else "provenance unknown (fixed audio)"
        ),
        "note": note,
    }


# =========================================================================== bundle runs

AFTER_BREAK_RATES = CASE_RATES
"""Behaviour rates of bundle runs computed per case by ``recovery.py`` (not by the turns)."""
BUNDLE_RATE_ORDER = tuple(
    m.name for m in catalogue.by_group("behaviour", ["rate"]) if m.derived_from is None
)
PER_HOUR_RATES = tuple(
    str(m.derived_from).split(":", 1)[1]
    for m in catalogue.CATALOGUE
    if (m.derived_from or "").startswith("per_hour:")
)
"""Named event rates (k counts unwanted events) also given as events per hour of session audio."""
TASK_CHECKS = tuple(m.name for m in catalogue.by_group("task", ["check"]))
"""Task checks reported in the *task* group."""
SIDE_EFFECT_CHECKS = tuple(m.name for m in catalogue.by_group("side_effects", ["check"]))
"""Task checks reported in the *side effects* group, beside the counts."""
SIDE_EFFECT_COUNTS = tuple(m.name for m in catalogue.by_group("side_effects", ["count"]))
STRATA = ("route", "device", "language", "category", "system_version")
KEY_FAILURES = 12
"""Failures shown in full (slices, players, timeline) in the report."""
FAILURE_KIND_ORDER = {"task": 0, "recovery": 1}
"""Causal slices' kinds shown first among the key failures, in this order; the other kinds
(``history``, ``behaviour``) follow together, by system, session and time."""
SUBJECTIVE_FILE = "subjective.json"


def _task_result(d: Mapping[str, Any]) -> Any:
    """A ``task.TaskResult`` rebuilt from its ``to_dict()``."""
    from voxassay.suites.duplex.scoring.task_context import TaskCheck, TaskResult

    checks = [
        TaskCheck(
            name=c["name"],
            passed=c.get("passed"),
            value=c.get("value"),
            expected=c.get("expected"),
            evidence=list(c.get("evidence") or []),
            reason=str(c.get("reason") or ""),
            unscored=bool(c.get("unscored")),
            details=dict(c.get("details") or {}),
        )
        for c in d.get("checks") or []
    ]
    return TaskResult(
        scenario_id=str(d.get("scenario_id")),
        session_id=d.get("session_id"),
        checks=checks,
        duplicate_side_effects=d.get("duplicate_side_effects"),
        stale_deliveries=d.get("stale_deliveries"),
        writes_after_stop=d.get("writes_after_stop"),
    )


def _task_block(recs: Sequence[Record]) -> dict[str, Any]:
    """``task.aggregate_tasks`` over the sessions with a task result, plus per check the
    session refs behind it (``denominator``: ``<session>/<check>`` of every scored session;
    ``events``: the passed ones) and per count the sessions it was counted in."""
    from voxassay.suites.duplex.scoring.task import aggregate_tasks

    scored = [r for r in recs if r.output.get("task")]
    out = aggregate_tasks([_task_result(r.output["task"]) for r in scored])
    for name, entry in out["checks"].items():
        den, hit = [], []
        for r in scored:
            c = next((c for c in r.output["task"]["checks"] if c["name"] == name), None)
            if c is None or c.get("passed") is None:
                continue
            den.append(f"{r.id}/{name}")
            if c["passed"]:
                hit.append(f"{r.id}/{name}")
        entry.update(denominator=den, events=hit, value=entry["rate"], k=entry["passed"])
        entry["definition"] = (
            "sessions where the check passed / sessions where it applies and was scored "
            "(not applicable and unscored sessions counted apart, never as failures)"
        )
    for name, entry in out["counts"].items():
        counted = [r for r in scored if r.output["task"].get(name) is not None]
        entry["sessions"] = [r.id for r in counted]
        entry["events"] = [f"{r.id}/{name}" for r in counted if r.output["task"][name]]
        entry["definition"] = f"sum of {name} over the sessions with a tool audit"
    out["sessions_without_task"] = len(recs) - len(scored)
    return out


def after_break_rates(recs: Sequence[Record]) -> dict[str, Any]:
    """``history_consistency`` and ``recovery_accuracy`` pooled over ``recs`` from the cases
    each record keeps (``recovery.pool_cases``: k / n with a Wilson interval, the assessable
    refs, the not-assessable refs with their reasons). Sessions scored before these metrics
    existed hold no cases and add nothing."""
    from voxassay.suites.duplex.scoring.history import HISTORY_DEFINITION
    from voxassay.suites.duplex.scoring.recovery import RECOVERY_DEFINITION, pool_cases

    defs = {"history_consistency": HISTORY_DEFINITION, "recovery_accuracy": RECOVERY_DEFINITION}
    out = {}
    for name in AFTER_BREAK_RATES:
        per = {r.id: (r.output.get(name) or {}).get("cases") or [] for r in recs}
        entry = pool_cases(name, per, defs[name])
        entry.pop("name", None)
        entry["denominator_text"] = "n = " + catalogue.denominator(name)
        entry["sessions_without_cases"] = sum(1 for r in recs if name not in r.output)
        out[name] = entry
    return out


def session_hours(durations: Iterable[Any]) -> float:
    """Hours of session audio: the sum of the sessions' ``duration_s`` (missing ones count 0)."""
    return sum(float(d) for d in durations if isinstance(d, int | float)) / 3600.0


def add_per_hour(rates: Mapping[str, Any], hours: float) -> None:
    """Give each of ``PER_HOUR_RATES`` its events per hour of session audio, in place:
    ``per_hour = k / hours`` with the hours stated, and None when the rate has no
    opportunity (n = 0) or there is no audio: the rule of ``gates`` ``per_hour:`` metrics."""
    for name in PER_HOUR_RATES:
        e = rates.get(name)
        if not isinstance(e, dict):
            continue
        k, n = int(e.get("k") or 0), int(e.get("n") or 0)
        e["per_hour"] = k / hours if n and hours > 0 else None
        e["hours"] = round(hours, 6)
        e["per_hour_definition"] = (
            "k / hours of session audio (sum of the scored sessions' duration_s); n stays the "
            "opportunities: none when n = 0"
        )


def _ledger_latencies(recs: Sequence[Record], n_boot: int) -> dict[str, Any]:
    """The ledger latency pairs of ``recs`` summarised (``metrics.LatencyTable``) overall and
    per stratum, with every pair as a ``values`` entry (censored ones with ``value_ms`` None)."""
    from voxassay.suites.duplex.scoring.latency_table import LatencyTable

    pairs = [p for r in recs for p in SessionScore.of(r).latency_pairs(r.id)]
    table = LatencyTable().extend(pairs)
    summary = table.summary(STRATA, n_boot=n_boot)
    out: dict[str, Any] = {}
    for name, entry in summary["metrics"].items():
        out[name] = {
            **entry["all"],
            "values": [
                {
                    "ref": p.ref,
                    "session": p.session_id,
                    "value_ms": p.value_ms,
                    "censored": p.censored,
                    "censored_after_ms": p.censored_after_ms,
                }
                for p in pairs
                if p.metric == name
            ],
            "by": entry["by"],
            "definition": entry.get("description", ""),
            "start": entry.get("start"),
            "end": entry.get("end"),
            "censored_examples": entry.get("censored_examples", []),
            "source": "ledger pairs (events.jsonl + acoustic events derived from the audio)",
        }
    return out


def _turn_latencies(analyses: Sequence[Any]) -> dict[str, Any]:
    """The turn layer's latencies over ``analyses`` (none: no latencies)."""
    from voxassay.suites.duplex.scoring.turn_metrics import aggregate

    return aggregate(analyses)["latencies"] if analyses else {}


def contended_session(r: Record) -> bool:
    """Whether the session ran contended (``core.cpu``: its process waited for a CPU over a
    tenth of its CPU time while the agent's compute was charged to the virtual clock)."""
    return bool(((r.output or {}).get("session_stats") or {}).get("contended"))


def _contended_block(recs: Sequence[Record], n_boot: int) -> dict[str, Any]:
    """The contended sessions and their latencies, reported apart: in no headline and no
    gate."""
    return {
        "n_sessions": len(recs),
        "sessions": [r.id for r in recs],
        "latencies": {
            name: {k: v for k, v in entry.items() if k not in ("values", "by")}
            for name, entry in _ledger_latencies(recs, n_boot).items()
        },
        "note": "these sessions' process waited for a CPU over a tenth of its CPU time while "
        "the agent's compute was charged to the virtual clock: their latencies "
        "are this machine's load as much as the agent's, so they are reported here, apart, "
        "and feed no headline and no gate; their turn decisions still count",
    }


def system_block(
    spec: str, recs: Sequence[Record], levels: Mapping[str, str], n_boot: int
) -> dict[str, Any]:
    from voxassay.suites.duplex.scoring.turn_metrics import aggregate

    ok = [r for r in recs if r.status == "ok"]
    analyses = [SessionScore.of(r).analysis(r.id) for r in ok]
    overall: dict[str, Any] = (
        aggregate(analyses) if analyses else {"rates": {}, "latencies": {}, "n_calls": 0}
    )
    contended = {r.id for r in ok if contended_session(r)}
    timed = [r for r in ok if r.id not in contended]
    if contended:  # their latencies are the machine's load as much as the agent's: apart
        overall["latencies"] = _turn_latencies(
            [a for r, a in zip(ok, analyses, strict=True) if r.id not in contended]
        )
        overall["contended"] = _contended_block([r for r in ok if r.id in contended], n_boot)
    overall.pop("calls", None)
    overall["n_sessions"] = len(ok)
    overall["rates"].update(after_break_rates(ok))
    overall["hours"] = session_hours(r.output.get("duration_s") for r in ok)
    add_per_hour(overall["rates"], overall["hours"])
    for name in TURN_METRICS:
        if name in overall["latencies"]:
            overall["latencies"][name]["source"] = "acoustic turns (turns.analyze_call)"
    ledger = _ledger_latencies(timed, n_boot)
    overall["latencies"] = {**ledger, **overall["latencies"]}
    task = _task_block(ok)
    overall["task"] = task
    by_key = dict(zip([r.id for r in ok], analyses, strict=True))
    groups: list[dict[str, Any]] = []
    for field_name in STRATA:
        values = sorted(
            {str((r.output.get("meta") or {}).get(field_name) or "unknown") for r in ok}
        )
        for value in values:
            sub = [
                r
                for r in ok
                if str((r.output.get("meta") or {}).get(field_name) or "unknown") == value
            ]
            agg = aggregate([by_key[r.id] for r in sub])
            agg["rates"].update(after_break_rates(sub))
            add_per_hour(agg["rates"], session_hours(r.output.get("duration_s") for r in sub))
            sub_task = _task_block(sub)
            lat = {
                name: entry["by"].get(field_name, {}).get(value)
                for name, entry in ledger.items()
                if entry["by"].get(field_name, {}).get(value) is not None
            }
            turn_lat = (
                _turn_latencies([by_key[r.id] for r in sub if r.id not in contended])
                if contended
                else agg["latencies"]
            )
            lat.update({k: v for k, v in turn_lat.items() if k in TURN_METRICS})
            groups.append(
                {
                    "group": field_name,
                    "name": value,
                    "n_sessions": len(sub),
                    "sessions": [r.id for r in sub],
                    # task check pass rates sit beside the behaviour rates so that split
                    # gates find them by name, as in overall.task.checks
                    "rates": {**agg["rates"], **sub_task["checks"]},
                    "latencies": lat,
                    "task": sub_task,
                }
            )
    status = Counter(r.status for r in recs)
    block = {
        "system": spec,
        "overall": overall,
        "groups": groups,
        "status_counts": dict(status),
        "failures": [
            {
                "id": r.id,
                "status": r.status,
                **(r.error or {}),
                "bundle": r.output.get("bundle"),
                "problems": r.output.get("problems") or [],
            }
            for r in recs
            if r.status != "ok"
        ],
    }
    block["metric_rows"] = metric_rows(overall, levels)
    return block


def _session_entry(r: Record, items: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the report's ``sessions`` list (gates read ``id``, ``bundle``,
    ``evidence_level`` and ``duration_s``)."""
    o = r.output
    item = items.get(r.id)
    meta = o.get("meta") or {}
    ev = o.get("evidence") or {}
    sc = o.get("scenario") or {}
    m = r.metrics or {}
    return {
        "id": r.id,
        "system": r.system,
        "repeat": r.repeat,
        "unit": o.get("unit") or (item.meta.get("unit") if item else r.id),
        "status": r.status,
        "error": r.error,
        "bundle": o.get("bundle") or (item.meta.get("bundle") if item else None),
        "session_id": o.get("session_id"),
        "scenario": sc.get("id") or (item.labels.get("scenario") if item else None),
        "scenario_version": sc.get("version"),
        "category": meta.get("category") or sc.get("category"),
        "route": meta.get("route"),
        "device": meta.get("device"),
        "language": meta.get("language"),
        "system_version": meta.get("system_version"),
        "system_config": (o.get("system") or {}).get("config"),
        "evidence_level": ev.get("level"),
        "redacted": ev.get("redacted"),
        "raw_audio": ev.get("raw_audio"),
        "duration_s": o.get("duration_s"),
        "behaviour_accuracy": m.get("behaviour_accuracy"),
        "task_passed": m.get("task_passed"),
        "failures": m.get("failures"),
        "integrity": o.get("integrity"),
        "problems": o.get("problems") or [],
        "notes": o.get("notes") or [],
        "ledger": o.get("ledger"),
    }


def _composition(sessions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a run was made of: systems with versions and configurations, the scenario set
    (id -> versions), the category mix (scored sessions per category)."""
    ok = [s for s in sessions if s["status"] == "ok"]
    systems: dict[str, dict[str, Any]] = {}
    for s in ok:
        entry = systems.setdefault(s["system"], {"versions": [], "configs": []})
        if s["system_version"] and s["system_version"] not in entry["versions"]:
            entry["versions"].append(s["system_version"])
        if s["system_config"] is not None and s["system_config"] not in entry["configs"]:
            entry["configs"].append(s["system_config"])
    scenarios: dict[str, list[int]] = {}
    for s in ok:
        if s["scenario"]:
            vs = scenarios.setdefault(str(s["scenario"]), [])
            if s["scenario_version"] is not None and s["scenario_version"] not in vs:
                vs.append(s["scenario_version"])
    return {
        "systems": systems,
        "system_versions": sorted({str(s["system_version"]) for s in ok if s["system_version"]}),
        "scenarios": {k: sorted(v) for k, v in sorted(scenarios.items())},
        "categories": dict(sorted(Counter(str(s["category"] or "unknown") for s in ok).items())),
        "sessions": len(ok),
    }


def _key_failures(
    recs: Sequence[Record], limit: int = KEY_FAILURES
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Failures (task and side-effect checks first, then recovery accuracy cases, then history
    consistency cases and turn decisions: ``FAILURE_KIND_ORDER``), the first ``limit`` with
    their causal slices; the layer counts over all; timelines of the sessions shown."""
    found: list[dict[str, Any]] = []
    for r in recs:
        if r.status != "ok":
            continue
        for sl in r.output.get("slices") or []:
            found.append(
                {"system": r.system, "session": r.id, "bundle": r.output.get("bundle"), **sl}
            )
    found.sort(
        key=lambda f: (
            FAILURE_KIND_ORDER.get(str(f.get("kind")), len(FAILURE_KIND_ORDER)),
            f["system"],
            f["session"],
            f.get("time_s") if f.get("time_s") is not None else math.inf,
        )
    )
    layers = Counter(str(f.get("layer") or "unknown") for f in found)
    summary = {
        "n": len(found),
        "by_layer": dict(sorted(layers.items())),
        "by_check": dict(sorted(Counter(str(f.get("check")) for f in found).items())),
        "unknown_root_cause": sum(1 for f in found if f.get("layer") in (None, "unknown")),
    }
    shown = found[:limit]
    timelines: dict[str, Any] = {}
    by_id = {r.id: r for r in recs}
    for f in shown:
        r = by_id[f["session"]]
        if r.id in timelines:
            continue
        o = r.output
        folder = o.get("bundle")
        timelines[r.id] = {
            "duration_s": o.get("duration_s"),
            "segments": o.get("segments"),
            "markers": o.get("markers") or [],
            "raw_audio": (o.get("evidence") or {}).get("raw_audio"),
            "bundle": folder,
        }
    return shown, summary, timelines


def subjective_block(path: Path, levels: Mapping[str, str]) -> dict[str, Any]:
    """Pairwise preferences from ``subjective.json`` in the run folder, if present.

    File: ``{"study": NAME, "preferences": [{"a": SYSTEM_A, "b": SYSTEM_B, "winner": "a" |
    "b" | "tie" | SYSTEM_A | SYSTEM_B, "sessions": [SESSION_A, SESSION_B] (optional),
    "rater": ID (optional)}]}`` (a bare list of preferences is accepted too).

    Per unordered pair of systems (``a`` < ``b`` alphabetically): win rate of ``a`` =
    wins of a / (wins of a + wins of b), ties excluded from the denominator and counted
    apart; 95 % Wilson interval. Subjective results are their own group: they never override
    event or business truth. The level is the weakest level of the rated sessions when every
    preference names sessions of this run; otherwise none applies.
    """
    from voxassay.stats.intervals import wilson_interval

    base: dict[str, Any] = {
        "file": SUBJECTIVE_FILE,
        "never_overrides": "subjective preferences are reported beside speed, behaviour, task "
        "and side effects; they never override event or business truth",
    }
    if not path.is_file():
        return {**base, "status": "no study linked", "pairs": [], "level": None}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {**base, "status": "invalid", "problems": [f"{path}: {exc}"], "pairs": []}
    prefs = data.get("preferences") if isinstance(data, dict) else data
    if not isinstance(prefs, list):
        return {
            **base,
            "status": "invalid",
            "problems": [f"{path}: no preferences list"],
            "pairs": [],
        }
    problems: list[str] = []
    tally: dict[tuple[str, str], Counter[str]] = {}
    rated: list[str] = []
    all_linked = True
    for i, p in enumerate(prefs):
        if not isinstance(p, dict) or not {"a", "b", "winner"} <= set(p):
            problems.append(f"{path}: preferences[{i}] needs a, b and winner")
            continue
        a, b, w = str(p["a"]), str(p["b"]), str(p["winner"])
        if a == b:
            problems.append(f"{path}: preferences[{i}] compares {a!r} with itself")
            continue
        side = {"a": a, "b": b, a: a, b: b, "tie": "tie"}.get(w)
        if side is None:
            problems.append(f"{path}: preferences[{i}]: winner {w!r} is not a, b or tie")
            continue
        lo, hi = sorted((a, b))
        tally.setdefault((lo, hi), Counter())[side] += 1
        sess = p.get("sessions")
        if isinstance(sess, list) and sess and all(str(s) in levels for s in sess):
            rated += [str(s) for s in sess]
        else:
            all_linked = False
    pairs = []
    for (lo, hi), c in sorted(tally.items()):
        n = c[lo] + c[hi]
        ci = wilson_interval(c[lo], n) if n else (None, None)
        pairs.append(
            {
                "a": lo,
                "b": hi,
                "n": n,
                "wins_a": c[lo],
                "wins_b": c[hi],
                "ties": c["tie"],
                "win_rate_a": c[lo] / n if n else None,
                "ci_low": ci[0] if n else None,
                "ci_high": ci[1] if n else None,
                "definition": "wins of a / (wins of a + wins of b); ties counted apart; "
                "95% Wilson interval",
            }
        )
    level = min_level(levels[s] for s in rated) if all_linked and rated else None
    return {
        **base,
        "status": "linked",
        "study": data.get("study") if isinstance(data, dict) else None,
        "pairs": pairs,
        "problems": problems,
        "level": level,
        "level_note": "weakest level of the rated sessions"
        if level
        else "the preferences do not all name sessions of this run: no evidence level applies",
    }


def build_bundle_report(
    store: RunStore, *, n_boot: int = 1000, baseline: str | Path | None = None, **_: Any
) -> dict[str, Any]:
    """The report of a bundle run, recomputed from its records.

    Per system: ``overall`` with ``latencies`` (ledger pairs and acoustic turn latencies:
    n, n_censored, P50/P95/P99 with bootstrap CIs over sessions, every pair in ``values``,
    strata in ``by``), ``rates`` (behaviour, each ``k / n`` with its denominator refs and a
    Wilson CI), ``task`` (``aggregate_tasks`` with session refs) and ``counts`` (side
    effects); ``groups`` per value of route, device, language, category and system version;
    ``metric_rows`` labelled VERIFIED at the weakest level of the sessions behind each,
    IMPLEMENTED (n = 0) or UNKNOWN. Run-wide: the ``evidence`` block (run level = the weakest
    session level; per-session levels and reasons), the detector and its measured error, the
    sessions, key failures with their causal slices, the subjective group and, with a
    baseline (``baseline`` or the run's ``config.baseline``), what changed.
    """
    info = store.info()
    config = info.get("config") or {}
    items = {it.id: it for it in store.items()}
    loaded = store.load_records()
    records = sorted(loaded.records, key=lambda r: (r.system, r.id, r.repeat))
    ok = [r for r in records if r.status == "ok"]
    levels = {r.id: str((r.output.get("evidence") or {}).get("level")) for r in ok}
    specs = list(config.get("systems") or sorted({r.system for r in records}))
    specs += sorted({r.system for r in records} - set(specs))
    systems_out = [
        system_block(spec, [r for r in records if r.system == spec], levels, n_boot)
        for spec in specs
    ]
    sessions = [_session_entry(r, items) for r in records]
    key_failures, failure_summary, timelines = _key_failures(ok)
    run_level = min_level(levels.values())
    redacted = sorted(r.id for r in ok if (r.output.get("evidence") or {}).get("redacted"))
    detector = dict(config.get("detector") or {})
    feature_detectors = sorted(
        {
            str(r.output.get("detector"))
            for r in ok
            if r.output.get("segments_source") != "audio"
            and r.output.get("detector") != detector.get("name")
        }
    )
    report: dict[str, Any] = {
        "suite": "duplex",
        "mode": "bundles",
        "metrics_version": config.get("metrics_version"),
        "versions": config.get("versions"),
        "run_id": info.get("run_id", store.run_id),
        "generated_at": utc_now(),
        "detector": detector,
        "detector_notes": (
            [
                "redacted sessions bring segments from another detector: "
                + ", ".join(feature_detectors)
            ]
            if feature_detectors
            else []
        ),
        "evidence": {
            "level": run_level,
            "sessions": levels,
            "details": {
                r.id: {
                    "level": (r.output.get("evidence") or {}).get("level"),
                    "reasons": (r.output.get("evidence") or {}).get("reasons") or [],
                    "redacted": bool((r.output.get("evidence") or {}).get("redacted")),
                    "raw_audio": (r.output.get("evidence") or {}).get("raw_audio"),
                }
                for r in ok
            },
            "counts": dict(sorted(Counter(levels.values()).items())),
            "redacted_sessions": redacted,
            "status": "derived from each bundle's manifest provenance (never self-declared)",
            "note": (
                f"Run level {run_level}: the weakest of {len(levels)} session level(s); "
                "each metric row is VERIFIED at the weakest level of the sessions behind it."
                if run_level
                else "No session was scored: no evidence level."
            )
            + (
                f" {len(redacted)} session(s) are redacted: raw audio dropped, features kept."
                if redacted
                else ""
            ),
        },
        "systems": systems_out,
        "sessions": sessions,
        "composition": _composition(sessions),
        "key_failures": key_failures,
        "failure_summary": failure_summary,
        "timelines": timelines,
        "subjective": subjective_block(store.path / SUBJECTIVE_FILE, levels),
        "rate_order": list(BUNDLE_RATE_ORDER),
        "groups_of_metrics": {
            "speed": "latency pairs (ledger) and acoustic turn latencies",
            "behaviour": "turn decisions against scenario labels",
            "task": ", ".join(TASK_CHECKS),
            "side_effects": ", ".join([*SIDE_EFFECT_CHECKS, *SIDE_EFFECT_COUNTS]),
            "subjective": "pairwise preferences (subjective.json)",
        },
        "malformed_record_lines": [{"line": ln, "reason": why} for ln, why in loaded.malformed],
        "harness_self_check": _harness_self_check(info, records),
    }
    base_path = baseline or config.get("baseline")
    if base_path:
        try:
            base = _baseline_report(Path(base_path))
        except InputError as exc:
            report["what_changed"] = {"baseline": str(base_path), "error": str(exc)}
        else:
            report["what_changed"] = what_changed(report, base, str(base_path), n_boot=n_boot)
    return report


def _baseline_report(path: Path) -> dict[str, Any]:
    from voxassay.core.errors import InputError

    store = RunStore.open(path)
    info = store.info()
    if info.get("suite") != "duplex":
        raise InputError(f"{path} is a {info.get('suite')!r} run, not a duplex run")
    rp = store.path / "report.json"
    if rp.is_file():
        try:
            data: dict[str, Any] = json.loads(rp.read_text(encoding="utf-8"))
            return data
        except json.JSONDecodeError as exc:
            raise InputError(f"{rp}:{exc.lineno}: malformed JSON: {exc.msg}") from None
    if (info.get("config") or {}).get("mode") == "bundles":
        return build_bundle_report(store, baseline=None)
    return build_recordings_report(store)


def _harness_self_check(info: Mapping[str, Any], records: Sequence[Record]) -> dict[str, Any]:
    """Frame pacing and loopback latency of the harness (``live.selfcheck.report_block``)."""
    from voxassay.suites.duplex.live.selfcheck import report_block

    return report_block(info, records)


# --------------------------------------------------------------------------- baseline


# --------------------------------------------------------------------------- compare
