"""Run the SU suite: check systems against the evals, expand pairs into items, run and record
(``run.json`` holds the parser, prompt and metric versions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.execution import make_executor
from voxassay.core.manifests import ManifestRead, items_from
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.core.specs import check_unique_keys
from voxassay.suites.su.parse import PARSER_VERSION
from voxassay.suites.su.prompts import PROMPTS_VERSION
from voxassay.suites.su.scoring import METRICS_VERSION
from voxassay.suites.su.tasks import expand_tasks, get_vocabulary

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
    from voxassay.core.registry import REGISTRY
    from voxassay.systems.su_specialist import is_specialist

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
    ray_address: str | None = None,
    ship_audio: bool = False,
    timeout: float | None = 600.0,
    resume: bool = False,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Run ``systems`` on ``manifest`` for ``tasks`` into ``out/<run_id>/`` and report."""
    from voxassay.suites.su.runner import expand_items, run_systems

    evals = expand_tasks(list(tasks))
    get_vocabulary(vocabulary)
    if not systems:
        raise InputError("no system given")
    check_systems(systems, evals)
    check_unique_keys(systems)
    source = items_from(manifest)
    items = expand_items(source.items, evals)
    config = run_config(source, evals, systems, vocabulary, repeats)
    pool = make_executor(executor, workers, ray_address=ray_address)  # bad address: exit 2 now
    store, done, _ = RunStore.start_or_resume(Path(out), SUITE_NAME, config, items, resume)
    try:
        loads = run_systems(
            store,
            items,
            systems,
            vocabulary=vocabulary,
            repeats=repeats,
            workers=workers,
            executor=pool,
            timeout=timeout,
            done=done,
            on_start=on_start,
            on_record=on_record,
            ship_audio=ship_audio,
        )
    finally:
        pool.close()
        store.close()
    info = store.info()
    sys_info = info.get("systems", {})
    for spec, load in loads.items():
        sys_info.setdefault(spec, {}).update(load)
    info.update(
        systems=sys_info,
        ended_at=utc_now(),
        execution={
            "workers": workers,
            "executor": executor,
            "ship_audio": ship_audio,
            "timeout_s": timeout,
            **pool.describe(),
        },
    )
    store.write_info(info)
    if write_reports:
        from voxassay.report import write_report

        write_report(store.path)
    return store
