"""A judge for STS answers (``--judge SPEC``, any ``understand`` system).

It hears two clips, the caller's turn and then the spoken answer. It gets the item's rubric:
the dimension's rater question and the checklist of what a good answer does. It answers on
the raters' 5-point scale with one line ``Score: N``, parsed by the TTS judge's parser
(``suites.tts.judge.parse_score``: strict first, then lenient patterns, never a guess). Its
scores are a source of their own (``judge``), beside people and the proxies. When both
exist, the report gives judge-vs-human agreement per dimension.
"""

from __future__ import annotations

from typing import Any

from voxassay.core.audio import Audio
from voxassay.suites.sts.items import StsItem
from voxassay.suites.tts.judge import Judge, parse_score

__all__ = ["JUDGE_PROMPT_VERSION", "StsJudge", "build_prompt"]

JUDGE_PROMPT_VERSION = "sts-judge-v1"
SCALE = {"min": 1, "max": 5, "labels": {1: "Not at all", 5: "Completely"}}

_PROMPT = """You are a listener in a spoken-dialogue evaluation. The first recording is a \
caller; the second is a voice assistant's spoken answer to them. Rate the answer exactly as \
a human listener would.

Question: {question}
A good answer, for example:
{checklist}

Answer on a scale from 1 (not at all) to 5 (completely). Use a whole number.
Reply with exactly one line in this format:
Score: N
Then, on a second line, give one short sentence with your reason."""


def build_prompt(item: StsItem) -> str:
    lines = "\n".join(f"- {c.text}" for c in item.checklist)
    return _PROMPT.format(question=item.question, checklist=lines)


class StsJudge(Judge):
    """The TTS judge's system handling and result block, asked about a caller and an answer."""

    def rate_answer(self, item: StsItem, user: Audio, answer: Audio) -> dict[str, Any]:
        """The judge block of one answer (never raises): spec, score, status, raw, reason."""
        try:
            raw = self.system.understand([user, answer], build_prompt(item))
        except Exception as exc:  # the judge failing is recorded, the run goes on
            return self._block(None, "error", "", f"{type(exc).__name__}: {exc}"[:500])
        if not isinstance(raw, str):
            return self._block(None, "error", "", f"judge answered {type(raw).__name__}")
        score, reason = parse_score(raw, SCALE)
        return self._block(score, "ok" if score is not None else "unparseable", raw, reason)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "prompt_version": JUDGE_PROMPT_VERSION, "scale": "1-5"}
