"""`voxassay duplex validate`: every kind of problem reported at the right file and line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from voxassay.cli.duplex import duplex
from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.manifest import file_entry
from voxassay.suites.duplex.evidence.validate import (
    DuplexInputError,
    load_manifest,
    load_scenario,
    validate_path,
)
from voxassay.suites.duplex.live.scenarios import DATA_DIR, EXAMPLE_MATRIX, SCENARIOS_DIR

SR = 16_000


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def found(problems: list[Problem], line: int | None, needle: str, severity: str = "error") -> bool:
    return any(p.line == line and needle in p.message and p.severity == severity for p in problems)


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


# --------------------------------------------------------------------------- shipped data


def test_shipped_scenarios_and_matrix_are_clean() -> None:
    assert validate_path(DATA_DIR) == []
    assert validate_path(EXAMPLE_MATRIX) == []
    assert len(list(SCENARIOS_DIR.glob("*.yaml"))) >= 8


# --------------------------------------------------------------------------- scenario YAML

GOOD = """
id: demo
version: 1
category: interruption
segments:
  - id: ask
    role: user
    say: "What time is it?"
    voice: piper
    at_ms: 500
    expected_actions: [listen]
  - id: cut
    role: user
    say: "Stop."
    voice: piper
    after: {event: playback.started, ref: ask, offset_ms: 2000}
    intents: [interrupt]
    expected_actions: [interrupt]
"""


def test_good_scenario_has_no_problems(tmp_path: Path) -> None:
    assert validate_path(write(tmp_path / "s.yaml", GOOD)) == []


def test_schema_errors_point_at_their_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.yaml",
        """
        id: demo
        category: interuption
        segments:
          - id: ask
            role: usr
            say: "What time is it?"
            voice: piper
            at_ms: soon
            expected_action: [listen]
          - id: cut
            role: user
            say: "Stop."
            voice: piper
            after: {event: playback.started, ref: ask, offset_ms: -5}
            expected_actions: [interrupt, respond]
        """,
    )
    problems = validate_path(path)
    assert all(p.file == str(path) for p in problems)
    assert found(problems, 1, "missing required field 'version'")
    assert found(problems, 2, "category: Input should be 'normal_turns'")
    assert found(problems, 5, "segments[0].role")
    assert found(problems, 8, "segments[0].at_ms")
    assert found(problems, 9, "unknown field 'expected_action' (did you mean 'expected_actions'?)")
    assert found(problems, 14, "offset_ms")
    assert found(problems, 15, "segments[1].expected_actions[1]")
    assert len(errors(problems)) == 7


def test_cross_field_errors_point_at_their_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.yaml",
        """
        id: demo
        version: 1
        category: normal_turns
        segments:
          - id: ask
            role: user
            say: "What time is it?"
            at_ms: 500
            expected_actions: [listen]
          - id: ask
            role: user
            audio: clip.wav
            voice: piper
            at_ms: 100
            after: {event: playback.started, ref: nowhere}
            expected_actions: [listen]
          - id: loop-a
            role: user
            say: "a"
            voice: piper
            after: {event: user.speech_stopped, ref: loop-b}
            expected_actions: [listen]
          - id: loop-b
            role: user
            say: "b"
            voice: piper
            after: {event: user.speech_stopped, ref: loop-a}
            expected_actions: [listen]
        """,
    )
    (tmp_path / "clip.wav").write_bytes(b"")
    problems = validate_path(path)
    assert found(problems, 7, "say needs a voice")
    assert found(problems, 10, "duplicate segment id 'ask'")
    assert found(problems, 13, "voice is only used with say")
    assert found(problems, 15, "both at_ms and after")
    assert found(problems, 15, "after.ref 'nowhere' is not a segment id")
    assert found(problems, 21, "after.ref cycle: loop-a -> loop-b -> loop-a")
    assert len(errors(problems)) == 6


def test_yaml_syntax_and_duplicate_keys(tmp_path: Path) -> None:
    syntax = write(tmp_path / "syntax.yaml", "id: x\nsegments:\n  - id: a\n   role: user\n")
    problems = validate_path(syntax)
    assert len(problems) == 1 and problems[0].line == 4 and "YAML syntax" in problems[0].message
    dup = write(
        tmp_path / "dup.yaml", GOOD.replace("    at_ms: 500\n", "    at_ms: 500\n    at_ms: 9\n")
    )
    assert found(validate_path(dup), 10, "duplicate key 'at_ms' (first on line 9)")
    tabs = write(tmp_path / "empty.yaml", "# nothing\n")
    assert found(validate_path(tabs), 1, "empty document")


def test_scenario_advice_is_warnings(tmp_path: Path) -> None:
    text = GOOD.replace("category: interruption", "category: network_media")
    text = text.replace("event: playback.started", "event: output_audio_buffer.started")
    text = text.replace("    expected_actions: [listen]\n", "", 1)
    text = text.replace('say: "Stop."\n    voice: piper', "audio: missing.wav")
    problems = validate_path(write(tmp_path / "s.yaml", text))
    assert found(problems, 3, "no faults declared", "warning")
    assert found(problems, 5, "no expected_actions", "warning")
    assert found(problems, 12, "audio file not found")
    assert found(problems, 13, "OpenAI Realtime name; map it to playback.started", "warning")


def test_load_scenario_raises_with_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", GOOD.replace("ref: ask", "ref: nobody"))
    with pytest.raises(DuplexInputError, match=r"s\.yaml:15: error: .*'nobody'"):
        load_scenario(path)
    assert load_scenario(write(tmp_path / "ok.yaml", GOOD)).segments[1].after is not None


# --------------------------------------------------------------------------- matrix YAML


def test_matrix_errors_and_warnings(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml",
        """
        id: m
        gates:
          - id: fast
            metric: response_first_audio_ms
            statistic: p95
            comparator: "=<"
            threshold: 900
            min_evidence: L3
            on_fail: roll_back
          - id: fast
            metric: interrupt_stop_ms
            statistic: p95
            comparator: "<="
            threshold: 400
            min_evidence: L5
            on_fail: roll_back
        """,
    )
    problems = validate_path(path)
    assert found(problems, 6, "gates[0].comparator")
    assert found(problems, 15, "gates[1].min_evidence")
    fixed = path.read_text().replace('"=<"', '"<="').replace("L5", "L2")
    fixed = fixed.replace("on_fail: roll_back\n", "on_fail: roll_back\n    min_n: 20\n", 1)
    problems = validate_path(write(path, fixed))
    assert found(problems, 11, "duplicate gate id 'fast'")
    assert found(problems, 10, "min_n 20 is below 59", "warning")


def test_unknown_yaml_is_an_error_when_named_and_skipped_in_a_folder(tmp_path: Path) -> None:
    other = write(tmp_path / "ci.yaml", "jobs: {}\n")
    assert found(validate_path(other), 1, "neither a scenario")
    write(tmp_path / "s.yaml", GOOD)
    problems = validate_path(tmp_path)
    assert errors(problems) == [] and found(problems, None, "skipped", "warning")


# --------------------------------------------------------------------------- ledgers


def line_of(**kw: Any) -> str:
    base = {
        "event_id": "e",
        "session_id": "s1",
        "event_type": "user.speech_started",
        "producer": "harness",
        "monotonic_ns": 0,
    }
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_ledger_problems_with_line_numbers(tmp_path: Path) -> None:
    lines = [
        line_of(event_id="e1", monotonic_ns=100),  # 1
        "{broken",  # 2
        line_of(event_id="e3", producer=None),  # 3
        line_of(event_id="e4", event_type="input_audio_buffer.speech_started", monotonic_ns=200),
        line_of(event_id="e5", monotonic_ns=50),  # 5 goes back
        line_of(event_id="e1", monotonic_ns=300),  # 6 duplicate id
        "",  # 7 blank
        line_of(event_id="e8", event_type="tool.completed", monotonic_ns=400, task_id="t9"),
        line_of(event_id="e9", monotonic_ns=500, colour="red"),  # 9 unknown field
        line_of(event_id="e10", event_type="playback.started", playback_id="p", response_id="r"),
        line_of(event_id="e11", event_type="playback.stopped", playback_id="p", response_id="x"),
        line_of(event_id="e12", event_type="tts.chunk", producer="agent", response_id="r"),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    problems = validate_path(path)
    assert found(problems, 2, "malformed JSON")
    assert found(problems, 3, "missing required field 'producer'")
    assert found(problems, 4, "map it to vad.speech_started", "warning")
    assert found(problems, 5, "goes back 150 ns (line 4 was later)", "warning")
    assert found(problems, 6, "duplicate event_id 'e1' (first on line 1)")
    assert found(problems, 8, "tool.completed for task t9 that was never requested")
    assert found(problems, 9, "unknown field 'colour'", "warning")
    assert found(problems, 11, "playback_id 'p' belongs to response 'r' (line 10)")
    assert found(problems, 10, "response_id 'r' is used but no response.created", "warning")
    assert found(problems, None, "producer 'agent' has no clock.producer record", "warning")
    assert len(errors(problems)) == 5


def test_repeated_ledger_problems_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("{bad\n" * 50)
    problems = validate_path(path)
    assert len(problems) == 21
    assert found(problems, None, "... 30 more line(s) with the same problem")


# --------------------------------------------------------------------------- bundles


def tone(seconds: float, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    mono = 0.1 * np.sin(2 * np.pi * 220 * t)
    return np.stack([mono] * channels, axis=1) if channels > 1 else mono


def make_bundle(
    folder: Path,
    seconds: float = 3.0,
    span_s: float = 2.5,
    mixed_channels: int | None = 2,
    provenance: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    scenario: str | None = GOOD,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    sf.write(folder / "input.wav", tone(seconds), SR)
    sf.write(folder / "output.wav", tone(seconds), SR)
    if mixed_channels:
        sf.write(folder / "mixed.wav", tone(seconds, mixed_channels), SR)
    ns = int(span_s * 1e9)
    events = [
        ProducerClock(producer="agent", kind="virtual").to_event("s1", 0),
        ProducerClock(producer="harness", kind="virtual").to_event("s1", 0),
        Event.new("user.speech_started", session_id="s1", producer="harness", monotonic_ns=0),
        Event.new(
            "response.created",
            session_id="s1",
            producer="agent",
            monotonic_ns=ns // 2,
            response_id="r1",
        ),
        Event.new(
            "playback.started",
            session_id="s1",
            producer="agent",
            monotonic_ns=ns,
            response_id="r1",
            playback_id="p1",
        ),
    ]
    (folder / "events.jsonl").write_text("".join(e.to_json() + "\n" for e in events))
    (folder / "final-state.json").write_text('{"final_date": "2026-08-10"}\n')
    if scenario:
        (folder / "scenario.yaml").write_text(textwrap.dedent(scenario).lstrip("\n"))
    names = ["input.wav", "output.wav", "events.jsonl", "final-state.json"]
    names += ["mixed.wav"] if mixed_channels else []
    names += ["scenario.yaml"] if scenario else []
    manifest = {
        "schema_version": 1,
        "session_id": "s1",
        "scenario": {"id": "demo", "version": 1},
        "created_at": "2026-11-29T12:00:00Z",
        "producers": {"harness": "0.1.0", "agent": "ref-1"},
        "files": [file_entry(folder / n, folder).model_dump(exclude_none=True) for n in names],
        "clock": {"kind": "virtual", "compute": "charged"},
        "provenance": provenance
        or {
            "transport": "in_process",
            "clock": "virtual",
            "playback": "modelled",
            "capture": "none",
            "traffic": "synthetic",
            "acoustic_events": "output_stream",
        },
        "route": "direct",
        "language": "en",
        "system": {"name": "reference", "version": "1", "config": {"policy": "default"}},
        "privacy": {"redacted": False, "retention_days": 30, "purpose": "evaluation"},
        **(extra or {}),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def test_valid_bundle(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b")
    assert validate_path(bundle) == []
    assert load_manifest(bundle / "manifest.json").session_id == "s1"
    # a folder of bundles (a run's bundles/<item>/<repeat>/) is walked
    make_bundle(tmp_path / "run" / "bundles" / "item-1" / "0")
    assert validate_path(tmp_path / "run") == []


def test_bundle_missing_files_and_hash_mismatch(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b")
    (bundle / "output.wav").unlink()
    with open(bundle / "events.jsonl", "a") as fh:
        fh.write(line_of(event_id="late", producer="harness", monotonic_ns=10) + "\n")
    problems = validate_path(bundle)
    manifest_lines = (bundle / "manifest.json").read_text().splitlines()
    out_line = next(i for i, t in enumerate(manifest_lines, 1) if '"output.wav"' in t)
    ev_line = next(i for i, t in enumerate(manifest_lines, 1) if '"events.jsonl"' in t)
    assert any(
        p.file == str(bundle / "output.wav") and "required bundle file missing" in p.message
        for p in problems
    )
    assert found(problems, out_line, "output.wav is listed but missing")
    sha_line = next(p.line for p in problems if "events.jsonl has" in p.message)
    assert sha_line == ev_line + 2  # the "bytes" field of that entry
    assert all(p.file.startswith(str(bundle)) for p in problems)


def test_bundle_tampered_content_same_size(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b")
    data = bytearray((bundle / "final-state.json").read_bytes())
    data[2] = ord("X")
    (bundle / "final-state.json").write_bytes(bytes(data))
    problems = validate_path(bundle)
    assert any("final-state.json: sha256 does not match" in p.message for p in errors(problems))


def test_bundle_audio_checks(tmp_path: Path) -> None:
    short = make_bundle(tmp_path / "short", seconds=1.0, span_s=2.5)
    problems = validate_path(short)
    too_short = [p for p in problems if "does not cover the events" in p.message]
    assert {Path(p.file).name for p in too_short} == {"input.wav", "output.wav", "mixed.wav"}
    mono = make_bundle(tmp_path / "mono", mixed_channels=1)
    manifest = json.loads((mono / "manifest.json").read_text())
    problems = validate_path(mono)
    assert any(
        p.file.endswith("mixed.wav") and "mono where stereo is expected" in p.message
        for p in errors(problems)
    ), manifest["files"]
    broken = make_bundle(tmp_path / "broken")
    (broken / "input.wav").write_bytes(b"RIFF not really a wav file")
    problems = validate_path(broken)
    assert any(p.file.endswith("input.wav") and "audio not readable" in p.message for p in problems)


def test_bundle_ids_scenario_and_manifest_claims(tmp_path: Path) -> None:
    bundle = make_bundle(
        tmp_path / "b",
        scenario=GOOD.replace("id: demo", "id: other"),
        provenance={
            "transport": "socket",
            "clock": "monotonic",
            "playback": "real_device_capture",
            "capture": "none",
        },
        extra={"evidence_level": "L3"},
    )
    with open(bundle / "events.jsonl", "a") as fh:
        fh.write(line_of(event_id="x", session_id="s2", monotonic_ns=1) + "\n")
    problems = validate_path(bundle)
    n_lines = len((bundle / "events.jsonl").read_text().splitlines())
    assert found(problems, n_lines, "session_id 's2' is not the bundle's 's1'")
    assert any(
        p.file.endswith("scenario.yaml") and "other v1 but the manifest names demo v1" in p.message
        for p in problems
    )
    warnings = [p for p in problems if p.severity == "warning" and p.file.endswith("manifest.json")]
    text = " | ".join(p.message for p in warnings)
    assert "'evidence_level' is ignored" in text
    assert "playback claims a real device but nothing was captured" in text
    assert "provenance.clock is monotonic but clock.kind is virtual" in text


# --------------------------------------------------------------------------- paths and CLI


def test_unrecognised_paths(tmp_path: Path) -> None:
    wav = tmp_path / "a.wav"
    sf.write(wav, tone(0.1), SR)
    assert found(validate_path(wav), None, "cannot tell what this is")
    (tmp_path / "empty").mkdir()
    assert found(validate_path(tmp_path / "empty"), None, "no scenarios, matrices")
    assert found(validate_path(tmp_path / "nope.yaml"), None, "no such file")


def test_cli_exit_codes_and_format(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(duplex, ["validate", str(SCENARIOS_DIR), str(EXAMPLE_MATRIX)])
    assert ok.exit_code == 0, ok.output
    bad = write(tmp_path / "bad.yaml", GOOD.replace("ref: ask", "ref: nobody"))
    result = runner.invoke(duplex, ["validate", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:15: error: segments[1].after.ref: after.ref 'nobody'" in result.output
    warn = write(tmp_path / "warn.yaml", GOOD.replace("    expected_actions: [listen]\n", "", 1))
    result = runner.invoke(duplex, ["validate", str(warn)])
    assert result.exit_code == 0 and f"{warn}:5: warning:" in result.output
    quiet = runner.invoke(duplex, ["validate", "--errors-only", str(warn)])
    assert quiet.exit_code == 0 and "warning:" not in quiet.stdout
    missing = runner.invoke(duplex, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2
    assert runner.invoke(duplex, ["validate"]).exit_code == 2


@pytest.mark.live
def test_duplex_cli_help_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from voxassay.cli.duplex import duplex\n"
        "for args in (['--help'], ['validate', '--help'], ['schema', '--help']):\n"
        "    assert CliRunner().invoke(duplex, args).exit_code == 0\n"
        "print(','.join(m for m in ('pydantic', 'yaml', 'soundfile', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
