"""``dnsmos-human``: a humanlikeness baseline for synthetic speech detection.

score = DNSMOS P.808 MOS of the clip (``voxassay.measures.quality.dnsmos``, speechmos ONNX
models at 16 kHz), clipped to [1, 5] and used as the 1-5 rating as-is. It measures
perceived *quality* (noise, distortion, naturalness as rated in P.808 listening tests), not
humanness: clean synthetic speech can score high and a noisy real recording low. It is the
offline reference line the suite can draw, not a detector. Answers ``synthetic_detection``
only.
"""

from __future__ import annotations

from typing import Any

from voxassay.core.errors import BackendUnavailable, InputError, SpecError
from voxassay.core.specs import SystemSpec

__all__ = ["DnsmosHumanlikeness", "build"]

TASKS = ("synthetic_detection",)


def build(spec: SystemSpec, capability: str) -> DnsmosHumanlikeness:
    if capability != "understand":
        raise SpecError(
            f"dnsmos-human provides understand (SU synthetic detection), not {capability!r}"
        )
    if spec.target:
        raise SpecError(f"dnsmos-human takes no target, got {spec.raw!r}")
    spec.check_options(())
    return DnsmosHumanlikeness()


class DnsmosHumanlikeness:
    """Synthetic-detection specialist (see the module docstring)."""

    specialist_tasks = TASKS
    score_meaning = (
        "DNSMOS P.808 MOS (1-5) used as the humanlikeness rating; it measures speech "
        "quality, not humanness"
    )

    def __init__(self) -> None:
        self._loaded = False
        self.last_scores: dict[str, float] = {}

    def load(self) -> None:
        from voxassay.measures.quality import dnsmos_unavailable

        reason = dnsmos_unavailable()
        if reason:
            raise BackendUnavailable(f"dnsmos-human unavailable: {reason}")
        self._loaded = True

    def score(self, task: str, audio_parts: list[Any]) -> float:
        """P.808 MOS of the one clip, clipped to [1, 5]."""
        from voxassay.measures.quality import dnsmos

        if task not in TASKS:
            raise InputError(f"dnsmos-human answers synthetic_detection only, not {task!r}")
        if len(audio_parts) != 1:
            raise InputError(f"synthetic detection needs 1 clip, got {len(audio_parts)}")
        values = dnsmos(audio_parts[0])
        return float(min(5.0, max(1.0, values["p808_mos"])))

    def default_threshold(self, task: str) -> float | None:
        return None  # the rating itself is the answer

    def answer(self, task: str, score: float, threshold: float | None) -> str:
        return f"DNSMOS P.808 MOS {score:.3f}\nANSWER: {score:.3f}"

    def understand(self, audio_parts: list[Any], prompt: str) -> str:
        raise InputError(
            "dnsmos-human is a specialist baseline: run it with `voxassay su run --task "
            "synthetic_detection`, not as a free-prompt model"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "dnsmos-human",
            "kind": "specialist",
            "tasks": list(TASKS),
            "score": self.score_meaning,
            "mapping": "rating = clip(P.808 MOS, 1, 5)",
        }
