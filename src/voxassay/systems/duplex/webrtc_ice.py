"""ICE for voxassay's WebRTC peers: which addresses are offered, which servers are asked, which
route was taken.

- ``host_candidates(hosts)``: while gathering, the host candidates are exactly ``hosts``
  (aioice offers every interface of the machine by default; on a test machine that means
  traffic could leave loopback). A context variable scopes it to the task that gathers, so
  two peers in one process (a test's client and server) can each have their own.
- ``ice_configuration(...)``: no STUN server unless one is named (aiortc's default asks a
  public Google server); a TURN server from the spec, its credentials from environment
  variables; ``route=relay`` sets the relay-only transport policy (no host or reflexive
  candidates are gathered at all).
- ``selected_route(pc)``: the nominated candidate pair, read from the ICE connection; the
  route is ``relay`` when either side's candidate is a relay candidate, else ``direct``.
  This, never the spec, is the session's route.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["host_candidates", "ice_configuration", "selected_route"]

_HOSTS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "voxassay_ice_hosts", default=None
)
_patched = False


def _install() -> None:
    """Route aioice's host address lookup through ``_HOSTS`` (once per process)."""
    global _patched
    if _patched:
        return
    import aioice.ice

    original = aioice.ice.get_host_addresses

    def get_host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        hosts = _HOSTS.get()
        if hosts is None:
            return list(original(use_ipv4=use_ipv4, use_ipv6=use_ipv6))
        return [h for h in hosts if (":" in h and use_ipv6) or (":" not in h and use_ipv4)]

    aioice.ice.get_host_addresses = get_host_addresses
    _patched = True


@contextlib.contextmanager
def host_candidates(hosts: Sequence[str] | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), gather host candidates on ``hosts``
    only (None: every interface, aioice's default)."""
    _install()
    token = _HOSTS.set(tuple(hosts) if hosts is not None else None)
    try:
        yield
    finally:
        _HOSTS.reset(token)


def ice_configuration(
    *,
    route: str = "direct",
    turn: str | None = None,
    turn_user_env: str | None = None,
    turn_pass_env: str | None = None,
    stun: str | None = None,
) -> Any:
    """An ``RTCConfiguration``: the named TURN/STUN servers only; relay-only for
    ``route=relay`` (which needs a TURN server)."""
    from aiortc import RTCConfiguration, RTCIceServer
    from aiortc.rtcconfiguration import RTCIceTransportPolicy

    if route not in ("direct", "relay"):
        raise ValueError(f"route must be direct or relay, not {route!r}")
    servers = []
    if stun:
        servers.append(RTCIceServer(urls=stun))
    if turn:
        user = _secret(turn_user_env, "turn_user_env")
        password = _secret(turn_pass_env, "turn_pass_env")
        servers.append(RTCIceServer(urls=turn, username=user, credential=password))
    if route == "relay" and not turn:
        raise ValueError("route=relay needs a TURN server (turn=turn:HOST:PORT)")
    policy = RTCIceTransportPolicy.RELAY if route == "relay" else RTCIceTransportPolicy.ALL
    return RTCConfiguration(iceServers=servers, iceTransportPolicy=policy)


def _secret(env: str | None, option: str) -> str:
    if not env:
        raise ValueError(f"a TURN server needs {option}=VAR (the variable holding it)")
    value = os.environ.get(env)
    if not value:
        raise PermissionError(f"environment variable {env} ({option}) is not set")
    return value


def selected_route(pc: Any) -> dict[str, Any] | None:
    """The nominated ICE candidate pair of ``pc`` and the route it means (None before ICE
    completed). Reads aioice's connection under aiortc's ICE transport."""
    ice = None
    with contextlib.suppress(AttributeError):
        ice = pc.sctp.transport.transport  # the data channel's DTLS -> ICE transport
    if ice is None:
        with contextlib.suppress(AttributeError, IndexError):
            ice = pc.getTransceivers()[0].receiver.transport.transport
    connection = getattr(ice, "_connection", None)
    nominated = getattr(connection, "_nominated", None) or {}
    pair = nominated.get(1) or next(iter(nominated.values()), None)
    if pair is None:
        return None
    local, remote = pair.local_candidate, pair.remote_candidate

    def side(c: Any) -> dict[str, Any]:
        return {"type": c.type, "address": c.host, "port": c.port, "protocol": c.transport}

    relayed = "relay" in (local.type, remote.type)
    return {"route": "relay" if relayed else "direct", "local": side(local), "remote": side(remote)}
