"""The quality metrics against the whole real MUSHRA listening test (128 codec stimuli: 16
signals x 8 conditions, 21 listeners), with the time it takes.

``tests/suites/tts/test_validation.py`` validates on the first 8 signals (64 stimuli: DNSMOS
costs about a CPU-second per stimulus here, and the whole corpus was the suite's single
largest cost); this prints the corpus figures it used to assert, beside the bounds:
condition-level Spearman of DNSMOS OVRL/SIG/P.808 (best over 0.4; OVRL's CI above 0),
bandwidth (condition over 0.8, stimulus over 0.4), and the report's table. The same figures
come from ``voxassay tts report RUN --validate-quality ../shared/data/ratings/neural_codec_mushra``.

Run: ``python benchmarks/bench_quality_validation.py [--signals N] [--boot N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.suites.tts.validation import (  # noqa: E402
    render_validation_markdown,
    validate_quality_metrics,
)

MUSHRA = ROOT.parent / "shared" / "data" / "ratings" / "neural_codec_mushra"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--signals", type=int, default=None, help="first N signals (default: all)")
    ap.add_argument("--boot", type=int, default=400)
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    res = validate_quality_metrics(MUSHRA, n_boot=args.boot, max_signals=args.signals)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(render_validation_markdown(res))
    by = {m["metric"]: m for m in res["metrics"]}
    best = max(by[k]["condition"]["spearman"] for k in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_p808"))
    print(f"stimuli {res['n_stimuli']}, signals {res['n_signals']}, errors {len(res['errors'])}")
    print(f"best DNSMOS condition rho {best:+.2f} (bound: over 0.4)")
    print(f"OVRL condition CI {by['dnsmos_ovrl']['condition']['ci']} (bound: lower end above 0)")
    bw = by["bandwidth_hz"]
    print(
        f"bandwidth rho condition {bw['condition']['spearman']:+.2f} (over 0.8), "
        f"stimulus {bw['stimulus']['spearman']:+.2f} (over 0.4)"
    )
    print(f"time: {wall:.1f} s wall, {cpu:.1f} CPU-s in this process")


if __name__ == "__main__":
    main()
