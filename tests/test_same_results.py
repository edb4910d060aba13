"""The rule for results computed in different processes (``tests.helpers.same``): floats equal
within a relative 1e-6, everything else (and every decision) exactly."""

from __future__ import annotations

from tests.helpers.same import differences


def test_a_float_within_one_in_a_million_is_the_same_and_beyond_it_is_not() -> None:
    # the cosine a Ray actor gave against this process's (seen in CI)
    assert differences(0.9306163666639575, 0.9306163642073261) == []
    assert differences(0.9306, 0.9307) != []
    assert differences(0.0, 1e-17) == [] and differences(0.0, 1e-6) != []


def test_decisions_text_and_integers_are_exact() -> None:
    assert differences({"answer": "same", "n": 3}, {"answer": "different", "n": 3}) != []
    assert differences({"answer": "same", "n": 3}, {"answer": "same", "n": 4}) != []
    assert differences(True, False) != [] and differences(None, 0.0) != []
    assert differences([1, 2], [1, 2, 3]) != [] and differences({"a": 1}, {"b": 1}) != []


def test_a_printed_number_may_move_by_its_last_digit_and_the_words_may_not() -> None:
    a = "cosine 0.9306 vs threshold 0.7286\nANSWER: same"
    assert differences(a, "cosine 0.9307 vs threshold 0.7286\nANSWER: same") == []
    assert differences(a, "cosine 0.9309 vs threshold 0.7286\nANSWER: same") != []
    assert differences(a, "cosine 0.9306 vs threshold 0.7286\nANSWER: different") != []
