"""The backchannel forms and the candidates the ASR pass transcribes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voxassay.suites.duplex.evidence.backchannel_asr import (
    annotate_tokens,
    candidates,
    is_backchannel_text,
)


@pytest.mark.parametrize(
    "text",
    ["Mm-hmm.", "Oh, yeah.", "Okay, I see.", "uh huh", "Right right.", "YEAH", "Got it."],
)
def test_backchannel_forms(text: str) -> None:
    assert is_backchannel_text(text)


@pytest.mark.parametrize(
    "text",
    ["", "...", "Yes, at five.", "And...", "I see the problem", "yeah yeah yeah yeah yeah", "see"],
)
def test_other_words_are_not(text: str) -> None:
    assert not is_backchannel_text(text)


def _seg(a: float, b: float, kind: str = "speech") -> dict[str, Any]:
    return {"start_s": a, "end_s": b, "kind": kind, "level_dbfs": -30.0}


def test_candidates_are_the_turn_layers_short_sounds() -> None:
    """Merged by each side's gap (user 0.3 s, agent 0.5 s); 1 s or less; no leakage."""
    segs = {
        "user": [
            _seg(1.0, 1.3),
            _seg(1.5, 1.8),
            _seg(3.0, 3.5),
            _seg(3.6, 4.2),
            _seg(6, 6.4, "echo"),
        ],
        "agent": [_seg(1.0, 1.3), _seg(1.7, 1.9), _seg(5.0, 5.2, "crosstalk")],
    }
    got = {(c.side, c.indexes) for c in candidates(segs)}
    # user 1.0-1.8 (gap 0.2) is one 0.8 s sound; 3.0-4.2 (gap 0.1) is 1.2 s: too long;
    # agent 1.0-1.9 (gap 0.4 < 0.5) is one 0.9 s burst
    assert got == {("user", (0, 1)), ("agent", (0, 1))}


class _Heard:
    """A transcriber at the edge of the system under test: says what each clip holds."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.lengths = list(texts), []

    def transcribe(self, audio: np.ndarray) -> Any:
        self.lengths.append(len(audio))
        return type("T", (), {"text": self.texts.pop(0)})()


def test_annotation_marks_segments_and_counts_the_cost() -> None:
    sr = 16_000
    sides = {"user": np.zeros(5 * sr), "agent": np.zeros(5 * sr)}
    segs = {"user": [_seg(1.0, 1.3)], "agent": [_seg(2.0, 2.4), _seg(3.0, 3.3)]}
    heard = _Heard(["Mm-hmm.", "Five o'clock.", ""])
    info = annotate_tokens(sides, sr, segs, heard, keep_text=False)
    assert segs["user"][0]["token"] is True and "asr_text" not in segs["user"][0]
    assert segs["agent"][0]["token"] is False
    assert "token" not in segs["agent"][1]  # nothing heard: the acoustic rules decide
    assert (info["candidates"], info["tokens"], info["text_kept"]) == (3, 1, False)
    # each clip is the sound and 0.1 s either side
    assert heard.lengths == [round(0.5 * sr), round(0.6 * sr), round(0.5 * sr)]
    assert info["audio_s"] == pytest.approx(1.6, abs=0.01)
