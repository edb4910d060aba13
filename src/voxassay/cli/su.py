"""``voxassay su build-pairs|run``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from voxassay.cli.common import (
    RunFlags,
    dry_run_source,
    executor_options,
    finish_run,
    format_flags,
    manifest_option,
    max_failures_option,
    output_flags,
    print_result_path,
    progress_bar,
    read_source,
    results_out_option,
    subset_flags,
    workers_option,
)
from voxassay.core.progress import system_progress

TASK_HELP = (
    "emotion, emotion_compare_segmented, emotion_compare_merged, speaker_match_segmented, "
    "speaker_match_merged, synthetic_detection; speaker_match / emotion_compare = both variants."
)


@click.group()
def su() -> None:
    """Speech understanding suite: emotion, relative emotion, speaker match, synthetic speech."""


@su.command("build-pairs")
@click.option(
    "--task",
    required=True,
    help="speaker_match, emotion_compare, synthetic_detection or emotion (eval names accepted).",
)
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Labelled manifest (speaker, labels.emotion/intensity/emotion_scores/synthetic).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Pairs manifest to write (JSONL; printed as the last line).",
)
@click.option("--n", "n", type=click.IntRange(2, None), default=None, help="At most N items.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--margin",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0, None),
    help="Emotion pairs: minimum strength difference (intensity levels or score units).",
)
@click.option(
    "--calibration",
    default=0.25,
    show_default=True,
    type=click.FloatRange(0, 0.9),
    help="Share of items marked split=calibration (per class) for threshold baselines.",
)
@click.option("--emotion", "emotions", multiple=True, help="Emotion pairs: only these targets.")
def build_pairs_cmd(
    task: str,
    source: Path,
    out: Path,
    n: int | None,
    seed: int,
    margin: float,
    calibration: float,
    emotions: tuple[str, ...],
) -> None:
    """Balanced same/different-speaker pairs, emotion-comparison pairs, or split items."""
    from voxassay.core.items import load_manifest, write_manifest
    from voxassay.suites.su.pairs import build_pairs

    items = load_manifest(source)
    built = build_pairs(
        items,
        task,
        n=n,
        seed=seed,
        margin=margin,
        calibration_fraction=calibration,
        emotions=list(emotions) or None,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_manifest(built, out)
    truths = Counter(str(it.labels.get("truth")) for it in built)
    splits = Counter(str(it.labels.get("split")) for it in built)
    click.echo(
        f"{len(built)} items from {len(items)}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(truths.items()))
        + " | "
        + ", ".join(f"{k} {v}" for k, v in sorted(splits.items())),
        err=True,
    )
    print_result_path(out)


@su.command("run")
@click.option("--task", "tasks", multiple=True, required=True, help=TASK_HELP)
@manifest_option("Pairs/items manifest (from `voxassay su build-pairs` or your own).")
@click.option(
    "--system",
    "-s",
    "systems",
    multiple=True,
    required=True,
    help="openai-compat:URL?model=M, python:module:factory, resemblyzer, dnsmos-human. Repeatable.",
)
@results_out_option
@click.option(
    "--resume", is_flag=True, help="Continue the newest run under OUT with the same config."
)
@workers_option("Parallel workers per system.")
@executor_options
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=float,
    help="Seconds before a call counts as hung (0: no limit).",
)
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option(
    "--vocabulary",
    default="crema-d-6",
    show_default=True,
    help="Emotion labels: crema-d-6 or emotion-48.",
)
@format_flags
@subset_flags()
@output_flags
@max_failures_option
def run_cmd(
    tasks: tuple[str, ...],
    manifest: Path,
    systems: tuple[str, ...],
    out: Path,
    resume: bool,
    workers: int,
    executor: str,
    ray_address: str | None,
    ship_audio: bool,
    timeout: float,
    repeats: int,
    vocabulary: str,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Ask one or more systems every item of the manifest and write the report."""
    from voxassay.suites.su.run import check_systems, run_su
    from voxassay.suites.su.tasks import expand_tasks

    flags = RunFlags.pop(kwargs)
    check_systems(systems, expand_tasks(list(tasks)))
    source = read_source(manifest, flags)
    if flags.dry_run:
        dry_run_source(flags, systems, repeats, source)
    with progress_bar(flags.progress) as progress:
        on_start, on_record = system_progress(progress, status="not ok")
        store = run_su(
            source,
            tasks,
            systems,
            out,
            vocabulary=vocabulary,
            repeats=repeats,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            ship_audio=ship_audio,
            timeout=timeout or None,
            resume=resume,
            on_start=on_start,
            on_record=on_record,
        )
    if flags.chatty:
        _summary(store.path)
    finish_run(store.path, max_failures, flags)


def _summary(run_dir: Path) -> None:
    import json

    from rich.console import Console
    from rich.table import Table

    from voxassay.report.html import ci_text

    report = json.loads((run_dir / "report.json").read_text())
    table = Table(title=f"SU · {report['run_id']}")
    for col in ("system", "task", "accuracy", "95% CI", "n", "unparseable", "failed", "AUC", "EER"):
        table.add_column(col, justify="left" if col in ("system", "task") else "right")

    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.3f}"

    for s in report["systems"]:
        for task, b in s["tasks"].items():
            table.add_row(
                escape(s["system"]),
                task,
                f(b.get("accuracy")),
                escape(ci_text(b.get("ci_lo"), b.get("ci_hi"))),
                str(b.get("n")),
                str(b.get("n_unparseable")),
                str(b.get("n_failed")),
                f(b.get("auc")),
                f(b.get("eer")),
            )
    Console(stderr=True).print(table)
    for t in report["tasks"]:
        for note in t["notes"]:
            click.echo(f"{t['task']}: {note}", err=True)
    click.echo(f"report: {run_dir / 'report.html'}", err=True)
