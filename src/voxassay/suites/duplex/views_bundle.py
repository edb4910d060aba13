"""The document of a bundle run, in the acceptance contract's order: summary (recommendations,
trade-off, headline table), what changed against the baseline, the scenario distribution,
per system the five groups (speed, behaviour, task, side effects, subjective) with their
evidence boundaries and strata, key failures with timelines, slices and players, the
sessions, the harness self-check, and each system's recommendation with every gate
(recordings: ``views.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxassay.contracts.duplex.scorecard import Scorecard, SessionCard
from voxassay.core.runstore import RunStore
from voxassay.report.document import (
    Clip,
    Document,
    Players,
    Section,
    Sentences,
    Table,
    Text,
    Timeline,
)
from voxassay.report.html import fmt, timeline_svg
from voxassay.suites.duplex.report import SIDE_EFFECT_CHECKS, TASK_CHECKS
from voxassay.suites.duplex.views_parts import (
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
    failure_cells,
    given,
    marker_colour,
    metric_row_cells,
    problem_text,
    rate_rows,
    strata_rows,
)

__all__ = ["SESSION_HEADERS", "bundle_document"]


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


def _subjective_blocks(sub: dict[str, Any]) -> list[Any]:
    if sub.get("status") != "linked":
        extra = "; ".join(sub.get("problems") or [])
        return [
            Text(
                f"No data. No study linked (no valid {sub.get('file')} in the run folder"
                + (f": {extra}" if extra else "")
                + f"). {sub.get('never_overrides') or ''}".rstrip(),
                "muted",
            )
        ]
    return [
        Table(SUBJECTIVE_HEADERS, _subjective_rows(sub), left=2),
        Text(
            f"{sub.get('never_overrides')}. Evidence: {sub.get('level') or 'none'} "
            f"({sub.get('level_note')}).",
            "muted",
        ),
    ]


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


def _what_changed_blocks(wc: dict[str, Any]) -> list[Any]:
    """Against the baseline: system versions, configuration, scenario set and mix, then per
    system pair the metrics that moved with their intervals and the trade-offs."""
    if wc.get("error"):
        return [Text(f"Baseline {wc.get('baseline')} could not be read: {wc['error']}", "note")]
    lines = []
    sv = wc.get("system_versions") or {}
    lines.append(
        f"System versions: {', '.join(sv.get('baseline') or []) or '–'} → "
        f"{', '.join(sv.get('current') or []) or '–'}"
        + (" (changed)" if sv.get("changed") else " (unchanged)")
    )
    for c in wc.get("config") or []:
        lines.append(
            f"Configuration of {c['system']}: {c['baseline']} → {c['current']}"
            + (f" (keys: {', '.join(c['keys'])})" if c.get("keys") else "")
        )
    if not wc.get("config"):
        lines.append("Configuration: unchanged")
    sc = wc.get("scenarios") or {}
    versions = ", ".join(
        f"{k} {v['baseline']}→{v['current']}" for k, v in (sc.get("version_changed") or {}).items()
    )
    lines.append(
        f"Scenario set: added {', '.join(sc.get('added') or []) or 'none'}; removed "
        f"{', '.join(sc.get('removed') or []) or 'none'}; version changed {versions or 'none'}"
    )
    mix = wc.get("category_mix") or {}
    lines.append(
        "Category mix (sessions, baseline → current): "
        + (", ".join(f"{k} {v['baseline']}→{v['current']}" for k, v in mix.items()) or "–")
        + (" (changed)" if wc.get("category_mix_changed") else " (unchanged)")
    )
    out: list[Any] = [
        Text(f"Baseline run {wc.get('baseline_run_id')} ({wc.get('baseline')})."),
        Sentences(lines),
    ]
    for comp in wc.get("comparisons") or []:
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
            Table(
                ["metric", "stat", "baseline", "current", "diff", "95% CI", "verdict"],
                rows,
                caption=f"{comp['baseline_system']} → {comp['system']}",
            )
        )
        if comp["trade_offs"]:
            out.append(
                Text(
                    "Trade-offs: "
                    + "; ".join(
                        f"{t['improved']} improved while {t['regressed']} regressed"
                        for t in comp["trade_offs"]
                    )
                )
            )
        else:
            out.append(
                Text(
                    f"Improved: {', '.join(comp['improved']) or 'none'}; regressed: "
                    f"{', '.join(comp['regressed']) or 'none'} (CI on one side of 0); no trade-off."
                )
            )
    return out


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
    loop = sc.get("loop")
    if isinstance(loop, dict):
        probe = loop.get("probe") or {}
        ses = loop.get("sessions") or {}
        lines.append(
            f"Sound loop (PulseAudio {probe.get('pulseaudio_version', '?')}, real player "
            f"process, capture of the sink's monitor): added latency {fmt(probe.get('latency_ms'), 2)} "
            f"ms, jitter {fmt(probe.get('jitter_ms'), 2)} ms on the self-check probe "
            f"({probe.get('n_windows')} of {probe.get('n_bursts')} bursts); in the "
            f"{ses.get('n', 0)} session(s): median {fmt(ses.get('latency_median_ms'), 2)} ms "
            f"(from {fmt(ses.get('latency_min_ms'), 2)} to {fmt(ses.get('latency_max_ms'), 2)}), "
            f"largest jitter {fmt(ses.get('jitter_max_ms'), 2)} ms. It is part of every "
            "acoustic time of these sessions and not subtracted from any metric."
        )
    for e in sc.get("errors") or []:
        lines.append(f"Self-check error ({e.get('stage')}): {e.get('error')}")
    return lines


def _clip_players(f: dict[str, Any], store: RunStore | None, private: str) -> Players | None:
    """Players of ``input.wav`` and ``output.wav`` around a failure (2 s before, 4 s after)."""
    bundle, t0 = f.get("bundle"), f.get("time_s")
    if not bundle or t0 is None:
        return None
    folder = Path(bundle)
    if not folder.is_absolute() and store is not None:
        folder = store.path / folder
    start_s = max(0.0, float(t0) - 2.0)
    clips = []
    for name in ("input.wav", "output.wav"):
        path = folder / name

        def load(path: Path = path) -> tuple[Any, int]:
            import soundfile as sf

            sr = int(sf.info(str(path)).samplerate)
            start = int(start_s * sr)
            data, _ = sf.read(str(path), start=start, stop=start + 6 * sr, dtype="float32")
            return data, sr

        key = f"{f['session']}-{f.get('check')}-{start_s:.1f}-{name.split('.')[0]}"
        clips.append(Clip(label=name, key=key, load=load, priority=0))
    return Players(clips, caption=f"{start_s:.1f}–{start_s + 6:.1f} s", private=private)


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


def _slice_blocks(f: dict[str, Any]) -> list[Any]:
    chain = Table(
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
    gates = Table(
        ["gate", "layer", "passed", "note"],
        [
            [g.get("gate"), g.get("layer"), g.get("passed"), g.get("note")]
            for g in f.get("gates") or []
        ],
        left=4,
    )
    head = Text(
        f"{f.get('check')} in {f['session']} at {fmt(f.get('time_s'))} s: layer "
        f"{f.get('layer')} (last passing gate {f.get('last_passing_gate') or '–'}, first failing "
        f"{f.get('first_failing_gate') or '–'}): {f.get('reason')}"
    )
    return [head, chain, gates]


def _systems_blocks(card: Scorecard) -> list[Any]:
    """The systems under test: spec, versions and configuration (the baseline comparison
    diffs these)."""
    import json

    systems = (given(card, "composition") or {}).get("systems") or {}
    rows = []
    for spec, info in systems.items():
        for config in info.get("configs") or [{}]:
            text = json.dumps(config, sort_keys=True, ensure_ascii=False)
            rows.append(
                [
                    spec,
                    ", ".join(info.get("versions") or []) or "–",
                    text[:400] + ("…" if len(text) > 400 else ""),
                ]
            )
    if not rows:
        return [Text("No system configuration recorded.", "muted")]
    return [Table(["system", "versions", "configuration"], rows, left=3)]


def _composition_blocks(card: Scorecard) -> list[Any]:
    comp = given(card, "composition") or {}
    cats = comp.get("categories") or {}
    scen = comp.get("scenarios") or {}
    if not cats and not scen:
        return [Text("No data: the run lists no scenarios.", "muted")]
    total = comp.get("sessions") or sum(cats.values())
    return [
        Text(f"{total} session(s) over {len(scen)} scenario(s) in {len(cats)} categories."),
        Table(["category", "sessions"], [[k, v] for k, v in sorted(cats.items())]),
    ]


def _system_section(card: Scorecard, s: Any) -> Section:
    o = s.overall
    task = o.task
    sec = Section(
        f"{s.system} · {given(o, 'n_sessions', 0)} sessions scored, {len(s.failures)} not scored"
    )
    sec.sub(
        "Metric evidence (VERIFIED / IMPLEMENTED / UNKNOWN)",
        Table(ROW_HEADERS, metric_row_cells(given(s, "metric_rows") or []), left=3),
    )
    sec.sub("Latency", Table(BUNDLE_LAT_HEADERS, bundle_latency_rows(o)))
    behaviour = sec.sub(
        "Behaviour", Table(RATE_HEADERS, rate_rows(o, given(card, "rate_order", [])))
    )
    conf = given(o, "confusion") or {}
    if conf.get("matrix"):
        labels = conf["labels"]
        behaviour.add(
            Table(
                ["expected \\ observed", *labels],
                [[e, *[conf["matrix"][e][c] for c in labels]] for e in labels],
                caption="Confusion matrix (rows expected, columns observed)",
            )
        )
    task_rows = check_rows(task, TASK_CHECKS)
    sec.sub("Task", Table(CHECK_HEADERS, task_rows) if task_rows else Text("No data.", "muted"))
    side_rows = check_rows(task, SIDE_EFFECT_CHECKS)
    sec.sub(
        "Side effects",
        Table(CHECK_HEADERS, side_rows) if side_rows else Text("No data.", "muted"),
        Table(COUNT_HEADERS, count_rows(task)) if count_rows(task) else None,
    )
    sec.sub("Subjective", *_subjective_blocks(given(card, "subjective") or {}))
    routes = sorted({g.name for g in s.groups if g.group == "route"})
    devices = sorted({g.name for g in s.groups if g.group == "device"})
    sec.sub(
        "Strata (route, device, language, category, version)",
        Text(
            f"Routes: {', '.join(routes) or 'none recorded'}; devices: "
            f"{', '.join(devices) or 'none recorded'}. Latency is reported per stratum; "
            "no headline pools routes.",
            "muted",
        ),
        Table(STRATA_HEADERS, strata_rows(s.groups), left=2),
    )
    if s.failures:
        sec.sub(
            "Not scored",
            Table(
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
            ),
        )
    return sec


def _private_reason(card: Scorecard, session: str) -> str:
    """Why a session's audio is left out by default: redacted or production shadow."""
    details = (given(card.evidence, "details") or {}).get(session) or {}
    if details.get("redacted"):
        return "redacted session (privacy)"
    if any("production shadow" in str(r) for r in details.get("reasons") or []):
        return "production shadow traffic (privacy)"
    return ""


def _failures_section(card: Scorecard, store: RunStore | None) -> Section:
    fs = given(card, "failure_summary") or {}
    key_failures = given(card, "key_failures") or []
    by_layer = ", ".join(f"{k} {v}" for k, v in (fs.get("by_layer") or {}).items()) or "–"
    sec = Section("Key failures")
    sec.add(
        Text(f"{len(key_failures)} of {fs.get('n', 0)} failures shown; by layer: {by_layer}."),
        Table(FAILURE_HEADERS, [failure_cells(f) for f in key_failures]) if key_failures else None,
    )
    by_session: dict[str, list[dict[str, Any]]] = {}
    for f in key_failures:
        by_session.setdefault(f["session"], []).append(f)
    for sid, fails in by_session.items():
        tl = (given(card, "timelines") or {}).get(sid) or {}
        sub = sec.sub(sid, Timeline(_bundle_timeline(sid, tl, fails), text=f"timeline of {sid}"))
        private = _private_reason(card, sid)
        for f in fails:
            sub.add(*_slice_blocks(f))
            if tl.get("raw_audio") == "dropped":
                sub.add(Text("raw audio dropped by redaction: no players", "muted"))
            else:
                sub.add(_clip_players(f, store, private))
    return sec


def _contended_notes(card: Scorecard) -> list[Text]:
    """One note per system with sessions that ran contended (``core.cpu``)."""
    out = []
    for s in card.systems:
        block = given(s.overall, "contended")
        if block:
            out.append(
                Text(
                    f"{s.system}: {block['n_sessions']} session(s) ran contended "
                    f"({', '.join(block['sessions'][:5])}"
                    f"{' ...' if len(block['sessions']) > 5 else ''}): {block['note']}.",
                    "note",
                )
            )
    return out


def bundle_document(card: Scorecard, store: RunStore | None = None) -> Document:
    """The report of a bundle run as a ``Document`` (module docstring)."""
    from voxassay.suites.duplex.views_summary import duplex_summary, recommendation_section

    ev = card.evidence
    counts = ", ".join(f"{k}: {v}" for k, v in (given(ev, "counts") or {}).items()) or "none"
    doc = Document(
        title=f"Full-duplex acceptance · {card.run_id}",
        summary=duplex_summary(card),
        meta=f"Run {card.run_id} · metrics {given(card, 'metrics_version')} · generated "
        f"{given(card, 'generated_at')}",
    )
    doc.section(
        "Run and evidence",
        Text(
            f"Evidence level of the run: {ev.level or 'none'} (weakest session; sessions per "
            f"level: {counts}). {given(ev, 'note', '')}",
            "note",
        ),
        Text(detector_line(card)),
        *(Text(n, "note") for n in given(card, "detector_notes") or []),
        *_contended_notes(card),
    )
    doc.section("Systems under test", *_systems_blocks(card))
    wc = given(card, "what_changed")
    doc.section(
        "What changed against the baseline",
        *(
            _what_changed_blocks(wc)
            if wc
            else [
                Text(
                    "No baseline given (duplex score --baseline RUN): nothing to compare.", "muted"
                )
            ]
        ),
    )
    doc.section("Scenario distribution", *_composition_blocks(card))
    for s in card.systems:
        doc.sections.append(_system_section(card, s))
    doc.sections.append(_failures_section(card, store))
    sessions = doc.section(
        "Sessions", Table(SESSION_HEADERS, [_session_cells(x) for x in card.sessions], left=7)
    )
    problems = [(x.id, p) for x in card.sessions for p in given(x, "problems") or []]
    if problems:
        sessions.sub(
            "Problems found in the bundles",
            Sentences([f"{sid}: {problem_text(p)}" for sid, p in problems[:200]]),
        )
    doc.section("Harness self-check", Sentences(_self_check_lines(card)))
    doc.sections.append(recommendation_section(card))
    return doc
