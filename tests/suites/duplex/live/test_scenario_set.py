"""The default scenario set: valid, complete per category, the timings issue 4 asks for, and the
set loader (names, folders, files, set files and their errors)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from voxassay.contracts.duplex.scenario import FaultKind, Generate, GenerateKind, Scenario
from voxassay.contracts.duplex.vocabulary import Category, Role, TurnAction
from voxassay.core.errors import InputError
from voxassay.suites.duplex.evidence.validate import validate_path
from voxassay.suites.duplex.live import stimuli as render
from voxassay.suites.duplex.live.scenarios import (
    SCENARIOS_DIR,
    SETS_DIR,
    load_scenario_set,
    set_names,
)

DEFAULT = load_scenario_set("default")
DEMO = load_scenario_set("demo")
SCENARIOS = [sc for sc, _ in DEFAULT]
BY_ID = {sc.id: sc for sc in SCENARIOS}
CLINIC_TOOLS = {
    "check_availability",
    "book_appointment",
    "reschedule_appointment",
    "cancel_appointment",
    "update_contact",
    "restore_appointment",
}
TRUTH_KEY = re.compile(
    r"^(final_date|final_time|contact|booked_count|appointments\.A\d+\.(date|time|contact|status))$"
)
LONG_ANSWER = {"What's your cancellation policy?", "What are your opening hours?"}


def of(category: Category) -> list[Scenario]:
    return [sc for sc in SCENARIOS if sc.category is category]


def users(sc: Scenario) -> list[Any]:
    return [s for s in sc.segments if s.role is Role.USER]


# --------------------------------------------------------------------------- validity, coverage


def test_every_shipped_scenario_validates_without_errors() -> None:
    problems = validate_path(SCENARIOS_DIR)
    assert [p.format() for p in problems if p.severity == "error"] == []


def test_default_set_covers_every_category_with_at_least_four() -> None:
    assert len(SCENARIOS) >= 40
    assert len({sc.id for sc in SCENARIOS}) == len(SCENARIOS)
    counts = Counter(sc.category for sc in SCENARIOS)
    assert set(counts) == set(Category)
    assert min(counts.values()) >= 4, counts
    listed = {p.stem for _, p in DEFAULT}
    on_disk = {p.stem for p in SCENARIOS_DIR.glob("*.yaml")}
    assert on_disk - listed == {"tools-cancel-while-waiting"}  # the taxi fixture of test_task


def test_demo_set_is_a_small_subset_with_every_category() -> None:
    demo = [sc for sc, _ in DEMO]
    assert {sc.id for sc in demo} <= set(BY_ID)
    assert {sc.category for sc in demo} == set(Category)
    assert 8 <= len(demo) <= 12
    assert set(set_names()) >= {"default", "demo"}


def test_one_business_domain_with_initial_state_and_truth_keys() -> None:
    for sc in SCENARIOS:
        assert {t.name for t in sc.tools} == CLINIC_TOOLS, sc.id
        assert "appointments" in sc.initial_state and "availability" in sc.initial_state, sc.id
        ids = {a["id"] for a in sc.initial_state["appointments"]}
        truth = sc.business_truth
        assert truth.max_duplicate_side_effects == 0 and truth.forbidden_after_stop, sc.id
        assert set(truth.allowed_side_effects) <= CLINIC_TOOLS - {"check_availability"}, sc.id
        for key in truth.expected_final_state:
            assert TRUTH_KEY.match(key), (sc.id, key)
            if key.startswith("appointments."):
                assert key.split(".")[1] in ids, (sc.id, key)
        for seg in sc.segments:
            assert seg.expected_actions, (sc.id, seg.id)


def test_dates_stay_iso_text_in_initial_state() -> None:
    sc = BY_ID["normal-turns-pause-600ms"]
    assert sc.initial_state["appointments"][0]["date"] == "2026-08-03"
    assert sc.initial_state["availability"]["2026-08-12"] == ["10:00", "14:00", "16:00"]
    raw = yaml.safe_load((SCENARIOS_DIR / "normal-turns-pause-600ms.yaml").read_text())
    assert Scenario.model_validate(raw).initial_state == sc.initial_state  # dates from YAML too


# --------------------------------------------------------------------------- category contents


def test_pauses_of_300_600_1200_ms_and_a_self_correction() -> None:
    pauses = set()
    for sc in of(Category.NORMAL_TURNS):
        for seg in users(sc):
            if seg.after and seg.after.event == "user.speech_stopped":
                assert "continue" in seg.intents and seg.expected_actions == [TurnAction.LISTEN]
                pauses.add(seg.after.offset_ms)
    assert {300, 600, 1200} <= pauses
    assert any("correction" in s.intents for sc in of(Category.NORMAL_TURNS) for s in users(sc))


def test_interruptions_at_half_two_and_five_seconds_of_a_long_answer() -> None:
    offsets = set()
    for sc in of(Category.INTERRUPTION):
        first = users(sc)[0]
        assert first.say in LONG_ANSWER, sc.id
        cuts = [s for s in users(sc) if "interrupt" in s.intents]
        assert cuts, sc.id
        for cut in cuts:
            assert cut.after is not None and cut.after.event == "playback.started"
            assert cut.after.ref == first.id
            assert cut.expected_actions == [TurnAction.INTERRUPT]
            assert cut.expected_history_action == "truncate"
            offsets.add(cut.after.offset_ms)
    assert {500, 2000, 5000} <= offsets


def test_backchannels_during_a_long_answer_expect_continue() -> None:
    words = set()
    for sc in of(Category.BACKCHANNEL):
        bcs = [s for s in users(sc) if "backchannel" in s.intents]
        assert bcs, sc.id
        for bc in bcs:
            assert bc.after is not None and bc.after.event == "playback.started"
            assert set(bc.expected_actions) <= {TurnAction.CONTINUE, TurnAction.BACKCHANNEL}
            assert bc.expected_history_action == "keep" and bc.expected_task_action == "keep"
            words.add((bc.say or "").strip(".").lower())
    assert {"uh huh", "mm hmm", "right", "okay"} <= words


def test_bystanders_are_other_quieter_voices_and_ambient_kinds_are_all_there() -> None:
    kinds = set()
    roles = set()
    for sc in of(Category.BYSTANDER_AMBIENT):
        user_voices = {s.voice for s in users(sc)}
        others = [s for s in sc.segments if s.role is not Role.USER]
        assert others, sc.id
        for seg in others:
            roles.add(seg.role)
            assert seg.intents == ["unrelated"] and TurnAction.IGNORE in seg.expected_actions
            if seg.role is Role.BYSTANDER and seg.say is not None:
                assert -20 <= seg.gain_db <= -15 and seg.voice not in user_voices, sc.id
            if seg.generate is not None:
                kinds.add(seg.generate.kind)
    assert {Role.BYSTANDER, Role.MEDIA, Role.NOISE, Role.ECHO} <= roles
    assert set(GenerateKind) <= kinds


def test_corrections_modify_the_task_and_truncate_when_they_cut_in() -> None:
    fields = set()
    for sc in of(Category.CORRECTION_ENTITY):
        fixes = [s for s in users(sc) if "correction" in s.intents]
        assert fixes and all(s.expected_task_action == "modify" for s in fixes), sc.id
        for s in fixes:
            if "interrupt" in s.intents:
                assert s.expected_history_action == "truncate", sc.id
        fields |= set(sc.business_truth.expected_final_state)
    assert {"final_date", "final_time", "contact"} <= fields


def test_tools_scenarios_have_slow_steps_cancel_topic_change_and_stale_results() -> None:
    tags = Counter(t for sc in of(Category.TOOLS_BACKGROUND) for t in sc.tags)
    assert tags["cancel"] >= 2 and tags["topic-change"] and tags["stale-result"] >= 2
    assert tags["multi-step"] >= 2
    slow = [
        sc for sc in of(Category.TOOLS_BACKGROUND) if any(t.latency_ms >= 1500 for t in sc.tools)
    ]
    assert len(slow) >= 4
    pending = BY_ID["tools-cancel-while-booking"]
    cancel = pending.segment("cancel")
    assert cancel.after is not None and cancel.after.event == "tool.requested"
    book = next(t for t in pending.tools if t.name == "book_appointment")
    assert book.latency_ms > cancel.after.offset_ms and book.may_go_stale


def test_network_faults_cover_every_kind() -> None:
    kinds = {f.kind for sc in of(Category.NETWORK_MEDIA) for f in sc.faults}
    assert kinds == set(FaultKind)
    assert all(sc.faults for sc in of(Category.NETWORK_MEDIA))
    faulty = {sc.category for sc in SCENARIOS if sc.faults}
    assert faulty <= {Category.NETWORK_MEDIA, Category.RECOVERY_DEGRADATION}


def test_recovery_has_an_error_a_timeout_and_a_disconnect_during_a_write() -> None:
    cat8 = of(Category.RECOVERY_DEGRADATION)
    errors = [sc for sc in cat8 if any(r.error for t in sc.tools for r in t.results)]
    assert len(errors) >= 3
    assert any(t.latency_ms >= 10_000 for sc in cat8 for t in sc.tools)
    drops = [
        sc
        for sc in cat8
        for f in sc.faults
        if f.kind is FaultKind.DISCONNECT and f.after and f.after.event == "tool.requested"
    ]
    assert drops
    assert all(sc.business_truth.max_duplicate_side_effects == 0 for sc in cat8)


# --------------------------------------------------------------------------- voices and timing


def test_several_distinct_voices() -> None:
    user_voices = {s.voice for sc in SCENARIOS for s in users(sc)}
    other_voices = {
        s.voice for sc in SCENARIOS for s in sc.segments if s.role is not Role.USER and s.voice
    }
    kinds = {s.generate.kind for sc in SCENARIOS for s in sc.segments if s.generate}
    if GenerateKind.TV in kinds:
        other_voices |= set(render.TV_VOICES)
    if GenerateKind.CHATTER in kinds:
        other_voices |= set(render.CHATTER_VOICES)
    assert "piper" in user_voices and len(user_voices) >= 2
    assert len(user_voices | other_voices) >= 8
    for v in user_voices | other_voices:
        assert v is not None and v.split(":")[0] in ("piper", "espeak-ng")


def _speech_s(text: str | None) -> float:
    """Rough speaking time of a user line: 2.5 words per second."""
    return len((text or "").split()) / 2.5


def test_timed_user_turns_leave_room_for_the_agent() -> None:
    for sc in SCENARIOS:
        timed = sorted((s for s in users(sc) if s.at_ms is not None), key=lambda s: s.at_ms or 0)
        for prev, nxt in itertools.pairwise(timed):
            assert prev.at_ms is not None and nxt.at_ms is not None
            end = prev.at_ms + 1000 * _speech_s(prev.say)
            # the agent answers within ~1-2 s and speaks >= 4 s; tool latencies come on top
            latency = max((t.latency_ms for t in sc.tools if t.latency_ms < 10_000), default=0)
            assert nxt.at_ms >= end + 2000 + 4000 + latency, (sc.id, nxt.id)


# --------------------------------------------------------------------------- set loader


def test_load_by_name_folder_yaml_and_set_file(tmp_path: Path) -> None:
    assert [p.name for _, p in load_scenario_set(SETS_DIR / "demo.txt")] == [
        p.name for _, p in DEMO
    ]
    whole = load_scenario_set(SCENARIOS_DIR)
    assert len(whole) == len(SCENARIOS) + 1
    one = load_scenario_set(SCENARIOS_DIR / "correction-date.yaml")
    assert [sc.id for sc, _ in one] == ["correction-date"]
    own = tmp_path / "mine.yaml"
    own.write_text(
        (SCENARIOS_DIR / "interruption-2s.yaml")
        .read_text()
        .replace("id: interruption-2s", "id: my-cut-in")
    )
    setfile = tmp_path / "set.txt"
    setfile.write_text("# my set\ncorrection-date   # shipped id\n\nmine.yaml\n")
    got = load_scenario_set(setfile)
    assert [sc.id for sc, _ in got] == ["correction-date", "my-cut-in"]
    assert got[1][1] == own
    assert [sc.id for sc, _ in load_scenario_set(tmp_path)] == ["my-cut-in"]


def test_set_loader_errors_name_the_line_and_the_choices(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("correction-date\ncorection-date\ncorrection-date\nnope.yaml\n")
    with pytest.raises(InputError) as err:
        load_scenario_set(bad)
    text = str(err.value)
    assert f"{bad}:2: unknown scenario id 'corection-date' (did you mean correction-date" in text
    assert f"{bad}:3: scenario 'correction-date' is listed twice (line 1)" in text
    assert f"{bad}:4: no such scenario file" in text
    with pytest.raises(InputError, match="Did you mean demo"):
        load_scenario_set("dem")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="lists no scenarios"):
        load_scenario_set(empty)
    (tmp_path / "none").mkdir()
    with pytest.raises(InputError, match="no scenario YAML"):
        load_scenario_set(tmp_path / "none")


# --------------------------------------------------------------------------- schema additions


def _seg(**kw: Any) -> dict[str, Any]:
    return {"id": "s", "role": "noise", "at_ms": 0, "expected_actions": ["ignore"], **kw}


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"say": "hi", "voice": "piper", "generate": {"kind": "cough", "duration_ms": 500}},
         "both say and generate"),
        ({"audio": "x.wav", "generate": {"kind": "hum", "duration_ms": 500}},
         "both audio and generate"),
        ({}, "neither audio nor say nor generate"),
        ({"generate": {"kind": "music", "duration_ms": 500}, "start_ms": 10},
         "do not apply to generate"),
        ({"generate": {"kind": "music", "duration_ms": 500}, "voice": "piper"},
         "voice is only used with say"),
    ],
)  # fmt: skip
def test_generate_is_a_third_exclusive_source(fields: dict[str, Any], needle: str) -> None:
    from pydantic import ValidationError

    doc = {"id": "g", "version": 1, "category": "bystander_ambient", "segments": [_seg(**fields)]}
    with pytest.raises(ValidationError, match=needle):
        Scenario.model_validate(doc)


def test_generate_in_the_json_schema_and_the_validator(tmp_path: Path) -> None:
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from voxassay.contracts.duplex.schemas import SCHEMAS_DIR, schema_text

    assert (SCHEMAS_DIR / "scenario.json").read_text() == schema_text("scenario")
    validator = jsonschema.Draft202012Validator(json.loads(schema_text("scenario")))
    ok = {"kind": "keyboard", "seed": 2, "duration_ms": 1000}
    doc = {
        "id": "g",
        "version": 1,
        "category": "bystander_ambient",
        "segments": [_seg(generate=ok)],
    }
    assert validator.is_valid(doc)
    assert Scenario.model_validate(doc).segments[0].generate == Generate(**ok)
    both = {**_seg(generate=ok), "say": "hi", "voice": "piper"}
    assert not validator.is_valid({**doc, "segments": [both]})
    for bad in (
        {"kind": "thunder", "duration_ms": 1},
        {"kind": "hum", "duration_ms": 0},
        {"kind": "hum"},
    ):
        assert not validator.is_valid({**doc, "segments": [_seg(generate=bad)]})
    path = tmp_path / "g.yaml"
    path.write_text(
        "id: g\nversion: 1\ncategory: bystander_ambient\nsegments:\n"
        "  - id: s\n    role: noise\n    at_ms: 0\n    expected_actions: [ignore]\n"
        "    generate: {kind: hum, duration_ms: 500, sed: 3}\n"
    )
    (problem,) = [p for p in validate_path(path) if p.severity == "error"]
    assert problem.line == 9 and "did you mean 'seed'" in problem.message
