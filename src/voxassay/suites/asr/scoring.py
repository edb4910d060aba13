"""Score prediction files produced elsewhere (``voxassay asr score``), no model needed.

A predictions file is JSONL with ``text`` (reference) and ``pred_text`` per line, plus
optional ``id``, ``system``, ``speaker``, ``labels``/``condition``, ``audio_filepath`` and
``duration`` (the Open ASR Leaderboard's manifest plus ``pred_text``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError, ManifestError
from voxassay.core.items import Item
from voxassay.core.records import Record, error_record


def read_predictions(paths: Sequence[str | Path]) -> tuple[list[Item], list[Record]]:
    """Items (one per id) and unscored records (one per line) from prediction files.

    The system is the line's ``system`` field, else the file's stem. Lines without an id get
    ``<file stem>-<line>``. The same id with different reference texts is refused.
    """
    items: dict[str, Item] = {}
    records: list[Record] = []
    problems: list[tuple[int, str]] = []
    for path in map(Path, paths):
        if not path.exists():
            raise InputError(f"predictions file not found: {path}")
        seen: set[tuple[str, str]] = set()
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                bad_text = None
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    line = raw.decode("utf-8", errors="replace")
                    bad_text = (
                        f"line {lineno} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
                    )
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    problems.append((lineno, f"{path.name}: invalid JSON: {exc.msg}"))
                    continue
                if not isinstance(obj, dict):
                    problems.append((lineno, f"{path.name}: line is not a JSON object"))
                    continue
                obj.setdefault("id", f"{path.stem}-{lineno}")
                system = str(obj.pop("system", None) or path.stem)
                pred = obj.pop("pred_text", None)
                try:
                    item = Item.from_dict(obj, base_dir=path.parent)
                except ValueError as exc:
                    problems.append((lineno, f"{path.name}: {exc}"))
                    continue
                if (item.id, system) in seen:
                    problems.append(
                        (lineno, f"{path.name}: duplicate id {item.id!r} for system {system!r}")
                    )
                    continue
                seen.add((item.id, system))
                known = items.get(item.id)
                if known is not None and known.text != item.text:
                    problems.append(
                        (
                            lineno,
                            f"{path.name}: id {item.id!r} has a different reference text than before",
                        )
                    )
                    continue
                items.setdefault(item.id, item)
                if bad_text:
                    records.append(error_record(item.id, system, 0, "text_encoding", bad_text))
                elif pred is None:
                    records.append(
                        error_record(
                            item.id, system, 0, "missing_prediction", "no 'pred_text' on this line"
                        )
                    )
                elif not isinstance(pred, str):
                    records.append(
                        error_record(
                            item.id,
                            system,
                            0,
                            "unparseable",
                            f"'pred_text' is {type(pred).__name__}",
                            "unparseable",
                        )
                    )
                elif item.text is None:
                    records.append(
                        error_record(
                            item.id, system, 0, "no_reference", "no 'text' on this line", "unscored"
                        )
                    )
                else:
                    records.append(Record(id=item.id, system=system, output={"pred_text": pred}))
    if problems:
        raise ManifestError(", ".join(str(p) for p in paths), problems)
    if not records:
        raise InputError("no predictions found")
    return list(items.values()), records


def score_records(
    items: Sequence[Item], records: list[Record], normalizer: str, workers: int | None = None
) -> list[Record]:
    """Fill ``metrics`` of every ok record: normalize all texts in one batch, then align."""
    from voxassay.suites.asr.normalize import get_normalizer, normalize_many
    from voxassay.suites.asr.wer import merges_compounds, metrics_from_normalized

    version = get_normalizer(normalizer).version
    by_id = {it.id: it for it in items}
    todo = [r for r in records if r.status == "ok"]
    refs = [by_id[r.id].text or "" for r in todo]
    hyps = [str(r.output.get("pred_text", "")) for r in todo]
    normed = normalize_many([*refs, *hyps], name=normalizer, workers=workers)
    for rec, rn, hn in zip(todo, normed[: len(todo)], normed[len(todo) :], strict=True):
        rec.metrics = metrics_from_normalized(rn, hn, version, merges_compounds(normalizer))
    return records


def corpus_totals(records: Sequence[Record]) -> dict[str, Any]:
    """Totals over ok records with non-empty references: S, D, I, errors, ref words, WER."""
    rows = [
        r.metrics for r in records if r.status == "ok" and r.metrics and not r.metrics["empty_ref"]
    ]
    s = sum(m["sub"] for m in rows)
    d = sum(m["del"] for m in rows)
    i = sum(m["ins"] for m in rows)
    n = sum(m["ref_words"] for m in rows)
    return {
        "sub": s,
        "del": d,
        "ins": i,
        "errors": s + d + i,
        "ref_words": n,
        "wer": (s + d + i) / n if n else float("nan"),
    }
