"""Realistic phone calls built from real speech, with truth from the clean stems.

A call is two channels (user, agent) of real read speech from ``../shared/data`` placed at
known sample positions, then put through what a phone line does to it:

* a noise bed from a real recording (``../shared/data/noise``) whose level drifts by
  ``bed_drift_db`` between 10 s blocks (AGC and comfort-noise generators do this);
* the caller's phone AGC: a slow gain ripple of ``agc_db`` (peak, 7 s period) on the user's
  channel, echo included (the agent's channel is what the agent sent);
* DTX gating: outside the channel's own speech (plus a 200 ms hangover) the line carries exact
  digital zeros, except the comfort-noise bed in ``cng_share`` of the silent 1 s blocks;
* echo (the agent's voice in the user's channel, ``echo_db`` below it, ``echo_ms`` later) and
  crosstalk (the user in the agent's channel);
* a codec at 8 kHz: ``g711`` (mu-law), ``opus`` (libopus, ``opus_kbps``, DTX, VoIP), ``g723``
  (G.723.1 6.3 kbit/s, FFmpeg's own encoder, so in every PyAV build) or ``amr`` (AMR-NB
  7.95 kbit/s, needs an FFmpeg built with opencore-amr) through PyAV, the decoder's delay
  measured and removed.

Truth is each clean clip's edges by the edge rule (``max(level - 24 dB, -58 dBFS)`` on its own
5 ms levels), measured on the stem before anything is added, and moved inwards where the bed
around the edge hides it (threshold under the bed + 6 dB, the kit's rule); a burst under
50 ms set off by 150 ms of silence at either end (a lip smack, a breath) is not part of the
utterance: what a careful annotator marks.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SHARED

DATA = SHARED / "data"
LINE_SR = 8000
USER_CLIPS = (
    "cmu_arctic/aew_arctic_a0001.wav",
    "ljspeech/LJ001-0002.wav",
    "cmu_arctic/aew_arctic_a0003.wav",
)
AGENT_CLIPS = (
    "ljspeech/LJ001-0008.wav",
    "cmu_arctic/aew_arctic_a0002.wav",
    "ljspeech/LJ001-0004.wav",
)
CODECS = ("none", "g711", "opus", "g723", "amr")
# codec -> (encoder, container, bit rate, encoder options)
_CODEC_SPECS: dict[str, tuple[str, str, int | None, dict[str, str] | None]] = {
    "g711": ("pcm_mulaw", "wav", None, None),
    "opus": ("libopus", "ogg", None, {"dtx": "1", "application": "voip"}),
    "g723": ("g723_1", "g723_1", 6300, None),
    "amr": ("libopencore_amrnb", "amr", 7950, None),
}


def require_codec(codec: str) -> None:
    """Skip (with the reason) where this PyAV's FFmpeg was built without the codec's encoder:
    wheels differ in which external codec libraries they bundle."""
    import av

    if codec in _CODEC_SPECS:
        encoder = _CODEC_SPECS[codec][0]
        try:
            av.codec.Codec(encoder, "w")
        except av.codec.codec.UnknownCodecError:
            pytest.skip(f"this PyAV {av.__version__} has no {encoder} encoder")


@dataclass
class PhoneLine:
    """What the line does; the defaults are a hard but ordinary call."""

    codec: str = "g711"
    opus_kbps: int = 12
    bed: str = "speech_commands/running_tap_10s.wav"
    bed_dbfs: float = -52.0
    bed_drift_db: float = 20.0
    agc_db: float = 4.0
    cng_share: float = 0.5
    echo_db: float | None = None
    echo_ms: float = 120.0
    crosstalk_db: float | None = None
    seed: int = 0


@dataclass
class Call:
    """A built call: (samples, 2) float32 at ``sr``; truth per channel as (start_s, end_s)."""

    audio: np.ndarray
    sr: int
    truth: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    zero_share: dict[int, float] = field(default_factory=dict)

    def write(self, path: Path) -> Path:
        import soundfile as sf

        sf.write(str(path), self.audio, self.sr, subtype="PCM_16")
        return path


@cache
def _clip(name: str, sr: int) -> np.ndarray:
    import soundfile as sf
    import soxr

    path = DATA / "read_speech" / name
    if not path.exists():
        pytest.skip(f"real speech not found at {path} (../shared/data beside the repo)")
    x, file_sr = sf.read(str(path), dtype="float64")
    return np.asarray(soxr.resample(x, file_sr, sr) if file_sr != sr else x)


def _db5(x: np.ndarray, sr: int) -> np.ndarray:
    win = round(0.005 * sr)
    p = np.convolve(x * x, np.ones(win) / win, mode="same")
    return np.asarray(10.0 * np.log10(p + 1e-12))


def clean_clip(name: str, level: float, sr: int) -> np.ndarray:
    """The clip at ``level`` dBFS active level, trimmed by the edge rule (2 ms fades)."""
    x = _clip(name, sr)
    frame = round(0.010 * sr)
    k = len(x) // frame
    p = np.mean(x[: k * frame].reshape(k, frame) ** 2, axis=1)
    active = p[p > p.max() * 10 ** (-3.5)]
    x = x * 10.0 ** (level / 20.0) / np.sqrt(active.mean())
    loud = np.flatnonzero(_db5(x, sr) > max(level - 24.0, -58.0))
    x = x[loud[0] : loud[-1] + 1].copy()
    fade = round(0.002 * sr)
    ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(fade) + 0.5) / fade)
    x[:fade] *= ramp
    x[-fade:] *= ramp[::-1]
    return x


def _bed(name: str, n: int, sr: int, dbfs: float, drift_db: float, rng: Any) -> np.ndarray:
    import soundfile as sf
    import soxr

    path = DATA / "noise" / name
    if not path.exists():
        pytest.skip(f"real noise not found at {path} (../shared/data beside the repo)")
    x, file_sr = sf.read(str(path), dtype="float64")
    x = np.asarray(soxr.resample(x, file_sr, sr) if file_sr != sr else x)
    x = np.tile(x, n // len(x) + 1)[:n]
    x *= 10.0 ** (dbfs / 20.0) / np.sqrt(np.mean(x**2))
    blocks = rng.uniform(-drift_db / 2, drift_db / 2, n // (10 * sr) + 1)
    gain = np.repeat(10.0 ** (blocks / 20.0), 10 * sr)[:n]
    return np.asarray(x * gain)


def _codec(x: np.ndarray, line: PhoneLine) -> np.ndarray:
    """``x`` (8 kHz) through the line's codec and back, the decoder's delay removed."""
    if line.codec == "none":
        return x
    import av

    require_codec(line.codec)
    name, fmt, rate, opts = _CODEC_SPECS[line.codec]
    if line.codec == "opus":
        rate = line.opus_kbps * 1000
    buf = io.BytesIO()
    out = av.open(buf, "w", format=fmt)
    st = out.add_stream(name, rate=LINE_SR)
    st.layout = "mono"
    if rate:
        st.bit_rate = rate
    if opts:
        st.options = opts
    pcm = (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
    for i in range(0, len(pcm), 160):
        frame = av.AudioFrame.from_ndarray(pcm[None, i : i + 160], format="s16", layout="mono")
        frame.sample_rate, frame.pts = LINE_SR, i
        for packet in st.encode(frame):
            out.mux(packet)
    for packet in st.encode(None):
        out.mux(packet)
    out.close()
    buf.seek(0)
    decoded = []
    with av.open(buf, "r", format=fmt) as inp:
        rs = av.AudioResampler(format="s16", layout="mono", rate=LINE_SR)
        for frame in inp.decode(audio=0):
            decoded += [r.to_ndarray().ravel() for r in rs.resample(frame)]
    y = np.concatenate(decoded).astype(np.float64) / 32768.0
    lag = _lag(x, y)
    y = y[lag:] if lag >= 0 else np.concatenate((np.zeros(-lag), y))
    return np.pad(y, (0, max(0, len(x) - len(y))))[: len(x)]


def _lag(x: np.ndarray, y: np.ndarray) -> int:
    """Samples by which ``y`` trails ``x`` (cross-correlation peak within +-100 ms)."""
    n = min(len(x), len(y))
    spec = np.fft.rfft(y[:n], 2 * n) * np.conj(np.fft.rfft(x[:n], 2 * n))
    c = np.fft.irfft(spec, 2 * n)
    span = round(0.1 * LINE_SR)
    cand = np.concatenate((c[: span + 1], c[-span:]))
    k = int(np.argmax(cand))
    return k if k <= span else k - len(cand)


def build_call(line: PhoneLine, *, levels: tuple[float, float] = (-20.0, -18.0)) -> Call:
    """User and agent taking turns (the agent 0.3-0.9 s after each user turn, one reply in a
    200 ms overlap), then the line; truth from the clean stems (seconds)."""
    rng = np.random.default_rng(line.seed)
    sr = LINE_SR
    stems = [np.zeros(0), np.zeros(0)]
    truth: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    pos = round(1.2 * sr)
    placed: list[tuple[int, int, np.ndarray]] = []
    for k in range(len(USER_CLIPS)):
        u = clean_clip(USER_CLIPS[k], levels[0], sr)
        placed.append((0, pos, u))
        gap = -0.2 if k == 1 else float(rng.uniform(0.3, 0.9))
        a = clean_clip(AGENT_CLIPS[k], levels[1], sr)
        at = pos + len(u) + round(gap * sr)
        placed.append((1, at, a))
        pos = at + len(a) + round(float(rng.uniform(0.6, 1.2)) * sr)
    n = pos + round(1.0 * sr)
    stems = [np.zeros(n), np.zeros(n)]
    for c, at, clip in placed:
        stems[c][at : at + len(clip)] += clip
    channels = []
    zero_share = {}
    for c in (0, 1):
        x = stems[c].copy()
        other = stems[1 - c]
        leak_db = line.echo_db if c == 0 else line.crosstalk_db
        delay = round((line.echo_ms if c == 0 else 2.0) * sr / 1000.0)
        if leak_db is not None:
            x[delay:] += other[: n - delay] * 10.0 ** (leak_db / 20.0)
        bed = _bed(line.bed, n, sr, line.bed_dbfs, line.bed_drift_db, rng)
        t = np.arange(n) / sr
        agc = 10.0 ** (line.agc_db * np.sin(2 * np.pi * t / 7.0) / 20.0) if c == 0 else np.ones(n)
        for cc, at, clip in placed:
            if cc == c:
                truth[c].append(_visible(clip * agc[at : at + len(clip)], at, bed * agc, sr))
        x = (x + bed) * agc
        gate = _dtx_gate(x, bed * agc, sr, line.cng_share, rng)
        x = _codec(x * gate, line) * gate
        zero_share[c] = float(np.mean(gate == 0))
        channels.append(x)
    audio = np.stack(channels, axis=1).astype(np.float32)
    secs = {c: [(a / sr, b / sr) for a, b in truth[c]] for c in (0, 1)}
    return Call(audio, sr, secs, zero_share)


def _visible(clip: np.ndarray, at: int, bed: np.ndarray, sr: int) -> tuple[int, int]:
    """The clip's edges as an annotator hears them over the bed: first and last sample whose
    5 ms level exceeds its edge threshold (active level - 24 dB) and the bed's level around the
    edge + 6 dB (the kit's observability margin)."""
    db = _db5(clip, sr)
    frame = round(0.010 * sr)
    k = len(clip) // frame
    p = np.mean(clip[: k * frame].reshape(k, frame) ** 2, axis=1)
    level = 10.0 * np.log10(p[p > p.max() * 10 ** (-3.5)].mean())
    edges = []
    for where in (at, at + len(clip)):
        around = bed[max(0, where - sr // 2) : where + sr // 2]
        edges.append(10.0 * np.log10(np.mean(around**2) + 1e-12) + 6.0)
    first = _body(np.flatnonzero(db > max(level - 24.0, edges[0])), sr)
    last = _body(np.flatnonzero(db > max(level - 24.0, edges[1])), sr)
    return at + int(first[0]), at + int(last[-1]) + 1


def _body(loud: np.ndarray, sr: int) -> np.ndarray:
    """``loud`` without an isolated burst at either end: a run under 50 ms separated from
    the rest by 150 ms or more below the threshold (a lip smack or a breath, not speech)."""
    cuts = np.flatnonzero(np.diff(loud) >= round(0.15 * sr))
    runs = np.split(loud, cuts + 1)
    while len(runs) > 1 and runs[0][-1] - runs[0][0] < 0.05 * sr:
        runs = runs[1:]
    while len(runs) > 1 and runs[-1][-1] - runs[-1][0] < 0.05 * sr:
        runs = runs[:-1]
    return np.concatenate(runs)


def _dtx_gate(x: np.ndarray, bed: np.ndarray, sr: int, cng: float, rng: Any) -> np.ndarray:
    """1 where the line carries signal, 0 (exact digital silence) elsewhere: the sender's
    VAD opens on 20 ms frames 10 dB above the bed (own speech and echo alike) and holds
    200 ms; comfort noise fills ``cng`` of the other 1 s blocks."""
    n = len(x)
    frame = round(0.02 * sr)
    k = n // frame
    p = np.mean(x[: k * frame].reshape(k, frame) ** 2, axis=1)
    q = np.mean(bed[: k * frame].reshape(k, frame) ** 2, axis=1)
    open_ = np.repeat(p > 10.0 * q, frame)
    gate = np.zeros(n)
    gate[: open_.size] = open_
    hang = round(0.2 * sr)
    gate = np.convolve(gate, np.ones(2 * hang + 1), mode="same") > 0
    gate = gate.astype(np.float64)
    for j in range(0, n, sr):
        if rng.random() < cng:
            gate[j : j + sr] = 1.0
    return gate


def edge_report(segments: list[dict[str, Any]], truth: list[tuple[float, float]]) -> dict[str, Any]:
    """``acoustic_accuracy.edge_errors`` of a record's speech segments against one channel's
    truth; pooled absolute edge errors (ms) in ``errors``."""
    from voxassay.suites.duplex.evidence.acoustic import Segment
    from voxassay.suites.duplex.evidence.acoustic_accuracy import edge_errors

    speech = [
        Segment(0, s["start_s"], s["end_s"], s["level_dbfs"])
        for s in segments
        if s.get("kind", "speech") == "speech"
    ]
    res = edge_errors(speech, truth)
    res["errors"] = [abs(p["onset_ms"]) for p in res["pairs"]] + [
        abs(p["offset_ms"]) for p in res["pairs"]
    ]
    return res
