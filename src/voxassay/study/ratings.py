"""Ratings as a study holds them: the long ratings CSV and the judges CSV read and checked row by row (problems with their line, stretched Likert scales refused), and the study's eval definitions."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core import jsonio
from voxassay.core.errors import InputError
from voxassay.study.format import RATING_COLUMNS_OPTIONAL, RATING_COLUMNS_REQUIRED

__all__ = [
    "JUDGES_FILE",
    "KINDS",
    "MAX_PROBLEMS_LISTED",
    "OPTIONAL",
    "RATINGS_FILE",
    "REQUIRED",
    "EvalMeta",
    "JudgeRow",
    "LoadedRatings",
    "Progress",
    "Ratings",
    "load_judges_csv",
    "load_ratings_csv",
    "read_study_evals",
]


RATINGS_FILE = "ratings.csv"


JUDGES_FILE = "judges.csv"


REQUIRED = RATING_COLUMNS_REQUIRED


OPTIONAL = RATING_COLUMNS_OPTIONAL


KINDS = ("likert", "pairwise")


MAX_PROBLEMS_LISTED = 200


Progress = Callable[[str], None] | None


@dataclass
class EvalMeta:
    """What the study says about an eval (or what the data implies without a study)."""

    id: str
    dimension: str
    kind: str = "likert"
    question: str = ""
    scale_min: float | None = None
    scale_max: float | None = None
    scale_inferred: bool = True
    gold_tolerance: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dimension": self.dimension,
            "kind": self.kind,
            "question": self.question,
            "scale": {"min": self.scale_min, "max": self.scale_max},
            "scale_inferred": self.scale_inferred,
        }


@dataclass
class Ratings:
    """Usable rows of a ratings CSV, column-wise (``line`` = line number in the file)."""

    rater: list[str] = field(default_factory=list)
    item: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    eval: list[str] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    timestamp: list[str] = field(default_factory=list)
    response_ms: list[float] = field(default_factory=list)
    gold: list[float] = field(default_factory=list)
    dimension: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    system_b: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.score)

    def take(self, keep: Sequence[int] | np.ndarray) -> Ratings:
        out = Ratings()
        for name in self.__dataclass_fields__:
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in keep])
        return out


@dataclass
class LoadedRatings:
    ratings: Ratings
    malformed: list[tuple[int, str]]
    rows_read: int
    revisions: int
    columns: list[str]
    revision_lines: list[tuple[int, int]] = field(default_factory=list)
    """``(line, earlier line)``: a repeated row (same rater, item, system, eval) and the row
    it was weighed against; the newer (timestamp, else the later line) is kept."""


def _parse_time(text: str) -> _dt.datetime:
    value = _dt.datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return value


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def load_ratings_csv(
    path: Path, evals: Mapping[str, EvalMeta] | None = None, *, label: str | None = None
) -> LoadedRatings:
    """Read a long-format ratings CSV (see the module docstring).

    ``evals`` (from ``study.json``) fixes each eval's kind and scale: rows of unknown evals,
    of another kind or off the scale are malformed then. Raises :class:`InputError` when the
    file cannot be read, lacks a required column, or has no usable row (messages name
    ``label``, default the path).
    """
    path = Path(path)
    name = label or str(path)
    try:
        fh = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read ratings {name}: {exc}") from None
    malformed: list[tuple[int, str]] = []
    rows: list[tuple[int, dict[str, str]]] = []
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(f"ratings file {name} is empty") from None
        except csv.Error as exc:
            raise InputError(f"ratings file {name}: unreadable header ({exc})") from None
        columns = [h.strip() for h in header]
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise InputError(
                f"ratings file {name} lacks required column(s) {', '.join(missing)} "
                f"(found: {', '.join(columns) or 'none'}; need {', '.join(REQUIRED)})"
            )
        index = {c: i for i, c in enumerate(columns) if c in REQUIRED + OPTIONAL}
        while True:
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                malformed.append((reader.line_num, f"CSV error: {exc}"))
                continue
            line = reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            if len(values) != len(columns):
                malformed.append((line, f"expected {len(columns)} fields, got {len(values)}"))
                continue
            if any("\udc80" <= ch <= "\udcff" for v in values for ch in v):
                malformed.append((line, "not UTF-8"))
                continue
            rows.append((line, {c: values[i].strip() for c, i in index.items()}))
    rows_read = len(rows) + len(malformed)
    ratings, more, revision_lines = _check_rows(rows, evals)
    malformed.extend(more)
    if evals is None:  # no study.json: a lone typo must not stretch the inferred scale
        ratings, stretched = _refuse_stretching(ratings)
        malformed.extend(stretched)
    malformed.sort()
    if not len(ratings):
        shown = "; ".join(f"line {ln}: {why}" for ln, why in malformed[:5])
        raise InputError(
            f"no usable ratings in {name} ({rows_read} data row(s), "
            f"{len(malformed)} malformed{': ' + shown if shown else ''})"
        )
    return LoadedRatings(
        ratings, malformed, rows_read, len(revision_lines), columns, revision_lines
    )


def _refuse_stretching(ratings: Ratings) -> tuple[Ratings, list[tuple[int, str]]]:
    """Rows of a likert eval whose score alone would stretch the scale inferred from the
    others (:func:`voxassay.study.format.infer_likert_scale`), as malformed rows."""
    from voxassay.study.format import infer_likert_scale, stretch_reason

    refused: dict[int, str] = {}
    for ev in sorted(set(ratings.eval)):
        idx = [i for i, e in enumerate(ratings.eval) if e == ev and ratings.kind[i] != "pairwise"]
        scale, out = infer_likert_scale([(ratings.line[i], ratings.score[i]) for i in idx])
        for line, score in out:
            refused[line] = stretch_reason(score, scale)
    if not refused:
        return ratings, []
    keep = [i for i, line in enumerate(ratings.line) if line not in refused]
    return ratings.take(keep), sorted(refused.items())


def _check_rows(
    rows: list[tuple[int, dict[str, str]]], evals: Mapping[str, EvalMeta] | None
) -> tuple[Ratings, list[tuple[int, str]], list[tuple[int, int]]]:
    bad: list[tuple[int, str]] = []
    kind_of: dict[str, str] = {e: m.kind for e, m in (evals or {}).items()}
    good: list[tuple[int, dict[str, Any]]] = []
    for line, r in rows:
        why = []
        for col in REQUIRED:
            if not r.get(col):
                why.append(f"empty {col}")
        score = math.nan
        if r.get("score"):
            try:
                score = _number(r["score"])
            except ValueError:
                why.append(f"score {r['score'][:40]!r} is not a number")
        kind = (r.get("kind") or "likert").lower()
        if kind not in KINDS:
            why.append(f"kind {r.get('kind', '')[:40]!r} is not likert or pairwise")
        ev = r.get("eval", "")
        if evals is not None and ev and ev not in evals:
            why.append(f"eval {ev[:40]!r} is not in study.json")
        elif ev and kind in KINDS:
            expected = kind_of.setdefault(ev, kind)
            if expected != kind:
                why.append(f"kind {kind} but eval {ev!r} is {expected}")
        system_b = r.get("system_b", "")
        if kind == "pairwise":
            if not system_b:
                why.append("pairwise row without system_b")
            elif system_b == r.get("system"):
                why.append("pairwise row compares a system with itself")
            if math.isfinite(score) and score not in (0.0, 0.5, 1.0):
                why.append(f"pairwise score {score:g} is not 0, 0.5 or 1")
        elif evals is not None and ev in evals and math.isfinite(score):
            meta = evals[ev]
            lo, hi = meta.scale_min, meta.scale_max
            if lo is not None and hi is not None and not lo <= score <= hi:
                why.append(f"score {score:g} outside the scale {lo:g}..{hi:g}")
        ms = math.nan
        if r.get("response_ms"):
            try:
                ms = _number(r["response_ms"])
                if ms < 0:
                    why.append("negative response_ms")
            except ValueError:
                why.append(f"response_ms {r['response_ms'][:40]!r} is not a number")
        gold = math.nan
        if r.get("gold_expected"):
            try:
                gold = _number(r["gold_expected"])
            except ValueError:
                why.append(f"gold_expected {r['gold_expected'][:40]!r} is not a number")
        stamp = r.get("timestamp", "")
        if stamp:
            try:
                _parse_time(stamp)
            except ValueError:
                why.append(f"timestamp {stamp[:40]!r} is not ISO 8601")
        if why:
            bad.append((line, "; ".join(why)))
            continue
        good.append(
            (
                line,
                {
                    "rater": r["rater"],
                    "item": r["item"],
                    "system": r["system"],
                    "eval": ev,
                    "score": score,
                    "timestamp": stamp,
                    "response_ms": ms,
                    "gold": gold,
                    "dimension": r.get("dimension", ""),
                    "kind": kind,
                    "system_b": system_b if kind == "pairwise" else "",
                },
            )
        )
    # revisions: keep the newest (timestamp, else later line) per key
    latest: dict[tuple[str, ...], tuple[int, dict[str, Any]]] = {}
    revisions: list[tuple[int, int]] = []
    for line, g in good:
        key = (g["rater"], g["item"], g["system"], g["system_b"], g["eval"])
        prev = latest.get(key)
        if prev is not None:
            revisions.append((line, prev[0]))
            older = (
                prev[1]["timestamp"]
                and g["timestamp"]
                and _parse_time(g["timestamp"]) < _parse_time(prev[1]["timestamp"])
            )
            if older:
                continue
        latest[key] = (line, g)
    out = Ratings()
    for line, g in sorted(latest.values(), key=lambda t: t[0]):
        for name in ("rater", "item", "system", "eval", "score", "timestamp", "response_ms"):
            getattr(out, name).append(g[name])
        out.gold.append(g["gold"])
        out.dimension.append(g["dimension"])
        out.kind.append(g["kind"])
        out.system_b.append(g["system_b"])
        out.line.append(line)
    return out, bad, revisions


def read_study_evals(study_dir: Path) -> dict[str, EvalMeta]:
    """``study.json``'s ``evals`` (id, dimension, kind, question, scale) and the gold
    tolerance (``gold.tolerance``; default 1 point for likert, 0 for pairwise)."""
    path = Path(study_dir) / "study.json"
    try:
        data = jsonio.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"not a study folder (no study.json): {study_dir}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    evals = data.get("evals") if isinstance(data, dict) else None
    if not isinstance(evals, list) or not evals:
        raise InputError(f"{path} has no evals")
    tol = (data.get("gold") or {}).get("tolerance") if isinstance(data.get("gold"), dict) else None
    out: dict[str, EvalMeta] = {}
    for i, e in enumerate(evals):
        if not isinstance(e, dict) or not e.get("id"):
            raise InputError(f"{path}: evals[{i}] has no id")
        scale = e.get("scale") or {}
        kind = e.get("kind", "likert")
        out[str(e["id"])] = EvalMeta(
            id=str(e["id"]),
            dimension=str(e.get("dimension") or e["id"]),
            kind=kind if kind in KINDS else "likert",
            question=str(e.get("question", "")),
            scale_min=_maybe_float(scale.get("min")) if kind != "pairwise" else 0.0,
            scale_max=_maybe_float(scale.get("max")) if kind != "pairwise" else 1.0,
            scale_inferred=False,
            gold_tolerance=float(tol) if tol is not None else None,
        )
    return out


def _maybe_float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class JudgeRow:
    line: int
    item: str
    system: str
    target: str  # eval or dimension name
    score: float


def load_judges_csv(path: Path) -> tuple[list[JudgeRow], list[tuple[int, str]]]:
    """Judge scores: columns ``score``, ``item`` and/or ``system``, and ``eval`` or
    ``dimension``. Item rows (with ``system`` too when item ids repeat across systems) are
    compared per item; rows without ``item`` are system scores."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read judges {path}: {exc}") from None
    rows: list[JudgeRow] = []
    bad: list[tuple[int, str]] = []
    with fh:
        reader = csv.DictReader(fh)
        cols = [c.strip() for c in (reader.fieldnames or [])]
        reader.fieldnames = cols
        if "score" not in cols or not ({"item", "system"} & set(cols)):
            raise InputError(
                f"judges file {path} needs columns score, item and/or system, eval or dimension "
                f"(found: {', '.join(cols) or 'none'})"
            )
        if not ({"eval", "dimension"} & set(cols)):
            raise InputError(f"judges file {path} needs an eval or a dimension column")
        for r in reader:
            line = reader.line_num
            if None in r or any(v is None for v in r.values()):
                bad.append((line, "wrong number of fields"))
                continue
            item = (r.get("item") or "").strip()
            system = (r.get("system") or "").strip()
            target = (r.get("eval") or "").strip() or (r.get("dimension") or "").strip()
            if not item and not system:
                bad.append((line, "neither item nor system"))
                continue
            if not target:
                bad.append((line, "neither eval nor dimension"))
                continue
            try:
                score = _number(r.get("score") or "")
            except ValueError:
                bad.append((line, f"score {(r.get('score') or '')[:40]!r} is not a number"))
                continue
            rows.append(JudgeRow(line, item, system, target, score))
    return rows, bad
