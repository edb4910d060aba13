"""The Ray executor: the same ``map_unordered`` seam as the local executors, with Ray actors
as the workers, on a cluster or on a Ray started for the run.

- **Workers** are actors. Each runs ``make_worker()`` once in its own process (a model is
  loaded once per actor) and then takes tasks one at a time. ``resources`` (``num_cpus``,
  ``num_gpus``, from the system's spec) are the actor's Ray resources, so a GPU system lands
  on a GPU node.
- **Backpressure**: at most ``IN_FLIGHT_PER_WORKER`` tasks per ready actor are submitted;
  the rest wait in the driver. Results stream back in completion order and the caller (the
  suite's runner, in the driver) alone writes them.
- **Faults**: when an actor dies (a killed process, a node that left), the task it was
  running is charged an attempt and goes back to the front of the queue with the tasks
  queued behind it (those are not charged); it runs on another actor at most
  ``max_retries`` more times, and after that ``lost(task, reason)`` stands in for its
  result. A dead actor is replaced, and the
  replacement takes tasks once its ``make_worker`` has run (actors that die before that are
  replaced a bounded number of times). A result the
  driver never received is never counted, so nothing is recorded twice.
- **Where**: a :class:`~voxassay.core.records.Record` result (or each record a result
  carries as ``record`` or ``records``) gets ``worker = {"executor": "ray", "node": <node id>, "pid": <pid>, "attempt":
  <1 + retries>}``.

Ray is an optional extra (``pip install 'voxassay[ray]'``); it is imported only here and only
when a Ray executor is used. Secrets are never put into ``runtime_env`` or task arguments:
workers read them from their own environment.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.executor import Executor, WorkerFactory
from voxassay.core.records import Record

_WAIT_S = 1.0
IN_FLIGHT_PER_WORKER = 2
"""Tasks submitted to one actor ahead of its results (one running, one queued)."""
INSTALL_HINT = "pip install 'voxassay[ray]'"
LOCAL_HOST = "127.0.0.1"
_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:]+\]")


def _records_of(result: Any) -> list[Record]:
    """The records a result is or carries (``record``, ``records``)."""
    if isinstance(result, Record):
        return [result]
    one = getattr(result, "record", None)
    if isinstance(one, Record):
        return [one]
    many = getattr(result, "records", None)
    return [r for r in many if isinstance(r, Record)] if isinstance(many, list) else []


def ray_unavailable() -> str | None:
    """Why Ray cannot be used here, or None (Ray is not imported to find out)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return f"ray is not installed: {INSTALL_HINT}"
    return None


def _keep_to_loopback() -> None:
    """Make the Ray of this process use 127.0.0.1 for every node and server it starts or
    joins. Ray's single-machine mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) binds all its
    servers to loopback (in cluster mode they listen on every interface, whatever
    ``_node_ip_address`` says) and stops Ray from rewriting a 127.0.0.1 address into the
    machine's own. Processes Ray starts inherit the setting."""
    os.environ[_SINGLE_MACHINE] = "0"
    import sys

    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # Ray already imported: its constant was read at import
        setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010


def ray_status() -> dict[str, str | None]:
    """Whether Ray is installed (its version) and which cluster ``--ray-address auto`` would
    join: ``RAY_ADDRESS`` from the environment, else the cluster started on this machine by
    ``ray start`` (Ray's ``ray_current_cluster`` file), else none. Without ``--ray-address``
    a run always starts a Ray of its own. Ray itself is not imported."""
    import tempfile
    from importlib import metadata
    from pathlib import Path

    try:
        version: str | None = metadata.version("ray")
    except metadata.PackageNotFoundError:
        version = None
    joined = os.environ.get("RAY_ADDRESS") or None
    if joined is None:
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if current.is_file():
            joined = current.read_text().strip() or None
    return {"version": version, "address": joined}


PROBE_TIMEOUT_S = 5.0
"""How long the cluster's port may take to accept a connection before the run gives up."""


def probe_cluster(address: str) -> None:
    """``Unreachable`` (the CLI's exit 1, before any run folder) unless something accepts a
    TCP connection at the cluster's address within ``PROBE_TIMEOUT_S``: Ray itself would retry
    a dead address for minutes, and ``auto`` without a cluster raises deep inside Ray.
    ``auto`` is resolved as Ray resolves it (``ray_status``)."""
    import socket

    from voxassay.core.errors import Unreachable

    target = address
    if address == "auto":
        found = ray_status()["address"]
        if not found:
            raise Unreachable(
                "--ray-address auto: no Ray cluster found (RAY_ADDRESS is not set and no "
                "`ray start` cluster runs on this machine); start one with `ray start --head` "
                "or leave out --ray-address to run on a Ray started for the run"
            )
        target = found
    rest = target[len("ray://") :] if target.startswith("ray://") else target
    host, _, port = rest.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise Unreachable(
            f"--ray-address {address}: the Ray cluster at {target} cannot be reached "
            f"({type(exc).__name__}: {exc}); is it running, and is the address right?"
        ) from None


def check_address(address: str | None) -> str | None:
    """``None`` (a Ray started for the run, on 127.0.0.1), ``auto`` (the cluster this machine
    belongs to), ``ray://HOST:PORT`` (Ray Client) or ``HOST:PORT`` (a GCS address); anything
    else is an :class:`InputError`."""
    if address is None or address == "":
        return None
    if address == "auto":
        return address
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"--ray-address must be auto, ray://HOST:PORT or HOST:PORT, not {address!r}"
        )
    return address


def is_remote(address: str | None) -> bool:
    """True when ``address`` names a cluster that may run on other machines (not a Ray the
    run starts and not one on this machine's loopback)."""
    if address is None:
        return False
    if address == "auto":
        return True
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host = rest.rpartition(":")[0]
    return host not in ("127.0.0.1", "localhost", "::1", "[::1]")


def fetch(value: Any) -> Any:
    """What :meth:`Executor.share` handed a task: the object behind a Ray ref, else
    ``value`` itself."""
    if type(value).__name__ == "ObjectRef" and type(value).__module__.startswith("ray"):
        import ray

        return ray.get(value)
    return value


def node_id() -> str:
    """The Ray node id of the calling worker ("" outside Ray)."""
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:
        return ""


class _Host:
    """The actor: one worker built by ``make_worker`` in this process."""

    def __init__(self, make_worker: WorkerFactory) -> None:
        from voxassay.core.threads import quiet_loaded_thread_pools

        quiet_loaded_thread_pools()  # the thread pools of the driver's own process
        self._worker = make_worker()
        self._where = {"executor": "ray", "node": node_id(), "pid": os.getpid()}

    def where(self) -> dict[str, Any]:
        return self._where

    def run(self, task: Any) -> tuple[Any, dict[str, Any]]:
        return self._worker(task), self._where


@dataclass
class _Pending:
    task: Any
    attempts: int = 0
    prepared: bool = False


@dataclass
class _Slot:
    handle: Any
    ready: bool = False
    dead: bool = False
    inflight: list[tuple[Any, _Pending]] = field(default_factory=list)
    """Refs and tasks submitted and not yet back, in submission order: the actor runs them
    one at a time in that order, so the first is the one running."""


def _death_errors() -> tuple[type[BaseException], ...]:
    """The exceptions by which Ray says a task's actor or node is gone (not the task's own
    error, which is a bug in the worker and propagates)."""
    import ray.exceptions as rex

    names = (
        "RayActorError",
        "ActorDiedError",
        "ActorUnavailableError",
        "WorkerCrashedError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
    )
    return tuple(getattr(rex, n) for n in names if isinstance(getattr(rex, n, None), type))


class RayExecutor(Executor[Any, Any]):
    """``workers`` Ray actors per ``map_unordered`` call; Ray is joined (or started) on first
    use and left (or stopped) by :meth:`close`."""

    def __init__(
        self,
        workers: int = 1,
        address: str | None = None,
        max_retries: int = 2,
        start_timeout: float = 300.0,
    ) -> None:
        super().__init__(workers)
        self.address = check_address(address)
        reason = ray_unavailable()
        if reason:
            raise InputError(reason)
        if self.address is not None:
            probe_cluster(self.address)
        self.max_retries = max_retries
        self.start_timeout = start_timeout
        """Seconds with tasks waiting, none running and no actor ready before giving up."""
        self._started = False
        self._connected = False
        self.cluster: dict[str, Any] = {}
        """What the driver joined: address, Ray version, nodes seen (after first use)."""

    # -- connection ----------------------------------------------------------------------
    def connect(self) -> None:
        """Join the cluster at ``address`` or start a local Ray for the run on 127.0.0.1."""
        if self._connected:
            return
        if not is_remote(self.address):
            _keep_to_loopback()
        import ray

        if not ray.is_initialized():
            common: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": "ERROR",
            }
            if self.address is None:
                # "local": a new Ray even where RAY_ADDRESS or a `ray start` names a cluster
                ray.init(
                    address="local", num_cpus=self.workers, _node_ip_address=LOCAL_HOST, **common
                )
                self._started = True
            else:
                ray.init(address=self.address, **common)
        alive = [n for n in ray.nodes() if n.get("Alive")]
        self.cluster = {
            "address": self.address or "local",
            "ray": ray.__version__,
            "nodes": len(alive),
            "cpus": ray.cluster_resources().get("CPU", 0.0),
        }
        self._connected = True

    def describe(self) -> dict[str, Any]:
        return {"ray": dict(self.cluster)} if self.cluster else {}

    def share(self, value: Any) -> Any:
        """``value`` in Ray's object store (the driver connects first); tasks carry the ref."""
        self.connect()
        import ray

        return ray.put(value)

    def close(self) -> None:
        """Stop the Ray this executor started (a joined cluster is only left)."""
        try:
            import ray
        except ImportError:
            return
        if ray.is_initialized() and self._started:
            ray.shutdown()
            self._started = False
        self._connected = False

    # -- work ----------------------------------------------------------------------------
    def map_unordered(
        self,
        make_worker: WorkerFactory,
        tasks: Sequence[Any],
        *,
        lost: Callable[[Any, str], Any] | None = None,
        resources: Mapping[str, float] | None = None,
        prepare: Callable[[Any], Any] | None = None,
    ) -> Iterator[Any]:
        if not tasks:
            return
        self.connect()
        import ray

        deaths = _death_errors()
        opts = {"num_cpus": 1.0, "num_gpus": 0.0, **dict(resources or {})}
        host_cls = ray.remote(_Host).options(
            num_cpus=opts["num_cpus"], num_gpus=opts["num_gpus"], max_restarts=0
        )
        queue: deque[_Pending] = deque(_Pending(t) for t in tasks)
        slots: list[_Slot] = []
        owner: dict[Any, tuple[_Slot, _Pending | None]] = {}
        """Outstanding refs: an actor's readiness (``None``) or one of its tasks."""
        failed_starts, start_budget = 0, self.workers * (self.max_retries + 1)
        """A death during a task is charged to the task (at most ``max_retries + 1`` each);
        an actor that dies before it is ready (``make_worker`` failed, or its node left) is
        replaced at most ``start_budget`` times in all."""

        def spawn() -> None:
            slot = _Slot(host_cls.remote(make_worker))
            slots.append(slot)
            owner[slot.handle.where.remote()] = (slot, None)

        for _ in range(min(self.workers, len(tasks))):
            spawn()
        waited = 0.0
        try:
            while queue or any(p is not None for _, p in owner.values()):
                for slot in slots:  # fill every ready actor up to its share
                    while (
                        slot.ready
                        and not slot.dead
                        and queue
                        and len(slot.inflight) < IN_FLIGHT_PER_WORKER
                    ):
                        nxt = queue.popleft()
                        if prepare is not None and not nxt.prepared:  # a retry keeps its own
                            nxt.task, nxt.prepared = prepare(nxt.task), True
                        ref = slot.handle.run.remote(nxt.task)
                        slot.inflight.append((ref, nxt))
                        owner[ref] = (slot, nxt)
                if not owner:  # tasks left and no actor alive or starting
                    while queue:
                        yield self._give_up(queue.popleft(), "no Ray worker left to run it", lost)
                    return
                done, rest = ray.wait(list(owner), num_returns=1, timeout=_WAIT_S)
                if done and rest:  # take every result already back in this one pass
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    done += more
                busy = any(p is not None for _, p in owner.values())
                waited = 0.0 if done or busy else waited + _WAIT_S
                if waited >= self.start_timeout:  # only actors that never start
                    reason = (
                        f"no Ray worker could start within {self.start_timeout:.0f} s "
                        f"(each needs {opts}; the cluster has {ray.available_resources()})"
                    )
                    while queue:
                        yield self._give_up(queue.popleft(), reason, lost)
                    return
                for ref in done:
                    if ref not in owner:  # its actor's death was handled already
                        continue
                    slot, pending = owner.pop(ref)
                    try:
                        value = ray.get(ref)
                    except deaths as exc:
                        why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                        slot.dead = True
                        ray.kill(slot.handle, no_restart=True)
                        if not slot.ready:
                            failed_starts += 1
                        if failed_starts <= start_budget:
                            spawn()  # the replacement
                        # the task that was running is charged an attempt; those queued
                        # behind it on the same actor go back to the queue as they were
                        held = slot.inflight or ([(ref, pending)] if pending else [])
                        slot.inflight = []
                        for k, (other, task) in reversed(list(enumerate(held))):
                            owner.pop(other, None)
                            if k == 0:
                                task.attempts += 1
                                if task.attempts > self.max_retries:
                                    yield self._give_up(task, why, lost)
                                    continue
                            queue.appendleft(task)
                        continue
                    if pending is None:
                        slot.ready = True
                        continue
                    slot.inflight = [(r, p) for r, p in slot.inflight if r != ref]
                    result, where = value
                    for rec in _records_of(result):
                        rec.worker = {**where, "attempt": pending.attempts + 1}
                    yield result
        finally:  # done, failed or cancelled (Ctrl-C): nothing keeps running on the cluster
            for ref in list(owner):
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
            for slot in slots:
                with contextlib.suppress(Exception):
                    ray.kill(slot.handle, no_restart=True)

    def _give_up(
        self, pending: _Pending, reason: str, lost: Callable[[Any, str], Any] | None
    ) -> Any:
        message = reason
        if pending.attempts:
            message = (
                f"its Ray worker died {pending.attempts} time(s) "
                f"(retried up to {self.max_retries}): {reason}"
            )
        if lost is None:
            raise RuntimeError(message)
        return lost(pending.task, message)
