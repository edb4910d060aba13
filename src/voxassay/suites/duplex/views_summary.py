"""The first screen of a duplex report: each system's recommendation, the headline table and
a few sentences computed from the Scorecard (the trade-off between systems, the evidence,
where failures sit)."""

from __future__ import annotations

from typing import Any

from voxassay.contracts.duplex.gate_record import GateRecord
from voxassay.contracts.duplex.scorecard import (
    LatencyEntry,
    Overall,
    RateEntry,
    Scorecard,
    SystemCard,
)
from voxassay.report.document import Section, Summary, Table, Text, Verdict, VerdictCheck
from voxassay.report.html import fmt
from voxassay.report.summary import Estimate, leader
from voxassay.suites.duplex.views_parts import given

__all__ = ["duplex_summary", "gate_verdict", "headline_latency", "recommendation_section"]

JUNIT_STATUS = {
    "pass": "pass",
    "fail": "fail",
    "insufficient_n": "error",
    "insufficient_evidence": "error",
    "unknown": "error",
}


def gate_verdict(system: str, gate: GateRecord, *, brief: bool = False) -> Verdict:
    """A system's gate record as a verdict: its recommendation, the reasons (the first three
    when ``brief``), the mitigations of failing gates, one check per gate."""
    body = gate.model_dump(mode="json")
    reasons = [str(r) for r in body.get("reasons") or []]
    gates = body.get("gates") or []
    mitigations = []
    checks = []
    for g in gates:
        status = str(g.get("status"))
        junit = JUNIT_STATUS.get(status, "error")
        if junit == "error" and body.get("allow_incomplete"):
            junit = "skipped"
        if status == "fail" and g.get("mitigation"):
            mitigations.append(f"{g['id']}: {g['mitigation']}")
        checks.append(
            VerdictCheck(
                name=str(g.get("id")),
                status=junit,  # type: ignore[arg-type]
                message="; ".join(str(r) for r in g.get("reasons") or []) or status,
            )
        )
    if brief:
        reasons = _brief_reasons(gates)
    return Verdict(
        subject=system,
        recommendation=str(body.get("recommendation")),
        reasons=reasons,
        mitigations=mitigations,
        checks=checks,
        suite=str(body.get("matrix") or "gates"),
    )


def recommendation_section(card: Scorecard) -> Section:
    """The last section of a duplex report: per system its verdict (every reason, the
    mitigations) and its gate table, or why it was not gated."""
    sec = Section("Recommendation")
    for s in card.systems:
        if s.gate is None:
            sec.add(
                Text(
                    f"{s.system}: not gated (no acceptance matrix kept with the run; "
                    "voxassay duplex gate RUN --matrix M gives the recommendation).",
                    "muted",
                )
            )
            continue
        sec.add(
            gate_verdict(s.system, s.gate),
            Table(
                ["gate", "status", "value", "n", "evidence", "min evidence", "on fail"],
                [
                    [g.id, g.status, g.value, g.n, g.evidence_level, g.min_evidence, g.on_fail]
                    for g in s.gate.gates
                ],
                caption=f"{s.system} against {s.gate.matrix}",
            ),
        )
    return sec


def _brief_reasons(gates: list[dict[str, Any]]) -> list[str]:
    """One line per failing gate (value against threshold, at which level) and one line for
    the gates nothing could decide."""
    out = []
    for g in gates:
        if g.get("status") != "fail":
            continue
        value = g.get("value")
        shown = "censored" if value is None else fmt(value, 3 if abs(float(value)) < 10 else 0)
        unit = "" if g.get("unit") in (None, "", "fraction", "count") else f" {g['unit']}"
        out.append(
            f"{g['id']} failed: {g.get('statistic')} {shown}{unit} against "
            f"{g.get('comparator')} {float(g.get('threshold') or 0):g}{unit} (n = {g.get('n')}, "
            f"evidence {g.get('evidence_level') or 'unknown'}, floor {g.get('min_evidence')})"
        )
    undecided = [str(g["id"]) for g in gates if g.get("status") not in ("pass", "fail")]
    passed = sum(1 for g in gates if g.get("status") == "pass")
    if undecided:
        out.append(
            f"{len(undecided)} gate(s) undecided (too few samples or evidence below the floor): "
            + ", ".join(undecided)
        )
    out.append(f"{passed} of {len(gates)} gate(s) passed.")
    return out


def headline_latency(card: Scorecard) -> str:
    """The response latency a run is read by: first agent audio for bundles, the turn's
    response latency for recordings."""
    return "response_first_audio_ms" if card.mode == "bundles" else "floor_transfer_offset_ms"


def _rate(o: Overall, name: str) -> RateEntry | None:
    return o.rates.get(name)


def _routes(card: Scorecard, system: SystemCard) -> list[str]:
    return sorted({g.name for g in system.groups if g.group == "route"})


def _latency_cell(card: Scorecard, system: SystemCard) -> str:
    """P50 / P95 of the headline latency; per route when the system ran on several (a
    headline never pools routes)."""
    name = headline_latency(card)
    routes = _routes(card, system)
    if len(routes) > 1:
        parts = []
        for g in system.groups:
            if g.group == "route":
                e = g.latencies.get(name) or LatencyEntry()
                parts.append(f"{g.name}: {_ms(e, e.p50)} / {_ms(e, e.p95)}")
        return "; ".join(parts)
    e = system.overall.latencies.get(name) or LatencyEntry()
    return f"{_ms(e, e.p50)} / {_ms(e, e.p95)} (n {given(e, 'n', 0)})"


def _ms(e: LatencyEntry, value: Any) -> str:
    """Whole ms; a quantile that falls among censored pairs says so."""
    if value is None:
        return "censored" if given(e, "n_censored") else "–"
    return fmt(round(float(value)))


def _headline(card: Scorecard) -> Table:
    rows = []
    for s in card.systems:
        o = s.overall
        acc = _rate(o, "behaviour_accuracy")
        stop = o.latencies.get("interrupt_stop_ms") or o.latencies.get("barge_in_stop_ms")
        goal = o.task.checks.get("goal_completion") if o.task is not None else None
        dupes = o.task.counts.get("duplicate_side_effects") if o.task is not None else None
        rows.append(
            [
                s.system,
                given(o, "n_sessions") or given(o, "n_calls") or 0,
                _latency_cell(card, s),
                _ms(stop, stop.p95) if stop is not None else "–",
                f"{acc.k}/{acc.n}" if acc is not None and acc.n else "–",
                f"{goal.passed}/{goal.n}" if goal is not None and goal.n else "no data",
                fmt(dupes.total, 0) if dupes is not None else "no data",
                (s.gate.recommendation if s.gate is not None else "not gated"),
            ]
        )
    return Table(
        [
            "system",
            "sessions",
            "response P50 / P95 ms",
            "stop P95 ms",
            "turn decisions right",
            "goal completed",
            "duplicate writes",
            "recommendation",
        ],
        rows,
    )


def _tradeoff(card: Scorecard, a: SystemCard, b: SystemCard) -> str | None:
    """One sentence: who answers sooner (P50, when the intervals do not overlap) against who
    gets more turn decisions wrong."""
    name = headline_latency(card)
    la, lb = a.overall.latencies.get(name), b.overall.latencies.get(name)
    ra, rb = _rate(a.overall, "behaviour_accuracy"), _rate(b.overall, "behaviour_accuracy")
    if la is None or lb is None or la.p50 is None or lb.p50 is None:
        return None
    wrong = {
        s.system: (r.n - (r.k or 0), r.n) for s, r in ((a, ra), (b, rb)) if r is not None and r.n
    }

    def est(s: SystemCard, e: LatencyEntry) -> Estimate:
        ci = e.p50_ci or [None, None]
        return Estimate(s.system, e.p50, ci[0], ci[1])

    best, _ = leader([est(a, la), est(b, lb)], lower_is_better=True)  # the one leader rule
    if best is None:
        speed = (
            f"{a.system} and {b.system} answer about as fast (P50 {fmt(la.p50, 0)} vs "
            f"{fmt(lb.p50, 0)} ms; intervals overlap: no clear leader)"
        )
    else:
        speed = f"{best.system} answers {abs(float(la.p50) - float(lb.p50)):.0f} ms sooner (P50)"
    if a.system not in wrong or b.system not in wrong:
        return speed + "."
    if best is None:
        (aw, an), (bw, bn) = wrong[a.system], wrong[b.system]
        return f"{speed}; turn decisions wrong: {a.system} {aw} of {an}, {b.system} {bw} of {bn}."
    slower = b if best.system == a.system else a
    fw, fn = wrong[best.system]
    sw, sn = wrong[slower.system]
    tail = f"{fw} of {fn} turn decisions wrong ({slower.system}: {sw} of {sn})"
    if fw > sw:
        return f"{speed} but gets {tail}."
    return f"{speed} and gets {tail}: it leads on both."


def _one_system(card: Scorecard, s: SystemCard) -> str:
    """What one system did: response P50 and P95, turn decisions right, per-hour rates only
    above 10 minutes of audio."""
    name = headline_latency(card)
    e = s.overall.latencies.get(name) or LatencyEntry()
    acc = _rate(s.overall, "behaviour_accuracy")
    parts = [
        f"{s.system} answers in {_ms(e, e.p50)} ms at the median, {_ms(e, e.p95)} ms at P95 (n {given(e, 'n', 0)})"
    ]
    if acc is not None and acc.n:
        parts.append(f"gets {acc.n - (acc.k or 0)} of {acc.n} turn decisions wrong")
    return "; ".join(parts) + "."


def _failure_sentence(card: Scorecard) -> str | None:
    fs = given(card, "failure_summary") or {}
    n = int(fs.get("n") or 0)
    if not n:
        return None
    layers = sorted((fs.get("by_layer") or {}).items(), key=lambda kv: -int(kv[1]))
    where = f"; most at the {layers[0][0]} layer ({layers[0][1]})" if layers else ""
    sessions = len({f.get("session") for f in given(card, "key_failures") or []})
    return f"{n} failure(s) found with causal slices{where}; the key failures section replays {sessions} session(s)."


def _verdict_text(s: SystemCard) -> str | None:
    """What one gated system's recommendation rests on: the gates it failed, or, failing none,
    the evidence floors and sample sizes it still lacks."""
    if s.gate is None:
        return None
    gates = s.gate.gates
    rec = str(s.gate.recommendation).replace("_", " ")
    failed = [g.id for g in gates if str(g.status) == "fail"]
    if failed:
        return f"{s.system} fails {len(failed)} gate(s) ({', '.join(failed)}): {rec}"
    below = [g for g in gates if str(g.status) == "insufficient_evidence"]
    short = [g.id for g in gates if str(g.status) == "insufficient_n"]
    unknown = [g.id for g in gates if str(g.status) == "unknown"]
    lacks = []
    if below:
        floors = " and ".join(sorted({str(g.min_evidence) for g in below}))
        lacks.append(f"evidence at {floors} for {len(below)} gate(s)")
    if short:
        lacks.append(f"more sessions for {len(short)} ({', '.join(short)})")
    if unknown:
        lacks.append(f"a measurement for {len(unknown)} ({', '.join(unknown)})")
    if not lacks:
        return f"{s.system} passes all {len(gates)} gate(s): {rec}"
    return f"{s.system} fails no gate but lacks {'; '.join(lacks)}: {rec}"


def duplex_summary(card: Scorecard) -> Summary:
    """The summary block: verdicts (brief), 3-5 sentences, the headline table."""
    verdicts = [gate_verdict(s.system, s.gate, brief=True) for s in card.systems if s.gate]
    sentences: list[str] = []
    said = [t for t in (_verdict_text(s) for s in card.systems) if t]
    if said:
        sentences.append("; ".join(said) + ".")
    if len(card.systems) == 1:
        sentences.append(_one_system(card, card.systems[0]))
    if len(card.systems) >= 2:
        first = card.systems[0]
        for other in card.systems[1:]:
            trade = _tradeoff(card, first, other)
            if trade:
                sentences.append(trade)
    ev = card.evidence
    level = ev.level or "not derived"
    sentences.append(
        f"Evidence: {level}"
        + (f" (declared: {ev.declared_level})" if ev.declared_level else "")
        + " — "
        + (
            "a gate whose floor is above it cannot pass, and a violated threshold still fails."
            if ev.level in ("L1", "L2")
            else "gates are decided at this level."
        )
    )
    failures = _failure_sentence(card)
    if failures:
        sentences.append(failures)
    return Summary(sentences=sentences[:5], table=_headline(card), verdicts=verdicts)
