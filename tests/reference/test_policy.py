"""Policy specs: the two bases, one switch per failure mode, and clear errors."""

from __future__ import annotations

import dataclasses

import pytest

from voxassay.core.errors import InputError
from voxassay.reference.policy import SWITCHES, Policy, PolicyError


def test_careful_has_no_failure_switch_and_naive_has_all_but_its_opposite() -> None:
    careful, naive = Policy.parse("careful"), Policy.parse("naive")
    assert careful == Policy.careful() and careful.failures_on() == []
    # naive stops on any sound; keeping on talking over barge-ins is the opposite failure
    assert naive.failures_on() == [s for s in SWITCHES if s != "ignores_interruptions"]
    assert not naive.ignores_interruptions
    assert naive.slow_stop_ms == 400 and naive.confirms_irreversible is False
    assert naive.answers_backchannels and naive.writes_after_stop and naive.repeats_side_effects


def test_switch_metadata_covers_every_field_with_a_metric() -> None:
    names = [f.name for f in dataclasses.fields(Policy) if f.name != "name"]
    assert sorted(names) == sorted(SWITCHES)
    assert SWITCHES["writes_after_stop"].metric == "write_after_stop"
    assert SWITCHES["delivers_stale_results"].metric == "stale_result_interception"
    assert SWITCHES["repeats_side_effects"].metric == "duplicate_side_effects"
    assert "history" in SWITCHES["keeps_unheard_text"].metric
    assert "bystander" in SWITCHES["answers_bystanders"].metric
    assert "stop latency" in SWITCHES["slow_stop_ms"].metric
    for info in SWITCHES.values():
        assert info.description and info.layer in ("turn", "history", "task")


@pytest.mark.parametrize(
    ("spec", "changed", "name"),
    [
        (
            "careful+answers_backchannels,writes_after_stop",
            {"answers_backchannels": True, "writes_after_stop": True},
            "careful+answers_backchannels,writes_after_stop",
        ),
        ("careful+slow_stop_ms=600", {"slow_stop_ms": 600}, "careful+slow_stop_ms=600"),
        (
            " Careful + confirms_irreversible=false ",
            {"confirms_irreversible": False},
            "careful+confirms_irreversible=false",
        ),
        ("careful+delivers_stale_results=yes", {"delivers_stale_results": True}, None),
    ],
)
def test_parse_switches(spec: str, changed: dict[str, object], name: str | None) -> None:
    p = Policy.parse(spec)
    for key, value in changed.items():
        assert getattr(p, key) == value
    assert sorted(p.failures_on()) == sorted(changed)
    if name:
        assert p.name == name


def test_naive_with_a_switch_turned_back() -> None:
    p = Policy.parse("naive+confirms_irreversible=true,slow_stop_ms=0")
    assert p.confirms_irreversible and p.slow_stop_ms == 0 and p.writes_after_stop
    assert Policy.parse(p) is p


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("reckless", "unknown policy 'reckless'"),
        ("careful+answers_everything", "unknown switch 'answers_everything'"),
        ("careful+slow_stop_ms", "needs a value in ms"),
        ("careful+slow_stop_ms=fast", "needs an integer"),
        ("careful+slow_stop_ms=-5", ">= 0"),
        ("careful+writes_after_stop=maybe", "yes/no switch"),
        ("careful+", "at least one switch"),
        ("careful+writes_after_stop,,answers_bystanders", "empty switch"),
    ],
)
def test_parse_errors_are_clear(spec: str, needle: str) -> None:
    with pytest.raises(PolicyError) as err:
        Policy.parse(spec)
    assert needle in str(err.value)
    assert isinstance(err.value, InputError)


def test_unknown_names_list_the_switches() -> None:
    with pytest.raises(PolicyError) as err:
        Policy.parse("careful+nope")
    for name in SWITCHES:
        assert name in str(err.value)
    assert "slow_stop_ms=<ms>" in str(err.value)
