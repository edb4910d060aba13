"""Prosody features (F0 level and range, energy, syllable rate, pauses) and the contrast rule.

Everything runs at 16 kHz with numpy/scipy only (no librosa pitch tracker: too slow).
What these can judge: whether pitch, loudness, tempo and pausing change between two
renditions of (nearly) the same words. What they cannot judge: whether the change sounds like
the asked emotion, or whether the words are right.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample
from voxassay.measures.quality import _runs, active_level_db, frame_levels_db

PROSODY_VERSION = "prosody-1"

SR = 16_000
HOP = 160  # 10 ms
F0_MIN = 60.0
F0_MAX = 500.0
YIN_W = 400  # 25 ms integration window
YIN_THRESHOLD = 0.15  # absolute threshold on the cumulative mean normalised difference
VOICED_MAX_APERIODICITY = 0.25
VOICED_REL_DB = 30.0  # voiced frames must be within this of the active level
PAUSE_REL_DB = 30.0  # pause frames: more than this below the active level
PAUSE_MIN_S = 0.15
NUCLEUS_PROMINENCE_DB = 2.0
NUCLEUS_MIN_GAP_S = 0.08

# contract dead bands: feature name -> (metric key, band, relative?)
DEAD_BANDS: dict[str, tuple[str, float, bool]] = {
    "f0_median": ("f0_median_st", 0.5, False),
    "f0_range": ("f0_range_st", 1.0, False),
    "energy": ("energy_db", 1.0, False),
    "rate": ("rate_sps", 0.05, True),
    "pause_ratio": ("pause_ratio", 0.02, False),
}


def yin_f0(x: np.ndarray, sr: int = SR) -> tuple[np.ndarray, np.ndarray]:
    """YIN pitch per 10 ms frame: (f0 Hz, aperiodicity) arrays; frame i starts at i*10 ms.

    d(tau) = sum_{j<W} (x_j - x_{j+tau})^2 with W = 25 ms, computed with one FFT per frame;
    d'(tau) = d(tau) * tau / sum_{k<=tau} d(k). The period is the first local minimum of d'
    below 0.15 in 60-500 Hz (else the global minimum), refined by parabolic interpolation;
    the aperiodicity is d' there.
    """
    tmin = int(sr / F0_MAX)
    tmax = int(np.ceil(sr / F0_MIN))
    length = YIN_W + tmax
    xs = np.asarray(x, dtype=np.float64)
    if xs.size < length:
        xs = np.pad(xs, (0, length - xs.size))
    n_frames = 1 + (xs.size - length) // HOP
    idx = np.arange(length)[None, :] + HOP * np.arange(n_frames)[:, None]
    frames = xs[idx]
    nfft = 1 << int(np.ceil(np.log2(length + YIN_W)))
    spec_full = np.fft.rfft(frames, nfft, axis=1)
    spec_win = np.fft.rfft(frames[:, :YIN_W], nfft, axis=1)
    cross = np.fft.irfft(np.conj(spec_win) * spec_full, nfft, axis=1)[:, : tmax + 1]
    c = np.concatenate([np.zeros((n_frames, 1)), np.cumsum(frames * frames, axis=1)], axis=1)
    taus = np.arange(tmax + 1)
    e0 = c[:, YIN_W][:, None]
    etau = c[:, taus + YIN_W] - c[:, taus]
    d = np.maximum(e0 + etau - 2.0 * cross, 0.0)
    d[:, 0] = 0.0
    cum = np.cumsum(d[:, 1:], axis=1)
    dn = np.ones_like(d)
    dn[:, 1:] = d[:, 1:] * taus[1:] / np.maximum(cum, 1e-12)
    f0 = np.zeros(n_frames)
    ap = np.ones(n_frames)
    band = dn[:, tmin : tmax + 1]
    below = band < YIN_THRESHOLD
    for i in range(n_frames):
        row = band[i]
        hits = np.nonzero(below[i])[0]
        if hits.size:
            k = int(hits[0])
            while k + 1 < row.size and row[k + 1] < row[k]:
                k += 1
        else:
            k = int(np.argmin(row))
        tau = float(k + tmin)
        if 0 < k < row.size - 1:
            a, b, cc = row[k - 1], row[k], row[k + 1]
            den = a - 2 * b + cc
            if den > 0:
                tau += 0.5 * (a - cc) / den
        f0[i] = sr / tau
        ap[i] = float(row[k])
    return f0, ap


def _bandpass(x: np.ndarray, lo: float, hi: float, sr: int) -> np.ndarray:
    import scipy.signal as ss

    sos = ss.butter(4, [lo, hi], btype="bandpass", fs=sr, output="sos")
    return np.asarray(ss.sosfiltfilt(sos, x))


def _lowpass(x: np.ndarray, hi: float, sr: int) -> np.ndarray:
    import scipy.signal as ss

    sos = ss.butter(4, hi, btype="lowpass", fs=sr, output="sos")
    return np.asarray(ss.sosfiltfilt(sos, x))


def _nuclei(x: np.ndarray, voiced: np.ndarray, active_db: float) -> int:
    """Syllable nuclei: peaks of the 300-2500 Hz intensity envelope.

    Envelope: 20 ms RMS every 10 ms of the band-passed signal, in dB, smoothed over 50 ms.
    A nucleus is a local maximum that (a) rises >= 2 dB above the lowest point on each side
    before the next higher peak (prominence), (b) is within 25 dB of the active level,
    (c) falls on a voiced frame (+-2 frames), and (d) is >= 80 ms from the previous nucleus.
    """
    import scipy.signal as ss

    env = frame_levels_db(_bandpass(x, 300.0, 2500.0, SR), SR)
    env = np.convolve(env, np.ones(5) / 5, mode="same")
    peaks, _ = ss.find_peaks(
        env,
        prominence=NUCLEUS_PROMINENCE_DB,
        height=active_db - 25.0,
        distance=int(NUCLEUS_MIN_GAP_S / 0.01),
    )
    n = voiced.size
    ok = [p for p in peaks if np.any(voiced[max(0, p - 2) : min(n, p + 3)])]
    return len(ok)


def prosody_features(audio: Audio, text: str | None = None) -> dict[str, float]:
    """Prosody of one utterance (resampled to 16 kHz).

    Frames: 20 ms every 10 ms; active level = 95th percentile of frame levels (dBFS).
    - duration_s: total length.
    - speech span: first to last frame within 35 dB of the active level.
    - pause frames: inside the span, > 30 dB below the active level, in runs >= 150 ms;
      pause_ratio = pause time / span.
    - voiced frames: YIN aperiodicity < 0.25 and level within 30 dB of the active level;
      voiced_fraction = voiced frames / span frames. F0 in semitones re 100 Hz:
      st = 12 log2(f0 / 100); f0_median_st = median, f0_range_st = p90 - p10 (voiced frames).
    - energy_db: RMS level (dBFS) over frames within 35 dB of the active level.
    - rate_sps: syllable nuclei (see ``_nuclei``) / (span - pause time), per second.
    - words_per_min (text given): whitespace words of text / span in minutes.
    F0 keys are left out when there are no voiced frames; everything but duration_s is left out
    for digital silence. Raises ValueError for empty or non-finite audio.
    """
    a = resample(audio, SR)
    x = np.asarray(a.samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("audio has no samples")
    if not np.all(np.isfinite(x)):
        raise ValueError("audio has NaN or infinite samples")
    out: dict[str, float] = {"duration_s": round(x.size / SR, 4)}
    levels = frame_levels_db(x, SR)
    active = active_level_db(levels)
    if active <= -100.0:
        return out
    speech = levels >= max(active - 35.0, -80.0)
    idx = np.nonzero(speech)[0]
    first, last = int(idx[0]), int(idx[-1])
    span_frames = last - first + 1
    span_s = span_frames * 0.01
    pause = np.zeros(levels.size, dtype=bool)
    low = levels < active - PAUSE_REL_DB
    for s, e in _runs(low[first : last + 1]):
        if (e - s) * 0.01 >= PAUSE_MIN_S:
            pause[first + s : first + e] = True
    pause_s = float(pause.sum()) * 0.01
    mean_sq = np.mean(10.0 ** (levels[speech] / 10.0))
    out["energy_db"] = float(10.0 * np.log10(mean_sq))
    out["pause_ratio"] = pause_s / span_s

    f0, ap = yin_f0(_lowpass(x, 1000.0, SR))
    m = min(f0.size, levels.size)
    voiced = np.zeros(levels.size, dtype=bool)
    voiced[:m] = (ap[:m] < VOICED_MAX_APERIODICITY) & (levels[:m] >= active - VOICED_REL_DB)
    out["voiced_fraction"] = float(voiced[first : last + 1].sum()) / span_frames
    if voiced.any():
        st = 12.0 * np.log2(f0[:m][voiced[:m]] / 100.0)
        out["f0_median_st"] = float(np.median(st))
        out["f0_range_st"] = float(np.percentile(st, 90) - np.percentile(st, 10))
    speaking_s = max(span_s - pause_s, 0.01)
    out["rate_sps"] = _nuclei(x, voiced, active) / speaking_s
    if text is not None:
        out["words_per_min"] = len(text.split()) / (span_s / 60.0)
    return out


def prosody_contrast(
    features_item: dict[str, Any], features_ref: dict[str, Any], expect: dict[str, str]
) -> dict[str, Any]:
    """Did the item move away from its neutral reference in the expected directions?

    For each expected feature (f0_median, f0_range, energy, rate, pause_ratio) with direction
    "up"/"down": delta = item - reference (rate: relative, (item - ref) / ref); met when the
    delta goes the expected way by more than the dead band (0.5 st, 1 st, 1 dB, 5 %, 0.02).
    A feature missing on either side (e.g. no voiced frames) is reported with ``met: None`` and
    a reason and is left out of the fraction. Returns {"features": {name: {expect, item, ref,
    delta, band, met[, reason]}}, "met": count, "total": count judged, "fraction": met / total
    or None when nothing could be judged}.
    """
    feats: dict[str, dict[str, Any]] = {}
    met = 0
    total = 0
    for name, direction in expect.items():
        row: dict[str, Any] = {"expect": direction}
        if name not in DEAD_BANDS:
            row.update(met=None, reason=f"unknown feature {name!r} (known: {sorted(DEAD_BANDS)})")
            feats[name] = row
            continue
        key, band, relative = DEAD_BANDS[name]
        row["band"] = band
        if direction not in ("up", "down"):
            row.update(met=None, reason=f"direction must be 'up' or 'down', not {direction!r}")
            feats[name] = row
            continue
        vi, vr = features_item.get(key), features_ref.get(key)
        row.update(item=vi, ref=vr)
        if vi is None or vr is None or not np.isfinite(vi) or not np.isfinite(vr):
            row.update(met=None, reason=f"{key} missing on the item or the reference")
            feats[name] = row
            continue
        if relative:
            if vr <= 0:
                row.update(met=None, reason=f"{key} of the reference is {vr}")
                feats[name] = row
                continue
            delta = (float(vi) - float(vr)) / float(vr)
        else:
            delta = float(vi) - float(vr)
        ok = delta > band if direction == "up" else delta < -band
        row.update(delta=delta, met=bool(ok))
        feats[name] = row
        total += 1
        met += int(ok)
    return {
        "features": feats,
        "met": met,
        "total": total,
        "fraction": (met / total) if total else None,
    }
