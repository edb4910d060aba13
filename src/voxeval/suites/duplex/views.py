"""Markdown and HTML views of duplex reports (numbers only from the dict): recordings runs
and evidence-bundle runs (``report["mode"] == "bundles"``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxeval.core.runstore import RunStore
from voxeval.report.html import audio_player, esc, fmt, page, table, timeline_svg
from voxeval.report.markdown import md_table
from voxeval.suites.duplex.report import SIDE_EFFECT_CHECKS, TASK_CHECKS

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


def render_markdown(report: dict[str, Any]) -> str:
    if _is_bundles(report):
        return render_bundle_markdown(report)
    out = [
        f"# Full-duplex turn-taking report `{report['run_id']}`\n",
        _detector_line(report) + "\n",
        f"> {report['evidence']['note']}\n",
    ]
    for s in report["systems"]:
        o = s["overall"]
        out.append(f"\n## {s['system']} ({o.get('n_calls', 0)} calls)\n")
        out.append(md_table(LAT_HEADERS, _latency_rows(o)))
        out.append("\n" + md_table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", []))))
        if s["failures"]:
            out.append(
                "\nNot scored: "
                + ", ".join(
                    f"{f['id']} ({f.get('kind')}: {f.get('message')})" for f in s["failures"]
                )
                + "\n"
            )
    out.append("\n## Calls\n")
    rows = []
    for c in report["sessions"]:
        lat = [
            t["response_latency_ms"] for t in c["turns"] if t.get("response_latency_ms") is not None
        ]
        outcomes = ", ".join(f"{e['id']}: {e['kind']} → {e['outcome']}" for e in c["events"]) or "–"
        rows.append([c["id"], len(c["turns"]), ", ".join(f"{v:.0f}" for v in lat) or "–", outcomes])
    out.append(md_table(["call", "turns", "response latencies (ms)", "overlaps → outcome"], rows))
    return "\n".join(out)


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    if _is_bundles(report):
        return page(f"Full-duplex bundles · {report['run_id']}", render_html_body(report, store))
    return page(f"Full-duplex turn-taking · {report['run_id']}", render_html_body(report, store))


def render_html_body(report: dict[str, Any], store: RunStore | None = None) -> str:
    if _is_bundles(report):
        return render_bundle_html_body(report, store)
    body = [
        f"<p class='muted'>Run <code>{esc(report['run_id'])}</code> · metrics "
        f"<code>{esc(report['metrics_version'])}</code> · generated {esc(report.get('generated_at'))}</p>",
        f"<p>{esc(_detector_line(report))}</p>",
        f"<div class='note'>{esc(report['evidence']['note'])}</div>",
    ]
    for s in report["systems"]:
        o = s["overall"]
        body.append(f"<h2>{esc(s['system'])} · {o.get('n_calls', 0)} calls</h2>")
        body.append("<h3>Speed</h3>" + table(LAT_HEADERS, _latency_rows(o)))
        body.append(
            "<h3>Behaviour</h3>" + table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", [])))
        )
        if s["failures"]:
            body.append(
                "<h3>Not scored</h3>"
                + table(
                    ["id", "status", "kind", "message"],
                    [
                        [f["id"], f["status"], f.get("kind"), f.get("message")]
                        for f in s["failures"]
                    ],
                    left=4,
                )
            )
    body.append("<h2>Calls</h2>")
    for c in report["sessions"]:
        body.append(_call_html(c, store))
    return "".join(body)


def _call_html(c: dict[str, Any], store: RunStore | None) -> str:
    segs = c.get("segments") or {}
    lanes = [
        (
            "user",
            [
                (s["start_s"], s["end_s"], f"{s.get('kind', 'speech')} {s['level_dbfs']:.0f} dBFS")
                for s in segs.get("user", [])
            ],
        ),
        (
            "agent",
            [
                (s["start_s"], s["end_s"], f"{s.get('kind', 'speech')} {s['level_dbfs']:.0f} dBFS")
                for s in segs.get("agent", [])
            ],
        ),
    ]
    markers = []
    for e in c["events"]:
        good = e["outcome"] in ("correct_yield", "correct_continue")
        colour = "#0a7d28" if good else "#b00020"
        markers.append((e["onset_s"], f"{e['kind']} onset → {e['outcome']}", colour))
    for t in c["turns"]:
        if t.get("response_onset_s") is not None:
            markers.append(
                (
                    t["response_onset_s"],
                    f"{t['id']} answered after {fmt(t['response_latency_ms'], 0)} ms",
                    "#555",
                )
            )
    svg = timeline_svg(lanes, markers, duration_s=c.get("duration_s"), title=c["id"])
    rows = [
        [
            e["id"],
            e["kind"],
            e["onset_s"],
            e.get("stop_ms"),
            e.get("observed_action"),
            ", ".join(e.get("expected_actions") or []),
            e["outcome"],
        ]
        for e in c["events"]
    ]
    turn_rows = [
        [
            t["id"],
            t["onset_s"],
            t["end_s"],
            t.get("response_latency_ms"),
            "censored" if t.get("censored") else "",
            "yes" if t.get("premature_takeover") else "",
        ]
        for t in c["turns"]
    ]
    player = _stereo_player(c.get("audio"), store)
    return (
        f"<h3>{esc(c['id'])}</h3>{player}{svg}"
        + table(["turn", "onset s", "end s", "latency ms", "", "premature takeover"], turn_rows)
        + (
            table(
                ["overlap", "kind", "onset s", "stop ms", "observed", "expected", "outcome"], rows
            )
            if rows
            else ""
        )
    )


def _stereo_player(audio: list[str] | None, store: RunStore | None) -> str:
    """An inline player of the call (stereo kept: user left, agent right), first 60 s."""
    if not audio:
        return ""
    import base64
    import io

    import numpy as np
    import soundfile as sf

    from voxeval.core.audio import Audio, resample
    from voxeval.core.errors import AudioError

    try:
        if len(audio) == 1:
            data, sr = sf.read(audio[0], dtype="float32", always_2d=True)
            chans = [Audio(data[:, i].copy(), sr) for i in range(min(2, data.shape[1]))]
        else:
            from voxeval.core.audio import load_audio

            chans = [load_audio(p, sr=None) for p in audio[:2]]
        rs = [resample(ch, 16000).samples[: 60 * 16000] for ch in chans]
        n = max(len(r) for r in rs)
        stereo = np.stack([np.pad(r, (0, n - len(r))) for r in rs], axis=1)
        buf = io.BytesIO()
        sf.write(buf, np.clip(stereo, -1, 1), 16000, format="WAV", subtype="PCM_16")
        uri = "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        return f"<p>{audio_player(uri)} <span class='muted'>user left, agent right</span></p>"
    except (OSError, RuntimeError, AudioError) as exc:
        return f"<p class='muted'>audio unavailable: {esc(exc)}</p>"


# =========================================================================== bundle runs

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


def _is_bundles(report: dict[str, Any]) -> bool:
    return report.get("mode") == "bundles"


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
SESSION_HEADERS = [
    "session",
    "system",
    "scenario",
    "category",
    "route",
    "evidence",
    "status",
    "behaviour acc.",
    "task passed",
    "failures",
    "problems",
]


def _subjective_md(sub: dict[str, Any]) -> str:
    if sub.get("status") != "linked":
        extra = "; ".join(sub.get("problems") or [])
        return (
            f"No study linked (no valid `{sub.get('file')}` in the run folder"
            + (f": {extra}" if extra else "")
            + f"). {sub.get('never_overrides')}.\n"
        )
    return (
        md_table(SUBJECTIVE_HEADERS, _subjective_rows(sub))
        + f"\n{sub.get('never_overrides')}. Evidence: {sub.get('level') or 'none'} "
        f"({sub.get('level_note')}).\n"
    )


SUBJECTIVE_HEADERS = ["A", "B", "A wins", "B wins", "ties", "A win rate", "95% CI"]


def _subjective_rows(sub: dict[str, Any]) -> list[list[Any]]:
    """Pairwise preference rows (A vs B wins, ties, A's win rate with its Wilson CI)."""
    return [
        [
            p["a"],
            p["b"],
            p["wins_a"],
            p["wins_b"],
            p["ties"],
            p["win_rate_a"],
            _ci(p["ci_low"], p["ci_high"]),
        ]
        for p in sub["pairs"]
    ]


def _what_changed_md(wc: dict[str, Any]) -> str:
    if wc.get("error"):
        return f"Baseline `{wc.get('baseline')}` could not be read: {wc['error']}\n"
    out = [f"Baseline run `{wc.get('baseline_run_id')}` ({wc.get('baseline')}).\n"]
    sv = wc.get("system_versions") or {}
    out.append(
        f"- System versions: {', '.join(sv.get('baseline') or []) or '–'} → "
        f"{', '.join(sv.get('current') or []) or '–'}"
        + (" (changed)" if sv.get("changed") else " (unchanged)")
    )
    for c in wc.get("config") or []:
        out.append(
            f"- Configuration of {c['system']}: {c['baseline']} → {c['current']}"
            + (f" (keys: {', '.join(c['keys'])})" if c.get("keys") else "")
        )
    if not wc.get("config"):
        out.append("- Configuration: unchanged")
    sc = wc.get("scenarios") or {}
    versions = ", ".join(
        f"{k} {v['baseline']}→{v['current']}" for k, v in (sc.get("version_changed") or {}).items()
    )
    out.append(
        f"- Scenario set: added {', '.join(sc.get('added') or []) or 'none'}; removed "
        f"{', '.join(sc.get('removed') or []) or 'none'}; version changed {versions or 'none'}"
    )
    mix = wc.get("category_mix") or {}
    out.append(
        "- Category mix (sessions, baseline → current): "
        + (", ".join(f"{k} {v['baseline']}→{v['current']}" for k, v in mix.items()) or "–")
        + (" (changed)" if wc.get("category_mix_changed") else " (unchanged)")
    )
    for comp in wc.get("comparisons") or []:
        out.append(f"\n**{comp['baseline_system']} → {comp['system']}**\n")
        moved = [r for r in comp["metrics"] if r["verdict"] not in ("same",)]
        rows = [
            [
                r["metric"],
                r["statistic"],
                r["baseline"],
                r["current"],
                r["diff"],
                _ci(r["ci_low"], r["ci_high"]),
                r["verdict"],
            ]
            for r in moved
        ]
        out.append(
            md_table(["metric", "stat", "baseline", "current", "diff", "95% CI", "verdict"], rows)
        )
        if comp["trade_offs"]:
            out.append(
                "\nTrade-offs: "
                + "; ".join(
                    f"{t['improved']} improved while {t['regressed']} regressed"
                    for t in comp["trade_offs"]
                )
                + "\n"
            )
        else:
            out.append(
                f"\nImproved: {', '.join(comp['improved']) or 'none'}; regressed: "
                f"{', '.join(comp['regressed']) or 'none'} (CI on one side of 0); no trade-off.\n"
            )
    return "\n".join(out) + "\n"


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


def _session_cells(s: dict[str, Any]) -> list[Any]:
    errs = sum(1 for p in s.get("problems") or [] if p.get("severity") == "error")
    warns = len(s.get("problems") or []) - errs
    return [
        s["id"],
        s["system"],
        s.get("scenario"),
        s.get("category"),
        s.get("route"),
        (s.get("evidence_level") or "–") + (" (redacted)" if s.get("redacted") else ""),
        s["status"]
        if s["status"] == "ok"
        else f"{s['status']}: {(s.get('error') or {}).get('message')}",
        s.get("behaviour_accuracy"),
        s.get("task_passed"),
        s.get("failures"),
        f"{errs} error(s), {warns} warning(s)",
    ]


def _self_check_lines(report: dict[str, Any]) -> list[str]:
    """The harness self-check (``harness_self_check``) as short plain sentences."""
    sc = report.get("harness_self_check")
    if not isinstance(sc, dict):
        return ["Not run: this report has no harness self-check."]
    if sc.get("status") in ("not run", "not applicable"):
        return [f"{str(sc['status']).capitalize()}: {sc.get('note', '')}"]
    lines = []

    def pacing_line(p: dict[str, Any], who: str = "") -> str:
        if not p.get("applicable"):
            return f"Frame pacing{who}: {p.get('note', 'not applicable')}."
        if not p.get("frames"):
            return f"Frame pacing{who}: {p.get('note', 'no frames recorded')}."
        return (
            f"Frame pacing{who}: send error median {fmt(p.get('median_ms'), 2)} ms, "
            f"P99 {fmt(p.get('p99_ms'), 2)} ms, max {fmt(p.get('max_ms'), 2)} ms over "
            f"{p.get('frames')} frames of {p.get('sessions')} session(s) (targets: median <= "
            f"{fmt(p.get('target_median_ms'), 0)} ms, P99 <= {fmt(p.get('target_p99_ms'), 0)} "
            f"ms: {p.get('status')}; {p.get('method')})."
        )

    lines.append(pacing_line(sc.get("pacing") or {"note": "not recorded"}))
    for system, p in (sc.get("pacing_by_system") or {}).items():
        lines.append(pacing_line(p, f" of {system}"))
    for transport, b in (sc.get("latency") or {}).items():
        target = (
            "expected exactly 0"
            if b.get("clock") == "virtual"
            else f"target median <= {fmt(b.get('target_median_ms'), 0)} ms"
        )
        xc = b.get("xcorr") or {}
        lines.append(
            f"Harness-added latency ({transport}, {b.get('clock')} clock; {b.get('agent')}): "
            f"median {fmt(b.get('median_ms'), 2)} ms onset to onset over {b.get('n_measured')} "
            f"of {b.get('n_bursts')} bursts (min {fmt(b.get('min_ms'), 2)}, max "
            f"{fmt(b.get('max_ms'), 2)}; {target}: {b.get('status')}); whole-burst "
            f"cross-correlation median {fmt(xc.get('median_ms'), 2)} ms. Method: "
            f"{b.get('method')}; resolution {fmt(b.get('resolution_ms'), 4)} ms."
        )
    if not sc.get("latency"):
        lines.append("Harness-added latency: not measured.")
    for e in sc.get("errors") or []:
        lines.append(f"Self-check error ({e.get('stage')}): {e.get('error')}")
    return lines


def render_bundle_markdown(report: dict[str, Any]) -> str:
    out = [
        f"# Full-duplex bundle report `{report['run_id']}`\n",
        _detector_line(report) + "\n",
        _evidence_line(report) + "\n",
    ]
    for note in report.get("detector_notes") or []:
        out.append(f"> {note}\n")
    out.append("## Harness self-check\n")
    out.extend(f"- {line}" for line in _self_check_lines(report))
    for s in report["systems"]:
        o = s["overall"]
        task = o.get("task") or {}
        out.append(
            f"\n## {s['system']} ({o.get('n_sessions', 0)} sessions scored, "
            f"{len(s['failures'])} not scored)\n"
        )
        out.append("### Metric evidence\n")
        out.append(md_table(ROW_HEADERS, _metric_row_cells(s.get("metric_rows") or [])))
        out.append("\n### Speed\n")
        out.append(md_table(BUNDLE_LAT_HEADERS, _bundle_latency_rows(o)))
        out.append("\n### Behaviour\n")
        out.append(md_table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", []))))
        out.append("\n### Task\n")
        out.append(md_table(CHECK_HEADERS, _check_rows(task, TASK_CHECKS)))
        out.append("\n### Side effects\n")
        out.append(md_table(CHECK_HEADERS, _check_rows(task, SIDE_EFFECT_CHECKS)))
        out.append("\n" + md_table(COUNT_HEADERS, _count_rows(task)))
        out.append("\n### Subjective\n")
        out.append(_subjective_md(report.get("subjective") or {}))
        out.append("\n### Strata\n")
        out.append(md_table(STRATA_HEADERS, _strata_rows(s.get("groups") or [])))
        if s["failures"]:
            out.append("\n### Not scored\n")
            for f in s["failures"]:
                out.append(f"- `{f['id']}` ({f.get('kind')}): {f.get('message')}")
                for p in (f.get("problems") or [])[:10]:
                    out.append(f"  - {_problem_text(p)}")
    fs = report.get("failure_summary") or {}
    out.append(
        f"\n## Key failures ({len(report.get('key_failures') or [])} of {fs.get('n', 0)}; "
        f"by layer: {', '.join(f'{k} {v}' for k, v in (fs.get('by_layer') or {}).items()) or '–'})\n"
    )
    out.append(
        md_table(FAILURE_HEADERS, [_failure_cells(f) for f in report.get("key_failures") or []])
    )
    if report.get("what_changed"):
        out.append("\n## What changed\n")
        out.append(_what_changed_md(report["what_changed"]))
    out.append("\n## Sessions\n")
    out.append(md_table(SESSION_HEADERS, [_session_cells(x) for x in report["sessions"]]))
    problems = [(x["id"], p) for x in report["sessions"] for p in x.get("problems") or []]
    if problems:
        out.append("\n### Problems found in the bundles\n")
        for sid, p in problems[:200]:
            out.append(f"- `{sid}`: {_problem_text(p)}")
    return "\n".join(out) + "\n"


def _problem_text(p: dict[str, Any]) -> str:
    where = f"{p.get('file')}:{p['line']}" if p.get("line") is not None else str(p.get("file"))
    return f"{where}: {p.get('severity')}: {p.get('message')}"


def _clip_players(bundle: str | None, t0: float | None, store: RunStore | None) -> str:
    """Players of ``input.wav`` and ``output.wav`` around ``t0`` (2 s before, 4 s after)."""
    if not bundle or t0 is None:
        return ""
    import base64
    import io

    import soundfile as sf

    folder = Path(bundle)
    if not folder.is_absolute() and store is not None:
        folder = store.path / folder
    parts = []
    for name in ("input.wav", "output.wav"):
        path = folder / name
        if not path.is_file():
            parts.append(f"<span class='muted'>{name}: not in the bundle (redacted?)</span>")
            continue
        try:
            info = sf.info(str(path))
            sr = int(info.samplerate)
            start = max(0, int((t0 - 2.0) * sr))
            data, _ = sf.read(str(path), start=start, stop=start + 6 * sr, dtype="float32")
            buf = io.BytesIO()
            sf.write(buf, data, sr, format="WAV", subtype="PCM_16")
            uri = "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
            parts.append(f"{name} {audio_player(uri)}")
        except (OSError, RuntimeError, ValueError) as exc:
            parts.append(f"<span class='muted'>{name}: {esc(exc)}</span>")
    start_s = max(0.0, t0 - 2.0)
    return f"<p>{' '.join(parts)} <span class='muted'>{start_s:.1f}–{start_s + 6:.1f} s</span></p>"


def _marker_colour(event_type: str) -> str:
    for prefix, colour in MARKER_COLOURS.items():
        if event_type.startswith(prefix):
            return colour
    return "#777"


def _bundle_timeline(sid: str, tl: dict[str, Any], failures: list[dict[str, Any]]) -> str:
    segs = tl.get("segments") or {}
    lanes = [
        (
            side,
            [
                (
                    s["start_s"],
                    s["end_s"],
                    f"{s.get('kind', 'speech')} {fmt(s.get('level_dbfs'), 0)} dBFS",
                )
                for s in segs.get(side, [])
            ],
        )
        for side in ("user", "agent")
    ]
    markers = [
        (m[0], f"{m[1]} {m[2]} {m[3]}".strip(), _marker_colour(m[1]))
        for m in tl.get("markers") or []
    ]
    for f in failures:
        if f.get("time_s") is not None:
            markers.append((f["time_s"], f"FAILURE {f.get('check')}: {f.get('reason')}", "#b00020"))
    return timeline_svg(lanes, markers, duration_s=tl.get("duration_s"), title=sid)


def _slice_html(f: dict[str, Any]) -> str:
    chain = table(
        ["step", "id", "detail"],
        [
            [
                c.get("step"),
                c.get("id") or c.get("event_id"),
                c.get("note")
                or c.get("type")
                or ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("step", "id")),
            ]
            for c in f.get("chain") or []
        ],
        left=3,
    )
    gates = table(
        ["gate", "layer", "passed", "note"],
        [
            [g.get("gate"), g.get("layer"), g.get("passed"), g.get("note")]
            for g in f.get("gates") or []
        ],
        left=4,
    )
    return (
        f"<p><b>{esc(f.get('check'))}</b> in <code>{esc(f['session'])}</code> at "
        f"{fmt(f.get('time_s'))} s: layer <b>{esc(f.get('layer'))}</b> (last passing gate "
        f"{esc(f.get('last_passing_gate') or '–')}, first failing {esc(f.get('first_failing_gate') or '–')}): "
        f"{esc(f.get('reason'))}</p>{chain}{gates}"
    )


def render_bundle_html_body(report: dict[str, Any], store: RunStore | None = None) -> str:
    ev = report["evidence"]
    body = [
        f"<p class='muted'>Run <code>{esc(report['run_id'])}</code> · metrics "
        f"<code>{esc(report.get('metrics_version'))}</code> · generated "
        f"{esc(report.get('generated_at'))}</p>",
        f"<p>{esc(_detector_line(report))}</p>",
        f"<div class='note'>Evidence level of the run: <b>{esc(ev.get('level') or 'none')}</b>. "
        f"{esc(ev.get('note'))}</div>",
    ]
    for note in report.get("detector_notes") or []:
        body.append(f"<div class='note'>{esc(note)}</div>")
    body.append(
        "<h2>Harness self-check</h2><ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in _self_check_lines(report))
        + "</ul>"
    )
    for s in report["systems"]:
        o = s["overall"]
        task = o.get("task") or {}
        body.append(
            f"<h2>{esc(s['system'])} · {o.get('n_sessions', 0)} sessions scored, "
            f"{len(s['failures'])} not scored</h2>"
        )
        body.append(
            "<h3>Metric evidence</h3>"
            + table(ROW_HEADERS, _metric_row_cells(s.get("metric_rows") or []), left=3)
        )
        body.append("<h3>Speed</h3>" + table(BUNDLE_LAT_HEADERS, _bundle_latency_rows(o)))
        body.append(
            "<h3>Behaviour</h3>" + table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", [])))
        )
        conf = o.get("confusion") or {}
        if conf.get("matrix"):
            labels = conf["labels"]
            body.append(
                "<p class='muted'>Confusion matrix (rows expected, columns observed)</p>"
                + table(
                    ["expected \\ observed", *labels],
                    [[e, *[conf["matrix"][e][c] for c in labels]] for e in labels],
                )
            )
        body.append("<h3>Task</h3>" + table(CHECK_HEADERS, _check_rows(task, TASK_CHECKS)))
        body.append(
            "<h3>Side effects</h3>"
            + table(CHECK_HEADERS, _check_rows(task, SIDE_EFFECT_CHECKS))
            + table(COUNT_HEADERS, _count_rows(task))
        )
        sub = report.get("subjective") or {}
        body.append("<h3>Subjective</h3>")
        if sub.get("status") == "linked":
            body.append(table(SUBJECTIVE_HEADERS, _subjective_rows(sub), left=2))
        else:
            body.append("<p class='muted'>No study linked.</p>")
        body.append(f"<p class='muted'>{esc(sub.get('never_overrides'))}.</p>")
        body.append(
            "<h3>Strata</h3>" + table(STRATA_HEADERS, _strata_rows(s.get("groups") or []), left=2)
        )
        if s["failures"]:
            body.append(
                "<h3>Not scored</h3>"
                + table(
                    ["session", "kind", "message", "problems"],
                    [
                        [
                            f["id"],
                            f.get("kind"),
                            f.get("message"),
                            "; ".join(_problem_text(p) for p in (f.get("problems") or [])[:5]),
                        ]
                        for f in s["failures"]
                    ],
                    left=4,
                )
            )
    fs = report.get("failure_summary") or {}
    body.append(
        f"<h2>Key failures</h2><p>{len(report.get('key_failures') or [])} of {fs.get('n', 0)} "
        f"failures shown; by layer: "
        f"{esc(', '.join(f'{k} {v}' for k, v in (fs.get('by_layer') or {}).items()) or '–')}.</p>"
    )
    by_session: dict[str, list[dict[str, Any]]] = {}
    for f in report.get("key_failures") or []:
        by_session.setdefault(f["session"], []).append(f)
    for sid, fails in by_session.items():
        tl = (report.get("timelines") or {}).get(sid) or {}
        body.append(f"<h3>{esc(sid)}</h3>")
        body.append(_bundle_timeline(sid, tl, fails))
        for f in fails:
            body.append(_slice_html(f))
            if tl.get("raw_audio") == "dropped":
                body.append("<p class='muted'>raw audio dropped by redaction: no players</p>")
            else:
                body.append(_clip_players(f.get("bundle"), f.get("time_s"), store))
    if report.get("what_changed"):
        import html as _html

        body.append(
            "<h2>What changed</h2><pre>"
            + _html.escape(_what_changed_md(report["what_changed"]))
            + "</pre>"
        )
    body.append(
        "<h2>Sessions</h2>"
        + table(SESSION_HEADERS, [_session_cells(x) for x in report["sessions"]], left=7)
    )
    problems = [(x["id"], p) for x in report["sessions"] for p in x.get("problems") or []]
    if problems:
        body.append(
            "<h3>Problems found in the bundles</h3><ul>"
            + "".join(
                f"<li><code>{esc(sid)}</code>: {esc(_problem_text(p))}</li>"
                for sid, p in problems[:200]
            )
            + "</ul>"
        )
    return "".join(body)
