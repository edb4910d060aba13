from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import pytest

from voxassay.core.execution import make_executor


class Worker:
    """Counts how many workers were built; squares its input."""

    def __call__(self, x: int) -> tuple[int, int, int]:
        return (x, x * x, threading.get_ident())


def make_worker(built: list[int] | None = None) -> Worker:
    if built is not None:
        built.append(1)
    return Worker()


def square_with_pid(x: int) -> tuple[int, int]:
    return (x * x, os.getpid())


def make_pid_worker() -> object:
    return square_with_pid


@pytest.mark.parametrize("kind,workers", [("serial", 1), ("thread", 1), ("thread", 3)])
def test_all_tasks_done_once(kind: str, workers: int) -> None:
    built: list[int] = []
    ex = make_executor(kind, workers)
    out = list(ex.map_unordered(functools.partial(make_worker, built), list(range(50))))
    assert sorted(r[0] for r in out) == list(range(50))
    assert all(r[1] == r[0] ** 2 for r in out)
    assert 1 <= len(built) <= workers  # one worker per thread, built lazily
    if workers > 1:
        assert len({r[2] for r in out}) >= 1


def test_process_executor_uses_other_processes() -> None:
    ex = make_executor("process", 2)
    out = list(ex.map_unordered(make_pid_worker, list(range(8))))
    assert sorted(r[0] for r in out) == [x * x for x in range(8)]
    assert os.getpid() not in {r[1] for r in out}


def test_bad_kind() -> None:
    with pytest.raises(ValueError, match="thread, process, serial, ray"):
        make_executor("cluster", 1)


def test_ray_without_ray_is_refused_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import voxassay.core.ray_executor as rx
    from voxassay.core.errors import InputError

    monkeypatch.setattr(rx, "ray_unavailable", lambda: "ray is not installed: " + rx.INSTALL_HINT)
    with pytest.raises(InputError, match=r"voxassay\[ray\]"):
        make_executor("ray", 2)


@pytest.mark.parametrize("address", ["not an address", "ray://host", "host:port", "http://h:1"])
def test_a_bad_ray_address_is_refused_before_ray_is_needed(address: str) -> None:
    from voxassay.core.errors import InputError

    with pytest.raises(InputError, match="--ray-address"):
        make_executor("ray", 1, ray_address=address)


def test_which_ray_addresses_are_remote() -> None:
    from voxassay.core.ray_executor import check_address, is_remote

    assert check_address("auto") == "auto" and check_address(None) is None
    assert not is_remote(None) and not is_remote("127.0.0.1:6379")
    assert not is_remote("ray://localhost:10001")
    assert is_remote("ray://10.0.0.5:10001") and is_remote("auto")


STATE = "as imported"
"""Set to another value by a test in this process; a forked worker would inherit that."""


def report_state_worker() -> object:
    return lambda _task: (STATE, os.getpid())


@pytest.mark.live
def test_process_workers_start_fresh_not_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are spawned: they import this module anew instead of inheriting this
    process's memory, so no lock another thread holds here is copied into them (a forked
    ASR worker of the demo hung in its model load that way, while the demo's other threads
    ran)."""
    monkeypatch.setattr(__import__(__name__, fromlist=["STATE"]), "STATE", "changed here")
    out = list(make_executor("process", 2).map_unordered(report_state_worker, [1, 2, 3]))
    assert [state for state, _ in out] == ["as imported"] * 3
    assert os.getpid() not in {pid for _, pid in out}


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--agent", "ws://127.0.0.1:9/", "--ray-address", "ray://192.0.2.7:10001"], "loopback"),
        (["--agent", "twilio-ws:ws://localhost:9/", "--ray-address", "auto"], "loopback"),
        (["--loop", "pulseaudio", "--clock", "real"], "thread executor"),
    ],
)
def test_duplex_runs_a_distributed_executor_cannot_serve_are_usage_errors(
    extra: list[str], message: str, tmp_path: Path
) -> None:
    """Before any work (no Ray is joined, nothing is rendered or written): an agent on this
    machine's loopback cannot be reached from a remote cluster's nodes; a sound loop is this
    machine's sound server. --ship-audio without a distributed executor has nothing to ship."""
    from click.testing import CliRunner

    from voxassay.cli.main import cli

    base = ["duplex", "run", "--scenarios", "demo", "--only", "interruption-2s", "--out",
            str(tmp_path), "--no-progress"]  # fmt: skip
    res = CliRunner().invoke(cli, [*base, "--executor", "ray", *extra])
    assert res.exit_code == 2 and message in res.output, res.output
    res = CliRunner().invoke(cli, [*base, "--ship-audio"])
    assert res.exit_code == 2 and "distributed executor" in res.output, res.output
    assert not any(tmp_path.iterdir())


@pytest.mark.live  # a driver process and its workers
def test_process_workers_die_with_a_killed_driver(tmp_path: Path) -> None:
    """``kill -9`` of the driver takes its process workers with it (they were orphaned and went
    on computing; issue 32 item 10)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    pids = tmp_path / "pids"
    pids.mkdir()
    driver = (
        "import os, time\n"
        "from voxassay.core.execution import make_executor\n"
        "from tests.helpers.sleepy import make\n"
        "for _ in make_executor('process', 2).map_unordered(make, list(range(40))): pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLEEPY_PIDS": str(pids)}
    proc = subprocess.Popen([sys.executable, "-c", driver], env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2, "the workers never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [w for w in workers if _alive(w)]
        time.sleep(0.05)
    assert not alive, f"workers {alive} outlived their driver"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
