"""How far one signal lags another: the normalised cross-correlation peak.

``best_lag(x, y, lo, hi)`` returns the lag ``k`` in ``[lo, hi]`` samples that maximises

    r(k) = sum_j x[j] * y[j + k] / sqrt(sum_j x[j]^2 * sum_j y[j + k]^2)

(both sums over the ``j`` where ``x[j]`` and ``y[j + k]`` exist) and ``r`` at that lag:
1.0 when ``y`` is ``x`` delayed by ``k`` and scaled. Positive ``k``: ``y`` is later. Lags
where ``y``'s overlapping part is silent score 0. Computed with one FFT.
"""

from __future__ import annotations

import numpy as np

__all__ = ["best_lag"]


def best_lag(x: np.ndarray, y: np.ndarray, lo: int, hi: int) -> tuple[int, float]:
    """The lag of ``y`` behind ``x`` in ``[lo, hi]`` and its correlation (module docstring).
    ``(0, 0.0)`` when ``x`` is silent or the range is empty."""
    a = np.asarray(x, np.float64).reshape(-1)
    b = np.asarray(y, np.float64).reshape(-1)
    if hi < lo or a.size == 0 or b.size == 0 or not np.any(a):
        return 0, 0.0
    n = a.size + b.size
    nfft = 1 << (n - 1).bit_length()
    c = np.fft.irfft(np.fft.rfft(b, nfft) * np.conj(np.fft.rfft(a, nfft)), nfft)
    ea = np.concatenate(([0.0], np.cumsum(a * a)))
    eb = np.concatenate(([0.0], np.cumsum(b * b)))
    lags = np.arange(lo, hi + 1)
    # overlap of x[j] and y[j + k]: j in [max(0, -k), min(a.size, b.size - k))
    j0 = np.maximum(0, -lags)
    j1 = np.minimum(a.size, b.size - lags)
    ok = j1 > j0
    if not np.any(ok):
        return 0, 0.0
    lags, j0, j1 = lags[ok], j0[ok], j1[ok]
    num = c[lags % nfft]
    den = np.sqrt((ea[j1] - ea[j0]) * (eb[j1 + lags] - eb[j0 + lags]))
    floor = 1e-9 * float(ea[-1])
    r = np.where(den > floor, num / np.maximum(den, 1e-300), 0.0)
    k = int(np.argmax(r))
    return int(lags[k]), float(r[k])
