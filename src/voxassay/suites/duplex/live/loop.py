"""A session's sound-loop evidence: the capture placed on the session clock, and the loop's
latency and jitter measured on the audio.

``loop_evidence(received, capture, t_start_ns)``:

- ``output``: the capture cut to the session's timeline, sample ``i`` = capture sample
  ``offset + i`` with ``offset = capture.sample_at(t_start_ns)`` (samples before the capture
  began or after it ended are zero and counted in ``loop.json`` as ``uncaptured_samples``).
  It is what the user heard: ``output.wav``, and the acoustic events come from it.
- Latency and jitter: the received track (``received.wav``: the agent's audio on the
  transport, placed at its arrival by the playback model) is cut into windows of active
  agent audio; per window, the lag of the capture behind it and its correlation
  (``contracts.duplex.loop_check.window_lags``, the same measure L3 is checked with). Windows
  correlating under ``MIN_WINDOW_CORRELATION`` (a flush cut them, the player lagged a queue
  behind) are listed but not counted. ``latency_ms`` is the median lag of the counted
  windows, ``jitter_ms`` their standard deviation (population), ``n_windows`` how many.
  Nothing is subtracted from any event: reports state both beside the metrics.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxassay.contracts.duplex.loop_check import (
    CAPTURE_FILE,
    LAG_AFTER_MS,
    LAG_BEFORE_MS,
    LOOP_FILE,
    MIN_CORRELATION,
    RECEIVED_FILE,
    WINDOW_MS,
    window_lags,
)
from voxassay.systems.duplex.sound_loop import LoopCapture

__all__ = ["CAPTURE_FILE", "LOOP_FILE", "RECEIVED_FILE", "LoopEvidence", "loop_evidence"]

MIN_WINDOW_CORRELATION = MIN_CORRELATION


@dataclass
class LoopEvidence:
    output: np.ndarray
    """int16, the session's length: the capture on the session clock."""
    capture: np.ndarray
    """int16: the whole capture as recorded."""
    doc: dict[str, Any]
    """``loop.json``."""


def loop_evidence(
    received: np.ndarray, capture: LoopCapture, t_start_ns: int, *, sample_rate: int
) -> LoopEvidence:
    """The loop's files and measurements for one session (module docstring)."""
    sr = sample_rate
    if capture.sample_rate != sr:
        raise ValueError(f"capture at {capture.sample_rate} Hz, session at {sr} Hz")
    n = int(np.asarray(received).size)
    cap = np.asarray(capture.capture, np.int16)
    offset = capture.sample_at(t_start_ns)
    out = np.zeros(n, np.int16)
    lo, hi = max(0, -offset), min(n, cap.size - offset)
    if hi > lo:
        out[lo:hi] = cap[offset + lo : offset + hi]
    uncaptured = n - max(0, hi - lo)
    rec = (np.clip(np.asarray(received, np.float32), -1.0, 32767 / 32768) * 32768).round()
    rows = [
        {"start_ms": w.start_ms, "lag_ms": w.lag_ms, "correlation": w.correlation}
        for w in window_lags(rec.astype(np.int16), out, sr)
    ]
    counted = [row["lag_ms"] for row in rows if row["correlation"] >= MIN_WINDOW_CORRELATION]
    lat = float(np.median(counted)) if counted else None
    jit = float(np.std(counted)) if len(counted) >= 2 else None
    doc: dict[str, Any] = {
        "version": 1,
        "kind": "pulseaudio",
        "pulseaudio_version": capture.pulseaudio_version,
        "sink": capture.sink,
        "monitor": capture.monitor,
        "player": {
            "pid": capture.player_pid,
            "program": "voxassay.systems.duplex.pulse_player (libpulse-simple)",
        },
        "recorder": "voxassay.systems.duplex.sound_loop (libpulse-simple, 5 ms reads)",
        "sample_rate": sr,
        "capture": {
            "samples": int(cap.size),
            "offset_samples": int(offset),
            "start_ms": round(-offset * 1000 / sr, 3),
            "end_ms": round((cap.size - offset) * 1000 / sr, 3),
            "anchor_spread_us": capture.anchor_spread_us,
            "reads": capture.reads,
            "sha256": hashlib.sha256(cap.astype("<i2").tobytes()).hexdigest(),
        },
        "uncaptured_samples": int(uncaptured),
        "latency_ms": None if lat is None else round(lat, 3),
        "jitter_ms": None if jit is None else round(jit, 3),
        "n_windows": len(counted),
        "windows": rows,
        "flushes_ms": [round((t - t_start_ns) / 1e6, 3) for t in capture.flushes_ns],
        "problems": list(capture.problems),
        "method": (
            f"per {WINDOW_MS:g} ms window of active received audio, the lag of the capture "
            f"behind it that maximises the normalised cross-correlation (within "
            f"-{LAG_BEFORE_MS:g}..{LAG_AFTER_MS:g} ms); windows correlating under "
            f"{MIN_WINDOW_CORRELATION:g} not counted; latency = median, jitter = standard "
            "deviation; nothing is subtracted from any event"
        ),
    }
    return LoopEvidence(output=out, capture=cap, doc=doc)


PROBE_BURSTS = 8
PROBE_BURST_MS = 300.0
PROBE_GAP_MS = 300.0


def measure_loop(server: Any, sample_rate: int = 16_000, seed: int = 0) -> dict[str, Any]:
    """The loop's self-check: ``PROBE_BURSTS`` seeded noise bursts handed to a real player
    on ``server`` at known times (what a session does with received audio), the capture
    measured against them as a session's is (``loop_evidence``): latency (median lag) and
    jitter (standard deviation) over the bursts, with min and max."""
    import time

    from voxassay.systems.duplex.sound_loop import SoundLoop

    sr = sample_rate
    rng = np.random.default_rng(seed)
    burst = round(PROBE_BURST_MS * sr / 1000)
    step = burst + round(PROBE_GAP_MS * sr / 1000)
    lead = round(0.2 * sr)
    received = np.zeros(lead + PROBE_BURSTS * step, np.float32)
    loop = SoundLoop(server, sr)
    loop.start()
    try:
        t0 = time.monotonic_ns()
        for k in range(PROBE_BURSTS):
            x = (rng.standard_normal(burst) * 0.1).astype(np.float32)
            at = lead + k * step
            due = t0 + at * 1_000_000_000 // sr
            while time.monotonic_ns() < due:
                time.sleep(0.0005)
            received[at : at + burst] = x
            loop.play(x)
        capture = loop.stop()
    finally:
        loop.close()
    ev = loop_evidence(received, capture, t0, sample_rate=sr)
    lags = [w["lag_ms"] for w in ev.doc["windows"] if w["correlation"] >= MIN_WINDOW_CORRELATION]
    return {
        "latency_ms": ev.doc["latency_ms"],
        "jitter_ms": ev.doc["jitter_ms"],
        "min_ms": min(lags) if lags else None,
        "max_ms": max(lags) if lags else None,
        "n_windows": len(lags),
        "n_bursts": PROBE_BURSTS,
        "pulseaudio_version": capture.pulseaudio_version,
        "anchor_spread_us": capture.anchor_spread_us,
        "method": (
            f"{PROBE_BURSTS} seeded noise bursts of {PROBE_BURST_MS:g} ms handed to the "
            "loop's real player at known times and captured from the sink's monitor; "
            + ev.doc["method"]
        ),
    }
