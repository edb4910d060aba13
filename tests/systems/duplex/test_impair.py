"""The impairing UDP relay (``impair.UdpImpairer``) on real loopback sockets: a UDP echo
server behind it, datagrams through it both ways. Asserted: loss drops about its rate and the
same seed drops the same datagrams; a delay fault holds datagrams by its delay (measured at
the receiver); an outage window blackholes everything inside it and nothing outside; the
report counts what it did per direction.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from voxassay.contracts.duplex.scenario import Fault
from voxassay.systems.duplex.impair import ImpairPlan, UdpImpairer

pytestmark = pytest.mark.live


class _Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.transport.sendto(data, addr)


class _Client(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.got: dict[int, float] = {}

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.got[int(data)] = time.monotonic()


async def _through(
    faults: list[Fault], n: int, gap_s: float, seed: int = 7
) -> tuple[dict[int, float], dict[int, float], dict[str, Any]]:
    """Send ``n`` numbered datagrams ``gap_s`` apart through an impairer to an echo server;
    (send times, echo arrival times, the impairer's report)."""
    loop = asyncio.get_running_loop()
    echo_t, _ = await loop.create_datagram_endpoint(_Echo, local_addr=("127.0.0.1", 0))
    target = echo_t.get_extra_info("sockname")[:2]
    relay = UdpImpairer(target, ImpairPlan(faults, seed=seed))
    port = await relay.start()
    client = _Client()
    tr, _ = await loop.create_datagram_endpoint(lambda: client, local_addr=("127.0.0.1", 0))
    sent: dict[int, float] = {}
    for i in range(n):
        sent[i] = time.monotonic()
        tr.sendto(str(i).encode(), ("127.0.0.1", port))
        await asyncio.sleep(gap_s)
    await asyncio.sleep(0.4)
    tr.close()
    relay.close()
    echo_t.close()
    return sent, client.got, relay.report()


def test_loss_is_seeded_and_near_its_rate_in_each_direction() -> None:
    loss = [Fault(kind="loss", loss_rate=0.3, seed=3)]
    _, got, report = asyncio.run(_through(loss, 300, 0.001))
    _, again, _ = asyncio.run(_through(loss, 300, 0.001))
    up, down = report["uplink"], report["downlink"]
    assert up["datagrams"] == 300 and up["lost"] + up["forwarded"] == 300
    assert 0.2 < up["lost"] / 300 < 0.4
    assert down["datagrams"] == up["forwarded"] and 0.2 < down["lost"] / down["datagrams"] < 0.4
    assert len(got) == down["forwarded"]
    assert set(got) == set(again)  # the same seed loses the same datagrams
    _, other, _ = asyncio.run(_through(loss, 300, 0.001, seed=8))
    assert set(other) != set(got)


def test_delay_holds_each_datagram_and_an_outage_blackholes_its_window() -> None:
    faults = [
        Fault(kind="delay", delay_ms=120, direction="uplink"),
        Fault(kind="disconnect", at_ms=300, duration_ms=300),
    ]
    sent, got, report = asyncio.run(_through(faults, 45, 0.02))
    # sent inside the outage (0.3 to 0.6 s) nothing comes back; all does whose two legs (out
    # at t, back at t + 120 ms) both miss it
    t0 = sent[0]
    inside = {i for i, t in sent.items() if 0.32 <= t - t0 <= 0.58}
    outside = {i for i, t in sent.items() if t - t0 < 0.15 or t - t0 > 0.65}
    assert inside and not inside & set(got)
    assert outside <= set(got)
    rtt = sorted(got[i] - sent[i] for i in outside)
    assert 0.115 < rtt[len(rtt) // 2] < 0.3, rtt  # the uplink's 120 ms, measured
    assert report["uplink"]["blackholed"] >= len(inside)
    assert report["uplink"]["delayed"] == report["uplink"]["forwarded"]
    assert report["downlink"]["delayed"] == 0
    assert report["windows_ms"]["1"] == [300.0, 600.0]
