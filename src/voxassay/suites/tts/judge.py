"""An audio-language model as a rater: the TTS judge (``--judge SPEC``).

``Judge(spec)`` builds the ``understand`` system named by ``spec`` (e.g.
``openai-compat:http://host/v1?model=...`` or ``python:module:factory``) and asks it, for
one synthesized item, the same question a human rater gets, on the same scale, with the
text the voice was asked to say and its style instruction (prompt version
:data:`JUDGE_PROMPT_VERSION`). The answer format asked for is one line ``Score: N``.

Parsing (never a guess): the strict ``Score: N`` line first; then lenient patterns
(``4/5`` or ``4 out of 5`` with the scale's own maximum, ``I'd give it a 4``, ``rating of
4``, number words such as ``four out of five``); all candidates found by the first rule
that matches must agree. A number outside the scale, a fraction on another scale (``8/10``
on 1-5), disagreeing candidates or no number at all give ``status = "unparseable"`` with the
reason; a failing system (HTTP error, timeout, bad output) gives ``status = "error"``.

What it can and cannot judge: a judge hears the audio, so it can rate what a transcript
cannot carry; RW-Voice-EQ found judges agree with people on targeted evals (critical
content, clear emotions) and not on open perceptual ones (performance, identity). Its
scores are stored beside the automatic metrics for the study tool to measure that
agreement, never used in place of people.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from voxassay.core.audio import Audio

__all__ = ["JUDGE_PROMPT_VERSION", "Judge", "build_prompt", "parse_score"]

JUDGE_PROMPT_VERSION = "tts-judge-v1"
RAW_LIMIT = 500

_PROMPT = """You are a listener in a speech-synthesis evaluation. Listen to the attached \
recording of a synthetic voice and rate it exactly as a human listener would.

{context}Question: {question}

Answer on a scale from {lo} to {hi}{labels}. Use a whole number.
Reply with exactly one line in this format:
Score: N
Then, on a second line, give one short sentence with your reason."""

_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_NUM = r"(\d+(?:\.\d+)?|" + "|".join(_WORDS) + r")"
_STRICT = re.compile(r"^[\s*_#>`-]*score[\s*_]*[:=][\s*_]*(-?\d+(?:\.\d+)?)\b", re.I | re.M)
_FRACTION = re.compile(_NUM + r"\s*(?:/|out\s+of|of)\s*" + _NUM + r"\b", re.I)
_VERB = re.compile(
    r"\b(?:give|giving|gave|rate|rating|rated|score|scored|scoring|grade|mark)\b"
    r"(?:\s+(?:it|this\s+one|that\s+one|this|that|the\s+\w+|a|an|of|as|at|to|is|be|would"
    r"|would\s+be|solid))*"
    r"\s*[:=]?\s*(?<!\bthis\s)(?<!\bthat\s)" + _NUM + r"\b(?!\s*(?:/|out\s+of|%|percent))",
    re.I,
)
_HEDGE = re.compile(
    r"\b(?:or|maybe|perhaps|possibly)\s+(?:a\s+|an\s+|even\s+)?" + _NUM + r"\b", re.I
)
_BARE = re.compile(r"^\s*\**\s*(-?\d+(?:\.\d+)?)\s*\**\s*\.?\s*$")


def _number(token: str) -> float:
    low = token.lower()
    return float(_WORDS[low]) if low in _WORDS else float(token)


def _scale_bounds(scale: Mapping[str, Any]) -> tuple[float, float]:
    lo, hi = scale.get("min"), scale.get("max")
    if isinstance(lo, bool) or isinstance(hi, bool):
        raise ValueError(f"scale bounds must be numbers, got {dict(scale)!r}")
    if not isinstance(lo, int | float) or not isinstance(hi, int | float) or not lo < hi:
        raise ValueError(f"scale needs numeric min < max, got {dict(scale)!r}")
    return float(lo), float(hi)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def build_prompt(
    question: str,
    scale: Mapping[str, Any],
    text: str | None = None,
    instructions: str | None = None,
) -> str:
    """The judge prompt (version :data:`JUDGE_PROMPT_VERSION`) for one item.

    ``scale`` is ``{"min": 1, "max": 5}`` with optional ``labels`` (a dict score -> words,
    shown for the ends of the scale).
    """
    lo, hi = _scale_bounds(scale)
    context = ""
    if text:
        context += f'The voice was asked to say: "{text.strip()}"\n'
    if instructions:
        context += f'The voice was given this style instruction: "{instructions.strip()}"\n'
    if context:
        context += "\n"
    labels = ""
    raw_labels = scale.get("labels")
    if isinstance(raw_labels, Mapping):
        named = {float(k): str(v) for k, v in raw_labels.items() if _is_number(k)}
        ends = [f"{_fmt(k)} = {named[k]}" for k in (lo, hi) if k in named]
        if ends:
            labels = f" ({'; '.join(ends)})"
    return _PROMPT.format(
        context=context, question=question.strip(), lo=_fmt(lo), hi=_fmt(hi), labels=labels
    )


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def parse_score(answer: str, scale: Mapping[str, Any]) -> tuple[float | None, str]:
    """``(score, reason)`` from a judge's free-text answer; ``score`` None means unparseable.

    Rules in order, the first that finds a number decides: strict ``Score: N`` lines;
    fractions over the scale maximum (``4/5``, ``four out of five``); rating verbs
    (``I'd give it a 4``, ``rating: 4``; a hedge such as ``maybe a 5`` joins the candidates);
    a bare number as the whole answer. All numbers a rule finds must agree, and the score
    must lie within [min, max].
    """
    lo, hi = _scale_bounds(scale)
    text = answer or ""

    def decide(values: list[float], rule: str) -> tuple[float | None, str]:
        distinct = sorted(set(values))
        if len(distinct) > 1:
            found = ", ".join(_fmt(v) for v in distinct)
            return None, f"{rule}: ambiguous, several different scores ({found})"
        value = distinct[0]
        if not math.isfinite(value) or not lo <= value <= hi:
            return None, f"{rule}: score {_fmt(value)} is outside the scale {_fmt(lo)}-{_fmt(hi)}"
        return value, rule

    strict = [float(m) for m in _STRICT.findall(text)]
    if strict:
        return decide(strict, "strict 'Score: N'")
    fractions = [(_number(a), _number(b)) for a, b in _FRACTION.findall(text)]
    if fractions:
        other = sorted({d for _, d in fractions if d != hi})
        on_scale = [n for n, d in fractions if d == hi]
        if on_scale:
            return decide(on_scale, "lenient 'N/max'")
        shown = ", ".join(_fmt(d) for d in other)
        return None, f"lenient 'N/M': score given on another scale (out of {shown}), not rescaled"
    verbs = [_number(m) for m in _VERB.findall(text)]
    if verbs:  # a hedge ("a 4, maybe a 5") adds its number, so it reads as ambiguous
        hedges = [_number(m) for m in _HEDGE.findall(text)]
        return decide(verbs + hedges, "lenient 'give it N'")
    bare = _BARE.match(text)
    if bare:
        return decide([float(bare.group(1))], "lenient bare number")
    if not text.strip():
        return None, "empty answer"
    return None, "no score found in the answer"


class Judge:
    """An ``understand`` system asked the human rater's question (see the module docstring)."""

    def __init__(self, spec: str, system: Any = None) -> None:
        """Build (through the registry) and load the system named by ``spec``; ``system``
        may be given directly (then ``spec`` only names it in records)."""
        self.spec = spec
        if system is None:
            from voxassay.core.registry import REGISTRY

            system = REGISTRY.build("understand", spec)
        self.system = system
        loader = getattr(system, "load", None)
        if callable(loader):
            loader()

    def rate(
        self,
        audio: Audio,
        question: str,
        scale: Mapping[str, Any],
        text: str | None = None,
        instructions: str | None = None,
    ) -> dict[str, Any]:
        """Ask the question about ``audio``; the contract's judge block (never raises):
        ``{"spec", "score": float | None, "status": "ok" | "unparseable" | "error",
        "raw": answer (<= 500 chars), "reason"}``."""
        try:
            prompt = build_prompt(question, scale, text, instructions)
        except (ValueError, TypeError, AttributeError) as exc:
            return self._block(None, "error", "", f"bad question or scale: {exc}")
        try:
            answer = self.system.understand([audio], prompt)
        except Exception as exc:
            kind = getattr(exc, "kind", None) or type(exc).__name__
            return self._block(None, "error", "", f"{kind}: {type(exc).__name__}: {exc}"[:500])
        if not isinstance(answer, str):
            return self._block(
                None, "error", "", f"judge answered {type(answer).__name__}, not text"
            )
        score, reason = parse_score(answer, scale)
        status = "ok" if score is not None else "unparseable"
        return self._block(score, status, answer, reason)

    def _block(self, score: float | None, status: str, raw: str, reason: str) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "score": score,
            "status": status,
            "raw": raw[:RAW_LIMIT],
            "reason": reason,
        }

    def describe(self) -> dict[str, Any]:
        """The judge spec, prompt version and the system's own ``describe()``."""
        describe = getattr(self.system, "describe", None)
        return {
            "spec": self.spec,
            "prompt_version": JUDGE_PROMPT_VERSION,
            "answer_format": "Score: N",
            "system": describe() if callable(describe) else None,
        }
