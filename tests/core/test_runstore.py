from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxassay.core.errors import InputError
from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore


def test_create_layout_and_records(tmp_path: Path) -> None:
    store = RunStore.create(
        tmp_path, "asr", {"x": 1}, [Item(id="a", text="t", audio_filepath="/a.wav")]
    )
    assert store.path.parent == tmp_path and store.run_id.startswith("asr-")
    info = json.loads((store.path / "run.json").read_text())
    assert info["config"] == {"x": 1} and info["fingerprint"] and info["packages"]["numpy"]
    assert [i.id for i in store.items()] == ["a"]
    store.append(Record(id="a", system="s", output={"pred_text": "t"}))
    store.append(Record(id="a", system="s2", status="error", error={"kind": "k", "message": "m"}))
    store.close()
    recs = store.load_records()
    assert [(r.id, r.system, r.status) for r in recs.records] == [
        ("a", "s", "ok"),
        ("a", "s2", "error"),
    ]
    assert recs.malformed == []


def test_half_written_tail_is_cut_and_malformed_lines_counted(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "asr", {}, None)
    store.append(Record(id="a", system="s"))
    store.close()
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write('{"id": "b", "system": "s", "sta')  # killed mid-write
    assert store.repair_tail() > 0
    store.append(Record(id="c", system="s"))
    store.close()
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write('{"id": "d"}\nnot json\n')
    loaded = store.load_records()
    assert sorted(r.id for r in loaded.records) == ["a", "c"]
    assert [ln for ln, _ in loaded.malformed] == [3, 4]


def test_find_resumable_matches_fingerprint(tmp_path: Path) -> None:
    a = RunStore.create(tmp_path, "asr", {"m": 1}, None)
    RunStore.create(tmp_path, "asr", {"m": 2}, None)
    from voxassay.core.runstore import config_fingerprint

    found = RunStore.find_resumable(tmp_path, "asr", config_fingerprint({"m": 1}))
    assert found is not None and found.path == a.path
    assert RunStore.find_resumable(tmp_path, "asr", "nope") is None


def test_open_rejects_non_run(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        RunStore.open(tmp_path)
