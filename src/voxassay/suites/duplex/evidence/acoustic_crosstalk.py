"""Per-segment crosstalk: a segment on one channel that is another channel's sound.

The channel-wide leakage estimate (``acoustic_noise.estimate_leak``) finds a steady path (a
headset hearing its neighbour, a speakerphone's echo) from envelope correlation over the whole
recording; where a neighbour's voice reaches a microphone only now and then, above the noise,
that estimate can miss it and the detector's region becomes "speech" of the wrong talker. So
each speech segment is also tested on its own, against every other channel, with two cues:

* **the same sound**: the peak of the normalised cross-correlation of the two waveforms
  (band-passed 200-3500 Hz, so hum and rumble do not count) within ``MAX_LAG_S`` of each other
  is at least ``MIN_XCORR``: the two microphones picked up one acoustic source. Two talkers
  overlapping give a low peak, however loud either is;
* **where it comes from**: the other channel is louder by at least ``MIN_LOUDER_DB`` (median
  over the segment's 10 ms frames that are above this channel's noise ceiling): a talker is
  loudest on their own close microphone, so the quieter copy is the crosstalk (the correlation
  alone is symmetric).

Unless the segment also holds this channel's own sound (150 ms or more of frames 6 dB over
the copy that level difference predicts: own words said over the crosstalk), a segment
passing both is ``kind="crosstalk"`` with ``source`` the louder channel and
``leak_db`` minus the level difference. Developed on the AMI ES2004a headsets, where it marks
the three segments of FEE016's speech that MEO015's headset picked up (cross-correlation
0.58-0.70, 25-27 dB quieter) and none of the wearers' own segments (own backchannels under a
louder talker correlate under 0.3 with that talker's microphone).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

MIN_XCORR = 0.5
MIN_LOUDER_DB = 10.0
MAX_LAG_S = 0.03  # microphones of one room: a few metres of sound path, plus clock skew
BAND_HZ = (200.0, 3500.0)
FRAME_S = 0.01
OWN_ABOVE_DB = 6.0
OWN_MIN_S = 0.15


def band(x: NDArray[Any], sr: int) -> NDArray[np.float64]:
    """``x`` band-passed to ``BAND_HZ`` (zero phase), the whole channel at once."""
    from scipy.signal import butter, sosfiltfilt

    y = np.asarray(x, dtype=np.float64)
    if y.size <= 27:
        return y
    hi = min(BAND_HZ[1], 0.45 * sr)
    sos = butter(4, [BAND_HZ[0], hi], btype="band", fs=sr, output="sos")
    return np.asarray(sosfiltfilt(sos, y), dtype=np.float64)


def peak_xcorr(mine: NDArray[Any], other: NDArray[Any], sr: int, start: int, end: int) -> float:
    """Peak |normalised cross-correlation| of ``mine[start:end]`` with ``other`` shifted by up
    to ``MAX_LAG_S`` either way (both already band-passed, ``band``)."""
    from scipy.signal import fftconvolve

    lag = round(MAX_LAG_S * sr)
    x = mine[start:end]
    y = other[max(0, start - lag) : min(len(other), end + lag)]
    ex = float(np.sqrt(np.sum(x * x)))
    if x.size < 2 or y.size < x.size or ex == 0.0:
        return 0.0
    cc = fftconvolve(y, x[::-1], mode="valid")
    ey = np.sqrt(np.maximum(fftconvolve(y * y, np.ones(x.size), mode="valid"), 0.0))
    r = np.abs(cc) / (ex * np.maximum(ey, 1e-12))
    return float(np.max(r)) if r.size else 0.0


def louder_db(
    power: NDArray[Any], ceiling: NDArray[Any], other: NDArray[Any], a: int, b: int
) -> float:
    """Median over frames ``[a, b)`` heard on this channel (power above its noise ceiling) of
    the other channel's power over this one's, in dB (NaN when none is heard)."""
    b = min(b, power.size, other.size)
    heard = power[a:b] > ceiling[a:b]
    if b <= a or not heard.any():
        return math.nan
    ratio = np.maximum(other[a:b][heard], 1e-20) / np.maximum(power[a:b][heard], 1e-20)
    return float(np.median(10.0 * np.log10(ratio)))


def _own_sound(
    power: NDArray[Any], ceiling: NDArray[Any], other: NDArray[Any], a: int, b: int, db: float
) -> bool:
    """Whether the segment also holds this channel's own sound: ``OWN_MIN_S`` or more of heard
    frames ``OWN_ABOVE_DB`` over the copy the level difference ``db`` predicts (own words said
    over a neighbour's crosstalk keep the segment this channel's)."""
    b = min(b, power.size, other.size)
    predicted = other[a:b] * 10.0 ** ((OWN_ABOVE_DB - db) / 10.0)
    own = (power[a:b] > ceiling[a:b]) & (power[a:b] > predicted)
    return int(own.sum()) * FRAME_S >= OWN_MIN_S


def mark_crosstalk(
    segments: Sequence[Any],
    c: int,
    signals: Sequence[NDArray[Any]],
    powers: Sequence[NDArray[Any]],
    ceiling: NDArray[Any],
    sr: int,
) -> list[Any]:
    """``segments`` of channel ``c`` with every speech segment that another channel's sound
    explains (both cues above) turned into ``crosstalk`` from that channel. ``signals``: every
    channel band-passed (``band``)."""
    out = []
    for seg in segments:
        if seg.kind != "speech" or len(signals) < 2:
            out.append(seg)
            continue
        s, e = round(seg.start_s * sr), round(seg.end_s * sr)
        fa, fb = (
            int(seg.start_s / FRAME_S),
            max(int(seg.start_s / FRAME_S) + 1, int(seg.end_s / FRAME_S)),
        )
        best: tuple[float, int] | None = None
        for o, other in enumerate(signals):
            if o == c:
                continue
            diff = louder_db(powers[c], ceiling, powers[o], fa, fb)
            if not diff >= MIN_LOUDER_DB:
                continue
            if peak_xcorr(signals[c], other, sr, s, e) >= MIN_XCORR and (
                best is None or diff > best[0]
            ):
                best = (diff, o)
        if best is None or _own_sound(powers[c], ceiling, powers[best[1]], fa, fb, best[0]):
            out.append(seg)
        else:
            out.append(replace(seg, kind="crosstalk", source=best[1], leak_db=round(-best[0], 1)))
    return out
