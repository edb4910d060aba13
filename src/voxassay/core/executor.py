"""Executors spread work over items behind one small seam.

An executor receives a *worker factory* (called once per worker, where it may load a
model) and a list of tasks, and yields results as they finish (unordered). Suites only use
:meth:`Executor.map_unordered`, so a distributed engine (Ray actors as workers,
``core.ray_executor``) replaces the local ones without touching suite code;
``core.execution.make_executor`` picks one by name. Process workers need a picklable factory.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

WorkerFactory = Callable[[], Callable[[Any], Any]]


class Executor(ABC, Generic[T, R]):
    """Runs ``worker(task)`` for every task, one worker instance per parallel slot."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers

    @abstractmethod
    def map_unordered(
        self,
        make_worker: WorkerFactory,
        tasks: Sequence[Any],
        *,
        lost: Callable[[Any, str], Any] | None = None,
        resources: Mapping[str, float] | None = None,
        prepare: Callable[[Any], Any] | None = None,
    ) -> Iterator[Any]:
        """Yield ``worker(task)`` results in completion order.

        ``prepare(task)``, when given, runs in the caller just before the task is handed to
        a worker (the task sent is what it returns): the place to :meth:`share` an item's
        audio, one task at a time, so a large manifest is never held in memory at once.

        ``lost(task, reason)`` stands in for the result of a task whose worker died more
        often than the executor retries (a distributed executor; local ones never lose a
        task). ``resources`` (``num_cpus``, ``num_gpus``) are what one worker needs where an
        executor places workers (Ray); local executors ignore them."""

    def share(self, value: Any) -> Any:
        """``value`` as a task should carry it to a worker: itself for local executors; a
        handle in the cluster's object store for a distributed one (a worker reads it back
        with ``core.ray_executor.fetch``)."""
        return value

    def close(self) -> None:
        """Release what the executor holds between calls (a Ray connection); idempotent."""

    def describe(self) -> dict[str, Any]:
        """Facts for ``run.json``'s ``execution`` beyond kind and workers (the cluster)."""
        return {}

    def __enter__(self) -> Executor[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor[Any, Any]):
    """Everything in the calling thread (debugging, deterministic order)."""

    def map_unordered(
        self,
        make_worker: WorkerFactory,
        tasks: Sequence[Any],
        *,
        prepare: Callable[[Any], Any] | None = None,
        **_: Any,
    ) -> Iterator[Any]:
        if not tasks:
            return
        worker = make_worker()
        for task in _prepared(tasks, prepare):
            yield worker(task)


_local = threading.local()


def _thread_call(make_worker: WorkerFactory, task: Any) -> Any:
    registry: dict[int, Callable[[Any], Any]] = getattr(_local, "workers", None) or {}
    _local.workers = registry
    worker = registry.get(id(make_worker))
    if worker is None:
        worker = make_worker()
        registry[id(make_worker)] = worker
    return worker(task)


class ThreadExecutor(Executor[Any, Any]):
    """Local threads; each thread builds its own worker on first use.

    Good for engines that release the GIL (CTranslate2, ONNX Runtime) and for HTTP clients.
    """

    def map_unordered(
        self,
        make_worker: WorkerFactory,
        tasks: Sequence[Any],
        *,
        prepare: Callable[[Any], Any] | None = None,
        **_: Any,
    ) -> Iterator[Any]:
        if not tasks:
            return
        if self.workers == 1:
            yield from SerialExecutor().map_unordered(make_worker, tasks, prepare=prepare)
            return
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="voxassay") as pool:
            yield from _drain(
                pool,
                lambda t: pool.submit(_thread_call, make_worker, t),
                _prepared(tasks, prepare),
                self.workers,
            )


_process_worker: Callable[[Any], Any] | None = None


def _process_init(make_worker: WorkerFactory, parent: int | None = None) -> None:
    global _process_worker
    if parent is not None:
        _die_with(parent)
    _process_worker = make_worker()


def _die_with(parent: int) -> None:
    """Linux: the kernel kills this worker when the driver that started it dies, however it
    dies (``kill -9`` leaves no chance to clean up; orphaned workers went on computing).
    ``PR_SET_PDEATHSIG`` is per creating thread: the pool is made and used by one thread."""
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the driver died before the signal was armed
        os._exit(1)


def _process_call(task: Any) -> Any:
    assert _process_worker is not None
    return _process_worker(task)


class ProcessExecutor(Executor[Any, Any]):
    """Local processes, started with ``spawn`` (the factory and tasks must pickle): a forked
    child copies every lock its parent's other threads hold at that moment, and one of the
    demo's ASR workers, forked while the demo's lane and progress threads ran, hung for good
    in its model load."""

    def map_unordered(
        self,
        make_worker: WorkerFactory,
        tasks: Sequence[Any],
        *,
        prepare: Callable[[Any], Any] | None = None,
        **_: Any,
    ) -> Iterator[Any]:
        if not tasks:
            return
        import multiprocessing

        with ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_process_init,
            initargs=(make_worker, os.getpid()),
        ) as pool:
            yield from _drain(
                pool,
                lambda t: pool.submit(_process_call, t),
                _prepared(tasks, prepare),
                self.workers,
            )


def _prepared(tasks: Iterable[Any], prepare: Callable[[Any], Any] | None) -> Iterator[Any]:
    """The tasks, each passed through ``prepare`` as it is taken."""
    return iter(tasks) if prepare is None else (prepare(t) for t in tasks)


def _drain(
    pool: Any, submit: Callable[[Any], Future[Any]], tasks: Iterable[Any], workers: int
) -> Iterator[Any]:
    """Keep at most ``2 * workers`` tasks in flight so results stream out as they finish."""
    pending: set[Future[Any]] = set()
    it = iter(tasks)
    limit = 2 * workers
    for task in it:
        pending.add(submit(task))
        if len(pending) >= limit:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for fut in done:
            yield fut.result()


class CallTimedOut(Exception):
    """A call watched by :func:`call_with_timeout` did not return in time (it may still run)."""


def call_with_timeout(
    fn: Callable[[], Any], timeout: float | None, name: str = "voxassay-call"
) -> Any:
    """Run ``fn`` in a daemon thread and return its value (or raise its exception); raise
    :class:`CallTimedOut` if it has not returned after ``timeout`` seconds. The hung thread
    is abandoned, so callers drop the system it was using and build a fresh one."""
    if timeout is None:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True, name=name)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise CallTimedOut()
    if "error" in box:
        raise box["error"]
    return box.get("value")
