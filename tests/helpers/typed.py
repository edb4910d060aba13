"""A command as the user types it: ``voxassay ...`` through ``main`` (input errors exit 2,
unreachable systems 1), not click's test runner, which lets those errors escape."""

from __future__ import annotations

import pytest

from voxassay.cli.main import main


def voxassay(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``voxassay *args``: (exit code, stdout + stderr)."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out + got.err
