"""Paired comparison of two runs (or of systems within one run) on the same items.

Every suite exposes ``paired_units(store)``: per system, per item, a (numerator,
denominator) pair of a ratio-of-sums metric (for ASR: errors and reference words). The
difference A - B is computed on the items both sides scored, with a paired bootstrap CI
(resampling speakers when every shared item has one), overall and per group.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.registry import REGISTRY
from voxassay.core.runstore import RunStore, new_run_id, utc_now
from voxassay.stats.intervals import paired_bootstrap_ratio_diff

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
        "speaker is its own cluster); p: exact permutation over the 2^k swaps of A and B "
        "within units for 12 units or fewer (with the smallest p k units can give), else "
        "two-sided bootstrap (0 means < 1/1000 draws); one unit: no CI and no p",
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
            "p_method": d.p_method,
            "p_min": d.p_min,
            "units": d.units,
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


HEADERS = ["group", "name", "A", "B", "A - B", "95% CI", "p", "units", "n"]


def _p_text(g: dict[str, Any]) -> str:
    p = g.get("p_value")
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "not estimable"
    if g.get("p_method") == "exact permutation":
        return f"{p:.4g} exact (min {g.get('p_min'):.3g})"
    return f"{p:.4g}"


def _ci_text(g: dict[str, Any]) -> str:
    lo, hi = g.get("ci_lo"), g.get("ci_hi")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return "not estimable (one unit)" if g.get("units") == 1 else "–"
    return f"[{lo:.4f}, {hi:.4f}]"


def _rows(c: dict[str, Any]) -> list[list[Any]]:
    out = []
    for g in ([{"group": "overall", "name": "all", **c["overall"]}] if c["overall"] else []) + c[
        "groups"
    ]:
        out.append(
            [
                g["group"],
                g["name"],
                g["a"],
                g["b"],
                g["diff"],
                _ci_text(g),
                _p_text(g),
                g.get("units"),
                g["n"],
            ]
        )
    return out


def _finding(result: dict[str, Any], c: dict[str, Any]) -> str:
    """One sentence per pairing: who is better overall, or that the interval includes 0."""
    o = c.get("overall")
    if not o:
        return f"{c['system_a']} vs {c['system_b']}: no shared items."
    lo, hi = o.get("ci_lo"), o.get("ci_hi")
    if lo is None or (isinstance(lo, float) and math.isnan(lo)):
        return (
            f"{c['system_a']} vs {c['system_b']}: A - B = {o['diff']:.4f} on {o['n']} shared "
            f"item(s) in {o.get('units')} unit(s): too few to tell (no interval, no p)."
        )
    p = _p_text(o)
    if lo <= 0 <= hi:
        return (
            f"{c['system_a']} vs {c['system_b']}: no clear difference (A - B = {o['diff']:.4f}, "
            f"95 % CI [{lo:.4f}, {hi:.4f}] includes 0; p {p}; {o['n']} items)."
        )
    if o.get("p_method") == "exact permutation" and float(o["p_value"]) > 0.05:
        return (
            f"{c['system_a']} vs {c['system_b']}: A - B = {o['diff']:.4f}, 95 % CI "
            f"[{lo:.4f}, {hi:.4f}], but the exact p is {p} with {o.get('units')} units: too "
            "few units to call a winner."
        )
    lower_better = bool(result["lower_is_better"])
    a_better = (o["diff"] < 0) == lower_better
    better = c["system_a"] if a_better else c["system_b"]
    return (
        f"{better} is better on {result['metric']}: A - B = {o['diff']:.4f} "
        f"[{lo:.4f}, {hi:.4f}], p {p}, {o['n']} items."
    )


def compare_document(result: dict[str, Any]) -> Any:
    """The comparison as a report document: one sentence per pairing first, then per pairing
    the table overall and per group, and the items that differ most."""
    from voxassay.report.document import Document, Summary, Table, Text

    doc = Document(
        title=f"Compare {result['run_a']} (A) vs {result['run_b']} (B)",
        summary=Summary([_finding(result, c) for c in result["comparisons"]][:5]),
        meta=f"Metric {result['metric']} ({'lower' if result['lower_is_better'] else 'higher'} "
        "is better)",
    )
    doc.section("Method", Text(f"{result['method']}."))
    for c in result["comparisons"]:
        sec = doc.section(
            f"A: {c['system_a']} vs B: {c['system_b']}",
            Text(
                f"{c['n_shared']} shared items (only in A: {c['only_a']}, only in B: "
                f"{c['only_b']}); CI resamples {c['ci_unit']}s."
            ),
            Table(HEADERS, _rows(c), left=2),
        )
        items = c.get("largest_item_differences") or []
        if items:
            sec.sub(
                "Largest item differences",
                Table(
                    ["item", "A", "B", "errors A - B"],
                    [[r["id"], r["a"], r["b"], r["diff_errors"]] for r in items],
                ),
            )
    return doc


def render_compare_markdown(result: dict[str, Any]) -> str:
    from voxassay.report.render import to_markdown

    return to_markdown(compare_document(result))


def render_compare_text(result: dict[str, Any]) -> str:
    """The paired summary for a terminal: per pairing its finding and an aligned table."""
    out = []
    for c in result["comparisons"]:
        out.append(_finding(result, c))
        rows = [[_cell(v) for v in r] for r in _rows(c)]
        widths = (
            [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)] if rows else []
        )
        if rows:
            out.append("  " + "  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)))
            out += [
                "  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows
            ]
        out.append("")
    return "\n".join(out)


def _cell(v: Any) -> str:
    from voxassay.report.html import fmt

    return fmt(v, 4) if isinstance(v, float) else str(v)


def write_compare(result: dict[str, Any], out: str | Path) -> Path:
    """Write ``compare.json``, ``compare.md`` and ``compare.html`` into ``out/<compare_id>/``."""
    from voxassay.report.render import to_html
    from voxassay.report.writer import json_safe

    path = Path(out) / new_run_id("compare")
    path.mkdir(parents=True)
    safe = json_safe(result)
    (path / "compare.json").write_text(json.dumps(safe, indent=2), encoding="utf-8")
    (path / "compare.md").write_text(render_compare_markdown(safe), encoding="utf-8")
    (path / "compare.html").write_text(to_html(compare_document(safe)), encoding="utf-8")
    return path
