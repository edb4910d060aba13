"""The Ray executor's cost and how it scales, in one run.

1. Overhead per item: ``asr run`` of a system that answers at once (``mock:fixed``) over the
   same real LJSpeech items with the thread executor and with the Ray executor (a Ray started
   for the run), one worker each. Per item = time from the first record to the last over the
   records between (start-up and model load excluded on both sides). Target: Ray's extra time
   per item <= 5 % of a faster-whisper item's compute (its median ``compute_s`` here).
2. Throughput of faster-whisper on Ray with 1 and 2 workers on this machine (items/s).
3. Simulated scale-out: a real ``ray.cluster_utils.Cluster`` on this machine with K one-CPU
   worker nodes (K = 2, 4, 8; the head has none) and a system with a fixed 100 ms latency
   (``mock:hang?seconds=0.1``) fed the real audio through Ray's object store
   (``--ship-audio``). Efficiency = (items x 0.1 s / K) / wall
   time; the driver's CPU time per item is printed beside it. Target: >= 85 % at 8 nodes.

Run: python benchmarks/bench_ray.py   (needs ../shared/data and `pip install 'voxassay[ray]'`)
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO))

FIXED = "mock:fixed?text=x"
LATENCY_S = 0.1
SLOW = f"mock:hang?seconds={LATENCY_S}&text=x"


def manifest(path: Path, prefix: str = "") -> int:
    """The read-speech clips whose path starts with ``prefix`` (all by default)."""
    rows = []
    with open(DATA / "read_speech" / "manifest.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if (
                r["transcript_or_label"]
                and r["path"].endswith(".wav")
                and r["path"].startswith(prefix)
            ):
                rows.append(
                    {
                        "id": r["path"],
                        "audio_filepath": str(DATA / "read_speech" / r["path"]),
                        "text": r["transcript_or_label"],
                    }
                )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def timed_run(m: Path, out: Path, system: str, repeats: int, **kw: Any) -> dict[str, Any]:
    """One ``run_asr``; seconds per item between the first and the last record."""
    from voxassay.suites.asr.suite import run_asr

    arrivals: list[float] = []
    cpu0 = time.process_time()
    store = run_asr(
        m,
        [system],
        out,
        repeats=repeats,
        write_reports=False,
        on_record=lambda _: arrivals.append(time.perf_counter()),
        **kw,
    )
    cpu = time.process_time() - cpu0
    recs = store.load_records().records
    assert all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:3]
    span = arrivals[-1] - arrivals[0]
    return {
        "n": len(recs),
        "per_item_s": span / (len(arrivals) - 1),
        "items_per_s": (len(arrivals) - 1) / span,
        "driver_cpu_per_item_s": cpu / len(recs),
        "compute_s": [r.timing.get("compute_s") or 0.0 for r in recs],
    }


def count(m: Path) -> int:
    return len(m.read_text().splitlines())


def scale_out(m: Path, tmp: Path, nodes: int, per_node: int) -> dict[str, Any]:
    from tests.helpers.ray_cluster import ray_cluster

    with ray_cluster(nodes=nodes) as cluster:
        res = timed_run(
            m,
            tmp / f"scale{nodes}",
            SLOW,
            repeats=-(-per_node * nodes // count(m)),
            executor="ray",
            workers=nodes,
            ray_address=cluster.address,
            ship_audio=True,
        )
    ideal = LATENCY_S / nodes
    res["efficiency"] = ideal / res["per_item_s"]
    return res


def main() -> int:
    if not DATA.exists():
        print(f"skip: {DATA} not found")
        return 0
    from voxassay.core.ray_executor import ray_unavailable

    if ray_unavailable():
        print(f"skip: {ray_unavailable()}")
        return 0
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        m = tmp / "m.jsonl"
        n_items = manifest(m)
        # 1. overhead per item over the thread executor, and a faster-whisper item's compute
        fw = timed_run(m, tmp / "fw", "faster-whisper", repeats=2)
        fw_item = statistics.median(fw["compute_s"])
        reps = max(1, 300 // n_items)
        thread = timed_run(m, tmp / "thread", FIXED, repeats=reps)
        ray1 = timed_run(m, tmp / "ray", FIXED, repeats=reps, executor="ray")
        extra = ray1["per_item_s"] - thread["per_item_s"]
        print(f"items: {n_items} LJSpeech clips; fixed-answer system x{reps} repeats")
        print(
            f"per item: thread {thread['per_item_s'] * 1000:.2f} ms, "
            f"ray {ray1['per_item_s'] * 1000:.2f} ms: Ray adds {extra * 1000:.2f} ms"
        )
        print(
            f"faster-whisper compute per item (median): {fw_item * 1000:.0f} ms; Ray's extra "
            f"is {extra / fw_item:.2%} of it (target <= 5 %)"
        )
        # 2. faster-whisper throughput on Ray with 1 and 2 workers
        thr = {}
        for w in (1, 2):
            r = timed_run(m, tmp / f"fw{w}", "faster-whisper", repeats=3, executor="ray", workers=w)
            thr[w] = r["items_per_s"]
            print(f"faster-whisper on Ray, {w} worker(s): {r['items_per_s']:.2f} items/s")
        print(f"2 workers / 1 worker: {thr[2] / thr[1]:.2f}x on this 2-core machine")
        # 3. simulated scale-out, on the 16 kHz CMU ARCTIC clips (about 3 s: each item's decode
        # in the worker is real work, and 8 nodes share this machine's 2 cores)
        arctic = tmp / "arctic.jsonl"
        manifest(arctic, "cmu_arctic/")
        print(
            f"scale-out: one-CPU nodes, a {LATENCY_S * 1000:.0f} ms system, real audio (CMU "
            "ARCTIC, 16 kHz) through the object store"
        )
        for nodes in (2, 4, 8):
            r = scale_out(arctic, tmp, nodes, per_node=25)
            print(
                f"  {nodes} nodes: {r['n']} items, {r['items_per_s']:.1f} items/s, "
                f"efficiency {r['efficiency']:.1%}, driver CPU {r['driver_cpu_per_item_s'] * 1000:.1f} "
                f"ms/item"
            )
        print("target: efficiency >= 85 % at 8 nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
