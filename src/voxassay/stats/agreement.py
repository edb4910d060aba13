"""Agreement statistics for human ratings: Krippendorff's alpha, ICC for incomplete crossed
designs, rater quality control, judges vs humans, dimensions, pairwise preferences.

Every function takes plain arrays (one entry per rating) so it serves any study layout; the
study report (``voxassay.study.analysis``) wires them together.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from voxassay.stats.intervals import wilson_interval
from voxassay.stats.raters import factorize, fit_crossed

__all__ = [
    "QCThresholds",
    "RaterQC",
    "bradley_terry",
    "correlation_ci",
    "dimension_scores",
    "exclusion_effect",
    "icc",
    "krippendorff_alpha",
    "krippendorff_alpha_ci",
    "krippendorff_alpha_counts",
    "pairwise_preferences",
    "rater_qc",
    "win_rate_agreement",
]

Level = Literal["interval", "ordinal", "nominal"]


# -- Krippendorff's alpha -------------------------------------------------------------------


@dataclass
class _AlphaUnits:
    """Per-unit sufficient statistics over *pairable* units (``m_u >= 2`` values)."""

    m: np.ndarray  # values per unit
    s1: np.ndarray  # sum of (transformed) values per unit
    s2: np.ndarray  # sum of squares per unit
    counts: Any  # sparse units x categories (nominal only) or None


def _alpha_units(
    unit_codes: np.ndarray, x: np.ndarray, level: Level, n_units: int
) -> _AlphaUnits | None:
    import scipy.sparse as sp
    from scipy import stats

    m_all = np.bincount(unit_codes, minlength=n_units)
    pair = m_all[unit_codes] >= 2
    u, x = unit_codes[pair], x[pair]
    if x.size == 0:
        return None
    _, u = np.unique(u, return_inverse=True)
    k = int(u.max()) + 1
    if level == "ordinal":
        # delta(c, k) = sum_{g=c..k} n_g - (n_c + n_k)/2 = midrank(k) - midrank(c) over the
        # pooled pairable values, so ordinal alpha = interval alpha on the mid-ranks.
        x = stats.rankdata(x, method="average")
    counts = None
    if level == "nominal":
        cat, catcodes = np.unique(x, return_inverse=True)
        counts = sp.csr_matrix(
            (np.ones(x.size), (u, catcodes.ravel())), shape=(k, cat.size), dtype=np.float64
        )
    return _AlphaUnits(
        m=np.bincount(u, minlength=k).astype(np.float64),
        s1=np.bincount(u, weights=x, minlength=k),
        s2=np.bincount(u, weights=x * x, minlength=k),
        counts=counts,
    )


def _alpha_weighted(st: _AlphaUnits, w: np.ndarray, level: Level) -> np.ndarray:
    """Alpha for each row of unit multiplicities ``w`` (``B x units``)."""
    n = w @ st.m
    if level == "nominal":
        counts = st.counts
        sq_unit = np.asarray(counts.multiply(counts).sum(axis=1)).ravel()
        c_u = (st.m**2 - sq_unit) / (st.m - 1)
        d_o = (w @ c_u) / n
        pooled = np.asarray((counts.T @ w.T).T)  # B x categories
        d_e = (n * n - (pooled**2).sum(axis=1)) / (n * (n - 1))
    else:
        ss_u = st.s2 - st.s1**2 / st.m
        c_u = 2 * st.m * ss_u / (st.m - 1)
        d_o = (w @ c_u) / n
        t1, t2 = w @ st.s1, w @ st.s2
        d_e = 2 * (t2 - t1 * t1 / n) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - d_o / d_e
    return np.where(d_e > 0, out, np.nan)


def krippendorff_alpha(
    units: Sequence[Hashable] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    level: Level = "interval",
) -> float:
    """Krippendorff's alpha ``1 - D_o / D_e`` from one row per (unit, coder) value.

    Only units with at least two values are *pairable*; ``n`` is their number of values.
    ``D_o = (1/n) sum_u 1/(m_u - 1) sum_{i != j in u} delta^2(x_i, x_j)`` and
    ``D_e = 1/(n (n - 1)) sum_{i != j} delta^2(x_i, x_j)`` over all pairable values.
    ``delta^2``: interval ``(x_i - x_j)^2`` (so ``D_o = (1/n) sum_u 2 m_u SS_u / (m_u - 1)``
    and ``D_e = 2 SS_total / (n - 1)``); ordinal the squared difference of mid-ranks in the
    pooled pairable values (Krippendorff's ordinal metric, which equals it); nominal
    ``[x_i != x_j]``. NaN values are dropped; NaN when ``D_e = 0`` or nothing is pairable.
    """
    x = np.asarray(values, dtype=np.float64)
    codes, levels = factorize(units)
    ok = np.isfinite(x)
    st = _alpha_units(codes[ok], x[ok], level, len(levels))
    if st is None:
        return math.nan
    return float(_alpha_weighted(st, np.ones((1, st.m.size)), level)[0])


def krippendorff_alpha_ci(
    units: Sequence[Hashable] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    level: Level = "interval",
    *,
    n_boot: int = 1000,
    conf: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(alpha, lo, hi)``: percentile bootstrap over units (a unit keeps all its values).
    For ordinal data the mid-ranks of the full sample are kept in each draw."""
    x = np.asarray(values, dtype=np.float64)
    codes, levels = factorize(units)
    ok = np.isfinite(x)
    st = _alpha_units(codes[ok], x[ok], level, len(levels))
    if st is None:
        return (math.nan, math.nan, math.nan)
    k = st.m.size
    point = float(_alpha_weighted(st, np.ones((1, k)), level)[0])
    rng = np.random.default_rng(seed)
    draws: list[np.ndarray] = []
    chunk = max(1, min(n_boot, 2_000_000 // max(k, 1)))
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        idx = rng.integers(0, k, size=(b, k))
        w = np.zeros((b, k))
        np.add.at(w, (np.repeat(np.arange(b), k), idx.ravel()), 1.0)
        draws.append(_alpha_weighted(st, w, level))
        done += b
    boot = np.concatenate(draws)
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return (point, math.nan, math.nan)
    lo, hi = np.quantile(boot, [(1 - conf) / 2, (1 + conf) / 2])
    return (point, float(lo), float(hi))


def krippendorff_alpha_counts(
    counts: np.ndarray | Sequence[Sequence[float]],
    categories: Sequence[float] | np.ndarray,
    level: Level = "nominal",
) -> float:
    """Alpha from a vote table: ``counts[u, c]`` coders put unit ``u`` in category ``c``
    (value ``categories[c]``; its order is the ordinal order). Same definitions as
    :func:`krippendorff_alpha` (the table is expanded to one value per vote)."""
    table = np.asarray(counts, dtype=np.int64)
    cats = np.asarray(categories, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != cats.size:
        raise ValueError("counts must be units x categories")
    u_idx, c_idx = np.nonzero(table)
    reps = table[u_idx, c_idx]
    units = np.repeat(u_idx, reps)
    vals = np.repeat(cats[c_idx], reps)
    return krippendorff_alpha(units, vals, level)


# -- ICC ------------------------------------------------------------------------------------


def icc(
    scores: Sequence[float] | np.ndarray,
    raters: Sequence[Hashable] | np.ndarray,
    units: Sequence[Hashable] | np.ndarray,
) -> dict[str, Any]:
    """Intraclass correlations from REML variance components, valid for incomplete designs.

    Two-way model ``y = mu + t[unit] + r[rater] + e`` fitted with :func:`fit_crossed`
    (variances ``s2_t, s2_r, s2_e``), and the one-way model ``y = mu + t[unit] + w`` (raters
    not modelled, ``s2_w``):

    * ``ICC(1)   = s2_t / (s2_t + s2_w)`` (one-way, single rating);
    * ``ICC(2,1) = s2_t / (s2_t + s2_r + s2_e)`` (two-way random, absolute agreement, single
      rating);
    * ``ICC(2,k) = s2_t / (s2_t + (s2_r + s2_e) / k)`` for the mean of ``k`` ratings, with ``k``
      the harmonic mean of the ratings per unit (units have different counts here);
    * ``ICC(3,1) = s2_t / (s2_t + s2_e)`` (consistency: rater offsets removed).

    In a complete balanced design with positive variance estimates REML equals the ANOVA
    estimators, so these equal Shrout & Fleiss' mean-square formulas.

    Not estimable (None, with ``note`` saying why), never a made-up number: every ICC when
    all scores are equal (0 / 0); ICC(1) when no unit has two ratings; the two-way ICCs
    with fewer than two raters or when no unit has two raters.
    """
    y = np.asarray(scores, dtype=np.float64)
    ok = np.isfinite(y)
    y = y[ok]
    r = np.asarray(raters, dtype=object)[ok]
    u = np.asarray(units, dtype=object)[ok]
    ucodes, ulevels = factorize(u)
    per_unit = np.bincount(ucodes, minlength=len(ulevels))
    if y.size < 3 or len(ulevels) < 2:
        return {"n": int(y.size), "n_units": len(ulevels), "note": "too few ratings"}
    n_raters = len(set(r.tolist()))
    raters_per_unit = [len(set(r[ucodes == j].tolist())) for j in range(len(ulevels))]
    base: dict[str, Any] = {
        "n": int(y.size),
        "n_units": len(ulevels),
        "n_raters": n_raters,
        "icc1": None,
        "icc2_1": None,
        "icc2_k": None,
        "icc3_1": None,
    }
    if float(np.ptp(y)) == 0.0:
        return {**base, "note": "not estimable (every score is the same: 0 / 0)"}
    const = np.zeros(y.size, dtype=np.int64)
    one = fit_crossed(y, const, None, u)
    k = float(per_unit.size / np.sum(1.0 / per_unit))
    out = {**base, "k_harmonic": k, "converged": one.converged}
    notes = []
    if per_unit.max() >= 2:
        out["icc1"] = _ratio(one.var_item, one.var_item + one.var_resid)
        out["one_way"] = {"unit": one.var_item, "within": one.var_resid}
    else:
        notes.append("ICC(1) not estimable (one rating per unit)")
    if n_raters < 2 or max(raters_per_unit) < 2:
        why = "one rater" if n_raters < 2 else "no unit has two raters"
        notes.append(f"two-way ICCs and variance components not estimable ({why})")
    else:
        two = fit_crossed(y, const, r, u)
        s2_t, s2_r, s2_e = two.var_item, two.var_rater, two.var_resid
        out.update(
            icc2_1=_ratio(s2_t, s2_t + s2_r + s2_e),
            icc2_k=_ratio(s2_t, s2_t + (s2_r + s2_e) / k),
            icc3_1=_ratio(s2_t, s2_t + s2_e),
            variance_components={"unit": s2_t, "rater": s2_r, "residual": s2_e},
            converged=two.converged and one.converged,
        )
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


# -- rater QC -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QCThresholds:
    """When a rater is flagged (each rule says which evidence it needs)."""

    gold_tolerance: float = 0.0
    """A gold answer is correct when ``|score - gold_expected| <= gold_tolerance``."""
    gold_min_accuracy: float = 0.75
    consensus_min_rho: float = 0.2
    """Spearman with the leave-one-out consensus below this is flagged..."""
    consensus_min_n: int = 8
    """...when at least this many of the rater's units have another rater."""
    straight_mode_share: float = 0.9
    straight_min_n: int = 10
    fast_ms: float = 2000.0
    fast_max_share: float = 0.2
    fast_min_n: int = 5


@dataclass
class RaterQC:
    """One rater's quality figures and the flags raised (each flag a readable reason)."""

    rater: Any
    n: int
    mean: float
    sd: float
    gold_n: int = 0
    gold_correct: int = 0
    gold_accuracy: float = math.nan
    consensus_n: int = 0
    consensus_spearman: float = math.nan
    consensus_pearson: float = math.nan
    mode_share: float = math.nan
    timed_n: int = 0
    fast_share: float = math.nan
    median_ms: float = math.nan
    flags: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _corr(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan, math.nan
    return float(stats.spearmanr(a, b).statistic), float(stats.pearsonr(a, b).statistic)


def rater_qc(
    raters: Sequence[Hashable] | np.ndarray,
    units: Sequence[Hashable] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    *,
    gold_expected: Sequence[float] | np.ndarray | None = None,
    response_ms: Sequence[float] | np.ndarray | None = None,
    gold_tolerance: Sequence[float] | np.ndarray | None = None,
    thresholds: QCThresholds | None = None,
) -> list[RaterQC]:
    """Per-rater QC. ``units`` identify what was rated (one per item x system x eval); scores
    of different evals should be on a common scale (the study report maps each eval's scale
    to 0..1 first).

    * gold accuracy: share of the rater's rows with a finite ``gold_expected`` answered within
      the tolerance (per row from ``gold_tolerance``, else ``thresholds.gold_tolerance``);
      flagged below ``gold_min_accuracy``;
    * consensus: for each of the rater's rows on a unit with other raters, the mean of the
      *other* raters' scores on that unit (leave-one-out); Spearman and Pearson between the
      rater's scores and these (denominator: rows with a consensus); flagged when Spearman
      is below ``consensus_min_rho`` on at least ``consensus_min_n`` rows;
    * straight-lining: share of the rater's most frequent score (``mode_share``); flagged
      when at least ``straight_mode_share`` over ``straight_min_n`` or more ratings;
    * too fast: share of timed rows with ``response_ms < fast_ms``; flagged above
      ``fast_max_share`` over ``fast_min_n`` or more timed rows.
    """
    th = thresholds or QCThresholds()
    y = np.asarray(scores, dtype=np.float64)
    rcodes, rlevels = factorize(raters)
    ucodes, ulevels = factorize(units)
    nu = len(ulevels)
    finite = np.isfinite(y)
    yy = np.where(finite, y, 0.0)
    usum = np.bincount(ucodes, weights=yy, minlength=nu)
    ucnt = np.bincount(ucodes, weights=finite.astype(float), minlength=nu)
    others = ucnt[ucodes] - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = np.where(finite & (others > 0), (usum[ucodes] - yy) / others, np.nan)
    gold = np.asarray(gold_expected, dtype=np.float64) if gold_expected is not None else None
    ms = np.asarray(response_ms, dtype=np.float64) if response_ms is not None else None
    tol = (
        np.asarray(gold_tolerance, dtype=np.float64)
        if gold_tolerance is not None
        else np.full(y.size, th.gold_tolerance)
    )
    order = np.argsort(rcodes, kind="stable")
    bounds = np.searchsorted(rcodes[order], np.arange(len(rlevels) + 1))
    out: list[RaterQC] = []
    for j, name in enumerate(rlevels):
        idx = order[bounds[j] : bounds[j + 1]]
        v = y[idx]
        v = v[np.isfinite(v)]
        q = RaterQC(
            rater=name,
            n=int(v.size),
            mean=float(v.mean()) if v.size else math.nan,
            sd=float(v.std(ddof=1)) if v.size > 1 else math.nan,
        )
        if v.size:
            _, cnt = np.unique(v, return_counts=True)
            q.mode_share = float(cnt.max() / v.size)
            if v.size >= th.straight_min_n and q.mode_share >= th.straight_mode_share:
                vals, cnts = np.unique(v, return_counts=True)
                q.flags.append(
                    f"straight-lining: {q.mode_share:.0%} of {v.size} ratings are "
                    f"{vals[np.argmax(cnts)]:g}"
                )
        if gold is not None:
            g = gold[idx]
            has = np.isfinite(g) & np.isfinite(y[idx])
            q.gold_n = int(has.sum())
            if q.gold_n:
                err = np.abs(y[idx][has] - g[has])
                q.gold_correct = int((err <= tol[idx][has] + 1e-9).sum())
                q.gold_accuracy = q.gold_correct / q.gold_n
                if q.gold_accuracy < th.gold_min_accuracy:
                    q.flags.append(
                        f"gold items: {q.gold_correct}/{q.gold_n} correct "
                        f"({q.gold_accuracy:.0%} < {th.gold_min_accuracy:.0%})"
                    )
        c = loo[idx]
        has = np.isfinite(c)
        q.consensus_n = int(has.sum())
        if q.consensus_n:
            q.consensus_spearman, q.consensus_pearson = _corr(y[idx][has], c[has])
            if (
                q.consensus_n >= th.consensus_min_n
                and math.isfinite(q.consensus_spearman)
                and q.consensus_spearman < th.consensus_min_rho
            ):
                q.flags.append(
                    f"disagrees with consensus: Spearman {q.consensus_spearman:.2f} "
                    f"< {th.consensus_min_rho:.2f} over {q.consensus_n} ratings"
                )
        if ms is not None:
            t = ms[idx]
            t = t[np.isfinite(t)]
            q.timed_n = int(t.size)
            if t.size:
                q.fast_share = float(np.mean(t < th.fast_ms))
                q.median_ms = float(np.median(t))
                if t.size >= th.fast_min_n and q.fast_share > th.fast_max_share:
                    q.flags.append(
                        f"too fast: {q.fast_share:.0%} of {t.size} ratings under "
                        f"{th.fast_ms:g} ms (median {q.median_ms:.0f} ms)"
                    )
        out.append(q)
    return out


def exclusion_effect(before: Mapping[Any, float], after: Mapping[Any, float]) -> dict[str, Any]:
    """What excluding raters changed: per system the two scores and ranks (1 = best), the
    Spearman/Kendall agreement of the two orders and the largest rank move."""
    from voxassay.stats.ranks import rank_agreement

    keys = [k for k in before if k in after]

    def ranks(m: Mapping[Any, float]) -> dict[Any, int]:
        order = sorted(keys, key=lambda k: -m[k] if math.isfinite(m[k]) else math.inf)
        return {k: i + 1 for i, k in enumerate(order)}

    rb, ra = ranks(before), ranks(after)
    rows = [
        {
            "system": k,
            "before": before[k],
            "after": after[k],
            "change": after[k] - before[k],
            "rank_before": rb[k],
            "rank_after": ra[k],
        }
        for k in sorted(keys, key=lambda k: rb[k])
    ]
    agree = rank_agreement({str(k): before[k] for k in keys}, {str(k): after[k] for k in keys})
    return {
        "systems": rows,
        "spearman": agree.spearman_rho,
        "kendall": agree.kendall_tau,
        "max_rank_change": max((abs(r["rank_before"] - r["rank_after"]) for r in rows), default=0),
        "max_abs_change": max((abs(r["change"]) for r in rows), default=0.0),
        "only_before": sorted(str(k) for k in before if k not in after),
    }


# -- correlations with CIs (judges vs humans) -----------------------------------------------


def correlation_ci(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 1000,
    conf: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Spearman's rho (and Pearson's r) of paired values with a percentile bootstrap CI of
    rho (pairs resampled with replacement; draws with a constant side are skipped). Pairs
    with a non-finite side are dropped; fewer than 3 pairs give NaN."""
    from scipy import stats

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = int(a.size)
    nan = math.nan
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return {"spearman": nan, "ci_lo": nan, "ci_hi": nan, "pearson": nan, "n": n}
    rho = float(stats.spearmanr(a, b).statistic)
    r = float(stats.pearsonr(a, b).statistic)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        xa, xb = a[idx], b[idx]
        if np.ptp(xa) == 0 or np.ptp(xb) == 0:
            continue
        boots.append(stats.spearmanr(xa, xb).statistic)
    if not boots:
        return {"spearman": rho, "ci_lo": nan, "ci_hi": nan, "pearson": r, "n": n}
    lo, hi = np.quantile(np.asarray(boots), [(1 - conf) / 2, (1 + conf) / 2])
    return {"spearman": rho, "ci_lo": float(lo), "ci_hi": float(hi), "pearson": r, "n": n}


def win_rate_agreement(
    human_rate: Sequence[float] | np.ndarray, judge_diff: Sequence[float] | np.ndarray
) -> dict[str, Any]:
    """Share of comparisons where the judge prefers the side the humans preferred.

    ``human_rate`` is the humans' preference for side A (0..1, 0.5 = no preference) and
    ``judge_diff`` the judge's score of A minus B. Comparisons where either side has no
    preference (rate exactly 0.5, difference 0) or is missing are left out and counted in
    ``ties``; the rate has a Wilson 95 % CI."""
    h = np.asarray(human_rate, dtype=np.float64)
    d = np.asarray(judge_diff, dtype=np.float64)
    ok = np.isfinite(h) & np.isfinite(d)
    decided = ok & (h != 0.5) & (d != 0)
    agree = int(np.sum((h[decided] > 0.5) == (d[decided] > 0)))
    n = int(decided.sum())
    lo, hi = wilson_interval(agree, n)
    return {
        "agreement": agree / n if n else math.nan,
        "ci_lo": lo,
        "ci_hi": hi,
        "n": n,
        "agree": agree,
        "ties": int(ok.sum()) - n,
        "missing": int((~ok).sum()),
    }


# -- dimensions -----------------------------------------------------------------------------


def dimension_scores(
    eval_scores: Mapping[str, Mapping[Any, float]],
    dimension_of: Mapping[str, str],
    *,
    min_rho: float = 0.30,
) -> dict[str, Any]:
    """Dimension score per system = equal-weight mean of its evals' system scores
    (``sum_e score_e(s) / E_s`` over the ``E_s`` evals of the dimension that scored ``s``).

    Membership check per eval: Spearman between the eval's system scores and the dimension's
    (over systems with both), passed when ``>= min_rho``; a leave-one-out Spearman (the
    dimension without that eval; NaN for a one-eval dimension) is reported beside it because
    the plain one includes the eval itself."""
    from voxassay.stats.ranks import rank_agreement

    dims: dict[str, list[str]] = defaultdict(list)
    for ev in eval_scores:
        dims[dimension_of.get(ev) or ev].append(ev)

    def combine(evals: Sequence[str]) -> dict[Any, float]:
        acc: dict[Any, list[float]] = defaultdict(list)
        for ev in evals:
            for s, v in eval_scores[ev].items():
                if math.isfinite(v):
                    acc[s].append(v)
        return {s: float(np.mean(vs)) for s, vs in acc.items()}

    out: dict[str, Any] = {}
    for dim, evals in sorted(dims.items()):
        scores = combine(evals)
        members = []
        for ev in evals:
            own = {str(k): v for k, v in eval_scores[ev].items()}
            rho = rank_agreement(own, {str(k): v for k, v in scores.items()}).spearman_rho
            rest = [e for e in evals if e != ev]
            loo = (
                rank_agreement(own, {str(k): v for k, v in combine(rest).items()}).spearman_rho
                if rest
                else math.nan
            )
            members.append(
                {
                    "eval": ev,
                    "spearman": rho,
                    "spearman_leave_one_out": loo,
                    "passed": bool(math.isfinite(rho) and rho >= min_rho),
                }
            )
        out[dim] = {
            "evals": list(evals),
            "scores": scores,
            "membership": members,
            "min_rho": min_rho,
        }
    return out


# -- pairwise preferences -------------------------------------------------------------------


def pairwise_preferences(
    system_a: Sequence[Hashable] | np.ndarray,
    system_b: Sequence[Hashable] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
) -> list[dict[str, Any]]:
    """Preference rate per unordered system pair. Each row's ``score`` is 1 (A preferred),
    0 (B preferred) or 0.5 (no preference); rows are oriented so ``first`` is the
    lexicographically smaller name. ``rate_first = (wins_first + ties / 2) / n``, with a
    Wilson 95 % CI on that (fractional) count."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for a, b, s in zip(system_a, system_b, scores, strict=True):
        if not math.isfinite(float(s)):
            continue
        sa, sb, v = str(a), str(b), float(s)
        if sa > sb:
            sa, sb, v = sb, sa, 1.0 - v
        cell = acc[(sa, sb)]
        if v == 0.5:
            cell[2] += 1
        elif v > 0.5:
            cell[0] += 1
        else:
            cell[1] += 1
    rows = []
    for (sa, sb), (wa, wb, ties) in sorted(acc.items()):
        n = int(wa + wb + ties)
        rate = (wa + ties / 2) / n if n else math.nan
        lo, hi = _wilson_frac(wa + ties / 2, n)
        rows.append(
            {
                "first": sa,
                "second": sb,
                "n": n,
                "wins_first": int(wa),
                "wins_second": int(wb),
                "ties": int(ties),
                "rate_first": rate,
                "ci_lo": lo,
                "ci_hi": hi,
            }
        )
    return rows


def _wilson_frac(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bradley_terry(
    system_a: Sequence[Hashable] | np.ndarray,
    system_b: Sequence[Hashable] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> dict[str, Any]:
    """Bradley-Terry strengths: ``P(i preferred to j) = 1 / (1 + exp(-(l_i - l_j)))``.

    A tie (score 0.5) counts as half a win for each side. To keep strengths finite when a
    system wins (or loses) every comparison, each compared pair also gets one pseudo-tie.
    Log-strengths ``l`` (sum zero within each connected component of the comparison graph)
    maximise the binomial log-likelihood by Newton steps; standard errors come from the
    pseudo-inverse of the Fisher information (the weighted graph Laplacian
    ``sum n_ij p_ij (1 - p_ij)``). ``win_prob_vs_avg = 1 / (1 + exp(-l_i))`` is the chance of
    beating a system of average (zero) log-strength. Strengths are comparable only inside
    one component; ``components`` lists them.
    """
    names = sorted({str(s) for s in system_a} | {str(s) for s in system_b})
    index = {s: i for i, s in enumerate(names)}
    k = len(names)
    wins = np.zeros((k, k))  # wins[i, j]: (fractional) wins of i over j
    for a, b, s in zip(system_a, system_b, scores, strict=True):
        v = float(s)
        if not math.isfinite(v):
            continue
        i, j = index[str(a)], index[str(b)]
        if i == j:
            continue
        wins[i, j] += v
        wins[j, i] += 1.0 - v
    compared = (wins + wins.T) > 0
    wins = wins + 0.5 * compared  # one pseudo-tie per compared pair
    n_ij = wins + wins.T
    # connected components
    comp = -np.ones(k, dtype=np.int64)
    c = 0
    for start in range(k):
        if comp[start] >= 0:
            continue
        stack = [start]
        comp[start] = c
        while stack:
            x = stack.pop()
            for y in np.nonzero(compared[x])[0]:
                if comp[y] < 0:
                    comp[y] = c
                    stack.append(int(y))
        c += 1
    lam = np.zeros(k)
    w_i = wins.sum(axis=1)
    converged = False
    it = 0
    info = np.zeros((k, k))
    for it in range(1, max_iter + 1):  # noqa: B007
        diff = lam[:, None] - lam[None, :]
        p = 1.0 / (1.0 + np.exp(-diff))
        grad = w_i - (n_ij * p).sum(axis=1)
        wgt = n_ij * p * (1 - p)
        info = np.diag(wgt.sum(axis=1)) - wgt
        step = np.linalg.pinv(info) @ grad
        lam = lam + step
        for cc in range(c):
            members = comp == cc
            lam[members] -= lam[members].mean()
        if np.max(np.abs(step)) < tol:
            converged = True
            break
    cov = np.linalg.pinv(info)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    strengths: list[dict[str, Any]] = [
        {
            "system": s,
            "log_strength": float(lam[i]),
            "se": float(se[i]),
            "ci_lo": float(lam[i] - 1.959963984540054 * se[i]),
            "ci_hi": float(lam[i] + 1.959963984540054 * se[i]),
            "win_prob_vs_avg": float(1.0 / (1.0 + math.exp(-lam[i]))),
            "component": int(comp[i]),
        }
        for i, s in enumerate(names)
    ]
    strengths.sort(key=lambda r: -float(r["log_strength"]))
    return {
        "model": "P(i over j) = logistic(l_i - l_j); ties = half wins; one pseudo-tie per pair",
        "strengths": strengths,
        "iterations": it,
        "converged": converged,
        "components": [[names[i] for i in np.nonzero(comp == cc)[0]] for cc in range(c)],
    }
