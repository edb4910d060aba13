"""``voxassay asr run|score|build-conditions|build-audit``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from voxassay.cli.common import (
    RunFlags,
    data_out_option,
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

NORMALIZER_HELP = (
    "Text normalizer: oal-en (Open ASR Leaderboard English, default), whisper-en or raw."
)


@click.group()
def asr() -> None:
    """ASR robustness suite."""


@asr.command("run")
@manifest_option()
@click.option(
    "--system",
    "-s",
    "systems",
    multiple=True,
    required=True,
    help="System spec, e.g. faster-whisper, pocketsphinx, openai-compat:URL?model=M, or "
    "NAME=SPEC. Repeatable.",
)
@results_out_option
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the newest run under OUT with the same manifest, systems and normalizer.",
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
@click.option("--normalizer", default="oal-en", show_default=True, help=NORMALIZER_HELP)
@format_flags
@subset_flags()
@output_flags
@max_failures_option
def run_cmd(
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
    normalizer: str,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Transcribe a manifest with one or more systems and write the report.

    The manifest may be JSONL (Open ASR Leaderboard / NeMo), a JSON array, CSV/TSV, a Kaldi
    data dir, an audio folder with metadata.csv, Hugging Face Parquet/Arrow or a lhotse
    CutSet (--format, detected when absent). --system NAME=SPEC names a system."""
    from voxassay.core.registry import REGISTRY
    from voxassay.core.specs import check_unique_keys
    from voxassay.suites.asr.suite import run_asr

    flags = RunFlags.pop(kwargs)
    REGISTRY.check_all("transcribe", systems)
    check_unique_keys(systems)
    source = read_source(manifest, flags)
    source.require_text("asr run (word error rate)")
    if flags.dry_run:
        dry_run_source(flags, systems, repeats, source)
    with progress_bar(flags.progress) as progress:
        on_start, on_record = system_progress(progress, status="failed")
        store = run_asr(
            source,
            systems,
            out,
            normalizer=normalizer,
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


@asr.command("score")
@click.argument(
    "predictions", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@results_out_option
@click.option("--normalizer", default="oal-en", show_default=True, help=NORMALIZER_HELP)
@click.option(
    "--workers",
    "-w",
    default=None,
    type=click.IntRange(1, 64),
    help="Processes for normalization (default: all cores for large files).",
)
@output_flags
def score_cmd(
    predictions: tuple[Path, ...],
    out: Path,
    normalizer: str,
    workers: int | None,
    **kwargs: Any,
) -> None:
    """Score prediction files (text + pred_text per line) made elsewhere; no model runs.

    Each file is one system (its stem) unless lines carry a `system` field.
    """
    from voxassay.suites.asr.suite import score_files

    flags = RunFlags.pop(kwargs)
    store = score_files(predictions, out, normalizer=normalizer, workers=workers)
    if flags.chatty:
        _summary(store.path)
    finish_run(store.path, None, flags)


@asr.command("build-conditions")
@manifest_option("Clean manifest.")
@data_out_option
@click.option(
    "--noise",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Noise recording(s) to mix in. Repeatable.",
)
@click.option(
    "--snr", "snrs", multiple=True, type=float, default=(20.0, 10.0, 5.0, 0.0), show_default=True
)
@click.option(
    "--babble/--no-babble",
    default=True,
    show_default=True,
    help="Babble from the manifest's own talkers.",
)
@click.option("--music/--no-music", default=True, show_default=True)
@click.option("--telephone/--no-telephone", default=True, show_default=True)
@click.option("--seed", default=0, show_default=True)
def build_conditions_cmd(
    manifest: Path,
    out: Path,
    noise: tuple[Path, ...],
    snrs: tuple[float, ...],
    babble: bool,
    music: bool,
    telephone: bool,
    seed: int,
) -> None:
    """Make noisy, babble, music and phone-band versions of clean items (marked constructed)."""
    from voxassay.core.items import write_manifest
    from voxassay.core.manifests import read_items
    from voxassay.suites.asr.conditions import build_conditions

    items = read_items(manifest).items
    new = build_conditions(
        items,
        out,
        noise=list(noise),
        babble_from=items if babble else [],
        music=music,
        snrs=list(snrs),
        telephone=telephone,
        seed=seed,
    )
    path = Path(out) / "conditions.jsonl"
    write_manifest(new, path)
    click.echo(f"{len(new)} constructed items", err=True)
    print_result_path(path)


@asr.command("build-masking")
@manifest_option()
@click.option(
    "--words-from",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A run whose records carry word timestamps (default: run faster-whisper now).",
)
@data_out_option
@click.option("--per-item", default=1, show_default=True, type=click.IntRange(1, 20))
@click.option("--seed", default=0, show_default=True)
def build_masking_cmd(
    manifest: Path, words_from: Path | None, out: Path, per_item: int, seed: int
) -> None:
    """Audio-masking audit set: copies with one content word silenced (-60 dBFS dither).

    OUT/masking.jsonl holds the source items and their masked copies; run your systems on
    it and the report's audit section says how often each still outputs the silenced word.
    """
    from voxassay.core.items import write_manifest
    from voxassay.core.manifests import read_items
    from voxassay.suites.asr.audits import build_masked_items

    items = read_items(manifest).items
    times, source = _word_times(items, words_from)
    masked = build_masked_items(
        items, times, out, per_item=per_item, seed=seed, timestamps_from=source
    )
    path = Path(out) / "masking.jsonl"
    write_manifest([*items, *masked], path)
    click.echo(
        f"{len(masked)} masked items from {len(items)} sources (word times: {source})", err=True
    )
    print_result_path(path)


@asr.command("build-synthetic")
@manifest_option()
@click.option(
    "--tts",
    default="piper",
    show_default=True,
    help="Synthesizer spec (piper[:VOICE], espeak-ng[:VOICE]).",
)
@data_out_option
def build_synthetic_cmd(manifest: Path, tts: str, out: Path) -> None:
    """Synthetic-speech-gap audit set: TTS renderings of each reference beside the real audio.

    OUT/synthetic.jsonl holds the real items and their renderings; the report compares WER
    on the two over the same sources (paired bootstrap).
    """
    from voxassay.core.items import write_manifest
    from voxassay.core.manifests import read_items
    from voxassay.core.registry import REGISTRY
    from voxassay.suites.asr.audits import build_synthetic_items

    items = read_items(manifest).items
    synth = REGISTRY.build("synthesize", tts)
    synth.load()
    with progress_bar() as progress:
        task = progress.add_task(escape(f"synthesize ({tts})"), total=len(items), status="")
        built = build_synthetic_items(
            items,
            synth,
            out,
            tts_spec=tts,
            progress=lambda done, total, _id: progress.update(task, completed=done),
        )
    path = Path(out) / "synthetic.jsonl"
    write_manifest([*items, *built], path)
    print_result_path(path)


def _word_times(
    items: list[Any], run_dir: Path | None
) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Word timestamps per item id: from a run's records, or by running faster-whisper now."""
    if run_dir is not None:
        from voxassay.core.runstore import RunStore

        store = RunStore.open(run_dir)
        times: dict[str, list[dict[str, Any]]] = {}
        source = ""
        for rec in store.load_records().records:
            words = rec.output.get("words")
            if rec.status == "ok" and words and rec.id not in times:
                times[rec.id] = words
                source = rec.system
        return times, f"{store.run_id}:{source}"
    from voxassay.core.audio import load_audio
    from voxassay.core.registry import REGISTRY

    engine = REGISTRY.build("transcribe", "faster-whisper")
    engine.load()
    times = {}
    with progress_bar() as progress:
        task = progress.add_task("word times (faster-whisper)", total=len(items), status="")
        for item in items:
            if item.audio_filepath:
                words = engine.transcribe(load_audio(item.audio_filepath).samples).words or []
                times[item.id] = [{"word": w.word, "start": w.start, "end": w.end} for w in words]
            progress.advance(task)
    return times, "faster-whisper"


def _summary(run_dir: Path) -> None:
    import json

    from rich.console import Console
    from rich.table import Table

    from voxassay.report.html import ci_text

    report = json.loads((run_dir / "report.json").read_text())
    table = Table(title=f"ASR · {report['run_id']} · normalizer {report['normalizer']['name']}")
    for col in ("system", "WER", "95% CI", "n", "failed", "RTFx"):
        table.add_column(col, justify="left" if col == "system" else "right")

    def f(v: Any, d: int = 3) -> str:
        return "–" if v is None else f"{v:.{d}f}"

    for s in report["systems"]:
        o = s["overall"]
        table.add_row(
            escape(s["system"]),
            f(o["wer"]),
            escape(ci_text(o["ci_lo"], o["ci_hi"])),
            str(o["n"]),
            str(o["n_failed"]),
            f(o.get("rtfx"), 1),
        )
    Console(stderr=True).print(table)
    click.echo(f"report: {run_dir / 'report.html'}", err=True)
