"""A local TURN relay (coturn) for relay-route sessions on one machine.

``TurnServer()`` starts Debian's ``turnserver`` on 127.0.0.1 (a free port, relay ports from
a free range, long-term credentials, ``--allow-loopback-peers`` so that peers on loopback can
be relayed, no TLS/DTLS listeners, no CLI, no config file) and stops it on ``close``. The
credentials are random, kept in memory and handed to links through environment variables
(``env``: ``VOXASSAY_TURN_USER`` / ``VOXASSAY_TURN_PASS`` unless named otherwise): they are
never written to disk. ``relayed()`` reads coturn's log for what it relayed (per allocation:
packets and bytes received and sent, from its ``usage:`` and ``peer usage:`` lines).

``coturn_path()`` finds the binary (None: not installed; ``make system-deps-test`` installs
it as root).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from voxassay.core.processes import stop_process

__all__ = ["TurnServer", "coturn_path"]

_USAGE = re.compile(
    r"(peer )?usage: realm=<[^>]*>, username=<[^>]*>, rp=(\d+), rb=(\d+), sp=(\d+), sb=(\d+)"
)


def coturn_path() -> str | None:
    return shutil.which("turnserver")


def _free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TurnServer:
    """coturn on loopback (module docstring)."""

    def __init__(
        self,
        *,
        user_env: str = "VOXASSAY_TURN_USER",
        pass_env: str = "VOXASSAY_TURN_PASS",
        realm: str = "voxassay.local",
        start_timeout_s: float = 10.0,
    ) -> None:
        binary = coturn_path()
        if binary is None:
            raise FileNotFoundError("coturn's turnserver is not installed (apt install coturn)")
        self.user_env, self.pass_env = user_env, pass_env
        self.user = "voxassay"
        self.password = secrets.token_urlsafe(16)
        self.port = _free_port()
        low = 20_000 + (os.getpid() * 97 + self.port) % 30_000
        self.relay_ports = (low, low + 200)
        self._dir = tempfile.TemporaryDirectory(prefix="voxassay-turn-")
        self.log_path = Path(self._dir.name) / "turn.log"
        args = [
            binary,
            "-n",  # no configuration file
            "--no-cli",
            "--listening-ip=127.0.0.1",
            "--relay-ip=127.0.0.1",
            f"--listening-port={self.port}",
            f"--min-port={self.relay_ports[0]}",
            f"--max-port={self.relay_ports[1]}",
            "--lt-cred-mech",
            f"--user={self.user}:{self.password}",
            f"--realm={realm}",
            "--allow-loopback-peers",
            "--no-tls",
            "--no-dtls",
            "--no-stdout-log",
            "--simple-log",
            f"--log-file={self.log_path}",
            "--verbose",
            "--fingerprint",
        ]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._wait_ready(start_timeout_s)

    @property
    def url(self) -> str:
        return f"turn:127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The variables a link reads the credentials from (``turn_user_env`` / ``_pass_env``)."""
        return {self.user_env: self.user, self.pass_env: self.password}

    def spec_options(self) -> str:
        """The spec query that routes a WebRTC link through this relay."""
        return (
            f"route=relay&turn={self.url}&turn_user_env={self.user_env}"
            f"&turn_pass_env={self.pass_env}"
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read() if self.proc.stderr else b"").decode(
                    errors="replace"
                )
                raise RuntimeError(f"turnserver exited ({self.proc.returncode}): {err[-400:]}")
            if self.log_path.exists() and "Total General servers" in self.log_path.read_text(
                errors="replace"
            ):
                time.sleep(0.1)
                return
            time.sleep(0.05)
        self.close()
        raise TimeoutError(f"turnserver did not start within {timeout} s")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def relayed(self) -> dict[str, Any]:
        """What coturn reports it relayed, from the ``usage:`` / ``peer usage:`` lines it logs
        per allocation (every 1024 packets and when the allocation ends; each line counts the
        packets since the previous one, so they add up): ``client`` (packets and bytes received
        from and sent to the allocating client: ``rp``, ``rb``, ``sp``, ``sb``) and ``peer``
        (the same on the relayed side, towards the agent). Allocations still open have not
        logged their last interval yet."""
        totals: dict[str, list[int]] = {"client": [0, 0, 0, 0], "peer": [0, 0, 0, 0]}
        sessions: set[str] = set()
        for line in self.log().splitlines():
            m = _USAGE.search(line)
            if m is None:
                continue
            sessions.add(line.split("session ", 1)[-1].split(":", 1)[0])
            row = totals["peer" if m.group(1) else "client"]
            for i, v in enumerate(m.groups()[1:]):
                row[i] += int(v)
        out: dict[str, Any] = {
            side: dict(zip(("rp", "rb", "sp", "sb"), row, strict=True))
            for side, row in totals.items()
        }
        out["allocations"] = len(sessions)
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill the relay at once (SIGKILL): sessions through it lose their path."""
        if self.alive():
            self.proc.kill()
            self.proc.wait(5)

    def close(self) -> None:
        stop_process(self.proc)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def cleanup(self) -> None:
        self.close()
        self._dir.cleanup()

    def __enter__(self) -> TurnServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
