"""Events an agent framework's own observer kept during a call, read after it.

A framework under test (Pipecat: ``examples/pipecat_desk``) can keep what its pipeline saw
(VAD, transcripts, interruptions) and serve it at ``GET URL?session=KEY`` as one JSON object
per line: ``{"type": ..., "monotonic_ns": ..., "producer"?: ..., "data"?: {...}}``, stamped
with ``CLOCK_MONOTONIC`` on the same host as the harness. A link given ``observer=URL`` reads
it after the call for each session key it used (a Twilio ``streamSid``, a WebRTC ``pc_id``)
and hands the events on as ``SessionEnd.events`` at ``monotonic_ns - t0`` on the session
clock, producer ``pipecat`` unless a line names another.

Bounded and checked: at most ``MAX_BYTES`` per read and ``MAX_EVENTS`` events; a line that is
not a JSON object with a known event type (``contracts.duplex.vocabulary``) and an integer
stamp is dropped and counted; a producer name the harness owns (harness, player, agent,
transport) is refused. A read that fails is a problem string, never an exception.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit, urlunsplit

from voxassay.contracts.duplex.agent_api import AgentEvent, Stamped
from voxassay.contracts.duplex.vocabulary import is_known_event_type

__all__ = ["ObserverFeed", "read_observer"]

MAX_BYTES = 8 * 1024 * 1024
MAX_EVENTS = 20_000
DEFAULT_PRODUCER = "pipecat"
RESERVED = frozenset({"harness", "player", "agent", "transport"})
_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,31}$")


@dataclass
class ObserverFeed:
    events: list[Stamped] = field(default_factory=list)
    producers: set[str] = field(default_factory=set)
    dropped: int = 0
    problems: list[str] = field(default_factory=list)


def _url(base: str, key: str) -> str:
    parts = urlsplit(base)
    query = (parts.query + "&" if parts.query else "") + urlencode({"session": key})
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def read_observer(
    url: str, keys: list[str], t0_ns: int, *, token_env: str | None = None, timeout_s: float = 5.0
) -> ObserverFeed:
    """The observer's events of every session key (module docstring)."""
    feed = ObserverFeed()
    headers = {}
    if token_env and os.environ.get(token_env):
        headers["Authorization"] = f"Bearer {os.environ[token_env]}"
    for key in keys:
        request = urllib.request.Request(_url(url, key), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                body = response.read(MAX_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            feed.problems.append(f"observer {key}: {type(exc).__name__}: {exc}")
            continue
        if len(body) > MAX_BYTES:
            feed.problems.append(f"observer {key}: more than {MAX_BYTES} bytes; read cut there")
            body = body[:MAX_BYTES]
        for line in body.decode("utf-8", errors="replace").splitlines():
            if len(feed.events) >= MAX_EVENTS:
                feed.dropped += 1
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                feed.dropped += 1
                continue
            kind = doc.get("type") if isinstance(doc, dict) else None
            stamp = doc.get("monotonic_ns") if isinstance(doc, dict) else None
            producer = doc.get("producer", DEFAULT_PRODUCER) if isinstance(doc, dict) else None
            data = doc.get("data", {}) if isinstance(doc, dict) else None
            if (
                not isinstance(kind, str)
                or not is_known_event_type(kind)
                or not isinstance(stamp, int)
                or isinstance(stamp, bool)
                or not isinstance(producer, str)
                or not _NAME.match(producer)
                or producer in RESERVED
                or not isinstance(data, dict)
            ):
                feed.dropped += 1
                continue
            feed.producers.add(producer)
            event = AgentEvent(kind, dict(data), producer=producer)
            feed.events.append(Stamped(stamp - t0_ns, event))
    return feed
