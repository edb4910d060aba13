"""Who leads, decided by a paired comparison on the items the systems share.

Two unpaired intervals that overlap can hide a difference the same items show clearly (item
difficulty cancels in a paired comparison), and two that do not overlap can come from
different items. So a leader is named only from paired differences: the system with the best
point estimate leads when, against every other system, the paired 95 % bootstrap interval of
(best - other) on their shared items lies wholly on its side of zero. Fewer than 2 resampling
units shared with any rival: no leader (not estimable).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from voxassay.report.html import ci_text, fmt
from voxassay.stats.intervals import paired_bootstrap_ratio_diff

Unit = tuple[float, float, object]
"""One item of one system: (numerator, denominator, resampling cluster), e.g. word errors,
reference words and the speaker for WER."""

METHOD = (
    "paired bootstrap of the difference best - other on shared items (same draw for both, "
    "resampling clusters); best leads when every interval excludes 0 on its side"
)


def paired_leader(
    units: Mapping[str, Mapping[str, Unit]], *, lower_is_better: bool, seed: int = 0
) -> dict[str, Any]:
    """``{"best", "leader" (None: no clear leader), "method", "vs": [per rival: system, diff,
    ci_lo, ci_hi, n, units, separated]}`` over ``units[system][item_id]``."""
    points: dict[str, float] = {}
    for system, rows in units.items():
        den = sum(d for _, d, _ in rows.values())
        if den > 0:
            points[system] = sum(n for n, _, _ in rows.values()) / den
    if not points:
        return {"best": None, "leader": None, "method": METHOD, "vs": []}
    best = (min if lower_is_better else max)(points, key=lambda s: points[s])
    vs = []
    for other in (s for s in points if s != best):
        shared = sorted(set(units[best]) & set(units[other]))
        a = [units[best][i] for i in shared]
        b = [units[other][i] for i in shared]
        d = paired_bootstrap_ratio_diff(
            [x[0] for x in a],
            [x[1] for x in a],
            [x[0] for x in b],
            [x[1] for x in b],
            clusters=[x[2] for x in a],
            seed=seed,
        )
        ok = math.isfinite(d.ci_lo) and math.isfinite(d.ci_hi)
        separated = ok and (d.ci_hi < 0 if lower_is_better else d.ci_lo > 0)
        vs.append(
            {
                "system": other,
                "diff": None if math.isnan(d.diff) else d.diff,
                "ci_lo": d.ci_lo if ok else None,
                "ci_hi": d.ci_hi if ok else None,
                "n": d.n,
                "units": d.units,
                "separated": separated,
            }
        )
    leader = best if vs and all(v["separated"] for v in vs) else None
    return {"best": best, "leader": leader, "method": METHOD, "vs": vs}


def _paired_text(v: Mapping[str, Any], digits: int) -> str:
    if v.get("ci_lo") is None:
        return f"paired difference not estimable on {v['n']} shared item(s)"
    interval = ci_text(v["ci_lo"], v["ci_hi"], digits)
    return f"paired difference {fmt(v['diff'], digits)} {interval} on {v['n']} shared item(s)"


def leader_text(
    what: str,
    result: Mapping[str, Any],
    names: Mapping[str, str],
    points: Mapping[str, float | None],
    digits: int = 3,
) -> str:
    """One sentence from :func:`paired_leader`'s result: who leads and by how much (the
    closest rival's paired difference), or no clear leader naming whom the pairs do not
    separate; ``points`` are the systems' own figures."""
    best = result.get("best")
    if best is None:
        return f"On {what}, nothing was measured."
    label = names.get(best, best)
    own = f"{label} {fmt(points.get(best), digits)}"
    vs = list(result.get("vs") or [])
    if not vs:
        return f"On {what}, only {own} was measured: no comparison, no leader."
    if result.get("leader") is not None:
        close = min(vs, key=lambda v: abs(v["diff"] or 0.0))
        rival = names.get(close["system"], close["system"])
        return (
            f"On {what}, {label} leads: {fmt(points.get(best), digits)} vs {rival} "
            f"{fmt(points.get(close['system']), digits)} ({_paired_text(close, digits)})."
        )
    tied = [v for v in vs if not v["separated"]]
    parts = "; ".join(
        f"{names.get(v['system'], v['system'])} {fmt(points.get(v['system']), digits)} "
        f"({_paired_text(v, digits)})"
        for v in tied[:3]
    )
    return f"On {what}, no clear leader: {own} is not separated from {parts}."
