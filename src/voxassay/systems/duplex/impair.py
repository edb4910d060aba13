"""Network impairment on the real media path: a seeded UDP relay.

This kernel has network namespaces but no ``netem`` qdisc, so voxassay impairs the path
itself: ``UdpImpairer`` listens on 127.0.0.1 (its *front*) and forwards every datagram to a
*target* (the agent's ICE candidate, or the TURN server), one upstream socket per client
address, so replies find their way back. Each datagram's fate comes from the scenario's
``faults`` (``ImpairPlan``) at its session time ``t`` and direction (client -> target is
``uplink``, the user's way; back is ``downlink``):

- a ``disconnect`` window is an outage: everything is dropped (``blackholed``);
- ``loss``: dropped with probability ``loss_rate``;
- ``delay`` + ``jitter``: held for ``delay_ms + U(0, jitter_ms)`` and sent in order
  (``arrival = max(t + d, previous arrival)``: a FIFO link, as the session's own model);
- a fault's window opens at ``at_ms`` (neither ``at_ms`` nor ``after``: at 0) or when the
  session says its trigger fired (``open(i, start_ms)``) and lasts ``duration_ms`` (None: to
  the end).

Each (fault, direction) has its own generator seeded from (session seed, fault seed), so a
run is reproducible whatever the other faults draw. ``stats`` counts, per direction,
datagrams in, forwarded, lost, blackholed and delayed (and the summed and largest delay).
``backlog`` faults stay modelled by the session's player (they are a device buffer, not the
network). Where a kernel has ``netem`` a user can impair with ``tc`` instead; voxassay does
not need it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from voxassay.contracts.duplex.scenario import Fault, FaultKind

__all__ = ["NETWORK_KINDS", "ImpairPlan", "UdpImpairer"]

NETWORK_KINDS = frozenset({FaultKind.DELAY, FaultKind.JITTER, FaultKind.LOSS, FaultKind.DISCONNECT})
"""The fault kinds the relay applies on the real path (the session stops modelling them)."""

_DIRECTIONS = ("uplink", "downlink")


@dataclass
class _DirectionStats:
    datagrams: int = 0
    forwarded: int = 0
    lost: int = 0
    blackholed: int = 0
    delayed: int = 0
    delay_ms_sum: float = 0.0
    delay_ms_max: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        mean = self.delay_ms_sum / self.forwarded if self.forwarded else None
        return {
            "datagrams": self.datagrams,
            "forwarded": self.forwarded,
            "lost": self.lost,
            "blackholed": self.blackholed,
            "delayed": self.delayed,
            "mean_delay_ms": round(mean, 3) if mean is not None else None,
            "max_delay_ms": round(self.delay_ms_max, 3),
        }


@dataclass
class ImpairPlan:
    """The fate of a datagram from the faults (module docstring)."""

    faults: Sequence[Fault]
    seed: int = 0
    windows: dict[int, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rngs = {
            (i, d): random.Random(f"{self.seed}:{f.seed}:{i}:{d}")
            for i, f in enumerate(self.faults)
            for d in _DIRECTIONS
        }
        self.last_arrival = {d: 0.0 for d in _DIRECTIONS}
        for i, f in enumerate(self.faults):
            if f.after is None:  # at ``at_ms``, or from the start when neither is given
                self.open(i, float(f.at_ms or 0))

    def open(self, i: int, start_ms: float) -> None:
        if i in self.windows or not 0 <= i < len(self.faults):
            return
        f = self.faults[i]
        self.windows[i] = (start_ms, start_ms + f.duration_ms if f.duration_ms else float("inf"))

    def _active(self, t_ms: float, direction: str) -> list[tuple[int, Fault]]:
        return [
            (i, self.faults[i])
            for i, (a, b) in self.windows.items()
            if a <= t_ms < b
            and self.faults[i].kind in NETWORK_KINDS
            and self.faults[i].direction in (direction, "both")
        ]

    def fate(self, t_ms: float, direction: str) -> tuple[str, float]:
        """("blackholed" | "lost" | "forward", delay in ms)."""
        active = self._active(t_ms, direction)
        if any(f.kind is FaultKind.DISCONNECT for _, f in active):
            return "blackholed", 0.0
        for i, f in active:
            if f.kind is FaultKind.LOSS and self.rngs[(i, direction)].random() < (f.loss_rate or 0):
                return "lost", 0.0
        d = 0.0
        for i, f in active:
            if f.kind is FaultKind.DELAY:
                d += float(f.delay_ms or 0)
            elif f.kind is FaultKind.JITTER:
                d += self.rngs[(i, direction)].uniform(0.0, float(f.jitter_ms or 0))
        arrival = max(t_ms + d, self.last_arrival[direction])
        self.last_arrival[direction] = arrival
        return "forward", arrival - t_ms


class _Upstream(asyncio.DatagramProtocol):
    def __init__(self, relay: UdpImpairer, client: tuple[str, int]) -> None:
        self.relay, self.client = relay, client
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.relay.pass_on(data, "downlink", self.client, None)


class UdpImpairer(asyncio.DatagramProtocol):
    """A seeded impairing UDP relay in front of ``target`` (module docstring). Create and
    use it on one event loop: ``await start()``, ``close()``."""

    def __init__(
        self,
        target: tuple[str, int],
        plan: ImpairPlan,
        *,
        t0_ns: int | None = None,
        host: str = "127.0.0.1",
        max_clients: int = 16,
    ) -> None:
        self.target = target
        self.plan = plan
        self.t0_ns = t0_ns if t0_ns is not None else time.monotonic_ns()
        self.host = host
        self.max_clients = max_clients
        self.stats = {d: _DirectionStats() for d in _DIRECTIONS}
        self.front: asyncio.DatagramTransport | None = None
        self.port = 0
        self.upstreams: dict[tuple[str, int], _Upstream] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> int:
        self.loop = asyncio.get_running_loop()
        transport, _ = await self.loop.create_datagram_endpoint(
            lambda: self, local_addr=(self.host, 0)
        )
        self.front = transport
        self.port = int(transport.get_extra_info("sockname")[1])
        return self.port

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        up = self.upstreams.get(addr)
        if up is None:
            if len(self.upstreams) >= self.max_clients:
                return
            up = self.upstreams[addr] = _Upstream(self, addr)
            assert self.loop is not None
            self.loop.create_task(self._open_upstream(up))
        self.pass_on(data, "uplink", self.target, up)

    async def _open_upstream(self, up: _Upstream) -> None:
        assert self.loop is not None
        await self.loop.create_datagram_endpoint(lambda: up, local_addr=(self.host, 0))

    def pass_on(
        self, data: bytes, direction: str, dest: tuple[str, int], up: _Upstream | None
    ) -> None:
        stats = self.stats[direction]
        stats.datagrams += 1
        t_ms = (time.monotonic_ns() - self.t0_ns) / 1e6
        fate, delay = self.plan.fate(t_ms, direction)
        if fate == "blackholed":
            stats.blackholed += 1
            return
        if fate == "lost":
            stats.lost += 1
            return
        stats.forwarded += 1
        stats.delay_ms_sum += delay
        stats.delay_ms_max = max(stats.delay_ms_max, delay)
        if delay > 0.05:
            stats.delayed += 1
            assert self.loop is not None
            self.loop.call_later(delay / 1000, self._send, data, direction, dest, up)
        else:
            self._send(data, direction, dest, up)

    def _send(
        self, data: bytes, direction: str, dest: tuple[str, int], up: _Upstream | None
    ) -> None:
        if direction == "uplink":
            if up is not None and up.transport is not None:
                up.transport.sendto(data, dest)
            elif up is not None:  # the upstream socket is still opening: a moment later
                assert self.loop is not None
                self.loop.call_later(0.001, self._send, data, direction, dest, up)
        elif self.front is not None:
            self.front.sendto(data, dest)

    def report(self) -> dict[str, Any]:
        return {
            "relay": f"udp {self.host}:{self.port} -> {self.target[0]}:{self.target[1]}",
            "faults": [
                f.model_dump(mode="json", exclude_none=True)
                for f in self.plan.faults
                if f.kind in NETWORK_KINDS
            ],
            "windows_ms": {
                str(i): [a, b if b != float("inf") else None]
                for i, (a, b) in sorted(self.plan.windows.items())
            },
            "seed": self.plan.seed,
            **{d: s.as_dict() for d, s in self.stats.items()},
        }

    def close(self) -> None:
        for up in self.upstreams.values():
            if up.transport is not None:
                up.transport.close()
        if self.front is not None:
            self.front.close()
