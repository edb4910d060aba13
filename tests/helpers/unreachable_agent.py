"""In-process duplex agents that never take part (``python:tests.helpers.unreachable_agent:...``):
one whose backend refuses the connection at its start, one that crashes at its start."""

from __future__ import annotations

from typing import Any


class _Failing:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def start(self, session: Any, now_ns: int) -> list[Any]:
        raise self.exc

    def push_audio(self, pcm: Any, now_ns: int) -> list[Any]:
        return []

    def on_playback(self, report: Any, now_ns: int) -> list[Any]:
        return []

    def on_tool_result(self, *args: Any) -> list[Any]:
        return []

    def on_connection(self, connected: bool, now_ns: int) -> list[Any]:
        return []

    def finish(self, now_ns: int) -> Any:
        from voxassay.contracts.duplex.agent_api import SessionEnd

        return SessionEnd()


def refused() -> _Failing:
    """Its backend is not running: the start raises ConnectionRefusedError."""
    return _Failing(ConnectionRefusedError(111, "Connection refused"))


def broken() -> _Failing:
    """A bug in its start."""
    return _Failing(KeyError("voice"))
