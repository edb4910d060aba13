"""An STS run as a blind rating study (``--study``), and the ratings merged back
(``voxassay sts report RUN --human STUDY_DIR|ratings.csv``).

Export. Per answer (record ok, with audio) one stimulus: the user's turn, 0.5 s of silence,
then the answer (``RUN/study/stimuli/<key>.wav``, 16 kHz). Its study ``system`` is
``<system>|<mode>``, so AO and TO answers are separate arms the study tool spreads over
raters and interleaves (blind: raters see neither the system nor the mode). The study asks
one 5-point likert question, "your answer to the question above"; each stimulus shows its own
dimension's question and the user's words as context, so raters answer the dimension's
question. Gold items: the user's turn followed by an unrelated answer (piper), expected 1,
given to every rater. At least 3 raters per answer (``study.create``). ``export.json`` maps
study keys back to (item, mode, system, dimension).

Merge. Ratings (a study folder or a long-format CSV) are mapped back to answers. Per answer:
the raw mean and the mean within-rater z-score (each rater's own mean and spread removed:
``stats.raters.rater_zscores``, the rater-bias control) over its ratings. These go to
``RUN/human.json``. The study tool's own analysis of the same ratings
(``study.analysis.analyze``: rater QC, the crossed rater-controlled model) gives each arm's
rater-controlled mean (``arms``; the full analysis in ``RUN/human_analysis.json``). The
report then adds ``human`` as a score source (the per-answer z mean), beside the proxies and
never merged with them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR, Audio, load_audio, resample, write_wav
from voxassay.core.errors import InputError
from voxassay.core.runstore import RunStore, utc_now

__all__ = ["HUMAN_FILE", "export_study", "load_human", "merge_human"]

STUDY_DIR = "study"
EXPORT_MAP = "export.json"
HUMAN_FILE = "human.json"
ANSWER_EVAL = "answer"
GOLD_ANSWER = "The weather will be sunny tomorrow, with a light breeze from the west."


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def _stimulus(store: RunStore, user_key: str, answer: np.ndarray, sr: int) -> np.ndarray:
    user = load_audio(store.path / "inputs" / f"{user_key}.wav", sr=TARGET_SR).samples
    reply = resample(Audio(np.asarray(answer, np.float32), sr), TARGET_SR).samples
    gap = np.zeros(TARGET_SR // 2, np.float32)
    return np.concatenate([user, gap, reply]).astype(np.float32)


def export_study(store: RunStore, *, raters_per_item: int = 3, seed: int = 0) -> Path:
    """Write ``RUN/study/`` and create the study in it; returns the study folder."""
    import yaml

    from voxassay.core.registry import REGISTRY
    from voxassay.study.create import create_study
    from voxassay.suites.sts.items import load_items

    if raters_per_item < 3:
        raise InputError("an STS study needs at least 3 raters per answer")
    by_id = {it.id: it for s in load_items() for it in s.items}
    items = {it.id: it for it in store.items()}
    base = store.path / STUDY_DIR
    (base / "stimuli").mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    mapping: dict[str, dict[str, Any]] = {}
    for rec in sorted(store.load_records().records, key=lambda r: (r.id, r.system)):
        if rec.status != "ok" or rec.repeat != 0 or not rec.output.get("audio_path"):
            continue
        run_item = items.get(rec.id)
        sts_item = by_id.get(str(run_item.labels.get("item"))) if run_item else None
        if run_item is None or sts_item is None:
            continue
        mode = str(run_item.labels["mode"])
        answer = load_audio(store.path / rec.output["audio_path"])
        key = f"{rec.id}~{_slug(rec.system)}"
        path = base / "stimuli" / f"{_slug(key)}.wav"
        write_wav(path, Audio(_stimulus(store, sts_item.id, answer.samples, answer.sr), TARGET_SR))
        rows.append(
            {
                "id": key,
                "system": f"{rec.system}|{mode}",
                "audio": str(path.resolve()),
                "context": f"Question: {sts_item.question}  \u2014  The caller said: \u201c{sts_item.say}\u201d",
                "group": sts_item.id,
            }
        )
        mapping[key] = {
            "run_item": rec.id,
            "item": sts_item.id,
            "mode": mode,
            "system": rec.system,
            "dimension": sts_item.dimension,
        }
    if not rows:
        raise InputError(f"{store.path}: no answer with audio to rate")
    tts = REGISTRY.build("synthesize", "piper?noise_scale=0&noise_w=0")
    gold_audio = tts.synthesize(GOLD_ANSWER)
    for k, sts_id in enumerate(sorted({m["item"] for m in mapping.values()})[:2]):
        path = base / "stimuli" / f"gold-{k}.wav"
        write_wav(
            path, Audio(_stimulus(store, sts_id, gold_audio.samples, gold_audio.sr), TARGET_SR)
        )
        it = by_id[sts_id]
        rows.append(
            {
                "id": f"gold-{k}",
                "system": "gold-check",
                "audio": str(path.resolve()),
                "context": f"Question: {it.question}  \u2014  The caller said: \u201c{it.say}\u201d",
                "gold": {ANSWER_EVAL: 1},
            }
        )
    items_path = base / "items.jsonl"
    items_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions = {
        "title": "Listening study: spoken answers",
        "instructions": (
            "Please use headphones in a quiet room. Each recording is a caller, a short pause, "
            "then a spoken answer. Listen to the end, then answer the question shown above "
            "the player. There are no right or wrong answers."
        ),
        "evals": [
            {
                "id": ANSWER_EVAL,
                "dimension": "sts",
                "kind": "likert",
                "question": "Your answer to the question above",
                "scale": {"min": 1, "max": 5, "labels": {1: "Not at all", 5: "Completely"}},
            }
        ],
        "raters_per_item": raters_per_item,
        "gold": {"traps": 0},
        "headphone_check": True,
        "profile": True,
    }
    q_path = base / "questions.yaml"
    q_path.write_text(yaml.safe_dump(questions, sort_keys=False), encoding="utf-8")
    result = create_study([items_path], q_path, base, raters_per_item=raters_per_item, seed=seed)
    (base / EXPORT_MAP).write_text(
        json.dumps({"run_id": store.run_id, "study": result.path.name, "keys": mapping}, indent=1),
        encoding="utf-8",
    )
    store.update_info(study={"path": f"{STUDY_DIR}/{result.path.name}", "answers": len(mapping)})
    return result.path


def _find_study(folder: Path) -> Path | None:
    if (folder / "study.json").is_file():
        return folder
    found = sorted(p.parent for p in folder.glob("study-*/study.json"))
    return found[-1] if found else None


def _opaque(study: Path | None) -> dict[str, str]:
    """Study item id (opaque to raters) -> the exported key."""
    if study is None:
        return {}
    data = json.loads((study / "study.json").read_text(encoding="utf-8"))
    return {str(i["id"]): str(i.get("key") or "") for i in data.get("items", [])}


def _ratings(store: RunStore, source: Path) -> Any:
    """The ratings of ``source`` (a study folder, or a folder holding one, or a CSV whose
    items are the run's study item ids or the exported keys)."""
    import tempfile

    from voxassay.study.ratings import load_ratings_csv

    if source.is_file():
        return load_ratings_csv(source).ratings, _opaque(_find_study(store.path / STUDY_DIR))
    study = _find_study(source)
    if study is None:
        raise InputError(f"--human {source}: neither a ratings CSV nor a study folder")
    from voxassay.study.store import export_ratings_csv

    opaque = _opaque(study)
    with tempfile.TemporaryDirectory(prefix="voxassay-sts-human-") as tmp:
        csv_path = Path(tmp) / "ratings.csv"
        export_ratings_csv(study, csv_path)
        return load_ratings_csv(csv_path, label=str(study)).ratings, opaque


def merge_human(store: RunStore, source: str | Path) -> Path:
    """Per-answer human scores into ``RUN/human.json`` (module docstring); its path."""
    from voxassay.stats.raters import rater_zscores

    map_path = store.path / STUDY_DIR / EXPORT_MAP
    if not map_path.is_file():
        raise InputError(f"{store.path}: no study was exported from this run (sts run --study)")
    keys: dict[str, dict[str, Any]] = json.loads(map_path.read_text())["keys"]
    r, opaque = _ratings(store, Path(source))
    idx = [
        i
        for i in range(len(r))
        if r.eval[i] == ANSWER_EVAL and (opaque.get(r.item[i], r.item[i]) in keys)
    ]
    if not idx:
        raise InputError(f"{source}: no rating maps to an answer of {store.path}")
    zs = rater_zscores([r.rater[i] for i in idx], [r.score[i] for i in idx])
    raw: dict[str, list[float]] = defaultdict(list)
    z: dict[str, list[float]] = defaultdict(list)
    raters: dict[str, set[str]] = defaultdict(set)
    for k, i in enumerate(idx):
        key = opaque.get(r.item[i], r.item[i])
        raw[key].append(float(r.score[i]))
        raters[key].add(r.rater[i])
        if math.isfinite(zs.z[k]):
            z[key].append(float(zs.z[k]))
    answers = {
        key: {
            **keys[key],
            "mean": float(np.mean(raw[key])),
            "z": float(np.mean(z[key])) if z[key] else None,
            "n": len(raw[key]),
            "raters": len(raters[key]),
        }
        for key in raw
    }
    arms = _study_analysis(store, r, idx)
    out = store.path / HUMAN_FILE
    doc = {
        "arms": arms,
        "source": str(source),
        "merged_at": utc_now(),
        "scale": "5-point likert (1 not at all - 5 completely)",
        "rater_control": "mean within-rater z-score per answer (stats.raters.rater_zscores)",
        "excluded_raters": {str(k): v for k, v in zs.excluded.items()},
        "answers": answers,
    }
    out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return out


def _study_analysis(store: RunStore, r: Any, idx: list[int]) -> dict[str, Any]:
    """The study tool's analysis of the same ratings (``study.analysis.analyze``: rater QC and
    the crossed rater-controlled model), per arm ``<system>|<mode>``; the whole analysis goes
    to ``RUN/human_analysis.json``."""
    from voxassay.study.analysis import analyze
    from voxassay.study.ratings import EvalMeta, Ratings

    sub = Ratings()
    for i in idx:
        for name in sub.__dataclass_fields__:
            getattr(sub, name).append(getattr(r, name)[i])
    meta = EvalMeta(ANSWER_EVAL, "sts", question="the item's own question", scale_min=1.0,
                    scale_max=5.0, scale_inferred=False)  # fmt: skip
    result = analyze(sub, {ANSWER_EVAL: meta})
    (store.path / "human_analysis.json").write_text(json.dumps(result, indent=1, default=str))
    arms: dict[str, Any] = {}
    for rep in result.get("evals", []):
        for row in rep.get("systems", []):
            rc = row.get("rater_controlled") or {}
            arms[str(row.get("system"))] = {
                "rater_controlled_mean": rc.get("mean"),
                "ci_lo": rc.get("ci_lo"),
                "ci_hi": rc.get("ci_hi"),
                "mos": (row.get("mos") or {}).get("mean"),
                "n": row.get("n"),
            }
    return arms


def load_human(store: RunStore) -> dict[tuple[str, str], float]:
    """(run item id, system) -> the answer's rater-controlled score, when merged."""
    path = store.path / HUMAN_FILE
    if not path.is_file():
        return {}
    answers = json.loads(path.read_text()).get("answers", {})
    return {
        (a["run_item"], a["system"]): float(a["z"])
        for a in answers.values()
        if a.get("z") is not None and a.get("raters", 0) >= 1
    }
