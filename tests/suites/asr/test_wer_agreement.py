"""``voxassay.wer`` and ``asr score`` give one answer on the same pairs: references that
normalize to nothing are left out of both (counted apart), and ``raw`` is plain word error
rate, compounds included (issue 32 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import voxassay
from voxassay.cli.main import cli

PAIRS = [
    ("a", "uh", "hello"),  # the reference is a filler: nothing is left after normalization
    ("b", "the white board is clean", "the whiteboard is clean"),
    ("c", "turn the lights off", "turn lights of"),
]


@pytest.mark.parametrize("normalizer", ["oal-en", "whisper-en", "raw"])
def test_the_library_and_the_command_agree(normalizer: str, tmp_path: Path) -> None:
    path = tmp_path / "sys.jsonl"
    path.write_text(
        "".join(json.dumps({"id": i, "text": r, "pred_text": h}) + "\n" for i, r, h in PAIRS)
    )
    res = CliRunner().invoke(
        cli, ["asr", "score", str(path), "--normalizer", normalizer, "-o", str(tmp_path / "r")]
    )
    assert res.exit_code == 0, res.output
    (report,) = (tmp_path / "r").glob("*/report.json")
    overall = json.loads(report.read_text())["systems"][0]["overall"]
    got = voxassay.wer([r for _, r, _ in PAIRS], [h for _, _, h in PAIRS], normalizer=normalizer)
    assert got.wer == pytest.approx(overall["wer"], abs=1e-12)
    assert got.reference_words == overall["ref_words"]
    merged = normalizer != "raw"
    # "white board" vs "whiteboard": equal under the leaderboard rule, two errors when raw
    one = voxassay.wer(PAIRS[1][1], PAIRS[1][2], normalizer=normalizer)
    assert one.substitutions + one.deletions + one.insertions == (0 if merged else 2)
    if normalizer == "oal-en":
        assert got.empty_references == 1 and got.pairs == 3


def test_the_compound_rule_is_its_own_switch() -> None:
    ref, hyp = "the white board", "the whiteboard"
    assert voxassay.wer(ref, hyp, normalizer="raw", merge_compounds=True).wer == 0.0
    assert voxassay.wer(ref, hyp, normalizer="oal-en", merge_compounds=False).wer == pytest.approx(
        2 / 3
    )
