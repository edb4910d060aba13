"""The install compiled bytecode (``make setup``'s ``bytecode`` stage), so that a process started
with PYTHONDONTWRITEBYTECODE=1 (CI, many containers) loads every module it imports from a
``.pyc`` instead of compiling it from source.

Asserted, in a fresh interpreter with PYTHONDONTWRITEBYTECODE=1 that imports what a command
and the duplex scorer import: every module loaded from a ``.py`` file under this environment's
site-packages has a ``.pyc`` that is valid for that source (the size and modification time its
header records are the source's). ``src/voxassay`` is compiled too, and again by ``make test``
before each run (only files edited since), so it is not checked here: a developer's edit
between two runs would fail a check that says nothing about the install. How much time that saves is the
machine's: ``benchmarks/bench_bytecode.py`` prints cold and warm import times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.live

IMPORTS = (
    "voxassay.cli.main",
    "voxassay.cli.duplex",
    "voxassay.suites.duplex.scoring.score",
    "scipy.signal",
    "pydantic",
    "rich",
)

PROBE = """
import importlib.util, json, os, sys, sysconfig
for name in sys.argv[1:]:
    __import__(name)
root = sysconfig.get_paths()["purelib"]
checked, stale = 0, []
for mod in list(sys.modules.values()):
    src = getattr(mod, "__file__", None) or ""
    if not src.endswith(".py") or not src.startswith(root):
        continue
    checked += 1
    pyc = importlib.util.cache_from_source(src)
    try:
        with open(pyc, "rb") as fh:
            head = fh.read(16)
    except OSError:
        stale.append(src + " (no .pyc)")
        continue
    st = os.stat(src)
    flags = int.from_bytes(head[4:8], "little")
    if head[:4] != importlib.util.MAGIC_NUMBER:
        stale.append(src + " (another Python's .pyc)")
    elif flags == 0 and (
        int.from_bytes(head[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
        or int.from_bytes(head[12:16], "little") != st.st_size & 0xFFFFFFFF
    ):
        stale.append(src + " (.pyc older than the source)")
print(json.dumps({"checked": checked, "stale": stale}))
"""


def test_every_imported_module_has_valid_bytecode() -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, *IMPORTS],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    found = json.loads(res.stdout.splitlines()[-1])
    assert found["checked"] > 300  # the dependencies of the CLI and the scorer
    assert found["stale"] == [], found["stale"][:20]
