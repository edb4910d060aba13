"""The SU suite's entry points: build pairs, run, report, demo, paired units for compare.

Six evals (``tasks.py``): emotion, emotion_compare_segmented/_merged,
speaker_match_segmented/_merged, synthetic_detection. Manifests are voxassay Items: pairs
carry their two clips in ``audio`` (a list of paths; ``Item`` already supports it) and
``labels.su_task``, ``labels.truth`` and ``labels.split`` (``pairs.py``).

Systems:

- models (``openai-compat:URL?model=M``, ``python:module:factory``) get a versioned prompt
  (``prompts.py``) and the clips, and answer in free text; ``parse.py`` reads it (strict
  ``ANSWER:`` line, then lenient patterns, else ``unparseable``, counted separately);
- specialists (``resemblyzer``, ``dnsmos-human``) implement
  ``voxassay.systems.su_specialist.Specialist``: besides answer text in the strict format
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

from pathlib import Path
from typing import Any

from voxassay.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxassay.core.runstore import RunStore
from voxassay.suites.su.run import SUITE_NAME


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxassay.suites.su.report import build_report as _build

    return _build(store, **options)


def paired_units(store: RunStore, metric: str | None = None) -> dict[str, Any]:
    """Per (system, item): (correct, 1) of test items, for ``voxassay compare`` (accuracy;
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
    from voxassay.suites.su.demo import run_demo

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
        **lazy_renderers("voxassay.suites.su.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Speech understanding",
    },
)

__all__ = ["SUITE"]
