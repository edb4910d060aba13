"""Manifest readers: the data layouts people already have, read into :class:`Item` lists.

Formats (``--format``, detected when absent): ``jsonl`` (Open ASR Leaderboard / NeMo),
``json`` (an array of the same objects), ``csv``/``tsv`` (a header row; ``--columns`` maps
voxassay fields to column names), ``kaldi`` (a data dir: ``wav.scp``, ``text``, ``utt2spk``,
``segments``), ``audiofolder`` (a folder with ``metadata.csv`` or ``metadata.jsonl`` and a
``file_name`` column, the Hugging Face convention), ``hf`` (Parquet files or a
``save_to_disk`` folder with an audio column) and ``lhotse`` (a CutSet, ``.jsonl`` or
``.jsonl.gz``). Every problem is reported with ``file:line`` and what was expected; nothing
named in a manifest is ever run (a ``wav.scp`` pipe or a lhotse ``command`` source is refused).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from voxassay.core import jsonio
from voxassay.core.errors import InputError, ManifestError
from voxassay.core.items import Item, file_sha256, load_manifest

T = TypeVar("T")

FORMATS = ("jsonl", "json", "csv", "tsv", "kaldi", "audiofolder", "hf", "lhotse")

# Column names recognised without --columns (first match wins), per voxassay field.
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id", "utt_id", "utterance_id", "key"),
    "audio": ("audio_filepath", "audio", "path", "file_name", "filename", "file", "wav"),
    "text": ("text", "transcript", "transcription", "sentence", "normalized_text"),
    "speaker": ("speaker", "speaker_id", "spk", "client_id"),
    "duration": ("duration", "duration_s"),
    "offset": ("offset", "start"),
}
FIELDS = tuple(DEFAULT_COLUMNS)
LABEL_COLUMNS = ("condition", "accent", "emotion", "background", "snr_db", "gender")


@dataclass
class ManifestRead:
    """What a reader found: the items, the format and whether it was detected; ``subset``
    records a ``--limit``/``--sample`` selection (it is part of a run's fingerprint)."""

    items: list[Item]
    format: str
    detected: bool
    path: Path | None
    sha256: str = ""
    subset: dict[str, int] | None = None
    columns: dict[str, str] | None = None
    """A table's mapping {voxassay field: column} (csv, tsv; None for other formats)."""
    unmapped: tuple[str, ...] = ()
    """A table's columns mapped to no field or label (kept in each item's meta)."""

    def describe(self) -> str:
        how = "detected" if self.detected else "--format"
        where = self.path if self.path is not None else "memory"
        chosen = ""
        if self.subset:
            chosen = " (" + ", ".join(f"{k} {v}" for k, v in self.subset.items()) + ")"
        out = f"read {len(self.items)} items{chosen} from {where} ({self.format}, {how})"
        if self.columns is not None:
            out += "\ncolumns: " + ", ".join(f"{k}={v}" for k, v in self.columns.items())
            if self.unmapped:
                out += "; not mapped (kept in meta): " + ", ".join(self.unmapped)
        return out

    def require_text(self, what: str) -> None:
        """``InputError`` when no item has a reference text (``what`` needs one), naming the
        columns seen and the ``--columns text=...`` that would map one."""
        if any(it.text is not None for it in self.items):
            return
        where = self.path if self.path is not None else "the items"
        msg = f"{what} needs a reference text and no item of {where} has one"
        if self.columns is not None:
            guess = _text_guess(self.unmapped)
            msg += (
                f": no column is one of {', '.join(DEFAULT_COLUMNS['text'])}; the columns are "
                + ", ".join([*self.columns.values(), *self.unmapped])
                + f"; name the text column with --columns text={guess or 'COLUMN'}"
            )
        raise InputError(msg)

    def config(self) -> dict[str, Any]:
        """What a run's config records about its items."""
        out: dict[str, Any] = {
            "manifest": str(self.path) if self.path is not None else "(in memory)",
            "manifest_sha256": self.sha256,
            "format": self.format,
        }
        if self.subset:
            out["subset"] = dict(self.subset)
        return out

    def select(
        self, limit: int | None = None, sample: int | None = None, seed: int = 0
    ) -> ManifestRead:
        """:func:`select_subset` of the items, recorded in ``subset``."""
        items, subset = select_subset(self.items, limit, sample, seed)
        return replace(self, items=items, subset=subset) if subset else self


def _text_guess(columns: Sequence[str]) -> str | None:
    """The unmapped column most likely to hold the text (by its name), if any."""
    hints = ("text", "transcript", "sentence", "utterance", "label", "words", "caption")
    return next((c for h in hints for c in columns if h in c.lower()), None)


def select_subset(
    items: Sequence[T], limit: int | None = None, sample: int | None = None, seed: int = 0
) -> tuple[list[T], dict[str, int] | None]:
    """The first ``limit`` items, or a reproducible random ``sample`` of them (Python's
    ``random.Random(seed).sample`` over the positions, kept in manifest order), with the
    selection as recorded in run.json (None: all items)."""
    if limit is not None and sample is not None:
        raise InputError("--limit and --sample exclude each other")
    for name, n in (("limit", limit), ("sample", sample)):
        if n is not None and n < 1:
            raise InputError(f"--{name} must be at least 1")
    if limit is not None:
        return list(items[:limit]), {"limit": limit}
    if sample is not None:
        import random

        k = min(sample, len(items))
        chosen = sorted(random.Random(seed).sample(range(len(items)), k))
        return [items[i] for i in chosen], {"sample": sample, "seed": seed}
    return list(items), None


def items_from(
    source: str | Path | ManifestRead | Iterable[Item | dict[str, Any]],
    format: str | None = None,
    columns: dict[str, str] | None = None,
) -> ManifestRead:
    """Items from a path (any format), an existing read, or a list of Items or manifest
    dicts (relative audio paths then resolve against the current directory)."""
    if isinstance(source, ManifestRead):
        return source
    if isinstance(source, str | Path):
        return read_items(source, format, columns)
    rows = list(source)
    items: list[Item] = []
    problems: list[tuple[int, str]] = []
    for n, row in enumerate(rows, start=1):
        try:
            items.append(row if isinstance(row, Item) else Item.from_dict(row, base_dir=None))
        except ValueError as exc:
            problems.append((n, f"item {n}: {exc}"))
    first: dict[str, int] = {}
    for n, it in enumerate(items, start=1):
        if it.id in first:
            problems.append((n, f"duplicate id {it.id!r} (first as item {first[it.id]})"))
        first.setdefault(it.id, n)
    if problems:
        raise ManifestError("(items given in memory)", problems)
    if not items:
        raise InputError("no items given")
    digest = hashlib.sha256()
    for it in items:
        digest.update(json.dumps(it.to_dict(), sort_keys=True, default=str).encode() + b"\n")
    return ManifestRead(items, "items", False, None, digest.hexdigest())


def parse_columns(text: str | None) -> dict[str, str]:
    """``audio=path,text=transcript,labels.accent=acc`` -> {field: column}."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        field, sep, column = part.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not column:
            raise InputError(f"--columns: {part!r} is not FIELD=COLUMN")
        if field not in FIELDS and not field.startswith("labels."):
            raise InputError(
                f"--columns: unknown field {field!r}; fields: {', '.join(FIELDS)}, labels.NAME"
            )
        out[field] = column
    return out


def detect_format(path: Path) -> str:
    """The format of ``path`` from its layout and first bytes."""
    if path.is_dir():
        if (path / "wav.scp").exists():
            return "kaldi"
        if (path / "metadata.csv").exists() or (path / "metadata.jsonl").exists():
            return "audiofolder"
        if (path / "dataset_info.json").exists() or any(path.glob("*.parquet")):
            return "hf"
        if any(path.glob("*.arrow")) or any(path.glob("*/*.parquet")):
            return "hf"
        raise InputError(
            f"{path} is a folder, but not a Kaldi data dir (wav.scp), an audio folder "
            "(metadata.csv / metadata.jsonl) or a Hugging Face dataset (parquet / arrow files)"
        )
    name = path.name.lower()
    if name.endswith((".parquet", ".arrow")):
        return "hf"
    if name.endswith(".jsonl.gz"):
        return "lhotse"
    if name.endswith(".tsv"):
        return "tsv"
    if name.endswith(".csv"):
        return "csv"
    head = _head(path)
    if head.lstrip().startswith("["):
        return "json"
    try:
        first = jsonio.loads(next(ln for ln in head.splitlines() if ln.strip()))
    except (StopIteration, ValueError):
        return "jsonl"
    if isinstance(first, dict) and ("supervisions" in first or "recording" in first):
        return "lhotse"
    return "jsonl"


def _head(path: Path, size: int = 65536) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(size)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")


def read_items(
    path: str | Path,
    format: str | None = None,
    columns: dict[str, str] | None = None,
    *,
    require_text: bool = False,
) -> ManifestRead:
    """Read ``path`` in ``format`` (detected when None) into items."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"manifest not found: {path}")
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown --format {format!r}; formats: {', '.join(FORMATS)}")
    fmt = format or detect_format(path)
    if columns and fmt not in ("csv", "tsv", "audiofolder", "hf"):
        raise InputError(f"--columns applies to csv, tsv, audiofolder and hf, not {fmt}")
    mapping: dict[str, str] | None = None
    if fmt in ("csv", "tsv"):  # a table: its column mapping is part of the read
        items, mapping, header = _read_table(path, columns or {}, "," if fmt == "csv" else "\t")
    else:
        items = _READERS[fmt](path, columns or {})
    if require_text:
        missing = [it.id for it in items if it.text is None]
        if missing:
            raise InputError(
                f"{len(missing)} item(s) of {path} have no reference text (e.g. {missing[0]!r})"
            )
    if not items:
        raise InputError(f"manifest {path} has no items")
    read = ManifestRead(items, fmt, format is None, path, source_sha256(path))
    if mapping is not None:
        used = {*mapping.values(), *LABEL_COLUMNS}
        read = replace(read, columns=mapping, unmapped=tuple(h for h in header if h not in used))
    return read


def source_sha256(path: str | Path) -> str:
    """A fingerprint of a manifest file, or of a data folder's text files and file sizes."""
    p = Path(path)
    if p.is_file():
        return file_sha256(p)
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        rel = f.relative_to(p).as_posix()
        h.update(rel.encode() + b"\0" + str(f.stat().st_size).encode() + b"\0")
        if f.suffix in ("", ".csv", ".jsonl", ".json", ".scp", ".txt", ".tsv"):
            h.update(f.read_bytes())
    return h.hexdigest()


# --- readers ---------------------------------------------------------------------------


def _read_jsonl(path: Path, columns: dict[str, str]) -> list[Item]:
    if _head(path, 4096).lstrip().startswith("["):
        raise InputError(
            f"{path} is a JSON array; voxassay reads JSONL, one object per line "
            "(or pass --format json)"
        )
    return load_manifest(path)


def _read_json(path: Path, columns: dict[str, str]) -> list[Item]:
    try:
        data = jsonio.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(str(path), [(exc.lineno, f"invalid JSON: {exc.msg}")]) from None
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON array of objects, found {type(data).__name__}")
    return _collect(
        path, ((i + 1, obj) for i, obj in enumerate(data)), lambda o: o, "element", path.parent
    )


def _collect(
    path: Path,
    rows: Iterable[tuple[int, Any]],
    to_obj: Callable[[Any], dict[str, Any]],
    unit: str,
    base: Path,
) -> list[Item]:
    """Items from ``(line, row)`` pairs; every problem (and duplicate id) with its line."""
    items: list[Item] = []
    problems: list[tuple[int, str]] = []
    first: dict[str, int] = {}
    for line, row in rows:
        try:
            item = Item.from_dict(to_obj(row), base_dir=base)
        except ValueError as exc:
            problems.append((line, f"{unit} {line}: {exc}" if unit != "line" else str(exc)))
            continue
        if item.id in first:
            problems.append((line, f"duplicate id {item.id!r} (first on {unit} {first[item.id]})"))
            continue
        first[item.id] = line
        items.append(item)
    if problems:
        raise ManifestError(str(path), problems)
    return items


def _column_map(header: list[str], columns: dict[str, str], where: str) -> dict[str, str]:
    """{voxassay field: column} from --columns and the default names; checks the header."""
    missing = [c for c in columns.values() if c not in header]
    if missing:
        raise InputError(
            f"{where}: no column {', '.join(map(repr, missing))}; the header has "
            f"{', '.join(header)}"
        )
    mapping = dict(columns)
    for field, names in DEFAULT_COLUMNS.items():
        if field not in mapping:
            found = next((n for n in names if n in header), None)
            if found is not None:
                mapping[field] = found
    if "audio" not in mapping:
        raise InputError(
            f"{where}: no audio column; expected one of {', '.join(DEFAULT_COLUMNS['audio'])} "
            f"or --columns audio=NAME (the header has {', '.join(header)})"
        )
    return mapping


def _row_object(row: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """A manifest object from a table row: mapped fields, label columns, the rest in meta."""
    used = set(mapping.values())
    obj: dict[str, Any] = {}
    for field in FIELDS:
        if field in mapping:
            value = row.get(mapping[field])
            obj["audio_filepath" if field == "audio" else field] = None if value == "" else value
    labels = {k.split(".", 1)[1]: row.get(c) for k, c in mapping.items() if k.startswith("labels.")}
    for name in LABEL_COLUMNS:
        if name in row and name not in used and row[name] not in (None, ""):
            labels.setdefault(name, row[name])
    obj["labels"] = labels
    obj["meta"] = {k: v for k, v in row.items() if k not in used and k not in labels}
    return obj


def _read_table(
    path: Path, columns: dict[str, str], delimiter: str
) -> tuple[list[Item], dict[str, str], list[str]]:
    """A CSV/TSV table's items, the column mapping chosen and the header."""
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ManifestError(str(path), [(line, f"not UTF-8 ({exc.reason})")]) from None
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = list(reader.fieldnames or [])
    if not header:
        raise InputError(f"{path}: empty, expected a header row")
    mapping = _column_map(header, columns, str(path))
    rows = []
    for row in reader:
        if None in row:
            raise ManifestError(
                str(path), [(reader.line_num, f"more fields than the header's {len(header)}")]
            )
        rows.append((reader.line_num, row))
    items = _collect(path, rows, lambda r: _row_object(r, mapping), "line", path.parent)
    return items, mapping, header


def _read_audiofolder(path: Path, columns: dict[str, str]) -> list[Item]:
    meta_csv, meta_jsonl = path / "metadata.csv", path / "metadata.jsonl"
    if meta_csv.exists():
        return _read_table(meta_csv, columns or {"audio": "file_name"}, ",")[0]
    from voxassay.core.items import read_json_objects

    rows, problems = read_json_objects(meta_jsonl)
    if problems:
        raise ManifestError(str(meta_jsonl), problems)
    header = sorted({k for _, r in rows for k in r})
    mapping = _column_map(header, columns or {"audio": "file_name"}, str(meta_jsonl))
    return _collect(meta_jsonl, rows, lambda r: _row_object(r, mapping), "line", path)


def _kaldi_table(path: Path, required: bool = True) -> dict[str, tuple[int, str]]:
    """``key rest`` lines -> {key: (line, rest)}; duplicate keys are problems."""
    if not path.exists():
        if required:
            raise InputError(f"Kaldi data dir: {path} is missing")
        return {}
    out: dict[str, tuple[int, str]] = {}
    problems: list[tuple[int, str]] = []
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            problems.append((lineno, f"not UTF-8 ({exc.reason})"))
            continue
        key, *tail = line.split(None, 1)  # Kaldi: any whitespace after the key
        rest = tail[0] if tail else ""
        if key in out:
            problems.append((lineno, f"duplicate key {key!r} (first on line {out[key][0]})"))
            continue
        out[key] = (lineno, rest.strip())
    if problems:
        raise ManifestError(str(path), problems)
    return out


def _read_kaldi(path: Path, columns: dict[str, str]) -> list[Item]:
    wavs = _kaldi_table(path / "wav.scp")
    problems: list[tuple[int, str]] = []
    for key, (line, value) in wavs.items():
        if value.endswith("|"):  # Kaldi's piped command (a path may hold spaces)
            problems.append(
                (
                    line,
                    f"{key}: {value!r} is a command; voxassay reads only file paths and never "
                    "runs a command from a manifest",
                )
            )
    if problems:
        raise ManifestError(str(path / "wav.scp"), problems)
    texts = _kaldi_table(path / "text", required=False)
    spk = _kaldi_table(path / "utt2spk", required=False)
    segments = _kaldi_table(path / "segments", required=False)
    objs: list[tuple[int, dict[str, Any]]] = []
    if segments:
        for utt, (line, rest) in segments.items():
            parts = rest.split()
            if len(parts) != 3:
                problems.append((line, f"{utt}: expected 'utt recording start end'"))
                continue
            rec, start, end = parts
            if rec not in wavs:
                problems.append((line, f"{utt}: recording {rec!r} is not in wav.scp"))
                continue
            try:
                t0, t1 = float(start), float(end)
            except ValueError:
                problems.append((line, f"{utt}: start/end are not numbers: {start} {end}"))
                continue
            if not 0 <= t0 < t1:
                problems.append((line, f"{utt}: needs 0 <= start < end, got {t0} {t1}"))
                continue
            obj: dict[str, Any] = {
                "id": utt,
                "audio_filepath": wavs[rec][1],
                "offset": t0,
                "duration": t1 - t0,
            }
            obj["meta"] = {"recording": rec}
            objs.append((line, obj))
        if problems:
            raise ManifestError(str(path / "segments"), problems)
    else:
        objs = [(line, {"id": u, "audio_filepath": p}) for u, (line, p) in wavs.items()]
    for _, obj in objs:
        utt = str(obj["id"])
        if utt in texts:
            obj["text"] = texts[utt][1]
        if utt in spk:
            obj["speaker"] = spk[utt][1]
    return _collect(path / ("segments" if segments else "wav.scp"), objs, lambda o: o, "line", path)


def _hf_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.parquet")) or sorted(path.glob("*/*.parquet"))
    files = files or sorted(path.glob("*.arrow"))
    if not files:
        raise InputError(f"{path}: no .parquet or .arrow files")
    return files


def _read_hf(path: Path, columns: dict[str, str]) -> list[Item]:
    from voxassay.core.tables import describe_table, table_rows

    items: list[Item] = []
    seen: dict[str, str] = {}
    for f in _hf_files(path):
        table = describe_table(f)
        audio_col = columns.get("audio")
        if audio_col is None:
            if not table.audio_columns:
                raise InputError(
                    f"{f}: no audio column (a Hugging Face Audio feature or a {{bytes, path}} "
                    f"struct); columns: {', '.join(table.columns)}; name one with --columns "
                    "audio=NAME"
                )
            audio_col = table.audio_columns[0]
        elif audio_col not in table.columns:
            raise InputError(f"{f}: no column {audio_col!r}; columns: {', '.join(table.columns)}")
        rows = table_rows(f, skip=(*table.audio_columns, audio_col))
        header = [c for c in table.columns if c not in table.audio_columns and c != audio_col]
        mapping = _column_map([*header, audio_col], {**columns, "audio": audio_col}, str(f))
        mapping.pop("audio")
        problems: list[tuple[int, str]] = []
        for n, row in enumerate(rows):
            obj = _row_object(row, mapping)
            obj.setdefault("id", None)
            if obj["id"] in (None, ""):
                obj["id"] = f"{f.stem}-{n:06d}"
            obj.update(audio_filepath=str(f), audio_row=n, audio_column=audio_col)
            try:
                item = Item.from_dict(obj, base_dir=None)
            except ValueError as exc:
                problems.append((n + 1, f"row {n}: {exc}"))
                continue
            if item.id in seen:
                problems.append(
                    (n + 1, f"row {n}: duplicate id {item.id!r} (also in {seen[item.id]})")
                )
                continue
            seen[item.id] = f"{f.name} row {n}"
            items.append(item)
        if problems:
            raise ManifestError(str(f), problems)
    return items


MAX_CUT_LINE_BYTES = 8 << 20
"""A lhotse cut line longer than this (decompressed) is refused: no real cut is this large,
and a gzip bomb expands to one endless line."""
MAX_PROBLEMS = 1000
"""A manifest reader stops after this many problems (each with its line)."""


def _lhotse_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-empty lines of a cuts file, decompressed as they are read (a gzip file is never
    expanded whole in memory); a corrupt gzip stream or an endless line is an ``InputError``."""
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    n = 0
    try:
        with opener(path, "rb") as fh:
            while line := fh.readline(MAX_CUT_LINE_BYTES + 1):
                n += 1
                if len(line) > MAX_CUT_LINE_BYTES:
                    raise InputError(
                        f"{path}:{n}: a line over {MAX_CUT_LINE_BYTES >> 20} MiB decompressed: "
                        "not a lhotse cut (a corrupt or hostile file?)"
                    )
                if line.strip():
                    yield n, line.rstrip(b"\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a readable gzip file (line {n + 1}): {exc}") from None


def _lhotse_cut(cut: Any, line: int) -> dict[str, Any]:
    """A manifest object from one lhotse cut (MonoCut): its recording's file, its start and
    duration, its supervisions' text (by start time) and speaker."""
    if not isinstance(cut, dict):
        raise ValueError("expected a cut object")
    rec = cut.get("recording")
    if not isinstance(rec, dict):
        raise ValueError("cut has no 'recording' (only CutSets with recordings are read)")
    sources = rec.get("sources") or []
    files = [s for s in sources if isinstance(s, dict) and s.get("type") == "file"]
    others = [s.get("type") for s in sources if isinstance(s, dict) and s.get("type") != "file"]
    if others:
        raise ValueError(
            f"recording {rec.get('id')!r} has a {others[0]!r} source; voxassay reads only "
            "'file' sources and never fetches a URL or runs a command from a manifest"
        )
    if len(files) != 1:
        raise ValueError(f"recording {rec.get('id')!r}: expected one file source")
    _refuse_what_is_not_read(cut, rec, files[0])
    sups = sorted(
        (s for s in cut.get("supervisions") or [] if isinstance(s, dict)),
        key=lambda s: float(s.get("start") or 0.0),
    )
    texts = [str(s["text"]) for s in sups if s.get("text")]
    speakers = {str(s["speaker"]) for s in sups if s.get("speaker")}
    obj: dict[str, Any] = {
        "id": cut.get("id"),
        "audio_filepath": files[0].get("source"),
        "offset": cut.get("start", 0.0),
        "duration": cut.get("duration"),
        "text": " ".join(texts) if texts else None,
        "speaker": speakers.pop() if len(speakers) == 1 else None,
        "meta": {"recording": rec.get("id"), "supervisions": len(sups)},
    }
    if sups and sups[0].get("language"):
        obj["labels"] = {"language": sups[0]["language"]}
    return obj


def _refuse_what_is_not_read(cut: dict[str, Any], rec: dict[str, Any], source: Any) -> None:
    """A cut whose audio is not the plain file's: a transform (speed, volume, resampling
    perturbation) or one channel of several. Reading the file would give other audio than
    the cut's (9 % of a 1.1x speed-perturbed cut's speech lost), so the cut is refused with
    the reason, never approximated."""
    transforms = [t for t in (rec.get("transforms") or []) if t]
    transforms += [t for t in (cut.get("transforms") or []) if t]
    if transforms:
        names = ", ".join(
            str(t.get("name", t)) if isinstance(t, dict) else str(t) for t in transforms
        )
        raise ValueError(
            f"cut {cut.get('id')!r} has transforms ({names}); voxassay reads the file as it is "
            "and would score other audio than the cut's: write the perturbed audio out with "
            "lhotse (cut.save_audio) and read that"
        )
    channels = source.get("channels") or [0]
    wanted = cut.get("channel", 0)
    wanted = list(wanted) if isinstance(wanted, list) else [wanted]
    if len(channels) > 1 and sorted(wanted) != sorted(channels):
        raise ValueError(
            f"cut {cut.get('id')!r} is channel {', '.join(map(str, wanted))} of the "
            f"{len(channels)}-channel recording {rec.get('id')!r}; voxassay reads the mean of a "
            "file's channels, so it refuses the cut: write the channel out (cut.save_audio)"
        )


def _read_lhotse(path: Path, columns: dict[str, str]) -> list[Item]:
    rows: list[tuple[int, Any]] = []
    problems: list[tuple[int, str]] = []
    for line, raw in _lhotse_lines(path):
        try:
            rows.append((line, _lhotse_cut(jsonio.loads(raw.decode("utf-8")), line)))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append((line, f"not a JSON line: {exc}"))
        except (ValueError, TypeError) as exc:
            problems.append((line, str(exc)))
        if len(problems) >= MAX_PROBLEMS:
            problems.append((line, f"stopped after {MAX_PROBLEMS} problems"))
            break
    if problems:
        raise ManifestError(str(path), problems)
    return _collect(path, rows, lambda o: o, "line", path.parent)


_READERS: dict[str, Callable[[Path, dict[str, str]], list[Item]]] = {  # tables: _read_table
    "jsonl": _read_jsonl,
    "json": _read_json,
    "kaldi": _read_kaldi,
    "audiofolder": _read_audiofolder,
    "hf": _read_hf,
    "lhotse": _read_lhotse,
}
