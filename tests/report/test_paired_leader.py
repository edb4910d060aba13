"""A leader is named only from a paired comparison on shared items (issue 32, statistics):
two systems whose unpaired WER intervals overlap, while B makes one more error than A on
every item, are told apart; one item names no leader; through ``asr score``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.helpers.engines import WORDS
from voxassay.cli.main import cli
from voxassay.report.leaders import paired_leader


def _hyp(errors: int) -> str:
    return " ".join(["zulu"] * errors + WORDS[errors:])


def _write(path: Path, extra: int, difficulty: list[int]) -> None:
    rows = [
        {"id": f"u{i}", "text": " ".join(WORDS), "pred_text": _hyp(d + extra)}
        for i, d in enumerate(difficulty)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_paired_differences_name_the_leader_that_overlapping_intervals_hide(
    tmp_path: Path,
) -> None:
    difficulty = [0, 8, 1, 7, 2, 6, 0, 8, 3, 5, 1, 7, 4, 0, 8, 2]
    _write(tmp_path / "a.jsonl", 0, difficulty)
    _write(tmp_path / "b.jsonl", 1, difficulty)
    out = tmp_path / "runs"
    args = ["asr", "score", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "-o", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    (run,) = out.glob("asr-*")
    report = json.loads((run / "report.json").read_text())
    a, b = (s["overall"] for s in report["systems"])
    assert a["ci_hi"] > b["ci_lo"]  # the unpaired intervals overlap
    lead = report["leaders"]["overall"]
    assert lead["leader"] == report["systems"][0]["system"]
    (vs,) = lead["vs"]
    for key in ("diff", "ci_lo", "ci_hi"):  # the same draw for both: every difference is -0.1
        assert abs(vs[key] - -0.1) < 1e-12, vs
    assert vs["n"] == len(difficulty)
    md = (run / "report.md").read_text()
    assert "leads" in md and "paired difference -0.100 [-0.100, -0.100]" in md


def test_one_shared_item_names_no_leader() -> None:
    units = {"a": {"x": (1.0, 10.0, "s")}, "b": {"x": (5.0, 10.0, "s")}}
    res = paired_leader(units, lower_is_better=True)
    assert res["best"] == "a" and res["leader"] is None
    assert res["vs"][0]["ci_lo"] is None and not res["vs"][0]["separated"]
    # nothing shared: no comparison, no leader
    apart = {"a": {"x": (1.0, 10.0, "s")}, "b": {"y": (5.0, 10.0, "t")}}
    assert paired_leader(apart, lower_is_better=True)["leader"] is None
