"""The scenario's tool world during a live session: tool calls answered, the audit kept."""

from __future__ import annotations

from typing import Any

from voxassay.contracts.duplex.agent_api import ToolCall
from voxassay.contracts.duplex.scenario import Scenario

__all__ = ["ToolWorld"]


class ToolWorld:
    """Answers ``ToolCall`` outputs from the scenario's tools and keeps the audit.

    The result is the first ``results`` entry whose ``match`` is a subset of the arguments
    (an entry without ``match`` matches anything); ``error`` fails the call; an unknown tool
    fails with ``unknown tool``. A write (``side_effect``) with an idempotency key seen before
    returns the first call's result and commits nothing new.
    """

    def __init__(self, scenario: Scenario, session_id: str) -> None:
        self.tools = {t.name: t for t in scenario.tools}
        self.session_id = session_id
        self.calls: list[dict[str, Any]] = []
        self._by_key: dict[str, dict[str, Any]] = {}

    def latency_ms(self, call: ToolCall) -> float:
        tool = self.tools.get(call.name)
        return float(tool.latency_ms) if tool else 0.0

    def answer(
        self, call: ToolCall, requested_ns: int, completed_ns: int
    ) -> tuple[Any, str | None]:
        tool = self.tools.get(call.name)
        entry: dict[str, Any] = {
            "call_id": call.call_id,
            "tool": call.name,
            "arguments": dict(call.arguments),
            "idempotency_key": call.idempotency_key,
            "task_id": call.task_id,
            "task_version": call.task_version,
            "response_id": call.response_id,
            "requested_ns": requested_ns,
            "completed_ns": completed_ns,
            "side_effect": bool(tool and tool.side_effect),
        }
        result: Any = None
        error: str | None = None
        if tool is None:
            error = f"unknown tool {call.name!r}"
        else:
            prior = self._by_key.get(call.idempotency_key or "") if tool.side_effect else None
            if prior is not None:
                result, error = prior.get("result"), prior.get("error")
                entry["replayed"] = True
            else:
                for r in tool.results:
                    if all(call.arguments.get(k) == v for k, v in r.match.items()):
                        result, error = r.result, r.error
                        break
        entry.update(
            status="failed" if error else "ok",
            committed=bool(tool and tool.side_effect and not error and not entry.get("replayed")),
            result=result,
        )
        if error:
            entry["error"] = error
        if tool and tool.side_effect and call.idempotency_key and not entry.get("replayed"):
            self._by_key[call.idempotency_key] = entry
        self.calls.append(entry)
        return result, error

    def audit(self) -> dict[str, Any]:
        calls = []
        for c in self.calls:
            c = {k: v for k, v in c.items() if k not in ("replayed", "error")}
            calls.append({k: v for k, v in c.items() if v is not None})
        return {"schema_version": 1, "session_id": self.session_id, "calls": calls}
