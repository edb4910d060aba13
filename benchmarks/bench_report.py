"""Report size and rendering time, beside the 3 MB page target (issue 16).

In one run, on a folder of stereo calls made from the duplex truth kit (real recordings
joined into one-minute calls; ``--calls N``, default 14) scored once, then reported three
ways: ``--audio inline`` (embedded within the budget, the rest linked), ``link`` and
``none``. Prints per mode: report.html bytes, clips embedded / linked, bytes beside the
report, and the rendering time; then the ratio of the inline page to the 3 MB target.
With ``--run DIR`` it reports an existing run instead (e.g. the demo's duplex section).

Run: python benchmarks/bench_report.py [--calls 14] [--run RUN_DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
KIT = REPO.parent / "shared" / "duplex_truth_dev" / "wav"
TARGET = 3_000_000


def make_calls(folder: Path, n: int) -> None:
    parts = [sf.read(str(p), dtype="float32", always_2d=True) for p in sorted(KIT.glob("*.wav"))]
    folder.mkdir(parents=True)
    for i in range(n):
        chunks, total, k = [], 0, i
        while total < 60 * 16000:
            data, _ = parts[k % len(parts)]
            chunks.append(data)
            total += len(data)
            k += 1
        sf.write(str(folder / f"call{i:02d}.wav"), np.concatenate(chunks)[: 60 * 16000], 16000)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=14)
    ap.add_argument("--run", type=Path, default=None)
    args = ap.parse_args()
    from voxassay.report import write_report

    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if run is None:
            if not KIT.is_dir():
                print(f"duplex truth kit not found at {KIT}")
                return 2
            from voxassay.suites.duplex.scoring.stereo import calls_from_paths, score_calls

            make_calls(Path(tmp) / "calls", args.calls)
            t0 = time.perf_counter()
            store = score_calls(
                calls_from_paths([Path(tmp) / "calls"], None, None, 0, None), Path(tmp) / "runs"
            )
            print(f"scored {args.calls} one-minute calls in {time.perf_counter() - t0:.1f} s")
            run = store.path
        sizes = {}
        for mode in ("inline", "link", "none"):
            t0 = time.perf_counter()
            write_report(run, audio=mode)
            took = time.perf_counter() - t0
            html = (run / "report.html").read_text(encoding="utf-8")
            inline = len(re.findall(r"<audio[^>]*src='data:", html))
            linked = len(re.findall(r"<audio[^>]*src='report_audio/", html))
            beside = (
                sum(p.stat().st_size for p in (run / "report_audio").glob("*"))
                if (run / "report_audio").is_dir()
                else 0
            )
            sizes[mode] = len(html.encode())
            print(
                f"--audio {mode:6s}: report.html {sizes[mode] / 1e6:6.3f} MB, {inline} embedded, "
                f"{linked} linked ({beside / 1e6:.3f} MB beside it), rendered in {took:.2f} s"
            )
        print(f"inline page / 3 MB target: {sizes['inline'] / TARGET:.2f} (target <= 1.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
