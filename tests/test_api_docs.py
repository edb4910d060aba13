"""docs/api.md's examples run as written (in order, sharing one namespace, from the
repository root so that ../shared/data resolves), and the API's own behaviour."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import voxassay
from tests.conftest import REPO
from voxassay.core.errors import InputError, ManifestError


def _blocks() -> list[str]:
    text = (REPO / "docs/api.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_api_docs_examples_run(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = _blocks()
    assert len(blocks) >= 4
    # relative paths in the examples resolve as from the repository root, outputs go to tmp
    work = tmp_path / "repo"
    work.mkdir()
    os.symlink(data_dir.parent, tmp_path / "shared")
    monkeypatch.chdir(work)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)
    run = namespace["run"]
    assert isinstance(run, voxassay.Run)
    by_system = {(r.system, r.id): r for r in run.records}
    assert by_system[("object:echo", "lj2")].metrics["sub"] == 0
    assert by_system[("object:silent", "lj8")].metrics["del"] == 4
    assert (work / "api-runs").is_dir()


def test_wer_matches_asr_score_counts_and_says_when_not_estimable() -> None:
    from voxassay.suites.asr.wer import score_text

    refs = ["the cat sat on the mat", "a b c"]
    hyps = ["the cat sat on mat", "a x c d"]
    got = voxassay.wer(refs, hyps, normalizer="raw")
    parts = [score_text(r, h, "raw") for r, h in zip(refs, hyps, strict=True)]
    assert got.deletions == sum(p["del"] for p in parts) == 1
    assert (got.substitutions, got.insertions, got.reference_words) == (1, 1, 9)
    assert got.wer == pytest.approx(3 / 9)
    assert voxassay.wer("", "something").wer is None
    with pytest.raises(InputError, match="2 references but 1 hypotheses"):
        voxassay.wer(refs, hyps[:1])


def test_run_refuses_bad_items_and_suites(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="duplicate id 'a'"):
        voxassay.run(
            "asr", [{"id": "a", "audio_filepath": "x.wav"}] * 2, "mock:silence", out=tmp_path
        )
    with pytest.raises(InputError, match="unknown suite 'asx'"):
        voxassay.run("asx", [], "mock:silence", out=tmp_path)
    assert not any(tmp_path.iterdir())


def test_run_keeps_failures_as_records_and_samples_reproducibly(
    data_dir: Path, tmp_path: Path
) -> None:
    clips = data_dir / "read_speech/ljspeech"
    items = [
        {"id": p.stem, "audio_filepath": str(p), "text": "x"} for p in sorted(clips.glob("*.wav"))
    ]

    def boom(audio: object, sample_rate: int) -> str:
        raise RuntimeError("engine crashed")

    a = voxassay.run("asr", items, {"boom": boom}, out=tmp_path, sample=4, seed=7)
    b = voxassay.run("asr", items, {"boom": boom}, out=tmp_path, sample=4, seed=7)
    assert [r.id for r in a.records] and sorted(r.id for r in a.records) == sorted(
        r.id for r in b.records
    )
    assert len(a.records) == 4 and all(r.status == "error" for r in a.records)
    assert "engine crashed" in str(a.records[0].error)
    assert a.info["config"]["subset"] == {"sample": 4, "seed": 7}
