"""A real multi-node Ray cluster on this machine for the scale-out tests.

``ray.cluster_utils.Cluster`` starts a head node (no CPUs: it schedules nothing) and worker
nodes, each a raylet of its own with its own processes, all on 127.0.0.1 (Ray would otherwise take the machine's address). Workers inherit
this process's environment: the repository root is put on ``PYTHONPATH`` first, so test
systems (``tests.helpers.ray_systems``) import in the actors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.conftest import REPO

LOOPBACK = "127.0.0.1"


@dataclass
class RayCluster:
    cluster: Any
    workers: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_worker(self, num_cpus: int = 1) -> Any:
        node = self.cluster.add_node(num_cpus=num_cpus, node_ip_address=LOOPBACK)
        self.workers.append(node)
        self.cluster.wait_for_nodes()
        return node

    def kill(self, node_id: str) -> None:
        """Remove the worker node whose Ray node id is ``node_id`` (its raylet and every
        process on it die)."""
        (node,) = [n for n in self.workers if n.node_id == node_id]
        self.workers.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)


@contextmanager
def ray_cluster(nodes: int = 2) -> Iterator[RayCluster]:
    from voxassay.core.ray_executor import _keep_to_loopback

    _keep_to_loopback()  # before Ray starts a node: every server on 127.0.0.1
    from ray.cluster_utils import Cluster

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK, "include_dashboard": False},
    )
    out = RayCluster(cluster)
    try:
        for _ in range(nodes):
            out.add_worker()
        yield out
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
