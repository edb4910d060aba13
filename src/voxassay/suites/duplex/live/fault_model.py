"""The seeded network model of a scenario's faults during a live session."""

from __future__ import annotations

import math
import random

from voxassay.contracts.duplex.scenario import Fault, FaultKind

__all__ = ["FaultModel"]


class FaultModel:
    """Seeded network model of the scenario's faults (``live.session``'s docstring, Faults)."""

    def __init__(self, faults: list[Fault], seed: int, real: frozenset[str] = frozenset()) -> None:
        self.faults = faults
        self.real = real  # kinds the agent's link applies on the real path: not modelled here
        self.rng = random.Random(seed)
        self.windows: dict[int, tuple[float, float]] = {}
        self.last_arrival = {"uplink": 0.0, "downlink": 0.0}
        for i, f in enumerate(faults):
            if f.after is None:  # at ``at_ms``, or from the start when neither is given
                self.open(i, float(f.at_ms or 0))

    def open(self, i: int, t_ms: float) -> None:
        if i in self.windows:
            return
        f = self.faults[i]
        end = t_ms + f.duration_ms if f.duration_ms else math.inf
        self.windows[i] = (t_ms, end)

    def active(self, t_ms: float, kind: FaultKind, direction: str) -> list[Fault]:
        out = []
        for i, (a, b) in self.windows.items():
            f = self.faults[i]
            if (
                f.kind is kind
                and kind not in self.real
                and a <= t_ms < b
                and f.direction in (direction, "both")
            ):
                out.append(f)
        return out

    def connected(self, t_ms: float) -> bool:
        return FaultKind.DISCONNECT in self.real or not any(
            f.kind is FaultKind.DISCONNECT and a <= t_ms < b
            for i, (a, b) in self.windows.items()
            for f in [self.faults[i]]
        )

    def transit_ms(self, t_ms: float, direction: str) -> float | None:
        """One-way delay of something sent at ``t_ms``; None when it is lost."""
        if not self.connected(t_ms):
            return None
        for f in self.active(t_ms, FaultKind.LOSS, direction):
            if self.rng.random() < float(f.loss_rate or 0.0):
                return None
        d = sum(float(f.delay_ms or 0) for f in self.active(t_ms, FaultKind.DELAY, direction))
        for f in self.active(t_ms, FaultKind.JITTER, direction):
            d += self.rng.uniform(0.0, float(f.jitter_ms or 0))
        arrival = max(t_ms + d, self.last_arrival[direction])  # in order
        self.last_arrival[direction] = arrival
        return arrival - t_ms

    def backlog_ms(self, t_ms: float) -> float:
        return sum(float(f.backlog_ms or 0) for f in self.active(t_ms, FaultKind.BACKLOG, "both"))
