"""Per-unit errors and opportunities of a duplex run for ``voxassay compare`` (behaviour, task or the acceptance sum), units paired across runs by scenario and repeat (bundles) or call id (recordings)."""

from __future__ import annotations

from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.runstore import RunStore
from voxassay.suites.duplex.scoring.session_score import SessionScore
from voxassay.suites.duplex.scoring.stereo import CallInput

__all__ = ["paired_units"]


def paired_units(store: RunStore, metric: str = "behaviour") -> dict[str, Any]:
    """Per (system, unit): ``(errors, opportunities)`` for ``voxassay compare``.

    ``metric="behaviour"``: wrong turn decisions / decision points (``behaviour_accuracy``'s
    complement, latency-free). ``metric="task"``: failed task checks / scored task checks
    (bundle runs). ``metric="acceptance"`` (bundle runs): the sum of the three kinds of
    judged outcome, (wrong decisions + failed task checks + failed history-consistency and
    recovery cases) / (decision points + scored checks + assessable cases). Units pair the two runs: a bundle's scenario id and repeat
    (``<scenario>#<repeat>``), a recording's call id. Clusters: the scenario (repeats of one
    scenario resample together); groups: category and route.
    """

    if metric not in ("behaviour", "task", "acceptance"):
        raise InputError(f"unknown paired metric {metric!r} (behaviour, task or acceptance)")
    config = store.info().get("config") or {}
    bundles = config.get("mode") == "bundles"
    items = {it.id: it for it in store.items()}
    units: dict[str, dict[str, tuple[float, float]]] = {}
    clusters: dict[str, str] = {}
    groups: dict[str, dict[str, str]] = {}
    for r in store.load_records().records:
        if r.status != "ok":
            continue
        if bundles:
            unit = str(r.output.get("unit") or r.id)
            meta = r.output.get("meta") or {}
            sc = r.output.get("scenario") or {}
            clusters[unit] = str(sc.get("id") or r.id)
            groups[unit] = {
                "category": str(meta.get("category") or "unknown"),
                "route": str(meta.get("route") or "unknown"),
            }
            checks = [
                c
                for c in (r.output.get("task") or {}).get("checks", [])
                if c.get("passed") is not None
            ]
            if metric == "task":
                if checks:
                    fails = sum(1 for c in checks if c["passed"] is False)
                    units.setdefault(r.system, {})[unit] = (float(fails), float(len(checks)))
                continue
            analysis = SessionScore.of(r).analysis(r.id)
            if metric == "acceptance":
                acc = analysis.rates["behaviour_accuracy"]
                cases = [
                    c
                    for key in ("history_consistency", "recovery_accuracy")
                    for c in (r.output.get(key) or {}).get("cases", [])
                    if c.get("passed") is not None
                ]
                bad = (acc.n - acc.k) + sum(1 for c in checks if c["passed"] is False)
                bad += sum(1 for c in cases if c["passed"] is False)
                n = acc.n + len(checks) + len(cases)
                if n:
                    units.setdefault(r.system, {})[unit] = (float(bad), float(n))
                continue
        else:
            if metric in ("task", "acceptance"):
                raise InputError("recordings runs have no task results: use metric behaviour")
            unit = r.id
            labels = CallInput.from_item(items[r.id]).labels if r.id in items else []
            analysis = SessionScore.of(r).analysis(r.id, labels)
        acc = analysis.rates["behaviour_accuracy"]
        if acc.n:
            units.setdefault(r.system, {})[unit] = (float(acc.n - acc.k), float(acc.n))
    return {
        "metric": {
            "behaviour": "behaviour_error_rate",
            "task": "task_check_failure_rate",
            "acceptance": "acceptance_error_rate",
        }[metric],
        "lower_is_better": True,
        "units": units,
        "clusters": clusters,
        "groups": groups,
    }
