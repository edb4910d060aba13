"""Rater models for human ratings: per-rater z-scores, plain MOS, and a sparse crossed
random-effects estimator of rater-controlled system means.

The model (the statsmodels reference is
``mixedlm("score ~ 0 + C(system)", df, groups=1, re_formula="0",
vc_formula={"rater": "0 + C(rater)", "item": "0 + C(item)"})``)::

    y_k = beta[system(k)] + a[rater(k)] + b[item(k)] + e_k
    a ~ N(0, s2_rater),  b ~ N(0, s2_item),  e ~ N(0, s2_resid), all independent.

``beta[s]`` is the system's mean for an average rater and an average item: the
*rater-controlled mean*. It is estimated by REML, profiled the way lme4 does it: with
relative scale factors ``theta = (sd_rater, sd_item) / sd_resid`` and ``u = Lambda v``
(``Lambda = diag(theta)``), the penalized least-squares system

    M [beta; v] = [X'y; Lambda Z'y],   M = [[X'X, X'Z Lambda], [Lambda Z'X, Lambda Z'Z Lambda + I]]

gives the penalized residual sum of squares ``r2 = y'y - sol . rhs`` and the REML
deviance ``d(theta) = log|M| + (n - p) (1 + log(2 pi r2 / (n - p)))``, minimised over
``theta >= 0`` (L-BFGS-B). Then ``s2_resid = r2 / (n - p)``, ``s2_rater = theta_r^2 s2_resid``,
``s2_item = theta_i^2 s2_resid`` and ``Cov(beta) = s2_resid (M^-1)_{beta beta}``. CIs are Wald
intervals ``beta +- z_{1-alpha/2} SE`` (normal quantile, as statsmodels' ``conf_int``).

Nothing of size ``n x (raters + items)`` is ever dense. The larger random factor (usually
items) has a diagonal block in ``M`` and is absorbed (Schur complement), leaving a dense
``(systems + smaller factor)`` square system solved by Cholesky; its inverse also gives the
standard errors. When that square would be too large (``> max_dense`` rows), the whole of
``M`` is factorised by sparse LU instead (same deviance, slower).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "CrossedFit",
    "SimulatedRatings",
    "SystemEstimate",
    "ZScores",
    "factorize",
    "fit_crossed",
    "normal_quantile",
    "plain_mos",
    "rater_controlled_means",
    "rater_zscores",
    "simulate_ratings",
]

MAX_DENSE = 4000
"""Largest reduced (systems + smaller random factor) dimension solved densely."""

SINGLE_THREAD_BELOW = 2000
"""Dense systems smaller than this run with one BLAS thread (``threadpoolctl`` when it is
installed): for a few hundred rows a threaded Cholesky is several times *slower* on a
busy machine, and the optimizer makes dozens of them."""


def _blas_limit(dim: int) -> contextlib.AbstractContextManager[Any]:
    if dim >= SINGLE_THREAD_BELOW:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def normal_quantile(level: float) -> float:
    """Two-sided normal critical value for a ``level`` interval (0.95 -> 1.95996...)."""
    from scipy import stats

    return float(stats.norm.ppf(0.5 + level / 2))


def factorize(values: Sequence[Hashable] | np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Integer codes ``0..k-1`` and the sorted distinct levels (codes index the levels)."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64), []
    levels, codes = np.unique(arr.astype(str) if arr.dtype == object else arr, return_inverse=True)
    return codes.astype(np.int64).ravel(), [x.item() if hasattr(x, "item") else x for x in levels]


# -- z-scores -------------------------------------------------------------------------------


@dataclass
class ZScores:
    """Per-rater z-scores ``z = (score - mean_r) / sd_r`` with ``sd_r`` the sample SD
    (denominator ``n_r - 1``).

    A rater with a single rating has no SD and a rater whose ratings are all equal has
    ``sd_r = 0``: their rows get ``NaN`` and they are listed in ``excluded`` with the
    reason (``"one rating"`` or ``"zero sd"``); callers drop the NaN rows and report it.
    """

    z: np.ndarray
    mean: dict[Any, float]
    sd: dict[Any, float]
    n: dict[Any, int]
    excluded: dict[Any, str] = field(default_factory=dict)

    @property
    def n_excluded_rows(self) -> int:
        return int(np.isnan(self.z).sum())


def rater_zscores(
    raters: Sequence[Hashable] | np.ndarray, scores: Sequence[float] | np.ndarray
) -> ZScores:
    """Z-score each rating within its rater (see :class:`ZScores` for the definition)."""
    y = np.asarray(scores, dtype=np.float64)
    codes, levels = factorize(raters)
    k = len(levels)
    n = np.bincount(codes, minlength=k).astype(np.float64)
    sums = np.bincount(codes, weights=y, minlength=k)
    mean = np.divide(sums, n, out=np.full(k, np.nan), where=n > 0)
    dev2 = np.bincount(codes, weights=(y - mean[codes]) ** 2, minlength=k)
    var = np.divide(dev2, n - 1, out=np.full(k, np.nan), where=n > 1)
    sd = np.sqrt(var)
    excluded: dict[Any, str] = {}
    ok = np.ones(k, dtype=bool)
    for j, lev in enumerate(levels):
        if n[j] < 2:
            excluded[lev] = "one rating"
            ok[j] = False
        elif not sd[j] > 1e-12 * max(1.0, abs(mean[j])):
            excluded[lev] = "zero sd"
            ok[j] = False
    safe_sd = np.where(ok, sd, 1.0)
    z = np.where(ok[codes], (y - mean[codes]) / safe_sd[codes], np.nan)
    return ZScores(
        z=z,
        mean={lev: float(mean[j]) for j, lev in enumerate(levels)},
        sd={lev: float(sd[j]) for j, lev in enumerate(levels)},
        n={lev: int(n[j]) for j, lev in enumerate(levels)},
        excluded=excluded,
    )


# -- plain MOS ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemEstimate:
    """One system's mean with its standard error and a two-sided CI (``n`` ratings)."""

    system: Any
    mean: float
    se: float
    ci_lo: float
    ci_hi: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "mean": self.mean,
            "se": self.se,
            "ci_lo": self.ci_lo,
            "ci_hi": self.ci_hi,
            "n": self.n,
        }


def plain_mos(
    scores: Sequence[float] | np.ndarray,
    systems: Sequence[Hashable] | np.ndarray,
    *,
    method: Literal["t", "bootstrap"] = "t",
    clusters: Sequence[Hashable] | np.ndarray | None = None,
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[SystemEstimate]:
    """Mean opinion score per system: ``sum(scores) / n`` over the system's ``n`` ratings.

    ``method="t"``: ``mean +- t_{n-1} sd / sqrt(n)`` (sd with denominator ``n - 1``; it
    treats ratings as independent, which understates the width when raters and items
    repeat). ``method="bootstrap"``: percentile bootstrap that resamples ``clusters``
    (e.g. items) within each system with replacement, or single ratings when ``clusters``
    is None; ``se`` is then the SD of the bootstrap means. One rating gives NaN bounds.
    """
    from scipy import stats

    y = np.asarray(scores, dtype=np.float64)
    scodes, slevels = factorize(systems)
    cl = factorize(clusters)[0] if clusters is not None else None
    rng = np.random.default_rng(seed)
    order = np.argsort(scodes, kind="stable")
    bounds = np.searchsorted(scodes[order], np.arange(len(slevels) + 1))
    out: list[SystemEstimate] = []
    for j, name in enumerate(slevels):
        idx = order[bounds[j] : bounds[j + 1]]
        v = y[idx]
        n = int(v.size)
        m = float(v.mean()) if n else math.nan
        if n < 2:
            out.append(SystemEstimate(name, m, math.nan, math.nan, math.nan, n))
            continue
        if method == "t":
            se = float(v.std(ddof=1) / math.sqrt(n))
            t = float(stats.t.ppf(0.5 + level / 2, n - 1))
            out.append(SystemEstimate(name, m, se, m - t * se, m + t * se, n))
            continue
        sums: np.ndarray = v
        counts: np.ndarray = np.ones(n)
        if cl is not None:
            ccodes, cinv = np.unique(cl[idx], return_inverse=True)
            sums = np.bincount(cinv, weights=v, minlength=ccodes.size)
            counts = np.bincount(cinv, minlength=ccodes.size).astype(np.float64)
        k = sums.size
        draws = rng.integers(0, k, size=(n_boot, k))
        means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
        lo, hi = np.quantile(means, [0.5 - level / 2, 0.5 + level / 2])
        out.append(SystemEstimate(name, m, float(means.std(ddof=1)), float(lo), float(hi), n))
    return out


# -- crossed random-effects model -----------------------------------------------------------


@dataclass
class CrossedFit:
    """REML fit of ``y = beta[system] + a[rater] + b[item] + e`` (see the module docstring).

    ``beta`` and ``cov`` are over ``systems`` in order; ``rater_effects`` and
    ``item_effects`` are the conditional modes (BLUPs) of ``a`` and ``b``. ``iterations`` and
    ``evaluations`` count optimizer steps and deviance evaluations; ``converged`` is the
    optimizer's verdict and ``grad_norm`` the largest projected-gradient component there.
    """

    systems: list[Any]
    beta: np.ndarray
    cov: np.ndarray
    n_per_system: np.ndarray
    var_rater: float
    var_item: float
    var_resid: float
    rater_effects: dict[Any, float]
    item_effects: dict[Any, float]
    deviance: float
    iterations: int
    evaluations: int
    converged: bool
    message: str
    method: str
    n: int
    n_raters: int
    n_items: int
    grad_norm: float = math.nan
    seconds: float = math.nan

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0))

    def estimates(self, level: float = 0.95) -> list[SystemEstimate]:
        """Per-system ``beta +- z SE`` (Wald) intervals."""
        z = normal_quantile(level)
        se = self.se
        return [
            SystemEstimate(
                s,
                float(self.beta[j]),
                float(se[j]),
                float(self.beta[j] - z * se[j]),
                float(self.beta[j] + z * se[j]),
                int(self.n_per_system[j]),
            )
            for j, s in enumerate(self.systems)
        ]

    def contrast(self, i: int, j: int, level: float = 0.95) -> dict[str, float]:
        """``beta_i - beta_j`` with its Wald CI (``Var = C_ii + C_jj - 2 C_ij``): rater and
        item effects shared by the two systems cancel here, so this is much narrower than
        the two separate intervals suggest."""
        d = float(self.beta[i] - self.beta[j])
        var = float(self.cov[i, i] + self.cov[j, j] - 2 * self.cov[i, j])
        se = math.sqrt(max(var, 0.0))
        z = normal_quantile(level)
        return {"diff": d, "se": se, "ci_lo": d - z * se, "ci_hi": d + z * se}

    def variance_components(self) -> dict[str, float | None]:
        """The REML variances; None where the design cannot tell them apart: the rater
        variance with fewer than two raters, item and residual when no item has two
        ratings (only their sum is seen)."""
        separable = self.n > self.n_items
        return {
            "rater": self.var_rater if self.n_raters >= 2 else None,
            "item": self.var_item if separable else None,
            "residual": self.var_resid if separable else None,
        }

    def estimability(self) -> str | None:
        """Why some variance component is not estimable (None: all are)."""
        why = []
        if self.n_raters < 2:
            why.append("one rater")
        if self.n <= self.n_items:
            why.append("one rating per item")
        return f"not estimable ({', '.join(why)})" if why else None

    def summary(self) -> dict[str, Any]:
        """JSON-ready description of the fit (without the per-system table)."""
        return {
            "model": "score ~ 0 + system + (1|rater) + (1|item), REML",
            "variance_components": self.variance_components(),
            "variance_note": self.estimability(),
            "deviance_reml": self.deviance,
            "iterations": self.iterations,
            "evaluations": self.evaluations,
            "converged": self.converged,
            "message": self.message,
            "grad_norm": self.grad_norm,
            "solver": self.method,
            "n_ratings": self.n,
            "n_raters": self.n_raters,
            "n_items": self.n_items,
            "n_systems": len(self.systems),
            "seconds": self.seconds,
        }


class _Design:
    """Sparse counts of the crossed design; evaluates the profiled REML deviance."""

    def __init__(
        self,
        y: np.ndarray,
        s: np.ndarray,
        p: int,
        a: np.ndarray | None,
        qa: int,
        b: np.ndarray,
        qb: int,
        max_dense: int,
    ) -> None:
        import scipy.sparse as sp

        self.n = y.size
        self.p = p
        self.y = y
        self.yty = float(y @ y)
        # "big" = the random factor that is absorbed; "small" = the one kept (may be absent)
        big: np.ndarray = b
        small: np.ndarray | None = a
        qbig, qsmall = qb, qa
        self.big_is_rater = a is not None and qa > qb
        if a is not None and self.big_is_rater:
            big, qbig, small, qsmall = a, qa, b, qb
        self.has_small = small is not None and qsmall > 0
        if not self.has_small:
            qsmall = 0
        self.qbig, self.qsmall = qbig, qsmall
        ones = np.ones(self.n)
        self.n_s = np.bincount(s, minlength=p).astype(np.float64)
        self.n_big = np.bincount(big, minlength=qbig).astype(np.float64)
        self.xty = np.bincount(s, weights=y, minlength=p)
        self.zty_big = np.bincount(big, weights=y, minlength=qbig)
        m = p + qsmall
        self.m = m
        # rows of the reduced block: systems then the small factor
        rows: np.ndarray
        cols: np.ndarray
        vals: np.ndarray
        if self.has_small:
            assert small is not None
            self.n_small = np.bincount(small, minlength=qsmall).astype(np.float64)
            self.zty_small: np.ndarray = np.bincount(small, weights=y, minlength=qsmall)
            n_s_small = sp.csr_matrix((ones, (s, small)), shape=(p, qsmall)).toarray()
            k0 = np.zeros((m, m))
            k0[:p, :p] = np.diag(self.n_s)
            k0[:p, p:] = n_s_small
            k0[p:, :p] = n_s_small.T
            k0[p:, p:] = np.diag(self.n_small)
            rows = np.concatenate([s, p + small])
            cols = np.concatenate([big, big])
            vals = np.concatenate([ones, ones])
        else:
            self.n_small = np.zeros(0)
            self.zty_small = np.zeros(0)
            k0 = np.diag(self.n_s)
            rows, cols, vals = s, big, ones
        self.k0 = k0
        # Wu: (m x qbig) counts, summed duplicates
        self.wu = sp.csr_matrix((vals, (rows, cols)), shape=(m, qbig))
        self.wu.sum_duplicates()
        self.dense = m <= max_dense
        self.method = "schur-dense" if self.dense else "sparse-lu"
        self.evaluations = 0
        self._small = small if small is not None else np.zeros(0, dtype=np.int64)
        self._big = big
        self._s = s

    def internal(self, theta: np.ndarray) -> tuple[float, float]:
        """User order ``(theta_rater, theta_item)`` (or ``(theta_item,)`` one-way) to the
        internal ``(theta_small, theta_big)``."""
        if not self.has_small:
            return 0.0, float(theta[0])
        th_r, th_i = float(theta[0]), float(theta[1])
        return (th_i, th_r) if self.big_is_rater else (th_r, th_i)

    def _reduced(self, th_small: float, th_big: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = self.p
        d = th_big * th_big * self.n_big + 1.0
        wd = self.wu.multiply(1.0 / d).tocsr()
        g = (wd @ self.wu.T).toarray()
        scale = np.ones(self.m)
        scale[p:] = th_small
        s_mat = (self.k0 - th_big * th_big * g) * np.outer(scale, scale)
        s_mat[np.arange(p, self.m), np.arange(p, self.m)] += 1.0
        rhs_r = np.concatenate([self.xty, th_small * self.zty_small])
        rhs_big = th_big * self.zty_big
        # S r = rhs_r - W D^-1 rhs_big with W = th_big * diag(scale) Wu
        corr = th_big * scale * (self.wu @ (rhs_big / d))
        return s_mat, rhs_r - corr, d

    def solve(self, th_small: float, th_big: float, want_cov: bool = False) -> dict[str, Any]:
        """Deviance and solution at ``theta``; with ``want_cov`` also ``(M^-1)_{beta beta}``
        and the random-effect modes."""
        self.evaluations += 1
        if not self.dense:
            return self._solve_sparse(th_small, th_big, want_cov)
        from scipy import linalg

        s_mat, rhs, d = self._reduced(th_small, th_big)
        try:
            cf = linalg.cho_factor(s_mat, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return {"deviance": math.inf}
        r = linalg.cho_solve(cf, rhs, check_finite=False)
        logdet = 2.0 * float(np.log(np.diag(cf[0])).sum()) + float(np.log(d).sum())
        scale = np.ones(self.m)
        scale[self.p :] = th_small
        rhs_big = th_big * self.zty_big
        # v_big = D^-1 (rhs_big - W' r)
        v_big = (rhs_big - th_big * (self.wu.T @ (scale * r))) / d
        rhs_r = np.concatenate([self.xty, th_small * self.zty_small])
        r2 = self.yty - float(r @ rhs_r) - float(v_big @ rhs_big)
        out = self._finish(logdet, r2)
        if want_cov:
            eye = np.zeros((self.m, self.p))
            eye[np.arange(self.p), np.arange(self.p)] = 1.0
            out["minv_bb"] = linalg.cho_solve(cf, eye, check_finite=False)[: self.p]
            out["beta"] = r[: self.p]
            out["u_small"] = th_small * r[self.p :]
            out["u_big"] = th_big * v_big
        return out

    def _finish(self, logdet: float, r2: float) -> dict[str, Any]:
        dof = self.n - self.p
        r2 = max(r2, 1e-300)
        dev = logdet + dof * (1.0 + math.log(2.0 * math.pi * r2 / dof))
        return {"deviance": dev, "r2": r2}

    def _full_sparse(self, th_small: float, th_big: float) -> tuple[Any, np.ndarray]:
        import scipy.sparse as sp

        p, qs, qb = self.p, self.qsmall, self.qbig
        n = self.n
        ones = np.ones(n)
        cols = [self._s]
        vals = [ones]
        off = p
        if self.has_small:
            cols.append(off + self._small)
            vals.append(th_small * ones)
            off += qs
        cols.append(off + self._big)
        vals.append(th_big * ones)
        dim = p + qs + qb
        rows = np.tile(np.arange(n), len(cols))
        zx = sp.csr_matrix((np.concatenate(vals), (rows, np.concatenate(cols))), shape=(n, dim))
        mat = (zx.T @ zx).tocsc()
        diag = np.zeros(dim)
        diag[p:] = 1.0
        mat = (mat + sp.diags(diag)).tocsc()
        rhs = zx.T @ self.y
        return mat, rhs

    def _solve_sparse(self, th_small: float, th_big: float, want_cov: bool) -> dict[str, Any]:
        from scipy.sparse.linalg import splu

        mat, rhs = self._full_sparse(th_small, th_big)
        try:
            lu = splu(
                mat,
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
        except RuntimeError:
            return {"deviance": math.inf}
        sol = lu.solve(rhs)
        logdet = float(np.log(np.abs(lu.U.diagonal())).sum())
        r2 = self.yty - float(sol @ rhs)
        out = self._finish(logdet, r2)
        if want_cov:
            eye = np.zeros((mat.shape[0], self.p))
            eye[np.arange(self.p), np.arange(self.p)] = 1.0
            out["minv_bb"] = lu.solve(eye)[: self.p]
            out["beta"] = sol[: self.p]
            out["u_small"] = th_small * sol[self.p : self.p + self.qsmall]
            out["u_big"] = th_big * sol[self.p + self.qsmall :]
        return out


def fit_crossed(
    scores: Sequence[float] | np.ndarray,
    systems: Sequence[Hashable] | np.ndarray,
    raters: Sequence[Hashable] | np.ndarray | None,
    items: Sequence[Hashable] | np.ndarray,
    *,
    max_iter: int = 200,
    tol: float = 1e-10,
    max_dense: int = MAX_DENSE,
    start: tuple[float, float] | None = None,
) -> CrossedFit:
    """Fit the crossed rater x item model by REML (see the module docstring).

    ``raters=None`` fits the one-way model ``y = beta[system] + b[item] + e`` (used for
    ICC(1)). Rows with a non-finite score are dropped. ``start`` is the starting
    ``(sd_rater, sd_item) / sd_resid`` (default ``(1, 1)``). Raises ``ValueError`` on no
    more ratings than systems.
    """
    import time

    t0 = time.perf_counter()
    y = np.asarray(scores, dtype=np.float64)
    keep = np.isfinite(y)
    s, slevels = factorize(np.asarray(systems, dtype=object)[keep])
    b, blevels = factorize(np.asarray(items, dtype=object)[keep])
    a: np.ndarray | None = None
    alevels: list[Any] = []
    if raters is not None:
        a, alevels = factorize(np.asarray(raters, dtype=object)[keep])
    y = y[keep]
    p, qa, qb = len(slevels), len(alevels), len(blevels)
    if y.size <= p:
        raise ValueError(f"{y.size} ratings cannot fit {p} system means and variances")
    design = _Design(y, s, p, a, qa, b, qb, max_dense)
    x0 = np.array(start if start is not None else (1.0, 1.0), dtype=np.float64)
    if not design.has_small:
        x0 = x0[1:]
    with _blas_limit(design.m if design.dense else 0):
        theta, res, grad = _minimize_deviance(design, x0, max_iter, tol)
        sol = design.solve(*design.internal(theta), want_cov=True)
    var_resid = float(sol["r2"]) / (y.size - p)
    th_r = float(theta[0]) if design.has_small else 0.0
    th_i = float(theta[-1])
    if design.big_is_rater:
        u_rater, u_item = sol["u_big"], sol["u_small"]
    elif design.has_small:
        u_rater, u_item = sol["u_small"], sol["u_big"]
    else:
        u_rater, u_item = np.zeros(0), sol["u_big"]
    cov = var_resid * sol["minv_bb"]
    cov = (cov + cov.T) / 2
    grad_max = float(np.max(np.abs(grad))) if grad.size else 0.0
    return CrossedFit(
        systems=list(slevels),
        beta=np.asarray(sol["beta"], dtype=np.float64),
        cov=cov,
        n_per_system=np.bincount(s, minlength=p),
        var_rater=th_r * th_r * var_resid,
        var_item=th_i * th_i * var_resid,
        var_resid=var_resid,
        rater_effects={lev: float(u_rater[j]) for j, lev in enumerate(alevels)},
        item_effects={lev: float(u_item[j]) for j, lev in enumerate(blevels)},
        deviance=float(sol["deviance"]),
        iterations=int(res.nit),
        evaluations=design.evaluations,
        converged=grad_max < GRAD_TOL and int(res.nit) < max_iter,
        message=str(res.message),
        method=design.method,
        n=int(y.size),
        n_raters=qa,
        n_items=qb,
        grad_norm=grad_max,
        seconds=time.perf_counter() - t0,
    )


THETA_MAX = 1e3
"""Upper bound of a relative SD (random-effect SD / residual SD) during the search: a first
quasi-Newton step can otherwise jump to values where ``M`` is numerically singular."""

GRAD_TOL = 0.05
"""Largest projected-gradient component of the REML deviance (per unit of relative SD)
accepted as converged: the deviance is a -2 log-likelihood, so a slope of 0.05 over the
remaining step changes it by far less than one unit."""


def _minimize_deviance(
    design: _Design, x0: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, Any, np.ndarray]:
    """L-BFGS-B over ``theta >= 0`` (finite-difference gradients), then, if the projected
    gradient is still above :data:`GRAD_TOL` (a line search that stopped early), Powell from
    there. Returns ``(theta, result, projected gradient)``."""
    from scipy import optimize

    def dev(theta: np.ndarray) -> float:
        return float(design.solve(*design.internal(theta))["deviance"])

    bounds = [(0.0, THETA_MAX)] * x0.size
    res = optimize.minimize(
        dev,
        x0,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-5},
    )
    theta = np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)
    grad = _projected_gradient(dev, theta)
    if np.max(np.abs(grad), initial=0.0) >= GRAD_TOL:
        res2 = optimize.minimize(
            dev, theta, method="Powell", bounds=bounds, options={"xtol": 1e-8, "ftol": 1e-12}
        )
        theta2 = np.maximum(np.asarray(res2.x, dtype=np.float64), 0.0)
        if dev(theta2) <= dev(theta):
            res2.nit = int(res.nit) + int(res2.nit)
            res2.message = f"L-BFGS-B: {res.message}; then Powell: {res2.message}"
            res, theta = res2, theta2
            grad = _projected_gradient(dev, theta)
    return theta, res, grad


def _projected_gradient(dev: Any, theta: np.ndarray) -> np.ndarray:
    """Central differences; one-sided at a zero bound, where only descent into the feasible
    region counts (a positive slope there is optimal)."""
    grad = np.zeros_like(theta)
    f0 = dev(theta)
    for k in range(theta.size):
        h = 1e-5 * max(1.0, theta[k])
        up = theta.copy()
        up[k] += h
        if theta[k] > h:
            dn = theta.copy()
            dn[k] -= h
            grad[k] = (dev(up) - dev(dn)) / (2 * h)
        else:
            grad[k] = min(0.0, (dev(up) - f0) / h)
    return grad


def rater_controlled_means(
    scores: Sequence[float] | np.ndarray,
    systems: Sequence[Hashable] | np.ndarray,
    raters: Sequence[Hashable] | np.ndarray,
    items: Sequence[Hashable] | np.ndarray,
    *,
    scale: Literal["raw", "z"] = "raw",
    level: float = 0.95,
    **fit_options: Any,
) -> tuple[list[SystemEstimate], CrossedFit, ZScores | None]:
    """Rater-controlled system means on the raw score scale or on within-rater z-scores.

    With ``scale="z"`` the ratings are first z-scored per rater (:func:`rater_zscores`);
    rows of raters that cannot be z-scored are dropped and listed in the returned
    :class:`ZScores`. Returns ``(estimates, fit, zscores or None)``.
    """
    y = np.asarray(scores, dtype=np.float64)
    zs: ZScores | None = None
    if scale == "z":
        zs = rater_zscores(raters, y)
        y = zs.z
    fit = fit_crossed(y, systems, raters, items, **fit_options)
    return fit.estimates(level), fit, zs


# -- simulation -----------------------------------------------------------------------------


@dataclass
class SimulatedRatings:
    """Generated ratings with the truth behind them (see :func:`simulate_ratings`)."""

    score: np.ndarray
    system: np.ndarray
    rater: np.ndarray
    item: np.ndarray
    quality: dict[str, float]
    rater_bias: dict[str, float]

    def __len__(self) -> int:
        return int(self.score.size)


def simulate_ratings(
    *,
    n_systems: int = 10,
    n_raters: int = 40,
    items_per_system: int = 20,
    raters_per_item: int = 5,
    quality_range: float = 1.0,
    rater_sd: float = 0.7,
    item_sd: float = 0.3,
    noise_sd: float = 0.5,
    confound: float = 0.0,
    likert: bool = False,
    seed: int = 0,
) -> SimulatedRatings:
    """Ratings from ``y = q[system] + a[rater] + b[item] + e`` with known truth.

    System qualities are evenly spaced over ``+-quality_range``; items are nested in
    systems; ``a ~ N(0, rater_sd^2)``, ``b ~ N(0, item_sd^2)``, ``e ~ N(0, noise_sd^2)``.
    Each item gets ``raters_per_item`` distinct raters drawn with probability
    ``proportional to exp(-confound * a_r * q_s / (rater_sd * quality_range))``: with
    ``confound > 0`` harsh raters mostly rate the good systems and lenient ones the bad, so
    raw means are biased towards each other (and can swap), while every rater still rates
    several systems. ``likert=True`` maps to integer points ``clip(round(3 + y), 1, 5)``.
    Memory and time are linear in the number of ratings.
    """
    rng = np.random.default_rng(seed)
    q = np.linspace(-quality_range, quality_range, n_systems)
    bias = rng.normal(0.0, rater_sd, n_raters)
    n_items = n_systems * items_per_system
    item_sys = np.repeat(np.arange(n_systems), items_per_system)
    item_eff = rng.normal(0.0, item_sd, n_items)
    k = min(raters_per_item, n_raters)
    scale = confound / (max(rater_sd, 1e-12) * max(quality_range, 1e-12))
    rater_idx = np.empty((n_items, k), dtype=np.int64)
    for s in range(n_systems):
        logits = -scale * bias * q[s]
        w = np.exp(logits - logits.max())
        w /= w.sum()
        items = np.nonzero(item_sys == s)[0]
        # k distinct raters per item, weighted (Gumbel top-k)
        g = np.log(w)[None, :] - np.log(-np.log(rng.random((items.size, n_raters))))
        rater_idx[items] = np.argpartition(-g, k - 1, axis=1)[:, :k]
    items_col = np.repeat(np.arange(n_items), k)
    raters_col = rater_idx.ravel()
    sys_col = item_sys[items_col]
    y = (
        q[sys_col]
        + bias[raters_col]
        + item_eff[items_col]
        + rng.normal(0, noise_sd, items_col.size)
    )
    if likert:
        y = np.clip(np.round(3.0 + y), 1, 5)
    width_s, width_r, width_i = len(str(n_systems)), len(str(n_raters)), len(str(n_items))
    sys_names = np.array([f"sys{j:0{width_s}d}" for j in range(n_systems)])
    rater_names = np.array([f"r{j:0{width_r}d}" for j in range(n_raters)])
    item_names = np.array([f"i{j:0{width_i}d}" for j in range(n_items)])
    return SimulatedRatings(
        score=y,
        system=sys_names[sys_col],
        rater=rater_names[raters_col],
        item=item_names[items_col],
        quality={str(sys_names[j]): float(q[j]) for j in range(n_systems)},
        rater_bias={str(rater_names[j]): float(bias[j]) for j in range(n_raters)},
    )
