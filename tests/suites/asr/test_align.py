"""Word/character error counts and word alignments."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from voxassay.suites.asr.align import ErrorCounts, align_words, count_char_errors, count_errors
from voxassay.suites.asr.normalize import get_normalizer

PARITY = Path(__file__).resolve().parents[3].parent / "shared" / "parity"


def _dev_token_pairs() -> list[tuple[list[str], list[str]]]:
    path = PARITY / "oal_dev_pairs.jsonl"
    if not path.exists():
        pytest.skip(f"leaderboard parity files not found at {PARITY}")
    norm = get_normalizer("oal-en")
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [(norm(r["text"]).split(), norm(r["pred_text"]).split()) for r in rows]


# --------------------------------------------------------------------------------------------
# ErrorCounts
# --------------------------------------------------------------------------------------------


def test_error_counts_arithmetic() -> None:
    a = ErrorCounts(sub=1, dele=2, ins=3, ref_words=10)
    b = ErrorCounts(sub=0, dele=1, ins=0, ref_words=5)
    assert a.errors == 6
    assert a + b == ErrorCounts(1, 3, 3, 15)
    assert sum([a, b], ErrorCounts()) == a + b
    assert sum([a, b]) == a + b
    assert (a + b).rate == 7 / 15
    assert ErrorCounts().rate == 0.0
    assert ErrorCounts(ins=2).rate == float("inf")
    with pytest.raises(TypeError):
        _ = a + 1  # type: ignore[operator]


# --------------------------------------------------------------------------------------------
# count_errors
# --------------------------------------------------------------------------------------------


def test_count_errors_basic() -> None:
    ref = ["the", "cat", "sat", "on", "the", "mat"]
    assert count_errors(ref, ref) == ErrorCounts(0, 0, 0, 6)
    assert count_errors(ref, ["the", "cat", "sat", "on", "a", "mat"]) == ErrorCounts(1, 0, 0, 6)
    assert count_errors(ref, ["the", "cat", "sat", "on", "mat"]) == ErrorCounts(0, 1, 0, 6)
    assert count_errors(ref, ["the", "cat", "sat", "on", "the", "red", "mat"]) == ErrorCounts(
        0, 0, 1, 6
    )
    assert count_errors([], ["x"]) == ErrorCounts(0, 0, 1, 0)
    assert count_errors(["x", "y"], []) == ErrorCounts(0, 2, 0, 2)


def test_compounds_are_free_only_when_merging() -> None:
    ref, hyp = ["the", "whiteboard"], ["the", "white", "board"]
    assert count_errors(ref, hyp).errors == 0
    assert count_errors(hyp, ref).errors == 0
    assert count_errors(ref, hyp, merge_compounds=False) == ErrorCounts(1, 0, 1, 2)
    # many-to-one only: a regrouping across a word boundary still costs
    assert count_errors(["the", "sea"], ["these", "a"]).errors == 2


def test_kaldialign_tie_break_is_kept() -> None:
    # two substitutions would cost the same; kaldialign reports a deletion and an insertion
    assert count_errors(["stand", "up"], ["up", "now"]) == ErrorCounts(0, 1, 1, 2)


# --------------------------------------------------------------------------------------------
# align_words
# --------------------------------------------------------------------------------------------


def test_align_words_ops() -> None:
    ref = ["the", "white", "board", "was", "not", "clean", "today"]
    hyp = ["the", "whiteboard", "is", "not", "clean", "at", "all"]
    ops = align_words(ref, hyp)
    assert ops[0] == ("ok", "the", "the")
    assert ops[1] == ("merge", "white board", "whiteboard")
    assert ("sub", "was", "is") in ops
    kinds = [op for op, _, _ in ops]
    assert (
        kinds.count("ins") + kinds.count("sub") + kinds.count("del")
        == count_errors(ref, hyp).errors
    )


def test_align_words_insertions_and_deletions() -> None:
    assert align_words(["a", "b"], ["a"]) == [("ok", "a", "a"), ("del", "b", None)]
    assert align_words([], ["x"]) == [("ins", None, "x")]
    assert align_words(["x"], []) == [("del", "x", None)]
    assert align_words(["white", "board"], ["whiteboard"], merge_compounds=False) == [
        ("sub", "white", "whiteboard"),
        ("del", "board", None),
    ]


def test_align_words_rejects_empty_tokens() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        align_words(["a", ""], ["a"])


def test_align_words_agrees_with_counts_on_dev() -> None:
    for ref, hyp in _dev_token_pairs():
        ops = align_words(ref, hyp)
        counts = count_errors(ref, hyp)
        kinds = [op for op, _, _ in ops]
        assert (kinds.count("sub"), kinds.count("del"), kinds.count("ins")) == (
            counts.sub,
            counts.dele,
            counts.ins,
        )
        assert [w for _, r, _ in ops if r is not None for w in r.split()] == ref
        assert [w for _, _, h in ops if h is not None for w in h.split()] == hyp
        for op, r, h in ops:
            if op == "merge":
                assert r is not None and h is not None
                assert r.replace(" ", "") == h.replace(" ", "")


def test_align_words_agrees_with_counts_on_random_pairs() -> None:
    rng = random.Random(3)
    vocab = ["a", "b", "ab", "ba", "c", "abc", "bc"]
    for _ in range(2000):
        ref = [rng.choice(vocab) for _ in range(rng.randint(0, 6))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(0, 6))]
        for merge in (True, False):
            ops = align_words(ref, hyp, merge_compounds=merge)
            counts = count_errors(ref, hyp, merge_compounds=merge)
            kinds = [op for op, _, _ in ops]
            got = (kinds.count("sub"), kinds.count("del"), kinds.count("ins"))
            assert got == (counts.sub, counts.dele, counts.ins), (ref, hyp, merge, ops)


# --------------------------------------------------------------------------------------------
# count_char_errors
# --------------------------------------------------------------------------------------------


def test_char_errors_count_spaces_and_strip_ends() -> None:
    assert count_char_errors("abc", "abd") == ErrorCounts(1, 0, 0, 3)
    assert count_char_errors("a b", "ab") == ErrorCounts(0, 1, 0, 3)  # the space is a char
    assert count_char_errors(" ab ", "ab") == ErrorCounts(0, 0, 0, 2)  # ends are stripped
    assert count_char_errors("", "") == ErrorCounts()
    assert count_char_errors("", "xy") == ErrorCounts(0, 0, 2, 0)
    assert count_char_errors("ab", "") == ErrorCounts(0, 2, 0, 2)


def test_char_errors_total_matches_jiwer() -> None:
    jiwer = pytest.importorskip("jiwer")
    rng = random.Random(5)
    alphabet = "ab c"
    for _ in range(500):
        ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))).strip() or "a"
        hyp = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        out = jiwer.process_characters(ref, hyp)
        counts = count_char_errors(ref, hyp)
        assert counts.errors == out.substitutions + out.deletions + out.insertions
        assert counts.ref_words == out.hits + out.substitutions + out.deletions
