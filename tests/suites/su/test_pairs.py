from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import shared_data
from voxassay.core.errors import InputError
from voxassay.core.items import load_manifest
from voxassay.suites.su.pairs import build_pairs, emotion_strength, items_from_crema_d_votes


def test_speaker_pairs_balanced_seeded(speaker_manifest: Path) -> None:
    items = load_manifest(speaker_manifest)
    pairs = build_pairs(items, "speaker_match", seed=3)
    truth = Counter(p.labels["truth"] for p in pairs)
    assert truth["same"] == truth["different"] == 54  # 9 speakers x C(4, 2)
    for p in pairs:
        assert len(p.audio or []) == 2 and p.labels["su_task"] == "speaker_match"
        same = p.labels["speaker_a"] == p.labels["speaker_b"]
        assert same == (p.labels["truth"] == "same")
        assert p.labels["split"] in ("calibration", "test")
    split = Counter((p.labels["truth"], p.labels["split"]) for p in pairs)
    assert split[("same", "calibration")] == split[("different", "calibration")] == 14
    again = build_pairs(items, "speaker_match", seed=3)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in pairs]
    other = build_pairs(items, "speaker_match", seed=4)
    assert [p.id for p in other] != [p.id for p in pairs]
    small = build_pairs(items, "speaker_match", n=10, seed=0)
    assert Counter(p.labels["truth"] for p in small) == {"same": 5, "different": 5}
    # with 10 pairs from 36 clips, the least-used clips are chosen: no clip used 3 times
    uses = Counter(a for p in small for a in p.audio or [])
    assert max(uses.values()) <= 2


def test_speaker_pairs_refuse_one_speaker(speaker_manifest: Path) -> None:
    items = [it for it in load_manifest(speaker_manifest) if it.speaker == "1998"]
    with pytest.raises(InputError, match="two speakers"):
        build_pairs(items, "speaker_match")


def _crema_items() -> list:
    return items_from_crema_d_votes(
        shared_data() / "ratings" / "crema_d" / "tabulatedVotes.csv", audio_dir="/nowhere"
    )


def test_crema_d_votes_labels() -> None:
    items = _crema_items()
    assert len(items) == 7442
    it = next(i for i in items if i.id == "1001_IEO_HAP_LO")
    # voice-only row 100002: A0 D0 F0 H3 N6 S0 of 9 responses, majority N
    assert it.labels["emotion"] == "happiness" and it.labels["intensity"] == "LO"
    assert it.labels["vote"] == "neutral"
    assert it.labels["emotion_scores"]["happiness"] == pytest.approx(3 / 9, abs=1e-5)
    assert it.labels["emotion_scores"]["neutral"] == pytest.approx(6 / 9, abs=1e-5)
    for i in items[:500]:
        assert sum(i.labels["emotion_scores"].values()) == pytest.approx(1.0, abs=1e-4)
    # raters agree with the actor's intended emotion far more often than the 1/6 chance level
    agree = sum(1 for i in items if i.labels["vote"] == i.labels["emotion"]) / len(items)
    assert 0.4 < agree < 0.9
    assert Counter(i.labels["emotion"] for i in items)["neutral"] == 1087


def test_crema_d_emotion_pairs_from_vote_shares() -> None:
    items = _crema_items()
    pairs = build_pairs(items, "emotion_compare", n=200, seed=1, margin=0.5, emotions=["anger"])
    assert len(pairs) == 200
    assert Counter(p.labels["truth"] for p in pairs) == {"A": 100, "B": 100}
    by_id = {i.id: i for i in items}
    for p in pairs:
        a, b = by_id[p.labels["source_a"]], by_id[p.labels["source_b"]]
        sa, sb = emotion_strength(a, "anger"), emotion_strength(b, "anger")
        assert sa is not None and sb is not None
        assert abs(sa - sb) >= 0.5
        assert (sa > sb) == (p.labels["truth"] == "A")
        assert p.labels["target_emotion"] == "anger"
    assert {p.labels["split"] for p in pairs} == {"calibration", "test"}


def test_crema_d_intensity_pairs() -> None:
    # only intensity levels (no vote shares): LO=1, MD=2, HI=3, XX unknown
    items = [i for i in _crema_items() if i.labels["intensity"] != "XX"]
    for i in items:
        del i.labels["emotion_scores"]
    pairs = build_pairs(items, "emotion_compare", n=60, seed=0, margin=2)
    assert pairs
    for p in pairs:
        hi = max(p.labels["strength_a"], p.labels["strength_b"])
        lo = min(p.labels["strength_a"], p.labels["strength_b"])
        assert (hi, lo) == (3.0, 1.0)
    with pytest.raises(InputError, match="margin"):
        build_pairs(items, "emotion_compare", margin=5)


def test_synthetic_split(real_vs_synthetic_manifest: Path) -> None:
    items = build_pairs(load_manifest(real_vs_synthetic_manifest), "synthetic_detection", seed=0)
    assert len(items) == 28
    assert Counter(i.labels["truth"] for i in items) == {"synthetic": 23, "human": 5}
    assert (
        Counter((i.labels["truth"], i.labels["split"]) for i in items)[("human", "calibration")]
        == 1
    )
