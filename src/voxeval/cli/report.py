"""``voxeval report RUN_DIR``."""

from __future__ import annotations

from pathlib import Path

import click

from voxeval.cli.common import print_result_path


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--normalizer",
    default=None,
    help="Rescore ASR runs with another normalizer (default: the run's).",
)
def report(run_dir: Path, normalizer: str | None) -> None:
    """Rebuild report.json, report.md and report.html from RUN_DIR alone (no system runs)."""
    from voxeval.report import write_report

    options = {"normalizer": normalizer} if normalizer else {}
    paths = write_report(run_dir, **options)
    for kind, path in paths.items():
        click.echo(f"{kind}: {path}", err=True)
    print_result_path(run_dir)
