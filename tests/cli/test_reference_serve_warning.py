"""``reference serve`` off loopback without a token says so (issue 32 item 10). The address
is TEST-NET-1 (RFC 5737), which this machine does not have: nothing is bound, the command
fails to listen (exit 2) after the warning."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from voxassay.cli.main import cli
from voxassay.cli.reference import _is_loopback_host


@pytest.mark.live  # it tries to bind (and cannot)
def test_off_loopback_without_a_token_is_warned_about() -> None:
    res = CliRunner().invoke(cli, ["reference", "serve", "--host", "192.0.2.1", "--port", "0"])
    assert "warning: listening on 192.0.2.1 without a token" in res.output
    assert res.exit_code == 2 and "cannot listen on 192.0.2.1" in res.output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.0.2.1", False),
        ("example.org", False),
    ],
)
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert _is_loopback_host(host) is loopback
