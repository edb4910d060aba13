"""``study create``: balanced assignments, mixed systems, random order, opaque names, gold
items and traps, the headphone check, and pairwise studies from two real duplex runs."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import sqlite3
import stat
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.study.helpers import (
    LIKERT,
    PAIRWISE,
    read_invites,
    run_cli,
    study_json,
    write_items,
    write_questions,
)
from voxassay.core.errors import InputError, ManifestError
from voxassay.study.create import create_study
from voxassay.study.format import load_questions

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "voxassay" / "study" / "examples"


def assignments(study_dir: Path) -> list[tuple[str, str, str, int, int]]:
    with sqlite3.connect(study_dir / "study.db") as conn:
        return conn.execute(
            "SELECT id, rater, item, position, flip FROM assignments ORDER BY rater, position"
        ).fetchall()


@pytest.fixture(scope="module")
def likert_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("likert")
    items = write_items(tmp / "items.jsonl", n_signals=6, systems=("ref", "lyra_6", "audiodec_8"))
    q = write_questions(tmp / "q.yaml", gold={"traps": 2})
    return create_study([items], q, tmp / "out", raters=5, seed=7).path


def test_every_item_gets_its_raters_and_loads_are_balanced(likert_study: Path) -> None:
    study = study_json(likert_study)
    rows = assignments(likert_study)
    gold = {i["id"] for i in study["items"] if i["gold"]}
    regular = {i["id"] for i in study["items"] if not i["gold"]}
    assert len(regular) == 18 and len(gold) == 2
    per_item = Counter(item for _, _, item, _, _ in rows)
    assert all(per_item[i] == 3 for i in regular)
    assert all(per_item[i] == 5 for i in gold)  # traps go to every rater
    loads = Counter(rater for _, rater, item, _, _ in rows if item in regular)
    assert len(loads) == 5 and max(loads.values()) - min(loads.values()) <= 1
    # each rater rates an item at most once
    assert len({(r, i) for _, r, i, _, _ in rows}) == len(rows)


def test_systems_are_mixed_and_order_is_random(likert_study: Path) -> None:
    study = study_json(likert_study)
    system = {i["id"]: i["stimuli"][0]["system"] for i in study["items"]}
    by_rater: dict[str, list[str]] = defaultdict(list)
    for _, rater, item, _, _ in assignments(likert_study):
        by_rater[rater].append(item)
    orders = []
    for items in by_rater.values():
        systems = [system[i] for i in items if system[i] != "_trap"]
        counts = Counter(systems)
        assert len(counts) == 3, counts  # every rater hears every system
        assert max(counts.values()) - min(counts.values()) <= 2
        repeats = sum(1 for a, b in itertools.pairwise(systems) if a == b)
        assert repeats <= 1, systems  # interleaved, not blocked by system
        assert system[items[0]] != "_trap"  # never a trap first
        orders.append([system[i] for i in items])
    assert len({tuple(o) for o in orders}) > 1  # orders differ between raters


def test_names_are_opaque_and_tokens_are_hashed(likert_study: Path) -> None:
    study = study_json(likert_study)
    names = sorted(p.name for p in (likert_study / "audio").iterdir())
    assert all(len(n) == 20 and n.endswith(".wav") for n in names)
    for n in names:
        int(n[:16], 16)  # hex only
    for item in study["items"]:
        assert item["id"][1:].isalnum() and len(item["id"]) == 13
        for stim in item["stimuli"]:
            assert stim["system"] not in stim["audio"]
            data = (likert_study / stim["audio"]).read_bytes()
            assert b"LIST" not in data[:200]  # no metadata chunk to name the source
            for word in (b"lyra", b"audiodec", b"ref", b"stim"):
                assert word not in data[:64]
    task_ids = [a for a, *_ in assignments(likert_study)]
    assert all(t.startswith("t") and len(t) == 17 for t in task_ids)
    invites = read_invites(likert_study)
    assert set(invites) == {"admin", "r01", "r02", "r03", "r04", "r05"}
    mode = stat.S_IMODE((likert_study / "invites.txt").stat().st_mode)
    assert mode == 0o600
    db = (likert_study / "study.db").read_bytes()
    with sqlite3.connect(likert_study / "study.db") as conn:
        hashes = dict(conn.execute("SELECT id, token_hash FROM raters").fetchall())
        admin_hash = conn.execute(
            "SELECT value FROM meta WHERE key = 'admin_token_hash'"
        ).fetchone()[0]
    for name, token in invites.items():
        ident, secret = token.split(".")
        assert ident == name
        assert secret.encode() not in db  # only hashes are stored
        want = admin_hash if name == "admin" else hashes[name]
        assert hashlib.sha256(secret.encode()).hexdigest() == want


def test_traps_expect_the_bottom_of_the_scale(likert_study: Path) -> None:
    study = study_json(likert_study)
    traps = [i for i in study["items"] if i["trap"]]
    assert len(traps) == 2
    for t in traps:
        assert t["gold"] == {"quality": 1.0}
        assert t["stimuli"][0]["system"] == "_trap"
        audio, sr = sf.read(likert_study / t["stimuli"][0]["audio"])
        assert sr == 24000 and audio.size > sr


def test_trap_expectations_default_and_null(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=1)
    two = [LIKERT, dict(LIKERT, id="clarity")]
    q = write_questions(tmp_path / "a.yaml", evals=two, gold={"traps": 1, "expect": {"clarity": 2}})
    (trap,) = [i for i in create_study([items], q, tmp_path / "a", raters=3).study.items if i.trap]
    assert trap.gold == {"quality": 1.0, "clarity": 2.0}
    q = write_questions(
        tmp_path / "b.yaml", evals=two, gold={"traps": 1, "expect": {"clarity": None}}
    )
    (trap,) = [i for i in create_study([items], q, tmp_path / "b", raters=3).study.items if i.trap]
    assert trap.gold == {"quality": 1.0}
    q = write_questions(tmp_path / "c.yaml", evals=two, gold={"expect": {"clarity": 9}})
    with pytest.raises(InputError, match="clarity=9"):
        create_study([items], q, tmp_path / "c", raters=3)


def test_headphone_check_audio(likert_study: Path) -> None:
    hc = study_json(likert_study)["headphone_check"]
    assert hc["enabled"] and len(hc["trials"]) == 6 and hc["calibration_audio"]
    for trial in hc["trials"]:
        x, sr = sf.read(likert_study / trial["audio"])
        assert x.ndim == 2 and x.shape[1] == 2
        tone = int(sr * 1.0)
        starts = [int(sr * 0.3) + k * (tone + int(sr * 0.5)) for k in range(3)]
        levels, antiphase = [], []
        for s in starts:
            seg = x[s : s + tone]
            levels.append(float(np.sqrt(np.mean(seg[:, 0] ** 2))))
            antiphase.append(bool(np.allclose(seg[:, 0], -seg[:, 1], atol=1e-3)))
        quiet = int(np.argmin(levels)) + 1
        assert quiet == trial["answer"]
        assert sum(antiphase) == 1 and antiphase[quiet - 1] is False
        # over loudspeakers (L + R summed) the antiphase tone is the quietest one
        summed = [float(np.sqrt(np.mean((x[s : s + tone].sum(axis=1)) ** 2))) for s in starts]
        assert int(np.argmin(summed)) == antiphase.index(True)


def test_gold_items_go_to_every_rater(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=3, gold={"quality": 5})
    q = write_questions(tmp_path / "q.yaml", gold={"traps": 0}, headphone_check=False)
    study_dir = create_study([items], q, tmp_path / "out", raters=4).path
    study = study_json(study_dir)
    gold = [i for i in study["items"] if i["gold"]]
    assert len(gold) == 1 and gold[0]["gold"] == {"quality": 5.0} and not gold[0]["trap"]
    holders = {r for _, r, i, _, _ in assignments(study_dir) if i == gold[0]["id"]}
    assert len(holders) == 4
    assert study["headphone_check"]["trials"] == []


def test_raters_default_and_too_few(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=2)
    q = write_questions(tmp_path / "q.yaml", items_per_rater=2, gold=False)
    s = create_study([items], q, tmp_path / "out").path
    # 6 items x 3 raters / 2 items per rater = 9 raters
    assert study_json(s)["n_raters"] == 9
    with pytest.raises(InputError, match="raters-per-item"):
        create_study([items], q, tmp_path / "out", raters=2, raters_per_item=3)
    assert not any(p.name.startswith(".") for p in (tmp_path / "out").iterdir())


@pytest.mark.live
def test_bad_questions_and_items_are_reported(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=1)
    bad_q = write_questions(
        tmp_path / "bad.yaml",
        evals=[LIKERT, dict(LIKERT, scale={"min": 5, "max": 1})],
    )
    with pytest.raises(InputError) as exc:
        load_questions(bad_q)
    assert "evals.1.scale" in str(exc.value)
    dupes = write_questions(tmp_path / "dupes.yaml", evals=[LIKERT, LIKERT])
    with pytest.raises(InputError, match="duplicate eval ids"):
        load_questions(dupes)
    lines = items.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        "\n".join(
            [
                lines[0],
                lines[0],  # duplicate id
                '{"id": "x", "system": "a", "audio": "missing.wav"}',
                '{"id": "y", "audio": "a.wav"}',
                "not json",
                '{"id": "z", "system": "_trap", "say": "hi"}',
            ]
        )
    )
    q = write_questions(tmp_path / "q.yaml")
    with pytest.raises(ManifestError) as mexc:
        create_study([broken], q, tmp_path / "out")
    got = dict(mexc.value.problems)
    assert "duplicate id" in got[2] and "not found" in got[3] and "system" in got[4]
    assert "JSON" in got[5] and "reserved" in got[6]
    r = run_cli(
        "study", "create", "--from", str(broken), "--questions", str(q), "--out", str(tmp_path)
    )
    assert r.returncode == 2 and "broken.jsonl:2" in r.stderr


@pytest.mark.live
def test_cli_prints_the_study_folder_last(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=2)
    q = write_questions(tmp_path / "q.yaml")
    r = run_cli(
        "study", "create", "--from", str(items), "--questions", str(q), "--out", str(tmp_path / "o")
    )
    assert r.returncode == 0, r.stderr
    folder = Path(r.stdout.strip().splitlines()[-1])
    assert folder.parent == tmp_path / "o" and (folder / "study.json").is_file()
    assert "r01." not in r.stdout and "invites.txt" in r.stderr  # links only in the file


def test_examples_are_valid() -> None:
    q = load_questions(EXAMPLES / "questions.yaml")
    assert {e.id for e in q.evals} == {"naturalness", "clarity"}
    qp = load_questions(EXAMPLES / "questions_pairwise.yaml")
    assert all(e.kind == "pairwise" for e in qp.evals)
    lines = [json.loads(x) for x in (EXAMPLES / "items.jsonl").read_text().splitlines()]
    assert len({x["id"] for x in lines}) == len(lines) == 18
    assert Counter(x["system"] for x in lines) == {"neural": 6, "neural-flat": 6, "formant": 6}


@pytest.mark.slow
def test_example_study_renders_offline(tmp_path: Path) -> None:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (the example's formant voice)")
    pytest.importorskip("piper", reason="piper-tts is not installed")
    result = create_study(
        [EXAMPLES / "items.jsonl"], EXAMPLES / "questions.yaml", tmp_path, raters=4
    )
    study = result.study
    assert len([i for i in study.items if not i.gold]) == 18
    assert all(
        s.source == "say:piper" or s.source.startswith("say:")
        for i in study.items
        for s in i.stimuli
        if not i.trap
    )


# --- pairwise from two real duplex runs ---------------------------------------------


@pytest.fixture(scope="module")
def duplex_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real `voxassay duplex run`s (echo and energy agents) over the same scenarios."""
    out = tmp_path_factory.mktemp("duplex")
    runs = []
    for agent in ("echo", "energy"):
        r = run_cli(
            "duplex",
            "run",
            "--scenarios",
            "default",
            "--only",
            "normal-turns-pause-*",
            "--agent",
            agent,
            "--detector",
            "energy",
            "--out",
            str(out / agent),
        )
        if r.returncode != 0:
            pytest.fail(f"duplex run failed: {r.stderr[-2000:]}")
        runs.append(Path(r.stdout.strip().splitlines()[-1]))
    return runs[0], runs[1]


@pytest.mark.live
@pytest.mark.slow
def test_pairwise_study_from_two_duplex_runs(
    duplex_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, run_b = duplex_runs
    q = write_questions(tmp_path / "q.yaml", evals=[PAIRWISE], gold={"traps": 1})
    r = run_cli(
        "study",
        "create",
        "--from",
        str(run_a),
        "--from",
        str(run_b),
        "--questions",
        str(q),
        "--out",
        str(tmp_path / "studies"),
        "--raters",
        "4",
    )
    assert r.returncode == 0, r.stderr
    study_dir = Path(r.stdout.strip().splitlines()[-1])
    study = study_json(study_dir)
    sessions_a = [json.loads(x) for x in (run_a / "records.jsonl").read_text().splitlines()]
    pairs = [i for i in study["items"] if i["kind"] == "pair" and not i["trap"]]
    assert len(pairs) == len(sessions_a) >= 3
    for p in pairs:
        a, b = p["stimuli"]
        assert (a["system"], b["system"]) == ("echo", "energy")
        assert a["run"] == run_a.name and b["run"] == run_b.name
        assert a["session"] and b["session"] and p["group"].endswith("#0")
        scenario = p["group"].split("#")[0]
        assert a["session"].startswith(scenario) and b["session"].startswith(scenario)
        # the stimulus is both sides of the call mixed into one file
        x, sr = sf.read(study_dir / a["audio"])
        bundle = run_a / "bundles" / scenario / "0"
        user, sr_in = sf.read(bundle / "input.wav")
        assert x.ndim == 1 and abs(len(x) / sr - len(user) / sr_in) < 0.05
    trap = [i for i in study["items"] if i["trap"]]
    assert len(trap) == 1 and trap[0]["gold"] == {"preference": 1.0}
    assert trap[0]["stimuli"][1]["system"] == "_trap"
    # sides: each pair's raters alternate which session plays as A
    flips: dict[str, list[int]] = defaultdict(list)
    for _, _, item, _, flip in assignments(study_dir):
        flips[item].append(flip)
    for p in pairs:
        f = flips[p["id"]]
        assert len(f) == 3 and abs(f.count(0) - f.count(1)) == 1
    assert any(f.count(1) >= 2 for f in flips.values()) and any(
        f.count(0) >= 2 for f in flips.values()
    )

    # the raters' preferences become the duplex runs' subjective group (`study attach`):
    # echo preferred on two ratings in three, a tie on the rest
    pair_ids = {p["id"] for p in pairs}
    rated = [(rater, item) for _, rater, item, _, _ in assignments(study_dir) if item in pair_ids]
    scores = ["1" if k % 3 else "0.5" for k in range(len(rated))]
    rows = ["rater,item,system,eval,score,kind,system_b"]
    rows += [
        f"{rater},{item},echo,preference,{y},pairwise,energy"
        for (rater, item), y in zip(rated, scores, strict=True)
    ]
    (tmp_path / "prefs.csv").write_text("\n".join(rows) + "\n")
    r = run_cli("study", "import", str(tmp_path / "prefs.csv"), "--study", str(study_dir))
    assert r.returncode == 0, r.stderr
    r = run_cli("study", "attach", str(study_dir), str(run_a), str(run_b))
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip().splitlines()[-1]) == run_b
    for run in (run_a, run_b):
        sub = json.loads((run / "report.json").read_text())["subjective"]
        assert sub["status"] == "linked" and not sub["problems"]
        [pair] = sub["pairs"]
        assert (pair["a"], pair["b"]) == ("echo", "energy")
        assert (pair["wins_a"], pair["wins_b"]) == (scores.count("1"), 0)
        assert pair["ties"] == scores.count("0.5")
    # a run of another suite is refused
    r = run_cli("study", "attach", str(study_dir), str(study_dir))
    assert r.returncode == 2


def test_same_agent_in_both_runs_gets_run_ids(
    duplex_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, _ = duplex_runs
    copy = tmp_path / "copy-run"
    shutil.copytree(run_a, copy)
    info = json.loads((copy / "run.json").read_text())
    info["run_id"] = "copy-run"
    (copy / "run.json").write_text(json.dumps(info))
    q = write_questions(tmp_path / "q.yaml", evals=[PAIRWISE, dict(LIKERT, id="q2")])
    study = create_study([run_a, copy], q, tmp_path / "s", raters=3).study
    systems = {(i.system, i.system_b) for i in study.items if i.kind == "pair" and not i.trap}
    assert systems == {(f"echo@{run_a.name}", "echo@copy-run")}
    singles = Counter(i.system for i in study.items if i.kind == "single" and not i.trap)
    assert set(singles) == {f"echo@{run_a.name}", "echo@copy-run"}
    assert singles["echo@copy-run"] == singles[f"echo@{run_a.name}"] >= 3


def test_every_unusable_stimulus_is_listed_with_its_line_before_anything_is_written(
    tmp_path: Path,
) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=2)
    lines = [json.loads(x) for x in items.read_text().splitlines()]
    real = Path(lines[0]["audio"])
    data, sr = sf.read(real, dtype="float32")
    nan = data.copy()
    nan[100:110] = np.nan
    sf.write(tmp_path / "nan.wav", nan, sr, subtype="FLOAT")
    (tmp_path / "junk.wav").write_bytes(b"RIFF" + b"\x00" * 60)
    lines[1]["audio"] = str(tmp_path / "nan.wav")
    lines[3]["audio"] = str(tmp_path / "junk.wav")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines))
    q = write_questions(tmp_path / "q.yaml")
    with pytest.raises(ManifestError) as exc:
        create_study([bad], q, tmp_path / "out")
    got = dict(exc.value.problems)
    assert sorted(got) == [2, 4]
    assert "NaN" in got[2]
    assert got[4].count("cannot read audio") == 1  # said once, not twice
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
