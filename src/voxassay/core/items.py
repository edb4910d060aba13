"""Item: one evaluation unit, one JSON line of a manifest (Open ASR Leaderboard compatible)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.core import jsonio
from voxassay.core.errors import AudioError, InputError, ManifestError

if TYPE_CHECKING:
    from voxassay.core.audio import Audio

ITEM_FIELDS = (
    "id",
    "audio_filepath",
    "audio",
    "offset",
    "duration",
    "text",
    "speaker",
    "labels",
    "meta",
    "audio_row",
    "audio_column",
)


@dataclass
class Item:
    """One manifest line.

    ``audio_filepath`` is resolved against the manifest's folder when relative; ``audio``
    holds paths of multi-clip items. Fields the schema does not know are kept in ``meta``.
    ``offset`` (seconds) starts the item inside a longer recording and ``duration`` bounds it
    (NeMo, Kaldi ``segments``, lhotse cuts); without ``offset``, ``duration`` is what the file
    should hold, and a file shorter than it is ``truncated``. ``audio_row``/``audio_column``
    name a cell of a table file (Parquet or Arrow, Hugging Face audio ``{bytes, path}``) that
    holds the encoded audio: ``audio_filepath`` is then that table file.
    """

    id: str
    audio_filepath: str | None = None
    audio: list[str] | None = None
    offset: float | None = None
    duration: float | None = None
    text: str | None = None
    speaker: str | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    audio_row: int | None = None
    audio_column: str | None = None
    problem: str | None = field(default=None, compare=False)
    """Why this item cannot be scored though its line parsed (e.g. text not UTF-8)."""

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id,
            "audio_filepath": self.audio_filepath,
            "audio": self.audio,
            "offset": self.offset,
            "duration": self.duration,
            "text": self.text,
            "speaker": self.speaker,
            "labels": self.labels,
            "meta": self.meta,
            "audio_row": self.audio_row,
            "audio_column": self.audio_column,
        }
        return {k: v for k, v in d.items() if v not in (None, {}, [])}

    @property
    def condition(self) -> str:
        """The item's condition label (``labels.condition``), ``unlabelled`` when absent."""
        value = self.labels.get("condition")
        return str(value) if value not in (None, "") else "unlabelled"

    @classmethod
    def from_dict(cls, d: dict[str, Any], base_dir: Path | None = None) -> Item:
        """Build an item from a manifest object; raises ``ValueError`` with a reason."""
        if not isinstance(d, dict):
            raise ValueError("line is not a JSON object")
        item_id = d.get("id")
        audio_fp = d.get("audio_filepath")
        if audio_fp is not None and not isinstance(audio_fp, str):
            raise ValueError(f"'audio_filepath' must be a path string, not {audio_fp!r}")
        if item_id is None or item_id == "":
            if not audio_fp:
                raise ValueError("no 'id' and no 'audio_filepath' to derive one from")
            item_id = Path(str(audio_fp)).stem
        labels = d.get("labels") or {}
        if not isinstance(labels, dict):
            raise ValueError("'labels' must be an object")
        # OAL-style manifests may carry condition-like keys at top level.
        for key in ("condition", "accent", "emotion", "background"):
            if key in d and key not in labels:
                labels[key] = d[key]
        meta = dict(d.get("meta") or {})
        for key, value in d.items():
            if key not in ITEM_FIELDS and key not in (
                "condition",
                "accent",
                "emotion",
                "background",
            ):
                meta[key] = value
        text = d.get("text")
        if text is not None and not isinstance(text, str):
            raise ValueError("'text' must be a string")
        duration = _seconds(d, "duration")
        offset = _seconds(d, "offset")
        row = d.get("audio_row")
        if row is not None and (not isinstance(row, int) or row < 0):
            raise ValueError(f"'audio_row' must be a row number >= 0, not {row!r}")
        audio = d.get("audio")
        if audio is not None and not (
            isinstance(audio, list) and all(isinstance(a, str) for a in audio)
        ):
            raise ValueError("'audio' must be a list of paths")
        return cls(
            id=str(item_id),
            audio_filepath=_resolve(audio_fp, base_dir) if audio_fp else None,
            audio=[_resolve(a, base_dir) for a in audio] if audio else None,
            offset=offset,
            duration=duration,
            text=text,
            speaker=None if d.get("speaker") is None else str(d.get("speaker")),
            labels=labels,
            meta=meta,
            audio_row=row,
            audio_column=None if d.get("audio_column") is None else str(d["audio_column"]),
        )


def _seconds(d: dict[str, Any], key: str) -> float | None:
    value = d.get(key)
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key!r} is not a number: {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{key!r} must be a finite number >= 0, not {value!r}")
    return seconds


DURATION_TOLERANCE_S = 0.1
"""A file may be this much (plus 1 %) shorter than its manifest ``duration``."""


def item_audio_bytes(item: Item) -> bytes:
    """The encoded audio an item points at, as stored: its whole file, or its table cell
    (what a driver ships to workers that do not share its storage)."""
    if not item.audio_filepath:
        raise AudioError(f"item {item.id!r} has no audio_filepath", kind="input")
    if item.audio_row is not None:
        from voxassay.core.tables import read_audio_cell

        data = read_audio_cell(item.audio_filepath, item.audio_row, item.audio_column or "audio")
        if not isinstance(data, str):
            return bytes(data)
        path = data
    else:
        path = item.audio_filepath
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise AudioError(f"{path}: {exc.strerror or exc}", kind="missing") from None


def load_item_audio(item: Item, sr: int | None = 16_000, data: bytes | None = None) -> Audio:
    """The item's audio: its file, its segment of a longer file, or its cell of a table file;
    or, given ``data`` (:func:`item_audio_bytes`), decoded from those bytes without opening
    anything.

    A file shorter than the manifest's ``duration`` (beyond 0.1 s + 1 %) is ``truncated``,
    never scored as if it were complete.
    """
    from voxassay.core.audio import decode_audio_bytes, load_audio

    if not item.audio_filepath:
        raise AudioError(f"item {item.id!r} has no audio_filepath", kind="input")
    if data is not None:
        audio = decode_audio_bytes(
            data, sr, where=item.audio_filepath, offset=item.offset, duration=_span(item)
        )
    elif item.audio_row is not None:
        from voxassay.core.tables import read_audio_cell

        cell = read_audio_cell(item.audio_filepath, item.audio_row, item.audio_column or "audio")
        where = f"{item.audio_filepath} row {item.audio_row}"
        if isinstance(cell, str):  # the cell names a file instead of holding its bytes
            audio = load_audio(cell, sr, offset=item.offset, duration=_span(item))
        else:
            audio = decode_audio_bytes(
                cell, sr, where=where, offset=item.offset, duration=_span(item)
            )
    else:
        audio = load_audio(item.audio_filepath, sr, offset=item.offset, duration=_span(item))
    if (
        item.offset is None
        and item.duration is not None
        and audio.duration < item.duration * 0.99 - DURATION_TOLERANCE_S
    ):
        raise AudioError(
            f"{item.audio_filepath}: {audio.duration:.3f} s of audio where the manifest "
            f"says {item.duration:.3f} s",
            kind="truncated",
        )
    return audio


def _span(item: Item) -> float | None:
    """The duration to read: only a segment (an item with an offset) is cut to it."""
    return item.duration if item.offset is not None else None


def _resolve(path: str, base_dir: Path | None) -> str:
    """A manifest's relative path is relative to the manifest's folder, and only to it: a
    file of the same name in the current directory is never used instead."""
    p = Path(str(path)).expanduser()
    if p.is_absolute() or base_dir is None:
        return str(p)
    return str(base_dir / p)


def _portable(path: str, folder: Path) -> str:
    """``path`` (as this process sees it) written for a manifest in ``folder``: relative to
    the folder when the file is under it, absolute otherwise, so it works from any directory.
    URLs and other non-file references are kept as they are."""
    if "://" in path:
        return path
    full = Path(path).expanduser().resolve()
    try:
        return full.relative_to(folder).as_posix()
    except ValueError:
        return str(full)


def load_manifest(path: str | Path, *, require_text: bool = False) -> list[Item]:
    """Read a JSONL manifest; every problem is collected with its line number.

    Duplicate ids are refused (each duplicate names the line of the first occurrence).
    Non-UTF-8 bytes, malformed JSON and bad field types are reported, not skipped.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"manifest not found: {path}")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    items: list[Item] = []
    problems: list[tuple[int, str]] = []
    first_line: dict[str, int] = {}
    for lineno, line_bytes in enumerate(raw.split(b"\n"), start=1):
        if not line_bytes.strip():
            continue
        problem = None
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Keep the item (its id is usually readable) and record the problem per item.
            line = line_bytes.decode("utf-8", errors="replace")
            problem = (
                f"manifest line {lineno} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            )
        try:
            obj = jsonio.loads(line)
            item = Item.from_dict(obj, base_dir=path.parent)
            item.problem = problem
        except json.JSONDecodeError as exc:
            problems.append((lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        except ValueError as exc:
            problems.append((lineno, str(exc)))
            continue
        if require_text and item.text is None:
            problems.append((lineno, "no 'text' (reference transcript)"))
            continue
        if item.id in first_line:
            problems.append(
                (lineno, f"duplicate id {item.id!r} (first on line {first_line[item.id]})")
            )
            continue
        first_line[item.id] = lineno
        items.append(item)
    if problems:
        raise ManifestError(str(path), problems)
    if not items:
        raise InputError(f"manifest {path} has no items")
    return items


def read_json_objects(
    path: str | Path,
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """The JSON objects of a JSONL file with their line numbers, and the lines that are not
    one (``(line, reason)``: not UTF-8, not JSON, not an object). Blank lines are skipped;
    an unreadable file is an ``InputError``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = jsonio.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append((lineno, f"not a JSON line: {exc}"))
            continue
        if not isinstance(obj, dict):
            problems.append((lineno, "expected a JSON object"))
            continue
        rows.append((lineno, obj))
    return rows, problems


def write_manifest(items: list[Item], path: str | Path) -> None:
    """Write items as JSONL (UTF-8, one object per line). An item's audio paths are paths as
    this process sees them (absolute, or relative to the current directory); they are written
    relative to the manifest's folder when under it, absolute otherwise, so the manifest reads
    the same files from any directory (``load_manifest`` resolves against its folder)."""
    folder = Path(path).expanduser().resolve().parent
    with open(path, "w", encoding="utf-8") as fh:
        for item in items:
            d = item.to_dict()
            if d.get("audio_filepath"):
                d["audio_filepath"] = _portable(str(d["audio_filepath"]), folder)
            if d.get("audio"):
                d["audio"] = [_portable(str(a), folder) for a in d["audio"]]
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")


def file_sha256(path: str | Path, limit: int | None = None) -> str:
    """SHA-256 of a file's bytes (first ``limit`` bytes when given)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        remaining = limit
        while True:
            chunk = fh.read(1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            h.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
                if remaining <= 0:
                    break
    return h.hexdigest()
