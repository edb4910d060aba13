"""Harness overhead of `asr run`: its wall time vs the engine's own compute on the same files.

Baseline: faster-whisper (the default tiny.en int8 model) transcribes the pre-decoded audio
in a plain loop (the engine's own compute). Ours: voxassay's runner over the same files
(audio decode + resample, timeout guard, scoring, one fsynced record per item). Model load
and warm-up are excluded on both sides. Target: ratio <= 1.10.

Run: python benchmarks/bench_run_overhead.py   (needs ../shared/data)
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def manifest(path: Path) -> list[dict[str, object]]:
    rows = []
    for folder in ("read_speech", "accented"):
        with open(DATA / folder / "manifest.csv", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["transcript_or_label"] and r["path"].endswith(".wav"):
                    rows.append(
                        {
                            "id": f"{folder}/{r['path']}",
                            "audio_filepath": str(DATA / folder / r["path"]),
                            "text": r["transcript_or_label"],
                            "speaker": r["speaker"],
                        }
                    )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def main() -> int:
    if not DATA.exists():
        print(f"skip: {DATA} not found")
        return 0
    from voxassay.core.audio import load_audio
    from voxassay.core.registry import REGISTRY
    from voxassay.core.runstore import RunStore
    from voxassay.suites.asr.suite import run_asr

    with tempfile.TemporaryDirectory() as tmp:
        m = Path(tmp) / "m.jsonl"
        rows = manifest(m)
        audio = [load_audio(str(r["audio_filepath"])).samples for r in rows]
        total_audio = sum(len(a) for a in audio) / 16000
        # baseline: the engine alone
        engine = REGISTRY.build("transcribe", "faster-whisper")
        engine.load()
        engine.transcribe(np.zeros(16000, np.float32))
        t0 = time.perf_counter()
        for a in audio:
            engine.transcribe(a)
        base = time.perf_counter() - t0
        del engine
        # ours: the full runner (records, scoring, timeouts), model load/warm-up excluded
        store = run_asr(m, ["faster-whisper"], Path(tmp) / "runs", write_reports=False)
        info = RunStore.open(store.path).info()["systems"]["faster-whisper"]
        ours = info["loop_wall_s"] - info["load_s"] - info["warmup_s"]
    ratio = ours / base
    print(f"files: {len(rows)}, audio: {total_audio:.1f} s")
    print(f"engine alone (transcribe loop):   {base:.2f} s  (RTFx {total_audio / base:.1f})")
    print(f"voxassay asr run (runner loop):    {ours:.2f} s")
    print(
        f"ratio voxassay/engine: {ratio:.3f}  (target <= 1.10) {'OK' if ratio <= 1.10 else 'MISSED'}"
    )
    return 0 if ratio <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main())
