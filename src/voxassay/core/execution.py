"""Choosing an executor by name: ``--executor thread|process|serial|ray``."""

from __future__ import annotations

from typing import Any

from voxassay.core.executor import Executor, ProcessExecutor, SerialExecutor, ThreadExecutor

EXECUTORS = ("thread", "process", "serial", "ray")


def make_executor(
    kind: str = "thread", workers: int = 1, *, ray_address: str | None = None
) -> Executor[Any, Any]:
    """``thread`` (default), ``process``, ``serial`` or ``ray`` (actors on the cluster at
    ``ray_address``, else on a Ray started for the run: ``core.ray_executor``)."""
    kinds: dict[str, type[Executor[Any, Any]]] = {
        "thread": ThreadExecutor,
        "process": ProcessExecutor,
        "serial": SerialExecutor,
    }
    if kind == "ray":
        from voxassay.core.ray_executor import RayExecutor  # Ray is imported only then

        return RayExecutor(workers, address=ray_address)
    if kind not in kinds:
        raise ValueError(f"unknown executor {kind!r}; choose from {', '.join(EXECUTORS)}")
    return kinds[kind](workers)
