"""Whether a bundle's sound-loop artifacts back its capture claim (what L3 rests on).

A bundle whose provenance claims a capture after a real player holds, hashed in its
manifest: ``capture.wav`` (the capture as recorded), ``received.wav`` (the agent's audio as
the transport delivered it, on the session clock), ``loop.json`` (the loop's facts and its
measured latency) and ``output.wav``. ``check_loop`` accepts them when:

1. ``loop.json`` names the loop (kind, PulseAudio version, sink and monitor, the player's
   PID, the sample rate, the capture's offset and length, the latency);
2. ``output.wav`` *is* the capture: sample ``i`` equals ``capture.wav`` sample
   ``offset + i`` wherever the capture has it, and is zero elsewhere;
3. per ``WINDOW_MS`` window of active received audio (``window_lags``: the lag of
   ``output.wav`` behind ``received.wav`` in ``-LAG_BEFORE_MS..LAG_AFTER_MS`` maximising
   ``core.lag.best_lag``'s correlation), at least ``MIN_MATCHED_SHARE`` of the windows
   correlate at ``MIN_CORRELATION`` or more, and their median lag is within
   ``max(LAG_TOLERANCE_MS, 3 * jitter_ms)`` of the stated ``latency_ms``. Windows, not the
   whole session: a player that restarts for each response lands each at its own sub-ms
   offset, which one global lag cannot follow (measured: 0.65 globally, 0.99 per window);
4. the capture is not the received audio copied: windows equal to it sample for sample do
   not come out of a player and a sound card (at most ``MAX_COPIED_SHARE`` of them);
5. a session in which the agent sent no audio has nothing to match: its capture must then
   be silent.

It returns None when they do, else what is wrong (the evidence reasons quote it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from voxassay.core.lag import best_lag

__all__ = [
    "CAPTURE_FILE",
    "LOOP_FILE",
    "LOOP_FILES",
    "RECEIVED_FILE",
    "WindowLag",
    "check_loop",
    "window_lags",
]

LOOP_FILE = "loop.json"
CAPTURE_FILE = "capture.wav"
RECEIVED_FILE = "received.wav"
LOOP_FILES = (CAPTURE_FILE, RECEIVED_FILE, LOOP_FILE)
LAG_BEFORE_MS = 20.0
LAG_AFTER_MS = 300.0
MIN_CORRELATION = 0.5
LAG_TOLERANCE_MS = 5.0
WINDOW_MS = 400.0
ACTIVE_DBFS = -45.0
MIN_MATCHED_SHARE = 0.5
MAX_COPIED_SHARE = 0.5
SILENT_PEAK = 64
"""int16 peak under which a capture counts as silent (-54 dBFS)."""


def _loop_doc(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{LOOP_FILE} is not readable JSON ({exc})"
    if not isinstance(doc, dict):
        return None, f"{LOOP_FILE} is not a JSON object"
    cap = doc.get("capture")
    player = doc.get("player")
    need = {
        "kind": isinstance(doc.get("kind"), str),
        "pulseaudio_version": isinstance(doc.get("pulseaudio_version"), str),
        "sink": isinstance(doc.get("sink"), str),
        "monitor": isinstance(doc.get("monitor"), str),
        "player.pid": isinstance(player, dict)
        and isinstance(player.get("pid"), int)
        and player["pid"] > 0,
        "sample_rate": isinstance(doc.get("sample_rate"), int) and doc["sample_rate"] > 0,
        "capture.offset_samples": isinstance(cap, dict)
        and isinstance(cap.get("offset_samples"), int),
        "capture.samples": isinstance(cap, dict) and isinstance(cap.get("samples"), int),
        "latency_ms": isinstance(doc.get("latency_ms"), (int, float))
        or ("latency_ms" in doc and doc["latency_ms"] is None),
    }
    missing = [k for k, ok in need.items() if not ok]
    if missing:
        return None, f"{LOOP_FILE} does not state {', '.join(missing)}"
    return doc, None


def _pcm(path: Path) -> tuple[np.ndarray, int]:
    x, sr = sf.read(path, dtype="int16", always_2d=True)
    return x[:, 0], int(sr)


def check_loop(bundle_dir: Path, present: set[str]) -> str | None:
    """None when the loop artifacts back the capture claim, else the problem (module
    docstring). ``present``: the bundle files listed in the manifest that match their hash."""
    missing = [n for n in (*LOOP_FILES, "output.wav") if n not in present]
    if missing:
        return f"no hashed {', '.join(missing)} in the bundle"
    doc, problem = _loop_doc(bundle_dir / LOOP_FILE)
    if doc is None:
        return problem
    try:
        out, sr_out = _pcm(bundle_dir / "output.wav")
        cap, sr_cap = _pcm(bundle_dir / CAPTURE_FILE)
        rec, sr_rec = _pcm(bundle_dir / RECEIVED_FILE)
    except (OSError, RuntimeError, ValueError) as exc:
        return f"the loop's audio cannot be read ({exc})"
    sr = int(doc["sample_rate"])
    if {sr_out, sr_cap, sr_rec} != {sr}:
        return f"sample rates differ (output {sr_out}, capture {sr_cap}, received {sr_rec}, loop.json {sr})"
    if cap.size != doc["capture"]["samples"]:
        return f"capture.wav has {cap.size} samples, loop.json says {doc['capture']['samples']}"
    if rec.size != out.size:
        return f"received.wav ({rec.size} samples) and output.wav ({out.size}) differ in length"
    offset = int(doc["capture"]["offset_samples"])
    lo, hi = max(0, -offset), min(out.size, cap.size - offset)
    expect = np.zeros(out.size, np.int16)
    if hi > lo:
        expect[lo:hi] = cap[offset + lo : offset + hi]
    if not np.array_equal(out, expect):
        bad = int(np.count_nonzero(out != expect))
        return f"output.wav is not the capture at offset {offset} ({bad} samples differ)"
    if not np.any(np.abs(rec.astype(np.int32)) > SILENT_PEAK):
        if np.any(np.abs(out.astype(np.int32)) > SILENT_PEAK):
            return "the agent sent no audio, yet the capture is not silent"
        return None
    rows = window_lags(rec, out, sr)
    if not rows:
        return "no window of received audio long enough to match the capture against"
    copied = sum(1 for w in rows if w.copied)
    if copied > MAX_COPIED_SHARE * len(rows):
        return (
            f"the capture is the received audio copied sample for sample in {copied} of "
            f"{len(rows)} windows: no player and sound card were in between"
        )
    matched = [w.lag_ms for w in rows if w.correlation >= MIN_CORRELATION]
    if len(matched) < MIN_MATCHED_SHARE * len(rows):
        return (
            f"output.wav does not match the received audio: {len(matched)} of {len(rows)} "
            f"windows correlate at {MIN_CORRELATION:g} or more"
        )
    stated = doc.get("latency_ms")
    if not isinstance(stated, (int, float)):
        return "loop.json states no latency although the capture matches the received audio"
    jit = doc.get("jitter_ms")
    jitter = float(jit) if isinstance(jit, (int, float)) else 0.0
    tol = max(LAG_TOLERANCE_MS, 3 * jitter)
    lag_ms = float(np.median(matched))
    if abs(lag_ms - float(stated)) > tol:
        return (
            f"output.wav matches the received audio at {lag_ms:.1f} ms, loop.json states "
            f"{float(stated):.1f} ms (tolerance {tol:.1f} ms)"
        )
    return None


@dataclass(frozen=True)
class WindowLag:
    """One window of received audio and where the capture matches it best."""

    start_ms: float
    lag_ms: float
    correlation: float
    copied: bool
    """The capture equals the received audio sample for sample at that lag."""


def _active_windows(x: np.ndarray, sr: int) -> list[int]:
    """Start samples of ``WINDOW_MS`` windows where ``x`` is active (10 ms frames over
    ``ACTIVE_DBFS``): the first active frame of a stretch, then one window after another."""
    w = round(WINDOW_MS * sr / 1000)
    f = sr // 100
    n = x.size // f
    if n == 0:
        return []
    frames = x[: n * f].reshape(n, f).astype(np.float64) / 32768.0
    level = 10 * np.log10(np.mean(frames * frames, axis=1) + 1e-12)
    active = level > ACTIVE_DBFS
    starts: list[int] = []
    i = 0
    while i < n:
        if active[i] and i * f + w <= x.size:
            starts.append(i * f)
            i += w // f
        else:
            i += 1
    return starts


def window_lags(received: np.ndarray, output: np.ndarray, sr: int) -> list[WindowLag]:
    """Per ``WINDOW_MS`` window of active ``received`` audio (int16), the lag of ``output``
    (int16, same timeline) behind it in ``-LAG_BEFORE_MS..LAG_AFTER_MS`` that maximises the
    normalised cross-correlation (``core.lag.best_lag``), that correlation, and whether the
    two are equal there sample for sample."""
    rec = np.asarray(received, np.int16)
    out = np.asarray(output, np.int16)
    before = round(LAG_BEFORE_MS * sr / 1000)
    after = round(LAG_AFTER_MS * sr / 1000)
    w = round(WINDOW_MS * sr / 1000)
    rows: list[WindowLag] = []
    for s in _active_windows(rec, sr):
        lo = max(0, s - before)
        lead = s - lo
        k, r = best_lag(rec[s : s + w], out[lo : s + w + after], lead - before, lead + after)
        lag = k - lead
        a, b = rec[s : s + w], out[s + lag : s + lag + w]
        rows.append(
            WindowLag(
                start_ms=round(s * 1000 / sr, 3),
                lag_ms=round(lag * 1000 / sr, 3),
                correlation=round(r, 4),
                copied=bool(a.size == b.size and np.array_equal(a, b)),
            )
        )
    return rows
