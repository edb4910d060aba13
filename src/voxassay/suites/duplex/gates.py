"""Acceptance gates and the release decision (DESIGN.md, "Full-duplex ledger and bundle").

A duplex run's Scorecard becomes a ``MetricTable`` (``gate_table.py``): per metric the measured
statistics, the items behind them (so intervals and baseline comparisons can resample them),
the evidence level they were measured at, per-split values and, per session, where it can be
replayed from. ``evaluate_matrix`` checks an ``AcceptanceMatrix`` against the table, gate by
gate, overall and in every value of every ``split_by`` key the run records. The status table:

- **fail**: the threshold is violated where n meets the gate's n (``gate.required_n``); or n is
  smaller but the statistic's 95 % interval lies wholly on the failing side (Wilson for rates;
  order-statistic bounds for percentiles, censored pairs as +inf); or a zero-tolerance gate
  (``<= 0`` / ``== 0`` on a rate, count or value) saw any event, whatever n. At any evidence
  level: low evidence can keep a good number from passing, never hide a bad one; a failure
  below the gate's evidence floor recommends at most ``keep_in_shadow`` and says so.
- **pass**: n met, the evidence floor met, every failure behind the metric replayable, the
  run's versions recorded (``run.json``), and the threshold met in every group; a rate gate
  (``decide_on: interval``, the default) only when, in every group, its 95 % Wilson interval
  lies wholly on the passing side (1 false silence in 11, [0.016, 0.377], does not pass
  ``<= 0.10``: insufficient n, collect more data); zero-tolerance gates read their events.
- **insufficient_n / insufficient_evidence / unknown** otherwise (nothing measured is unknown);
  every blocker is listed in the gate's reasons, and the threshold outcome is shown even when
  it does not decide.

Each gate's metric row is labelled ``VERIFIED`` at the level it was measured at, ``IMPLEMENTED``
(voxassay computes the metric, this run holds no evidence for it) or ``UNKNOWN``.

With a baseline run, every gate also gets ``current - baseline`` with a 95 % CI from
``stats.comparison`` (the intervals the report's what-changed shows) and a regression flag;
the report lists metrics that improved next to those that got worse (trade-offs).

The recommendation (one word, with reasons) follows ``PRECEDENCE``::

    roll_back > keep_in_shadow > collect_more_data > ship

``roll_back``: a failed gate whose ``on_fail`` is ``roll_back`` (at or above its evidence
floor), or a significant regression against the baseline on such a gate measured at the same
evidence level in both runs; ``keep_in_shadow`` / ``collect_more_data``: a failed gate with that
``on_fail`` (``block`` in a matrix reads as ``keep_in_shadow``); ``collect_more_data`` also when
nothing failed but a gate could not be decided; ``ship`` only when every gate passes. The most
severe applicable action wins. ``voxassay duplex gate`` exits 0 only for ``ship`` (and, with the
matrix's ``allow_incomplete``, when nothing failed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.evidence import evidence_at_least
from voxassay.contracts.duplex.matrix import AcceptanceMatrix, Gate, OnFail, Statistic
from voxassay.stats.percentiles import quantile_bounds
from voxassay.suites.duplex.gate_baseline import _compare
from voxassay.suites.duplex.gate_types import (
    PRECEDENCE,
    QUANTILE,
    Check,
    GateReport,
    GateResult,
    GateStatus,
    GroupValue,
    Measurement,
    MetricTable,
    Recommendation,
    RowLabel,
    Unit,
)

__all__ = [
    "evaluate_matrix",
    "recommend",
]


def _implemented_names() -> set[str]:
    """Matrix names that resolve to something a voxassay scorer computes (IMPLEMENTED label):
    every computed metric, and every catalogue name or alias whose sources include one."""
    from voxassay.suites.duplex.scoring.implemented import implemented_metrics

    computed = {name for names in implemented_metrics().values() for name in names}
    names = set(computed)
    for m in catalogue.CATALOGUE:
        for candidate in (m.name, *m.aliases):
            sources = catalogue.gate_sources(candidate)
            if any(src.split(":", 1)[-1] in computed for src in sources):
                names.add(candidate)
    return names


# --------------------------------------------------------------------------- measurements


# --------------------------------------------------------------------------- from a scorecard


# --------------------------------------------------------------------------- gate results


# --------------------------------------------------------------------------- evaluation


def _failing_units(gate: Gate, m: Measurement) -> tuple[list[Unit], int]:
    """The items behind a metric that count as failures for this gate, and how many failures
    the report counts but does not locate (no item refs)."""
    cmp, t = gate.comparator, gate.threshold
    if m.kind == "latency":
        bad = [
            u
            for u in m.units
            if u.censored or (u.value_ms is not None and not gate.passes(u.value_ms))
        ]
        unlocated = max(0, m.n_censored - sum(1 for u in m.units if u.censored))
        return bad, unlocated
    if m.kind == "rate":
        if cmp in ("<=", "<") or (cmp == "==" and t == 0):
            bad = [u for u in m.units if u.event]
            expected = m.k or 0
        elif cmp in (">=", ">") or (cmp == "==" and t == 1):
            bad = [u for u in m.units if u.event is False]
            expected = m.n - (m.k or 0)
        else:
            bad = list(m.units)
            expected = m.n
        return bad, max(0, expected - len(bad))
    bad = [u for u in m.units if u.event]  # counted instances / events behind a value
    return bad, max(0, int(m.k or 0) - len(bad))


def fmt_value(v: float | None, unit: str = "") -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "censored"
    text = f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}".strip() if unit and unit not in ("fraction", "count") else text


def _zero_tolerance(gate: Gate, m: Measurement) -> bool:
    """``<= 0`` or ``== 0`` on events (a rate, a count, a value): "critical failures are 0"."""
    return gate.threshold == 0 and gate.comparator in ("<=", "==") and m.kind != "latency"


def _wholly(gate: Gate, lo: float | None, hi: float | None, *, failing: bool) -> bool:
    """Whether the interval ``[lo, hi]`` lies wholly on the failing (or passing) side of the
    gate's threshold; a missing bound decides nothing."""
    t = gate.threshold
    if failing:
        return {
            "<=": lo is not None and lo > t,
            "<": lo is not None and lo >= t,
            ">=": hi is not None and hi < t,
            ">": hi is not None and hi <= t,
            "==": lo is not None and hi is not None and (lo > t or hi < t),
        }[gate.comparator]
    return {
        "<=": hi is not None and hi <= t,
        "<": hi is not None and hi < t,
        ">=": lo is not None and lo >= t,
        ">": lo is not None and lo > t,
        "==": lo is not None and hi is not None and lo == hi == t,
    }[gate.comparator]


def _interval_fails(gate: Gate, m: Measurement) -> str | None:
    """The 95 % interval of the gate's statistic when it lies wholly on the failing side of the
    threshold (Wilson for rates; order-statistic bounds for percentiles, censored pairs as
    +inf), else None."""
    lo: float | None
    hi: float | None
    if m.kind == "latency" and gate.statistic in QUANTILE:
        values = sorted(
            math.inf if u.censored or u.value_ms is None else float(u.value_ms) for u in m.units
        )
        if not values:
            return None
        lo, hi = quantile_bounds(values, QUANTILE[gate.statistic])
    elif m.kind == "rate" and gate.statistic == Statistic.RATE and "rate" in m.ci:
        lo, hi = m.ci["rate"]
    else:
        return None
    failing = _wholly(gate, lo, hi, failing=True)
    return f"[{fmt_value(lo, gate.unit)}, {fmt_value(hi, gate.unit)}]" if failing else None


def _interval_unproven(gate: Gate, m: Measurement) -> str | None:
    """For a rate gate deciding on its interval (``decide_on: interval``, not zero-tolerance):
    the 95 % Wilson interval when it reaches past the threshold on the failing side (a point
    estimate that meets the threshold is then not yet a pass), else None."""
    if gate.decide_on != "interval" or m.kind != "rate" or gate.statistic != Statistic.RATE:
        return None
    if _zero_tolerance(gate, m) or "rate" not in m.ci:
        return None
    lo, hi = m.ci["rate"]
    if gate.comparator == "==" or _wholly(gate, lo, hi, failing=False):
        return None
    return f"[{fmt_value(lo, gate.unit)}, {fmt_value(hi, gate.unit)}]"


def _evaluate_gate(
    gate: Gate, table: MetricTable, implemented: set[str], basis: str = "derived"
) -> GateResult:
    row, tried = table.lookup(gate.metric)
    need = gate.required_n
    if row is None:
        known = gate.metric in implemented
        why = (
            f"no metric in this run measures {gate.metric!r} (looked for: {', '.join(tried)})"
            if known
            else f"nothing measures {gate.metric!r}: no voxassay scorer and no metric of this "
            f"run has that name (looked for: {', '.join(tried)})"
        )
        return GateResult(
            gate=gate,
            status=GateStatus.UNKNOWN,
            reasons=[why],
            label=RowLabel.IMPLEMENTED if known else RowLabel.UNKNOWN,
            level=None,
            source=None,
            value=None,
            n=None,
            preconditions=[
                Check("measured", False, why),
                Check("sample_size", None, "not checked: nothing measured"),
                Check("replayable", None, "not checked: nothing measured"),
                Check("versions_recorded", None, "not checked: nothing measured"),
            ],
            evidence=Check("evidence", None, "not checked: nothing measured"),
        )

    m = row.overall
    reasons: list[str] = []
    stat = m.statistic(gate.statistic)
    measured_ok = stat.applies
    measured = Check(
        "measured",
        measured_ok,
        f"{row.source} ({m.kind}, n = {m.n})"
        + ("" if stat.applies else f"; but {stat.note}: the gate cannot read it"),
    )
    if not stat.applies:
        reasons.append(f"{gate.metric} is measured as {row.source}, but {stat.note}")

    # groups: overall plus every value of every split key the gate asks for
    groups = [GroupValue(None, "all", m.n, stat.value, stat.note, None)]
    measured_by_group = [m]
    split_notes: list[str] = []
    for key in gate.split_by:
        values = row.splits.get(str(key))
        if not values:
            split_notes.append(f"the run records no {key} split: the whole sample is one {key}")
            continue
        for name, sm in sorted(values.items()):
            sv = sm.statistic(gate.statistic)
            groups.append(GroupValue(str(key), name, sm.n, sv.value, sv.note, None))
            measured_by_group.append(sm)
    short = [g for g in groups if g.n < need]
    if short:
        detail = "; ".join(f"{g.where}: n = {g.n} < {need}" for g in short)
        origin = (
            f"min_n {need} set by the matrix"
            if gate.min_n is not None
            else f"min_n {need}: the default for a {gate.statistic} gate; set min_n to change it"
        )
        reasons.append(
            f"too few samples for a {gate.statistic} gate ({detail}; {origin}): collect more data"
        )
    else:
        detail = f"n >= {need} in {len(groups)} group(s)"
    if split_notes:
        detail += "; " + "; ".join(split_notes)
    sample = Check("sample_size", not short, detail)

    # every failure behind the metric replayable
    bad_units, unlocated = _failing_units(gate, m)
    missing = table.unreplayable(bad_units)
    replay_ok = not missing and unlocated == 0
    if not bad_units and unlocated == 0:
        replay_detail = "no failures behind this metric"
    elif replay_ok:
        n_sess = len({u.session for u in bad_units})
        replay_detail = f"{len(bad_units)} failure(s) in {n_sess} session(s), all replayable"
    else:
        parts = []
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            parts.append(f"{len(missing)} session(s) with failures cannot be replayed ({shown})")
        if unlocated:
            parts.append(f"{unlocated} failure(s) the report does not locate in any session")
        replay_detail = "; ".join(parts)
        reasons.append(f"failures not replayable: {replay_detail}")
    replayable = Check("replayable", replay_ok, replay_detail)

    prov_problems = (
        table.provenance.problems()
        if table.provenance is not None
        else ["no run.json: versions and configuration are not recorded"]
    )
    versions = Check(
        "versions_recorded",
        not prov_problems,
        "; ".join(prov_problems) or "system specs, package versions and configuration recorded",
    )
    if prov_problems:
        reasons.append("run not reproducible: " + "; ".join(prov_problems))

    # evidence: derived, or declared where the gate counts recordings' declared provenance
    level, level_note, used_basis = row.evidence_level, row.evidence_note, "derived"
    if row.declared_level is not None and basis == "declared":
        level, level_note, used_basis = row.declared_level, row.declared_note, "declared"
    elif row.declared_level is not None:
        level_note += (
            f"; declared provenance ({row.declared_level}) not counted: the gate counts "
            "derived evidence only (evidence: derived)"
        )
    if level is None:
        ev_ok = False
        ev_detail = f"no evidence level ({level_note}); the gate needs {gate.min_evidence}"
    else:
        ev_ok = evidence_at_least(level, gate.min_evidence)
        word = "declared at" if used_basis == "declared" else "measured at"
        ev_detail = f"{word} {level} ({level_note}); the gate needs {gate.min_evidence}"
    if not ev_ok:
        reasons.append(f"evidence too weak: {ev_detail}")
    evidence = Check("evidence", ev_ok, ev_detail)

    # threshold, per group
    for g in groups:
        g.passes = gate.passes(g.value) if g.value is not None and stat.applies else None
    verdicts = [g.passes for g in groups]
    if any(v is False for v in verdicts):
        threshold_met: bool | None = False
    elif verdicts and all(v is True for v in verdicts):
        threshold_met = True
    else:
        threshold_met = None
    failing = [g for g in groups if g.passes is False]
    unit = gate.unit
    bound = f"{gate.comparator} {fmt_value(gate.threshold, unit)}"
    if threshold_met is False:
        where = ", ".join(f"{g.where} {fmt_value(g.value, unit)}" for g in failing)
        threshold_text = f"{gate.statistic} {where} not {bound}"
    elif threshold_met:
        threshold_text = f"{gate.statistic} {fmt_value(stat.value, unit)} {bound}"
    else:
        missing_vals = [g for g in groups if g.value is None]
        threshold_text = "no value to compare: " + "; ".join(
            sorted({g.note or "not reported" for g in missing_vals})
        )

    # the status table: a violated threshold fails at any evidence level; low evidence or a
    # small n can keep a good number from passing, never hide a bad one
    zero_tolerance = _zero_tolerance(gate, m)
    events = [g for g in groups if zero_tolerance and g.value is not None and g.value > 0]
    decided = [
        (g, b)
        for g, gm in zip(groups, measured_by_group, strict=True)
        if g.n < need and (b := _interval_fails(gate, gm)) is not None
    ]
    if not measured_ok:
        status = GateStatus.UNKNOWN
    elif threshold_met is False and not short:
        status = GateStatus.FAIL
    elif events:
        status = GateStatus.FAIL
        where = ", ".join(f"{g.where} {fmt_value(g.value, unit)}" for g in events)
        threshold_text = (
            f"zero-tolerance gate ({gate.statistic} {bound}): {where}; any event fails, whatever n"
        )
    elif decided:
        status = GateStatus.FAIL
        threshold_text = "; ".join(
            f"{g.where}: n = {g.n} < {need}, "
            f"but the 95 % interval {text} lies wholly on the failing side of {bound}"
            for g, text in decided
        )
    elif short:
        status = GateStatus.INSUFFICIENT_N
    elif not replay_ok or prov_problems or not ev_ok:
        status = GateStatus.INSUFFICIENT_EVIDENCE
    elif threshold_met is True and (
        unproven := [
            (g, b)
            for g, gm in zip(groups, measured_by_group, strict=True)
            if (b := _interval_unproven(gate, gm)) is not None
        ]
    ):
        status = GateStatus.INSUFFICIENT_N
        reasons.append(
            "insufficient evidence for a pass: "
            + "; ".join(
                f"{g.where} {fmt_value(g.value, unit)}, 95 % interval {text} reaches past {bound}"
                for g, text in unproven
            )
            + " (a rate gate passes when its whole interval meets the threshold: collect more "
            "data, or set decide_on: point to gate on the point estimate)"
        )
    elif threshold_met is True:
        status = GateStatus.PASS
    else:
        status = GateStatus.INSUFFICIENT_N
        reasons.append(threshold_text)
    if status in (GateStatus.PASS, GateStatus.FAIL):
        reasons.insert(0, threshold_text)
        if status == GateStatus.FAIL and not ev_ok:
            reasons.append(
                f"failed below the gate's evidence floor ({gate.min_evidence}): recommends at "
                "most keep_in_shadow"
            )
    elif threshold_met is not None and measured_ok:
        verdict = "would pass" if threshold_met else "would fail"
        reasons.append(f"threshold (not decisive): {threshold_text} ({verdict})")

    label = RowLabel.VERIFIED if m.n > 0 and level is not None else RowLabel.IMPLEMENTED
    return GateResult(
        gate=gate,
        status=status,
        reasons=reasons,
        label=label,
        level=level,
        source=row.source,
        value=stat.value,
        n=m.n,
        groups=groups,
        preconditions=[measured, sample, replayable, versions],
        evidence=evidence,
        threshold_met=threshold_met,
        evidence_basis=used_basis,
    )


# --------------------------------------------------------------------------- baseline


# --------------------------------------------------------------------------- decision


def recommend(results: Sequence[GateResult]) -> tuple[Recommendation, list[str]]:
    """The one recommendation (``PRECEDENCE``: most severe applicable action) and its reasons,
    most severe first."""
    found: list[tuple[Recommendation, str]] = []
    for r in results:
        g = r.gate
        if r.status == GateStatus.FAIL:
            action = (
                Recommendation.KEEP_IN_SHADOW
                if g.on_fail == OnFail.BLOCK
                else Recommendation(str(g.on_fail))
            )
            text = f"{g.id}: failed ({r.reasons[0]}); on_fail {g.on_fail}"
            if g.on_fail == OnFail.BLOCK:
                text += " (read as keep_in_shadow)"
            if g.mitigation:
                text += f"; mitigation: {g.mitigation}"
            below_floor = r.evidence is not None and r.evidence.ok is False
            if below_floor and PRECEDENCE.index(action) < PRECEDENCE.index(
                Recommendation.KEEP_IN_SHADOW
            ):
                action = Recommendation.KEEP_IN_SHADOW
                text += f"; below the evidence floor {g.min_evidence}: at most keep_in_shadow"
            found.append((action, text))
        elif r.status != GateStatus.PASS:
            why = "; ".join(r.reasons) or str(r.status)
            found.append((Recommendation.COLLECT_MORE_DATA, f"{g.id}: {r.status} ({why})"))
        b = r.baseline
        if b is not None and b.regression:
            text = (
                f"{g.id}: significant regression vs baseline ({fmt_value(b.current, g.unit)} "
                f"vs {fmt_value(b.baseline, g.unit)}, 95% CI of the difference "
                f"[{fmt_value(b.ci_low)}, {fmt_value(b.ci_high)}])"
            )
            if r.decisive_regression:
                found.append((Recommendation.ROLL_BACK, text + "; on_fail roll_back"))
            else:
                why = b.note if not b.comparable else f"on_fail is {g.on_fail}, not roll_back"
                found.append((Recommendation.SHIP, text + f"; noted, not decisive ({why})"))
    actions = {a for a, _ in found if a != Recommendation.SHIP}
    if not actions:
        rec = Recommendation.SHIP
        head = [f"all {len(results)} gate(s) pass"]
    else:
        rec = min(actions, key=PRECEDENCE.index)
        head = []
    ordered = sorted(found, key=lambda x: PRECEDENCE.index(x[0]))
    return rec, head + [text for _, text in ordered]


def evaluate_matrix(
    matrix: AcceptanceMatrix,
    table: MetricTable,
    *,
    baseline: MetricTable | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> GateReport:
    """Check every gate of ``matrix`` against ``table`` (preconditions, evidence, threshold),
    compare with ``baseline`` when given, and recommend one action (module docstring)."""
    from voxassay.core.runstore import utc_now

    implemented = _implemented_names()
    results = [_evaluate_gate(g, table, implemented, matrix.basis(g)) for g in matrix.gates]
    tradeoffs: dict[str, list[str]] = {}
    if baseline is not None:
        for r in results:
            cur_row, _ = table.lookup(r.gate.metric)
            base_row, _ = baseline.lookup(r.gate.metric)
            r.baseline = _compare(r.gate, cur_row, base_row, n_boot, seed)
        improved = [
            f"{r.gate.id} ({fmt_value(r.baseline.diff, r.gate.unit)})"
            for r in results
            if r.baseline and r.baseline.improved
        ]
        worsened = [
            f"{r.gate.id} ({fmt_value(r.baseline.diff, r.gate.unit)})"
            for r in results
            if r.baseline and r.baseline.regression
        ]
        tradeoffs = {"improved": improved, "worsened": worsened}
    rec, reasons = recommend(results)
    if tradeoffs.get("improved") and tradeoffs.get("worsened"):
        reasons.append(
            "trade-off vs baseline: improved "
            + ", ".join(tradeoffs["improved"])
            + " while worse "
            + ", ".join(tradeoffs["worsened"])
        )
    return GateReport(
        matrix_id=matrix.id,
        run_id=table.run_id,
        system=table.system,
        gates=results,
        recommendation=rec,
        reasons=reasons,
        baseline_run_id=baseline.run_id if baseline is not None else None,
        tradeoffs=tradeoffs,
        generated_at=utc_now(),
        allow_incomplete=matrix.allow_incomplete,
    )


# --------------------------------------------------------------------------- output
