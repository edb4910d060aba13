"""Per-clip time of each TTS measure on real clips vs the clip duration (real-time factor),
and the total time of the MUSHRA validation.

Run: .venv/bin/python benchmarks/bench_tts_measures.py [--skip-validation]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--skip-validation", action="store_true")
    args = ap.parse_args()
    from voxassay.core.audio import load_audio
    from voxassay.measures.prosody import prosody_features
    from voxassay.measures.quality import artifact_metrics, dnsmos
    from voxassay.measures.speaker import SpeakerEncoder, speaker_unavailable

    clips = sorted((DATA / "read_speech" / "ljspeech").glob("*.wav"))[:6]
    clips += sorted((DATA / "speaker" / "librispeech_test-other" / "2414").glob("*.flac"))
    enc = SpeakerEncoder() if speaker_unavailable() is None else None
    t0 = time.perf_counter()
    if enc:
        enc.load()
    print(f"speaker encoder load: {time.perf_counter() - t0:.2f} s")
    first = load_audio(clips[0], sr=None)
    t0 = time.perf_counter()
    dnsmos(first)  # model load + first call
    print(f"DNSMOS load + first call: {time.perf_counter() - t0:.2f} s")
    measures: dict[str, Callable[[Any], Any]] = {
        "dnsmos": dnsmos,
        "artifacts": artifact_metrics,
        "prosody": prosody_features,
    }
    if enc:
        measures["speaker"] = enc.embed
    totals = {k: 0.0 for k in measures}
    audio_s = 0.0
    print(f"{'clip':32s} {'dur s':>6s} " + " ".join(f"{k + ' s':>11s}" for k in measures))
    for p in clips:
        a = load_audio(p, sr=None)
        audio_s += a.duration
        row = []
        for name, fn in measures.items():
            t = time.perf_counter()
            fn(a)
            dt = time.perf_counter() - t
            totals[name] += dt
            row.append(f"{dt:11.3f}")
        print(f"{p.name:32s} {a.duration:6.2f} " + " ".join(row))
    print(f"\ntotal audio {audio_s:.1f} s; real-time factor (compute / audio):")
    for name, t in totals.items():
        print(f"  {name:10s} {t / audio_s:.4f}  ({t:.2f} s)")
    print(f"  {'all':10s} {sum(totals.values()) / audio_s:.4f}")
    if not args.skip_validation:
        from voxassay.suites.tts.validation import validate_quality_metrics

        t0 = time.perf_counter()
        res = validate_quality_metrics(DATA / "ratings" / "neural_codec_mushra")
        print(f"\nMUSHRA validation: {res['n_stimuli']} stimuli in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
