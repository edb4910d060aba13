"""Hostile input and unreachable clusters (issue 32 item 10). JSON nested 5000 deep is a clear
input error with its file and line in a manifest, a labels file and a provenance sidecar, and
a 400 from the rating app: never a RecursionError traceback or an HTTP 500. A Ray cluster that
cannot be reached is exit 1 at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SHARED
from tests.helpers.typed import voxassay as _code
from voxassay.cli.main import cli

DEEP = "[" * 5000 + "]" * 5000
PLAIN = "python:tests.helpers.engines:plain"
AMI = SHARED / "real_conversations" / "ami_es2004a"


def test_a_deep_manifest_line_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.jsonl").write_text('{"id": "a", "audio_filepath": "a.wav"}\n' + DEEP + "\n")
    args = ["asr", "run", "-m", str(tmp_path / "m.jsonl"), "-s", PLAIN]
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


@pytest.mark.live  # probes loopback ports
def test_an_unreachable_ray_cluster_is_exit_1_at_once_with_no_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ray-address`` at a closed port, and ``auto`` with no cluster to find, fail before any
    work with the reason (Ray itself retried a dead address for over 8 minutes, and ``auto``
    printed a traceback), exit 1 like any unreachable system (issue 32 item 10)."""
    import socket

    pytest.importorskip("ray", reason="pip install 'voxassay[ray]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "m.jsonl").write_text('{"id": "a", "audio_filepath": "a.wav", "text": "x"}\n')
    out = tmp_path / "runs"
    base = ["asr", "run", "-m", str(tmp_path / "m.jsonl"), "-s", PLAIN]
    base += ["--executor", "ray", "-o", str(out)]
    code, said = _code([*base, "--ray-address", f"127.0.0.1:{port}"], capsys)
    assert code == 1 and "cannot be reached" in said and "Traceback" not in said, said
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "no-ray"))  # no `ray start` cluster file
    (tmp_path / "no-ray").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, said = _code([*base, "--ray-address", "auto"], capsys)
    assert code == 1 and "no Ray cluster found" in said, said
    assert not out.exists()


def test_a_gzip_bomb_or_a_corrupt_gzip_is_an_input_error_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cuts file that expands 1000x into one endless line is refused without being
    expanded whole (it peaked at 2.1 GB); a corrupt gzip stream is an input error, not a
    traceback (issue 32 item 10)."""
    import gzip
    import tracemalloc

    from voxassay.core.errors import InputError
    from voxassay.core.manifests import read_items

    bomb = tmp_path / "cuts.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        fh.write(b"\0" * (64 << 20))  # 64 MiB on one line, about 64 KB on disk
    assert bomb.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="over 8 MiB"):
            read_items(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak  # never the whole 64 MiB
    code, said = _code(
        ["asr", "run", "-m", str(bomb), "-s", PLAIN, "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2 and "not a lhotse cut" in said, said
    corrupt = tmp_path / "bad.jsonl.gz"
    corrupt.write_bytes(gzip.compress(b'{"id": "a"}\n' * 1000)[:40] + b"garbage" * 10)
    code, said = _code(
        ["asr", "run", "-m", str(corrupt), "-s", PLAIN, "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2 and "not a readable gzip file" in said and "Traceback" not in said, said
