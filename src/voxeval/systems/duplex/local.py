"""In-process duplex agents by spec: ``reference[:POLICY]``, ``echo``, ``energy``,
``python:module:factory``. Each ``build_*`` returns an *agent factory* (one fresh agent per
session) carrying an ``info`` dict that the run records."""

from __future__ import annotations

from typing import Any

from voxeval.core.errors import InputError, SpecError
from voxeval.core.registry import options_of
from voxeval.core.specs import SystemSpec

__all__ = ["build_echo", "build_energy", "build_python_agent", "build_reference"]


class _Factory:
    """A callable making one agent per session, with what to record about it."""

    def __init__(self, make: Any, info: dict[str, Any]) -> None:
        self._make = make
        self.info = info

    def __call__(self) -> Any:
        return self._make()


def _no_options(spec: SystemSpec) -> None:
    spec.check_options((), f"{spec.backend} agent")


def build_reference(spec: SystemSpec, capability: str) -> _Factory:
    """``reference[:POLICY]`` (default careful): the bundled reference voice agent."""
    from voxeval.reference.agent import ReferenceAgent
    from voxeval.reference.policy import Policy

    policy = Policy.parse(spec.target or "careful")
    spec.check_options(options_of("reference", "duplex"), "reference agent")
    options: dict[str, float] = {}
    for key in ("endpoint_ms", "incomplete_endpoint_ms"):
        if key in spec.options:
            options[key] = spec.float_option(key, 0.0)
    probe = ReferenceAgent.describe(policy, **options)
    return _Factory(lambda: ReferenceAgent(policy, **options), probe)


def build_echo(spec: SystemSpec, capability: str) -> _Factory:
    """``echo``: the loopback echo agent (harness self-check)."""
    from voxeval.suites.duplex.live.simple_agents import EchoAgent

    _no_options(spec)
    return _Factory(EchoAgent, {"backend": "echo", "version": "1"})


def build_energy(spec: SystemSpec, capability: str) -> _Factory:
    """``energy[?endpoint_ms=500&answer_ms=3000&yields=true]``: the energy test agent."""
    from voxeval.suites.duplex.live.simple_agents import EnergyAgent

    spec.check_options(options_of("energy", "duplex"), "energy agent")
    kw: dict[str, Any] = {}
    for key in ("endpoint_ms", "answer_ms", "threshold_dbfs"):
        if key in spec.options:
            kw[key] = float(spec.options[key])
    if "yields" in spec.options:
        kw["yields"] = spec.options["yields"].lower() in ("1", "true", "yes")
    return _Factory(lambda: EnergyAgent(**kw), {"backend": "energy", "version": "1", **kw})


def build_python_agent(spec: SystemSpec, capability: str) -> _Factory:
    """``python:module:factory[?k=v]``: ``factory(**options)`` is called once per session and
    must return a ``DuplexAgent`` (see ``voxeval.suites.duplex.live.agent_api``)."""
    from voxeval.suites.duplex.live.agent_api import DuplexAgent

    module_name, _, attr = (spec.target or "").partition(":")
    if not module_name or not attr:
        raise SpecError(f"python agent needs 'python:module:factory', got {spec.raw!r}")
    from voxeval.systems.python_callable import import_attr

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

    return _Factory(one, {"backend": "python", "target": spec.target, "options": options})
