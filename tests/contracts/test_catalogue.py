"""The duplex metric catalogue is the one place a metric is defined: what the scorers compute,
the report's rows, the gates' name lookup and docs/metrics.md all come from it."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import REPO
from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.catalogue import MetricDef
from voxassay.suites.duplex.report_rows import metric_rows
from voxassay.suites.duplex.scoring.history import HISTORY_DEFINITION, HISTORY_TOLERANCE_MS
from voxassay.suites.duplex.scoring.implemented import implemented_metrics
from voxassay.suites.duplex.scoring.latency_pairs import DEFAULT_PAIRS
from voxassay.suites.duplex.scoring.turn_metrics import DEFINITIONS

KIND_OF_SCORER = {
    "latency": {"latency"},
    "turns": {"latency", "rate"},
    "task": {"check", "count"},
    "recovery": {"rate"},
}


def test_every_computed_metric_is_defined_in_the_catalogue_with_its_kind() -> None:
    for scorer, names in implemented_metrics().items():
        for name in names:
            kinds = {m.kind for m in catalogue.CATALOGUE if m.name == name}
            assert kinds & KIND_OF_SCORER[scorer], f"{scorer} computes {name!r}: not catalogued"


def test_scorers_take_their_definitions_from_the_catalogue() -> None:
    for d in DEFAULT_PAIRS:
        assert d.description == catalogue.definition(d.name)
    for name, text in DEFINITIONS.items():
        assert text == catalogue.definition(name)
    assert f"{HISTORY_TOLERANCE_MS:.0f} ms" in HISTORY_DEFINITION  # the text states the rule


def test_names_and_aliases_resolve_to_one_metric() -> None:
    owners: dict[str, set[str]] = {}
    for m in catalogue.CATALOGUE:
        for alias in m.aliases:
            owners.setdefault(alias, set()).add(m.name)
    assert all(len(v) == 1 for v in owners.values()), owners
    assert catalogue.get("grounded_completion").name == "goal_completion"  # type: ignore[union-attr]
    assert catalogue.gate_sources("grounded_completion") == (
        "grounded_completion",
        "goal_completion",
    )
    assert catalogue.gate_sources("false_takeover_per_hour") == (
        "false_takeover_per_hour",
        "per_hour:premature_takeover_rate",
    )
    assert catalogue.gate_sources("not_a_metric") == ("not_a_metric",)


def test_a_check_and_the_count_of_the_same_name_point_opposite_ways() -> None:
    assert catalogue.higher_is_better("duplicate_side_effects") is True  # the pass rate
    assert catalogue.higher_is_better("duplicate_side_effects", "count") is False
    assert catalogue.higher_is_better("response_first_audio_ms") is False
    assert catalogue.higher_is_better("correct_yield_rate") is True


def test_docs_metrics_md_is_generated_from_the_catalogue() -> None:
    committed = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert committed == catalogue.markdown(), (
        "docs/metrics.md is stale: run `voxassay duplex metrics --out docs/metrics.md`"
    )


def test_a_metric_added_only_to_the_catalogue_reaches_rows_gates_and_docs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    new = MetricDef(
        name="echo_leak_rate",
        kind="rate",
        group="behaviour",
        unit="rate",
        definition="k / n; k = agent turns that answered its own echo; n = agent turns",
        denominator="agent turns",
        aliases=("self_answer_rate",),
    )
    monkeypatch.setattr(catalogue, "CATALOGUE", [*catalogue.CATALOGUE, new])
    rows = {r["name"]: r for r in metric_rows({"latencies": {}, "rates": {}}, {})}
    row = rows["echo_leak_rate"]
    assert row["group"] == "behaviour" and row["label_text"] == "NOT ASSESSABLE"
    assert row["n"] == 0 and row["summary"] == "–"  # not assessable, never a 0 rate
    assert catalogue.gate_sources("self_answer_rate") == ("self_answer_rate", "echo_leak_rate")
    assert (
        "`echo_leak_rate`" in catalogue.markdown() and "`self_answer_rate`" in catalogue.markdown()
    )


def test_the_catalogue_prints_as_json() -> None:
    import json

    from click.testing import CliRunner

    from voxassay.cli.main import cli

    out = CliRunner().invoke(cli, ["duplex", "metrics", "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert [m["name"] for m in body] == [m.name for m in catalogue.CATALOGUE]
    assert body[0] == json.loads(json.dumps(dataclasses.asdict(catalogue.CATALOGUE[0])))
