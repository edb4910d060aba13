"""``voxassay reference serve``: serve the reference agent (or any in-process agent) over the
OpenAI Realtime WebSocket protocol.

Nothing heavy (numpy, websockets, the agent's models) is imported until the command runs.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from voxassay.cli.common import EXIT_USAGE, fail_usage


@click.group()
def reference() -> None:
    """The bundled reference voice agent."""


def _is_loopback_host(host: str) -> bool:
    """``host`` binds only this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@reference.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=int, help="Port (0: any free port).")
@click.option(
    "--policy",
    default="careful",
    show_default=True,
    help="Reference agent policy: careful, naive, or careful+SWITCH[,SWITCH...].",
)
@click.option(
    "--agent",
    "agent_spec",
    default=None,
    metavar="SPEC",
    help="Serve another in-process agent instead: energy, echo or python:module:factory.",
)
@click.option(
    "--token-env",
    default=None,
    metavar="VAR",
    help="Require 'Authorization: Bearer <token>' with the token in this environment variable.",
)
@click.option(
    "--protocol",
    type=click.Choice(["ga", "beta", "auto"]),
    default="ga",
    show_default=True,
    help="Server event names; auto: beta for clients sending 'OpenAI-Beta: realtime=v1'.",
)
@click.option(
    "--frame-ms",
    type=click.Choice(["10", "20"]),
    default="20",
    show_default=True,
    help="Input frame size handed to the agent.",
)
@click.option(
    "--transport",
    type=click.Choice(["realtime-ws", "webrtc", "twilio-ws"]),
    default="realtime-ws",
    show_default=True,
    help="realtime-ws: OpenAI Realtime over WebSocket; webrtc: the Realtime WebRTC flow (SDP "
    "offer POSTed to /v1/realtime/calls, events on the oai-events data channel, Opus audio); "
    "twilio-ws: the agent's side of Twilio Media Streams (ws://HOST:PORT/media).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Sessions served at once; further clients are refused (HTTP 503) until one ends.",
)
def serve_cmd(
    host: str,
    port: int,
    policy: str,
    agent_spec: str | None,
    token_env: str | None,
    protocol: str,
    frame_ms: str,
    transport: str,
    max_connections: int,
) -> None:
    """Serve an agent until interrupted (Ctrl-C), over the Realtime WebSocket protocol (the
    default), the Realtime WebRTC flow, or as a phone agent behind Twilio Media Streams.

    Prints the URL as the first stdout line once it listens (ws://HOST:PORT,
    http://HOST:PORT/v1/realtime/calls, ws://HOST:PORT/media). Binds to 127.0.0.1 by
    default; a token is required with --token-env. Each connection gets a fresh agent; see
    voxassay.reference.server, .webrtc_server and .twilio_server.
    """
    from voxassay.core.errors import BackendUnavailable, InputError

    if not token_env and not _is_loopback_host(host):
        click.echo(
            f"warning: listening on {host} without a token: anyone who can reach this address "
            "can use the agent; give --token-env VAR (and set VAR) to require one",
            err=True,
        )
    try:
        factory = _agent_factory(policy, agent_spec)
    except (InputError, BackendUnavailable) as exc:
        _usage_exit(str(exc))
    from voxassay.reference.server import serve_agent

    label = agent_spec or f"reference:{policy}"

    def ready(url: str) -> None:
        click.echo(f"{url} (agent {label}, transport {transport}, protocol {protocol})")
        sys.stdout.flush()

    def ended(session_id: str, end: Any) -> None:  # one line per session, on stderr
        import os

        click.echo(f"session {session_id} ended (pid {os.getpid()})", err=True)

    try:
        if transport != "realtime-ws":
            _serve_other(
                transport,
                factory,
                host,
                port,
                token_env,
                int(frame_ms),
                max_connections,
                ready,
                ended,
            )
            return
        serve_agent(
            factory,
            host=host,
            port=port,
            token_env=token_env,
            protocol=protocol,  # type: ignore[arg-type]
            ready=ready,
            frame_ms=int(frame_ms),
            max_connections=max_connections,
            on_end=ended,
        )
    except ValueError as exc:
        _usage_exit(str(exc))
    except OSError as exc:
        _usage_exit(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def _serve_other(
    transport: str,
    factory: Any,
    host: str,
    port: int,
    token_env: str | None,
    frame_ms: int,
    max_connections: int,
    ready: Any,
    ended: Any,
) -> None:
    import asyncio
    import contextlib

    server: Any
    if transport == "twilio-ws":
        from voxassay.reference.twilio_server import TwilioAgentServer

        server = TwilioAgentServer(
            factory,
            host=host,
            port=port,
            token_env=token_env,
            frame_ms=frame_ms,
            max_connections=max_connections,
            on_end=ended,
        )
    else:
        from voxassay.reference.webrtc_server import WebRTCAgentServer

        server = WebRTCAgentServer(
            factory,
            host=host,
            port=port,
            token_env=token_env,
            frame_ms=frame_ms,
            max_connections=max_connections,
            on_end=ended,
        )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve_forever(ready))


def _usage_exit(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _agent_factory(policy: str, agent_spec: str | None) -> Any:
    if agent_spec is not None:
        from voxassay.core.registry import REGISTRY
        from voxassay.core.specs import parse_spec

        parsed = parse_spec(agent_spec)
        if parsed.backend in ("realtime", "reference"):
            fail_usage(
                f"--agent {agent_spec}: give an in-process agent (energy, echo, "
                "python:module:factory); the reference agent is chosen with --policy"
            )
        return REGISTRY.build("duplex", parsed)
    import importlib

    from voxassay.core.errors import InputError

    try:
        module = importlib.import_module("voxassay.reference.agent")
    except ModuleNotFoundError as exc:
        if exc.name != "voxassay.reference.agent":
            raise InputError(
                f"the reference agent needs the module {exc.name!r}, which is not installed "
                "(pip install 'voxassay[all]')"
            ) from exc
        raise InputError(
            "the reference agent (module voxassay.reference.agent) is not available in this "
            "installation; serve another agent with --agent energy|echo|python:module:factory"
        ) from exc
    from voxassay.reference.policy import Policy

    parsed_policy = Policy.parse(policy)
    agent_cls = module.ReferenceAgent
    return lambda: agent_cls(parsed_policy)
