"""Paired comparison of two runs (or of systems within one run) on the same items.

Every suite exposes ``paired_units(store)``: per system, per item, a (numerator,
denominator) pair of a ratio-of-sums metric (for ASR: errors and reference words). The
difference A - B is computed on the items both sides scored, with a paired bootstrap CI
(resampling speakers when every shared item has one), overall and per group.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from voxeval.core.errors import InputError
from voxeval.core.registry import REGISTRY
from voxeval.core.runstore import RunStore, new_run_id, utc_now
from voxeval.stats.intervals import paired_bootstrap_ratio_diff

TOP_ITEMS = 10


def _pairs(a: dict[str, Any], b: dict[str, Any], same_run: bool) -> list[tuple[str, str]]:
    sa, sb = sorted(a["units"]), sorted(b["units"])
    if same_run:
        return list(itertools.combinations(sa, 2))
    shared = [s for s in sa if s in sb]
    if shared:
        return [(s, s) for s in shared]
    return [(x, y) for x in sa for y in sb]


def compare_runs(
    run_a: str | Path, run_b: str | Path, *, seed: int = 0, metric: str | None = None
) -> dict[str, Any]:
    """Paired differences (A minus B) for every system pairing of two runs; ``metric``
    picks one of the suite's paired metrics (its default when None)."""
    store_a, store_b = RunStore.open(run_a), RunStore.open(run_b)
    suite_a, suite_b = store_a.info().get("suite"), store_b.info().get("suite")
    if suite_a != suite_b:
        raise InputError(f"cannot compare a {suite_a!r} run with a {suite_b!r} run")
    suite = REGISTRY.suite(str(suite_a))
    if suite.paired_units is None:
        raise InputError(f"suite {suite_a!r} does not support paired comparison")
    same = store_a.path.resolve() == store_b.path.resolve()
    options = {"metric": metric} if metric else {}
    ua = suite.paired_units(store_a, **options)
    ub = ua if same else suite.paired_units(store_b, **options)
    comparisons = []
    for sys_a, sys_b in _pairs(ua, ub, same):
        comparisons.append(_compare_units(ua, ub, sys_a, sys_b, seed))
    if not comparisons:
        raise InputError("nothing to compare: the runs have no scored systems in common")
    return {
        "kind": "compare",
        "suite": suite_a,
        "metric": ua["metric"],
        "lower_is_better": ua["lower_is_better"],
        "run_a": store_a.run_id,
        "run_b": store_b.run_id,
        "generated_at": utc_now(),
        "comparisons": comparisons,
        "method": "difference A - B of a ratio of sums over shared items; 95 % paired "
        "bootstrap CI (same resample for both arms; clusters = speakers, an item without a "
        "speaker is its own cluster); two-sided bootstrap p-value (0 means < 1/1000 draws)",
    }


def _compare_units(
    ua: dict[str, Any], ub: dict[str, Any], sys_a: str, sys_b: str, seed: int
) -> dict[str, Any]:
    xa, xb = ua["units"][sys_a], ub["units"][sys_b]
    shared = sorted(set(xa) & set(xb))
    clusters_map = {**ub.get("clusters", {}), **ua.get("clusters", {})}
    known = sum(1 for i in shared if clusters_map.get(i))
    ci_unit = "speaker" if known == len(shared) else ("item" if known == 0 else "speaker+item")

    def diff(ids: list[str]) -> dict[str, Any]:
        # an item without a speaker is its own cluster (the same rule as the reports)
        cl = [clusters_map.get(i) or f"item:{i}" for i in ids]
        if len(set(cl)) == 1 and len(ids) > 1:
            cl = [f"item:{i}" for i in ids]
        d = paired_bootstrap_ratio_diff(
            [xa[i][0] for i in ids],
            [xa[i][1] for i in ids],
            [xb[i][0] for i in ids],
            [xb[i][1] for i in ids],
            cl,
            seed=seed,
        )
        return {
            "a": d.a,
            "b": d.b,
            "diff": d.diff,
            "ci_lo": d.ci_lo,
            "ci_hi": d.ci_hi,
            "p_value": d.p_value,
            "n": d.n,
        }

    groups: dict[tuple[str, str], list[str]] = {}
    for i in shared:
        for g, name in (ua.get("groups", {}).get(i) or {}).items():
            groups.setdefault((g, str(name)), []).append(i)
    per_item = sorted(
        (
            {
                "id": i,
                "a": xa[i][0] / xa[i][1] if xa[i][1] else None,
                "b": xb[i][0] / xb[i][1] if xb[i][1] else None,
                "diff_errors": xa[i][0] - xb[i][0],
            }
            for i in shared
        ),
        key=lambda r: (-abs(r["diff_errors"]), r["id"]),
    )
    return {
        "system_a": sys_a,
        "system_b": sys_b,
        "n_shared": len(shared),
        "only_a": len(set(xa) - set(xb)),
        "only_b": len(set(xb) - set(xa)),
        "ci_unit": ci_unit,
        "overall": diff(shared) if shared else None,
        "groups": [{"group": g, "name": n, **diff(ids)} for (g, n), ids in sorted(groups.items())],
        "largest_item_differences": per_item[:TOP_ITEMS],
    }


def render_compare_markdown(result: dict[str, Any]) -> str:
    from voxeval.report.markdown import md_table

    lines = [
        f"# Compare {result['run_a']} (A) vs {result['run_b']} (B)\n",
        f"Metric `{result['metric']}` ({'lower' if result['lower_is_better'] else 'higher'} is better). "
        f"{result['method']}.\n",
    ]
    headers = ["group", "name", "A", "B", "A - B", "95% CI", "p", "n"]
    for c in result["comparisons"]:
        lines.append(f"\n## A: {c['system_a']} vs B: {c['system_b']}\n")
        lines.append(
            f"{c['n_shared']} shared items (only in A: {c['only_a']}, only in B: {c['only_b']}); "
            f"CI resamples {c['ci_unit']}s.\n"
        )
        rows = []
        for g in (
            [{"group": "overall", "name": "all", **c["overall"]}] if c["overall"] else []
        ) + c["groups"]:
            rows.append(
                [
                    g["group"],
                    g["name"],
                    g["a"],
                    g["b"],
                    g["diff"],
                    f"[{g['ci_lo']:.4f}, {g['ci_hi']:.4f}]" if g["ci_lo"] is not None else "–",
                    g["p_value"],
                    g["n"],
                ]
            )
        lines.append(md_table(headers, rows))
    return "\n".join(lines)


def write_compare(result: dict[str, Any], out: str | Path) -> Path:
    """Write ``compare.json`` and ``compare.md`` into ``out/<compare_id>/``."""
    from voxeval.report.writer import json_safe

    path = Path(out) / new_run_id("compare")
    path.mkdir(parents=True)
    (path / "compare.json").write_text(json.dumps(json_safe(result), indent=2), encoding="utf-8")
    (path / "compare.md").write_text(render_compare_markdown(json_safe(result)), encoding="utf-8")
    return path
