"""The ASR suite's entry points: run, score, report, demo, paired units for compare."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.execution import make_executor
from voxassay.core.items import file_sha256
from voxassay.core.manifests import ManifestRead, items_from
from voxassay.core.records import Record
from voxassay.core.registry import DOCUMENT_RENDERERS, REGISTRY, SuiteInfo, lazy_renderers
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import check_unique_keys
from voxassay.suites.asr.wer import DEFAULT_NORMALIZER, METRICS_VERSION, normalizer_version

SUITE_NAME = "asr"


def run_config(
    source: ManifestRead, systems: Sequence[str], normalizer: str, repeats: int
) -> dict[str, Any]:
    """What decides the meaning of the records (hashed into the resume fingerprint)."""
    return {
        **source.config(),
        "systems": list(systems),
        "normalizer": normalizer,
        "normalizer_version": normalizer_version(normalizer),
        "metrics_version": METRICS_VERSION,
        "repeats": repeats,
    }


def run_asr(
    manifest: str | Path | ManifestRead,
    systems: Sequence[str],
    out: str | Path,
    *,
    normalizer: str = DEFAULT_NORMALIZER,
    repeats: int = 1,
    workers: int = 1,
    executor: str = "thread",
    ray_address: str | None = None,
    ship_audio: bool = False,
    timeout: float | None = 600.0,
    resume: bool = False,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Transcribe ``manifest`` (a path in any format :mod:`voxassay.core.manifests` reads, or
    what it read) with every system into ``out/<run_id>/`` and write the reports."""
    from voxassay.suites.asr.runner import run_systems

    if not systems:
        raise InputError("name at least one --system")
    REGISTRY.check_all("transcribe", systems)  # before anything is written
    check_unique_keys(systems)
    source = items_from(manifest)
    items = source.items
    config = run_config(source, systems, normalizer, repeats)
    pool = make_executor(executor, workers, ray_address=ray_address)  # bad address: exit 2 now
    store, done, _ = RunStore.start_or_resume(Path(out), SUITE_NAME, config, items, resume)
    try:
        loads = run_systems(
            store,
            items,
            systems,
            normalizer=normalizer,
            repeats=repeats,
            workers=workers,
            executor=pool,
            ship_audio=ship_audio,
            timeout=timeout,
            done=done,
            on_start=on_start,
            on_record=on_record,
        )
    finally:
        pool.close()
        store.close()
    info = store.info()
    sys_info = info.get("systems", {})
    for spec, load in loads.items():
        if load:
            sys_info.setdefault(spec, {}).update(load)
    info.update(
        systems=sys_info,
        ended_at=utc_now(),
        execution={
            "workers": workers,
            "executor": executor,
            "timeout_s": timeout,
            "ship_audio": ship_audio,
            **pool.describe(),
        },
    )
    store.write_info(info)
    if write_reports:
        from voxassay.report import write_report

        write_report(store.path)
    return store


def score_files(
    predictions: Sequence[str | Path],
    out: str | Path,
    *,
    normalizer: str = DEFAULT_NORMALIZER,
    workers: int | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Score prediction files into a new run directory (no system is run)."""
    from voxassay.suites.asr.scoring import read_predictions, score_records

    items, records = read_predictions(predictions)
    score_records(items, records, normalizer, workers=workers)
    systems = sorted({r.system for r in records})
    config = {
        "predictions": [str(p) for p in predictions],
        "predictions_sha256": [file_sha256(p) for p in predictions],
        "systems": systems,
        "normalizer": normalizer,
        "normalizer_version": normalizer_version(normalizer),
        "metrics_version": METRICS_VERSION,
        "mode": "score",
    }
    store = RunStore.create(out, SUITE_NAME, config, items)
    store.append_many(records)
    from voxassay.report import finish_run

    return finish_run(store, write_reports)


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxassay.suites.asr.report import build_report as _build

    return _build(store, **options)


def paired_units(store: RunStore, normalizer: str | None = None) -> dict[str, Any]:
    """Per (system, item): (errors, reference words) for paired comparisons, and speakers."""
    from voxassay.suites.asr.report import rescore

    info = store.info()
    normalizer = normalizer or info.get("config", {}).get("normalizer") or DEFAULT_NORMALIZER
    items = {it.id: it for it in store.items()}
    records = rescore(store.load_records().records, items, normalizer)
    units: dict[str, dict[str, tuple[float, float]]] = {}
    for r in records:
        if r.status != "ok" or not r.metrics or r.metrics.get("empty_ref") or r.repeat != 0:
            continue
        if items[r.id].labels.get("audit"):
            continue
        m = r.metrics
        units.setdefault(r.system, {})[r.id] = (m["sub"] + m["del"] + m["ins"], m["ref_words"])
    return {
        "metric": "wer",
        "lower_is_better": True,
        "units": units,
        "clusters": {i: it.speaker for i, it in items.items() if it.speaker},
        "groups": {i: {"condition": it.condition} for i, it in items.items()},
    }


QUICK_DEMO = {"n_sentences": 6, "n_condition_sources": 2, "snrs": (0,), "conversations": 1}
"""The quick demo set (about 20 items): 6 piper sentences, two per espeak-ng voice, two of
them under noise, babble and music at 0 dB SNR and through the phone band, and one
constructed conversation. ``--full`` uses ``build_demo_dataset``'s defaults (72 items)."""


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """Build the embedded demo set (quick, or the full one) and run both local engines on it.

    ``progress`` is a rich ``Progress`` (or None): data-building steps are logged on its
    console and each system gets a bar.
    """
    from voxassay.core.progress import system_progress
    from voxassay.suites.asr.demo_data import build_demo_dataset

    def say(message: str) -> None:
        if progress is not None:
            progress.console.log(f"asr demo: {message}")

    data_dir = Path(out) / "_demo_data" / "asr"
    sizes: dict[str, Any] = {} if full else dict(QUICK_DEMO)
    manifest = build_demo_dataset(data_dir, progress=say, **sizes)
    systems = ["faster-whisper", "pocketsphinx"]
    on_start, on_record = system_progress(progress, "asr ")
    # PocketSphinx holds the GIL: one process per core (at least two) keeps both cores busy
    return run_asr(
        manifest,
        systems,
        out,
        workers=max(workers, min(2, os.cpu_count() or 1)),
        executor="process",
        on_start=on_start,
        on_record=on_record,
    )


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="ASR robustness: WER per condition and subgroup, rank stability, overfitting audits",
    demo=demo,
    demo_seconds=26.0,
    report=build_report,
    paired_units=paired_units,
    extras={
        **lazy_renderers("voxassay.suites.asr.render", (*DOCUMENT_RENDERERS, "profile")),
        "title": "ASR robustness",
    },
)

__all__ = ["SUITE", "run_asr", "score_files"]
