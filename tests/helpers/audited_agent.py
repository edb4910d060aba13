"""A duplex agent for the Ray tests that reports the files its worker process opened
(``python:tests.helpers.audited_agent:audited_energy?watch=DIR,DIR``). Importing this module
installs an audit hook in the process: only a worker that builds this agent imports it."""

from __future__ import annotations

import os
from typing import Any

_OPENED: list[str] = []
"""Every file this process opened since the module was imported (``audited_energy``)."""


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | bytes):
        _OPENED.append(os.fsdecode(os.path.abspath(args[0])))


def _install_hook() -> None:
    import sys

    sys.addaudithook(_record_opens)


_install_hook()  # at import: a duplex worker imports this when it builds the agent's factory


def audited_energy(watch: str) -> Any:
    """The energy agent, whose session end reports (``info.opened``) how many files under the
    folders ``watch`` (comma-separated) its process had opened since it built the factory,
    which is before its first session's audio was rendered or received."""
    from voxassay.contracts.duplex.agent_api import SessionEnd
    from voxassay.systems.duplex.simple_agents import EnergyAgent

    folders = tuple(w.rstrip("/") + "/" for w in watch.split(",") if w)

    class Audited(EnergyAgent):
        def finish(self, now_ns: int) -> SessionEnd:
            end = super().finish(now_ns)
            end.info["opened"] = sum(p.startswith(folders) for p in _OPENED)
            return end

    return Audited()
