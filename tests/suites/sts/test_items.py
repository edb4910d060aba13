"""The STS item set and the reference responder, without models: the set's shape (issue
floor: >= 80 items, >= 9 natural and >= 10 scripted scenarios, >= 4 items each, every
dimension), strict loading, checklist checks, and that the responder's templates hold no
checklist phrase while its prosody cues decide what it does with a "yes"."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

import pytest

from voxassay.core.errors import InputError
from voxassay.reference import sts_responder
from voxassay.reference.sts_responder import Cues, read_cues, respond
from voxassay.suites.sts.items import (
    DIMENSIONS,
    STRESSORS,
    Check,
    load_items,
    parse_items,
    select_items,
)


def test_the_shipped_set_meets_the_floor() -> None:
    scenarios = load_items()
    items = [it for s in scenarios for it in s.items]
    kinds = Counter(s.type for s in scenarios)
    assert len(items) >= 80 and kinds["natural"] >= 9 and kinds["scripted"] >= 10
    assert all(len(s.items) >= 4 for s in scenarios)
    assert set(Counter(it.dimension for it in items)) == set(DIMENSIONS)
    assert {x for it in items for x in it.stressors} == set(STRESSORS)
    for it in items:
        assert it.checklist and it.say.strip()
        assert "[" not in it.say and "(" not in it.say  # words only, no prosody marks
        if it.dimension == "issue_redirection":
            assert it.core_issue
    scripted = [s for s in scenarios if s.type == "scripted"]
    assert all(len(s.earlier) >= 2 for s in scripted)
    assert len(select_items(scenarios, ("emotion_alignment",))) == len(scenarios)
    assert sum(len(s.items) for s in select_items(scenarios, ("natural",))) == 36


def _doc(**item: Any) -> dict[str, Any]:
    base = {"id": "x1", "dimension": "emotion_alignment", "style": "hesitant", "say": "Yes.",
            "checklist": [{"text": "asks first", "any": ["?"]}]}  # fmt: skip
    base.update(item)
    dims = {d: {"question": "q"} for d in DIMENSIONS}
    return {"dimensions": dims, "scenarios": [{"id": "s", "type": "natural", "items": [base]}]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dimension": "joy"}, "unknown dimension"),
        ({"style": "whisper"}, "style is one of"),
        ({"stressors": ["loud"]}, "unknown stressors"),
        ({"checklist": []}, "at least one checklist"),
        ({"dimension": "issue_redirection"}, "core_issue"),
    ],
)
def test_a_malformed_item_is_an_input_error_naming_it(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_items(_doc(**change))


def test_checks_read_the_answer_text() -> None:
    c = Check("does not book on the yes", any=("?",), none=("booked",))
    assert c.passes("Would you like another day?") is True
    assert c.passes("You're booked. Anything else?") is False
    assert c.passes("Fine.") is False
    assert Check("sounds warm").passes("anything") is None  # for people only


def test_no_checklist_phrase_is_in_the_responder() -> None:
    source = inspect.getsource(sts_responder).lower()
    phrases = {c.text.lower() for s in load_items() for it in s.items for c in it.checklist}
    leaked = [p for p in phrases if p in source]
    assert not leaked, leaked
    labels = {it.core_issue for s in load_items() for it in s.items if it.core_issue}
    assert not [x for x in labels if x.lower() in source]


def test_cues_decide_what_a_yes_means() -> None:
    neutral = {"energy_db": -26.0, "f0_median_st": -1.0}
    assert not read_cues(neutral).any()
    assert read_cues({"energy_db": -33.0, "f0_median_st": -1.5}).hesitant
    assert read_cues({"energy_db": -31.0, "f0_median_st": 2.0}).afraid
    assert read_cues({"energy_db": -34.0, "f0_median_st": -5.0}).low
    assert read_cues({"energy_db": -20.0, "f0_median_st": 1.0}).agitated
    said = "Yes, Tuesday at nine is fine, I think."
    acted = respond(said, [], None)
    assert "booked" in acted and "?" not in acted
    asked = respond(said, [], Cues(hesitant=True))
    assert "booked" not in asked and "?" in asked and "no rush" in asked
    hostile = respond("You people are useless, where is my parcel?", [], None)
    assert "parcel" in hostile and "useless" not in hostile
