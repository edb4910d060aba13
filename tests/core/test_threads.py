"""Thread pools: a process that loaded NumPy before voxassay ran (a Ray actor) gets the BLAS
thread count of the ``voxassay`` command's own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.live

PROBE = """
import json, os
import numpy  # loaded first, as Ray's worker does, with OpenBLAS's default pool
from threadpoolctl import threadpool_info
before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
from voxassay.core.threads import quiet_loaded_thread_pools
quiet_loaded_thread_pools()
after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after, "env": os.environ["OPENBLAS_NUM_THREADS"]}))
"""


def test_blas_pools_loaded_before_take_the_commands_thread_count() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    res = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["env"] == "1" and got["after"] and set(got["after"]) == {1}
    # on one core there is nothing to change; with more, the default pool was larger
    assert (os.cpu_count() or 1) == 1 or max(got["before"]) > 1
