"""Start-up cost of a voxassay process with PYTHONDONTWRITEBYTECODE=1 (as in CI and many
containers), with the bytecode the install compiled and without it.

Each figure is the wall time of a new interpreter running
``import voxassay.cli.main, scipy.signal, pydantic, rich``:
- cold: the first run (with ``--drop-caches``, as root, the page cache is dropped first, as
  on a machine that has just booted);
- warm: the median of the next ``--repeats`` runs;
- no bytecode: the same import with ``PYTHONPYCACHEPREFIX`` pointing at an empty folder, so
  nothing compiled at install is found (what every process paid before the ``bytecode``
  stage existed).
Target (issue 30): cold at most 1.4x warm; printed as a ratio beside it.

Run: ``python benchmarks/bench_bytecode.py [--repeats N] [--drop-caches]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = "import voxassay.cli.main, scipy.signal, pydantic, rich"


def once(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", CODE], env=env, check=True, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache first (root)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if args.drop_caches:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    cold = once(env)
    warm = statistics.median(once(env) for _ in range(args.repeats))
    with tempfile.TemporaryDirectory() as empty:
        bare = statistics.median(
            once({**env, "PYTHONPYCACHEPREFIX": empty}) for _ in range(args.repeats)
        )
    print(f"import: {CODE[len('import ') :]}")
    print(f"cold {cold:.2f} s, warm {warm:.2f} s: cold/warm {cold / warm:.2f}x (target <= 1.4x)")
    print(f"without bytecode {bare:.2f} s: {bare / warm:.2f}x warm")


if __name__ == "__main__":
    main()
