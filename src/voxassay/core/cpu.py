"""CPU time, run-queue delay and CPU pressure over an interval (Linux ``/proc``).

A latency measured with the agent's compute charged to the clock (or on the real clock) is
this machine's speed as much as the agent's: on a loaded machine the agent's threads wait for a
CPU and every figure grows. :class:`CpuMeter` measures, over an interval:

* ``cpu_s``: CPU time of this process's threads (``/proc/self/task/*/schedstat``, field 1);
* ``wait_s``: the time those threads were runnable but waited for a CPU (field 2, the
  scheduler's run-queue delay);
* ``pressure_s``: the machine's (or cgroup's) CPU pressure, time during which some task waited
  for a CPU (``/proc/pressure/cpu``, ``some total``, microseconds);

and ``contended`` is ``wait_s > CONTENDED_WAIT_SHARE * cpu_s``: this process waited for a CPU
for more than a tenth of the time it computed. Threads that exit inside the interval are not
counted (thread pools persist; the sums are over the threads alive at both reads, plus those
that started in between). Where ``/proc`` lacks the files, the figures are None (not measured)
and ``contended`` is None. An agent in another process is only seen through the machine's
pressure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTENDED_WAIT_SHARE = 0.10
"""A session whose threads waited for a CPU more than this share of their CPU time ran
contended: its latencies describe the machine's load as much as the agent."""


def _schedstat() -> dict[str, tuple[int, int]] | None:
    """Per thread of this process: (CPU ns, run-queue wait ns); None where unreadable."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    out: dict[str, tuple[int, int]] = {}
    for task in tasks.iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue  # the thread exited meanwhile
        if len(fields) >= 2:
            out[task.name] = (int(fields[0]), int(fields[1]))
    return out or None


def _pressure_us() -> int | None:
    """The ``some`` total of ``/proc/pressure/cpu`` (microseconds), or None."""
    try:
        text = Path("/proc/pressure/cpu").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("some"):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[len("total=") :])
    return None


@dataclass(frozen=True)
class CpuUse:
    """What :class:`CpuMeter` measured (seconds; None: not measurable here)."""

    wall_s: float
    cpu_s: float | None
    wait_s: float | None
    pressure_s: float | None

    @property
    def contended(self) -> bool | None:
        if self.cpu_s is None or self.wait_s is None:
            return None
        return self.wait_s > CONTENDED_WAIT_SHARE * self.cpu_s

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "wall_s": r(self.wall_s),
            "cpu_s": r(self.cpu_s),
            "runqueue_wait_s": r(self.wait_s),
            "cpu_pressure_s": r(self.pressure_s),
            "contended": self.contended,
            "rule": f"contended: run-queue wait > {CONTENDED_WAIT_SHARE:g} x CPU time",
        }


class CpuMeter:
    """``with CpuMeter() as m: ...`` then ``m.use``: this process's CPU time and run-queue
    delay and the machine's CPU pressure over the block."""

    def __init__(self) -> None:
        self.use: CpuUse | None = None

    def __enter__(self) -> CpuMeter:
        self._t0 = time.perf_counter()
        self._s0 = _schedstat()
        self._p0 = _pressure_us()
        return self

    def __exit__(self, *exc: object) -> None:
        s1, p1 = _schedstat(), _pressure_us()
        cpu = wait = None
        if self._s0 is not None and s1 is not None:
            cpu = sum(c - self._s0.get(t, (0, 0))[0] for t, (c, _) in s1.items()) / 1e9
            wait = sum(w - self._s0.get(t, (0, 0))[1] for t, (_, w) in s1.items()) / 1e9
        pressure = None if self._p0 is None or p1 is None else (p1 - self._p0) / 1e6
        self.use = CpuUse(time.perf_counter() - self._t0, cpu, wait, pressure)
