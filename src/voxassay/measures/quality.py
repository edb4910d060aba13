"""Audio quality: DNSMOS / P.808 predictions (speechmos) and signal-level artefact detectors.

What these can judge: noise, reverberation, band limitation, codec/vocoder buzz and other
signal degradations (DNSMOS), and plain engineering faults (clipping, digital dropouts, long
silences, DC offset, narrow bandwidth, loudness). What they cannot judge: whether the right
words were spoken, whether prosody or emotion fit the text, or speaker identity.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample

QUALITY_VERSION = "quality-1"

DNSMOS_SR = 16_000
_FRAME_S = 0.020  # frame length for level analysis
_HOP_S = 0.010  # hop for level analysis
SILENCE_REL_DB = 35.0  # a frame is silent when its level is this far below the active level
ZERO_ABS = 1e-4  # "near digital zero" (-80 dBFS)
DROPOUT_MIN_S = 0.020
BANDWIDTH_DROP_DB = 40.0
BANDWIDTH_SMOOTH_HZ = 200.0

_lock = threading.Lock()
_dnsmos_model: Any = None


def dnsmos_unavailable() -> str | None:
    """None when speechmos and onnxruntime import, else the reason with the install hint."""
    import importlib.util

    for mod in ("speechmos", "onnxruntime", "librosa"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install speechmos onnxruntime librosa)"
    return None


_DNSMOS_MEMO_MAX = 4096
_dnsmos_memo: dict[bytes, dict[str, float]] = {}
"""Scores by the exact 16 kHz samples: the same audio scored twice in a process (a TTS run
and its validation, an SU baseline on clips a TTS run made) is computed once."""


def _model() -> Any:
    """The speechmos DNSMOS object (primary sig/bak/ovrl + P.808 onnx sessions), built once."""
    global _dnsmos_model
    with _lock:
        if _dnsmos_model is None:
            import os

            from speechmos import dnsmos as sm

            base = os.path.dirname(os.path.abspath(sm.__file__))
            import onnxruntime as ort

            from voxassay.core.onnx import session_options

            class _DNSMOS(sm.DNSMOS):
                """speechmos' scorer with its two sessions made with voxassay's options."""

                def __init__(self, primary: str, p808: str) -> None:
                    self.primary_model_path = primary
                    self.onnx_sess = ort.InferenceSession(primary, session_options())
                    self.p808_onnx_sess = ort.InferenceSession(p808, session_options())

            _dnsmos_model = _DNSMOS(
                os.path.join(base, "dnsmos_models", "sig_bak_ovr.onnx"),
                os.path.join(base, "dnsmos_models", "model_v8.onnx"),
            )
        return _dnsmos_model


def dnsmos(audio: Audio) -> dict[str, float]:
    """DNSMOS P.835 (``sig_mos``, ``bak_mos``, ``ovrl_mos``) and P.808 (``p808_mos``), 1-5.

    The input is resampled to 16 kHz and clipped to [-1, 1]; clips shorter than 9.01 s are
    repeated to that length and longer clips are scored in 9.01 s windows with a 1 s hop and
    averaged (speechmos' procedure). The onnx models ship inside the speechmos package and are
    loaded once per process; onnxruntime sessions may be called from several threads. Scores
    are remembered per process by the exact resampled samples (the models are deterministic).

    What DNSMOS can judge: it was trained on human P.835/P.808 ratings of real, noisy and
    noise-suppressed speech, so it reacts to background noise, reverberation, band limitation
    and processing distortion (buzz, musical noise, codec artefacts). What it cannot judge: it
    never saw TTS errors such as wrong or skipped words, mispronunciations, unnatural prosody or
    emotion, or a wrong voice; a fluent-sounding but wrong utterance can score high, and its
    scale is not calibrated for synthetic speech.
    """
    a = resample(audio, DNSMOS_SR)
    x = np.clip(np.asarray(a.samples, dtype=np.float32), -1.0, 1.0)
    if x.size < DNSMOS_SR // 10:
        raise ValueError(f"audio too short for DNSMOS ({x.size / DNSMOS_SR:.3f} s < 0.1 s)")
    if not np.all(np.isfinite(x)):
        raise ValueError("audio has NaN or infinite samples")
    key = hashlib.sha1(x.tobytes()).digest()
    with _lock:
        hit = _dnsmos_memo.get(key)
    if hit is not None:
        return dict(hit)
    out = _model()(x, DNSMOS_SR, False)
    scores = {k: float(out[k]) for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos")}
    with _lock:
        if len(_dnsmos_memo) >= _DNSMOS_MEMO_MAX:
            _dnsmos_memo.clear()
        _dnsmos_memo[key] = scores
    return dict(scores)


# ----------------------------------------------------------------------------- levels


def frame_levels_db(x: np.ndarray, sr: int) -> np.ndarray:
    """RMS level (dBFS, floor -120) of 20 ms frames every 10 ms; frame i starts at i*10 ms."""
    n = max(1, round(_FRAME_S * sr))
    h = max(1, round(_HOP_S * sr))
    x64 = np.asarray(x, dtype=np.float64)
    if x64.size < n:
        x64 = np.pad(x64, (0, n - x64.size))
    c = np.concatenate([[0.0], np.cumsum(x64 * x64)])
    starts = np.arange(0, x64.size - n + 1, h)
    ms = (c[starts + n] - c[starts]) / n
    return 10.0 * np.log10(np.maximum(ms, 1e-12))


def active_level_db(levels: np.ndarray) -> float:
    """The active speech level: the 95th percentile of frame levels (dBFS)."""
    return float(np.percentile(levels, 95)) if levels.size else -120.0


def silence_mask(levels: np.ndarray, rel_db: float = SILENCE_REL_DB) -> np.ndarray:
    """Frames whose level is more than ``rel_db`` below the active level (or below -80 dBFS)."""
    thr = max(active_level_db(levels) - rel_db, -80.0)
    return np.asarray(levels < thr)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs (end exclusive) of True runs."""
    if mask.size == 0:
        return []
    m = np.concatenate([[False], mask.astype(bool), [False]])
    d = np.diff(m.astype(np.int8))
    return list(zip(np.nonzero(d == 1)[0].tolist(), np.nonzero(d == -1)[0].tolist(), strict=True))


# ----------------------------------------------------------------------------- loudness


def _k_weighting_sos(sr: int) -> np.ndarray:
    """BS.1770 K-weighting (high shelf + RLB high-pass) as second-order sections at ``sr``.

    Both stages are designed from their analogue parameters (shelf: f0 1681.974 Hz, gain
    3.999844 dB, Q 0.7071753; high-pass: f0 38.13547 Hz, Q 0.5003270) with the bilinear
    transform and tangent prewarping; at 48 kHz this reproduces the coefficients in the standard.
    """
    # stage 1: high shelf
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = np.tan(np.pi * f0 / sr)
    vh = 10.0 ** (gain_db / 20.0)
    vb = vh**0.4996667741545416
    a0 = 1.0 + k / q + k * k
    b1 = [(vh + vb * k / q + k * k) / a0, 2.0 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0]
    a1 = [1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0]
    # stage 2: high-pass (the revised low-frequency B curve)
    f0, q = 38.13547087602444, 0.5003270373238773
    k = np.tan(np.pi * f0 / sr)
    a0 = 1.0 + k / q + k * k
    b2 = [1.0, -2.0, 1.0]
    a2 = [1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0]
    return np.array([b1 + a1, b2 + a2], dtype=np.float64)


def integrated_loudness(x: np.ndarray, sr: int) -> float:
    """ITU-R BS.1770-4 integrated loudness of a mono signal (LUFS); -inf if nothing passes.

    K-weighted mean square over 400 ms blocks with 75 % overlap; block loudness
    L = -0.691 + 10 log10(ms); blocks below -70 LUFS are dropped (absolute gate), then blocks
    more than 10 LU below the loudness of the remaining blocks (relative gate); the result is
    -0.691 + 10 log10(mean ms of the blocks left). A signal shorter than 400 ms is one block.
    """
    import scipy.signal as ss

    y = ss.sosfilt(_k_weighting_sos(sr), np.asarray(x, dtype=np.float64))
    n = round(0.4 * sr)
    step = round(0.1 * sr)
    c = np.concatenate([[0.0], np.cumsum(y * y)])
    if y.size <= n:
        ms = np.array([c[-1] / max(1, y.size)])
    else:
        starts = np.arange(0, y.size - n + 1, step)
        ms = (c[starts + n] - c[starts]) / n
    with np.errstate(divide="ignore"):
        lk = -0.691 + 10.0 * np.log10(ms)
    ms = ms[lk > -70.0]
    if ms.size == 0:
        return float("-inf")
    rel = -0.691 + 10.0 * np.log10(ms.mean()) - 10.0
    with np.errstate(divide="ignore"):
        keep = ms[(-0.691 + 10.0 * np.log10(ms)) > rel]
    return float(-0.691 + 10.0 * np.log10(keep.mean()))


# ----------------------------------------------------------------------------- artefacts


def clipping_fraction(x: np.ndarray) -> float:
    """Fraction of all samples that are clipped.

    A sample is clipped when |x| >= 0.999, or when it belongs to a run of >= 3 consecutive
    equal samples at the signal's extreme (|x| >= 0.99 * peak, peak >= 0.01): the flat tops a
    clipper leaves below full scale.
    """
    a = np.abs(np.asarray(x, dtype=np.float64))
    if a.size == 0:
        return 0.0
    clipped = a >= 0.999
    peak = float(a.max())
    if peak >= 0.01:
        xs = np.asarray(x, dtype=np.float64)
        extreme = a >= 0.99 * peak
        same = np.concatenate([[False], xs[1:] == xs[:-1]])
        # flat run: extreme samples equal to their predecessor; mark each run of length >= 3
        flat = extreme & np.concatenate([[False], extreme[:-1]]) & same
        for s, e in _runs(flat):  # samples s..e-1 equal sample s-1: run length e - s + 1
            if e - s + 1 >= 3:
                clipped[s - 1 : e] = True
    return float(clipped.mean())


def bandwidth_hz(x: np.ndarray, sr: int) -> float:
    """Effective bandwidth: the highest frequency where the long-term spectrum is within 40 dB
    of its maximum.

    Long-term spectrum: Welch average (Hann, 1024-sample segments at the native rate, 50 %
    overlap) smoothed with a 200 Hz moving average in power. 0.0 for digital silence.
    """
    import scipy.signal as ss

    xs = np.asarray(x, dtype=np.float64)
    if xs.size < 64 or not np.any(xs):
        return 0.0
    f, p = ss.welch(xs, sr, nperseg=min(1024, xs.size))
    k = max(1, round(BANDWIDTH_SMOOTH_HZ / (f[1] - f[0])))
    ps = np.convolve(p, np.ones(k) / k, mode="same")
    db = 10.0 * np.log10(np.maximum(ps, 1e-30))
    ok = np.nonzero(db >= db.max() - BANDWIDTH_DROP_DB)[0]
    return float(f[ok[-1]])


def dropout_count(x: np.ndarray, sr: int, levels: np.ndarray | None = None) -> int:
    """Number of sudden near-zero gaps inside speech.

    A gap is a run of >= 20 ms of samples with |x| <= 1e-4 (about -80 dBFS) that lies after the
    first and before the last non-silent frame, and is sudden: the 10 ms just before or just
    after it is within 30 dB of the active level (speech stops abruptly, not a fade-out).
    """
    xs = np.abs(np.asarray(x, dtype=np.float64))
    if levels is None:
        levels = frame_levels_db(x, sr)
    active = active_level_db(levels)
    speech = np.nonzero(~silence_mask(levels))[0]
    if speech.size == 0:
        return 0
    hop = round(_HOP_S * sr)
    first = int(speech[0]) * hop
    last = int(speech[-1]) * hop + round(_FRAME_S * sr)
    edge = max(1, round(0.010 * sr))
    count = 0
    for s, e in _runs(xs <= ZERO_ABS):
        if e - s < DROPOUT_MIN_S * sr or s <= first or e >= last:
            continue
        before = xs[max(0, s - edge) : s]
        after = xs[e : e + edge]
        lv = [
            20.0 * np.log10(max(float(np.sqrt(np.mean(seg * seg))), 1e-9))
            for seg in (before, after)
            if seg.size
        ]
        if lv and max(lv) >= active - 30.0:
            count += 1
    return count


def silences(levels: np.ndarray, hop_s: float = _HOP_S) -> tuple[float, float, float]:
    """(lead, trail, longest internal) silence in seconds from frame levels.

    Silent frames: more than 35 dB below the active level (95th percentile of 20 ms frame
    levels) or below -80 dBFS. Lead/trail: silence before the first / after the last non-silent
    frame; longest: the longest silent run between them. All-silent audio: (total, total, total).
    """
    sil = silence_mask(levels)
    total = levels.size * hop_s
    speech = np.nonzero(~sil)[0]
    if speech.size == 0:
        return total, total, total
    lead = float(speech[0]) * hop_s
    trail = float(levels.size - 1 - speech[-1]) * hop_s
    inner = sil[speech[0] : speech[-1] + 1]
    longest = max((e - s for s, e in _runs(inner)), default=0) * hop_s
    return lead, trail, float(longest)


def artifact_metrics(audio: Audio) -> dict[str, float]:
    """Signal-level artefact detectors (native sample rate; see each helper for its rule).

    Keys: clipping_fraction (clipped samples / all samples), dropout_count, longest_silence_s,
    lead_silence_s, trail_silence_s, dc_offset (mean sample value), bandwidth_hz (highest
    frequency within 40 dB of the long-term spectrum's maximum), loudness_lufs (BS.1770
    integrated, gated), peak_dbfs (20 log10 max |x|). loudness_lufs and peak_dbfs are left out
    for digital silence (they would be -inf). Raises ValueError for empty or non-finite audio.
    """
    x = np.asarray(audio.samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("audio has no samples")
    if not np.all(np.isfinite(x)):
        raise ValueError("audio has NaN or infinite samples")
    sr = int(audio.sr)
    levels = frame_levels_db(x, sr)
    lead, trail, longest = silences(levels)
    out: dict[str, float] = {
        "clipping_fraction": clipping_fraction(x),
        "dropout_count": float(dropout_count(x, sr, levels)),
        "longest_silence_s": round(longest, 3),
        "lead_silence_s": round(lead, 3),
        "trail_silence_s": round(trail, 3),
        "dc_offset": float(x.mean()),
        "bandwidth_hz": bandwidth_hz(x, sr),
    }
    lufs = integrated_loudness(x, sr)
    if np.isfinite(lufs):
        out["loudness_lufs"] = lufs
    peak = float(np.max(np.abs(x)))
    if peak > 0:
        out["peak_dbfs"] = 20.0 * np.log10(peak)
    return out
