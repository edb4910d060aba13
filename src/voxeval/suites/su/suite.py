"""The SU suite's entry points: build pairs, run, report, demo, paired units for compare.

Six evals (``tasks.py``): emotion, emotion_compare_segmented/_merged,
speaker_match_segmented/_merged, synthetic_detection. Manifests are voxeval Items: pairs
carry their two clips in ``audio`` (a list of paths; ``Item`` already supports it) and
``labels.su_task``, ``labels.truth`` and ``labels.split`` (``pairs.py``).

Systems:

- models (``openai-compat:URL?model=M``, ``python:module:factory``) get a versioned prompt
  (``prompts.py``) and the clips, and answer in free text; ``parse.py`` reads it (strict
  ``ANSWER:`` line, then lenient patterns, else ``unparseable``, counted separately);
- specialists (``resemblyzer``, ``dnsmos-human``) implement
  ``voxeval.systems.su_specialist.Specialist``: besides answer text in the strict format
  they give a continuous ``score(task, clips)`` (higher = positive class: same speaker,
  human). The runner stores it in ``output.score`` and the report draws AUC and EER from it;
  a 1-5 rating (any system's) is its own score. Threshold-based specialists fit their
  threshold on the manifest's calibration split (max calibration accuracy, recorded in
  ``run.json`` ``systems.<spec>.thresholds`` and in each record); specialists refuse evals
  outside ``specialist_tasks`` (a usage error when none of the run's evals fits).

``--task speaker_match`` / ``emotion_compare`` runs both variants on the same pairs in one
run (ids ``<pair>#segmented`` / ``<pair>#merged``) and the report adds their paired
difference. A run directory holds everything its report needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxeval.core.errors import InputError
from voxeval.core.manifests import ManifestRead, items_from
from voxeval.core.records import Record
from voxeval.core.registry import SuiteInfo, lazy_renderers
from voxeval.core.runstore import RunStore, utc_now
from voxeval.core.specs import check_unique_keys
from voxeval.suites.su.parse import PARSER_VERSION
from voxeval.suites.su.prompts import PROMPTS_VERSION
from voxeval.suites.su.scoring import METRICS_VERSION
from voxeval.suites.su.tasks import expand_tasks, get_vocabulary

SUITE_NAME = "su"
DEFAULT_VOCABULARY = "crema-d-6"


def run_config(
    source: ManifestRead,
    tasks: Sequence[str],
    systems: Sequence[str],
    vocabulary: str,
    repeats: int,
) -> dict[str, Any]:
    """What decides the meaning of the records (hashed into the resume fingerprint)."""
    return {
        **source.config(),
        "tasks": list(tasks),
        "systems": list(systems),
        "vocabulary": vocabulary,
        "prompts_version": PROMPTS_VERSION,
        "parser_version": PARSER_VERSION,
        "metrics_version": METRICS_VERSION,
        "repeats": repeats,
    }


def check_systems(systems: Sequence[str], evals: Sequence[str]) -> None:
    """Fail fast (usage error) on specs ``REGISTRY.check`` refuses and specialists that
    answer none of ``evals``."""
    from voxeval.core.registry import REGISTRY
    from voxeval.systems.su_specialist import is_specialist

    for spec in systems:
        system = REGISTRY.build("understand", REGISTRY.check("understand", spec))
        if is_specialist(system) and not set(evals) & set(system.specialist_tasks):
            raise InputError(
                f"{spec} is a specialist for {', '.join(system.specialist_tasks)}; it cannot "
                f"answer {', '.join(evals)}"
            )


def run_su(
    manifest: str | Path | ManifestRead,
    tasks: Sequence[str],
    systems: Sequence[str],
    out: str | Path,
    *,
    vocabulary: str = DEFAULT_VOCABULARY,
    repeats: int = 1,
    workers: int = 1,
    executor: str = "thread",
    timeout: float | None = 600.0,
    resume: bool = False,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Run ``systems`` on ``manifest`` for ``tasks`` into ``out/<run_id>/`` and report."""
    from voxeval.suites.su.runner import expand_items, run_systems

    evals = expand_tasks(list(tasks))
    get_vocabulary(vocabulary)
    if not systems:
        raise InputError("no system given")
    check_systems(systems, evals)
    check_unique_keys(systems)
    source = items_from(manifest)
    items = expand_items(source.items, evals)
    config = run_config(source, evals, systems, vocabulary, repeats)
    store, done, _ = RunStore.start_or_resume(Path(out), SUITE_NAME, config, items, resume)
    try:
        loads = run_systems(
            store,
            items,
            systems,
            vocabulary=vocabulary,
            repeats=repeats,
            workers=workers,
            executor=executor,
            timeout=timeout,
            done=done,
            on_start=on_start,
            on_record=on_record,
        )
    finally:
        store.close()
    info = store.info()
    sys_info = info.get("systems", {})
    for spec, load in loads.items():
        sys_info.setdefault(spec, {}).update(load)
    info.update(
        systems=sys_info,
        ended_at=utc_now(),
        execution={"workers": workers, "executor": executor, "timeout_s": timeout},
    )
    store.write_info(info)
    if write_reports:
        from voxeval.report import write_report

        write_report(store.path)
    return store


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.su.report import build_report as _build

    return _build(store, **options)


def paired_units(store: RunStore, metric: str | None = None) -> dict[str, Any]:
    """Per (system, item): (correct, 1) of test items, for ``voxeval compare`` (accuracy;
    higher is better). Synthetic detection counts correctness at the fixed threshold."""
    items = {it.id: it for it in store.items()}
    units: dict[str, dict[str, tuple[float, float]]] = {}
    for r in store.load_records().records:
        it = items.get(r.id)
        if it is None or r.status != "ok" or r.repeat != 0:
            continue
        if str(it.labels.get("split", "test")) == "calibration":
            continue
        if "correct" in r.metrics:
            c = r.metrics["correct"]
        elif "correct_fixed" in r.metrics:
            c = r.metrics["correct_fixed"]
        else:
            continue
        units.setdefault(r.system, {})[r.id] = (float(bool(c)), 1.0)
    return {
        "metric": "accuracy",
        "lower_is_better": False,
        "units": units,
        "clusters": {},
        "groups": {i: {"task": str(it.labels.get("task"))} for i, it in items.items()},
    }


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """The SU demo (its own voices, both specialists); quick and full are the same set."""
    from voxeval.suites.su.demo import run_demo

    del full
    return run_demo(out, workers=workers, progress=progress)


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="Speech understanding: emotion, relative emotion, speaker match, synthetic speech",
    demo=demo,
    demo_seconds=9.0,
    report=build_report,
    paired_units=paired_units,
    extras={
        **lazy_renderers("voxeval.suites.su.report"),
        "title": "Speech understanding",
    },
)

__all__ = ["SUITE", "run_su"]
