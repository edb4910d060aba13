"""The reference agent, each in its own ``voxassay reference serve`` process, reached the ways
agents ship: the Realtime WebSocket, WebRTC direct and through a real TURN relay (coturn on
loopback), and a phone stream (Twilio Media Streams), on interruption and backchannel
scenarios of the default set, run and scored by ``run_scenarios``.

Asserted: every session is a complete, scored bundle; the agents ran in other processes
(their PIDs, from each server's per-session log line, differ from ours and from each other);
a relay session's route comes from its ICE pair and coturn's log shows the bytes it relayed;
one run over both routes reports each route's latencies apart; killing coturn mid-session
breaks that session (a disconnect in its ledger, scored) and the next session still runs.

Loopback only. Under ``CI=true`` a missing coturn or aiortc fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.duplex import importable, need
from tests.helpers.served import Served
from tests.reference.test_fault_injection import _needs_speech_stack

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.xdist_group("realclock")]

SCENARIOS = ("interruption-2s", "backchannel-okay")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Served]]:
    _needs_speech_stack()
    need("aiortc", importable("aiortc"), "pip install 'voxassay[webrtc]' (make test installs it)")
    started: dict[str, Served] = {}
    try:
        for transport in ("realtime-ws", "webrtc", "twilio-ws"):
            started[transport] = Served(transport)
        yield started
    finally:
        for served in started.values():
            served.stop()


@pytest.fixture(scope="module")
def turn() -> Iterator[Any]:
    from voxassay.systems.duplex.turn_server import TurnServer, coturn_path

    need("coturn", coturn_path() is not None, "apt install coturn (make system-deps-test)")
    with TurnServer() as server:
        saved = {k: os.environ.get(k) for k in server.env}
        os.environ.update(server.env)
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _scenarios() -> list[Any]:
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    chosen = [(sc, p) for sc, p in load_scenario_set("default") if sc.id in SCENARIOS]
    assert len(chosen) == len(SCENARIOS)
    return chosen


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.duplex import render_cache

    return Path(render_cache(tmp_path_factory))


def _run(agents: list[str], out: Path, cache: Path, **kw: Any) -> Any:
    from voxassay.suites.duplex.live.runner import run_scenarios

    return run_scenarios(
        _scenarios(), agents, out, clock="real", self_check=False, cache_dir=cache, **kw
    )


def _manifests(store: Any) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(store.path.glob("bundles/**/manifest.json"))]


def test_every_transport_reaches_the_reference_agent_in_its_own_process(
    servers: dict[str, Served], turn: Any, cache: Path, tmp_path: Path
) -> None:
    ws = servers["realtime-ws"].url
    phone = "twilio-ws:" + servers["twilio-ws"].url
    webrtc = (
        "webrtc:" + servers["webrtc"].url + "?" + turn.spec_options().replace("route=relay&", "")
    )
    # the socket run and the WebRTC run at once: three agent processes, one per transport
    with ThreadPoolExecutor(2) as pool:
        sockets = pool.submit(_run, [ws, phone], tmp_path / "sockets", cache)
        webrtc_run = pool.submit(
            _run, [webrtc], tmp_path / "webrtc", cache, route=["direct", "relay"]
        )
        store, routes = sockets.result(), webrtc_run.result()
    records = [*store.load_records().records, *routes.load_records().records]
    assert len(records) == 2 * len(SCENARIOS) * 2
    assert all(r.status == "ok" for r in records), [r.error for r in records if r.status != "ok"]
    for r in records:  # scored: the ledger gave turn metrics
        assert r.output.get("evidence"), r.id
    # the agents ran elsewhere: each server logged its sessions with its own PID
    pids = {t: set(s.session_pids()) for t, s in servers.items()}
    assert all(len(p) == 1 for p in pids.values()), pids
    assert len(set.union(*pids.values())) == 3 and os.getpid() not in set.union(*pids.values())
    assert len(servers["webrtc"].session_pids()) >= 2 * len(SCENARIOS)
    # WebSocket and phone sessions carry their transport; WebRTC ones their ICE pair's route
    by_transport: dict[str, list[str]] = {}
    for m in [*_manifests(store), *_manifests(routes)]:
        cfg = m["system"]["config"]
        link = cfg.get("realtime") or cfg.get("twilio") or {}
        by_transport.setdefault(str(link.get("transport")), []).append(m["route"])
        if link.get("transport") == "webrtc":
            assert link["ice"]["route"] == m["route"]
            assert link["ice"]["local"]["address"] == "127.0.0.1"
            if m["route"] == "relay":
                assert link["ice"]["local"]["type"] == "relay"
    assert sorted(by_transport["webrtc"]) == ["direct"] * 2 + ["relay"] * 2
    assert len(by_transport["realtime-ws"]) == len(by_transport["twilio-ws"]) == len(SCENARIOS)
    # coturn relayed the relay sessions' media, both sides
    time.sleep(0.5)
    relayed = turn.relayed()
    assert relayed["client"]["rb"] > 50_000 and relayed["peer"]["sb"] > 50_000, relayed
    # one report, each route's own latency percentiles (never pooled)
    report = json.loads((routes.path / "report.json").read_text())
    (system,) = report["systems"]
    groups = {g["name"]: g for g in system["groups"] if g["group"] == "route"}
    assert set(groups) == {"direct", "relay"}
    for g in groups.values():
        assert g["latencies"], g["name"]
    md = (routes.path / "report.md").read_text()
    assert "relay" in md and "direct" in md


def test_killing_the_relay_breaks_the_session_and_the_run_goes_on(
    servers: dict[str, Served], turn: Any, cache: Path, tmp_path: Path
) -> None:
    webrtc = "webrtc:" + servers["webrtc"].url + "?" + turn.spec_options()
    seen = len(turn.log())
    stop = threading.Event()

    def kill_when_relaying() -> None:  # two seconds into the first relayed session
        while not stop.is_set():
            if "ALLOCATE processed, success" in turn.log()[seen:]:
                time.sleep(2.0)
                turn.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_relaying, daemon=True)
    killer.start()
    try:
        store = _run([webrtc], tmp_path / "killed", cache)
    finally:
        stop.set()
    assert not turn.alive()
    records = store.load_records().records  # in the order they ran
    assert len(records) == len(SCENARIOS)
    assert records[0].status == "ok" and records[0].output.get("evidence")  # scored, broken
    # the next session ran: it could not reach the dead relay, says so, and is not scored
    nxt = records[1]
    assert nxt.status == "error" and (nxt.error or {}).get("kind") == "unreachable", nxt.error
    assert "cannot connect" in (nxt.error or {}).get("message", "") and not nxt.metrics
    events = {}
    for p in sorted(store.path.glob("bundles/*/0/events.jsonl")):
        events[p.parts[-3]] = [json.loads(x) for x in p.read_text().splitlines()]
    first = events[records[0].id]
    lost = [e for e in first if e["event_type"] == "session.disconnected"]
    assert lost and lost[0]["producer"] == "transport", [e["event_type"] for e in first][-20:]
    assert "no media" in lost[0]["reason"] or "failed" in lost[0]["reason"]
    ice = [e for e in first if e["event_type"] == "network.ice_selected"]
    assert ice and ice[0]["data"]["route"] == "relay"
    assert lost[0]["monotonic_ns"] > ice[0]["monotonic_ns"] + 1e9
