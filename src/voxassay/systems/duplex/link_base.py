"""What every link to an agent in another process shares, whatever its protocol.

A link is a ``DuplexAgent`` whose network runs on a background thread with its own asyncio
loop (``_ensure_loop``, ``_run``, ``_stop_loop``), so the driver's calls never wait for it.
Outputs are stamped on the session clock as they arrive (``_emit``: ``Stamped(receipt_ns,
...)``; the clock is the driver's, set by ``_t0`` at ``start``) and handed over by ``poll`` /
``_drain``. Problems are ``session.error`` events, at most ``ERROR_CAP`` per kind (the rest are
counted in ``stats``). ``raw_log`` keeps what went over the wire as JSON lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from voxassay.contracts.duplex.agent_api import (
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    Stamped,
    ToolCall,
)
from voxassay.contracts.duplex.event import ClockKind, ProducerClock
from voxassay.systems.duplex.realtime_protocol import elide_audio

__all__ = [
    "ERROR_CAP",
    "LinkBase",
    "LinkFactory",
    "bearer_headers",
    "describe_error",
    "is_loopback",
    "open_websocket",
    "redact_url",
]

ERROR_CAP = 20
"""session.error events per kind before further ones are only counted."""
_SECRETISH = ("key", "token", "secret", "password", "auth")


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    query = [
        (k, "<redacted>" if any(s in k.lower() for s in _SECRETISH) else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    netloc = parts.netloc.rsplit("@", 1)[-1]  # never keep user:password@
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def describe_error(exc: BaseException) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return f"the server refused the connection (HTTP {status})"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class LinkBase:
    """Clock, outputs, capped errors, stats, raw log and loop thread of a link."""

    raw_log_limit: int = 500_000
    RAW_LOG_NAME = "realtime.jsonl"
    """The bundle file the raw log is kept in."""

    def __init__(self) -> None:
        self.raw_log: list[dict[str, Any]] = []
        self.stats: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic_ns()
        self._out: list[AgentOutput] = []
        self._errors: Counter[str] = Counter()
        self.observer_info: dict[str, Any] = {}

    observer: str | None = None
    """``observer=URL``: the framework observer's events, read after the call
    (``observer_feed``)."""
    observer_producers: frozenset[str] = frozenset()

    def read_observer(self, keys: list[str], token_env: str | None = None) -> list[Stamped]:
        """The observer's events for ``keys`` (none without ``observer``); what was dropped
        or went wrong is counted in ``stats`` and said in ``info["observer"]``."""
        if not self.observer:
            return []
        from voxassay.systems.duplex.observer_feed import read_observer

        feed = read_observer(self.observer, keys, self._t0, token_env=token_env)
        self.observer_producers = frozenset(feed.producers)
        self._count("observer.events", len(feed.events))
        if feed.dropped:
            self._count("observer.dropped", feed.dropped)
        self.observer_info = {
            "url": redact_url(self.observer),
            "events": len(feed.events),
            "dropped": feed.dropped,
            "problems": feed.problems[:10],
        }
        return feed.events

    def producer_clock(self, producer: str) -> ProducerClock:
        """How this link's stamps map to the session clock: the link stamps what it receives
        with ``time.monotonic_ns() - t0``, ``t0`` set from the driver's ``start`` call (one
        machine clock; the offset is 0 to within the microseconds of that call)."""
        if producer in self.observer_producers:
            return ProducerClock(
                producer=producer,
                kind=ClockKind.MONOTONIC,
                offset_ns=0,
                uncertainty_ns=1_000_000,
                method="stamped by the framework's observer with CLOCK_MONOTONIC on the same "
                "host as the harness, read after the call; the link subtracts its t0",
            )
        return ProducerClock(
            producer=producer,
            kind=ClockKind.MONOTONIC,
            offset_ns=0,
            uncertainty_ns=50_000,
            method=f"{type(self).__name__} stamps receipts on the driver's session clock "
            "(time.monotonic_ns - t0, t0 from the start call)",
        )

    def _begin(self, now_ns: int) -> None:
        """A new session: a fresh raw log, stats and error counts; the clock's origin is
        ``now_ns`` at this call."""
        self.raw_log = []
        self.stats.clear()
        self._errors.clear()
        self._t0 = time.monotonic_ns() - now_ns

    def _now(self) -> int:
        return time.monotonic_ns() - self._t0

    def _emit(self, output: AgentEvent | AudioOut | ClearAudio | ToolCall) -> None:
        with self._lock:
            self._out.append(Stamped(self._now(), output))

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def poll(self, now_ns: int) -> list[AgentOutput]:
        """What arrived since the last call, without sending anything (the driver polls
        between frames so events keep their receipt times)."""
        return self._drain()

    def _drain(self) -> list[AgentOutput]:
        with self._lock:
            out, self._out = self._out, []
        return out

    def _error(self, kind: str, reason: str, **data: Any) -> None:
        """A ``session.error`` (at most ``ERROR_CAP`` per kind; the rest are counted)."""
        with self._lock:
            self._count(f"error.{kind}", 1)
            self._errors[kind] += 1
            n = self._errors[kind]
        if n > ERROR_CAP:
            return
        if n == ERROR_CAP:
            reason += f" (further {kind} errors are only counted in the stats)"
        self._emit(AgentEvent("session.error", {"kind": kind, **data}, reason=reason))

    def _log(self, side: str, event: dict[str, Any] | None, **extra: Any) -> None:
        if len(self.raw_log) >= self.raw_log_limit:
            self._count("raw_log.dropped", 1)
            return
        line: dict[str, Any] = {"t_ns": self._now(), "side": side, "direction": side}
        if event is not None:
            line["event"] = elide_audio(event)
        line.update(extra)
        self.raw_log.append(line)

    # ------------------------------------------------------------------ loop thread
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            return self._loop
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="voxassay-link", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        return loop

    def _run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coro`` on the link's loop and wait at most ``timeout`` seconds."""
        loop = self._ensure_loop()
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return

        async def settle() -> None:  # cancel what is still running (a peer's DTLS reader...)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=1.0) if tasks else None

        if loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(settle(), loop).result(2.0)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2.0)
        if not loop.is_running():
            loop.close()

    # ------------------------------------------------------------------ raw log
    def raw_log_lines(self) -> list[str]:
        """The raw log as JSONL lines."""
        return [json.dumps(line, separators=(",", ":")) for line in self.raw_log]

    def write_raw_log(self, path: str | Path) -> Path:
        """Write the raw log as JSONL (readable by ``import_realtime_log``)."""
        path = Path(path)
        path.write_text("".join(line + "\n" for line in self.raw_log_lines()), encoding="utf-8")
        return path


def bearer_headers(key_env: str | None, content_type: str) -> dict[str, str]:
    """Request headers with ``Authorization: Bearer`` read from ``key_env`` (when named);
    ``PermissionError`` when that variable is not set."""
    import os

    headers = {"Content-Type": content_type}
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise PermissionError(f"environment variable {key_env} is not set")
        headers["Authorization"] = f"Bearer {key}"
    return headers


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (then no proxy from the environment is used)."""
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


async def open_websocket(
    url: str, headers: list[tuple[str, str]] | None, *, timeout_s: float, max_bytes: int
) -> Any:
    """A client WebSocket to ``url`` (no compression; the environment's proxy unless the URL
    is on this machine), bounded by ``timeout_s``."""
    from websockets.asyncio.client import connect

    return await asyncio.wait_for(
        connect(
            url,
            additional_headers=headers,
            open_timeout=timeout_s,
            close_timeout=1.0,
            max_size=max_bytes,
            compression=None,
            proxy=None if is_loopback(url) else True,
        ),
        timeout_s,
    )


class LinkFactory:
    """One link of ``link_class`` per session, built from ``url`` and ``options``, with what
    the run records (``info``, from a probe link that never connects)."""

    def __init__(self, link_class: type[Any], url: str, options: dict[str, Any]) -> None:
        self.link_class, self.url, self.options = link_class, url, options
        self.info = dict(link_class(url, **options).info)

    def __call__(self) -> Any:
        return self.link_class(self.url, **self.options)
