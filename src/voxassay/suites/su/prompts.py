"""Versioned prompts per SU eval, and the separator that joins clips of merged variants.

Every prompt asks for one final line ``ANSWER: <value>`` (the strict format of
``parse.py``). ``PROMPTS_VERSION`` goes into every run's config, so runs with different
prompt wording never resume into each other or compare silently.
"""

from __future__ import annotations

import numpy as np

from voxassay.core.audio import Audio, resample
from voxassay.suites.su.tasks import EVALS, Vocabulary

__all__ = ["PROMPTS_VERSION", "SEPARATOR", "merge_clips", "render_prompt", "separator_audio"]

PROMPTS_VERSION = "su-prompts-1"

SEPARATOR = {"silence_s": 0.8, "beep_hz": 1000.0, "beep_s": 0.25, "beep_dbfs": -12.0}
"""Merged inputs: clip 1, 0.8 s silence, a 0.25 s 1 kHz beep at -12 dBFS peak (5 ms ramps),
0.8 s silence, clip 2."""

_SEP_TEXT = (
    "The audio contains two clips joined into one recording: the first clip, then 0.8 "
    "seconds of silence, a short 1 kHz beep, 0.8 seconds of silence, then the second clip."
)
_TWO_INPUTS = (
    "You are given two audio clips: the first audio input is clip A, the second is clip B."
)


def separator_audio(sr: int) -> np.ndarray:
    """The separator samples at ``sr`` (see ``SEPARATOR``)."""
    sil = np.zeros(round(SEPARATOR["silence_s"] * sr), np.float32)
    n = round(SEPARATOR["beep_s"] * sr)
    t = np.arange(n) / sr
    beep = np.sin(2 * np.pi * SEPARATOR["beep_hz"] * t) * 10 ** (SEPARATOR["beep_dbfs"] / 20)
    ramp = min(n // 2, round(0.005 * sr))
    if ramp:
        env = np.ones(n)
        env[:ramp] = np.linspace(0, 1, ramp)
        env[-ramp:] = np.linspace(1, 0, ramp)
        beep *= env
    return np.concatenate([sil, beep.astype(np.float32), sil])


def merge_clips(parts: list[Audio], sr: int = 16_000) -> Audio:
    """One input from two or more clips, each pair joined by ``separator_audio``."""
    pieces: list[np.ndarray] = []
    sep = separator_audio(sr)
    for i, part in enumerate(parts):
        if i:
            pieces.append(sep)
        pieces.append(resample(part, sr).samples.astype(np.float32))
    return Audio(np.concatenate(pieces), sr)


def render_prompt(
    task: str, *, vocabulary: Vocabulary | None = None, target_emotion: str | None = None
) -> str:
    """The prompt of eval ``task`` (an ``EVALS`` name)."""
    spec = EVALS[task]
    if spec.family == "emotion":
        if vocabulary is None:
            raise ValueError("the emotion eval needs a vocabulary")
        labels = ", ".join(vocabulary.labels)
        return (
            "Listen to the audio clip and identify the dominant emotion the speaker expresses "
            "through their voice (not the meaning of the words). Choose exactly one label from "
            f"this list: {labels}.\n"
            "End your reply with one line in exactly this format:\nANSWER: <label>"
        )
    if spec.family == "emotion_compare":
        emotion = target_emotion or "the emotion"
        intro = _SEP_TEXT if spec.variant == "merged" else _TWO_INPUTS
        who = (
            "the first clip (A) or the second clip (B)"
            if spec.variant == "merged"
            else "clip A or clip B"
        )
        return (
            f"{intro} Both may express {emotion}. Which one expresses {emotion} more strongly: "
            f"{who}? Judge the voice, not the words.\n"
            "End your reply with one line in exactly this format:\nANSWER: A\nor\nANSWER: B"
        )
    if spec.family == "speaker_match":
        intro = _SEP_TEXT if spec.variant == "merged" else _TWO_INPUTS
        return (
            f"{intro} Are both clips spoken by the same person?\n"
            "End your reply with one line in exactly this format:\n"
            "ANSWER: same\nor\nANSWER: different"
        )
    if spec.family == "synthetic_detection":
        return (
            "Listen to the voice in the audio clip. How human does it sound? Rate it on a "
            "scale from 1 to 5, where 1 means clearly machine-generated (synthetic) and 5 means "
            "clearly a real human recording.\n"
            "End your reply with one line in exactly this format:\nANSWER: <1-5>"
        )
    raise ValueError(f"no prompt for task {task!r}")
