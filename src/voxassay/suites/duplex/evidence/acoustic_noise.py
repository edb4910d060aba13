"""What a channel's quiet sounds like, frame by frame: local noise, digital silence, leakage.

Real recordings break a single global noise estimate: a phone line alternates exact digital
zeros (codec DTX, gated lines) with a comfort-noise bed that drifts by tens of dB, and a headset
hears the other people in the room. Everything here works on 10 ms frames (``FRAME_S``):

* **Digital silence**: a frame whose peak is at most ``ZERO_PEAK`` (two steps of 16-bit PCM). It
  is its own state: never noise, never speech, left out of every statistic below.
* **Local noise power** by minimum statistics (Martin 2001, "Noise power spectral density
  estimation based on optimal smoothing and minimum statistics", broadband form): the power
  smoothed over ``SMOOTH_S`` (50 ms), its minimum over a centred ``TRACK_S`` (1.5 s) window
  (longer than speech runs without a pause), times the bias ``B`` that minimum has on this
  channel's noise (the median of frame power / local minimum over frames within 3 dB of their
  minimum). Speech and crosstalk bursts never set the floor; a bed that drifts is followed.
* **Noise ceiling**: 5 ms levels of the frames known to be noise (outside speech and leakage;
  without enough of them, the frames within 3 dB of their local minimum) are expressed relative
  to the local noise; the ceiling is their median + ``NOISE_Z`` (4.5) sigmas above the local
  noise (sigma from the lower quartile: other sounds among them only add power), so noise alone crosses it in at most about 0.5 % of 300 ms stretches wherever the bed
  is, and a bed that varies (music, babble) gets the wider margin it needs.
* **Leakage** (crosstalk, echo) from another channel of the same recording: the lag (0-500 ms,
  the other channel earlier) at which the two channels' dB envelopes correlate best where the
  other is loud, and the gain ``g`` (the 25th percentile of ``P_this / P_other`` at that lag
  over those frames: the median of the half where this side adds nothing of its own). A frame
  within ``LEAK_FRAME_MARGIN_DB`` (10 dB) of ``g^2 P_other`` is not this channel's own sound; a
  sound whose median is within ``LEAK_MARGIN_DB`` (6 dB) of it is the other channel's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

FRAME_S = 0.010
ZERO_PEAK = 2.0 / 32768.0  # at most two 16-bit steps: digital silence, not noise
SMOOTH_S = 0.030
TRACK_S = 3.0
NEAR_MIN_DB = 3.0  # frames within 3 dB of the local minimum are noise-like
NOISE_Z = 4.5
MIN_NOISE_FRAMES = 50  # 0.5 s of frames known to be noise: enough for the ceiling's spread
LOCAL_S = (1.5, 5.0)  # the local median of noise frames looks this far either side ...
LOCAL_MIN_FRAMES = 30  # ... and needs 300 ms of them ...
LOCAL_Q = 25.0  # ... and takes their lower quartile: breaths and crosstalk among them add power
LOCAL_STEP = 10  # evaluated every 100 ms
TINY = 1e-12
LEAK_LAG_S = 0.5  # the longest echo path searched
LEAK_LOUD_DB = 20.0  # the other channel counts as loud 20 dB above its own local noise
LEAK_MIN_FRAMES = 100  # 1 s of the other channel loud: fewer and no leakage is estimated
LEAK_MARGIN_DB = 6.0  # a sound whose median is within 6 dB of the leaked power is leakage
LEAK_FRAME_MARGIN_DB = 10.0  # a frame within 10 dB of it is not this channel's own sound
DETREND_S = 0.5  # envelopes lose their slow part (AGC, bed drift) before they are correlated
LEAK_MIN_CORR = 0.3  # envelope correlation below this: the channels do not hear each other
LEAK_MIN_SEEN = 50  # 0.5 s of leakage heard alone ...
LEAK_SEEN_SHARE = 0.2  # ... and a fifth of the frames where the other talks alone
LEAK_SEEN_DB = 6.0
LEAK_MAX_GAIN_DB = -6.0  # leakage is quieter than its source (headsets, echo paths: -15 to -50)
LEAK_LEAD = -3  # frames the other channel may lag this one (clock skew between channels)
LEAK_LAG_STEP = 3  # lags searched every 30 ms, then frame by frame around the best


@dataclass(frozen=True)
class NoiseTrack:
    """Per 10 ms frame: local noise power, the 5 ms noise ceiling (linear), digital silence."""

    power: FloatArray
    ceiling: FloatArray
    zero: BoolArray
    sigma_db: float
    bias: float

    def floor_db(self, a: int, b: int) -> float:
        """Median local noise (dBFS) over frames ``[a, b)`` that are not digital silence."""
        p = self.power[a:b][~self.zero[a:b]]
        return _db(float(np.median(p))) if p.size else _db(TINY)

    @property
    def zero_share(self) -> float:
        """Fraction of frames that are digital silence."""
        return float(self.zero.mean()) if self.zero.size else 0.0


@dataclass(frozen=True)
class Leak:
    """Leakage from another channel: lag (frames, other earlier), power gain ``g^2``, envelope
    correlation at that lag, and the frames it was estimated on."""

    source: int
    lag: int
    gain: float
    corr: float
    n_frames: int

    @property
    def gain_db(self) -> float:
        return _db(self.gain)


def _db(power: float) -> float:
    return 10.0 * math.log10(max(power, TINY))


def frame_stats(x: FloatArray, frame: int) -> tuple[FloatArray, BoolArray]:
    """Power and digital-silence flag of consecutive ``frame``-sample frames."""
    k = len(x) // frame
    f = x[: k * frame].reshape(k, frame)
    return np.square(f).mean(axis=1), np.abs(f).max(axis=1, initial=0.0) <= ZERO_PEAK


def _moving_mean(p: FloatArray, w: FloatArray, n: int) -> FloatArray:
    """Weighted centred moving mean over ``n`` frames (weights 0 drop a frame)."""
    ker = np.ones(n)
    num = np.convolve(p * w, ker, mode="same")
    den = np.convolve(w, ker, mode="same")
    return np.divide(num, den, out=np.full_like(p, np.inf), where=den > 0)


def _running_min(s: FloatArray, n: int) -> FloatArray:
    from scipy.ndimage import minimum_filter1d

    return np.asarray(minimum_filter1d(s, size=n, mode="nearest"), dtype=np.float64)


def _min_statistics(power: FloatArray, zero: BoolArray) -> tuple[FloatArray, BoolArray, float]:
    """Minimum-statistics noise power per frame, the frames within 3 dB of their local minimum
    and the bias applied (median of power / minimum over those frames)."""
    n = power.size
    live = (~zero).astype(np.float64)
    smooth = _moving_mean(power, live, max(1, round(SMOOTH_S / FRAME_S)))
    smooth[zero] = np.inf
    lo = _running_min(smooth, max(3, round(TRACK_S / FRAME_S)))
    finite = np.isfinite(lo)
    if not finite.all():  # a window of digital silence only: nearest defined minimum
        idx = np.flatnonzero(finite)
        lo = np.interp(np.arange(n), idx, lo[idx])
    lo = np.maximum(lo, TINY)
    near = ~zero & (smooth <= lo * 10.0 ** (NEAR_MIN_DB / 10.0))
    bias = max(1.0, float(np.median(power[near] / lo[near]))) if near.any() else 1.0
    return lo * bias, near, bias


def _local_level(power: FloatArray, quiet: BoolArray, reach_s: float) -> FloatArray:
    """The ``LOCAL_Q`` percentile power of the ``quiet`` frames within ``reach_s`` of each
    frame (NaN where fewer than ``LOCAL_MIN_FRAMES``); evaluated every ``LOCAL_STEP`` frames
    and held between. Rows are sorted with the excluded frames last, so the percentile is an
    index into the first ``k`` (linear interpolation, numpy's default)."""
    n = power.size
    half = round(reach_s / FRAME_S)
    vals = np.where(quiet, power, np.inf)
    padded = np.concatenate((np.full(half, np.inf), vals, np.full(half, np.inf)))
    centres = np.arange(0, n, LOCAL_STEP)
    out = np.full(centres.size, np.nan)
    for k in range(0, centres.size, 256):  # bounded memory on hour-long files
        c = centres[k : k + 256]
        win = np.sort(padded[c[:, None] + np.arange(2 * half + 1)[None, :]], axis=1)
        count = np.sum(np.isfinite(win), axis=1)
        pos = (LOCAL_Q / 100.0) * np.maximum(count - 1, 0)
        lo = np.floor(pos).astype(np.intp)
        hi = np.minimum(lo + 1, np.maximum(count - 1, 0))
        a = np.take_along_axis(win, lo[:, None], axis=1)[:, 0]
        b = np.take_along_axis(win, hi[:, None], axis=1)[:, 0]
        with np.errstate(invalid="ignore"):  # inf - inf where a row has one value
            level = a + (pos - lo) * np.where(np.isfinite(b), b - a, 0.0)
        out[k : k + c.size] = np.where(count >= LOCAL_MIN_FRAMES, level, np.nan)
    return np.repeat(out, LOCAL_STEP)[:n]


def track_noise(
    power: FloatArray,
    zero: BoolArray,
    halves: FloatArray,
    noise_frames: BoolArray | None = None,
) -> NoiseTrack:
    """Local noise and ceiling per frame (module docstring). ``halves``: the two 5 ms powers of
    every frame, shape (frames, 2). ``noise_frames``: frames known to hold no speech (outside
    the detector's regions, not another channel's leakage): the noise is then their lower
    quartile within 1.5 s (else 5 s, else the whole file: a music or babble bed is noise at
    its own level, a breath or a burst of crosstalk among them is not) and the ceiling's spread theirs; without them, minimum statistics and the frames
    near their minimum."""
    n = power.size
    if n == 0 or bool(zero.all()):
        tiny = np.full(n, TINY)
        return NoiseTrack(tiny, tiny.copy(), zero, 0.0, 1.0)
    noise, quiet, bias = _min_statistics(power, zero)
    if noise_frames is not None and int((noise_frames[:n] & ~zero).sum()) >= MIN_NOISE_FRAMES:
        quiet = noise_frames[:n] & ~zero
        local = np.full(n, np.nan)
        for reach in LOCAL_S:  # the nearest reach with enough noise frames wins
            gaps = np.isnan(local)
            if not gaps.any():
                break
            local[gaps] = _local_level(power, quiet, reach)[gaps]
        local[np.isnan(local)] = float(np.percentile(power[quiet], LOCAL_Q))
        noise = np.maximum(local, TINY)
    rel = 10.0 * np.log10(np.maximum(halves[:n][quiet], TINY) / noise[quiet, None]).ravel()
    med = float(np.median(rel)) if rel.size else 0.0
    # the spread from the lower half: sounds among the noise frames (crosstalk, a door) only
    # ever add power, so the quiet side of the distribution is the noise's own
    sigma = (med - float(np.percentile(rel, 25))) / 0.6745 if rel.size else 0.0
    ceiling = noise * 10.0 ** ((med + NOISE_Z * sigma) / 10.0)
    return NoiseTrack(noise, ceiling, zero, sigma, bias)


def _lagged(p: FloatArray, lag: int) -> FloatArray:
    """``p`` delayed by ``lag`` frames (advanced when negative); the ends repeat the edge frame."""
    if lag == 0 or p.size == 0:
        return p
    if lag > 0:
        return np.concatenate((np.full(lag, p[0]), p[:-lag]))
    return np.concatenate((p[-lag:], np.full(-lag, p[-1])))


def _detrend(db: FloatArray) -> FloatArray:
    """A dB envelope less its ``DETREND_S`` moving mean: syllables stay, AGC and drift go."""
    n = max(1, round(DETREND_S / FRAME_S))
    return db - np.convolve(db, np.ones(n) / n, mode="same")


def _fit(
    mine: FloatArray, other: FloatArray, flat: tuple[FloatArray, FloatArray], sel: BoolArray
) -> tuple[float, float] | None:
    """Envelope correlation over the leak-like half of ``sel`` (frames where this channel is
    quietest relative to the other) and the 25th percentile of the power ratio (dB): the
    median of the leak-like half. ``flat``: both envelopes less their slow part."""
    if int(sel.sum()) < LEAK_MIN_FRAMES:
        return None
    r = mine[sel] - other[sel]
    low = r <= np.median(r)
    a, b = flat[0][sel][low], flat[1][sel][low]
    if a.size < 3 or float(a.std()) == 0.0 or float(b.std()) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1]), float(np.percentile(r, 25))


def _seen_alone(
    power: FloatArray, floor: FloatArray, own: BoolArray, loud: FloatArray, lag: int
) -> bool:
    """Whether this channel is audible (6 dB over its noise) in at least ``LEAK_MIN_SEEN``
    frames, and a ``LEAK_SEEN_SHARE`` of them, where the other is loud and this channel's own
    speech is absent: leakage shows where nothing else can explain the sound."""
    alone = (_lagged(loud, lag) > 0) & ~own
    if int(alone.sum()) < LEAK_MIN_SEEN:
        return False
    heard = alone & (power > floor * 10.0 ** (LEAK_SEEN_DB / 10.0))
    return int(heard.sum()) >= max(LEAK_MIN_SEEN, LEAK_SEEN_SHARE * int(alone.sum()))


def estimate_leak(
    power: FloatArray,
    zero: BoolArray,
    other: FloatArray,
    other_noise: FloatArray,
    source: int,
    own: BoolArray | None = None,
    floor: FloatArray | None = None,
) -> Leak | None:
    """How much of ``other`` (a channel of the same recording, same frames) this channel hears.

    Over the frames where the other channel is loud, the half where this channel is quietest
    relative to it is where leakage (if any) dominates; there the dB envelopes correlate when
    this channel hears the other. The lag with the best correlation (-30 ms for clock skew to
    +500 ms for echo paths) wins; None when the other is loud for under 1 s or the best
    correlation is under ``LEAK_MIN_CORR``. The gain is the 25th percentile of the power ratio.
    With ``own`` (frames of this channel's own speech) and ``floor`` (its noise power), the
    leakage must also be heard where this channel's own speech is absent (``_seen_alone``):
    two talkers overlapping now and then correlate by chance, leakage shows on its own."""
    n = min(power.size, other.size)
    if n == 0:
        return None
    if own is not None and floor is not None:  # nothing heard alone: no leak to find (cheap)
        alone = ~own[:n] & ~zero[:n] & (power[:n] > floor[:n] * 10.0 ** (LEAK_SEEN_DB / 10.0))
        if int(alone.sum()) < LEAK_MIN_SEEN:
            return None
    mine = 10.0 * np.log10(np.maximum(power[:n], TINY))
    theirs = 10.0 * np.log10(np.maximum(other[:n], TINY))
    loud = (other[:n] > other_noise[:n] * 10.0 ** (LEAK_LOUD_DB / 10.0)).astype(np.float64)
    best: tuple[float, int, float] | None = None
    mine_flat, theirs_flat = _detrend(mine), _detrend(theirs)
    top = min(n - 1, round(LEAK_LAG_S / FRAME_S))

    def fit_at(lag: int) -> None:
        nonlocal best
        sel = (_lagged(loud, lag) > 0) & ~zero[:n]
        flat = (mine_flat, _lagged(theirs_flat, lag))
        fit = _fit(mine, _lagged(theirs, lag), flat, sel)
        if fit and math.isfinite(fit[0]) and (best is None or fit[0] > best[0]):
            best = (fit[0], lag, fit[1])

    for lag in range(LEAK_LEAD, top + 1, LEAK_LAG_STEP):  # coarse, then around the best
        fit_at(lag)
    if best is not None:
        coarse = best[1]
        for lag in range(
            max(LEAK_LEAD, coarse - LEAK_LAG_STEP + 1), min(top, coarse + LEAK_LAG_STEP - 1) + 1
        ):
            if lag != coarse:
                fit_at(lag)
    if best is None or best[0] < LEAK_MIN_CORR or best[2] > LEAK_MAX_GAIN_DB:
        return None  # no correlation, or "leakage" louder than its source: not leakage
    corr, lag, ratio_db = best
    seen = (
        own is None
        or floor is None
        or _seen_alone(power[:n], floor[:n], own[:n] | zero[:n], loud, lag)
    )
    if not seen:
        return None
    sel = (_lagged(loud, lag) > 0) & ~zero[:n]
    return Leak(source, lag, 10.0 ** (ratio_db / 10.0), round(corr, 3), int(sel.sum()))


def leak_power(leaks: Sequence[tuple[Leak, FloatArray]], n: int) -> FloatArray:
    """Per frame, the most power any other channel leaks into this one (``g^2 P_other``, the
    other's frame at the lag and its two neighbours, for edges that fall between frames).
    ``leaks``: each leak with its source channel's frame powers."""
    out = np.zeros(n)
    for leak, other in leaks:
        src = _lagged(other[:n], leak.lag)
        if src.size < n:
            src = np.pad(src, (0, n - src.size))
        wide = np.maximum(src, np.maximum(np.roll(src, 1), np.roll(src, -1)))
        out = np.maximum(out, leak.gain * wide)
    return out
