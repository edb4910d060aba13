"""Sentences a summary computes from numbers: who leads, and when nobody clearly does.

One rule for every suite: the best point estimate leads only when its 95 % interval does not
overlap the runner-up's; otherwise the sentence says "no clear leader" and names who is
tied. A system without an interval cannot be called a leader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from voxassay.report.html import ci_text, fmt

__all__ = ["Estimate", "display_names", "leader", "leader_sentence", "short_name"]


@dataclass(frozen=True)
class Estimate:
    """One system's figure with its 95 % interval (None: not estimable)."""

    system: str
    value: float | None
    lo: float | None = None
    hi: float | None = None

    @property
    def usable(self) -> bool:
        return self.value is not None and math.isfinite(self.value)


def _overlap(a: Estimate, b: Estimate) -> bool:
    """Intervals overlap, or either is missing (then nothing separates the two)."""
    if None in (a.lo, a.hi, b.lo, b.hi):
        return True
    assert a.lo is not None and a.hi is not None and b.lo is not None and b.hi is not None
    return a.lo <= b.hi and b.lo <= a.hi


def leader(
    estimates: Sequence[Estimate], *, lower_is_better: bool
) -> tuple[Estimate | None, list[Estimate]]:
    """(the clear leader or None, the systems tied with the best). With one usable system it
    is not a leader of anything: (None, [it])."""
    usable = [e for e in estimates if e.usable]
    if not usable:
        return None, []
    ranked = sorted(usable, key=lambda e: float(e.value or 0.0), reverse=not lower_is_better)
    best = ranked[0]
    tied = [best, *(e for e in ranked[1:] if _overlap(best, e))]
    if len(ranked) == 1 or len(tied) > 1:
        return None, tied
    return best, [best]


def _with_ci(e: Estimate, digits: int) -> str:
    ci = f" {ci_text(e.lo, e.hi, digits)}" if e.lo is not None else ""
    return f"{fmt(e.value, digits)}{ci}"


def leader_sentence(
    what: str,
    estimates: Sequence[Estimate],
    *,
    lower_is_better: bool,
    digits: int = 3,
) -> str:
    """ "On {what}, A leads: 0.050 [0.04, 0.06] vs B 0.090 [...]." or "On {what}, no clear
    leader: A 0.050 [...] and B 0.055 [...] overlap." """
    best, tied = leader(estimates, lower_is_better=lower_is_better)
    if not tied:
        return f"On {what}, nothing was measured."
    if best is None and len(tied) == 1:
        return f"On {what}, only {tied[0].system} was measured: {_with_ci(tied[0], digits)}."
    if best is None:
        names = ", ".join(f"{e.system} {_with_ci(e, digits)}" for e in tied[:4])
        more = f" and {len(tied) - 4} more" if len(tied) > 4 else ""
        return f"On {what}, no clear leader: {names}{more} overlap."
    usable = [e for e in estimates if e.usable and e.system != best.system]
    runner = sorted(usable, key=lambda e: float(e.value or 0.0), reverse=not lower_is_better)[0]
    return (
        f"On {what}, {best.system} leads: {_with_ci(best, digits)} vs {runner.system} "
        f"{_with_ci(runner, digits)}."
    )


def short_name(spec: str, limit: int = 32) -> str:
    """A system's display name: a ``NAME=`` given stays; else the spec's backend and target
    (an URL's model or host), without options; long names keep their start and end."""
    named = re.match(r"^([A-Za-z0-9_.-]+)=(.+)$", spec)
    if named:
        return named.group(1)
    head, _, query = spec.partition("?")
    backend, _, target = head.partition(":")
    if target.startswith(("http://", "https://")):
        from urllib.parse import parse_qs, urlparse

        params = parse_qs(query)
        target = (params.get("model") or [urlparse(target).netloc])[0]
    elif "/" in target:
        target = target.rstrip("/").rsplit("/", 1)[-1]
    name = f"{backend}:{target}" if target else backend
    if len(name) <= limit:
        return name
    keep = (limit - 1) // 2
    return f"{name[:keep]}…{name[-(limit - 1 - keep) :]}"


def display_names(specs: Sequence[str], limit: int = 32) -> dict[str, str]:
    """``short_name`` of each spec, made unique: specs that would share a short name keep
    their full spec."""
    from collections import Counter

    short = {s: short_name(s, limit) for s in specs}
    counts = Counter(short.values())
    return {s: n if counts[n] == 1 else s for s, n in short.items()}


@dataclass(frozen=True)
class ProfileEntry:
    """One cell of a capability profile: a system measured on one dimension of a domain,
    with its 95 % interval and n; ``unit`` ``""`` means a score or rate on [0, 1]."""

    domain: str
    system: str
    dimension: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None
    unit: str = ""
    higher_is_better: bool = True


__all__ += ["ProfileEntry"]
