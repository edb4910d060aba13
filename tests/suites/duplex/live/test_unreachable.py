"""An agent that is not there never passes: each session it missed is an error record
(``kind: unreachable``), nothing is scored for it, and a system whose every session failed
makes ``duplex run`` exit 1 (issue 32, item 1)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.suites.duplex.live.test_runner import scenario_dir
from voxassay.cli.main import cli


def _records(out: Path) -> list[dict[str, Any]]:
    (path,) = out.glob("*/records.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(tmp: Path, *agents: str) -> tuple[int, str, list[dict[str, Any]]]:
    out = tmp / "runs"
    args = ["duplex", "run", "--scenarios", str(scenario_dir(tmp)), "--only", "cut-in"]
    for a in agents:
        args += ["--agent", a]
    res = CliRunner().invoke(cli, [*args, "--out", str(out)])
    return res.exit_code, res.output, _records(out)


def test_an_in_process_agent_that_never_starts_is_an_error_not_a_pass(tmp_path: Path) -> None:
    code, output, recs = _run(
        tmp_path,
        "python:tests.helpers.unreachable_agent:refused",
        "python:tests.helpers.unreachable_agent:broken",
        "reference:careful",
    )
    by = {r["system"]: r for r in recs}
    refused = by["python:tests.helpers.unreachable_agent:refused"]
    assert refused["status"] == "error" and refused["error"]["kind"] == "unreachable"
    assert "ConnectionRefusedError" in refused["error"]["message"] and not refused["metrics"]
    broken = by["python:tests.helpers.unreachable_agent:broken"]
    assert broken["status"] == "error" and broken["error"]["kind"] == "agent-start"
    assert by["reference:careful"]["status"] == "ok"  # the run went on
    assert code == 1, output  # two systems failed every session
    assert "failed every item" in output


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.xdist_group("realclock")
def test_every_transport_to_a_closed_port_is_unreachable(tmp_path: Path) -> None:
    port = _closed_port()
    agents = (
        f"ws://127.0.0.1:{port}",
        f"webrtc:http://127.0.0.1:{port}/v1/realtime/calls",
        f"twilio-ws:ws://127.0.0.1:{port}/media",
        f"pc=smallwebrtc:http://127.0.0.1:{port}/api/offer",  # named (a TypeError before)
    )
    code, output, recs = _run(tmp_path, *agents)
    assert code == 1, output
    assert sorted(r["system"] for r in recs) == sorted(agents)  # the spec as given, name and all
    for r in recs:
        assert r["status"] == "error" and r["error"]["kind"] == "unreachable", r
        assert "cannot connect" in r["error"]["message"] and not r["metrics"]
    assert "0 of 4 session(s) scored" in output
