"""STS harness time over the systems' own time, for the reference cascade, in one run.

Runs ``reference-sts:prosody_aware`` over the natural emotion items (18 items, AO and TO)
with the user turns already rendered (a first pass fills the render cache; renders are input
preparation, not harness work per answer), then prints, for the measured pass:

- wall: the run (``run_sts``, report writing excluded);
- system: the summed time inside ``converse`` (records' ``compute_s``) plus the model load;
- the ratio wall / system (target <= 1.1): what the harness adds per unit of system time
  (turn lookup, history, scoring with prosody features of the answer, audio and record
  writing).

    .venv/bin/python benchmarks/bench_sts_overhead.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET = 1.1


def main() -> None:
    from voxassay.suites.sts.items import load_items, select_items
    from voxassay.suites.sts.runner import run_sts

    only = tuple(
        it.id
        for s in select_items(load_items(), ("natural",))
        for it in s.items
        if it.dimension in ("emotion_understanding", "emotion_alignment")
    )
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cache = tmp / "cache"
        system = "reference-sts:prosody_aware"
        run_sts([system], tmp / "warm", only=only, cache_dir=cache, write_reports=False)
        from voxassay.reference import sts as reference_sts

        reference_sts._HEARD.clear()  # the measured pass transcribes and speaks again
        reference_sts._SPOKEN.clear()
        t0 = time.perf_counter()
        store = run_sts([system], tmp / "run", only=only, cache_dir=cache, write_reports=False)
        wall = time.perf_counter() - t0
        records = store.load_records().records
        compute = sum(r.timing.get("compute_s", 0.0) for r in records)
        load = float(json.loads((store.path / "run.json").read_text())["systems"][system]["load_s"])
        ok = sum(1 for r in records if r.status == "ok")
    own = compute + load
    ratio = wall / own if own else float("nan")
    print(f"items: {len(only)} x 2 modes = {len(records)} answers ({ok} ok)")
    print(f"wall {wall:.2f} s; inside converse {compute:.2f} s; model load {load:.2f} s")
    print(f"harness time / system time = {ratio:.3f} (target <= {TARGET})")
    print(f"harness per answer: {1000 * (wall - own) / max(1, len(records)):.1f} ms")


if __name__ == "__main__":
    main()
