"""What short sounds say: an ASR pass over the candidate backchannels of a recording.

``duplex score --asr faster-whisper`` transcribes only the *candidates*: per side, speech
segments merged across the turn layer's gaps (user 0.3 s, agent 0.5 s: the sounds and bursts
it reasons about) that last ``MAX_CANDIDATE_S`` (1 s) or less. Each candidate's segments get
``token``: True when every word heard is a backchannel form (``is_backchannel_text``), False
when the ASR heard other words, and no key when it heard nothing (the acoustic rules decide).
The text is kept on the segment (``asr_text``) unless the run redacts transcripts.

Backchannel forms: the continuers and acknowledgement tokens of conversation analysis
(Schegloff 1982 "uh huh", "mm hm"; Jefferson 1984 "yeah"; Heritage 1984 "oh") and the most
frequent forms of the Switchboard Dialog Act Corpus's backchannel tag (``b``: "uh-huh",
"yeah", "right", "oh", "okay", "um-hum", "yes", "huh", "sure", "I see", "really").
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_CANDIDATE_S = 1.0
"""Longest sound that is transcribed (the turn layer's ``backchannel_max_s``)."""
PAD_S = 0.1
"""Audio kept on either side of a candidate (edges carry ~10-30 ms of error)."""
MERGE_GAP_S = {"user": 0.3, "agent": 0.5}
"""The turn layer's sound (user) and burst (agent) merge gaps."""
MAX_TOKEN_WORDS = 4

_SINGLE = frozenset(
    [
        "uh-huh",
        "uhhuh",
        "uh-hum",
        "mm-hmm",
        "mmhmm",
        "mhm",
        "mm-hm",
        "mmhm",
        "um-hum",
        "mm",
        "mmm",
        "hmm",
        "hm",
        "huh",
        "ah",
        "oh",
        "yeah",
        "yea",
        "yes",
        "yep",
        "yup",
        "ya",
        "right",
        "okay",
        "ok",
        "alright",
        "sure",
        "really",
        "wow",
        "true",
        "exactly",
        "cool",
        "nice",
        "great",
        "good",
        "gotcha",
    ]
)
_PAIRS = frozenset(
    {
        ("uh", "huh"),
        ("mm", "hmm"),
        ("mm", "hm"),
        ("um", "hum"),
        ("i", "see"),
        ("got", "it"),
        ("all", "right"),
        ("of", "course"),
    }
)
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")


def is_backchannel_text(text: str) -> bool:
    """True when ``text`` has 1-4 words and each is a backchannel form (a listed pair such as
    "i see" counts as one form): "Mm-hmm.", "Oh, yeah.", "Okay, I see." are; "Yes, at five"
    and "" are not."""
    words = _WORD.findall(text.lower().replace("'", ""))
    if not words or len(words) > MAX_TOKEN_WORDS:
        return False
    i = 0
    while i < len(words):
        if i + 1 < len(words) and (words[i], words[i + 1]) in _PAIRS:
            i += 2
        elif words[i] in _SINGLE:
            i += 1
        else:
            return False
    return True


@dataclass(frozen=True)
class Candidate:
    """A short sound of one side: its segments' indexes in that side's list, and its span."""

    side: str
    indexes: tuple[int, ...]
    start_s: float
    end_s: float


def candidates(segments: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Candidate]:
    """Short speech sounds of both sides (leakage and non-speech left out)."""
    out: list[Candidate] = []
    for side, gap in MERGE_GAP_S.items():
        speech = [
            (i, s)
            for i, s in enumerate(segments.get(side, ()))
            if str(s.get("kind", "speech")) == "speech"
        ]
        groups: list[list[tuple[int, Mapping[str, Any]]]] = []
        for i, s in sorted(speech, key=lambda x: float(x[1]["start_s"])):
            if groups and float(s["start_s"]) - max(float(x["end_s"]) for _, x in groups[-1]) < gap:
                groups[-1].append((i, s))
            else:
                groups.append([(i, s)])
        for g in groups:
            start = min(float(s["start_s"]) for _, s in g)
            end = max(float(s["end_s"]) for _, s in g)
            if end - start <= MAX_CANDIDATE_S:
                out.append(Candidate(side, tuple(i for i, _ in g), start, end))
    return out


def annotate_tokens(
    sides: Mapping[str, np.ndarray],
    sr: int,
    segments: dict[str, list[dict[str, Any]]],
    transcriber: Any,
    *,
    keep_text: bool = True,
) -> dict[str, Any]:
    """Transcribe every candidate of ``segments`` (audio from ``sides`` at ``sr``), write
    ``token`` (and ``asr_text`` when ``keep_text``) into its segments; the cost and the counts
    (``asr`` of the record output)."""
    t0 = time.perf_counter()
    found = candidates(segments)
    audio_s = 0.0
    n_tokens = 0
    for c in found:
        x = sides[c.side]
        a = max(0, round((c.start_s - PAD_S) * sr))
        b = min(len(x), round((c.end_s + PAD_S) * sr))
        audio_s += (b - a) / sr
        text = str(transcriber.transcribe(np.asarray(x[a:b], dtype=np.float32)).text).strip()
        if not text:
            continue
        token = is_backchannel_text(text)
        n_tokens += token
        for i in c.indexes:
            segments[c.side][i]["token"] = token
            if keep_text:
                segments[c.side][i]["asr_text"] = text
    return {
        "candidates": len(found),
        "tokens": n_tokens,
        "audio_s": round(audio_s, 3),
        "compute_s": round(time.perf_counter() - t0, 3),
        "text_kept": keep_text,
    }
