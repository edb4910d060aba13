"""Files a worker made away from the run, shipped back for the driver to write.

A distributed worker writes what belongs in the run (a session's bundle, a redacted copy) into
a private folder, reads it back as bytes (:func:`read_tree`) and removes the folder; the
driver writes the bytes into the run (:func:`write_tree`). Paths in the record that named the
private folder are rebased (:func:`rebase`) onto :data:`RUN_FOLDER` by the worker and onto
the run's folder by the driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["RUN_FOLDER", "read_tree", "rebase", "write_tree"]


RUN_FOLDER = "<run>"
"""Stands for the run's folder in a record made away from it (the driver puts it back)."""


def rebase(value: Any, old: str, new: str) -> Any:
    """``value`` (JSON-like) with every string that starts with the path ``old`` starting
    with ``new`` instead (a record's file paths, from a worker's folder to the run's)."""
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: rebase(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [rebase(v, old, new) for v in value]
    return value


def read_tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its path relative to it."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def write_tree(folder: Path, files: dict[str, bytes]) -> None:
    """Write what :func:`read_tree` read into ``folder`` (paths stay inside it)."""
    root = folder.resolve()
    for rel, data in files.items():
        target = (folder / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"a file outside its folder: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
