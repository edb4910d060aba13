"""Each system of a duplex run checked against the run's acceptance matrix, into its Scorecard.

``duplex run`` keeps the matrix it applies (the example matrix unless ``--matrix`` names
another) in ``run.json`` as ``matrix``; the report built from the run then carries, per
system, the ``GateRecord`` (the one recommendation and every gate), so the duplex report
ends in its recommendation whether or not gate files were asked for.
"""

from __future__ import annotations

from typing import Any

from voxassay.contracts.duplex.matrix import AcceptanceMatrix
from voxassay.contracts.duplex.scorecard import Scorecard
from voxassay.core.runstore import RunStore

__all__ = ["gate_systems", "run_matrix"]


def run_matrix(info: dict[str, Any]) -> tuple[AcceptanceMatrix, str | None] | None:
    """The matrix a run keeps in ``run.json`` and where it came from (None: none kept)."""
    kept = info.get("matrix")
    if not isinstance(kept, dict) or not isinstance(kept.get("doc"), dict):
        return None
    source = kept.get("source")
    return AcceptanceMatrix.model_validate(kept["doc"]), str(source) if source else None


def gate_systems(card: Scorecard, store: RunStore) -> Scorecard:
    """Set ``gate`` on every system of ``card`` from the run's matrix (unchanged when the
    run keeps none); returns ``card``."""
    from voxassay.suites.duplex.gate_table import metric_table_from_report
    from voxassay.suites.duplex.gates import evaluate_matrix

    info = store.info()
    kept = run_matrix(info)
    if kept is None:
        return card
    matrix, _ = kept
    for system in card.systems:
        table = metric_table_from_report(
            card, run_dir=store.path, run_info=info, system=system.system
        )
        system.gate = evaluate_matrix(matrix, table).to_record()
    return card
