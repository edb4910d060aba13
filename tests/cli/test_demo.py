"""`voxassay demo` end to end: one real run of the command (module fixture) that every section's
test reads, the combined report, and a failing suite recorded while the others run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.live


@dataclass
class Demo:
    """One ``voxassay demo`` run (the real command, in a subprocess) that every demo test reads."""

    proc: subprocess.CompletedProcess[str]
    folder: Path

    @property
    def report(self) -> dict[str, Any]:
        return json.loads((self.folder / "report.json").read_text())

    def section(self, suite: str) -> dict[str, Any]:
        return next(s for s in self.report["sections"] if s["suite"] == suite)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run(
        [sys.executable, "-m", "voxassay.cli.main", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = Path(proc.stdout.strip().splitlines()[-1])
    assert folder.parent == out and folder.name.startswith("demo-")
    return Demo(proc, folder)


@pytest.mark.slow
def test_demo_writes_combined_report(demo: Demo) -> None:
    report = demo.report
    assert report["suite"] == "demo" and report["size"] == "quick"
    assert [s["suite"] for s in report["sections"]] == ["asr", "duplex", "tts", "su", "sts"]
    assert "report:" in demo.proc.stderr  # where the report is, for a human
    html = (demo.folder / "report.html").read_text()
    md = (demo.folder / "report.md").read_text()
    # the wall time, lane and start of every section and the total are stated
    info = json.loads((demo.folder / "run.json").read_text())
    assert info["config"]["schedule"] == "parallel" and "side by side on two lanes" in md
    for name, run in info["runs"].items():
        assert run["started_s"] + run["seconds"] <= info["seconds"] + 0.2
        assert f"| {name} | {run['lane']} | {run['started_s']} s | {run['seconds']} s |" in md
    assert f"| total |  |  | {info['seconds']} s |" in md and "wall time" in html
    # the duplex section (latencies) ran here at normal priority, the shortest demo (SU) on
    # the low-priority lane from the start; both lanes overlapped
    lanes = {name: run["lane"] for name, run in info["runs"].items()}
    assert lanes["duplex"] == "main" and lanes["su"] == "low priority (SCHED_IDLE)"
    assert info["runs"]["su"]["started_s"] < info["runs"]["duplex"]["seconds"]
    assert info["seconds"] < sum(r["seconds"] for r in info["runs"].values())
    assert (
        "ASR robustness" in html
        and "<svg" in html
        and "data:audio/ogg; codecs=opus;base64," in html
    )
    assert "Full-duplex" in html and "Text-to-speech" in html and "Speech-to-speech" in html
    # the first screen: the two agents' recommendations, a sentence per domain, then one
    # capability profile across domains (table and picture), before the contents
    summary = html[html.index("id='summary'") : html.index("<nav class='toc'>")]
    assert summary.count("class='verdict ") == 2 and "reference:naive" in summary
    for domain in ("ASR", "Duplex", "TTS", "SU"):
        assert f"<td class='l'>{domain}</td>" in summary
    assert "<svg" in summary and "fails no gate but lacks evidence at L3 and L4" in summary
    assert (
        md.index("## Summary")
        < md.index("| domain | system | dimension |")
        < md.index("## Wall time")
    )
    assert "<audio" in html and os.path.getsize(demo.folder / "report.html") <= 3_000_000


@pytest.mark.slow
def test_demo_asr_section_shows_both_engines_and_the_conditions(demo: Demo) -> None:
    asr = demo.section("asr")["report"]
    systems = {s["system"]: s for s in asr["systems"]}
    assert set(systems) == {"faster-whisper", "pocketsphinx"}
    assert set(asr["conditions"]) >= {"clean", "background", "channel"}
    assert 15 <= asr["n_items"] <= 30  # about 20 items: each capability once
    for s in systems.values():
        assert s["status_counts"].get("ok") == asr["n_items"]  # every demo item scored
    clean = {
        g["name"]: g["wer"]
        for g in systems["faster-whisper"]["groups"]
        if g["group"] == "condition"
    }
    assert clean["clean"] < clean["background"]  # the demo shows what it is meant to show
    backgrounds = {
        g["name"] for g in systems["faster-whisper"]["groups"] if g["group"] == "background"
    }
    assert backgrounds == {"noise", "babble", "music"}


@pytest.mark.slow
def test_demo_duplex_section_ranks_careful_above_naive(demo: Demo) -> None:
    """The reference agent live, both policies, five categories, careful ahead."""
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.suite import DEMO_SETS

    duplex = demo.section("duplex")
    dreport = duplex["report"]
    assert {s["system"] for s in dreport["systems"]} == {"reference:careful", "reference:naive"}
    run_dir = demo.folder / duplex["run_dir"]
    ids = [json.loads(x)["id"] for x in (run_dir / "items.jsonl").open()]
    assert ids == [sc.id for sc, _ in load_scenario_set(DEMO_SETS["quick"])]
    cats = {json.loads(x)["labels"]["category"] for x in (run_dir / "items.jsonl").open()}
    assert len(cats) == 5
    comparison = json.loads((run_dir / "compare.json").read_text())
    (pair,) = [c for c in comparison["comparisons"] if c["system_a"] == "reference:careful"]
    assert pair["overall"]["diff"] < 0  # careful makes fewer behaviour errors than naive
    # the first screen tells the two apart: careful fails no gate and lacks the L3/L4 evidence
    # (its agents run at zero compute, so the machine's load cannot fail it), naive fails gates
    verdicts = {s["system"]: s["gate"]["recommendation"] for s in dreport["systems"]}
    assert verdicts == {
        "reference:careful": "collect_more_data",
        "reference:naive": "keep_in_shadow",
    }
    first = next(
        line
        for line in (demo.folder / "report.md").read_text().splitlines()
        if line.startswith("- Full-duplex turn-taking: ")
    )
    assert "reference:careful fails no gate but lacks evidence at L3 and L4" in first
    assert ": collect more data; reference:naive fails " in first and first.endswith(
        ": keep in shadow."
    )


@pytest.mark.slow
def test_demo_tts_section_profiles_seven_dimensions(demo: Demo) -> None:
    """Piper and an espeak voice, every record ok, a profile over the seven dimensions,
    and the local voices' deafness to style instructions stated, not hidden."""
    tts = demo.section("tts")["report"]
    assert {s["system"] for s in tts["systems"]} == {"piper", "espeak-ng:en-us+f3"}
    assert len(tts["profile"]["dimensions"]) == 7
    assert "ignores style instructions" in (demo.folder / "report.md").read_text()
    run_dir = demo.folder / demo.section("tts")["run_dir"]
    statuses = {json.loads(x)["status"] for x in (run_dir / "records.jsonl").open()}
    assert statuses == {"ok"}


@pytest.mark.slow
def test_demo_su_section_runs_both_baselines(demo: Demo) -> None:
    """The speaker-verification baseline separates the demo's voices; the humanlikeness
    baseline ranks; emotion is said to have no offline specialist."""
    rep = demo.section("su")["report"]
    by = {s["system"]: s for s in rep["systems"]}
    spk = by["resemblyzer"]["tasks"]["speaker_match_segmented"]
    assert spk["n"] > 0 and spk["n_failed"] == 0 and spk["accuracy"] >= 0.7
    syn = by["dnsmos-human"]["tasks"]["synthetic_detection"]
    assert syn["n"] > 0 and syn["auc"] is not None
    rows = {t["task"]: t for t in rep["tasks"]}
    assert rows["emotion"]["n_test_items"] == 0
    assert any("No offline specialist" in n for n in rows["emotion"]["notes"])
    assert any("Piper" in n for n in rows["synthetic_detection"]["notes"])
    assert [p["family"] for p in rep["paired_variants"]] == ["speaker_match"]


@pytest.mark.slow
def test_demo_report_rebuilds_from_the_folder_alone(demo: Demo) -> None:
    before = demo.report
    again = subprocess.run(
        [sys.executable, "-m", "voxassay.cli.main", "report", str(demo.folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    after = demo.report
    assert after["sections"][0]["report"]["systems"]
    assert [s["suite"] for s in after["sections"]] == [s["suite"] for s in before["sections"]]
    assert after["seconds"] == before["seconds"]


def test_full_demo_uses_the_larger_sets() -> None:
    """``voxassay demo --full`` runs the sets the demo ran before the quick ones existed."""
    from voxassay.suites.asr.suite import QUICK_DEMO
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.suite import DEMO_SETS as DUPLEX_SETS
    from voxassay.suites.tts.items import load_item_set
    from voxassay.suites.tts.suite import DEMO_SETS as TTS_SETS

    assert DUPLEX_SETS == {"quick": "quick", "full": "demo"}
    assert TTS_SETS == {"quick": "quick", "full": "demo"}
    quick = {sc.id for sc, _ in load_scenario_set("quick")}
    assert len(quick) == 5 and quick < {sc.id for sc, _ in load_scenario_set("demo")}
    _, q = load_item_set("quick")
    _, d = load_item_set("demo")
    assert 10 <= len(q) <= 16 and {it.id for it in q} < {it.id for it in d}
    from voxassay.suites.tts.suite import DEMO_SYSTEMS, QUICK_DEMO_SYSTEMS

    assert len(DEMO_SYSTEMS) == 3 and set(QUICK_DEMO_SYSTEMS) < set(DEMO_SYSTEMS)
    assert {it.dimension for it in q} == {it.dimension for it in d}
    assert QUICK_DEMO["n_sentences"] < 16  # the full ASR set uses the builder's defaults
    from click.testing import CliRunner

    from voxassay.cli.main import cli

    assert "--full" in CliRunner().invoke(cli, ["demo", "--help"]).output


def test_a_failing_suite_demo_is_recorded_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxassay.core.registry import REGISTRY, SuiteInfo
    from voxassay.core.runstore import RunStore
    from voxassay.demo import build_demo_report, failed_suites, run_demo

    def broken_demo(out: Path, **_: object) -> RunStore:
        raise RuntimeError("synthesizer exploded")

    def tiny_demo(out: Path, **_: object) -> RunStore:
        return RunStore.create(out, "tinytest", {"x": 1}, None)

    REGISTRY.suites()  # load the built-ins first; the test suites are removed afterwards
    monkeypatch.setitem(
        REGISTRY._suites, "brokentest", SuiteInfo("brokentest", "fails", demo=broken_demo)
    )
    monkeypatch.setitem(
        REGISTRY._suites,
        "tinytest",
        SuiteInfo(
            "tinytest",
            "works",
            demo=tiny_demo,
            report=lambda store, **_: {"suite": "tinytest", "systems": []},
        ),
    )
    demo = run_demo(tmp_path, only=["brokentest", "tinytest"], serial=True)
    assert failed_suites(demo) == ["brokentest"]
    report = build_demo_report(RunStore.open(demo))
    sections = {s["suite"]: s for s in report["sections"]}
    assert "synthesizer exploded" in sections["brokentest"]["error"]
    assert sections["tinytest"]["report"] == {"suite": "tinytest", "systems": []}
    assert "brokentest" in (demo / "report.md").read_text()
    assert "This section failed" in (demo / "report.html").read_text()


def test_progress_from_the_low_priority_lane_reaches_the_bars_here() -> None:
    """The lane's demos drive the parent's progress bars through a queue: tasks keep their
    own ids per suite, updates of unknown tasks are dropped, a None ends the relay."""
    import queue

    from voxassay.demo import ProgressRelay, apply_progress

    class Bars:  # the parent's rich Progress, recorded (the edge of what is tested)
        def __init__(self) -> None:
            self.calls: list[tuple[Any, ...]] = []
            self.console = self

        def log(self, *objects: Any) -> None:
            self.calls.append(("log", *objects))

        def add_task(self, description: str, **fields: Any) -> int:
            self.calls.append(("add", description, fields))
            return 100 + len(self.calls)

        def advance(self, task: int, advance: float = 1) -> None:
            self.calls.append(("advance", task, advance))

        def update(self, task: int, **fields: Any) -> None:
            self.calls.append(("update", task, fields))

    events: queue.Queue[Any] = queue.Queue()
    asr, su = ProgressRelay(events, "asr"), ProgressRelay(events, "su")
    a = asr.add_task("asr pocketsphinx", total=3, status="")
    b = su.add_task("su resemblyzer", total=2)
    assert a == b == 1  # ids are per relay; the parent maps (suite, id) to its own
    asr.advance(a)
    su.update(b, status="failed 1")
    asr.advance(7)  # never added: dropped
    asr.console.log("asr demo:", "built 21 items")
    events.put(None)
    bars = Bars()
    apply_progress(events, bars)
    assert bars.calls == [
        ("add", "asr pocketsphinx", {"total": 3, "status": ""}),
        ("add", "su resemblyzer", {"total": 2}),
        ("advance", 101, 1),
        ("update", 102, {"status": "failed 1"}),
        ("log", "asr demo: built 21 items"),
    ]
