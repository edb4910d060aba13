"""report.md and report.html of a bundle run: sessions, strata, subjective preferences, what changed, the harness self-check, key failures with their slices, players and timelines (recordings: ``views.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxeval.contracts.duplex.scorecard import Scorecard, SessionCard
from voxeval.core.runstore import RunStore
from voxeval.report.html import audio_player, esc, fmt, table, timeline_svg
from voxeval.report.markdown import md_table
from voxeval.suites.duplex.report import SIDE_EFFECT_CHECKS, TASK_CHECKS
from voxeval.suites.duplex.views_parts import (
    BUNDLE_LAT_HEADERS,
    CHECK_HEADERS,
    COUNT_HEADERS,
    FAILURE_HEADERS,
    RATE_HEADERS,
    ROW_HEADERS,
    STRATA_HEADERS,
    SUBJECTIVE_HEADERS,
    _ci,
    bundle_latency_rows,
    check_rows,
    count_rows,
    detector_line,
    evidence_line,
    failure_cells,
    given,
    marker_colour,
    metric_row_cells,
    problem_text,
    rate_rows,
    strata_rows,
)

__all__ = ["SESSION_HEADERS", "render_bundle_html_body", "render_bundle_markdown"]


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


def _session_cells(s: SessionCard) -> list[Any]:
    problems = given(s, "problems") or []
    errs = sum(1 for p in problems if p.get("severity") == "error")
    warns = len(problems) - errs
    status = given(s, "status")
    return [
        s.id,
        s.system,
        given(s, "scenario"),
        given(s, "category"),
        given(s, "route"),
        (s.evidence_level or "–") + (" (redacted)" if given(s, "redacted") else ""),
        status if status == "ok" else f"{status}: {(given(s, 'error') or {}).get('message')}",
        given(s, "behaviour_accuracy"),
        given(s, "task_passed"),
        given(s, "failures"),
        f"{errs} error(s), {warns} warning(s)",
    ]


def _self_check_lines(card: Scorecard) -> list[str]:
    """The harness self-check (``harness_self_check``) as short plain sentences."""
    sc = given(card, "harness_self_check")
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


def render_bundle_markdown(card: Scorecard) -> str:
    out = [
        f"# Full-duplex bundle report `{card.run_id}`\n",
        detector_line(card) + "\n",
        evidence_line(card) + "\n",
    ]
    for note in given(card, "detector_notes") or []:
        out.append(f"> {note}\n")
    out.append("## Harness self-check\n")
    out.extend(f"- {line}" for line in _self_check_lines(card))
    order = given(card, "rate_order", [])
    for s in card.systems:
        o = s.overall
        task = o.task
        out.append(
            f"\n## {s.system} ({given(o, 'n_sessions', 0)} sessions scored, "
            f"{len(s.failures)} not scored)\n"
        )
        out.append("### Metric evidence\n")
        out.append(md_table(ROW_HEADERS, metric_row_cells(given(s, "metric_rows") or [])))
        out.append("\n### Speed\n")
        out.append(md_table(BUNDLE_LAT_HEADERS, bundle_latency_rows(o)))
        out.append("\n### Behaviour\n")
        out.append(md_table(RATE_HEADERS, rate_rows(o, order)))
        out.append("\n### Task\n")
        out.append(md_table(CHECK_HEADERS, check_rows(task, TASK_CHECKS)))
        out.append("\n### Side effects\n")
        out.append(md_table(CHECK_HEADERS, check_rows(task, SIDE_EFFECT_CHECKS)))
        out.append("\n" + md_table(COUNT_HEADERS, count_rows(task)))
        out.append("\n### Subjective\n")
        out.append(_subjective_md(given(card, "subjective") or {}))
        out.append("\n### Strata\n")
        out.append(md_table(STRATA_HEADERS, strata_rows(s.groups)))
        if s.failures:
            out.append("\n### Not scored\n")
            for f in s.failures:
                out.append(f"- `{f['id']}` ({f.get('kind')}): {f.get('message')}")
                for p in (f.get("problems") or [])[:10]:
                    out.append(f"  - {problem_text(p)}")
    fs = given(card, "failure_summary") or {}
    key_failures = given(card, "key_failures") or []
    out.append(
        f"\n## Key failures ({len(key_failures)} of {fs.get('n', 0)}; "
        f"by layer: {', '.join(f'{k} {v}' for k, v in (fs.get('by_layer') or {}).items()) or '–'})\n"
    )
    out.append(md_table(FAILURE_HEADERS, [failure_cells(f) for f in key_failures]))
    if given(card, "what_changed"):
        out.append("\n## What changed\n")
        out.append(_what_changed_md(given(card, "what_changed")))
    out.append("\n## Sessions\n")
    out.append(md_table(SESSION_HEADERS, [_session_cells(x) for x in card.sessions]))
    problems = [(x.id, p) for x in card.sessions for p in given(x, "problems") or []]
    if problems:
        out.append("\n### Problems found in the bundles\n")
        for sid, p in problems[:200]:
            out.append(f"- `{sid}`: {problem_text(p)}")
    return "\n".join(out) + "\n"


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
        (m[0], f"{m[1]} {m[2]} {m[3]}".strip(), marker_colour(m[1]))
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


def render_bundle_html_body(card: Scorecard, store: RunStore | None = None) -> str:
    ev = card.evidence
    body = [
        f"<p class='muted'>Run <code>{esc(card.run_id)}</code> · metrics "
        f"<code>{esc(given(card, 'metrics_version'))}</code> · generated "
        f"{esc(given(card, 'generated_at'))}</p>",
        f"<p>{esc(detector_line(card))}</p>",
        f"<div class='note'>Evidence level of the run: <b>{esc(ev.level or 'none')}</b>. "
        f"{esc(given(ev, 'note'))}</div>",
    ]
    for note in given(card, "detector_notes") or []:
        body.append(f"<div class='note'>{esc(note)}</div>")
    body.append(
        "<h2>Harness self-check</h2><ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in _self_check_lines(card))
        + "</ul>"
    )
    order = given(card, "rate_order", [])
    for s in card.systems:
        o = s.overall
        task = o.task
        body.append(
            f"<h2>{esc(s.system)} · {given(o, 'n_sessions', 0)} sessions scored, "
            f"{len(s.failures)} not scored</h2>"
        )
        body.append(
            "<h3>Metric evidence</h3>"
            + table(ROW_HEADERS, metric_row_cells(given(s, "metric_rows") or []), left=3)
        )
        body.append("<h3>Speed</h3>" + table(BUNDLE_LAT_HEADERS, bundle_latency_rows(o)))
        body.append("<h3>Behaviour</h3>" + table(RATE_HEADERS, rate_rows(o, order)))
        conf = given(o, "confusion") or {}
        if conf.get("matrix"):
            labels = conf["labels"]
            body.append(
                "<p class='muted'>Confusion matrix (rows expected, columns observed)</p>"
                + table(
                    ["expected \\ observed", *labels],
                    [[e, *[conf["matrix"][e][c] for c in labels]] for e in labels],
                )
            )
        body.append("<h3>Task</h3>" + table(CHECK_HEADERS, check_rows(task, TASK_CHECKS)))
        body.append(
            "<h3>Side effects</h3>"
            + table(CHECK_HEADERS, check_rows(task, SIDE_EFFECT_CHECKS))
            + table(COUNT_HEADERS, count_rows(task))
        )
        sub = given(card, "subjective") or {}
        body.append("<h3>Subjective</h3>")
        if sub.get("status") == "linked":
            body.append(table(SUBJECTIVE_HEADERS, _subjective_rows(sub), left=2))
        else:
            body.append("<p class='muted'>No study linked.</p>")
        body.append(f"<p class='muted'>{esc(sub.get('never_overrides'))}.</p>")
        body.append("<h3>Strata</h3>" + table(STRATA_HEADERS, strata_rows(s.groups), left=2))
        if s.failures:
            body.append(
                "<h3>Not scored</h3>"
                + table(
                    ["session", "kind", "message", "problems"],
                    [
                        [
                            f["id"],
                            f.get("kind"),
                            f.get("message"),
                            "; ".join(problem_text(p) for p in (f.get("problems") or [])[:5]),
                        ]
                        for f in s.failures
                    ],
                    left=4,
                )
            )
    fs = given(card, "failure_summary") or {}
    key_failures = given(card, "key_failures") or []
    body.append(
        f"<h2>Key failures</h2><p>{len(key_failures)} of {fs.get('n', 0)} "
        f"failures shown; by layer: "
        f"{esc(', '.join(f'{k} {v}' for k, v in (fs.get('by_layer') or {}).items()) or '–')}.</p>"
    )
    by_session: dict[str, list[dict[str, Any]]] = {}
    for f in key_failures:
        by_session.setdefault(f["session"], []).append(f)
    for sid, fails in by_session.items():
        tl = (given(card, "timelines") or {}).get(sid) or {}
        body.append(f"<h3>{esc(sid)}</h3>")
        body.append(_bundle_timeline(sid, tl, fails))
        for f in fails:
            body.append(_slice_html(f))
            if tl.get("raw_audio") == "dropped":
                body.append("<p class='muted'>raw audio dropped by redaction: no players</p>")
            else:
                body.append(_clip_players(f.get("bundle"), f.get("time_s"), store))
    if given(card, "what_changed"):
        import html as _html

        body.append(
            "<h2>What changed</h2><pre>"
            + _html.escape(_what_changed_md(given(card, "what_changed")))
            + "</pre>"
        )
    body.append(
        "<h2>Sessions</h2>"
        + table(SESSION_HEADERS, [_session_cells(x) for x in card.sessions], left=7)
    )
    problems = [(x.id, p) for x in card.sessions for p in given(x, "problems") or []]
    if problems:
        body.append(
            "<h3>Problems found in the bundles</h3><ul>"
            + "".join(
                f"<li><code>{esc(sid)}</code>: {esc(problem_text(p))}</li>"
                for sid, p in problems[:200]
            )
            + "</ul>"
        )
    return "".join(body)
