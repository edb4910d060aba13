"""Harness overhead of ``voxassay tts run`` vs the synthesizers' own time, per measure.

Runs the TTS suite on the ``demo`` item set (``--only`` / ``--limit`` to shorten) with the
demo systems, once with the two-thread pipeline (synthesis overlapped with measuring) and,
with ``--serial``, once on one thread, and prints:

* synthesis seconds (sum of ``timing.compute_s``), the loop's wall seconds, model loading
  (ASR, speaker encoder, measure warm-ups) and the harness overhead ratio
  ``(wall - synthesis) / synthesis``;
* seconds per measure (ASR, DNSMOS, artifacts, prosody, speaker, long form, WAV writing),
  total and per item;
* pipeline vs serial wall time (the throughput gain of the second thread).

    .venv/bin/python benchmarks/bench_tts_overhead.py [--limit 30] [--serial] [--systems ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def _one(systems: list[str], only: list[str], limit: int | None, pipeline: bool) -> dict[str, Any]:
    from voxassay.suites.tts import items as tts_items
    from voxassay.suites.tts.suite import run_tts

    items: str = "demo"
    tmp = Path(tempfile.mkdtemp(prefix="bench-tts-"))
    if limit:
        _, its = tts_items.load_item_set("demo", only)
        path = tmp / "items.jsonl"
        path.write_text(
            "".join(json.dumps(it.to_dict()) + "\n" for it in its[:limit]), encoding="utf-8"
        )
        items, only = str(path), []
    t0 = time.perf_counter()
    store = run_tts(
        systems, tmp / "runs", items=items, only=only, pipeline=pipeline, write_reports=False
    )
    wall = time.perf_counter() - t0
    info = store.info()
    n = sum(1 for _ in store.load_records().records)
    return {
        "units": n,
        "wall_s": wall,
        "loop_wall_s": info["execution"]["wall_s"],
        "synthesis_s": info["synthesis_s"],
        "model_load_wall_s": info["models"].get("load_wall_s"),
        "warmup_s": info["models"].get("warmup_s"),
        "measures": info["measure_seconds"],
        "systems": {s: v.get("compute_s") for s, v in info["systems"].items()},
        "run": str(store.path),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--systems", nargs="+", default=["piper", "espeak-ng:en-us+f3", "espeak-ng:en-us+m7"]
    )
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--limit", type=int, default=None, help="first N items of the demo set")
    ap.add_argument("--serial", action="store_true", help="also run on one thread")
    a = ap.parse_args()
    runs = {"pipeline": _one(a.systems, a.only, a.limit, True)}
    if a.serial:
        runs["serial"] = _one(a.systems, a.only, a.limit, False)
    for name, r in runs.items():
        synth = r["synthesis_s"]
        over = r["loop_wall_s"] - synth
        print(f"\n== {name}: {r['units']} units, systems {', '.join(r['systems'])}")
        print(
            f"wall {r['wall_s']:.1f} s (loop {r['loop_wall_s']:.1f} s), synthesis {synth:.1f} s, "
            f"model load (overlapped) {r['model_load_wall_s']:.1f} s"
        )
        for s, c in r["systems"].items():
            print(f"  synthesis {s}: {c:.1f} s")
        print(
            f"harness overhead / synthesis time = {over:.1f} / {synth:.1f} = "
            f"{over / synth if synth else float('nan'):.2f}"
        )
        print("per measure (total s, ms per unit):")
        for k, v in sorted(r["measures"].items(), key=lambda kv: -kv[1]):
            print(f"  {k:18s} {v:8.2f} s  {1000 * v / max(1, r['units']):8.1f} ms")
        print(f"  warm-ups: {r['warmup_s']}")
    if "serial" in runs:
        p, s = runs["pipeline"]["loop_wall_s"], runs["serial"]["loop_wall_s"]
        print(f"\npipeline (2 threads) vs serial: {p:.1f} s vs {s:.1f} s = {s / p:.2f}x throughput")


if __name__ == "__main__":
    main()
