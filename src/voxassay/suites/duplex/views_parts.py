"""Pieces every duplex view shares: the Scorecard a view reads, table headers and rows of
rates, latencies, checks, counts, strata and failures, evidence and detector lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from voxassay.contracts.duplex.catalogue import PER_HOUR_MIN_MINUTES
from voxassay.contracts.duplex.scorecard import (
    GroupCard,
    LatencyEntry,
    Overall,
    RateEntry,
    Scorecard,
    TaskBlock,
)
from voxassay.core.numbers import finite
from voxassay.report.html import ci_text, fmt

__all__ = [
    "BUNDLE_LAT_HEADERS",
    "CHECK_HEADERS",
    "COUNT_HEADERS",
    "FAILURE_HEADERS",
    "GROUP_TITLES",
    "LAT_HEADERS",
    "MARKER_COLOURS",
    "RATE_HEADERS",
    "ROW_HEADERS",
    "STRATA_HEADERS",
    "SUBJECTIVE_HEADERS",
    "as_scorecard",
    "given",
]


RATE_HEADERS = ["rate", "value", "k", "n", "95% CI", "definition"]


LAT_HEADERS = ["latency (ms)", "n", "censored", "P50", "P95", "P99", "P50 CI", "note"]


def as_scorecard(report: Scorecard | Mapping[str, Any]) -> Scorecard:
    """What every view reads: the run's Scorecard (report.json's content is validated)."""
    return report if isinstance(report, Scorecard) else Scorecard.model_validate(report)


def given(model: BaseModel, key: str, default: Any = None) -> Any:
    """A field the report wrote (typed or one of the blocks only views read), else
    ``default``: a view shows what the scorer wrote, and a dash for what it did not."""
    if key in model.model_fields_set or key in (model.model_extra or {}):
        return getattr(model, key)
    return default


def _ci(lo: Any, hi: Any) -> str:
    return ci_text(lo, hi)


def _rate_note(e: RateEntry) -> str:
    """The definition cell: the per-hour rate (with the hours it is over) and the count of
    cases that could not be assessed, when the report gives them, then the definition."""
    parts = []
    if given(e, "per_hour", ...) is not ...:
        hours = float(given(e, "hours") or 0.0)
        per_hour = given(e, "per_hour")
        if hours * 60 < PER_HOUR_MIN_MINUTES:
            parts.append(
                f"per hour: withheld ({hours * 60:.1f} min of audio < {PER_HOUR_MIN_MINUTES} "
                "min: an hourly rate would extrapolate a few events)"
            )
        else:
            parts.append(
                f"per hour: {fmt(per_hour)} ({given(e, 'k', 0)} in {hours:.3f} h of session audio)"
                if per_hour is not None
                else f"per hour: – (n = 0; {hours:.3f} h of session audio)"
            )
    if given(e, "not_assessable", ...) is not ...:
        parts.append(f"not assessable: {given(e, 'not_assessable')} (counted apart)")
    parts.append(str(e.definition or ""))
    return ". ".join(p for p in parts if p)


def rate_rows(overall: Overall, order: list[str]) -> list[list[Any]]:
    rates = overall.rates
    names = [n for n in order if n in rates] + [n for n in rates if n not in order]
    return [
        [
            n,
            rates[n].value,
            rates[n].k,
            rates[n].n,
            _ci(rates[n].ci_low, rates[n].ci_high),
            _rate_note(rates[n]),
        ]
        for n in names
    ]


def ms(value: Any) -> int | None:
    """A latency as whole milliseconds (None stays None)."""
    v = finite(value)
    return None if v is None else round(v)


def _ms_ci(ci: Any) -> str:
    return f"[{fmt(ms(ci[0]))}, {fmt(ms(ci[1]))}]" if ci else "–"


def latency_rows(overall: Overall) -> list[list[Any]]:
    """Latencies in whole ms: n, censored, P50, P95, P99 (withheld below 100 values), the
    P50 interval and notes."""
    rows = []
    for name, lat in overall.latencies.items():
        ci = lat.p50_ci
        note = "; ".join(
            [*given(lat, "notes", []), *[f"{k}: {v}" for k, v in lat.withheld.items()]]
        )
        rows.append(
            [
                name,
                given(lat, "n"),
                given(lat, "n_censored"),
                ms(lat.p50),
                ms(lat.p95),
                ms(lat.p99),
                _ms_ci(ci),
                note,
            ]
        )
    return rows


def detector_line(card: Scorecard) -> str:
    """The detector and its measured accuracy: on real speech first (the figure that holds
    for recordings), then on the constructed truth kit."""
    det = given(card, "detector") or {}
    real = det.get("measured_error_real") or {}
    err = det.get("measured_error") or {}
    text = (
        f"Acoustic events from detector `{det.get('name', '?')}` {det.get('version') or ''}".strip()
    )
    if real:
        text += (
            f"; its edge error on real speech ({real.get('on')}, {real.get('n_edges')} edges): "
            f"median {fmt(real.get('median_ms'), 1)} ms, P90 {fmt(real.get('p90_ms'), 1)} ms, "
            f"max {fmt(real.get('max_ms'), 1)} ms; {real.get('misses')} segment(s) missed, "
            f"{real.get('false_segments')} false"
        )
    if err:
        text += (
            f"; on constructed truth ({err.get('on', 'reference set')}): onset median "
            f"{fmt(err.get('onset_median_ms'), 1)} ms, max {fmt(err.get('onset_max_ms'), 1)} ms; "
            f"offset median {fmt(err.get('offset_median_ms'), 1)} ms, max "
            f"{fmt(err.get('offset_max_ms'), 1)} ms"
        )
    if not (real or err):
        text += "; no measured edge error available for this detector"
    return text + "."


ROW_HEADERS = ["group", "metric", "evidence", "n", "sessions", "value", "note"]


CHECK_HEADERS = ["check", "passed", "n", "rate", "95% CI", "n/a", "unscored"]


COUNT_HEADERS = ["count", "total", "sessions with any", "sessions counted"]


GROUP_TITLES = {
    "speed": "Speed",
    "behaviour": "Behaviour",
    "task": "Task",
    "side_effects": "Side effects",
    "subjective": "Subjective",
}


MARKER_COLOURS = {
    "user.": "#0a7d28",
    "vad.": "#3366cc",
    "asr.": "#0099c6",
    "turn.": "#990099",
    "response.": "#ff9900",
    "playback.": "#dd4477",
    "tool.": "#66aa00",
    "task.": "#66aa00",
}


def bundle_latency_rows(overall: Overall) -> list[list[Any]]:
    """``latency_rows`` plus the P95 interval and where the pairs come from."""
    rows = latency_rows(overall)
    for r in rows:
        e = overall.latencies.get(r[0]) or LatencyEntry()
        ci = e.p95_ci
        r.insert(7, _ms_ci(ci))
        src = given(e, "source") or ""
        r.append("ledger" if src.startswith("ledger") else "acoustic turns")
    return rows


BUNDLE_LAT_HEADERS = [*LAT_HEADERS[:7], "P95 CI", LAT_HEADERS[7], "source"]


def check_rows(task: TaskBlock | None, names: tuple[str, ...]) -> list[list[Any]]:
    checks = task.checks if task is not None else {}
    rows = []
    for n in names:
        c = checks.get(n)
        if c is None:
            continue
        rows.append(
            [
                n,
                c.passed,
                c.n,
                c.rate,
                _ci(c.ci_low, c.ci_high),
                given(c, "not_applicable"),
                given(c, "unscored"),
            ]
        )
    return rows


def count_rows(task: TaskBlock | None) -> list[list[Any]]:
    counts = task.counts if task is not None else {}
    return [
        [n, given(c, "total"), given(c, "sessions_with_any"), given(c, "sessions_counted")]
        for n, c in counts.items()
    ]


def metric_row_cells(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            GROUP_TITLES.get(r["group"], r["group"]),
            r["name"],
            r["label_text"],
            r["n"],
            r["n_sessions"],
            r["summary"],
            r["note"],
        ]
        for r in rows
    ]


def strata_rows(groups: list[GroupCard]) -> list[list[Any]]:
    rows = []
    for g in groups:
        acc = g.rates.get("behaviour_accuracy") or RateEntry()
        first = g.latencies.get("response_first_audio_ms") or LatencyEntry()
        stop = g.latencies.get("interrupt_stop_ms") or LatencyEntry()
        allc = (given(g, "task") or {}).get("all_checks") or {}
        rows.append(
            [
                g.group,
                g.name,
                given(g, "n_sessions"),
                f"{given(acc, 'k', 0)}/{given(acc, 'n', 0)}",
                acc.value,
                f"{fmt(first.p50, 0)} / {fmt(first.p95, 0)} (n {given(first, 'n', 0)})",
                f"{fmt(stop.p50, 0)} (n {given(stop, 'n', 0)})",
                f"{allc.get('passed', 0)}/{allc.get('n', 0)}",
            ]
        )
    return rows


STRATA_HEADERS = [
    "stratum",
    "value",
    "sessions",
    "decisions ok",
    "behaviour accuracy",
    "first audio P50 / P95 ms",
    "interrupt stop P50 ms",
    "tasks all passed",
]


FAILURE_HEADERS = ["session", "kind", "check", "t (s)", "layer", "first failing gate", "reason"]


SUBJECTIVE_HEADERS = ["A", "B", "A wins", "B wins", "ties", "A win rate", "95% CI"]


def failure_cells(f: dict[str, Any]) -> list[Any]:
    return [
        f["session"],
        f.get("kind"),
        f.get("check"),
        f.get("time_s"),
        f.get("layer"),
        f.get("first_failing_gate") or "–",
        f.get("reason"),
    ]


def problem_text(p: dict[str, Any]) -> str:
    where = f"{p.get('file')}:{p['line']}" if p.get("line") is not None else str(p.get("file"))
    return f"{where}: {p.get('severity')}: {p.get('message')}"


def marker_colour(event_type: str) -> str:
    for prefix, colour in MARKER_COLOURS.items():
        if event_type.startswith(prefix):
            return colour
    return "#777"
