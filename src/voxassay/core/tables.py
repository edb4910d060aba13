"""Table files that hold audio: Parquet and Arrow (Hugging Face ``datasets``), through pyarrow.

A Hugging Face audio column is a struct ``{bytes: binary, path: string}``; its feature type is
recorded in the schema metadata (``huggingface`` -> ``info.features``) or, for a
``save_to_disk`` folder, in ``dataset_info.json``. The bytes are decoded in memory with
soundfile (no torch decoder); a cell with no bytes names a file instead.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxassay.core.errors import AudioError, BackendUnavailable, InputError

INSTALL_HINT = "pip install 'voxassay[data]'  (pyarrow)"


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise BackendUnavailable(
            f"reading Parquet/Arrow data needs pyarrow: {INSTALL_HINT}"
        ) from None
    return pyarrow


@dataclass(frozen=True)
class TableFile:
    """One table file: its rows' plain columns, and which column holds the audio."""

    path: Path
    num_rows: int
    columns: tuple[str, ...]
    audio_columns: tuple[str, ...]


def _is_audio_struct(field: Any) -> bool:
    pa = _pyarrow()
    t = field.type
    if not pa.types.is_struct(t):
        return False
    names = {t.field(i).name for i in range(t.num_fields)}
    return {"bytes", "path"} <= names


def _feature_audio_columns(metadata: dict[bytes, bytes] | None) -> set[str]:
    """Columns whose Hugging Face feature type is ``Audio`` (schema metadata)."""
    if not metadata or b"huggingface" not in metadata:
        return set()
    try:
        features = json.loads(metadata[b"huggingface"]).get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return set()
    return {k for k, v in features.items() if isinstance(v, dict) and v.get("_type") == "Audio"}


@functools.lru_cache(maxsize=8)
def _open(path: str) -> Any:
    """A pyarrow Table for ``path`` (Parquet read column-lazily, Arrow IPC memory-mapped)."""
    pa = _pyarrow()
    p = Path(path)
    try:
        if p.suffix == ".parquet":
            return pa.parquet.read_table(str(p), memory_map=True)
        source = pa.memory_map(str(p))
        try:
            return pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid:
            return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read table {p}: {exc}") from None


def describe_table(path: str | Path) -> TableFile:
    table = _open(str(path))
    schema = table.schema
    hinted = _feature_audio_columns(schema.metadata)
    audio = tuple(f.name for f in schema if f.name in hinted or _is_audio_struct(f))
    return TableFile(Path(path), table.num_rows, tuple(schema.names), audio)


def table_rows(path: str | Path, skip: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every row as a dict of its columns except ``skip`` (the audio columns)."""
    table = _open(str(path))
    keep = [n for n in table.schema.names if n not in skip]
    rows: list[dict[str, Any]] = table.select(keep).to_pylist()
    return rows


def read_audio_cell(path: str | Path, row: int, column: str) -> bytes | str:
    """The encoded audio bytes in ``column`` of ``row``, or the file path the cell names."""
    table = _open(str(path))
    if column not in table.schema.names:
        raise AudioError(f"{path}: no column {column!r}", kind="input")
    if not 0 <= row < table.num_rows:
        raise AudioError(f"{path}: no row {row} ({table.num_rows} rows)", kind="input")
    cell = table.column(column)[row].as_py()
    if isinstance(cell, bytes):
        return cell
    if isinstance(cell, dict):
        if cell.get("bytes"):
            return bytes(cell["bytes"])
        if cell.get("path"):
            named = Path(str(cell["path"]))
            return str(named if named.is_absolute() else Path(path).parent / named)
    raise AudioError(f"{path} row {row}: column {column!r} holds no audio", kind="empty")
