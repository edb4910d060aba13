"""Speech segments as the turn layer reads them: typed, split at the agent's recorded cuts, merged across short gaps, with the call's reference level, and labels matched to the sounds they describe."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voxassay.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxassay.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxassay.suites.duplex.scoring.turn_types import (
    ALL_ACTIONS,
    BACKCHANNEL,
    BACKGROUND,
    NOISE,
    SPEECH,
    AgentBurst,
    Label,
    TurnParams,
)

__all__ = []


@dataclass(frozen=True)
class _Seg:
    start: float
    end: float
    level: float
    kind: str
    words: int | None
    gaps: tuple[tuple[float, float], ...] = ()
    """Inner pauses the detector bridged (agent segments, for recorded cuts)."""
    token: bool | None = None
    """What an ASR heard (``evidence.backchannel_asr``): True a backchannel form, False other
    words, None not transcribed."""

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class _Unit:
    start: float
    end: float
    level: float
    kind: str
    n: int
    words: int | None
    token: bool | None = None
    """True when every transcribed segment is a backchannel form and at least one was
    transcribed, False when any was other words, None when none was transcribed."""

    @property
    def dur(self) -> float:
        return self.end - self.start


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _segments(segments: Iterable[Any], what: str, *, keep_gaps: bool = False) -> list[_Seg]:
    out: list[_Seg] = []
    for s in segments:
        start, end = float(_attr(s, "start_s")), float(_attr(s, "end_s"))
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise ValueError(f"{what} segment with end {end} before start {start}")
        if end == start:
            continue
        level = _attr(s, "level_dbfs")
        words = _attr(s, "n_words")
        out.append(
            _Seg(
                start,
                end,
                float(level) if level is not None else math.nan,
                str(_attr(s, "kind", SPEECH) or SPEECH),
                int(words) if words is not None else None,
                tuple((float(a), float(b)) for a, b in (_attr(s, "gaps") or ()))
                if keep_gaps
                else (),
                _token(_attr(s, "token")),
            )
        )
    return sorted(out, key=lambda s: (s.start, s.end))


def split_at_cuts(segs: list[_Seg], cuts: Sequence[float], p: TurnParams) -> list[_Seg]:
    """Split agent segments at an inner pause (``gaps`` of a detector segment) that holds a
    recorded cut: the detector bridged the pause, the player says the audio was flushed there."""
    if not cuts:
        return segs
    tol = p.cut_tolerance_s
    out: list[_Seg] = []
    for seg in segs:
        start = seg.start
        for g0, g1 in seg.gaps:
            if any(g0 - tol <= c <= g1 + tol for c in cuts) and start < g0 < g1 < seg.end:
                out.append(_Seg(start, g0, seg.level, seg.kind, None))
                start = g1
        out.append(
            _Seg(start, seg.end, seg.level, seg.kind, seg.words if start == seg.start else None)
        )
    return out


def _power_mean_db(parts: Sequence[_Seg]) -> float:
    known = [p for p in parts if math.isfinite(p.level)]
    if not known:
        return math.nan
    w = sum(p.dur for p in known)
    return 10.0 * math.log10(sum(p.dur * 10.0 ** (p.level / 10.0) for p in known) / w)


def _merge(
    segs: Sequence[_Seg],
    gap: float,
    *,
    by_kind: bool,
    max_level_diff_db: float | None = None,
    cuts: Sequence[float] = (),
    cut_tolerance: float = 0.0,
) -> list[_Unit]:
    """Merge segments separated by less than ``gap`` (of the same kind when ``by_kind``; with
    ``max_level_diff_db``, not across a level jump larger than that: another talker; never
    across a gap holding one of ``cuts``, widened by ``cut_tolerance`` on both sides)."""
    groups: list[list[_Seg]] = []
    for s in segs:
        if groups:
            g = groups[-1]
            g_end = max(x.end for x in g)
            same_kind = not by_kind or g[0].kind == s.kind
            same_talker = (
                max_level_diff_db is None
                or not (math.isfinite(s.level) and math.isfinite(g[-1].level))
                or abs(s.level - g[-1].level) <= max_level_diff_db
            )
            cut = any(g_end - cut_tolerance <= c <= s.start + cut_tolerance for c in cuts)
            if s.start - g_end < gap and same_kind and same_talker and not cut:
                g.append(s)
                continue
        groups.append([s])
    units = []
    for g in groups:
        words = [x.words for x in g]
        units.append(
            _Unit(
                g[0].start,
                max(x.end for x in g),
                _power_mean_db(g),
                g[0].kind,
                len(g),
                sum(w for w in words if w is not None)
                if all(w is not None for w in words)
                else None,
                _merged_token([x.token for x in g]),
            )
        )
    return units


def _token(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _merged_token(tokens: Sequence[bool | None]) -> bool | None:
    if any(t is False for t in tokens):
        return False
    return True if any(t is True for t in tokens) else None


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    order = sorted(range(len(values)), key=lambda i: values[i])
    total = sum(weights)
    acc = 0.0
    for i in order:
        acc += weights[i]
        if acc >= total / 2:
            return values[i]
    return values[order[-1]]


def reference_level(segs: Sequence[_Seg], p: TurnParams) -> tuple[float | None, str]:
    if p.user_ref_level_dbfs is not None:
        return float(p.user_ref_level_dbfs), "params"
    speech = [s for s in segs if s.kind == SPEECH and math.isfinite(s.level)]
    if not speech:
        return None, "unavailable"
    ref = _weighted_median([s.level for s in speech], [s.dur for s in speech])
    own = [s for s in speech if s.level - ref >= p.background_rel_db]
    ref = _weighted_median([s.level for s in own], [s.dur for s in own])
    return ref, "estimated: duration-weighted median of user speech levels"


def _labels(labels: Iterable[Any] | None) -> list[Label]:
    out: list[Label] = []
    for i, lab in enumerate(labels or ()):
        if isinstance(lab, Label):
            out.append(lab)
            continue
        acts = _attr(lab, "expected_actions")
        if acts is None:
            one = _attr(lab, "expected_action")
            acts = [] if one is None else [one]
        elif isinstance(acts, str):
            acts = [acts]
        intents = _attr(lab, "intents") or ()
        if isinstance(intents, str):
            intents = [intents]
        for a in acts:
            if str(a) not in ALL_ACTIONS:
                raise ValueError(f"label {i}: unknown turn action {a!r}; use one of {ALL_ACTIONS}")
        lid = _attr(lab, "id")
        out.append(
            Label(
                float(_attr(lab, "start_s")),
                float(_attr(lab, "end_s")),
                tuple(str(a) for a in acts),
                tuple(str(x) for x in intents),
                _attr(lab, "role"),
                str(lid) if lid is not None else f"label{i + 1}",
            )
        )
    return out


def match_label(labels: Sequence[Label], onset: float, tol: float) -> Label | None:
    hits = [lab for lab in labels if lab.start_s - tol <= onset <= lab.end_s]
    if not hits:
        return None
    return min(hits, key=lambda lab: abs(lab.start_s - onset))


def label_kind(lab: Label) -> str | None:
    """A sound kind a label implies, or None to keep the acoustic classification."""
    role = (lab.role or "").lower()
    intents = {x.lower() for x in lab.intents}
    if role in ("bystander", "media", "echo"):
        return BACKGROUND
    if role == "noise":
        return NOISE
    if "backchannel" in intents:
        return BACKCHANNEL
    if "unrelated" in intents or (lab.expected_actions and set(lab.expected_actions) <= {"ignore"}):
        return BACKGROUND if role in ("", "user", "unknown") else NOISE
    if intents & {"start", "interrupt", "correction", "cancel", "continue"}:
        return SPEECH
    return None


def burst_at(bursts: Sequence[AgentBurst], t: float) -> AgentBurst | None:
    for b in bursts:
        if b.start_s <= t < b.end_s:
            return b
    return None


def _ms(x: float) -> float:
    return x * 1000.0
