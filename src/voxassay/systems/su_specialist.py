"""The specialist contract of the SU suite: continuous scores beside the answer text.

An audio-language model answers in free text. A specialist baseline (speaker embeddings,
a quality predictor) instead measures one number per item; the SU runner asks for it
through this protocol, so reports can draw ROC-based figures (AUC, EER) from it:

- ``specialist_tasks``: the SU eval names it answers (any other task is refused);
- ``score(task, audio_parts) -> float``: higher means the positive class (``same`` speaker
  for speaker match, ``human`` for synthetic detection);
- ``default_threshold(task)``: the decision threshold used when the manifest has no
  calibration split (None: the task's answer is the score itself, e.g. a 1-5 rating);
- ``answer(task, score, threshold) -> str``: the answer text in the suite's strict format
  (``ANSWER: ...``), so specialist records parse exactly like model records;
- ``score_meaning``: one sentence saying what the number measures (goes into the report).

Specialists are registered under capability ``understand``; their ``understand()`` refuses
(it cannot know the task from a free prompt): run them through ``voxassay su run``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Specialist", "is_specialist"]


@runtime_checkable
class Specialist(Protocol):
    specialist_tasks: tuple[str, ...]
    score_meaning: str

    def load(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...

    def score(self, task: str, audio_parts: list[Any]) -> float: ...

    def default_threshold(self, task: str) -> float | None: ...

    def answer(self, task: str, score: float, threshold: float | None) -> str: ...


def is_specialist(system: Any) -> bool:
    """True for objects implementing :class:`Specialist` (duck-typed)."""
    return all(
        hasattr(system, name)
        for name in ("specialist_tasks", "score", "answer", "default_threshold")
    )
