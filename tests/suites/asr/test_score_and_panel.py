"""`asr score` on prediction files: leaderboard parity through the CLI, panels for audits,
and an OpenAI-compatible server run end to end with its key kept out of every file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SHARED, make_manifest
from tests.systems.fake_openai_server import FakeOpenAIServer
from voxassay.cli.main import cli

PARITY = SHARED / "parity"


def _invoke(args: list[str], env: dict[str, str] | None = None, code: int = 0) -> Path:
    res = CliRunner().invoke(cli, args, catch_exceptions=False, env=env)
    assert res.exit_code == code, res.output
    return Path(res.stdout.strip().splitlines()[-1])


def test_score_cli_matches_leaderboard_totals_per_set(tmp_path: Path) -> None:
    if not (PARITY / "oal_dev_pairs.jsonl").exists():
        pytest.skip(f"parity set not found at {PARITY}")
    pairs = [json.loads(line) for line in (PARITY / "oal_dev_pairs.jsonl").read_text().splitlines()]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({**p, "system": p["set"]}) + "\n" for p in pairs))
    run = _invoke(["asr", "score", str(preds), "--out", str(tmp_path / "runs")])
    report = json.loads((run / "report.json").read_text())
    expected = json.loads((PARITY / "oal_dev_expected.json").read_text())["sets"]
    got = {s["system"]: s["overall"] for s in report["systems"]}
    assert set(got) == set(expected)
    for name, exp in expected.items():
        o = got[name]
        assert (o["errors"], o["ref_words"]) == (exp["errors"], exp["ref_words"]), name
        assert (o["sub"], o["del"], o["ins"]) == (
            exp["substitutions"],
            exp["deletions"],
            exp["insertions"],
        )
        assert o["wer"] == exp["wer"]  # bit-identical: same integers, same division


def test_panel_of_prediction_files_runs_consensus_audit(tmp_path: Path) -> None:
    refs = {
        "u1": "the quick brown fox jumps over the lazy dog",
        "u2": "she sold the old horse in the spring",
        "u3": "we met at the station at noon",
        "u4": "the children played in the garden until dark",
        "u5": "turn the colour dial to the left",
        "u6": "he whispered something to his brother",
    }
    # three distinct engines share a "mishearing" the reference disagrees with; one copies refs
    systems = {
        "engine_a": {
            "u1": "the quick brown fox jumped over the lazy dog",
            "u2": "she sold the old horse in spring",
            "u3": "we met at the station at new",
            "u4": "the children played in the garden till dark",
            "u5": "turn the color dial to the left",
            "u6": "he whispered something to his mother",
        },
        "engine_b": {
            "u1": "a quick brown fox jumped over the lazy dog",
            "u2": "she sold the old horse in spring",
            "u3": "we met at the station at noon",
            "u4": "children played in the garden till dark",
            "u5": "turn the color dial to left",
            "u6": "he whispered something to his mother",
        },
        "engine_c": {
            "u1": "the quick brown fox jumped over a lazy dog",
            "u2": "she sold an old horse in spring",
            "u3": "we met at station at noon",
            "u4": "the children played in the garden till dark",
            "u5": "turn a color dial to the left",
            "u6": "he whispered something to his mother",
        },
        "memoriser": dict(refs),
    }
    files = []
    for name, preds in systems.items():
        f = tmp_path / f"{name}.jsonl"
        f.write_text(
            "".join(
                json.dumps({"id": i, "text": refs[i], "pred_text": p}) + "\n"
                for i, p in preds.items()
            )
        )
        files.append(str(f))
    run = _invoke(["asr", "score", *files, "--out", str(tmp_path / "r")])
    report = json.loads((run / "report.json").read_text())
    consensus = report["audits"]["consensus"]
    assert consensus["status"] == "ok"
    rows = {r["system"]: r for r in consensus["systems"]}
    assert rows["memoriser"]["rate"] == 1.0 and rows["memoriser"]["dissent_points"] >= 3
    # leave-one-out: an honest engine's consensus includes the memoriser, which never dissents,
    # so honest engines have few or no dissent points and never a high reproduce rate
    assert all((rows[s]["rate"] or 0.0) < 0.5 for s in ("engine_a", "engine_b", "engine_c"))
    assert consensus["flagged"] == ["memoriser"]
    html = (run / "report.html").read_text()
    assert "Consensus dissent" in html


@pytest.mark.live
def test_openai_compat_run_keeps_key_out_of_files(tmp_path: Path, data_dir: Path) -> None:
    m = make_manifest(tmp_path / "m.jsonl", ("read_speech",), limit=3)
    secret = "sk-test-very-secret-123"
    with FakeOpenAIServer(token=secret) as server:
        spec = f"openai-compat:{server.base_url}?model=whisper-1&key_env=VOXASSAY_TEST_KEY"
        run = _invoke(
            [
                "asr",
                "run",
                "-m",
                str(m),
                "-s",
                spec,
                "--workers",
                "2",
                "--out",
                str(tmp_path / "r"),
                "--no-progress",
            ],
            env={"VOXASSAY_TEST_KEY": secret},
        )
        assert len(server.requests) >= 3
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(r["status"] == "ok" for r in recs)
    assert recs[0]["output"]["words"][0]["word"] == "in"
    for f in run.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="ignore"), f
    # without the key the server refuses: every item is an error record, the run still ends
    with FakeOpenAIServer(token=secret) as server:
        spec = f"openai-compat:{server.base_url}?model=whisper-1&key_env=VOXASSAY_TEST_KEY_ABSENT&retries=0"
        run2 = _invoke(  # a system that failed every item: exit 1, the run still written
            [
                "asr",
                "run",
                "-m",
                str(m),
                "-s",
                spec,
                "--out",
                str(tmp_path / "r2"),
                "--no-progress",
            ],
            code=1,
        )
    recs2 = [json.loads(x) for x in (run2 / "records.jsonl").read_text().splitlines()]
    assert {r["status"] for r in recs2} == {"error"} and "401" in recs2[0]["error"]["message"]
