"""A study's report: the analysis run on a study folder or a ratings file (``run_analysis``), report.json (``build_report``) and its Markdown and HTML files."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.study.analysis import (
    METRICS_VERSION,
    PROFILES_FILE,
    SUITE,
    _demographics,
    _say,
    _screen,
    analyze,
    study_profiles,
)
from voxassay.study.ratings import (
    JUDGES_FILE,
    MAX_PROBLEMS_LISTED,
    RATINGS_FILE,
    EvalMeta,
    JudgeRow,
    LoadedRatings,
    Progress,
    load_judges_csv,
    load_ratings_csv,
    read_study_evals,
)
from voxassay.study.sections import render_html, render_markdown

__all__ = ["build_report", "run_analysis", "write_report_files"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_analysis(
    source: Path,
    out_parent: Path,
    *,
    exclude_flagged: bool = False,
    judges: Path | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    screen: Mapping[str, str] | None = None,
) -> Path:
    """Analyze a ratings CSV or a study folder into ``out_parent/<run_id>/`` and return it.

    ``screen`` (study folders only): keep the raters whose profile answers match every
    FIELD = VALUE rule; the profiles are snapshot into the run folder (``profiles.json``).

    A study folder's ratings come from ``voxassay.study.store.export_ratings_csv`` and its
    evals (kind, scale, dimension, question) from ``study.json``. The ratings used and the
    judge file are copied into the run folder, so :func:`build_report` needs nothing else.
    """
    from voxassay.core.runstore import RunStore, utc_now

    source = Path(source)
    if not source.exists():
        raise InputError(f"ratings source not found: {source}")
    study_dir = source if source.is_dir() else None
    evals: dict[str, EvalMeta] | None = None
    if study_dir is not None:
        evals = read_study_evals(study_dir)
    if judges is not None and not Path(judges).is_file():
        raise InputError(f"judges file not found: {judges}")
    if screen and study_dir is None:
        raise InputError("screening by rater profile needs a study folder (a CSV has no profiles)")
    profiles = study_profiles(study_dir) if study_dir is not None else {}
    if screen and not _screen(profiles, screen):
        rules = ", ".join(f"{k}={v}" for k, v in screen.items())
        raise InputError(f"no rater of {study_dir} passes the screening {rules}")
    config = {
        "source": str(source.resolve()),
        "source_kind": "study_dir" if study_dir else "csv",
        "exclude_flagged": exclude_flagged,
        "screen": dict(screen or {}),
        "judges": str(Path(judges).resolve()) if judges else None,
        "seed": seed,
        "evals": {k: v.as_dict() | {"gold_tolerance": v.gold_tolerance} for k, v in evals.items()}
        if evals
        else None,
    }
    import tempfile

    with tempfile.TemporaryDirectory(prefix="voxassay-analysis-") as tmp:
        staged = Path(tmp) / RATINGS_FILE
        if study_dir is not None:
            _say(progress, f"exporting ratings of {study_dir}")
            try:
                from voxassay.study.store import export_ratings_csv
            except ImportError:
                fallback = study_dir / RATINGS_FILE
                if not fallback.is_file():
                    raise InputError(
                        f"cannot export {study_dir}: the study store is unavailable and the "
                        f"folder has no {RATINGS_FILE}"
                    ) from None
                shutil.copyfile(fallback, staged)
            else:
                export_ratings_csv(study_dir, staged)
        else:
            shutil.copyfile(source, staged)
        # read (and refuse) before a run folder exists, so bad input leaves nothing behind
        _say(progress, "reading ratings")
        label = f"{study_dir} (its export)" if study_dir is not None else str(source)
        loaded = load_ratings_csv(staged, evals, label=label)
        judge_rows = load_judges_csv(Path(judges)) if judges is not None else None
        store = RunStore.create(out_parent, SUITE, config, None)
        shutil.copyfile(staged, store.path / RATINGS_FILE)
        if profiles:
            (store.path / PROFILES_FILE).write_text(
                json.dumps(profiles, indent=1, sort_keys=True), encoding="utf-8"
            )
    if judges is not None:
        shutil.copyfile(judges, store.path / JUDGES_FILE)
    store.update_info(ratings_sha256=_sha256(store.path / RATINGS_FILE))
    report = build_report(store, progress=progress, _loaded=(loaded, judge_rows))
    write_report_files(store.path, report)
    store.update_info(ended_at=utc_now())
    return store.path


def build_report(
    store: Any,
    progress: Progress = None,
    _loaded: tuple[LoadedRatings, tuple[list[JudgeRow], list[tuple[int, str]]] | None]
    | None = None,
    **_: Any,
) -> dict[str, Any]:
    """The report of an analysis run folder, recomputed from its files (``ratings.csv``,
    ``judges.csv``, ``run.json``); ``_loaded`` passes what :func:`run_analysis` already
    read from those same files."""
    from voxassay.core.runstore import utc_now

    info = store.info()
    config = info.get("config", {})
    evals = None
    if config.get("evals"):
        evals = {}
        for k, v in config["evals"].items():
            scale = v.get("scale") or {}
            evals[k] = EvalMeta(
                id=k,
                dimension=v.get("dimension") or k,
                kind=v.get("kind", "likert"),
                question=v.get("question", ""),
                scale_min=scale.get("min"),
                scale_max=scale.get("max"),
                scale_inferred=bool(v.get("scale_inferred", False)),
                gold_tolerance=v.get("gold_tolerance"),
            )
    path = Path(store.path)
    judge_rows = None
    judge_bad: list[tuple[int, str]] = []
    if _loaded is not None:
        loaded, judged = _loaded
        if judged is not None:
            judge_rows, judge_bad = judged
    else:
        _say(progress, "reading ratings")
        loaded = load_ratings_csv(path / RATINGS_FILE, evals)
        if (path / JUDGES_FILE).is_file():
            judge_rows, judge_bad = load_judges_csv(path / JUDGES_FILE)
    profiles: dict[str, dict[str, str]] = {}
    if (path / PROFILES_FILE).is_file():
        profiles = json.loads((path / PROFILES_FILE).read_text(encoding="utf-8"))
    rules = dict(config.get("screen") or {})
    screening = None
    if rules:
        passed = _screen(profiles, rules)
        before = sorted(set(loaded.ratings.rater))
        keep = [i for i, r in enumerate(loaded.ratings.rater) if r in passed]
        screening = {
            "rules": rules,
            "definition": "kept: raters whose profile answers every FIELD = VALUE rule "
            "(no profile or no answer: not kept)",
            "raters_before": len(before),
            "raters_kept": len({loaded.ratings.rater[i] for i in keep}),
            "excluded_raters": [r for r in before if r not in passed],
            "ratings_removed": len(loaded.ratings) - len(keep),
        }
        loaded.ratings = loaded.ratings.take(keep)
    body = analyze(
        loaded.ratings,
        evals,
        exclude_flagged=bool(config.get("exclude_flagged")),
        judges=judge_rows,
        seed=int(config.get("seed", 0)),
        progress=progress,
    )
    body["demographics"] = _demographics(profiles, set(loaded.ratings.rater))
    body["screening"] = screening
    if screening is not None:
        body.setdefault("notes", []).append(
            f"screening {', '.join(f'{k}={v}' for k, v in rules.items())}: "
            f"{screening['raters_kept']} of {screening['raters_before']} raters kept"
        )
    if judge_rows is not None and body.get("judges") is not None:
        body["judges"]["malformed"] = [{"line": ln, "reason": why} for ln, why in judge_bad]
    return {
        "suite": SUITE,
        "metrics_version": METRICS_VERSION,
        "run_id": info.get("run_id", path.name),
        "generated_at": utc_now(),
        "source": {
            "path": config.get("source"),
            "kind": config.get("source_kind"),
            "sha256": info.get("ratings_sha256"),
            "rows_read": loaded.rows_read,
            "rows_used": len(loaded.ratings),
            "revisions_replaced": loaded.revisions,
            "revisions": [
                {"line": ln, "earlier_line": prev}
                for ln, prev in loaded.revision_lines[:MAX_PROBLEMS_LISTED]
            ],
            "malformed_count": len(loaded.malformed),
            "malformed": [
                {"line": ln, "reason": why} for ln, why in loaded.malformed[:MAX_PROBLEMS_LISTED]
            ],
        },
        "config": {k: v for k, v in config.items() if k != "evals"},
        **body,
    }


def write_report_files(run_dir: Path, report: dict[str, Any]) -> dict[str, Path]:
    from voxassay.report.writer import json_safe

    run_dir = Path(run_dir)
    safe = json_safe(report)
    paths = {
        "json": run_dir / "report.json",
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
    }
    paths["json"].write_text(json.dumps(safe, indent=2, ensure_ascii=False), encoding="utf-8")
    paths["md"].write_text(render_markdown(safe), encoding="utf-8")
    paths["html"].write_text(render_html(safe), encoding="utf-8")
    return paths
