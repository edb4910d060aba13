"""``voxassay study import``: ratings collected elsewhere (long CSV) into a study store.

Columns: ``rater,item,system,eval,score`` required; ``timestamp`` (ISO 8601),
``response_ms``, ``dimension``, ``kind`` (likert|pairwise), ``system_b`` and
``gold_expected`` optional (the export's own columns, so an export imports back). Every row
is checked; a bad row is reported with its line number and reason, counted and skipped.

Into an existing study (``--study``) rows must name its items, evals and systems and lie on
the eval's scale. Without one, a minimal study folder is made (evals and items inferred:
pairwise where ``kind`` says so or ``system_b`` is set, likert scale from ``--scale`` or
the data, items that several systems share get one item per system ``<item>~<system>``).
Re-importing a row with the same score changes nothing; a different score is stored as a
revision (history kept).
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
import os
import shutil
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.study.format import (
    RATING_COLUMNS_OPTIONAL,
    RATING_COLUMNS_REQUIRED,
    Eval,
    Item,
    Stimulus,
    Study,
    infer_likert_scale,
    load_study,
    save_study,
    stretch_reason,
)
from voxassay.study.store import RatingWrite, StudyStore, utc_now

REQUIRED = RATING_COLUMNS_REQUIRED
OPTIONAL = RATING_COLUMNS_OPTIONAL
MAX_FIELD = 200


@dataclass
class Row:
    line: int
    rater: str
    item: str
    system: str
    eval: str
    score: float
    timestamp: str | None
    response_ms: int | None
    dimension: str | None
    kind: str | None
    system_b: str | None
    gold_expected: float | None


@dataclass
class ImportReport:
    source: Path
    study_dir: Path
    created: bool
    rows: int = 0
    imported: int = 0
    unchanged: int = 0
    revised: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)
    new_raters: int = 0
    notes: list[str] = field(default_factory=list)
    revisions: list[tuple[int, float, float]] = field(default_factory=list)
    """``(line, stored score, new score)`` of each row that revised a stored rating."""

    def summary(self) -> str:
        return (
            f"{self.rows} row(s): {self.imported} imported, {self.revised} revised, "
            f"{self.unchanged} unchanged, {len(self.bad)} bad (skipped); "
            f"{self.new_raters} new rater(s)"
        )


def _parse_time(text: str) -> str:
    """ISO 8601 in, UTC ``...Z`` with milliseconds out (naive times are taken as UTC)."""
    t = _dt.datetime.fromisoformat(text.strip())
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return t.astimezone(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_rows(path: Path) -> tuple[list[Row], list[tuple[int, str]], int]:
    """Rows that pass the format checks, bad rows ``(line, reason)``, and the row count."""
    try:
        # undecodable bytes become surrogates, so one bad byte costs its row, not the file
        fh = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    rows: list[Row] = []
    bad: list[tuple[int, str]] = []
    total = 0
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(f"{path}: empty file (needs a header row)") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: unreadable header: {exc}") from None
        if _not_utf8(header):
            raise InputError(f"{path}: the header row is not UTF-8 text")
        cols = [h.strip().lower() for h in header]
        missing = [c for c in REQUIRED if c not in cols]
        if missing:
            raise InputError(
                f"{path}: missing required column(s) {', '.join(missing)} "
                f"(needs {','.join(REQUIRED)}; optional {','.join(OPTIONAL)})"
            )
        index = {c: cols.index(c) for c in (*REQUIRED, *OPTIONAL) if c in cols}
        while True:
            try:
                values = next(reader)
            except StopIteration:
                break
            except (csv.Error, UnicodeDecodeError) as exc:
                total += 1
                bad.append((reader.line_num, f"unreadable row: {exc}"))
                continue
            line = reader.line_num
            if not any(v.strip() for v in values):
                continue
            total += 1
            if _not_utf8(values):
                bad.append((line, "not UTF-8 text"))
                continue
            if len(values) > len(cols):
                bad.append((line, f"{len(values)} fields, header has {len(cols)}"))
                continue
            if len(values) < len(cols):  # trailing empty fields left out
                if len(values) <= max(index[c] for c in REQUIRED):
                    bad.append((line, f"{len(values)} fields, header has {len(cols)}"))
                    continue
                values = values + [""] * (len(cols) - len(values))

            def get(name: str, values: list[str] = values) -> str:
                return values[index[name]].strip() if name in index else ""

            problems = []
            for name in ("rater", "item", "system", "eval"):
                if not get(name):
                    problems.append(f"empty {name}")
                elif len(get(name)) > MAX_FIELD:
                    problems.append(f"{name} longer than {MAX_FIELD} characters")
            try:
                score = float(get("score"))
                if not math.isfinite(score):
                    raise ValueError
            except ValueError:
                problems.append(f"score {get('score')[:20]!r} is not a number")
                score = float("nan")
            timestamp = None
            if get("timestamp"):
                try:
                    timestamp = _parse_time(get("timestamp"))
                except ValueError:
                    problems.append(f"timestamp {get('timestamp')[:40]!r} is not ISO 8601")
            response_ms = None
            if get("response_ms"):
                try:
                    response_ms = int(float(get("response_ms")))
                    if response_ms < 0:
                        raise ValueError
                except ValueError:
                    problems.append("response_ms is not a non-negative number")
            kind = get("kind").lower() or None
            if kind not in (None, "likert", "pairwise"):
                problems.append(f"kind {kind[:20]!r} is not likert or pairwise")
            gold = None
            if get("gold_expected"):
                try:
                    gold = float(get("gold_expected"))
                except ValueError:
                    problems.append("gold_expected is not a number")
            if problems:
                bad.append((line, "; ".join(problems)))
                continue
            rows.append(
                Row(
                    line=line,
                    rater=get("rater"),
                    item=get("item"),
                    system=get("system"),
                    eval=get("eval"),
                    score=score,
                    timestamp=timestamp,
                    response_ms=response_ms,
                    dimension=get("dimension") or None,
                    kind=kind,
                    system_b=get("system_b") or None,
                    gold_expected=gold,
                )
            )
    return rows, bad, total


def _not_utf8(values: list[str]) -> bool:
    """True when a field holds bytes that were not UTF-8 (decoded as lone surrogates)."""
    return any("\udc80" <= ch <= "\udcff" for v in values for ch in v)


def _dedupe(rows: list[Row]) -> tuple[list[Row], list[tuple[int, str]]]:
    """The first valid row per rater x item x system x eval; later ones are reported. Run it
    after every other check, so a rejected row never counts as the first copy."""
    first: dict[tuple[str, str, str, str], int] = {}
    good, bad = [], []
    for r in rows:
        key = (r.rater, r.item, r.system, r.eval)
        if key in first:
            bad.append((r.line, f"duplicate of line {first[key]} (same rater, item, eval)"))
            continue
        first[key] = r.line
        good.append(r)
    return good, bad


def _check_against(study: Study, rows: list[Row]) -> tuple[list[Row], list[tuple[int, str]]]:
    """Rows that fit the study's items and evals, and the reasons of those that do not. An
    item id that an earlier import split per system (``<item>~<system>``, its ``key`` the
    original id) is found again by its original id and the row's system(s)."""
    items, evals = study.item_by_id(), study.eval_by_id()
    split: dict[tuple[str, str, str | None], str] = {}
    renamed: dict[str, list[str]] = defaultdict(list)
    for it in study.items:
        if it.key and it.key != it.id and it.key not in items:
            split[(it.key, it.system, it.system_b)] = it.id
            renamed[it.key].append(it.id)
    good, bad = [], []
    for r in rows:
        if r.item not in items and (r.item, r.system, r.system_b) in split:
            r.item = split[(r.item, r.system, r.system_b)]
        item, ev = items.get(r.item), evals.get(r.eval)
        if item is None and r.item in renamed:
            bad.append(
                (
                    r.line,
                    f"item {r.item!r} was imported as one item per system "
                    f"({', '.join(sorted(renamed[r.item])[:5])}); system {r.system!r} is none "
                    "of them",
                )
            )
        elif item is None:
            bad.append((r.line, f"unknown item {r.item!r}"))
        elif ev is None:
            bad.append((r.line, f"unknown eval {r.eval!r} (known: {', '.join(evals)})"))
        elif ev.kind != item.eval_kind:
            bad.append((r.line, f"eval {r.eval!r} is {ev.kind}; item {r.item!r} is a {item.kind}"))
        elif r.system != item.system:
            bad.append((r.line, f"system {r.system!r} does not match the item's system"))
        elif r.system_b is not None and r.system_b != item.system_b:
            bad.append((r.line, f"system_b {r.system_b!r} does not match the item's B side"))
        elif not ev.valid_score(r.score):
            allowed = "0, 0.5 or 1" if ev.kind == "pairwise" else f"{ev.scale.min}..{ev.scale.max}"
            bad.append((r.line, f"score {r.score:g} is not a valid answer ({allowed})"))
        else:
            good.append(r)
    return good, bad


def _minimal_study(
    rows: list[Row], source: Path, scale: tuple[int, int] | None
) -> tuple[Study, list[Row], list[tuple[int, str]], list[str]]:
    """A study inferred from the rows (see the module docstring)."""
    from voxassay.core.runstore import new_run_id

    notes: list[str] = []
    bad: list[tuple[int, str]] = []
    eval_kind: dict[str, str] = {}
    eval_dim: dict[str, str] = {}
    for r in rows:
        kind = r.kind or ("pairwise" if r.system_b else "likert")
        eval_kind.setdefault(r.eval, kind)
        if r.dimension:
            eval_dim.setdefault(r.eval, r.dimension)
    # pairwise rows need a B side; likert scores should be whole numbers
    kept = []
    for r in rows:
        if eval_kind[r.eval] == "pairwise" and not r.system_b:
            bad.append((r.line, "pairwise row without system_b"))
        elif eval_kind[r.eval] == "likert" and r.system_b:
            bad.append((r.line, f"system_b set but eval {r.eval!r} is likert"))
        else:
            kept.append(r)
    rows = kept
    if scale is None:
        likert = [(r.line, r.score) for r in rows if eval_kind[r.eval] == "likert"]
        scale, refused = infer_likert_scale(likert)
        refused_lines = {line for line, _ in refused}
        stretching = [r for r in rows if r.line in refused_lines]
        if stretching:
            for r in stretching:
                bad.append((r.line, stretch_reason(r.score, scale)))
            notes.append(
                f"WARNING: {len(stretching)} row(s) refused as outside the inferred scale "
                f"(lines {', '.join(str(r.line) for r in stretching)}); pass --scale to set it"
            )
            rows = [r for r in rows if r not in stretching]
        notes.append(f"likert scale inferred from the data: {scale[0]}..{scale[1]}")
    evals = []
    for ev_id, kind in eval_kind.items():
        data: dict[str, Any] = {
            "id": ev_id,
            "dimension": eval_dim.get(ev_id, ev_id),
            "kind": kind,
            "question": f"(imported) {ev_id}",
        }
        if kind == "likert":
            data["scale"] = {"min": scale[0], "max": scale[1]}
        try:
            evals.append(Eval.model_validate(data))
        except ValueError as exc:
            raise InputError(f"eval {ev_id!r} cannot be made: {exc}") from None
    systems_of: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for r in rows:
        systems_of[r.item].add((r.system, r.system_b))
    shared = {i for i, s in systems_of.items() if len(s) > 1}
    if shared:
        notes.append(
            f"{len(shared)} item id(s) are rated for several systems; each (item, system) "
            "became its own item '<item>~<system>' (group = the original item)"
        )
    items: dict[str, Item] = {}
    gold: dict[str, dict[str, float]] = defaultdict(dict)
    final_rows = []
    for r in rows:
        item_id = f"{r.item}~{r.system}" + (f"~{r.system_b}" if r.system_b else "")
        item_id = item_id if r.item in shared else r.item
        if item_id not in items:
            stimuli = [Stimulus(system=r.system, audio="")]
            if r.system_b:
                stimuli.append(Stimulus(system=r.system_b, audio=""))
            items[item_id] = Item(
                id=item_id,
                kind="pair" if r.system_b else "single",
                stimuli=stimuli,
                context="",
                group=r.item,
                key=r.item,
                gold=None,
                trap=False,
            )
        if r.gold_expected is not None:
            gold[item_id][r.eval] = r.gold_expected
        r.item = item_id
        final_rows.append(r)
    for item_id, expected in gold.items():
        items[item_id].gold = expected
    raters_by_item: dict[str, set[str]] = defaultdict(set)
    for r in final_rows:
        raters_by_item[r.item].add(r.rater)
    per_item = (
        int(statistics.median(len(v) for v in raters_by_item.values())) if raters_by_item else 1
    )
    study = Study(
        study_id=new_run_id("study"),
        title=f"Imported from {source.name}",
        instructions="",
        created_at=utc_now(),
        raters_per_item=max(1, per_item),
        n_raters=len({r.rater for r in final_rows}),
        evals=evals,
        items=list(items.values()),
        sources=[{"kind": "import", "path": str(source)}],
        notes=notes,
    )
    study.gold.traps = 0
    return study, final_rows, bad, notes


def _write_rows(store: StudyStore, rows: list[Row], report: ImportReport, label: str) -> None:
    now = utc_now()
    with store.transaction():
        for r in rows:
            if store.ensure_rater(r.rater, source="import"):
                report.new_raters += 1
            old = store.existing_score(r.rater, r.item, r.eval)
            if old is not None and old == r.score:
                report.unchanged += 1
                continue
            store.write_ratings(
                r.rater,
                r.item,
                [RatingWrite(r.eval, r.score)],
                now=r.timestamp or now,
                response_ms=r.response_ms,
                source=label,
                revise=old is not None,
            )
            if old is None:
                report.imported += 1
            else:
                report.revised += 1
                report.revisions.append((r.line, old, r.score))


def import_ratings(
    csv_path: Path,
    *,
    study_dir: Path | None = None,
    out_parent: Path | None = None,
    scale: tuple[int, int] | None = None,
) -> ImportReport:
    """Import ``csv_path`` into ``study_dir``, or into a new study under ``out_parent``."""
    csv_path = Path(csv_path)
    rows, bad, total = read_rows(csv_path)
    label = f"import:{csv_path.name}"[:120]
    if study_dir is not None:
        study = load_study(study_dir)
        good, more_bad = _check_against(study, rows)
        good, dupes = _dedupe(good)
        report = ImportReport(csv_path, Path(study_dir), created=False, rows=total)
        report.bad = sorted(bad + more_bad + dupes)
        if not good:
            return report
        store = StudyStore.for_study(study_dir)
        try:
            _write_rows(store, good, report, label)
        finally:
            store.close()
        return report
    study, good, more_bad, notes = _minimal_study(rows, csv_path, scale)
    parent = Path(out_parent or "runs")
    report = ImportReport(csv_path, parent / study.study_id, created=True, rows=total)
    report.bad = sorted(bad + more_bad)
    report.notes = notes
    if not good:
        return report
    good, even_more = _check_against(study, good)
    good, dupes = _dedupe(good)
    report.bad = sorted(report.bad + even_more + dupes)
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{study.study_id}.tmp"
    tmp.mkdir()
    try:
        save_study(tmp, study)
        store = StudyStore.for_study(tmp)
        try:
            _write_rows(store, good, report, label)
        finally:
            store.close()
        os.replace(tmp, report.study_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report
