"""Fill librosa's numba cache once, before several processes use it (``make setup`` runs it).

librosa compiles its numba kernels on first use and caches them beside its sources, numbered
per signature in the order a process compiled them. Two processes that compile different
signatures at once (float32 in one, float64 in another) can each write file ``.1.nbc`` and
the index: a third process then loads one signature's machine code for the other and dies
with a segmentation fault (seen in the suite: a worker crashed in ``librosa.yin``). After
this runs, the kernels voxassay and its measures use are in the cache for both float types, so
later processes only read it. Nothing here is needed for correctness of a single process.

    python -m voxassay.measures.numba_cache
"""

from __future__ import annotations

import importlib.util
import time


def warm() -> float | None:
    """Compile the kernels (DNSMOS features, pitch, spectral features) for float32 and
    float64; returns the seconds taken, or None without librosa."""
    if importlib.util.find_spec("librosa") is None:
        return None
    import librosa
    import numpy as np

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        y = (0.1 * rng.standard_normal(16_000)).astype(dtype)
        for n_fft, hop in ((321, 160), (2048, 512)):  # DNSMOS's features; librosa's defaults
            mel = librosa.feature.melspectrogram(
                y=y, sr=16_000, n_fft=n_fft, hop_length=hop, n_mels=40
            )
            librosa.power_to_db(mel, ref=np.max)
        librosa.yin(y, fmin=60, fmax=400, sr=16_000)
        librosa.feature.mfcc(y=y, sr=16_000, n_mfcc=13)
        librosa.feature.rms(y=y)
        librosa.onset.onset_strength(y=y, sr=16_000)
        librosa.util.peak_pick(y, pre_max=3, post_max=3, pre_avg=3, post_avg=5, delta=0.5, wait=10)
    return time.perf_counter() - t0


if __name__ == "__main__":
    seconds = warm()
    print("librosa is not installed" if seconds is None else f"numba cache ready ({seconds:.1f} s)")
