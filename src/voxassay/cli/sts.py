"""``voxassay sts items|run|report``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from voxassay.cli.common import (
    RunFlags,
    executor_options,
    finish_run,
    max_failures_option,
    output_flags,
    print_result_path,
    progress_bar,
    results_out_option,
    workers_option,
)
from voxassay.core.progress import system_progress


@click.group()
def sts() -> None:
    """Speech-to-speech suite: five dimensions, each item answered from the audio (AO) and
    from the transcript (TO) by the same system."""


@sts.command("items")
@click.option(
    "--only",
    multiple=True,
    help="Keep items whose id, scenario, dimension or type matches this glob.",
)
def items_cmd(only: tuple[str, ...]) -> None:
    """The item set: scenarios, dimensions, stressors and counts."""
    from voxassay.suites.sts.items import item_set_version, load_items, select_items

    scenarios = select_items(load_items(), only)
    items = [it for s in scenarios for it in s.items]
    click.echo(f"{item_set_version()}: {len(items)} items in {len(scenarios)} scenarios")
    for kind in ("natural", "scripted"):
        n = sum(1 for s in scenarios if s.type == kind)
        click.echo(
            f"  {kind}: {n} scenarios, {sum(len(s.items) for s in scenarios if s.type == kind)} items"
        )
    for dim, n in Counter(it.dimension for it in items).items():
        click.echo(f"  {dim}: {n}")
    stress = Counter(x for it in items for x in it.stressors)
    click.echo("  stressors: " + ", ".join(f"{k} {v}" for k, v in sorted(stress.items())))


@sts.command("run")
@click.option(
    "--system",
    "-s",
    "systems",
    multiple=True,
    required=True,
    help="reference-sts, reference-sts:prosody_aware, python:module:factory. Repeatable.",
)
@click.option("--mode", "modes", default="ao,to", show_default=True, help="ao, to or ao,to.")
@click.option(
    "--only", multiple=True, help="Item, scenario, dimension or scenario-type glob. Repeatable."
)
@click.option(
    "--clips",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Your recordings: DIR/<item id>.wav (and <scenario>.earlier-<k>.wav) replace renders.",
)
@click.option("--neutral", is_flag=True, help="Render every turn in the neutral style (a control).")
@click.option(
    "--judge",
    help="An understand system (openai-compat:URL?model=M, python:...) that hears the caller and "
    "the answer and rates it on the raters' scale.",
)
@click.option(
    "--proxies",
    type=click.Choice(["fast", "all"]),
    default="fast",
    show_default=True,
    help="all: also the answer's intelligibility (ASR round trip) and DNSMOS (slower).",
)
@click.option(
    "--study",
    is_flag=True,
    help="Also export a blind rating study of the answers (RUN/study/; >= 3 raters per answer).",
)
@results_out_option
@click.option(
    "--resume", is_flag=True, help="Continue the newest run under OUT with the same config."
)
@workers_option(
    "Dialogues (scenario x mode) answered side by side (--executor ray: actors per "
    "system, each with its own copy of the system)."
)
@click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    type=float,
    help="Seconds per answer (0: no limit).",
)
@executor_options
@output_flags
@max_failures_option
def run_cmd(
    systems: tuple[str, ...],
    modes: str,
    only: tuple[str, ...],
    clips: Path | None,
    neutral: bool,
    judge: str | None,
    proxies: str,
    study: bool,
    out: Path,
    resume: bool,
    workers: int,
    timeout: float,
    executor: str,
    ray_address: str | None,
    ship_audio: bool,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Every item to every system, from the audio and from the transcript; writes the
    report (AO - TO per dimension, scenario type and stressor).

    (--ship-audio changes nothing here: the rendered turns always travel with their dialogue
    and the answers reach the run only through the driver.)"""
    del ship_audio
    from voxassay.suites.sts.runner import run_sts

    flags = RunFlags.pop(kwargs)
    with progress_bar(flags.progress) as progress:
        on_start, on_record = system_progress(progress, status="not ok")
        store = run_sts(
            systems,
            out,
            modes=[m.strip() for m in modes.split(",") if m.strip()],
            only=only,
            clips=clips,
            neutral=neutral,
            judge=judge,
            proxies=proxies,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            timeout=timeout or None,
            resume=resume,
            on_start=on_start,
            on_record=on_record,
        )
    if study:
        from voxassay.suites.sts.study import export_study

        made = export_study(store)
        if flags.chatty:
            click.echo(f"study: {made} (serve it with `voxassay study serve {made}`)", err=True)
    finish_run(store.path, max_failures, flags)


@sts.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--human",
    type=click.Path(exists=True, path_type=Path),
    help="The run's study folder (or a ratings CSV): people's scores join the report.",
)
def report_cmd(run_dir: Path, human: Path | None) -> None:
    """Rebuild report.json/md/html of an STS run (with --human: merge ratings first)."""
    from voxassay.core.runstore import RunStore
    from voxassay.report import write_report

    if human is not None:
        from voxassay.suites.sts.study import merge_human

        merge_human(RunStore.open(run_dir), human)
    write_report(run_dir)
    print_result_path(run_dir / "report.html")
