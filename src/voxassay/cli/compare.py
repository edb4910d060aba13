"""``voxassay compare RUN_A RUN_B``."""

from __future__ import annotations

from pathlib import Path

import click

from voxassay.cli.common import print_result_path, results_out_option


@click.command()
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@results_out_option
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--metric",
    default=None,
    help="The paired metric, when the suite has several (duplex: behaviour [default], "
    "task (failed task checks / scored checks) or acceptance (behaviour + task + history and "
    "recovery cases).",
)
def compare(run_a: Path, run_b: Path, out: Path, seed: int, metric: str | None) -> None:
    """Paired per-item differences A - B with bootstrap CIs (same run twice: its systems
    pairwise); p exact (permutation) for 12 units or fewer. Prints the summary table and
    writes compare.json, compare.md and compare.html."""
    from voxassay.report.compare import compare_runs, render_compare_text, write_compare
    from voxassay.report.writer import json_safe

    result = compare_runs(run_a, run_b, seed=seed, metric=metric)
    click.echo(render_compare_text(json_safe(result)), err=True)
    path = write_compare(result, out)
    click.echo(f"html: {path / 'compare.html'}", err=True)
    print_result_path(path)
