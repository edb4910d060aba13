"""The sound loop's own timing figures on this machine (the player and recorder of
``sound_loop.SoundLoop`` on a private PulseAudio server, no agent): what
``tests/systems/duplex/test_sound_loop.py`` no longer asserts, because they are figures of the
machine and its load, not properties of the code.

Printed, over ``--repeats`` runs of a real LJ Speech recording handed to the player in 20 ms
chunks: the loop's lag per 400 ms window (median and spread), the windows' correlation, the
spread of the recorder's read anchors, and after a flush with seconds still queued, how long
the capture took to fall silent. The figures the tests used to bound are printed beside those
bounds (lag under 10 ms, median correlation over 0.85, anchor spread under 3 ms, silence within
60 ms of the flush), so a slow or loaded machine shows where it stands.

Run: ``python benchmarks/bench_sound_loop.py [--repeats N]`` (needs pulseaudio and
../shared/data).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.contracts.duplex.loop_check import window_lags  # noqa: E402
from voxassay.core.audio import load_audio  # noqa: E402
from voxassay.systems.duplex.sound_loop import SoundLoop  # noqa: E402
from voxassay.systems.duplex.sound_server import PulseServer  # noqa: E402

SR = 16_000
DATA = ROOT.parent / "shared" / "data" / "read_speech" / "ljspeech"


def speech(name: str) -> np.ndarray:
    clip = load_audio(DATA / f"{name}.wav", sr=SR)
    return (np.clip(clip.samples, -1, 32767 / 32768) * 32768).astype(np.int16)


def paced(server: PulseServer) -> tuple[list[float], list[float], float]:
    """Window lags (ms), correlations and the anchor spread (us) of one paced playback."""
    pcm = speech("LJ001-0002")
    loop = SoundLoop(server, SR)
    loop.start()
    t0 = time.monotonic_ns() + 200_000_000
    for k, i in enumerate(range(0, pcm.size, SR // 50)):
        while time.monotonic_ns() < t0 + k * 20_000_000:
            time.sleep(0.0005)
        loop.play(pcm[i : i + SR // 50])
    cap = loop.stop()
    loop.close()
    offset = cap.sample_at(t0)
    rows = window_lags(pcm, cap.capture[offset : offset + pcm.size], SR)
    return [w.lag_ms for w in rows], [w.correlation for w in rows], cap.anchor_spread_us


def flush_to_silence(server: PulseServer) -> float:
    """Milliseconds from the flush to the last capture sample above 64 (of 32768)."""
    pcm = speech("LJ001-0004")
    loop = SoundLoop(server, SR)
    loop.start()
    loop.play(pcm)
    time.sleep(0.8)
    loop.flush()
    time.sleep(0.5)
    cap = loop.stop()
    loop.close()
    stop = cap.sample_at(cap.flushes_ns[0])
    loud = np.flatnonzero(np.abs(cap.capture[stop:].astype(np.int32)) >= 64)
    return 0.0 if loud.size == 0 else float(loud[-1] + 1) * 1000 / SR


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    lags: list[float] = []
    corr: list[float] = []
    spreads: list[float] = []
    silences: list[float] = []
    with PulseServer() as server:
        for _ in range(args.repeats):
            ln, cn, spread = paced(server)
            lags += ln
            corr += cn
            spreads.append(spread)
            silences.append(flush_to_silence(server))
    print(f"windows: {len(lags)} over {args.repeats} run(s)")
    print(
        f"lag ms: median {statistics.median(lags):.2f}, min {min(lags):.2f}, "
        f"max {max(lags):.2f} (the test bounded |lag| < 10)"
    )
    print(
        f"correlation: median {statistics.median(corr):.3f}, min {min(corr):.3f} "
        "(the test asked a median over 0.85)"
    )
    print(f"anchor spread us: max {max(spreads):.0f} (the test asked under 3000)")
    print(
        f"flush to silence ms: median {statistics.median(silences):.1f}, "
        f"max {max(silences):.1f} (the test asked within 60)"
    )


if __name__ == "__main__":
    main()
