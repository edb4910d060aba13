from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxassay.core.errors import InputError, ManifestError
from voxassay.core.items import Item, load_manifest, write_manifest


def write(p: Path, lines: list[bytes]) -> Path:
    p.write_bytes(b"\n".join(lines) + b"\n")
    return p


def test_duplicate_ids_refused_with_line_numbers(tmp_path: Path) -> None:
    m = write(
        tmp_path / "m.jsonl",
        [
            json.dumps({"id": "a", "audio_filepath": "a.wav", "text": "x"}).encode(),
            json.dumps({"id": "b", "audio_filepath": "b.wav", "text": "y"}).encode(),
            b"",
            json.dumps({"id": "a", "audio_filepath": "c.wav", "text": "z"}).encode(),
        ],
    )
    with pytest.raises(ManifestError) as exc:
        load_manifest(m)
    assert exc.value.problems == [(4, "duplicate id 'a' (first on line 1)")]
    assert "m.jsonl:4" in str(exc.value)


def test_all_problems_collected(tmp_path: Path) -> None:
    m = write(
        tmp_path / "m.jsonl",
        [b"{not json", b'{"id": "x", "labels": 3}', b'{"id": "y", "duration": "long"}', b"[1]"],
    )
    with pytest.raises(ManifestError) as exc:
        load_manifest(m)
    lines = [ln for ln, _ in exc.value.problems]
    assert lines == [1, 2, 3, 4]


def test_non_utf8_line_becomes_item_problem(tmp_path: Path) -> None:
    m = write(
        tmp_path / "m.jsonl",
        [
            b'{"id": "bad", "audio_filepath": "a.wav", "text": "caf\xe9"}',
            b'{"id": "good", "audio_filepath": "a.wav", "text": "ok"}',
        ],
    )
    items = load_manifest(m)
    assert [i.id for i in items] == ["bad", "good"]
    assert items[0].problem and "not valid UTF-8" in items[0].problem
    assert items[1].problem is None


def test_oal_manifest_fields_relative_paths_and_bom(tmp_path: Path) -> None:
    (tmp_path / "audio").mkdir()
    m = tmp_path / "m.jsonl"
    m.write_bytes(
        b"\xef\xbb\xbf"
        + json.dumps(
            {
                "audio_filepath": "audio/u1.wav",
                "duration": 1.5,
                "text": "hi",
                "condition": "clean",
                "extra": 1,
            }
        ).encode()
        + b"\n"
    )
    (item,) = load_manifest(m)
    assert item.id == "u1"
    assert item.audio_filepath == str(tmp_path / "audio/u1.wav")
    assert item.condition == "clean" and item.labels["condition"] == "clean"
    assert item.meta == {"extra": 1}


def test_roundtrip(tmp_path: Path) -> None:
    items = [
        Item(
            id="a",
            audio_filepath="/x/a.wav",
            text="t",
            speaker="s",
            labels={"condition": "accent", "accent": "Indian"},
        )
    ]
    write_manifest(items, tmp_path / "o.jsonl")
    assert load_manifest(tmp_path / "o.jsonl") == items


def test_missing_and_empty_manifest(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_manifest(tmp_path / "nope.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="no items"):
        load_manifest(tmp_path / "e.jsonl")
