"""``voxassay tts run|score-audio|report|items``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from voxassay.cli.common import (
    RunFlags,
    dry_run,
    executor_options,
    finish_run,
    max_failures_option,
    output_flags,
    print_result_path,
    progress_bar,
    results_out_option,
    subset_flags,
    workers_option,
)
from voxassay.core.progress import system_progress

ONLY_HELP = "Keep only these dimensions, evals or item-id globs. Repeatable."


@click.group()
def tts() -> None:
    """Text-to-speech suite: seven dimensions, automatic metrics, judge and human studies."""


def _check_specs(systems: tuple[str, ...], asr: str | None, judge: str | None) -> None:
    """Every spec checked before any work (``REGISTRY.check``: exit 2 on a problem)."""
    from voxassay.core.registry import REGISTRY

    REGISTRY.check_all("synthesize", systems)
    if asr:
        REGISTRY.check("transcribe", asr)
    if judge:
        REGISTRY.check("understand", judge)


def _end(store: Any, max_failures: float | None = None, flags: RunFlags | None = None) -> None:
    """Summary table on stderr, then the failure rule of ``voxassay.core.failures`` (exit 1
    when a system failed wholly or beyond ``--max-failures``); last stdout line = path."""
    if flags is None or flags.chatty:
        _summary(store.path, store.load_records().records)
    finish_run(store.path, max_failures, flags)


@tts.command("run")
@click.option(
    "--system",
    "-s",
    "systems",
    multiple=True,
    required=True,
    help="Synthesizer spec: piper[:VOICE], espeak-ng[:VOICE], openai-compat:URL?model=M, "
    "python:module:factory. Repeatable.",
)
@click.option(
    "--items",
    default="default",
    show_default=True,
    help="Item set name (default, demo), a set file, a YAML or a JSONL of items.",
)
@click.option("--only", multiple=True, help=ONLY_HELP)
@results_out_option
@click.option("--resume", is_flag=True, help="Continue the newest run under OUT with this setup.")
@click.option("--study", is_flag=True, help="Also export the run as a rating study (RUN/study/).")
@click.option(
    "--judge", default=None, help="Audio-language judge spec (asks each eval's question)."
)
@click.option(
    "--asr",
    default="faster-whisper",
    show_default=True,
    help="ASR spec for the round trip ('none': no round trip).",
)
@click.option("--repeat", "repeats", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    type=float,
    help="Seconds before a synthesis call counts as hung (0: no limit).",
)
@workers_option(
    "With a distributed --executor: workers per system (each synthesizes and measures)."
)
@executor_options
@subset_flags()
@output_flags
@max_failures_option
def run_cmd(
    systems: tuple[str, ...],
    items: str,
    only: tuple[str, ...],
    out: Path,
    resume: bool,
    study: bool,
    judge: str | None,
    asr: str,
    repeats: int,
    timeout: float,
    workers: int,
    executor: str,
    ray_address: str | None,
    ship_audio: bool,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Synthesize the item set with each system, measure every item, write the report.

    (--ship-audio changes nothing here: the audio is made by the workers, and reaches the run
    only through the driver.)"""
    del ship_audio
    from voxassay.suites.tts.suite import run_tts

    flags = RunFlags.pop(kwargs)
    asr_spec = None if asr.lower() in ("none", "") else asr
    _check_specs(systems, asr_spec, judge)
    if flags.dry_run:
        from voxassay.core.manifests import select_subset
        from voxassay.suites.tts.items import load_item_set, to_item

        _, chosen = load_item_set(str(items), only)
        chosen, _ = select_subset(chosen, flags.limit, flags.sample, flags.seed)
        dry_run(flags, systems, repeats, [to_item(it) for it in chosen], fmt=None)
    with progress_bar(flags.progress) as progress:
        on_start, on_record = system_progress(progress, status="failed")
        store = run_tts(
            systems,
            out,
            items=items,
            only=only,
            asr=asr_spec,
            judge=judge,
            repeats=repeats,
            resume=resume,
            study=study,
            timeout=timeout or None,
            on_start=on_start,
            on_record=on_record,
            limit=flags.limit,
            sample=flags.sample,
            seed=flags.seed,
            executor=executor,
            workers=workers,
            ray_address=ray_address,
        )
    study_info = store.info().get("study")
    if study_info:
        flags.say(f"study: {store.path / study_info['path']}")
    _end(store, max_failures, flags)


@tts.command("score-audio")
@click.option(
    "--manifest",
    "-m",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL: id, audio_filepath, text, system?, eval?, dimension?, critical_tokens?",
)
@results_out_option
@click.option(
    "--items",
    default=None,
    help="Item set to take text, eval and critical tokens from by id (lines may omit them).",
)
@click.option("--system", default=None, help="System name for lines without one.")
@click.option("--asr", default="faster-whisper", show_default=True, help="ASR spec ('none').")
@click.option("--judge", default=None, help="Audio-language judge spec.")
@output_flags
@max_failures_option
def score_audio_cmd(
    manifest: Path,
    out: Path,
    items: str | None,
    system: str | None,
    asr: str,
    judge: str | None,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Measure recordings made elsewhere (no synthesis): round trip, quality, prosody."""
    from voxassay.suites.tts.suite import score_audio

    flags = RunFlags.pop(kwargs)
    asr_spec = None if asr.lower() in ("none", "") else asr
    _check_specs((), asr_spec, judge)
    with progress_bar(flags.progress) as progress:
        on_start, on_record = system_progress(progress, status="failed")
        store = score_audio(
            manifest,
            out,
            items=items,
            asr=asr_spec,
            judge=judge,
            system=system,
            on_start=on_start,
            on_record=on_record,
        )
    _end(store, max_failures, flags)


@tts.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--human",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A study folder (or RUN/study) or a long-format ratings CSV to merge.",
)
@click.option(
    "--validate-quality",
    "mushra_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A MUSHRA rating set (ratings_long.csv + audio, e.g. ../shared/data/ratings/"
    "neural_codec_mushra): each quality metric's Spearman with the listeners goes into "
    "RUN/validation.json and the report.",
)
@click.option(
    "--max-signals",
    type=click.IntRange(2, None),
    default=None,
    help="With --validate-quality: only the first N signals (faster, wider CIs).",
)
def report_cmd(
    run_dir: Path, human: Path | None, mushra_dir: Path | None, max_signals: int | None
) -> None:
    """Rebuild the TTS report of RUN_DIR, merging human ratings and the quality metrics'
    validation against listeners when given."""
    from voxassay.core.errors import InputError
    from voxassay.core.runstore import RunStore
    from voxassay.report import write_report

    store = RunStore.open(run_dir)
    if store.info().get("suite") != "tts":
        raise InputError(f"{run_dir} is not a TTS run (suite {store.info().get('suite')!r})")
    if human is not None:
        from voxassay.suites.tts.study_export import merge_human

        path = merge_human(store, human)
        click.echo(f"human results: {path}", err=True)
    if mushra_dir is not None:
        import json

        from voxassay.cli.common import progress_bar
        from voxassay.report import json_safe
        from voxassay.suites.tts.report import VALIDATION_FILE
        from voxassay.suites.tts.validation import validate_quality_metrics

        with progress_bar() as progress:
            bar = progress.add_task("quality metrics vs listeners", total=None, status="")

            def tick(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            result = validate_quality_metrics(mushra_dir, max_signals=max_signals, progress=tick)
        dest = store.path / VALIDATION_FILE
        dest.write_text(json.dumps(json_safe(result), indent=2), encoding="utf-8")
        click.echo(f"validation: {dest}", err=True)
    paths = write_report(store.path)
    click.echo(f"report: {paths['html']}", err=True)
    print_result_path(store.path)


@tts.command("items")
@click.option("--items", default="default", show_default=True, help="Item set name or file.")
@click.option("--only", multiple=True, help=ONLY_HELP)
@click.option("--list", "list_items", is_flag=True, help="List every item id and text.")
def items_cmd(items: str, only: tuple[str, ...], list_items: bool) -> None:
    """Dimensions, evals and item counts of an item set (questions and primary metrics)."""
    from rich.console import Console
    from rich.table import Table

    from voxassay.suites.tts.items import TTS_ITEMS_VERSION, load_item_set

    evals, its = load_item_set(items, only)
    per_eval = Counter(str(it.eval) for it in its)
    table = Table(title=f"TTS items · {items} · version {TTS_ITEMS_VERSION} · {len(its)} items")
    for col in ("dimension", "eval", "items", "primary metric"):
        table.add_column(col, justify="right" if col == "items" else "left", no_wrap=True)
    table.add_column("question", overflow="fold")
    for ev_id, ev in evals.items():
        if per_eval.get(ev_id, 0) == 0:
            continue
        table.add_row(
            ev.dimension,
            ev_id,
            str(per_eval[ev_id]),
            ev.primary or "humans only",
            escape(ev.question),
        )
    console = Console()
    console.print(table)
    if list_items:
        for it in its:
            click.echo(f"{it.id}\t{it.eval}\t{it.text[:100]}")


def _summary(run_dir: Path, recs: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    by: dict[str, Counter[str]] = {}
    for r in recs:
        by.setdefault(r.system, Counter())[r.status] += 1
    table = Table(title=f"TTS · {run_dir.name}")
    for col in ("system", "ok", "failed", "kinds"):
        table.add_column(col, justify="left" if col in ("system", "kinds") else "right")
    for spec, c in by.items():
        kinds = Counter(
            (r.error or {}).get("kind", r.status)
            for r in recs
            if r.system == spec and r.status != "ok"
        )
        table.add_row(
            escape(spec),
            str(c["ok"]),
            str(sum(v for k, v in c.items() if k != "ok")),
            escape(", ".join(f"{k} {v}" for k, v in kinds.most_common())),
        )
    Console(stderr=True).print(table)
    if (run_dir / "report.html").exists():
        click.echo(f"report: {run_dir / 'report.html'}", err=True)
