"""One session's agent on a worker thread, for servers other than the Realtime WebSocket one.

``AgentHost`` builds the agent from the factory on its own thread (a model warm-up never
blocks the server's event loop), calls ``start`` and then one queued call at a time:
``frame`` (``push_audio``), ``playback`` (``on_playback``), ``hook`` (an optional method such
as ``on_response_request``) and ``finish``. Outputs go back to the loop with
``post(outputs, client_samples)`` (``loop.call_soon_threadsafe``). The queue is bounded: a
frame that does not fit is dropped and counted (``dropped_frames``), never waited for. A
session whose client left while the agent was being built never starts. ``finish`` runs
once, and ``on_end(session_id, SessionEnd)`` receives the agent's business truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from voxassay.contracts.duplex.agent_api import AgentOutput, SessionEnd, SessionInfo

__all__ = ["AgentHost"]


class AgentHost:
    """See the module docstring."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        session_id: str,
        sample_rate: int,
        frame_ms: int,
        loop: asyncio.AbstractEventLoop,
        post: Callable[[list[AgentOutput], int], None],
        now: Callable[[], int],
        on_error: Callable[[str], None],
        on_end: Callable[[str, SessionEnd], None] | None = None,
        max_queued_frames: int = 250,
    ) -> None:
        self.factory = factory
        self.session_id = session_id
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.loop = loop
        self.post = post
        self.now = now
        self.on_error = on_error
        self.on_end = on_end
        self.jobs: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=max_queued_frames)
        self.alive = True
        self.started = False
        self.dropped_frames = 0
        self.done = asyncio.Event()
        self.thread = threading.Thread(target=self._work, name=f"agent-{session_id}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, job: tuple[Any, ...], *, frame: bool = False) -> bool:
        try:
            self.jobs.put_nowait(job)
            return True
        except queue.Full:
            if frame:
                self.dropped_frames += 1
            else:
                self._to_loop(self.on_error, f"the agent is overloaded; {job[0]} dropped")
            return False

    def stop(self) -> None:
        """End the session: pending calls are dropped, ``finish`` runs next."""
        self.alive = False
        while True:
            try:
                self.jobs.get_nowait()
            except queue.Empty:
                break
        with contextlib.suppress(queue.Full):
            self.jobs.put_nowait(("finish",))

    async def wait(self, timeout: float = 10.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), timeout)

    # ------------------------------------------------------------------ worker thread
    def _to_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server stopped
            self.loop.call_soon_threadsafe(fn, *args)

    def _work(self) -> None:
        try:
            self._serve()
        finally:
            self._to_loop(self.done.set)

    def _serve(self) -> None:
        try:
            agent = self.factory()
        except Exception as exc:
            self._to_loop(self.on_error, f"the agent failed to build: {type(exc).__name__}: {exc}")
            return
        if not self.alive:  # the client left while the agent was being built
            self._finish(agent)
            return
        info = SessionInfo(
            session_id=self.session_id,
            sample_rate=self.sample_rate,
            frame_ms=self.frame_ms,
            scenario=None,
            clock="real",
        )
        try:
            outputs = agent.start(info, self.now())
        except Exception as exc:
            self._to_loop(self.on_error, f"the agent failed to start: {type(exc).__name__}: {exc}")
            return
        self.started = True
        samples = 0
        if outputs:
            self._to_loop(self.post, list(outputs), samples)
        while True:
            job = self.jobs.get()
            kind = job[0]
            if kind == "finish":
                self._finish(agent)
                return
            try:
                outputs = self._call(agent, job)
            except Exception as exc:
                self._to_loop(
                    self.on_error, f"the agent raised in {kind}: {type(exc).__name__}: {exc}"
                )
                continue
            if kind == "frame":
                samples = job[2]
            if outputs:
                self._to_loop(self.post, list(outputs), samples)

    def _call(self, agent: Any, job: tuple[Any, ...]) -> list[AgentOutput] | None:
        kind, now = job[0], self.now()
        if kind == "frame":
            return agent.push_audio(job[1], now)
        if kind == "playback":
            return agent.on_playback(job[1], now)
        if kind == "hook":
            hook = getattr(agent, job[1], None)
            return hook(*job[2], now) if callable(hook) else []
        return []

    def _finish(self, agent: Any) -> None:
        try:
            end = agent.finish(self.now())
        except Exception as exc:
            end = SessionEnd(info={"finish_error": f"{type(exc).__name__}: {exc}"})
        if self.on_end is not None:
            with contextlib.suppress(Exception):
                self.on_end(self.session_id, end)
