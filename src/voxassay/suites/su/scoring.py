"""SU metrics: pure functions with their formulas and denominators.

- accuracy = correct / n over parsed answers of test items (unparseable, error and timeout
  records are counted beside it, never in n), 95 % Wilson interval;
- confusion matrix: counts of (truth, answer) over the same n;
- AUC (ROC) = P(score of a random positive > score of a random negative) + 0.5 P(tie)
  (Mann-Whitney), over items with a continuous score; the positive class is ``same``
  (speaker match) or ``human`` (synthetic detection);
- EER: the error rate where the false-accept rate (negatives >= t) equals the false-reject
  rate (positives < t), interpolated between the two neighbouring thresholds;
- accuracy at a threshold t: predict positive when score >= t; "best" = the t that
  maximises it on the scored items themselves (optimistic, labelled so); "calibrated" = the
  t chosen the same way on the calibration split and applied to the test split;
- segmented vs merged: paired difference of accuracies on the pairs both variants answered,
  95 % paired bootstrap (``stats.intervals.paired_bootstrap_ratio_diff``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from voxassay.stats.intervals import paired_bootstrap_ratio_diff, wilson_interval

__all__ = [
    "FIXED_RATING_THRESHOLD",
    "METRICS_VERSION",
    "accuracy",
    "best_threshold",
    "confusion",
    "eer",
    "paired_accuracy_diff",
    "roc_auc",
    "threshold_accuracy",
]

METRICS_VERSION = "su-metrics-1"
FIXED_RATING_THRESHOLD = 3.0
"""Synthetic detection: a 1-5 rating >= 3 counts as "human" at the fixed threshold."""


def accuracy(correct: Sequence[bool | int]) -> dict[str, Any]:
    """``k / n`` with a Wilson 95 % CI; ``n`` = number of parsed answers given."""
    n = len(correct)
    k = int(sum(bool(c) for c in correct))
    lo, hi = wilson_interval(k, n)
    return {"accuracy": k / n if n else math.nan, "ci_lo": lo, "ci_hi": hi, "n": n, "k": k}


def confusion(
    truths: Sequence[str], answers: Sequence[str], labels: Sequence[str]
) -> dict[str, Any]:
    """Counts ``matrix[i][j]`` of truth ``labels[i]`` answered as ``labels[j]``, with
    per-class recall (diagonal / row sum) and precision (diagonal / column sum)."""
    order = list(labels)
    for v in [*truths, *answers]:
        if v not in order:
            order.append(v)
    idx = {lab: i for i, lab in enumerate(order)}
    m = np.zeros((len(order), len(order)), dtype=int)
    for t, a in zip(truths, answers, strict=True):
        m[idx[t], idx[a]] += 1
    rows, cols = m.sum(axis=1), m.sum(axis=0)
    per_class = [
        {
            "label": lab,
            "n": int(rows[i]),
            "recall": float(m[i, i] / rows[i]) if rows[i] else None,
            "precision": float(m[i, i] / cols[i]) if cols[i] else None,
        }
        for i, lab in enumerate(order)
    ]
    return {"labels": order, "matrix": m.tolist(), "per_class": per_class}


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """Mann-Whitney AUC (ties count one half); NaN without both classes."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return math.nan
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


def eer(scores: Sequence[float], positive: Sequence[bool]) -> dict[str, float]:
    """Equal error rate and its threshold (module docstring); NaN without both classes."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    if y.all() or not y.any():
        return {"eer": math.nan, "threshold": math.nan}
    cands = np.unique(s)
    cands = np.concatenate([cands, [cands[-1] + 1e-9]])
    # FAR and FRR at every candidate at once (sorted counts, O(n log n)); the same values
    # as the module docstring's definitions at each threshold
    neg, pos = np.sort(s[~y]), np.sort(s[y])
    fars = 1.0 - np.searchsorted(neg, cands, side="left") / neg.size
    frrs = np.searchsorted(pos, cands, side="left") / pos.size
    crossed = np.flatnonzero(frrs >= fars)
    if crossed.size == 0:
        return {"eer": math.nan, "threshold": math.nan}
    i = int(crossed[0])
    far, frr, t = float(fars[i]), float(frrs[i]), float(cands[i])
    if i == 0 or frr == far:
        return {"eer": (far + frr) / 2, "threshold": t}
    pt, pfar, pfrr = float(cands[i - 1]), float(fars[i - 1]), float(frrs[i - 1])
    # linear interpolation of (far - frr) crossing zero between the previous candidate and t
    d0, d1 = pfar - pfrr, far - frr
    w = d0 / (d0 - d1) if d0 != d1 else 0.5
    e = pfar + w * (far - pfar)
    return {"eer": float(e), "threshold": float(pt + w * (t - pt))}


def threshold_accuracy(
    scores: Sequence[float], positive: Sequence[bool], threshold: float
) -> dict[str, Any]:
    """Accuracy of "positive iff score >= threshold" with its Wilson CI."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    out = accuracy(list((s >= threshold) == y))
    out["threshold"] = threshold
    return out


def best_threshold(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """The threshold maximising accuracy of "positive iff score >= t": midpoints between
    neighbouring distinct scores (and below/above all); ties go to the lowest."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    if s.size == 0:
        return math.nan
    u = np.unique(s)
    cands = [float(u[0] - 1e-6)]
    cands += [float((a + b) / 2) for a, b in itertools.pairwise(u)]
    cands.append(float(u[-1] + 1e-6))
    accs = [float(np.mean((s >= t) == y)) for t in cands]
    return cands[int(np.argmax(accs))]


def paired_accuracy_diff(
    a: dict[str, bool], b: dict[str, bool], clusters: dict[str, str] | None = None, seed: int = 0
) -> dict[str, Any]:
    """Accuracy(A) - accuracy(B) on the keys both answered, with a paired bootstrap CI."""
    keys = sorted(set(a) & set(b))
    if not keys:
        return {"n": 0, "a": None, "b": None, "diff": None, "ci_lo": None, "ci_hi": None}
    cl = [clusters.get(k, k) for k in keys] if clusters else None
    d = paired_bootstrap_ratio_diff(
        [float(a[k]) for k in keys],
        [1.0] * len(keys),
        [float(b[k]) for k in keys],
        [1.0] * len(keys),
        cl,
        seed=seed,
    )
    return {
        "n": d.n,
        "a": d.a,
        "b": d.b,
        "diff": d.diff,
        "ci_lo": d.ci_lo,
        "ci_hi": d.ci_hi,
        "p_value": d.p_value,
        "only_a": len(set(a) - set(b)),
        "only_b": len(set(b) - set(a)),
    }
