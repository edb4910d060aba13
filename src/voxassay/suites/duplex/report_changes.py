"""What changed against a baseline run: system versions, configuration, scenario set and category mix, and every metric both runs measured (current - baseline with the 95 % interval of ``stats.comparison``, the one the gates use), with the trade-offs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from voxassay.contracts.duplex import catalogue
from voxassay.stats.comparison import quantile_difference, rate_difference
from voxassay.suites.duplex.report_rows import _session

__all__ = ["percentile_diff", "what_changed"]


def _opportunities_by_session(entry: Mapping[str, Any]) -> dict[str, tuple[int, int]] | None:
    """(k, n) per session of a rate or check entry from its ``denominator`` refs (``events``
    are the hits); None when the entry does not list every opportunity."""
    listed = [str(r) for r in entry.get("denominator") or []]
    if not listed or len(listed) != int(entry.get("n") or 0):
        return None
    hits = {str(r) for r in entry.get("events") or []}
    out: dict[str, tuple[int, int]] = {}
    for ref in listed:
        k, n = out.get(_session(ref), (0, 0))
        out[_session(ref)] = (k + (ref in hits), n + 1)
    return out


def percentile_diff(
    a: Sequence[Mapping[str, Any]],
    b: Sequence[Mapping[str, Any]],
    q: float,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """``P_q(a) - P_q(b)`` of two runs' latency pairs (``values`` entries; censored = +inf)
    with the 95 % interval of ``stats.comparison.quantile_difference`` (sessions paired when
    both runs hold the same ones). None when either side has no pairs."""

    def by_session(vals: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for v in vals:
            x = v.get("value_ms")
            s = str(v.get("session") or _session(str(v.get("ref"))))
            out.setdefault(s, []).append(math.inf if v.get("censored") or x is None else float(x))
        return out

    d = quantile_difference(by_session(a), by_session(b), q, n_boot=n_boot, seed=seed)
    if d is None:
        return None
    return {
        "current": d.current,
        "baseline": d.baseline,
        "diff": d.diff,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "method": d.method,
    }


def _verdict(name: str, diff: float | None, lo: float | None, hi: float | None) -> str:
    """``improved`` / ``regressed`` when the CI lies on one side of 0, ``better`` / ``worse``
    when only the point estimate moved, ``same`` or ``unknown``."""
    if diff is None:
        return "unknown"
    good = (diff > 0) == catalogue.higher_is_better(name)
    if lo is not None and hi is not None and (lo > 0 or hi < 0):
        return "improved" if good else "regressed"
    if diff == 0:
        return "same"
    return "better" if good else "worse"


def _system_pairs(
    cur: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Same-named systems; else, when both runs hold one system each, those two."""
    by_name = {s["system"]: s for s in base}
    pairs = [(s, by_name[s["system"]]) for s in cur if s["system"] in by_name]
    if not pairs and len(cur) == 1 and len(base) == 1:
        pairs = [(cur[0], base[0])]
    return pairs


def what_changed(
    report: Mapping[str, Any], base: Mapping[str, Any], baseline: str, *, n_boot: int = 1000
) -> dict[str, Any]:
    """Differences from a baseline run: system versions, configuration, scenario set and
    versions, category mix, and every metric both runs measured (current - baseline with a
    95 % CI of ``stats.comparison``, sessions paired when both runs hold the same ones). A
    trade-off is a metric that improved (CI on the better side of 0) next to one that
    regressed (CI on the worse side). ``base`` is the baseline run's report, ``baseline``
    where it came from."""
    out: dict[str, Any] = {"baseline": str(baseline), "baseline_run_id": base.get("run_id")}
    if base.get("mode") != "bundles":
        out["note"] = "the baseline is not a bundle run: only its metrics are compared"
        bcomp: dict[str, Any] = {}
    else:
        bcomp = base.get("composition") or {}
    ccomp = report.get("composition") or {}
    out["system_versions"] = {
        "current": ccomp.get("system_versions", []),
        "baseline": bcomp.get("system_versions", []),
        "changed": ccomp.get("system_versions", []) != bcomp.get("system_versions", []),
    }
    cfg: list[dict[str, Any]] = []
    csys, bsys = ccomp.get("systems") or {}, bcomp.get("systems") or {}
    named = [(n, n) for n in csys if n in bsys]
    if not named and len(csys) == 1 and len(bsys) == 1:
        named = [(next(iter(csys)), next(iter(bsys)))]
    for cn, bn in named:
        cc, bc = csys[cn]["configs"], bsys[bn]["configs"]
        if cc == bc:
            continue
        keys = sorted(
            {
                k
                for x in (*cc, *bc)
                if isinstance(x, dict)
                for k in x
                if any(isinstance(y, dict) and y.get(k) != x.get(k) for y in (*cc, *bc))
            }
        )
        cfg.append(
            {
                "system": cn if cn == bn else f"{bn} -> {cn}",
                "current": cc,
                "baseline": bc,
                "keys": keys,
            }
        )
    unmatched = sorted(set(csys) - {c for c, _ in named})
    if unmatched:
        out["unmatched_systems"] = unmatched
    out["config"] = cfg
    cs, bs = ccomp.get("scenarios") or {}, bcomp.get("scenarios") or {}
    out["scenarios"] = {
        "added": sorted(set(cs) - set(bs)),
        "removed": sorted(set(bs) - set(cs)),
        "version_changed": {
            k: {"current": cs[k], "baseline": bs[k]}
            for k in sorted(set(cs) & set(bs))
            if cs[k] != bs[k]
        },
    }
    cc_, bc_ = ccomp.get("categories") or {}, bcomp.get("categories") or {}
    out["category_mix"] = {
        k: {"current": cc_.get(k, 0), "baseline": bc_.get(k, 0)}
        for k in sorted(set(cc_) | set(bc_))
    }
    out["category_mix_changed"] = any(
        v["current"] != v["baseline"] for v in out["category_mix"].values()
    )
    comparisons = []
    for cur, old in _system_pairs(report.get("systems") or [], base.get("systems") or []):
        rows: list[dict[str, Any]] = []
        co, bo = cur.get("overall") or {}, old.get("overall") or {}
        rate_sets = [
            ("rate", co.get("rates") or {}, bo.get("rates") or {}, "k"),
            (
                "check",
                (co.get("task") or {}).get("checks") or {},
                (bo.get("task") or {}).get("checks") or {},
                "passed",
            ),
        ]
        for kind, cr, br, kkey in rate_sets:
            for name in cr:
                if name not in br:
                    continue
                k1, n1 = int(cr[name].get(kkey) or 0), int(cr[name].get("n") or 0)
                k2, n2 = int(br[name].get(kkey) or 0), int(br[name].get("n") or 0)
                d = rate_difference(
                    (k1, n1),
                    (k2, n2),
                    current_sessions=_opportunities_by_session(cr[name]),
                    baseline_sessions=_opportunities_by_session(br[name]),
                    n_boot=n_boot,
                )
                if d is None:
                    continue
                rows.append(
                    {
                        "metric": name,
                        "kind": kind,
                        "statistic": "rate",
                        "current": d.current,
                        "baseline": d.baseline,
                        "diff": d.diff,
                        "ci_low": d.ci_low,
                        "ci_high": d.ci_high,
                        "n_current": n1,
                        "n_baseline": n2,
                        "method": d.method,
                        "verdict": _verdict(name, d.diff, d.ci_low, d.ci_high),
                    }
                )
        cl, bl = co.get("latencies") or {}, bo.get("latencies") or {}
        for name in cl:
            if name not in bl:
                continue
            for stat, q in (("p50", 0.5), ("p95", 0.95)):
                d2 = percentile_diff(
                    cl[name].get("values") or [], bl[name].get("values") or [], q, n_boot=n_boot
                )
                if d2 is None:
                    continue
                rows.append(
                    {
                        "metric": name,
                        "kind": "latency",
                        "statistic": stat,
                        **d2,
                        "n_current": cl[name].get("n"),
                        "n_baseline": bl[name].get("n"),
                        "verdict": _verdict(name, d2["diff"], d2["ci_low"], d2["ci_high"]),
                    }
                )
        improved = [r for r in rows if r["verdict"] == "improved"]
        regressed = [r for r in rows if r["verdict"] == "regressed"]
        comparisons.append(
            {
                "system": cur["system"],
                "baseline_system": old["system"],
                "metrics": rows,
                "improved": [f"{r['metric']} {r['statistic']}" for r in improved],
                "regressed": [f"{r['metric']} {r['statistic']}" for r in regressed],
                "trade_offs": [
                    {
                        "improved": f"{a['metric']} {a['statistic']}",
                        "regressed": f"{b['metric']} {b['statistic']}",
                    }
                    for a in improved
                    for b in regressed
                ],
            }
        )
    out["comparisons"] = comparisons
    if not comparisons:
        out["note"] = out.get("note", "") + " no system of this run matches one of the baseline"
    return out
