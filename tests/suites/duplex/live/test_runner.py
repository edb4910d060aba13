"""duplex run: scenarios x agents x repeats into one run, bundles, records, resume, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import SHARED
from voxassay.cli.main import cli

ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
pytestmark = pytest.mark.skipif(
    not ARCTIC.is_dir(), reason=f"needs ../shared/data read speech ({ARCTIC})"
)


def scenario_dir(tmp: Path) -> Path:
    folder = tmp / "scenarios"
    folder.mkdir()
    shutil.copy(ARCTIC / "aew_arctic_a0001.wav", folder / "a.wav")
    shutil.copy(ARCTIC / "aew_arctic_a0002.wav", folder / "b.wav")
    doc: dict[str, Any] = {
        "id": "cut-in",
        "version": 1,
        "category": "interruption",
        "segments": [
            {
                "id": "ask",
                "role": "user",
                "audio": "a.wav",
                "at_ms": 300,
                "intents": ["start"],
                "expected_actions": ["listen"],
            },
            {
                "id": "cut",
                "role": "user",
                "audio": "b.wav",
                "intents": ["interrupt"],
                "expected_actions": ["interrupt"],
                "after": {"event": "playback.started", "ref": "ask", "offset_ms": 800},
            },
        ],
    }
    (folder / "cut-in.yaml").write_text(yaml.safe_dump(doc))
    broken = dict(doc, id="broken")
    broken["segments"] = [dict(doc["segments"][0], audio="a.wav")]
    (folder / "broken.yaml").write_text(yaml.safe_dump(broken))
    return folder


def run(args: list[str], code: int = 0) -> tuple[Path, str]:
    res = CliRunner().invoke(cli, ["duplex", "run", *args], catch_exceptions=False)
    assert res.exit_code == code, res.output
    lines = res.stdout.strip().splitlines()
    return Path(lines[-1] if lines else "."), res.stderr


def records(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for line in (path / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["id"], r["system"], r["repeat"])] = r
    return out


def test_two_agents_repeats_resume_and_error_records(tmp_path: Path) -> None:
    folder = scenario_dir(tmp_path)
    (folder / "a.wav").rename(folder / "a-moved.wav")  # `broken` and `cut-in` cannot render
    shutil.copy(folder / "a-moved.wav", folder / "a2.wav")
    doc = yaml.safe_load((folder / "cut-in.yaml").read_text())
    doc["segments"][0]["audio"] = "a2.wav"
    (folder / "cut-in.yaml").write_text(yaml.safe_dump(doc))
    (folder / "broken.yaml").write_text(
        (folder / "broken.yaml").read_text().replace("a.wav", "a-moved.wav")
    )
    out = tmp_path / "runs"
    agents = ["--agent", "energy?threshold_dbfs=-30", "--agent", "energy?yields=false"]
    path, _ = run(
        [
            "--scenarios",
            str(folder),
            *agents,
            "--repeat",
            "2",
            "--detector",
            "energy",
            "--out",
            str(out),
        ]
    )
    recs = records(path)
    assert len(recs) == 2 * 2 * 2  # scenarios x agents x repeats
    ok = recs[("cut-in", "energy?threshold_dbfs=-30", 1)]
    assert ok["status"] == "ok" and ok["output"]["unit"] == "cut-in#1"
    bundle = path / ok["output"]["bundle"]
    assert bundle == path / "bundles" / "cut-in" / "1" / "energy_threshold_dbfs=-30"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["provenance"]["clock"] == "virtual" and manifest["route"] == "direct"
    # the agent that never yields misses the interruption that the other one takes
    yielding = ok["metrics"]["rates"]["missed_interruption_rate"]
    stubborn = recs[("cut-in", "energy?yields=false", 1)]["metrics"]["rates"]
    assert yielding["k"] == 0
    assert (
        stubborn["missed_interruption_rate"]["k"] == stubborn["missed_interruption_rate"]["n"] == 1
    )
    # a scenario whose audio is gone is an error record; the others ran
    assert recs[("broken", "energy?yields=false", 0)]["status"] == "ok"  # a-moved.wav exists
    report = json.loads((path / "report.json").read_text())
    assert {s["system"] for s in report["systems"]} == set(agents[1::2])

    # a killed run: drop the last two records, resume, nothing else is redone
    lines = (path / "records.jsonl").read_text().splitlines()
    kept = lines[:-2]
    (path / "records.jsonl").write_text("".join(x + "\n" for x in kept))
    before = {json.loads(x)["started_at"] for x in kept}
    again, _ = run(
        [
            "--scenarios",
            str(folder),
            *agents,
            "--repeat",
            "2",
            "--detector",
            "energy",
            "--resume",
            "--out",
            str(out),
        ]
    )
    assert again == path
    after = [json.loads(x) for x in (path / "records.jsonl").read_text().splitlines()]
    assert len(after) == 8 and before <= {r["started_at"] for r in after}


def test_render_and_agent_failures_are_error_records(tmp_path: Path) -> None:
    folder = scenario_dir(tmp_path)
    doc = yaml.safe_load((folder / "cut-in.yaml").read_text())
    doc["segments"][1].pop("audio")
    doc["segments"][1].update(say="Stop, please.", voice="no-such-synthesizer")
    (folder / "cut-in.yaml").write_text(yaml.safe_dump(doc))
    args = ["--scenarios", str(folder), "--agent", "energy", "--detector", "energy"]
    path, err = run([*args, "--out", str(tmp_path / "runs")])
    recs = records(path)
    bad = recs[("cut-in", "energy", 0)]
    assert bad["status"] == "error" and bad["error"]["kind"] == "render"
    assert "no-such-synthesizer" in bad["error"]["message"]
    assert recs[("broken", "energy", 0)]["status"] == "ok"  # the next scenario ran
    assert "not scored: cut-in (render)" in err
    # a scenario file that points at missing audio is refused before anything runs
    (folder / "b.wav").unlink()
    seg = {k: v for k, v in doc["segments"][1].items() if k not in ("say", "voice")}
    doc["segments"][1] = {**seg, "audio": "b.wav"}
    (folder / "cut-in.yaml").write_text(yaml.safe_dump(doc))
    _, err = run([*args, "--out", str(tmp_path / "runs")], code=2)
    assert "cut-in.yaml:" in err and "b.wav" in err
    (folder / "cut-in.yaml").unlink()
    _, err = run(["--scenarios", str(folder), "--agent", "python:no_such_module:make"], code=2)
    assert "no_such_module" in err
    _, err = run(["--scenarios", str(folder), "--only", "nothing-*"], code=2)
    assert "no scenario matches" in err


@pytest.mark.live
def test_a_state_probe_supplies_the_business_state(tmp_path: Path) -> None:
    import sys

    folder = scenario_dir(tmp_path)
    (folder / "broken.yaml").unlink()
    code = (
        "import json, os; print(json.dumps({'session': os.environ['VOXASSAY_SESSION_ID'], "
        "'scenario': os.environ['VOXASSAY_SCENARIO_ID'], 'booked_count': 1}))"
    )
    probe = f'{sys.executable} -c "{code}"'
    args = ["--scenarios", str(folder), "--agent", "energy", "--detector", "energy"]
    path, _ = run([*args, "--state-probe", probe, "--out", str(tmp_path / "runs")])
    rec = records(path)[("cut-in", "energy", 0)]
    state = json.loads((path / rec["output"]["bundle"] / "final-state.json").read_text())
    assert state["scenario"] == "cut-in" and state["session"].startswith("cut-in-r0-")
    assert rec["output"]["session_stats"]["state_probe"]["problem"] is None
    # a failing probe is recorded, and the session is still scored
    path, _ = run([*args, "--state-probe", "false", "--out", str(tmp_path / "runs2")])
    rec = records(path)[("cut-in", "energy", 0)]
    assert rec["status"] == "ok"
    assert "exit 1" in rec["output"]["session_stats"]["state_probe"]["problem"]
    assert not (path / rec["output"]["bundle"] / "final-state.json").exists()


def test_run_with_a_matrix_leaves_the_same_gate_files_as_duplex_gate(tmp_path: Path) -> None:
    """Whichever command gates a run, RUN/gate.json, gate.md, gate.txt and gate.junit.xml are
    its files, and report.json embeds the same GateReport under ``gate``."""
    from voxassay.suites.duplex.gate_output import GATE_FILES

    folder = scenario_dir(tmp_path)
    (folder / "broken.yaml").unlink()
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "id: no-missed-interruptions\ngates:\n  - id: missed\n    metric: missed_interruption_rate\n"
        "    statistic: rate\n    comparator: '<='\n    threshold: 0\n    min_evidence: L1\n"
        "    on_fail: roll_back\n"
    )
    argv = ["--scenarios", str(folder), "--agent", "energy?yields=false", "--detector", "energy"]
    path, err = run([*argv, "--matrix", str(matrix), "--out", str(tmp_path / "runs")], code=1)
    assert sorted(p.name for p in path.glob("gate*")) == sorted(GATE_FILES)
    body = json.loads((path / "gate.json").read_text())
    assert json.loads((path / "report.json").read_text())["gate"] == body
    assert "recommendation" in (path / "gate.txt").read_text() and "recommendation" in err
    again = CliRunner().invoke(cli, ["duplex", "gate", str(path), "-m", str(matrix)])
    assert again.exit_code == 1 and Path(again.stdout.strip().splitlines()[-1]) == path
    redone = json.loads((path / "gate.json").read_text())
    assert {k: v for k, v in redone.items() if k != "generated_at"} == {
        k: v for k, v in body.items() if k != "generated_at"
    }
    # the report built from the run carries the same decision per system
    system = json.loads((path / "report.json").read_text())["systems"][0]
    assert system["gate"]["recommendation"] == body["recommendation"] == "roll_back"
    assert [g["status"] for g in system["gate"]["gates"]] == [g["status"] for g in body["gates"]]


def test_run_applies_the_example_matrix_without_making_the_exit_code(tmp_path: Path) -> None:
    """Without --matrix the example matrix is applied for the report (each agent ends in a
    recommendation) and the run exits 0; no gate files are written."""
    folder = scenario_dir(tmp_path)
    (folder / "broken.yaml").unlink()
    argv = ["--scenarios", str(folder), "--agent", "energy?yields=false", "--agent", "energy"]
    path, err = run([*argv, "--detector", "energy", "--out", str(tmp_path / "runs")], code=0)
    info = json.loads((path / "run.json").read_text())
    assert info["matrix"]["source"] == "example"
    assert info["matrix"]["doc"]["id"] == "example-voice-agent-release"
    systems = json.loads((path / "report.json").read_text())["systems"]
    assert [s["system"] for s in systems] == ["energy?yields=false", "energy"]
    for s in systems:
        assert s["gate"]["matrix"] == "example-voice-agent-release"
        assert s["gate"]["recommendation"] in {
            "ship",
            "keep_in_shadow",
            "roll_back",
            "collect_more_data",
        }
        assert f"recommendation ({s['system']}, example-voice-agent-release)" in err
    assert not list(path.glob("gate*"))
    assert "Recommendation" in (path / "report.md").read_text()
