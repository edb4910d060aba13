"""SU harness overhead vs the model's own time, on real clips (LibriSpeech speaker pairs).

Runs the resemblyzer specialist over speaker-match pairs built from ../shared/data/speaker
and prints: wall time of the run loop, the summed time inside the model calls
(``compute_s``), model load, and the overhead ratio
(loop wall - compute - load) / compute, i.e. what the harness adds per unit of model time
(audio loading, resampling, record writing, parsing). A second pass over the same pairs with
an in-process understander that answers instantly isolates the per-item harness cost.

    .venv/bin/python benchmarks/bench_su_overhead.py
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "speaker"
sys.path.insert(0, str(REPO))


def main() -> None:
    from voxassay.core.items import load_manifest, write_manifest
    from voxassay.suites.su.pairs import build_pairs
    from voxassay.suites.su.run import run_su

    if not (DATA / "manifest.csv").exists():
        raise SystemExit(f"no shared data at {DATA}")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        src = tmp / "spk.jsonl"
        with open(DATA / "manifest.csv", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        src.write_text(
            "".join(
                json.dumps(
                    {
                        "id": Path(r["path"]).stem,
                        "audio_filepath": str(DATA / r["path"]),
                        "speaker": r["speaker"],
                    }
                )
                + "\n"
                for r in rows
            )
        )
        pairs = tmp / "pairs.jsonl"
        write_manifest(build_pairs(load_manifest(src), "speaker_match", seed=0), pairs)
        for spec in ("resemblyzer", "python:benchmarks.bench_su_overhead:instant"):
            t0 = time.perf_counter()
            store = run_su(
                pairs, ["speaker_match_segmented"], [spec], tmp / "runs", write_reports=False
            )
            total = time.perf_counter() - t0
            info = json.loads((store.path / "run.json").read_text())["systems"][spec]
            recs = store.load_records().records
            compute = sum(r.timing.get("compute_s", 0.0) for r in recs)
            wall_items = sum(r.timing.get("wall_s", 0.0) for r in recs)
            audio = sum(r.timing.get("audio_s", 0.0) for r in recs)
            load = info.get("load_total_s", 0.0)
            loop = info["loop_wall_s"]
            overhead = loop - compute - load
            print(f"{spec}: {len(recs)} records, {audio:.1f} s of audio")
            print(f"  command total {total:.2f} s, loop wall {loop:.2f} s, load {load:.2f} s")
            print(f"  model compute {compute:.3f} s, per-item wall {wall_items:.3f} s")
            print(
                f"  harness overhead {overhead:.3f} s = {overhead / len(recs) * 1000:.1f} ms/item",
                end="",
            )
            print(f", ratio to model time {overhead / compute:.3f}" if compute > 0 else "")


def instant() -> object:
    """An understander that answers at once (isolates the harness's own per-item cost)."""
    return lambda parts, prompt: "ANSWER: same"


if __name__ == "__main__":
    main()
