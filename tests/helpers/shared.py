"""Results built once per test session and shared by every module and xdist worker.

``make test`` runs modules on two pytest-xdist workers. A result that several modules read
(the reference agent's run over the default scenario set, rendered scenario audio) is built
by whichever worker asks first, under a file lock, into the session's common temporary
folder; the others wait for it and read it. Nothing is shared between test sessions (the
folder is pytest's per-session base temp), so CI always starts clean.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

__all__ = ["session_root", "shared_dir"]


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test session sees (pytest's base temp, or its parent
    under xdist, where each worker has its own base temp below it)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / "shared"
    shared.mkdir(exist_ok=True)
    return shared


def shared_dir(
    tmp_path_factory: pytest.TempPathFactory, key: str, build: Callable[[Path], object]
) -> Path:
    """``session_root/key``, filled by ``build(folder)`` the first time anyone asks.

    A build that raises leaves no completion mark: the next test that asks builds again (and
    fails the same way, with its own traceback)."""
    folder = session_root(tmp_path_factory) / key
    done = folder.parent / f"{key}.done"
    with FileLock(str(folder.parent / f"{key}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            done.write_text(json.dumps({"key": key, "pid": os.getpid()}))
    return folder
