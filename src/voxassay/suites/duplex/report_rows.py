"""The report's metric rows: one per catalogue metric, labelled VERIFIED at the weakest evidence level of the sessions behind it, IMPLEMENTED when this run holds no evidence for it (n = 0), NOT ASSESSABLE when no scorer computes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from voxassay.contracts.duplex import catalogue
from voxassay.suites.duplex.scoring.recovery import CASE_RATES as AFTER_BREAK_RATES

__all__ = ["LEVELS", "metric_rows"]


LEVELS = ("L1", "L2", "L3", "L4")


def min_level(levels: Iterable[str | None]) -> str | None:
    """The weakest level, or None when any is unknown or there are none."""
    lv = list(levels)
    if not lv or any(x not in LEVELS for x in lv):
        return None
    return min(lv, key=lambda x: LEVELS.index(str(x)))


def _session(ref: str) -> str:
    return ref.split("/", 1)[0]


def _row(
    group: str,
    name: str,
    kind: str,
    n: int,
    sessions: Iterable[str],
    levels: Mapping[str, str],
    summary: str,
    note: str = "",
) -> dict[str, Any]:
    """One labelled metric row: VERIFIED at the weakest level of the sessions behind it,
    IMPLEMENTED when nothing in this run measured it (n = 0)."""
    sess = sorted(set(sessions))
    if n == 0 or not sess:
        label, level = "IMPLEMENTED", None
        note = note or "voxassay computes it; this run holds no evidence for it (n = 0)"
    else:
        level = min_level(levels.get(s) for s in sess)
        label = "VERIFIED" if level else "UNKNOWN"
        if level is None:
            note = note or "a session behind it has no derived evidence level"
    return {
        "group": group,
        "name": name,
        "kind": kind,
        "label": label,
        "level": level,
        "label_text": f"VERIFIED at {level}" if label == "VERIFIED" else label,
        "n": n,
        "n_sessions": len(sess),
        "summary": summary,
        "note": note,
    }


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def metric_rows(overall: Mapping[str, Any], levels: Mapping[str, str]) -> list[dict[str, Any]]:
    """A row for every metric of the catalogue (derived ones are shown inside their source's
    row), labelled (see ``_row``), in catalogue order: speed, behaviour, task, side effects. A
    metric no voxassay scorer computes is a NOT ASSESSABLE row, never a 0."""
    from voxassay.suites.duplex.scoring.implemented import implemented_metrics

    computed = {name for names in implemented_metrics().values() for name in names}
    rows: list[dict[str, Any]] = []
    lat = overall.get("latencies") or {}
    rates = overall.get("rates") or {}
    task = overall.get("task") or {}
    checks = task.get("checks") or {}
    for m in catalogue.CATALOGUE:
        if m.derived_from is not None:
            continue
        if m.name not in computed:
            rows.append(_not_assessable_row(m))
        elif m.kind == "latency":
            rows.append(_latency_row(m, lat.get(m.name) or {}, levels))
        elif m.kind == "rate":
            rows.append(_rate_row(m, rates.get(m.name) or {}, levels))
        elif m.kind == "check":
            rows.append(_check_row(m, checks.get(m.name) or {}, levels))
        elif m.kind == "count":
            rows.append(_count_row(m, (task.get("counts") or {}).get(m.name) or {}, levels))
    return rows


def _not_assessable_row(m: catalogue.MetricDef) -> dict[str, Any]:
    return {
        "group": m.group,
        "name": m.row_name,
        "kind": m.kind,
        "label": "UNKNOWN",
        "level": None,
        "label_text": "NOT ASSESSABLE",
        "n": 0,
        "n_sessions": 0,
        "summary": "–",
        "note": "in the metric catalogue, but no voxassay scorer computes it yet",
    }


def _latency_row(
    m: catalogue.MetricDef, e: Mapping[str, Any], levels: Mapping[str, str]
) -> dict[str, Any]:
    vals = e.get("values") or []
    summary = (
        f"P50 {_fmt(e.get('p50'))} ms, P95 {_fmt(e.get('p95'))} ms, "
        f"{e.get('n_censored', 0)} censored"
        if e.get("n")
        else "no pairs"
    )
    return _row(
        m.group,
        m.name,
        "latency",
        int(e.get("n") or 0),
        [str(v.get("session") or _session(str(v.get("ref")))) for v in vals],
        levels,
        summary,
    )


def _rate_row(
    m: catalogue.MetricDef, e: Mapping[str, Any], levels: Mapping[str, str]
) -> dict[str, Any]:
    summary = f"{e.get('k', 0)}/{e.get('n', 0)}" + (
        f" = {e['value']:.3f}" if e.get("value") is not None else ""
    )
    if e.get("ci_low") is not None and e.get("ci_high") is not None:
        summary += f" [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"
    if "per_hour" in e:
        hours = float(e.get("hours") or 0)
        if hours * 60 < catalogue.PER_HOUR_MIN_MINUTES:
            summary += (
                f"; per hour withheld ({hours * 60:.1f} min of audio < "
                f"{catalogue.PER_HOUR_MIN_MINUTES} min)"
            )
        elif e["per_hour"] is not None:
            summary += f"; {_fmt(e['per_hour'], 2)}/h over {hours:.3f} h"
        else:
            summary += "; per hour –"
    note = ""
    if m.name in AFTER_BREAK_RATES:
        na = int(e.get("not_assessable") or 0)
        summary += f"; {na} not assessable"
        note = "n = " + m.denominator
        if not e.get("n"):
            note += (
                f"; this run holds no assessable case (n = 0, {na} not assessable)"
                if na
                else "; this run holds no case for it (n = 0)"
            )
    return _row(
        m.group,
        m.name,
        "rate",
        int(e.get("n") or 0),
        [_session(str(r)) for r in e.get("denominator") or []],
        levels,
        summary,
        note,
    )


def _check_row(
    m: catalogue.MetricDef, e: Mapping[str, Any], levels: Mapping[str, str]
) -> dict[str, Any]:
    summary = f"{e.get('passed', 0)}/{e.get('n', 0)} passed" + (
        f"; {e.get('not_applicable', 0)} n/a, {e.get('unscored', 0)} unscored"
    )
    return _row(
        m.group,
        m.name,
        "check",
        int(e.get("n") or 0),
        [_session(str(r)) for r in e.get("denominator") or []],
        levels,
        summary,
    )


def _count_row(
    m: catalogue.MetricDef, e: Mapping[str, Any], levels: Mapping[str, str]
) -> dict[str, Any]:
    return _row(
        m.group,
        m.row_name,
        "count",
        int(e.get("sessions_counted") or 0),
        e.get("sessions") or [],
        levels,
        f"{e.get('total', 0)} in {e.get('sessions_with_any', 0)} of "
        f"{e.get('sessions_counted', 0)} sessions",
    )
