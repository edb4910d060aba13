"""``voxassay report RUN_DIR``."""

from __future__ import annotations

from pathlib import Path

import click

from voxassay.cli.common import audio_flags, print_result_path


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--normalizer",
    default=None,
    help="Rescore ASR runs with another normalizer (default: the run's).",
)
@audio_flags
def report(
    run_dir: Path, normalizer: str | None, audio: str | None, audio_format: str | None
) -> None:
    """Rebuild report.json, report.md and report.html from RUN_DIR alone (no system runs).

    --audio and --audio-format, when given, are kept in the run's run.json for later rebuilds.
    """
    from voxassay.report import write_report

    options = {"normalizer": normalizer} if normalizer else {}
    paths = write_report(run_dir, audio=audio, audio_format=audio_format, **options)
    for kind, path in paths.items():
        click.echo(f"{kind}: {path}", err=True)
    print_result_path(run_dir)
