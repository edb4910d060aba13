"""The versioned JSON Schemas of the duplex contracts (committed under ``schemas/``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
)

from voxassay.contracts.duplex.common import (
    EVENT_SCHEMA_VERSION,
    MANIFEST_SCHEMA_VERSION,
    MATRIX_SCHEMA_VERSION,
    SCENARIO_SCHEMA_VERSION,
)
from voxassay.contracts.duplex.event import (
    Event,
)
from voxassay.contracts.duplex.gate_record import GATE_RECORD_SCHEMA_VERSION, GateRecord
from voxassay.contracts.duplex.manifest import (
    BundleManifest,
)
from voxassay.contracts.duplex.matrix import (
    AcceptanceMatrix,
    SchemaKind,
)
from voxassay.contracts.duplex.provenance import PROVENANCE_SCHEMA_VERSION, DeclaredProvenance
from voxassay.contracts.duplex.scenario import (
    Scenario,
)
from voxassay.contracts.duplex.scorecard import SCORECARD_SCHEMA_VERSION, Scorecard

SCHEMA_KINDS: tuple[SchemaKind, ...] = (
    "scenario",
    "event",
    "manifest",
    "provenance",
    "matrix",
    "scorecard",
    "gate",
)
_SCHEMA_MODELS: dict[str, tuple[type[BaseModel], int, str]] = {
    "scenario": (Scenario, SCENARIO_SCHEMA_VERSION, "voxassay full-duplex scenario"),
    "event": (Event, EVENT_SCHEMA_VERSION, "voxassay full-duplex ledger event (one JSONL line)"),
    "manifest": (BundleManifest, MANIFEST_SCHEMA_VERSION, "voxassay evidence bundle manifest"),
    "provenance": (
        DeclaredProvenance,
        PROVENANCE_SCHEMA_VERSION,
        "voxassay declared provenance of a recording (provenance.json)",
    ),
    "matrix": (AcceptanceMatrix, MATRIX_SCHEMA_VERSION, "voxassay acceptance matrix"),
    "scorecard": (Scorecard, SCORECARD_SCHEMA_VERSION, "voxassay duplex scorecard (report.json)"),
    "gate": (GateRecord, GATE_RECORD_SCHEMA_VERSION, "voxassay duplex gate record (gate.json)"),
}
SCHEMAS_DIR = Path(__file__).parent / "schemas"


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` with a versioned ``$id``."""
    model, version, title = _SCHEMA_MODELS[kind]
    body = model.model_json_schema()
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:voxassay:duplex:{kind}:v{version}",
        "title": title,
        **body,
    }


def json_schemas(kinds: Iterable[str] = SCHEMA_KINDS) -> dict[str, dict[str, Any]]:
    return {k: json_schema(k) for k in kinds}


def schema_text(kind: str) -> str:
    """The schema as committed: two-space JSON with a trailing newline."""
    return json.dumps(json_schema(kind), indent=2, ensure_ascii=False) + "\n"


def export_schemas(out_dir: Path, kinds: Iterable[str] = SCHEMA_KINDS) -> list[Path]:
    """Write ``<kind>.json`` into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in kinds:
        path = out_dir / f"{kind}.json"
        path.write_text(schema_text(kind), encoding="utf-8")
        paths.append(path)
    return paths
