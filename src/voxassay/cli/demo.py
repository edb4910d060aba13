"""``voxassay demo``: every registered suite's embedded demo, one combined report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from voxassay.cli.common import RunFlags, output_flags, print_result_path, results_out_option


@click.command()
@results_out_option
@click.option("--only", multiple=True, help="Run only these suites.")
@click.option("--workers", "-w", default=1, show_default=True, type=click.IntRange(1, 16))
@click.option(
    "--full",
    is_flag=True,
    help="The larger demo sets (several minutes) instead of the quick ones (about 70 s here).",
)
@click.option(
    "--serial",
    is_flag=True,
    help="Run the sections one after another (default: side by side, duplex at normal "
    "priority, the others at low priority).",
)
@output_flags
def demo(
    out: Path, only: tuple[str, ...], workers: int, full: bool, serial: bool, **kwargs: Any
) -> None:
    """Build demo data for each suite, run it, and write one report with a section per suite.

    The quick default shows each capability once; --full runs each suite's larger demo set.
    Sections run side by side on two lanes unless --serial."""
    from voxassay.cli.common import progress_bar
    from voxassay.demo import failed_suites, run_demo

    flags = RunFlags.pop(kwargs)
    with progress_bar(flags.progress) as progress:
        path = run_demo(
            out, only=list(only), workers=workers, progress=progress, full=full, serial=serial
        )
    flags.say(f"report: {path / 'report.html'}")
    failed = failed_suites(path)
    if failed:
        click.echo(f"demo failed in: {', '.join(failed)} (see the report)", err=True)
    if flags.json:
        import json

        click.echo(
            json.dumps(
                {
                    "run_dir": str(path),
                    "exit_code": 1 if failed else 0,
                    "report_html": str(path / "report.html"),
                    "failed_suites": failed,
                }
            )
        )
    else:
        print_result_path(path)
    if failed:
        raise SystemExit(1)
