"""A bundle's sound-loop artifacts made from its own output (for tests that need an L3 bundle
without running PulseAudio): ``received.wav`` is the agent side as it was, ``output.wav``
and ``capture.wav`` the same audio with a 1-LSB mark on every seventh sample (a real capture
never equals what was sent), ``loop.json`` the facts and a zero latency."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from voxassay.contracts.duplex.loop_check import CAPTURE_FILE, LOOP_FILE, RECEIVED_FILE

PAD_S = 0.1


def add_loop_artifacts(folder: Path, *, latency_ms: float = 0.0) -> list[str]:
    """Rewrite ``folder/output.wav`` as a capture and add the loop files; their names."""
    sent, sr = sf.read(folder / "output.wav", dtype="int16")
    sf.write(folder / RECEIVED_FILE, sent, sr, subtype="PCM_16")
    lag = round(latency_ms * sr / 1000)
    heard = np.zeros_like(sent)
    heard[lag:] = sent[: sent.size - lag]
    mark = np.zeros(heard.size, np.int32)
    mark[::7] = 1
    heard = np.clip(heard.astype(np.int32) + mark, -32768, 32767).astype(np.int16)
    sf.write(folder / "output.wav", heard, sr, subtype="PCM_16")
    pad = np.zeros(round(PAD_S * sr), np.int16)
    capture = np.concatenate([pad, heard, pad])
    sf.write(folder / CAPTURE_FILE, capture, sr, subtype="PCM_16")
    doc = {
        "version": 1,
        "kind": "pulseaudio",
        "pulseaudio_version": "16.1",
        "sink": "voxassay_play",
        "monitor": "voxassay_play.monitor",
        "player": {"pid": 4242, "program": "test"},
        "sample_rate": sr,
        "capture": {"samples": int(capture.size), "offset_samples": int(pad.size)},
        "latency_ms": latency_ms,
        "jitter_ms": 0.5,
    }
    (folder / LOOP_FILE).write_text(json.dumps(doc))
    return [CAPTURE_FILE, RECEIVED_FILE, LOOP_FILE]
