"""Duplex contracts: scenario rules, events, evidence-level derivation, the matrix, JSON Schemas."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner
from pydantic import ValidationError

from tests.helpers.duplex import arctic_clip, needs_speech
from tests.helpers.loop import add_loop_artifacts
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.evidence import derive_evidence_level, evidence_at_least
from voxassay.contracts.duplex.manifest import BundleManifest, FileEntry, sha256_file
from voxassay.contracts.duplex.matrix import Gate
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.contracts.duplex.schemas import SCHEMA_KINDS, SCHEMAS_DIR, schema_text
from voxassay.contracts.duplex.vocabulary import (
    Category,
    Role,
    is_known_event_type,
    unknown_event_hint,
)
from voxassay.suites.duplex.evidence.validate import load_matrix, load_scenarios
from voxassay.suites.duplex.live.scenarios import EXAMPLE_MATRIX, SCENARIOS_DIR

# --------------------------------------------------------------------------- scenarios


def seg(sid: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": sid, "role": "user", "say": "hi", "voice": "piper", "at_ms": 0}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


def scenario(*segments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"id": "s", "version": 1, "category": "normal_turns", "segments": list(segments), **kw}


def test_example_scenarios_cover_every_category_with_expected_actions() -> None:
    scenarios = load_scenarios(SCENARIOS_DIR)
    assert {s.category for s in scenarios} == set(Category)
    assert len({s.id for s in scenarios}) == len(scenarios)
    for sc in scenarios:
        users = [s for s in sc.segments if s.role is Role.USER]
        assert users, sc.id
        assert all(s.expected_actions for s in sc.segments), sc.id
        for s in users:
            assert s.voice is not None and s.voice.split(":")[0] in ("piper", "espeak-ng"), sc.id


def test_category_names_are_stable() -> None:
    assert [c.value for c in Category] == [
        "normal_turns",
        "interruption",
        "backchannel",
        "bystander_ambient",
        "correction_entity",
        "tools_background",
        "network_media",
        "recovery_degradation",
    ]


def test_yaml_dates_in_business_truth_stay_text() -> None:
    correction = next(s for s in load_scenarios(SCENARIOS_DIR) if s.id == "correction-date")
    assert correction.business_truth.expected_final_state == {"final_date": "2026-08-10"}
    # built in Python with a date object: stored as the ISO string final-state.json will hold
    sc = Scenario.model_validate(
        scenario(seg("a"), business_truth={"expected_final_state": {"d": dt.date(2026, 1, 2)}})
    )
    assert sc.business_truth.expected_final_state == {"d": "2026-01-02"}
    assert sc.business_truth.forbidden_after_stop is True
    assert sc.business_truth.max_duplicate_side_effects == 0


@pytest.mark.parametrize(
    ("segments", "needle"),
    [
        ([seg("a"), seg("a")], "duplicate segment id 'a'"),
        (
            [seg("a"), seg("b", at_ms=None, after={"event": "playback.started", "ref": "zz"})],
            "'zz'",
        ),
        ([seg("a", after={"event": "playback.started"})], "both at_ms and after"),
        ([seg("a", at_ms=None)], "neither at_ms nor after"),
        ([seg("a", audio="x.wav")], "both audio and say"),
        ([seg("a", say=None, voice=None)], "neither audio nor say"),
        ([seg("a", voice=None)], "say needs a voice"),
        ([seg("a", say=None, audio="x.wav")], "voice is only used with say"),
        ([seg("a", start_ms=10)], "do not apply to say"),
        (
            [seg("a", say=None, voice=None, audio="x.wav", start_ms=500, end_ms=200)],
            "must be after",
        ),
        ([seg("a", at_ms=None, after={"event": "playback.started", "ref": "a"})], "after itself"),
        (
            [
                seg("a", at_ms=None, after={"event": "user.speech_stopped", "ref": "b"}),
                seg("b", at_ms=None, after={"event": "user.speech_stopped", "ref": "a"}),
            ],
            "cycle: a -> b -> a",
        ),
        ([seg("a", intents=["start", "start"])], "repeats a label"),
    ],
)
def test_scenario_cross_field_rules(segments: list[dict[str, Any]], needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        Scenario.model_validate(scenario(*segments))


def test_scenario_refuses_unknown_fields_and_bad_labels() -> None:
    with pytest.raises(ValidationError, match="expected_action"):
        Scenario.model_validate(scenario(seg("a", expected_action=["listen"])))
    with pytest.raises(ValidationError, match="expected_actions"):
        Scenario.model_validate(scenario(seg("a", expected_actions=["respond"])))
    with pytest.raises(ValidationError, match="newer"):
        Scenario.model_validate(scenario(seg("a"), schema_version=99))
    sc = Scenario.model_validate(
        scenario(seg("a", intents=["backchannel", "correction"], expected_actions=["continue"]))
    )
    assert [str(i) for i in sc.segments[0].intents] == ["backchannel", "correction"]


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ({"kind": "loss"}, "needs loss_rate"),
        ({"kind": "jitter", "jitter_ms": 20, "loss_rate": 0.1}, "loss_rate is not used"),
        ({"kind": "disconnect"}, "needs duration_ms"),
        (
            {"kind": "delay", "delay_ms": 5, "at_ms": 1, "after": {"event": "playback.started"}},
            "at most one",
        ),
        ({"kind": "delay", "delay_ms": 5, "after": {"event": "x.y", "ref": "nope"}}, "'nope'"),
    ],
)
def test_fault_rules(fault: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        Scenario.model_validate(scenario(seg("a"), faults=[fault]))
    ok = {"kind": "loss", "loss_rate": 0.05, "seed": 3}
    assert Scenario.model_validate(scenario(seg("a"), faults=[ok])).faults[0].seed == 3


# --------------------------------------------------------------------------- events


def ev(**kw: Any) -> dict[str, Any]:
    base = {
        "event_id": "e1",
        "session_id": "s1",
        "event_type": "playback.started",
        "producer": "player",
        "monotonic_ns": 5,
    }
    base.update(kw)
    return base


def test_event_keeps_unknown_types_and_fields() -> None:
    e = Event.model_validate(ev(event_type="vendor.thing", extra_field=1))
    assert not e.known_type and e.model_extra == {"extra_field": 1}
    assert Event.model_validate(ev(event_type="network.jitter")).known_type
    assert Event.model_validate(ev(event_type="acoustic.agent_speech_started")).known_type
    assert is_known_event_type("fault.injected") and not is_known_event_type("playback")
    assert "vad.speech_started" in unknown_event_hint("input_audio_buffer.speech_started")
    assert "tts.chunk" in unknown_event_hint("response.output_audio.delta")  # GA name
    assert "tts.chunk" in unknown_event_hint("response.audio.delta")  # beta name


def test_event_required_fields_and_json_roundtrip() -> None:
    with pytest.raises(ValidationError, match="monotonic_ns"):
        Event.model_validate({k: v for k, v in ev().items() if k != "monotonic_ns"})
    e = Event.new(
        "playback.interrupted",
        session_id="s",
        producer="player",
        monotonic_ns=10,
        played_until_ms=1234.5,
        route="relay",
        data={"x": 1},
    )
    assert len(e.event_id) == 32
    line = e.to_json()
    assert "trace_id" not in line  # unset ids are left out
    assert Event.model_validate_json(line) == e


def test_producer_clock_record() -> None:
    clock = ProducerClock(producer="agent", kind="monotonic", offset_ns=-5_000, uncertainty_ns=200)
    event = clock.to_event("s1", monotonic_ns=0)
    assert event.event_type == "clock.producer" and event.known_type
    assert ProducerClock.from_event(Event.model_validate_json(event.to_json())) == clock
    with pytest.raises(ValidationError, match=r"clock\.producer data"):
        Event.model_validate(ev(event_type="clock.producer", data={"producer": "a"}))


# --------------------------------------------------------------------------- evidence levels

FULL_FILES = ("input.wav", "output.wav", "events.jsonl")


def manifest(
    files: tuple[str, ...] = FULL_FILES, clock_kind: str = "virtual", **provenance: Any
) -> BundleManifest:
    return BundleManifest.model_validate(
        {
            "session_id": "s1",
            "created_at": "2026-01-01T00:00:00Z",
            "files": [{"path": f, "sha256": "0" * 64, "bytes": 0} for f in files],
            "clock": {"kind": clock_kind},
            "provenance": provenance,
        }
    )


L3 = {
    "transport": "socket",
    "clock": "monotonic",
    "playback": "real_device_capture",
    "capture": "loopback_soundcard",
    "traffic": "synthetic",
    "acoustic_events": "capture",
}


def test_l1_without_events_or_audio() -> None:
    level, reasons = derive_evidence_level(manifest(files=("scenario.yaml",), **L3))
    assert level == "L1" and "no events or audio" in reasons[0]


def test_l2_in_process_virtual_clock() -> None:
    level, reasons = derive_evidence_level(
        manifest(
            transport="in_process",
            clock="virtual",
            playback="modelled",
            capture="none",
            traffic="synthetic",
            acoustic_events="output_stream",
        )
    )
    assert level == "L2"
    assert "modelled playback is L2" in reasons[0]


def test_modelled_playback_stays_l2_even_over_a_real_socket() -> None:
    facts = {**L3, "playback": "modelled", "capture": "none", "acoustic_events": "output_stream"}
    level, reasons = derive_evidence_level(manifest(clock_kind="real", **facts))
    assert level == "L2"
    assert "playback is modelled" in reasons[0]
    assert not any("in-process" in r or "virtual clock" in r for r in reasons)


def loop_bundle(folder: Path, **provenance: Any) -> BundleManifest:
    """A bundle folder with real speech as the agent side, its sound-loop files
    (``tests.helpers.loop``) and a manifest hashing them."""
    folder.mkdir(parents=True, exist_ok=True)
    speech = arctic_clip("aew_arctic_a0001.wav")
    sf.write(folder / "input.wav", np.zeros_like(speech), 16_000, subtype="PCM_16")
    sf.write(folder / "output.wav", speech, 16_000, subtype="PCM_16")
    (folder / "events.jsonl").write_text("")
    names = [*FULL_FILES, *add_loop_artifacts(folder, latency_ms=3.0)]
    entries = [
        FileEntry(path=n, sha256=sha256_file(folder / n), bytes=(folder / n).stat().st_size)
        for n in names
    ]
    return manifest(clock_kind="real", **provenance).model_copy(update={"files": entries})


@needs_speech
def test_full_l3(tmp_path: Path) -> None:
    m = loop_bundle(tmp_path, **L3)
    level, reasons = derive_evidence_level(m, tmp_path)
    assert level == "L3", reasons
    assert "not L4" in reasons[0]


def test_a_capture_claim_without_its_folder_is_not_l3() -> None:
    """The facts alone never make L3: the loop's files must be there to check."""
    level, reasons = derive_evidence_level(manifest(clock_kind="real", **L3))
    assert level == "L2"
    assert "loop artifacts were not checked" in reasons[0]


def test_l3_claim_without_capture_is_downgraded_with_a_reason() -> None:
    level, reasons = derive_evidence_level(manifest(clock_kind="real", **{**L3, "capture": "none"}))
    assert level == "L2"
    text = " ".join(reasons)
    assert "contradiction" in text and "nothing was captured" in text


def test_capture_on_a_virtual_clock_is_a_contradiction() -> None:
    level, reasons = derive_evidence_level(
        manifest(clock_kind="virtual", **{**L3, "clock": "virtual"})
    )
    assert level == "L2"
    assert any("virtual clock" in r for r in reasons)


def test_clock_facts_that_disagree_lower_the_level() -> None:
    level, reasons = derive_evidence_level(manifest(clock_kind="virtual", **L3))
    assert level == "L2" and any("clock.kind is virtual" in r for r in reasons)


def test_missing_provenance_is_assumed_weakest() -> None:
    level, reasons = derive_evidence_level(manifest(clock_kind="real"))
    assert level == "L2"
    assert any("provenance.playback not recorded: assumed modelled" in r for r in reasons)


def test_self_declared_level_is_ignored() -> None:
    m = BundleManifest.model_validate(
        {**manifest().model_dump(mode="json"), "evidence_level": "L4"}
    )
    level, reasons = derive_evidence_level(m)
    assert level == "L2" and any("'evidence_level' ignored" in r for r in reasons)


@needs_speech
def test_l4_needs_a_named_device_or_shadow_traffic(tmp_path: Path) -> None:
    mic = {**L3, "capture": "device_mic"}
    m = loop_bundle(tmp_path, **mic)
    assert derive_evidence_level(m, tmp_path)[0] == "L3"
    named = m.model_copy(update={"device": "Pixel 8"})
    assert derive_evidence_level(named, tmp_path)[0] == "L4"
    shadow = {**L3, "traffic": "production_shadow", "playback": "modelled", "capture": "none"}
    assert derive_evidence_level(manifest(clock_kind="real", **shadow))[0] == "L4"
    virtual_shadow = manifest(clock_kind="virtual", **{**shadow, "clock": "virtual"})
    level, reasons = derive_evidence_level(virtual_shadow)
    assert level == "L2" and any("shadow" in r for r in reasons)


@needs_speech
def test_files_that_fail_their_hash_do_not_count(tmp_path: Path) -> None:
    m = loop_bundle(tmp_path, **L3)
    assert derive_evidence_level(m, tmp_path)[0] == "L3"
    (tmp_path / "output.wav").write_bytes(b"tampered!!")
    level, reasons = derive_evidence_level(m, tmp_path)
    assert level == "L2"
    assert any("output.wav does not match" in r for r in reasons)


def test_evidence_order() -> None:
    assert evidence_at_least("L3", "L2") and evidence_at_least("L2", "L2")
    assert not evidence_at_least("L2", "L3")


# --------------------------------------------------------------------------- matrix


def test_example_matrix() -> None:
    m = load_matrix(EXAMPLE_MATRIX)
    gates = {g.id: g for g in m.gates}
    assert {
        "first-audio-p95",
        "interrupt-stop-p95",
        "backchannel-false-cancel-rate",
        "bystander-false-responses-per-hour",
        "grounded-completion",
        "duplicate-side-effects",
        "stale-deliveries",
        "reconnect-success",
    } == set(gates)
    assert gates["first-audio-p95"].required_n == 59  # default for a P95
    assert gates["reconnect-success"].required_n == 20  # explicit
    assert gates["duplicate-side-effects"].passes(0) and not gates["duplicate-side-effects"].passes(
        1
    )
    assert gates["interrupt-stop-p95"].min_evidence == "L3"


def test_gate_comparators_and_default_n() -> None:
    def gate(comparator: str, statistic: str = "p95") -> Gate:
        return Gate.model_validate(
            {
                "id": "g",
                "metric": "m",
                "statistic": statistic,
                "comparator": comparator,
                "threshold": 1.0,
                "min_evidence": "L2",
                "on_fail": "block",
            }
        )

    assert gate("<").passes(0.5) and not gate("<").passes(1.0)
    assert gate(">=").passes(1.0) and not gate(">").passes(1.0)
    assert gate("<", "p99").required_n == 299
    assert gate("<", "p50").required_n == 5
    with pytest.raises(ValidationError):
        gate("!=")


# --------------------------------------------------------------------------- JSON Schemas


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_committed_schemas_are_up_to_date(kind: str) -> None:
    committed = (SCHEMAS_DIR / f"{kind}.json").read_text(encoding="utf-8")
    assert committed == schema_text(kind), (
        f"schemas/{kind}.json is stale: run `voxassay duplex schema --out "
        "src/voxassay/contracts/duplex/schemas`"
    )
    body = json.loads(committed)
    assert body["$id"] == f"urn:voxassay:duplex:{kind}:v{2 if kind == 'matrix' else 1}"


def test_schema_cli_writes_and_prints(tmp_path: Path) -> None:
    from voxassay.cli.duplex import SCHEMA_KIND_CHOICES, duplex

    assert SCHEMA_KIND_CHOICES == SCHEMA_KINDS
    result = CliRunner().invoke(duplex, ["schema", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{k}.json" for k in SCHEMA_KINDS)
    assert (tmp_path / "event.json").read_text() == schema_text("event")
    one = CliRunner().invoke(duplex, ["schema", "event"])
    assert json.loads(one.output)["$id"] == "urn:voxassay:duplex:event:v1"
    bad = CliRunner().invoke(duplex, ["schema", "nope"])
    assert bad.exit_code == 2


def test_scenario_schema_describes_segment_rules() -> None:
    body = json.loads(schema_text("scenario"))
    segment = body["$defs"]["Segment"]
    assert segment["additionalProperties"] is False
    assert {"say", "voice", "audio", "at_ms", "after"} <= set(segment["properties"])
    assert body["$defs"]["Category"]["enum"][0] == "normal_turns"


def test_exported_schemas_accept_the_examples_and_reject_broken_ones() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from voxassay.suites.duplex.evidence.validate import _Loader

    scenario_schema = json.loads((SCHEMAS_DIR / "scenario.json").read_text())
    validator = jsonschema.Draft202012Validator(scenario_schema)
    for path in sorted(SCENARIOS_DIR.glob("*.yaml")):
        data = yaml.load(path.read_text(), Loader=_Loader)
        assert list(validator.iter_errors(data)) == [], path.name
    data = yaml.load((SCENARIOS_DIR / "interruption-2s.yaml").read_text(), Loader=_Loader)
    data["segments"][1]["at_ms"] = 5  # both at_ms and after
    assert not validator.is_valid(data)
    del data["segments"][1]["at_ms"], data["segments"][1]["voice"]  # say without voice
    assert not validator.is_valid(data)
    matrix = json.loads((SCHEMAS_DIR / "matrix.json").read_text())
    example = yaml.safe_load(EXAMPLE_MATRIX.read_text())
    assert jsonschema.Draft202012Validator(matrix).is_valid(example)
