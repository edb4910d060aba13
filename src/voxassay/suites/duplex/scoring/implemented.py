"""The metrics voxassay's duplex scorers compute, by scorer (every one is in the catalogue)."""

from __future__ import annotations

from voxassay.suites.duplex.scoring.latency_pairs import DEFAULT_PAIRS
from voxassay.suites.duplex.scoring.recovery import CASE_RATES
from voxassay.suites.duplex.scoring.task import CHECKS, COUNT_NAMES
from voxassay.suites.duplex.scoring.turn_metrics import TURN_METRICS

__all__ = ["implemented_metrics"]


def implemented_metrics() -> dict[str, tuple[str, ...]]:
    """Scorer -> the metric names it computes (latency pairs, turn layer, task checks and
    counts, recovery cases)."""
    return {
        "latency": tuple(d.name for d in DEFAULT_PAIRS),
        "turns": TURN_METRICS,
        "task": (*CHECKS, *COUNT_NAMES),
        "recovery": CASE_RATES,
    }
