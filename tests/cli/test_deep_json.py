"""JSON nested 5000 deep (hostile input) is a clear input error with its file and line in a
manifest, a labels file and a provenance sidecar, and a 400 from the rating app: never a
RecursionError traceback or an HTTP 500 (issue 32 item 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SHARED
from voxassay.cli.main import cli, main

DEEP = "[" * 5000 + "]" * 5000
AMI = SHARED / "real_conversations" / "ami_es2004a"


def _code(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out + got.err


def test_a_deep_manifest_line_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.jsonl").write_text('{"id": "a", "audio_filepath": "a.wav"}\n' + DEEP + "\n")
    args = [
        "asr",
        "run",
        "-m",
        str(tmp_path / "m.jsonl"),
        "-s",
        "python:tests.helpers.engines:plain",
    ]
    code, said = _code([*args, "-o", str(tmp_path / "r")], capsys)
    assert code == 2 and "m.jsonl:2:" in said and "nested too deeply" in said, said
    assert "Traceback" not in said


@pytest.mark.skipif(not AMI.is_dir(), reason=f"needs {AMI}")
def test_deep_labels_and_sidecars_are_input_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user, agent = tmp_path / "u.wav", tmp_path / "a.wav"
    shutil.copy(AMI / "FEE013.wav", user)
    shutil.copy(AMI / "FEE016.wav", agent)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(DEEP + "\n")
    base = [
        "duplex",
        "score",
        "--user",
        str(user),
        "--agent",
        str(agent),
        "-o",
        str(tmp_path / "r"),
    ]
    code, said = _code([*base, "--labels", str(labels)], capsys)
    assert code == 2 and f"{labels}:1" in said and "nested too deeply" in said, said
    (tmp_path / "provenance.json").write_text(DEEP)
    res = CliRunner().invoke(cli, base)
    assert res.exit_code == 2 and "nested too deeply" in res.output, res.output
    assert "Traceback" not in res.output


@pytest.mark.live  # the rating app in its own process
def test_the_rating_app_answers_deep_json_with_400(tmp_path: Path) -> None:
    from tests.study.helpers import LIKERT, Served, read_invites, write_items, write_questions
    from voxassay.study.create import create_study

    items = write_items(tmp_path / "items.jsonl", n_signals=1, systems=("ref",))
    q = write_questions(tmp_path / "q.yaml", evals=[LIKERT], gold={"traps": 0})
    study = create_study([items], q, tmp_path / "out", raters=3).path
    server = Served(study)
    try:
        token = next(v for k, v in read_invites(study).items() if k != "admin")
        with server.client(token) as c:
            r = c.post("/api/answer", content=DEEP, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert server.proc.poll() is None  # still serving
    finally:
        server.stop()
