"""``system_progress``: the per-system progress bars every suite run shows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from voxassay.core.progress import system_progress


class FakeProgress:
    def __init__(self) -> None:
        self.tasks: dict[int, dict[str, Any]] = {}

    def add_task(self, description: str, total: int, status: str) -> int:
        self.tasks[len(self.tasks)] = {
            "description": description,
            "total": total,
            "done": 0,
            "status": status,
        }
        return len(self.tasks) - 1

    def advance(self, task: int) -> None:
        self.tasks[task]["done"] += 1

    def update(self, task: int, advance: int = 0, status: str | None = None) -> None:
        self.tasks[task]["done"] += advance
        if status is not None:
            self.tasks[task]["status"] = status


def _rec(system: str, status: str = "ok") -> Any:
    return SimpleNamespace(system=system, status=status)


def test_a_bar_per_system_advanced_per_record() -> None:
    progress = FakeProgress()
    on_start, on_record = system_progress(progress, "asr ")
    on_start("mock:fixed", 2)
    on_start("[odd]", 1)
    on_record(_rec("mock:fixed"))
    on_record(_rec("mock:fixed", "failed"))
    on_record(_rec("unknown"))  # a system without a bar is ignored
    first, second = progress.tasks.values()
    assert first == {"description": "asr mock:fixed", "total": 2, "done": 2, "status": ""}
    assert second["description"] == "asr \\[odd]"  # rich markup escaped


def test_status_counts_each_systems_own_failures() -> None:
    progress = FakeProgress()
    on_start, on_record = system_progress(progress, status="failed")
    on_start("a", 2)
    on_start("b", 2)
    on_record(_rec("a", "error"))
    on_record(_rec("a"))
    assert progress.tasks[0]["status"] == "failed 1"
    on_record(_rec("b"))
    assert progress.tasks[1]["status"] == ""  # a's failure is not b's
    on_record(_rec("b", "timeout"))
    assert progress.tasks[1]["status"] == "failed 1"


def test_no_progress_no_bars() -> None:
    on_start, on_record = system_progress(None, "tts ", status="failed")
    on_start("a", 1)
    on_record(_rec("a", "error"))
