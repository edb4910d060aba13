from __future__ import annotations

import pytest

from voxassay.suites.su.parse import Parsed, Unparseable, parse_answer
from voxassay.suites.su.tasks import CREMA_D_6, EMOTION_48, expand_tasks


def test_vocabularies() -> None:
    assert len(EMOTION_48.labels) == 48 == len(set(EMOTION_48.labels))
    assert EMOTION_48.lookup("Surprise (negative)") == "surprise (negative)"
    assert EMOTION_48.lookup("negative surprise") == "surprise (negative)"
    assert EMOTION_48.lookup("surprise") is None  # ambiguous: never guessed
    assert EMOTION_48.lookup("Empathic-Pain.") == "empathic pain"
    assert CREMA_D_6.lookup("ANGRY") == "anger"
    assert CREMA_D_6.lookup("furious") is None  # not a declared synonym


@pytest.mark.parametrize(
    ("task", "text", "value", "mode"),
    [
        ("emotion", "It sounds tense.\nANSWER: Anger", "anger", "strict"),
        ("emotion", "answer: **sad**", "sadness", "strict"),
        ("emotion", "The speaker seems quite happy overall.", "happiness", "lenient"),
        ("speaker_match_segmented", "ANSWER: different", "different", "strict"),
        ("speaker_match_merged", "Answer - Yes.", "same", "strict"),
        ("speaker_match_segmented", "They are not the same speaker.", "different", "lenient"),
        ("speaker_match_segmented", "Both are spoken by the same person.", "same", "lenient"),
        ("emotion_compare_segmented", "ANSWER: B", "B", "strict"),
        ("emotion_compare_merged", "The second clip is angrier.", "B", "lenient"),
        ("synthetic_detection", "ANSWER: 4", 4.0, "strict"),
        ("synthetic_detection", "I would give it 2 out of 5.", 2.0, "lenient"),
        ("synthetic_detection", "ANSWER: 3.5/5", 3.5, "strict"),
    ],
)
def test_parse_ok(task: str, text: str, value: object, mode: str) -> None:
    got = parse_answer(task, text, CREMA_D_6)
    assert got == Parsed(value, mode)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("task", "text", "reason"),
    [
        ("emotion", "", "empty"),
        ("emotion", "It could be anger or fear.", "several labels"),
        ("emotion", "ANSWER: furious", "not valid"),
        ("speaker_match_segmented", "Hard to say.", "neither"),
        ("emotion_compare_segmented", "Clip A and clip B are similar.", "both"),
        ("synthetic_detection", "ANSWER: 7", "not valid"),
        ("synthetic_detection", "Rating 2, maybe 4/5.", "several"),
    ],
)
def test_parse_unparseable(task: str, text: str, reason: str) -> None:
    got = parse_answer(task, text, CREMA_D_6)
    assert isinstance(got, Unparseable)
    assert reason in got.reason


def test_strict_beats_lenient_and_last_answer_line_wins() -> None:
    text = "Clip A seems calm at first.\nANSWER: A\nOn reflection:\nANSWER: B"
    assert parse_answer("emotion_compare_segmented", text) == Parsed("B", "strict")


def test_expand_tasks() -> None:
    assert expand_tasks(["speaker_match"]) == ["speaker_match_segmented", "speaker_match_merged"]
    assert expand_tasks(["emotion", "emotion"]) == ["emotion"]
    from voxassay.core.errors import InputError

    with pytest.raises(InputError, match="Did you mean"):
        expand_tasks(["speaker_mach"])


def test_vocabulary_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from voxassay.core.errors import InputError
    from voxassay.suites.su.tasks import get_vocabulary

    p = tmp_path / "v.yaml"
    p.write_text("name: mine\nlabels: [calm, tense]\nsynonyms: {relaxed: calm}\n")
    v = get_vocabulary(str(p))
    assert v.name == "mine" and v.lookup("Relaxed") == "calm"
    assert parse_answer("emotion", "ANSWER: tense", v) == Parsed("tense", "strict")
    p.write_text("labels: [calm]\nsynonyms: {relaxed: sleepy}\n")
    with pytest.raises(InputError, match="synonym"):
        get_vocabulary(str(p))
