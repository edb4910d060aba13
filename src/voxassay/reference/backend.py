"""The registry's ``reference[:POLICY]`` duplex backend: one fresh reference agent per session."""

from __future__ import annotations

from voxassay.contracts.duplex.agent_api import AgentFactory
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec

__all__ = ["build_reference"]


def build_reference(spec: SystemSpec, capability: str) -> AgentFactory:
    """``reference[:POLICY]`` (default careful): the bundled reference voice agent."""
    from voxassay.reference.agent import ReferenceAgent
    from voxassay.reference.policy import Policy

    policy = Policy.parse(spec.target or "careful")
    spec.check_options(options_of("reference", "duplex"), "reference agent")
    options: dict[str, float] = {}
    for key in ("endpoint_ms", "incomplete_endpoint_ms"):
        if key in spec.options:
            options[key] = spec.float_option(key, 0.0)
    probe = ReferenceAgent.describe(policy, **options)
    return AgentFactory(lambda: ReferenceAgent(policy, **options), probe)
