"""The Scorecard is report.json: real reports load into it and dump back unchanged, the
exported JSON Schema accepts them, and a report that breaks the contract is refused."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.suites.duplex.test_goldens import leaves, same
from voxassay.contracts.duplex.schemas import json_schema
from voxassay.contracts.duplex.scorecard import Scorecard

GOLDEN = Path(__file__).parents[1] / "golden" / "duplex"


def _golden(name: str) -> dict:
    with gzip.open(GOLDEN / f"{name}.report.json.gz", "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    if "calls" in doc:  # recordings reports before the Scorecard named them calls
        doc["sessions"] = doc.pop("calls")
    return doc


@pytest.mark.parametrize("name", ["careful", "stereo"])
def test_a_report_round_trips_through_the_scorecard(name: str) -> None:
    doc = _golden(name)
    card = Scorecard.model_validate(doc)
    assert card.system().overall.latencies or card.system().overall.rates
    before, after = leaves(doc), leaves(card.dump())
    assert before.keys() == after.keys()
    assert all(same(before[k], after[k]) for k in before)


def test_the_exported_schema_accepts_real_reports() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema("scorecard")
    for name in ("careful", "stereo"):
        jsonschema.validate(_golden(name), schema)


def test_a_report_that_breaks_the_contract_is_refused() -> None:
    doc = _golden("stereo")
    del doc["systems"][0]["system"]
    with pytest.raises(ValidationError):
        Scorecard.model_validate(doc)
    doc = _golden("stereo")
    doc["systems"][0]["overall"]["rates"]["false_yield_rate"]["n"] = "many"
    with pytest.raises(ValidationError):
        Scorecard.model_validate(doc)


def test_gate_json_is_a_gate_record() -> None:
    """gate.json (and report.json's ``gate``) follows the GateRecord contract; a record with
    an unknown recommendation is refused."""
    from voxassay.contracts.duplex.gate_record import GateRecord

    with gzip.open(GOLDEN / "careful.gate.json.gz", "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    record = GateRecord.model_validate(doc)
    assert record.recommendation == doc["recommendation"] and len(record.gates) == len(doc["gates"])
    assert leaves(record.dump()).keys() == leaves(doc).keys()
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json_schema("gate"))
    doc["recommendation"] = "ship it"
    with pytest.raises(ValidationError):
        GateRecord.model_validate(doc)


def test_views_read_the_scorecard() -> None:
    """The duplex views take the Scorecard (report.json's content is validated into one):
    the same page either way, and a report that breaks the contract is refused, not drawn."""
    from voxassay.suites.duplex.views import render_html, render_markdown

    doc = _golden("stereo")
    card = Scorecard.model_validate(doc)
    assert render_markdown(card) == render_markdown(doc)
    assert render_html(card) == render_html(doc)
    assert render_markdown(card).startswith("# Full-duplex turn-taking")
    doc["systems"][0]["overall"]["rates"]["false_yield_rate"]["k"] = "some"
    with pytest.raises(ValidationError):
        render_markdown(doc)
