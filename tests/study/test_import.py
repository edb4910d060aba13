"""``study import``: long CSV in, every bad row reported with its line and reason, good rows
into an existing study or a new minimal one; the export imports back unchanged."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.study.helpers import LIKERT, PAIRWISE, run_cli, study_json, write_items, write_questions
from voxassay.core.errors import InputError
from voxassay.study.create import create_study
from voxassay.study.importer import import_ratings
from voxassay.study.store import StudyStore, export_ratings_csv


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    items = write_items(tmp_path / "items.jsonl", n_signals=2, systems=("ref", "lyra_6"))
    q = write_questions(tmp_path / "q.yaml", evals=[LIKERT, PAIRWISE], gold={"traps": 0})
    return create_study([items], q, tmp_path / "out", raters=3).path


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.mark.live
def test_bad_rows_are_reported_with_lines_and_skipped(study_dir: Path, tmp_path: Path) -> None:
    study = study_json(study_dir)
    single = next(i for i in study["items"] if i["kind"] == "single")
    pair = next(i for i in study["items"] if i["kind"] == "pair")
    s_id, s_sys = single["id"], single["stimuli"][0]["system"]
    p_id, pa, pb = pair["id"], pair["stimuli"][0]["system"], pair["stimuli"][1]["system"]
    rows = [
        f"ext1,{s_id},{s_sys},quality,4,2026-03-01T10:00:00Z",  # 2 ok
        f"ext1,{s_id},{s_sys},quality,5,2026-03-01T10:00:01Z",  # 3 duplicate
        f"ext2,{s_id},{s_sys},quality,7,",  # 4 out of range
        f"ext2,{s_id},{s_sys},quality,abc,",  # 5 not a number
        f"ext2,{s_id},wrong-system,quality,3,",  # 6 system mismatch
        f"ext2,nope,{s_sys},quality,3,",  # 7 unknown item
        f"ext2,{s_id},{s_sys},loudness,3,",  # 8 unknown eval
        f"ext2,{s_id},{s_sys},preference,1,",  # 9 eval kind vs item kind
        f",{s_id},{s_sys},quality,3,",  # 10 empty rater
        f"ext2,{s_id},{s_sys},quality,3,yesterday",  # 11 bad timestamp
        f"ext2,{s_id},{s_sys},quality,3,,extra",  # 12 too many fields
        f"ext2,{s_id},{s_sys},quality,2.5,",  # 13 not a scale point
        f"ext2,{p_id},{pa},preference,0.5,2026-03-01 12:00:00",  # 14 ok (naive time = UTC)
        f"ext3,{p_id},{pa},preference,0.3,",  # 15 pairwise not 0/0.5/1
        f"ext3,{p_id},{pb},preference,1,",  # 16 A/B swapped
        "",  # blank lines are ignored
        f"ext3,{s_id},{s_sys},quality,inf,",  # 18 not finite
        f"ext3,{s_id},{s_sys},quality,3",  # 19 no timestamp field at all: fine (trailing)
        f"ext4,{s_id},{s_sys}",  # 20 required fields missing
    ]
    src = write_csv(tmp_path / "r.csv", "rater,item,system,eval,score,timestamp", rows)
    report = import_ratings(src, study_dir=study_dir)
    bad = dict(report.bad)
    assert report.imported == 3 and len(report.bad) == 15 and report.rows == 18
    assert "duplicate of line 2" in bad[3]
    assert "not a valid answer" in bad[4] and "not a number" in bad[5]
    assert "does not match" in bad[6] and "unknown item" in bad[7]
    assert "unknown eval" in bad[8] and "pairwise" in bad[9]
    assert "empty rater" in bad[10] and "ISO 8601" in bad[11] and "fields" in bad[12]
    assert "not a valid answer" in bad[13] and "0, 0.5 or 1" in bad[15]
    assert "does not match" in bad[16] and "not a number" in bad[18] and "fields" in bad[20]
    assert 19 not in bad
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        got = {(r["rater"], r["eval"]): r for r in store.ratings()}
    finally:
        store.close()
    assert got[("ext1", "quality")]["timestamp"] == "2026-03-01T10:00:00.000Z"
    assert got[("ext2", "preference")]["timestamp"] == "2026-03-01T12:00:00.000Z"
    assert got[("ext1", "quality")]["source"] == "import:r.csv"
    # the CLI prints each bad row and the summary; --strict makes bad rows an error
    r = run_cli("study", "import", str(src), "--study", str(study_dir))
    assert r.returncode == 0, r.stderr
    assert f"{src}:3: duplicate" in r.stderr and "3 unchanged" in r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(study_dir)
    r = run_cli("study", "import", str(src), "--study", str(study_dir), "--strict")
    assert r.returncode == 2


@pytest.mark.live
def test_file_level_problems_exit_2(study_dir: Path, tmp_path: Path) -> None:
    no_cols = write_csv(tmp_path / "a.csv", "rater,item,score", ["a,b,1"])
    with pytest.raises(InputError, match="system, eval"):
        import_ratings(no_cols, study_dir=study_dir)
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        import_ratings(empty, study_dir=study_dir)
    r = run_cli("study", "import", str(no_cols), "--study", str(study_dir))
    assert r.returncode == 2 and "missing required column" in r.stderr
    only_bad = write_csv(tmp_path / "b.csv", "rater,item,system,eval,score", ["x,y,z,w,notnum"])
    r = run_cli("study", "import", str(only_bad), "--study", str(study_dir))
    assert r.returncode == 2 and "b.csv:2" in r.stderr and "no row could be imported" in r.stderr
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"rater,item,system,eval,score\n\xff\xfe\x00,1,2,3,4\n")
    r = run_cli("study", "import", str(binary), "--study", str(study_dir))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_export_round_trip_and_revisions(study_dir: Path, tmp_path: Path) -> None:
    study = study_json(study_dir)
    rows = []
    for n, item in enumerate(study["items"]):
        if item["kind"] == "single":
            rows.append(
                f"ext{n % 3},{item['id']},{item['stimuli'][0]['system']},quality,{1 + n % 5},"
            )
        else:
            a, b = item["stimuli"][0]["system"], item["stimuli"][1]["system"]
            rows.append(f"ext{n % 3},{item['id']},{a},preference,1,,{b}")
    src = write_csv(tmp_path / "in.csv", "rater,item,system,eval,score,timestamp,system_b", rows)
    assert import_ratings(src, study_dir=study_dir).imported == len(rows)
    out = tmp_path / "out.csv"
    assert export_ratings_csv(study_dir, out) == len(rows)
    again = import_ratings(out, study_dir=study_dir)  # the export's own columns import back
    assert (again.imported, again.unchanged, again.bad) == (0, len(rows), [])
    changed = out.read_text().replace(",quality,1,", ",quality,2,")
    (tmp_path / "changed.csv").write_text(changed)
    rev = import_ratings(tmp_path / "changed.csv", study_dir=study_dir)
    assert rev.revised >= 1 and rev.imported == 0
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        assert store.history_count() == len(rows) + rev.revised
    finally:
        store.close()


@pytest.mark.live
def test_new_minimal_study_from_real_mushra_ratings(tmp_path: Path) -> None:
    src = DATA / "ratings" / "neural_codec_mushra" / "ratings_long.csv"
    if not src.is_file():
        pytest.skip(f"real MUSHRA ratings not found at {src} (../shared/data)")
    with open(src, newline="") as fh:
        raw = list(csv.DictReader(fh))
    converted = tmp_path / "mushra.csv"
    with open(converted, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["rater", "item", "system", "eval", "score", "dimension"])
        for r in raw:
            w.writerow(
                [r["rater_id"], r["item_id"], r["system_id"], "mushra", r["score"], "quality"]
            )
    r = run_cli(
        "study", "import", str(converted), "--out", str(tmp_path / "o"), "--scale", "0", "100"
    )
    assert r.returncode == 0, r.stderr
    folder = Path(r.stdout.strip().splitlines()[-1])
    study = study_json(folder)
    assert study["evals"] == [
        {
            "id": "mushra",
            "dimension": "quality",
            "kind": "likert",
            "question": "(imported) mushra",
            "scale": {"min": 0, "max": 100, "labels": {}},
            "ties": True,
        }
    ]
    assert len(study["items"]) == len({(x["item_id"], x["system_id"]) for x in raw})
    assert study["n_raters"] == len({x["rater_id"] for x in raw})
    assert f"{len(raw)} imported" in r.stderr and "several systems" in r.stderr
    n = export_ratings_csv(folder, tmp_path / "back.csv")
    assert n == len(raw)
    with open(tmp_path / "back.csv", newline="") as fh:
        back = list(csv.DictReader(fh))
    by_key = {(x["rater_id"], x["item_id"], x["system_id"]): float(x["score"]) for x in raw}
    for row in back:
        item = row["item"].split("~")[0]
        assert float(row["score"]) == by_key[(row["rater"], item, row["system"])]


def test_new_study_infers_pairwise_and_scale(tmp_path: Path) -> None:
    src = write_csv(
        tmp_path / "p.csv",
        "rater,item,system,eval,score,system_b,kind",
        [
            "a,u1,sysA,pref,1,sysB,pairwise",
            "b,u1,sysA,pref,0.5,sysB,pairwise",
            "a,u2,sysA,pref,0,sysB,",
            "a,u3,sysA,pref,1,,pairwise",  # pairwise without B side
            "a,u4,sysA,mos,4,,likert",
            "b,u4,sysA,mos,2,,",
        ],
    )
    report = import_ratings(src, out_parent=tmp_path / "o")
    assert report.created and report.imported == 5 and [b[0] for b in report.bad] == [5]
    study = study_json(report.study_dir)
    evals = {e["id"]: e for e in study["evals"]}
    assert evals["pref"]["kind"] == "pairwise" and evals["mos"]["scale"]["min"] == 2
    assert not list((tmp_path / "o").glob(".*"))


def test_a_rejected_row_never_counts_as_the_first_copy(tmp_path: Path) -> None:
    src = write_csv(
        tmp_path / "d.csv",
        "rater,item,system,eval,score",
        [
            "a,u1,s,mos,2.5",  # not a whole likert answer: refused
            "a,u1,s,mos,4",  # the same rater, item and eval: valid, must be kept
            "b,u1,s,mos,3",
            "c,u1,s,mos,1",
            "c,u1,s,mos,5",  # a real duplicate of the line before
        ],
    )
    report = import_ratings(src, out_parent=tmp_path / "o")
    assert report.imported == 3
    reasons = dict(report.bad)
    assert "not a valid answer" in reasons[2] and "duplicate of line 5" in reasons[6]
    assert 3 not in reasons


def test_scale_typos_and_huge_scores_are_rows_not_aborts(tmp_path: Path) -> None:
    rows = [f"r{i},u{i % 4},s,mos,{1 + i % 5}" for i in range(20)]
    typo = write_csv(tmp_path / "t.csv", "rater,item,system,eval,score", [*rows, "x,u1,s,mos,55"])
    report = import_ratings(typo, out_parent=tmp_path / "o")
    assert report.imported == 20 and [b[0] for b in report.bad] == [22]
    assert "alone would stretch the likert scale" in report.bad[0][1]
    assert any(n.startswith("WARNING") for n in report.notes)
    scale = study_json(report.study_dir)["evals"][0]["scale"]
    assert (scale["min"], scale["max"]) == (1, 5)
    huge = write_csv(
        tmp_path / "h.csv", "rater,item,system,eval,score", [*rows, "x,u1,s,mos,-1e308"]
    )
    report = import_ratings(huge, out_parent=tmp_path / "o2")
    assert report.imported == 20 and [b[0] for b in report.bad] == [22]


def test_one_non_utf8_byte_costs_its_row_only(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_bytes(
        b"rater,item,system,eval,score\na,u1,s,mos,3\nb,u\xe91,s,mos,4\nc,u1,s,mos,2\n"
    )
    report = import_ratings(path, out_parent=tmp_path / "o")
    assert report.imported == 2 and report.bad == [(3, "not UTF-8 text")]


@pytest.mark.live
def test_a_revision_is_announced_with_its_line(study_dir: Path, tmp_path: Path) -> None:
    study = study_json(study_dir)
    item = next(i for i in study["items"] if i["kind"] == "single")
    system = item["stimuli"][0]["system"]
    first = write_csv(
        tmp_path / "1.csv", "rater,item,system,eval,score", [f"x,{item['id']},{system},quality,2"]
    )
    second = write_csv(
        tmp_path / "2.csv", "rater,item,system,eval,score", [f"x,{item['id']},{system},quality,4"]
    )
    assert run_cli("study", "import", str(first), "--study", str(study_dir)).returncode == 0
    r = run_cli("study", "import", str(second), "--study", str(study_dir))
    assert r.returncode == 0 and "2.csv:2: warning: revises a stored rating (2 -> 4" in r.stderr


@pytest.mark.live
def test_a_second_batch_finds_the_items_the_first_split_per_system(tmp_path: Path) -> None:
    """The first batch rates item u1 for two systems, so the study holds ``u1~sysA`` and
    ``u1~sysB``; a second batch naming u1 and its system lands on those items, and a system
    the first batch never saw is a bad row saying what became of the item."""
    first = write_csv(
        tmp_path / "one.csv",
        "rater,item,system,eval,score",
        ["a,u1,sysA,mos,4", "a,u1,sysB,mos,2", "a,u2,sysA,mos,3"],
    )
    r = run_cli("study", "import", str(first), "--out", str(tmp_path / "o"), "--scale", "1", "5")
    assert r.returncode == 0, r.stderr
    folder = Path(r.stdout.strip().splitlines()[-1])
    second = write_csv(
        tmp_path / "two.csv",
        "rater,item,system,eval,score",
        ["b,u1,sysA,mos,5", "b,u1,sysB,mos,1", "b,u2,sysA,mos,3", "b,u1,sysC,mos,3"],
    )
    r2 = run_cli("study", "import", str(second), "--study", str(folder))
    assert r2.returncode == 0, r2.stderr
    assert "3 imported" in r2.stderr
    assert "two.csv:5: item 'u1' was imported as one item per system (u1~sysA, u1~sysB)" in (
        r2.stderr
    )
    n = export_ratings_csv(folder, tmp_path / "back.csv")
    with open(tmp_path / "back.csv", newline="") as fh:
        rows = {(x["rater"], x["item"]): float(x["score"]) for x in csv.DictReader(fh)}
    assert n == 6 and rows[("b", "u1~sysA")] == 5.0 and rows[("b", "u1~sysB")] == 1.0
