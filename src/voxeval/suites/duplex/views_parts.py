"""Pieces every duplex view shares: table headers and rows of rates, latencies, checks, counts, strata and failures, evidence and detector lines."""

from __future__ import annotations

from typing import Any

from voxeval.report.html import fmt

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
]


RATE_HEADERS = ["rate", "value", "k", "n", "95% CI", "definition"]


LAT_HEADERS = ["latency (ms)", "n", "censored", "P50", "P95", "P99", "P50 CI", "note"]


def _ci(lo: Any, hi: Any) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def _rate_note(e: dict[str, Any]) -> str:
    """The definition cell: the per-hour rate (with the hours it is over) and the count of
    cases that could not be assessed, when the report gives them, then the definition."""
    parts = []
    if "per_hour" in e:
        hours = float(e.get("hours") or 0.0)
        parts.append(
            f"per hour: {fmt(e['per_hour'])} ({e.get('k', 0)} in {hours:.3f} h of session audio)"
            if e["per_hour"] is not None
            else f"per hour: – (n = 0; {hours:.3f} h of session audio)"
        )
    if "not_assessable" in e:
        parts.append(f"not assessable: {e['not_assessable']} (counted apart)")
    parts.append(str(e.get("definition") or ""))
    return ". ".join(p for p in parts if p)


def _rate_rows(overall: dict[str, Any], order: list[str]) -> list[list[Any]]:
    rates = overall.get("rates", {})
    names = [n for n in order if n in rates] + [n for n in rates if n not in order]
    return [
        [
            n,
            rates[n]["value"],
            rates[n]["k"],
            rates[n]["n"],
            _ci(rates[n]["ci_low"], rates[n]["ci_high"]),
            _rate_note(rates[n]),
        ]
        for n in names
    ]


def _latency_rows(overall: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, lat in (overall.get("latencies") or {}).items():
        ci = lat.get("p50_ci")
        note = "; ".join(
            [*lat.get("notes", []), *[f"{k}: {v}" for k, v in (lat.get("withheld") or {}).items()]]
        )
        rows.append(
            [
                name,
                lat.get("n"),
                lat.get("n_censored"),
                lat.get("p50"),
                lat.get("p95"),
                lat.get("p99"),
                _ci(ci[0], ci[1]) if ci else "–",
                note,
            ]
        )
    return rows


def _detector_line(report: dict[str, Any]) -> str:
    det = report.get("detector") or {}
    err = det.get("measured_error") or {}
    text = (
        f"Acoustic events from detector `{det.get('name', '?')}` {det.get('version') or ''}".strip()
    )
    if err:
        text += (
            f"; its measured edge error ({err.get('on', 'reference set')}): onset median "
            f"{fmt(err.get('onset_median_ms'), 1)} ms, max {fmt(err.get('onset_max_ms'), 1)} ms; "
            f"offset median {fmt(err.get('offset_median_ms'), 1)} ms, max "
            f"{fmt(err.get('offset_max_ms'), 1)} ms"
        )
    else:
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


def _evidence_line(report: dict[str, Any]) -> str:
    ev = report["evidence"]
    counts = ", ".join(f"{k}: {v}" for k, v in (ev.get("counts") or {}).items()) or "none"
    return (
        f"Evidence level of the run: **{ev.get('level') or 'none'}** (weakest session; "
        f"sessions per level: {counts}). {ev.get('note', '')}"
    )


def _bundle_latency_rows(overall: dict[str, Any]) -> list[list[Any]]:
    """``_latency_rows`` plus the P95 interval and where the pairs come from."""
    rows = _latency_rows(overall)
    lat = overall.get("latencies") or {}
    for r in rows:
        e = lat.get(r[0]) or {}
        ci = e.get("p95_ci")
        r.insert(7, _ci(ci[0], ci[1]) if ci else "–")
        src = e.get("source") or ""
        r.append("ledger" if src.startswith("ledger") else "acoustic turns")
    return rows


BUNDLE_LAT_HEADERS = [*LAT_HEADERS[:7], "P95 CI", LAT_HEADERS[7], "source"]


def _check_rows(task: dict[str, Any], names: tuple[str, ...]) -> list[list[Any]]:
    checks = task.get("checks") or {}
    rows = []
    for n in names:
        c = checks.get(n)
        if c is None:
            continue
        rows.append(
            [
                n,
                c["passed"],
                c["n"],
                c["rate"],
                _ci(c["ci_low"], c["ci_high"]),
                c["not_applicable"],
                c["unscored"],
            ]
        )
    return rows


def _count_rows(task: dict[str, Any]) -> list[list[Any]]:
    return [
        [n, c.get("total"), c.get("sessions_with_any"), c.get("sessions_counted")]
        for n, c in (task.get("counts") or {}).items()
    ]


def _metric_row_cells(rows: list[dict[str, Any]]) -> list[list[Any]]:
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


def _strata_rows(groups: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for g in groups:
        acc = (g.get("rates") or {}).get("behaviour_accuracy") or {}
        lat = g.get("latencies") or {}
        first = lat.get("response_first_audio_ms") or {}
        stop = lat.get("interrupt_stop_ms") or {}
        allc = (g.get("task") or {}).get("all_checks") or {}
        rows.append(
            [
                g["group"],
                g["name"],
                g["n_sessions"],
                f"{acc.get('k', 0)}/{acc.get('n', 0)}",
                acc.get("value"),
                f"{fmt(first.get('p50'), 0)} / {fmt(first.get('p95'), 0)} (n {first.get('n', 0)})",
                f"{fmt(stop.get('p50'), 0)} (n {stop.get('n', 0)})",
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


def _failure_cells(f: dict[str, Any]) -> list[Any]:
    return [
        f["session"],
        f.get("kind"),
        f.get("check"),
        f.get("time_s"),
        f.get("layer"),
        f.get("first_failing_gate") or "–",
        f.get("reason"),
    ]


def _problem_text(p: dict[str, Any]) -> str:
    where = f"{p.get('file')}:{p['line']}" if p.get("line") is not None else str(p.get("file"))
    return f"{where}: {p.get('severity')}: {p.get('message')}"


def _marker_colour(event_type: str) -> str:
    for prefix, colour in MARKER_COLOURS.items():
        if event_type.startswith(prefix):
            return colour
    return "#777"
