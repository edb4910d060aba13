"""Pure functions behind the TTS capability profile (no file access, no audio).

Per-item scores follow the TTS contract: every scored item becomes a *unit* ``(num, den)``
whose eval score is ``sum(num) / sum(den)`` over the eval's items:

- ``critical_accuracy``: ``(critical_ok, critical_total)``, so the eval score is the corpus
  ratio (critical tokens heard intact / critical tokens asked for);
- every other primary metric: ``(score, 1)`` with ``score`` in [0, 1], so the eval score is
  the plain mean over items.

Repeats of one item are summed into one unit (the item is the resampling unit of every
bootstrap). Items that cannot be scored (a missing metric, no anchor embedding, no neutral
partner) are *unscored* with a reason and never enter a denominator; neutral partners and
identity anchors are *references* (the thing others are measured against), not failures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxassay.core.numbers import finite as _num
from voxassay.stats.intervals import (
    DEFAULT_BOOT,
    PairedDiff,
    bootstrap_ratio_ci,
    paired_bootstrap_ratio_diff,
    wilson_interval,
)

PRIMARY_METRICS = (
    "critical_accuracy",
    "intelligibility",
    "prosody_following",
    "identity",
    "longform_stability",
    "quality",
)
"""Primary metric ids the profile knows (the ``primary`` field of an eval)."""

FEATURE_METRIC = {
    "f0_median": "f0_median_st",
    "f0_range": "f0_range_st",
    "energy": "energy_db",
    "rate": "rate_sps",
    "pause_ratio": "pause_ratio",
}
"""Contrast feature -> the per-item metric it is read from."""

DEAD_BAND = {
    "f0_median": 0.5,  # semitones
    "f0_range": 1.0,  # semitones
    "energy": 1.0,  # dB
    "rate": 0.05,  # relative change (5 %)
    "pause_ratio": 0.02,  # absolute change of the ratio
}
"""A change smaller than this (in absolute value) counts as no change."""

FEATURE_UNITS = {
    "f0_median": "st",
    "f0_range": "st",
    "energy": "dB",
    "rate": "relative",
    "pause_ratio": "ratio",
}

NEUTRAL_CONDITION = "neutral"


@dataclass(frozen=True)
class Unit:
    """One scored item: ``num / den`` is its score (``den`` = 1 except critical accuracy)."""

    item: str
    num: float
    den: float


@dataclass(frozen=True)
class Skip:
    """An item that got no score: ``kind`` is ``reference`` (anchor or neutral partner) or
    ``unscored`` (something it needs is missing; ``reason`` says what)."""

    item: str
    kind: str
    reason: str


@dataclass
class ContrastOutcome:
    """Per expected feature: ``change`` (item minus neutral partner; ``rate`` as relative
    change), ``met`` (change beyond the dead band in the expected direction) and
    ``moved`` (beyond the dead band in either direction). ``score = n_met / n_expected``
    over the features with both values present."""

    features: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def n_expected(self) -> int:
        return len(self.features)

    @property
    def n_met(self) -> int:
        return sum(1 for f in self.features.values() if f["met"])

    @property
    def score(self) -> float:
        return self.n_met / self.n_expected if self.n_expected else math.nan


def feature_change(feature: str, item: Mapping[str, Any], ref: Mapping[str, Any]) -> float | None:
    """Change of one prosodic feature from the neutral partner to the item.

    ``rate``: ``rate_sps(item) / rate_sps(ref) - 1`` (relative; None when the reference rate
    is not positive); every other feature: ``metric(item) - metric(ref)`` in its own unit
    (semitones, dB, ratio). None when either value is missing or not finite.
    """
    metric = FEATURE_METRIC[feature]
    a, b = _num(item.get(metric)), _num(ref.get(metric))
    if a is None or b is None:
        return None
    if feature == "rate":
        return a / b - 1.0 if b > 0 else None
    return a - b


def contrast_outcome(
    expect: Mapping[str, str], item: Mapping[str, Any], ref: Mapping[str, Any]
) -> ContrastOutcome:
    """Compare an item's prosody metrics with its neutral partner's (same system).

    A feature is met when ``change > band`` for ``up`` or ``change < -band`` for ``down``
    (``band`` from :data:`DEAD_BAND`); features without a value on either side are listed in
    ``missing`` and left out of the denominator.
    """
    out = ContrastOutcome()
    for feature, direction in expect.items():
        if feature not in FEATURE_METRIC or direction not in ("up", "down"):
            out.missing.append(feature)
            continue
        change = feature_change(feature, item, ref)
        if change is None:
            out.missing.append(feature)
            continue
        band = DEAD_BAND[feature]
        met = change > band if direction == "up" else change < -band
        out.features[feature] = {
            "expect": direction,
            "change": change,
            "met": bool(met),
            "moved": bool(abs(change) > band),
        }
    return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity ``a.b / (|a| |b|)``; None for empty, mismatched or zero vectors."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape:
        return None
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0 or ny == 0 or not (math.isfinite(nx) and math.isfinite(ny)):
        return None
    return float(np.dot(x, y) / (nx * ny))


def item_score(
    primary: str,
    metrics: Mapping[str, Any],
    *,
    contrast: ContrastOutcome | None = None,
    anchor_cosine: float | None = None,
) -> tuple[float, float] | str:
    """The contract's per-item score for ``primary`` as ``(num, den)``, or the reason it
    cannot be computed.

    - critical_accuracy: ``(critical_ok, critical_total)`` (score ``ok / total``);
      an item with ``critical_total == 0`` is unscored;
    - intelligibility: ``1 - min(1, wer_errors / wer_words)`` (``wer_words > 0``);
    - prosody_following: ``n_met / n_expected`` of ``contrast``;
    - identity: ``max(0, anchor_cosine)``;
    - longform_stability: ``max(0, longform_sim_min)``;
    - quality: ``(dnsmos_ovrl - 1) / 4`` clipped to [0, 1].
    """
    if primary == "critical_accuracy":
        ok, total = _num(metrics.get("critical_ok")), _num(metrics.get("critical_total"))
        if ok is None or total is None:
            return "no critical_ok/critical_total"
        if total <= 0:
            return "item names no critical tokens"
        return (ok, total)
    if primary == "intelligibility":
        err, words = _num(metrics.get("wer_errors")), _num(metrics.get("wer_words"))
        if err is None or words is None:
            return "no wer_errors/wer_words"
        if words <= 0:
            return "empty reference (wer_words = 0)"
        return (1.0 - min(1.0, err / words), 1.0)
    if primary == "prosody_following":
        if contrast is None:
            return "no contrast outcome"
        if contrast.n_expected == 0:
            missing = ", ".join(contrast.missing) or "none expected"
            return f"no prosody feature measurable on both sides ({missing})"
        return (contrast.score, 1.0)
    if primary == "identity":
        if anchor_cosine is None:
            return "no cosine to the anchor"
        return (max(0.0, anchor_cosine), 1.0)
    if primary == "longform_stability":
        sim = _num(metrics.get("longform_sim_min"))
        if sim is None:
            return "no longform_sim_min"
        return (max(0.0, sim), 1.0)
    if primary == "quality":
        ovrl = _num(metrics.get("dnsmos_ovrl"))
        if ovrl is None:
            return "no dnsmos_ovrl"
        return (min(1.0, max(0.0, (ovrl - 1.0) / 4.0)), 1.0)
    return f"unknown primary metric {primary!r}"


def collapse(units: Sequence[Unit]) -> dict[str, tuple[float, float]]:
    """Sum the units of each item (repeats): ``{item: (sum num, sum den)}``."""
    out: dict[str, tuple[float, float]] = {}
    for u in units:
        n, d = out.get(u.item, (0.0, 0.0))
        out[u.item] = (n + u.num, d + u.den)
    return out


def eval_score(
    units: Sequence[Unit], *, seed: int = 0, n_boot: int = DEFAULT_BOOT
) -> dict[str, Any]:
    """Eval score ``sum(num) / sum(den)`` over its items (a mean of per-item scores, or the
    corpus ratio for critical accuracy) with a percentile bootstrap CI over items.

    ``n`` = number of distinct items scored (the denominator of the mean)."""
    per = collapse(units)
    if not per:
        return {"score": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0}
    num = np.array([v[0] for v in per.values()])
    den = np.array([v[1] for v in per.values()])
    score = float(num.sum() / den.sum()) if den.sum() > 0 else math.nan
    lo, hi = bootstrap_ratio_ci(num, den, n_boot=n_boot, seed=seed)
    return {"score": score, "ci_lo": lo, "ci_hi": hi, "n": len(per)}


def _stratified_draws(
    strata: Sequence[tuple[np.ndarray, ...]], n_boot: int, seed: int
) -> np.ndarray:
    """Bootstrap distribution of ``mean_e ratio_e`` resampling items within each stratum.

    Each stratum is ``(num, den)`` or ``(num_a, den_a, num_b, den_b)`` (then the statistic is
    the mean of ``ratio_a - ratio_b``); draws whose denominator sums to 0 give NaN and are
    dropped by the caller."""
    rng = np.random.default_rng(seed)
    acc = np.zeros(n_boot)
    for arrays in strata:
        k = arrays[0].size
        idx = rng.integers(0, k, size=(n_boot, k))
        sums = [a[idx].sum(axis=1) for a in arrays]
        with np.errstate(invalid="ignore", divide="ignore"):
            if len(sums) == 2:
                acc += np.where(sums[1] > 0, sums[0] / np.where(sums[1] > 0, sums[1], 1), np.nan)
            else:
                ra = np.where(sums[1] > 0, sums[0] / np.where(sums[1] > 0, sums[1], 1), np.nan)
                rb = np.where(sums[3] > 0, sums[2] / np.where(sums[3] > 0, sums[3], 1), np.nan)
                acc += ra - rb
    return acc / max(1, len(strata))


def dimension_score(
    units_by_eval: Mapping[str, Sequence[Unit]],
    *,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Dimension score = equal-weight mean of its evals' scores, ``sum_e score_e / E`` over
    the ``E`` evals with at least one scored item; CI by a stratified bootstrap that
    resamples items within each eval and averages the resampled eval scores.

    ``n`` = scored items over those evals; ``evals`` = the evals that entered."""
    strata = []
    scores = []
    used = []
    n = 0
    for ev, units in units_by_eval.items():
        per = collapse(units)
        den = np.array([v[1] for v in per.values()])
        if not per or den.sum() <= 0:
            continue
        num = np.array([v[0] for v in per.values()])
        strata.append((num, den))
        scores.append(float(num.sum() / den.sum()))
        used.append(ev)
        n += len(per)
    if not strata:
        return {"score": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0, "evals": []}
    draws = _stratified_draws(strata, n_boot, seed)
    draws = draws[np.isfinite(draws)]
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2]) if draws.size else (math.nan,) * 2
    if n < 2:  # one item: a resampling interval is not estimable, never [score, score]
        lo = hi = math.nan
    return {
        "score": float(np.mean(scores)),
        "ci_lo": float(lo),
        "ci_hi": float(hi),
        "n": n,
        "evals": used,
    }


def paired_eval_diff(
    units_a: Sequence[Unit],
    units_b: Sequence[Unit],
    *,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
) -> PairedDiff:
    """``score_a - score_b`` on the items both systems scored (eval score as in
    :func:`eval_score`, each restricted to the shared items), paired bootstrap over items:
    one resample of items applied to both arms, so item difficulty cancels."""
    pa, pb = collapse(units_a), collapse(units_b)
    shared = sorted(set(pa) & set(pb))
    return paired_bootstrap_ratio_diff(
        [pa[i][0] for i in shared],
        [pa[i][1] for i in shared],
        [pb[i][0] for i in shared],
        [pb[i][1] for i in shared],
        n_boot=n_boot,
        seed=seed,
    )


def paired_dimension_diff(
    a_by_eval: Mapping[str, Sequence[Unit]],
    b_by_eval: Mapping[str, Sequence[Unit]],
    *,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Difference of dimension scores on shared items: ``mean_e (score_a,e - score_b,e)``
    over the evals where both systems scored at least one shared item; stratified paired
    bootstrap (items resampled within each eval, the same draw for both systems).

    ``p_value``: two-sided bootstrap p (share of draws on the other side of zero, doubled)."""
    strata = []
    diffs = []
    a_scores, b_scores = [], []
    n = 0
    for ev in a_by_eval:
        pa, pb = collapse(a_by_eval[ev]), collapse(b_by_eval.get(ev, ()))
        shared = sorted(set(pa) & set(pb))
        arr = [np.array([p[i][j] for i in shared]) for p in (pa, pb) for j in (0, 1)]
        if not shared or arr[1].sum() <= 0 or arr[3].sum() <= 0:
            continue
        sa, sb = float(arr[0].sum() / arr[1].sum()), float(arr[2].sum() / arr[3].sum())
        a_scores.append(sa)
        b_scores.append(sb)
        diffs.append(sa - sb)
        strata.append(tuple(arr))
        n += len(shared)
    nan = math.nan
    if not strata:
        return {"a": nan, "b": nan, "diff": nan, "ci_lo": nan, "ci_hi": nan, "p_value": nan, "n": 0}
    draws = _stratified_draws(strata, n_boot, seed)
    draws = draws[np.isfinite(draws)]
    diff = float(np.mean(diffs))
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    if n < 2:
        p = math.nan  # one item: the bootstrap has nothing to resample
    elif diff == 0 and np.all(draws == 0):
        p = 1.0
    else:
        p = float(min(1.0, 2 * min(np.mean(draws <= 0), np.mean(draws >= 0))))
    return {
        "a": float(np.mean(a_scores)),
        "b": float(np.mean(b_scores)),
        "diff": diff,
        "ci_lo": float(lo),
        "ci_hi": float(hi),
        "p_value": p,
        "n": n,
    }


MIN_SYSTEMS_CORRELATION = 3
"""Fewer systems than this: Spearman between dimensions is not computed (2 points always
correlate +-1)."""


def dimension_correlation(
    scores: Mapping[str, Mapping[str, float]], dimensions: Sequence[str]
) -> dict[str, Any]:
    """Spearman's rho between every two dimensions' scores across systems
    (``scores[system][dimension]``), over the systems with a finite score on both.

    Below :data:`MIN_SYSTEMS_CORRELATION` systems the status is ``too_few_systems`` and the
    matrix is empty; a pair with fewer shared systems or a constant side is NaN."""
    from voxassay.stats.ranks import rank_agreement

    systems = list(scores)
    if len(systems) < MIN_SYSTEMS_CORRELATION:
        return {
            "status": "too_few_systems",
            "n_systems": len(systems),
            "reason": (
                f"{len(systems)} system(s): a rank correlation between dimensions needs at least "
                f"{MIN_SYSTEMS_CORRELATION} systems (and is only a rough reading below ~8)"
            ),
            "dimensions": list(dimensions),
            "matrix": [],
        }
    matrix: list[list[dict[str, Any]]] = []
    for da in dimensions:
        row = []
        for db in dimensions:
            xa = {s: scores[s][da] for s in systems if _finite(scores[s].get(da))}
            xb = {s: scores[s][db] for s in systems if _finite(scores[s].get(db))}
            ra = rank_agreement(xa, xb)
            rho = 1.0 if da == db and ra.n_systems >= 2 else ra.spearman_rho
            row.append({"rho": rho, "n_systems": ra.n_systems})
        matrix.append(row)
    return {
        "status": "ok",
        "n_systems": len(systems),
        "dimensions": list(dimensions),
        "matrix": matrix,
    }


def _finite(x: Any) -> bool:
    return _num(x) is not None


def top_k(scores: Mapping[str, Mapping[str, float]], k: int = 5) -> dict[str, Any]:
    """Which systems are in the top ``k`` of one dimension, with ties by CI overlap.

    ``scores[system] = {score, ci_lo, ci_hi}`` (higher is better). Systems are ranked by
    score; the k-th best sets the bar: a system is in when its rank <= k or its CI reaches
    the k-th best's CI (``ci_hi >= ci_lo of the k-th``). ``leaders``: systems whose CI
    reaches the best one's (``ci_hi >= ci_lo of the best``) - tied for first; none when the
    best's interval is not estimable or the best scores 0 (nobody leads at nothing)."""
    ranked = sorted(
        ((s, v) for s, v in scores.items() if _finite(v.get("score"))),
        key=lambda sv: (-float(sv[1]["score"]), sv[0]),
    )
    if not ranked:
        return {"ranked": [], "top": [], "leaders": [], "k": k}

    def lo_of(v: Mapping[str, float]) -> float:
        x = _num(v.get("ci_lo"))
        return x if x is not None else float(v["score"])

    def hi_of(v: Mapping[str, float]) -> float:
        x = _num(v.get("ci_hi"))
        return x if x is not None else float(v["score"])

    kth = ranked[min(k, len(ranked)) - 1][1]
    best = ranked[0][1]
    top = [s for i, (s, v) in enumerate(ranked) if i < k or hi_of(v) >= lo_of(kth)]
    can_lead = (
        _num(best.get("ci_lo")) is not None
        and _num(best.get("ci_hi")) is not None
        and float(best["score"]) > 0
    )
    leaders = [s for s, v in ranked if hi_of(v) >= lo_of(best)] if can_lead else []
    return {"ranked": [s for s, _ in ranked], "top": top, "leaders": leaders, "k": k}


def instruction_following(outcomes: Sequence[ContrastOutcome]) -> dict[str, Any]:
    """Contrasts of one system pooled: ``met`` / ``expected`` feature directions (Wilson CI),
    per feature the same plus ``mean_abs_change`` (mean |change| over its contrasts, in the
    feature's unit) against its dead band and ``moved`` (changes beyond the band, either
    direction).

    ``ignores_instructions`` is True when at least one feature was measured and for every
    measured feature the mean |change| is below its dead band: the system's prosody does not
    move when a style or emotion is asked for."""
    per: dict[str, list[dict[str, Any]]] = {}
    for oc in outcomes:
        for f, d in oc.features.items():
            per.setdefault(f, []).append(d)
    met = sum(1 for ds in per.values() for d in ds if d["met"])
    total = sum(len(ds) for ds in per.values())
    lo, hi = wilson_interval(met, total)
    features = {}
    for f in FEATURE_METRIC:
        ds = per.get(f)
        if not ds:
            continue
        m = sum(1 for d in ds if d["met"])
        flo, fhi = wilson_interval(m, len(ds))
        mac = float(np.mean([abs(d["change"]) for d in ds]))
        features[f] = {
            "n": len(ds),
            "met": m,
            "share": m / len(ds),
            "ci_lo": flo,
            "ci_hi": fhi,
            "mean_change": float(np.mean([d["change"] for d in ds])),
            "mean_abs_change": mac,
            "dead_band": DEAD_BAND[f],
            "unit": FEATURE_UNITS[f],
            "moved": sum(1 for d in ds if d["moved"]),
            "below_dead_band": mac < DEAD_BAND[f],
        }
    ignores = bool(features) and all(v["below_dead_band"] for v in features.values())
    return {
        "n_contrasts": sum(1 for oc in outcomes if oc.n_expected),
        "expected": total,
        "met": met,
        "share": met / total if total else math.nan,
        "ci_lo": lo,
        "ci_hi": hi,
        "features": features,
        "ignores_instructions": ignores,
    }


def mean_ci(
    values: Sequence[float], *, seed: int = 0, n_boot: int = DEFAULT_BOOT
) -> dict[str, Any]:
    """Mean of finite ``values`` with a percentile bootstrap CI (denominator: finite values)."""
    xs = [float(v) for v in values if _finite(v)]
    if not xs:
        return {"mean": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0}
    lo, hi = bootstrap_ratio_ci(xs, [1.0] * len(xs), n_boot=n_boot, seed=seed)
    return {"mean": float(np.mean(xs)), "ci_lo": lo, "ci_hi": hi, "n": len(xs)}


def infer_primary(dimension: str, items_meta: Sequence[Mapping[str, Any]]) -> str | None:
    """The primary metric of an eval when the run does not say: by dimension
    (critical_content -> critical_accuracy, linguistic -> intelligibility, long_form ->
    longform_stability, audio_quality -> quality, identity_stress -> identity when its items
    carry ``labels.group``), expressiveness evals whose items carry a ``contrast`` ->
    prosody_following; everything else (performance, subtext, sarcasm) -> None (humans only)."""
    by_dim = {
        "critical_content": "critical_accuracy",
        "linguistic": "intelligibility",
        "long_form": "longform_stability",
        "audio_quality": "quality",
    }
    if dimension in by_dim:
        return by_dim[dimension]
    if dimension == "identity_stress" and any(m.get("group") for m in items_meta):
        return "identity"
    if dimension == "expressiveness" and any(m.get("contrast") for m in items_meta):
        return "prosody_following"
    return None


__all__ = [
    "DEAD_BAND",
    "FEATURE_METRIC",
    "PRIMARY_METRICS",
    "ContrastOutcome",
    "Skip",
    "Unit",
    "collapse",
    "contrast_outcome",
    "cosine",
    "dimension_correlation",
    "dimension_score",
    "eval_score",
    "feature_change",
    "infer_primary",
    "instruction_following",
    "item_score",
    "mean_ci",
    "paired_dimension_diff",
    "paired_eval_diff",
    "top_k",
]
