"""The store: revisions and history, the export contract, and durability: every rating the
server acknowledged is in the store after a SIGKILL of the server."""

from __future__ import annotations

import csv
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.study.helpers import (
    LIKERT,
    PAIRWISE,
    Served,
    answer_for,
    pass_gates,
    read_invites,
    write_items,
    write_questions,
)
from voxassay.study.create import create_study
from voxassay.study.store import (
    EXPORT_COLUMNS,
    RatingConflict,
    RatingMissing,
    RatingWrite,
    StudyStore,
    export_ratings_csv,
    subjective_preferences,
)

pytestmark = pytest.mark.live


@pytest.fixture
def mixed_study(tmp_path: Path) -> Path:
    """Single items (likert) and pairs (pairwise) over real stimuli, with traps."""
    items = write_items(tmp_path / "items.jsonl", n_signals=3, systems=("ref", "lyra_6"))
    q = write_questions(tmp_path / "q.yaml", evals=[LIKERT, PAIRWISE], gold={"traps": 1})
    return create_study([items], q, tmp_path / "out", raters=3).path


def test_pragmas_revisions_and_history(mixed_study: Path) -> None:
    store = StudyStore.for_study(mixed_study)
    try:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        _, rater, item, *_ = store.assignments()[0]
        with store.transaction():
            store.write_ratings(rater, item, [RatingWrite("quality", 3)], now="t0", response_ms=900)
        with pytest.raises(RatingConflict), store.transaction():
            store.write_ratings(rater, item, [RatingWrite("quality", 4)], now="t1", response_ms=1)
        with pytest.raises(RatingMissing), store.transaction():
            store.write_ratings(
                rater, "nope", [RatingWrite("quality", 4)], now="t1", response_ms=1, revise=True
            )
        with store.transaction():
            rev = store.write_ratings(
                rater, item, [RatingWrite("quality", 5)], now="t2", response_ms=None, revise=True
            )
        assert rev == 1
        (row,) = store.ratings()
        assert (row["score"], row["revision"], row["timestamp"], row["response_ms"]) == (
            5.0,
            1,
            "t2",
            900,
        )
        assert store.history_count() == 2  # the conflict and the missing revision rolled back
    finally:
        store.close()


def test_export_contract(mixed_study: Path, tmp_path: Path) -> None:
    from voxassay.study.format import load_study

    study = load_study(mixed_study)
    store = StudyStore.for_study(mixed_study)
    wrote = 0
    try:
        with store.transaction():
            for _, rater, item_id, _, _ in store.assignments():
                item = study.item_by_id()[item_id]
                answers = [
                    RatingWrite(e.id, 0.5 if e.kind == "pairwise" else 4)
                    for e in study.evals_for(item)
                ]
                store.write_ratings(
                    rater, item_id, answers, now="2026-01-02T03:04:05.000Z", response_ms=1234
                )
                wrote += len(answers)
    finally:
        store.close()
    dest = tmp_path / "ratings.csv"
    n = export_ratings_csv(mixed_study, dest)
    assert n == wrote
    with open(dest, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == EXPORT_COLUMNS
        rows = list(reader)
    assert len(rows) == n
    items = study.item_by_id()
    for row in rows:
        item = items[row["item"]]
        assert row["system"] == item.system and row["timestamp"] == "2026-01-02T03:04:05.000Z"
        assert row["response_ms"] == "1234" and row["dimension"] == "quality"
        if row["kind"] == "pairwise":
            assert row["eval"] == "preference" and row["score"] == "0.5"
            assert row["system_b"] == item.system_b and row["system_b"]
        else:
            assert row["score"] == "4" and row["system_b"] == ""
        if item.trap:
            assert row["gold_expected"] == "1"  # likert: the scale minimum; pairwise: A (clean)
        else:
            assert row["gold_expected"] == ""
    prefs = subjective_preferences(mixed_study)["preferences"]
    assert prefs and all(p["winner"] == "tie" for p in prefs)
    assert all(p["b"] != "_trap" for p in prefs)


def tasks_total(study_dir: Path) -> list[str]:
    with sqlite3.connect(study_dir / "study.db") as conn:
        return [r[0] for r in conn.execute("SELECT id FROM assignments")]


def test_acknowledged_ratings_survive_sigkill(mixed_study: Path) -> None:
    """Raters submit concurrently; the server is SIGKILLed mid-stream; after a restart
    every acknowledged rating is in the store."""
    invites = read_invites(mixed_study)
    server = Served(mixed_study)
    acked: list[tuple[str, str, dict[str, object]]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def rater(name: str) -> None:
        with server.client(invites[name]) as c:
            try:
                pass_gates(c, mixed_study)
                while not stop.is_set():
                    state = c.get("/api/state").json()
                    if state["stage"] != "rating":
                        return
                    task = state["task"]
                    answers = answer_for(task, seed=len(acked))
                    r = c.post("/api/answer", json={"task": task["id"], "answers": answers})
                    if r.status_code == 200:
                        with lock:
                            acked.append((name, task["id"], answers))
                            if len(acked) == 15:
                                # killed by the rater that saw the 15th acknowledgement, while the
                                # others' requests are in flight (a watcher thread polling the
                                # count was seen to wake after all 33 were in)
                                server.proc.send_signal(signal.SIGKILL)
            except Exception:  # the server died under us: later ones are not acknowledged
                return

    threads = [threading.Thread(target=rater, args=(n,)) for n in invites if n != "admin"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop.set()
    server.proc.send_signal(signal.SIGKILL)  # no-op where a rater killed it
    server.proc.wait()
    server.kill()
    assert len(acked) >= 15
    assert len(acked) < len(tasks_total(mixed_study))  # killed mid-stream, work was left
    with sqlite3.connect(mixed_study / "study.db") as conn:
        tasks = dict(
            ((row[0]), (row[1], row[2]))
            for row in conn.execute("SELECT id, rater, item FROM assignments")
        )
        stored = {
            (r, i, e): s
            for r, i, e, s in conn.execute("SELECT rater, item, eval, score FROM ratings")
        }
    for name, task_id, answers in acked:
        rater, item = tasks[task_id]
        assert rater == name
        for ev in answers:
            assert (rater, item, ev) in stored, (name, task_id, ev)
    # a restarted server resumes from the store: progress counts what was acknowledged
    server2 = Served(mixed_study)
    try:
        done_by: dict[str, int] = {}
        for name, _, _ in acked:
            done_by[name] = done_by.get(name, 0) + 1
        for name, n in done_by.items():
            with server2.client(invites[name]) as c:
                assert c.get("/api/state").json()["progress"]["done"] >= n
    finally:
        server2.stop()
