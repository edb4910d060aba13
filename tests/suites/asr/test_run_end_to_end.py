"""`voxassay asr run` end to end on real recordings, with bad input and failing systems."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from tests.conftest import REPO, make_manifest
from voxassay.cli.main import cli
from voxassay.core.runstore import RunStore

pytestmark = pytest.mark.live

ENGINE = "python:tests.helpers.engines:slow?delay=0"


def _records(run: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (run / "records.jsonl").read_text().splitlines()
        if line.strip()
    ]


def _run(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_bad_items_are_recorded_and_the_run_goes_on(data_dir: Path, tmp_path: Path) -> None:
    m = make_manifest(tmp_path / "clean.jsonl", ("read_speech",), limit=3)
    lines = m.read_text().splitlines()
    # a truncated copy, an empty file, a missing file, an 8 kHz stereo file, an empty reference
    src = data_dir / "read_speech/ljspeech/LJ001-0001.wav"
    (tmp_path / "trunc.wav").write_bytes(src.read_bytes()[:30000])
    (tmp_path / "zero.wav").write_bytes(b"")
    audio, sr = sf.read(src)
    sf.write(tmp_path / "st8k.wav", np.stack([audio[::2], audio[::2]], 1), sr // 2)
    extra = [
        {
            "id": "trunc",
            "audio_filepath": "trunc.wav",
            "text": "printing in the only sense",
            "speaker": "LJ",
        },
        {"id": "zero", "audio_filepath": "zero.wav", "text": "nothing", "speaker": "LJ"},
        {"id": "missing", "audio_filepath": "nope.wav", "text": "nothing", "speaker": "LJ"},
        {"id": "stereo8k", "audio_filepath": "st8k.wav", "text": "printing", "speaker": "LJ"},
        {"id": "emptyref", "audio_filepath": str(src), "text": "", "speaker": "LJ"},
    ]
    m.write_text("\n".join(lines + [json.dumps(e) for e in extra]) + "\n")
    code, out, err = _run(
        [
            "asr",
            "run",
            "-m",
            str(m),
            "-s",
            ENGINE,
            "-s",
            "mock:fail",
            "--out",
            str(tmp_path / "runs"),
            "--no-progress",
        ]
    )
    # mock:fail failed every item: exit 1 (voxassay.core.failures), the run is still written
    assert code == 1
    assert "mock:fail: 8/8 failed: system_load: " in err
    assert f"{ENGINE}: 3/8 failed: " in err and "exit 1: a system failed every item" in err
    run = Path(out.strip().splitlines()[-1])
    assert run.parent == tmp_path / "runs" and (run / "report.html").exists()
    recs = {(r["id"], r["system"]): r for r in _records(run)}
    assert len(recs) == 2 * 8
    # a WAV whose data is shorter than its header says is an error, never a shorter clip
    assert recs[("trunc", ENGINE)]["error"]["kind"] == "truncated"
    assert recs[("zero", ENGINE)]["error"]["kind"] == "empty"
    assert recs[("missing", ENGINE)]["error"]["kind"] == "missing"
    assert recs[("stereo8k", ENGINE)]["status"] == "ok"
    assert recs[("emptyref", ENGINE)]["metrics"]["empty_ref"] is True
    assert all(r["status"] == "error" for (i, s), r in recs.items() if s == "mock:fail")
    report = json.loads((run / "report.json").read_text())
    assert report["suite"] == "asr" and report["metrics_version"] and report["systems"]
    eng = next(s for s in report["systems"] if s["system"] == ENGINE)
    assert eng["overall"]["n"] == 4  # 3 clean + stereo; empty ref kept apart
    assert eng["overall"]["n_empty_ref"] == 1 and eng["overall"]["n_failed"] == 3
    assert eng["failures"]["by_kind"] == {"empty": 1, "missing": 1, "truncated": 1}
    fail = next(s for s in report["systems"] if s["system"] == "mock:fail")
    assert fail["overall"]["n"] == 0 and fail["overall"]["wer"] is None
    assert fail["overall"]["n_failed"] == 8


def test_hang_and_garbage_are_records(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech",), limit=2)
    code, out, _ = _run(
        [
            "asr",
            "run",
            "-m",
            str(m),
            "-s",
            "mock:hang?seconds=30",
            "-s",
            "mock:garble",
            "--timeout",
            "1",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        ]
    )
    assert code == 1  # both systems failed every item
    recs = _records(Path(out.strip().splitlines()[-1]))
    by = {(r["id"], r["system"]): r["status"] for r in recs}
    # the warm-up call already hangs: the system is recorded as failing to load, per item
    assert {s for (i, sy), s in by.items() if sy.startswith("mock:hang")} <= {"timeout", "error"}
    assert {s for (i, sy), s in by.items() if sy == "mock:garble"} == {"unparseable"}


def test_unknown_system_is_usage_error(tmp_path: Path) -> None:
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "a", "audio_filepath": "x.wav", "text": "t"}\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "voxassay.cli.main",
            "asr",
            "run",
            "-m",
            str(m),
            "-s",
            "faster-wisper",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "Did you mean faster-whisper" in proc.stderr


def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech", "accented"))
    n_items = len(m.read_text().splitlines())
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    slow = "python:tests.helpers.engines:slow?delay=0.15"
    args = [
        sys.executable,
        "-m",
        "voxassay.cli.main",
        "asr",
        "run",
        "-m",
        str(m),
        "-s",
        slow,
        "--no-progress",
    ]
    # uninterrupted reference run
    ref = subprocess.run(
        [*args, "--out", str(tmp_path / "ref")], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert ref.returncode == 0, ref.stderr
    ref_run = Path(ref.stdout.strip().splitlines()[-1])
    # killed run
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*args, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    deadline = time.time() + 60
    records = None
    while time.time() < deadline:
        found = list(out.glob("*/records.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 5:
            records = found[0]
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert records is not None
    n_before = len([ln for ln in records.read_text().splitlines() if ln.strip()])
    assert 5 <= n_before < n_items
    kept = {
        json.loads(ln)["id"]: ln
        for ln in records.read_text().splitlines()
        if ln.strip() and ln.endswith("}")
    }
    res = subprocess.run(
        [*args, "--out", str(out), "--resume"], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert res.returncode == 0, res.stderr
    resumed = Path(res.stdout.strip().splitlines()[-1])
    assert resumed == records.parent  # same run directory
    after = _records(resumed)
    assert len(after) == n_items  # nothing lost, nothing redone
    for r in after:  # finished records are kept byte for byte
        if r["id"] in kept:
            assert json.loads(kept[r["id"]]) == r

    def strip(rs: list[dict]) -> dict:
        # system_info rides on the first record after each model load: not a result
        out = {}
        for r in rs:
            output = {k: v for k, v in r["output"].items() if k != "system_info"}
            out[r["id"]] = (r["status"], output, r["metrics"])
        return out

    assert strip(after) == strip(_records(ref_run))
    info = RunStore.open(resumed).info()
    assert info["resumed_at"]
    shutil.rmtree(tmp_path / "ref")


def test_report_rebuilds_from_run_dir_alone(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech", "accented"))
    code, out, _ = _run(
        [
            "asr",
            "run",
            "-m",
            str(m),
            "-s",
            ENGINE,
            "-s",
            "python:tests.helpers.engines:plain",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        ]
    )
    assert code == 0
    run = Path(out.strip().splitlines()[-1])
    first = json.loads((run / "report.json").read_text())
    moved = tmp_path / "elsewhere" / run.name
    shutil.move(str(run), moved)
    m.unlink()  # the manifest is gone; the run keeps its own snapshot
    for f in ("report.json", "report.md", "report.html"):
        (moved / f).unlink()
    code, out2, _ = _run(["report", str(moved)])
    assert code == 0 and out2.strip().splitlines()[-1] == str(moved)
    second = json.loads((moved / "report.json").read_text())
    for key in ("systems", "rank_stability", "conditions"):
        assert first[key] == second[key]
    html = (moved / "report.html").read_text()
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    groups = {(g["group"], g["name"]) for g in second["systems"][0]["groups"]}
    assert ("condition", "clean") in groups and ("accent", "Indian") in groups
    assert ("accent_group", "non-native") in groups and ("accent_group", "native") in groups


def test_compare_two_runs(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech", "accented"))
    runs = []
    for spec in (ENGINE, "python:tests.helpers.engines:plain"):
        code, out, _ = _run(
            ["asr", "run", "-m", str(m), "-s", spec, "--out", str(tmp_path / "r"), "--no-progress"]
        )
        runs.append(out.strip().splitlines()[-1])
    code, out, err = _run(["compare", runs[0], runs[1], "--out", str(tmp_path / "cmp")])
    assert code == 0, err
    cmp_dir = Path(out.strip().splitlines()[-1])
    result = json.loads((cmp_dir / "compare.json").read_text())
    (c,) = result["comparisons"]
    assert c["n_shared"] == len(m.read_text().splitlines()) - 0
    o = c["overall"]
    assert abs(o["diff"] - (o["a"] - o["b"])) < 1e-12 and o["ci_lo"] <= o["diff"] <= o["ci_hi"]
    assert c["ci_unit"] == "speaker"
    # few speakers: the p is exact, with the smallest p that many units can give
    assert o["units"] <= 12 and o["p_method"] == "exact permutation"
    assert o["p_min"] == 2 / 2 ** o["units"] and o["p_value"] >= o["p_min"]
    # one-unit groups give no interval and no p, and say so
    one = [g for g in c["groups"] if g["units"] == 1]
    assert all(g["ci_lo"] is None and g["p_value"] is None for g in one)
    # the terminal shows the summary table, and compare.html is written beside the JSON
    assert "exact (min" in err and "A - B" in err
    html = (cmp_dir / "compare.html").read_text()
    assert "id='summary'" in html and "<nav class='toc'>" in html


def test_process_executor_gives_same_records_and_load_info(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech",), limit=6)
    runs = {}
    for kind, workers in (("thread", 1), ("process", 2)):
        code, out, _ = _run(
            [
                "asr",
                "run",
                "-m",
                str(m),
                "-s",
                ENGINE,
                "--executor",
                kind,
                "--workers",
                str(workers),
                "--out",
                str(tmp_path / kind),
                "--no-progress",
            ]
        )
        assert code == 0
        runs[kind] = Path(out.strip().splitlines()[-1])
    by = {k: {r["id"]: r for r in _records(v)} for k, v in runs.items()}
    assert set(by["thread"]) == set(by["process"]) and len(by["thread"]) == 6
    for i, r in by["thread"].items():
        assert r["output"]["pred_text"] == by["process"][i]["output"]["pred_text"]
        assert r["metrics"] == by["process"][i]["metrics"]
    loads = [r for r in by["process"].values() if "load_s" in r["timing"]]
    assert 1 <= len(loads) <= 2 and all("system_info" in r["output"] for r in loads)
    info = RunStore.open(runs["process"]).info()["systems"][ENGINE]
    assert info["loads"] == len(loads) and info["load_s"] >= 0


def test_report_with_another_normalizer_rescores(tmp_path: Path) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps(
            {
                "id": "a",
                "text": "Colour me happy!",
                "pred_text": "color me happy",
            }
        )
        + "\n"
    )
    code, out, _ = _run(["asr", "score", str(preds), "--out", str(tmp_path / "r")])
    run = Path(out.strip().splitlines()[-1])
    oal = json.loads((run / "report.json").read_text())
    assert oal["normalizer"]["name"] == "oal-en" and oal["systems"][0]["overall"]["errors"] == 0
    code, _, _ = _run(["report", str(run), "--normalizer", "raw"])
    raw = json.loads((run / "report.json").read_text())
    assert code == 0 and raw["normalizer"]["name"] == "raw"
    assert raw["systems"][0]["overall"]["errors"] == 2  # "Colour" and "happy!" differ raw
