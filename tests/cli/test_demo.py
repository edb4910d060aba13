"""`voxeval demo` end to end: the embedded data set, both engines, one combined report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_demo_writes_combined_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "voxeval.cli.main", "demo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    demo = Path(proc.stdout.strip().splitlines()[-1])
    assert demo.parent == tmp_path and demo.name.startswith("demo-")
    report = json.loads((demo / "report.json").read_text())
    assert report["suite"] == "demo"
    assert [s["suite"] for s in report["sections"]] == ["asr", "duplex", "tts", "su"]
    asr = report["sections"][0]["report"]
    systems = {s["system"]: s for s in asr["systems"]}
    assert set(systems) == {"faster-whisper", "pocketsphinx"}
    assert set(asr["conditions"]) >= {"clean", "background", "channel"}
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
    html = (demo / "report.html").read_text()
    assert "ASR robustness" in html and "<svg" in html and "data:audio/wav;base64," in html
    # duplex: the reference agent live, both policies, every category, careful ahead
    duplex = report["sections"][1]
    dreport = duplex["report"]
    assert {s["system"] for s in dreport["systems"]} == {"reference:careful", "reference:naive"}
    run_dir = demo / duplex["run_dir"]
    cats = {json.loads(x)["labels"]["category"] for x in (run_dir / "items.jsonl").open()}
    assert len(cats) == 8
    comparison = json.loads((run_dir / "compare.json").read_text())
    (pair,) = [c for c in comparison["comparisons"] if c["system_a"] == "reference:careful"]
    assert pair["overall"]["diff"] < 0  # careful makes fewer behaviour errors than naive
    assert "Full-duplex" in html
    # TTS: piper and two espeak voices, every record ok, a profile over the seven dimensions,
    # and the local voices' deafness to style instructions stated, not hidden
    tts = next(s for s in report["sections"] if s["suite"] == "tts")["report"]
    assert {s["system"] for s in tts["systems"]} == {
        "piper",
        "espeak-ng:en-us+f3",
        "espeak-ng:en-us+m7",
    }
    assert len(tts["profile"]["dimensions"]) == 7
    assert "ignores style instructions" in (demo / "report.md").read_text()
    assert "Text-to-speech" in html
    # SU: the speaker-verification baseline separates the demo's voices
    su = next(s for s in report["sections"] if s["suite"] == "su")
    assert "resemblyzer" in json.dumps(su["report"])
    assert "report:" in proc.stderr  # where the report is, for a human
    # the combined report rebuilds from the folder alone
    again = subprocess.run(
        [sys.executable, "-m", "voxeval.cli.main", "report", str(demo)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert (
        again.returncode == 0
        and json.loads((demo / "report.json").read_text())["sections"][0]["report"]["systems"]
    )


def test_a_failing_suite_demo_is_recorded_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxeval.core.registry import REGISTRY, SuiteInfo
    from voxeval.core.runstore import RunStore
    from voxeval.demo import build_demo_report, failed_suites, run_demo

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
    demo = run_demo(tmp_path, only=["brokentest", "tinytest"])
    assert failed_suites(demo) == ["brokentest"]
    report = build_demo_report(RunStore.open(demo))
    sections = {s["suite"]: s for s in report["sections"]}
    assert "synthesizer exploded" in sections["brokentest"]["error"]
    assert sections["tinytest"]["report"] == {"suite": "tinytest", "systems": []}
    assert "brokentest" in (demo / "report.md").read_text()
    assert "This section failed" in (demo / "report.html").read_text()
