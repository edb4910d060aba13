"""Running an asyncio server on a thread of its own (tests, benchmarks, the self-check).

``ServesInThread`` gives a server class with ``async serve_forever(ready)``, ``url`` and the
attributes ``_loop`` / ``_stopped`` (its loop and the event that ends ``serve_forever``) a
bounded ``start_in_thread()`` and ``stop()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["ServesInThread"]


class ServesInThread:
    _thread_name = "voxassay-server"
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None
    _stopped: asyncio.Event | None
    url: Any
    serve_forever: Callable[..., Coroutine[Any, Any, None]]

    def start_in_thread(self, timeout: float = 10.0) -> str:
        """Serve on a daemon thread; the URL once it listens (its start error is raised)."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self.serve_forever(lambda _url: ready.set()))
            except BaseException as exc:  # reported to the caller below
                errors.append(exc)
                ready.set()

        self._thread = threading.Thread(target=run, name=self._thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"the server did not start within {timeout} s")
        if errors:
            raise errors[0]
        return str(self.url)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, close every connection and end the thread (bounded)."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
