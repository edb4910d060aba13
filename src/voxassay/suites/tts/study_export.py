"""A TTS run as a human rating study (``--study``), and human results merged back
(``voxassay tts report RUN --human STUDY_DIR|ratings.csv``).

Export. The study tool asks every likert eval of a study on every item, while each TTS item
belongs to one eval with its own question. So the study has one likert eval per distinct
scale (normally one, ``answer``, 1-5) and each item shows its own eval's question, the text
and the style instruction as the item's context: raters answer exactly the question the
eval asks, on the eval's scale, for that recording. Per record (repeat 0, status ok) one
study item (``RUN/study/items.jsonl``: ``id`` = ``<item>~<system slug>``, ``system``,
``audio``, ``eval``, ``dimension``, ``group`` = item id); ``questions.yaml``; the study itself
via :func:`voxassay.study.create.create_study` with >= 3 raters per item under
``RUN/study/study-<stamp>-<hex>/``; ``RUN/study/export.json`` maps study keys back to
(item, system, eval, dimension).

Merge. Ratings (a study folder's export, or a long-format CSV) are mapped back to TTS items
and evals, analysed by :func:`voxassay.study.analysis.analyze` per TTS eval (rater-controlled
crossed model, z-scores, dimensions as equal-weight means of z-scale eval means) with the
judge's item scores, when the run has them, for judge-vs-human Spearman per eval and
dimension. The result goes to ``RUN/human.json`` (the format ``suites/tts/report.py``
reads) and the full analysis to ``RUN/human_analysis.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.tts.runner import system_slug

STUDY_DIR = "study"
EXPORT_MAP = "export.json"
HUMAN_FILE = "human.json"
HUMAN_ANALYSIS_FILE = "human_analysis.json"
ANSWER_EVAL = "answer"


def _scale(ev: Mapping[str, Any]) -> tuple[int, int]:
    sc = ev.get("scale") or {}
    return int(sc.get("min", 1)), int(sc.get("max", 5))


def _context(question: str, text: str | None, instructions: str | None) -> str:
    parts = [f"Question: {question}"]
    if text:
        parts.append(f"Text: \u201c{text}\u201d")
    if instructions:
        parts.append(f"The voice was asked to: {instructions}")
    return "  \u2014  ".join(parts)


def export_study(
    store: RunStore,
    *,
    raters_per_item: int = 3,
    raters: int | None = None,
    seed: int = 0,
    headphone_check: bool = True,
) -> Path:
    """Write ``RUN/study/`` (items.jsonl, questions.yaml, export.json) and create the study
    in it; returns the study folder. Items of evals without a question are left out."""
    import yaml

    from voxassay.study.create import create_study

    if raters_per_item < 3:
        raise InputError("a TTS study needs at least 3 raters per item")
    evals = store.info().get("config", {}).get("evals") or {}
    items = {it.id: it for it in store.items()}
    base = store.path / STUDY_DIR
    base.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    mapping: dict[str, dict[str, Any]] = {}
    scales: set[tuple[int, int]] = set()
    skipped = 0
    for rec in sorted(store.load_records().records, key=lambda r: (r.id, r.system)):
        if rec.status != "ok" or rec.repeat != 0 or not rec.output.get("audio_path"):
            continue
        it = items.get(rec.id)
        ev_id = str(it.labels.get("eval")) if it else ""
        ev = evals.get(ev_id)
        if it is None or not ev or not ev.get("question"):
            skipped += 1
            continue
        scales.add(_scale(ev))
        key = f"{rec.id}~{system_slug(rec.system)}"
        rows.append(
            {
                "id": key,
                "system": rec.system,
                "audio": str((store.path / rec.output["audio_path"]).resolve()),
                "context": _context(
                    str(ev["question"]), it.text, (it.meta or {}).get("instructions")
                ),
                "group": rec.id,
                "eval": ev_id,
                "dimension": ev.get("dimension") or it.labels.get("dimension"),
            }
        )
        mapping[key] = {
            "item": rec.id,
            "system": rec.system,
            "eval": ev_id,
            "dimension": ev.get("dimension") or it.labels.get("dimension"),
            "scale": dict(zip(("min", "max"), _scale(ev), strict=True)),
        }
    if not rows:
        raise InputError(f"{store.path}: no successful record of an eval with a question")
    if len(scales) > 1:
        raise InputError(
            f"the run's evals use {len(scales)} different scales; the study tool asks one "
            "question set per study (export per scale is not supported)"
        )
    lo, hi = scales.pop()
    items_path = base / "items.jsonl"
    items_path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    questions = {
        "title": "Listening study: synthetic voices",
        "instructions": (
            "Please use headphones in a quiet room. Each recording comes with its own "
            "question (shown above the player). Listen to the end, then answer that question "
            "on the scale. There are no right or wrong answers."
        ),
        "evals": [
            {
                "id": ANSWER_EVAL,
                "dimension": "tts",
                "kind": "likert",
                "question": "Your answer to the question above",
                "scale": {
                    "min": lo,
                    "max": hi,
                    "labels": {lo: "Not at all", hi: "Completely"},
                },
            }
        ],
        "raters_per_item": raters_per_item,
        "gold": {"traps": 0},
        "headphone_check": headphone_check,
        "profile": True,
    }
    q_path = base / "questions.yaml"
    q_path.write_text(yaml.safe_dump(questions, sort_keys=False), encoding="utf-8")
    result = create_study(
        [items_path], q_path, base, raters_per_item=raters_per_item, raters=raters, seed=seed
    )
    (base / EXPORT_MAP).write_text(
        json.dumps(
            {
                "run_id": store.run_id,
                "study": result.path.name,
                "answer_eval": ANSWER_EVAL,
                "skipped_records": skipped,
                "keys": mapping,
            },
            indent=1,
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    store.update_info(study={"path": f"{STUDY_DIR}/{result.path.name}", "items": len(rows)})
    return result.path


# -- merge ------------------------------------------------------------------------------------


def _find_study(path: Path) -> Path | None:
    if (path / "study.json").is_file():
        return path
    found = sorted(p.parent for p in path.glob("study-*/study.json"))
    return found[-1] if found else None


def _study_keys(study_dir: Path) -> dict[str, str]:
    """Study item id (opaque) -> its source key."""
    data = json.loads((study_dir / "study.json").read_text(encoding="utf-8"))
    return {str(i["id"]): str(i.get("key") or "") for i in data.get("items", [])}


def _load_map(store: RunStore) -> dict[str, dict[str, Any]]:
    p = store.path / STUDY_DIR / EXPORT_MAP
    if not p.is_file():
        return {}
    data: dict[str, dict[str, Any]] = json.loads(p.read_text(encoding="utf-8")).get("keys", {})
    return data


def _remap(store: RunStore, source: Path) -> tuple[Any, dict[str, Any], list[str]]:
    """The ratings as TTS ratings: item = TTS item id, eval/dimension = the TTS eval's."""
    import tempfile

    from voxassay.study.ratings import Ratings, load_ratings_csv

    keymap = _load_map(store)
    evals = store.info().get("config", {}).get("evals") or {}
    run_items = {it.id: it for it in store.items()}
    notes: list[str] = []
    study_dir = _find_study(source) if source.is_dir() else None
    opaque: dict[str, str] = {}
    if source.is_dir():
        if study_dir is None:
            raise InputError(f"{source}: neither a study folder nor a folder holding one")
        from voxassay.study.store import export_ratings_csv

        opaque = _study_keys(study_dir)
        with tempfile.TemporaryDirectory(prefix="voxassay-tts-human-") as tmp:
            csv_path = Path(tmp) / "ratings.csv"
            export_ratings_csv(study_dir, csv_path)
            loaded = load_ratings_csv(csv_path, label=str(study_dir))
        origin = str(study_dir)
    elif source.is_file():
        own = _find_study(store.path / STUDY_DIR) if (store.path / STUDY_DIR).is_dir() else None
        if own is not None:
            opaque = _study_keys(own)
        loaded = load_ratings_csv(source)
        origin = str(source)
    else:
        raise InputError(f"--human {source}: no such file or folder")
    if loaded.malformed:
        notes.append(f"{len(loaded.malformed)} malformed rating row(s) skipped")
    r = loaded.ratings
    out = Ratings()
    dropped = 0
    for i in range(len(r)):
        item, system, ev = r.item[i], r.system[i], r.eval[i]
        entry = keymap.get(opaque.get(item, "")) or keymap.get(item)
        if entry is not None:
            item, system, ev = entry["item"], entry["system"], entry["eval"]
        else:
            base_id = item.split("~", 1)[0]
            if base_id in run_items and (ev not in evals):
                ev = str(run_items[base_id].labels.get("eval"))
                item = base_id
            elif base_id in run_items:
                item = base_id
        if ev not in evals:
            dropped += 1
            continue
        for name in out.__dataclass_fields__:
            getattr(out, name).append(getattr(r, name)[i])
        out.item[-1], out.system[-1], out.eval[-1] = item, system, ev
        out.dimension[-1] = str(evals[ev].get("dimension") or ev)
        out.kind[-1] = "likert"
    if dropped:
        notes.append(f"{dropped} rating(s) of no TTS eval of this run were left out")
    return out, {"source": origin, "rows": len(r)}, notes


def _judge_rows(store: RunStore) -> list[Any]:
    from voxassay.study.ratings import JudgeRow

    items = {it.id: it for it in store.items()}
    rows = []
    for n, rec in enumerate(store.load_records().records, start=1):
        j = rec.output.get("judge") or {}
        score = j.get("score")
        if rec.status != "ok" or rec.repeat != 0 or j.get("status") != "ok":
            continue
        if not isinstance(score, int | float) or not math.isfinite(float(score)):
            continue
        it = items.get(rec.id)
        if it is None:
            continue
        rows.append(JudgeRow(n, rec.id, rec.system, str(it.labels.get("eval")), float(score)))
    return rows


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def merge_human(store: RunStore, source: str | Path, *, seed: int = 0) -> Path:
    """Analyse human ratings of this run and write ``RUN/human.json``; returns its path.

    ``source``: the study folder (or ``RUN/study``), or a long-format ratings CSV whose
    ``item`` is a study item id, a ``<item>~<system>`` key or a TTS item id. Per TTS eval:
    the raw-scale rater-controlled mean per system with its CI (``n`` = ratings); per
    dimension: the z-scale equal-weight mean of its evals; judge agreement (Spearman of the
    judge's item scores with the mean within-rater z per item, and at system level) per
    eval when the run has judge scores.
    """
    from voxassay.study.analysis import analyze
    from voxassay.study.ratings import EvalMeta

    ratings, origin, notes = _remap(store, Path(source))
    if len(ratings) == 0:
        raise InputError(f"{source}: no rating maps to an item and eval of {store.path}")
    evals = store.info().get("config", {}).get("evals") or {}
    metas = {}
    for ev in sorted(set(ratings.eval)):
        lo, hi = _scale(evals[ev])
        metas[ev] = EvalMeta(
            id=ev,
            dimension=str(evals[ev].get("dimension") or ev),
            question=str(evals[ev].get("question") or ""),
            scale_min=float(lo),
            scale_max=float(hi),
            scale_inferred=False,
        )
    judges = _judge_rows(store)
    result = analyze(ratings, metas, judges=judges or None, seed=seed)
    agreement: dict[str, Any] = {}
    for t in (result.get("judges") or {}).get("targets", []):
        level = "item" if "item_level" in t else "system"
        block = t.get("item_level") or t.get("system_level")
        if block:
            agreement[t["target"]] = {
                "spearman": _num(block.get("spearman")),
                "ci_lo": _num(block.get("ci_lo")),
                "ci_hi": _num(block.get("ci_hi")),
                "n": block.get("n"),
                "level": level,
                "system_level": t.get("system_level"),
            }
    human_evals: dict[str, Any] = {}
    for rep in result["evals"]:
        ev = rep["id"]
        systems = {}
        for srow in rep.get("systems", []):
            rc = srow.get("rater_controlled") or {}
            systems[srow["system"]] = {
                "mean": _num(rc.get("mean")),
                "ci_lo": _num(rc.get("ci_lo")),
                "ci_hi": _num(rc.get("ci_hi")),
                "n": srow.get("n"),
                "mos": _num((srow.get("mos") or {}).get("mean")),
                "z_mean": _num((srow.get("rater_controlled_z") or {}).get("mean")),
            }
        lo, hi = _scale(evals.get(ev, {}))
        human_evals[ev] = {
            "dimension": metas[ev].dimension if ev in metas else None,
            "scale": {"min": lo, "max": hi},
            "systems": systems,
            "n_ratings": rep.get("n_ratings"),
            "n_raters": rep.get("n_raters"),
            "judge_agreement": agreement.get(ev),
            "note": rep.get("note"),
        }
    dims = {}
    for dim, d in (result.get("dimensions") or {}).items():
        dims[dim] = {
            "scale": "z (equal-weight mean of the dimension's evals)",
            "systems": {
                s: {"mean": _num(v), "ci_lo": None, "ci_hi": None, "n": None}
                for s, v in (d.get("scores") or {}).items()
            },
            "judge_agreement": agreement.get(dim),
        }
    human = {
        "source": origin["source"],
        "merged_at": utc_now(),
        "counts": result.get("counts"),
        "judge": "no judge scores in this run" if not judges else f"{len(judges)} judge scores",
        "evals": human_evals,
        "dimensions": dims,
        "notes": notes + list(result.get("notes") or []),
    }
    from voxassay.report.writer import json_safe

    path = store.path / HUMAN_FILE
    path.write_text(json.dumps(json_safe(human), indent=1, ensure_ascii=False), encoding="utf-8")
    (store.path / HUMAN_ANALYSIS_FILE).write_text(
        json.dumps(json_safe(result), indent=1, ensure_ascii=False, default=str),
        encoding="utf-8",
    )
    return path


__all__ = ["export_study", "merge_human"]
