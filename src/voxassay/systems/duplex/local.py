"""In-process duplex agents by spec: ``echo``, ``energy``, ``python:module:factory`` (the
reference agent's ``reference[:POLICY]`` is built in ``voxassay.reference.backend``). Each ``build_*`` returns an *agent factory* (one fresh agent per
session) carrying an ``info`` dict that the run records."""

from __future__ import annotations

from typing import Any

from voxassay.contracts.duplex.agent_api import AgentFactory
from voxassay.core.errors import InputError, SpecError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec

__all__ = ["build_echo", "build_energy", "build_python_agent"]


def _no_options(spec: SystemSpec) -> None:
    spec.check_options((), f"{spec.backend} agent")


def build_echo(spec: SystemSpec, capability: str) -> AgentFactory:
    """``echo``: the loopback echo agent (harness self-check)."""
    from voxassay.systems.duplex.simple_agents import EchoAgent

    _no_options(spec)
    return AgentFactory(EchoAgent, {"backend": "echo", "version": "1"})


def build_energy(spec: SystemSpec, capability: str) -> AgentFactory:
    """``energy[?endpoint_ms=500&answer_ms=3000&yields=true]``: the energy test agent."""
    from voxassay.systems.duplex.simple_agents import EnergyAgent

    spec.check_options(options_of("energy", "duplex"), "energy agent")
    kw: dict[str, Any] = {}
    for key in ("endpoint_ms", "answer_ms", "threshold_dbfs"):
        if key in spec.options:
            kw[key] = float(spec.options[key])
    if "yields" in spec.options:
        kw["yields"] = spec.options["yields"].lower() in ("1", "true", "yes")
    return AgentFactory(lambda: EnergyAgent(**kw), {"backend": "energy", "version": "1", **kw})


def build_python_agent(spec: SystemSpec, capability: str) -> AgentFactory:
    """``python:module:factory[?k=v]``: ``factory(**options)`` is called once per session and
    must return a ``DuplexAgent`` (see ``voxassay.contracts.duplex.agent_api``)."""
    from voxassay.contracts.duplex.agent_api import DuplexAgent

    module_name, _, attr = (spec.target or "").partition(":")
    if not module_name or not attr:
        raise SpecError(f"python agent needs 'python:module:factory', got {spec.raw!r}")
    from voxassay.core.user_code import import_attr

    make = import_attr(module_name, attr)
    if not callable(make):
        raise InputError(f"{module_name}:{attr} is not callable")
    options = spec.backend_options

    def one() -> Any:
        agent = make(**options)
        if not isinstance(agent, DuplexAgent):
            raise InputError(
                f"{module_name}:{attr}() returned {type(agent).__name__}, which lacks the "
                "DuplexAgent methods (start, push_audio, on_playback, on_tool_result, "
                "on_connection, finish)"
            )
        return agent

    return AgentFactory(one, {"backend": "python", "target": spec.target, "options": options})
