"""How the native thread pools under voxassay's models wait, set once per process.

voxassay runs several models at once (a synthesizer beside the measures, an ASR beside a
VAD, two demo lanes), and a pool that busy-waits for its next job takes a core from the
others. Measured on the quick demo (2 cores): OpenBLAS's idle ``blas_thread_server``
threads used 8 % of all CPU time, GNU OpenMP's spinning (CTranslate2) about 5 %. So, unless
the environment already says otherwise: OpenMP threads sleep when idle
(``OMP_WAIT_POLICY=PASSIVE``) and NumPy's OpenBLAS runs on the calling thread
(``OPENBLAS_NUM_THREADS=1``; the models' own pools are unaffected). Both are read when the
libraries load, so this runs first in the ``voxassay`` command and is inherited by every
process it starts; a Python API user may set the same variables before importing NumPy.
"""

from __future__ import annotations

import os

QUIET_POOLS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "1"}


def quiet_thread_pools() -> dict[str, str]:
    """Set ``QUIET_POOLS`` where the environment has no value; return what is in effect."""
    for key, value in QUIET_POOLS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in QUIET_POOLS}


def quiet_loaded_thread_pools() -> dict[str, str]:
    """``quiet_thread_pools`` in a process that loaded NumPy before it could run (a Ray actor:
    Ray's worker imports NumPy at start, so the environment variable comes too late): the BLAS
    pools already loaded get the same thread count (threadpoolctl), so an actor computes what
    the ``voxassay`` command's own process would, with the same number of BLAS threads."""
    env = quiet_thread_pools()
    try:
        threads = int(env["OPENBLAS_NUM_THREADS"])
    except ValueError:  # a value the user set that is not a count: left to OpenBLAS
        return env
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    return env
