"""Shared CLI plumbing: error to exit-code mapping, progress bars, printing the run path."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Options shared by commands (one definition, one help text).
results_out_option = click.option(
    "--out",
    "-o",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Parent folder; results go into OUT/<run_id>/ (printed as the last line).",
)
data_out_option = click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the built WAVs and manifest (printed as the last line).",
)


def manifest_option(
    help_text: str = "JSONL manifest (audio_filepath, text, id, speaker, labels).",
) -> Any:
    return click.option(
        "--manifest",
        "-m",
        required=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help=help_text,
    )


def run_cli(cli: click.Group, argv: list[str]) -> Any:
    """Run ``cli``; voxeval input errors exit 2 with a one-paragraph message on stderr."""
    from voxeval.core.errors import BackendUnavailable, InputError

    try:
        return cli.main(args=argv, prog_name="voxeval", standalone_mode=True)
    except (InputError, BackendUnavailable) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


def fail_usage(message: str) -> None:
    from voxeval.core.errors import InputError

    raise InputError(message)


def print_result_path(path: Path) -> None:
    """The last stdout line of every command that produces results is the result folder."""
    click.echo(str(path))


def _check_fraction(ctx: click.Context, param: click.Parameter, value: float | None) -> Any:
    from voxeval.core.failures import check_max_failures

    try:
        return check_max_failures(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


max_failures_option = click.option(
    "--max-failures",
    type=float,
    default=None,
    callback=_check_fraction,
    metavar="F",
    help="Exit 1 when any system's (error + timeout + unparseable) / attempted exceeds F "
    "(0-1). A system whose every item failed always exits 1; unscored never counts.",
)


def failure_exit(run_dir: Path, max_failures: float | None) -> int:
    """Print each system's failures on stderr (``name: k/n failed: top reasons``) and return
    the exit code by ``voxeval.core.failures``' rule (1 when a system failed the run)."""
    from voxeval.core.failures import tally
    from voxeval.core.runstore import RunStore

    code = EXIT_OK
    for s in tally(RunStore.open(run_dir).load_records().records):
        if s.failed:
            click.echo(s.line(), err=True)
        if s.fails(max_failures):
            code = EXIT_FAILED
    if code == EXIT_FAILED:
        rule = f"more than {max_failures:g} of its items" if max_failures is not None else ""
        why = f"every item or {rule}" if rule else "every item"
        click.echo(f"exit 1: a system failed {why} (see above)", err=True)
    return code


def finish_run(run_dir: Path, max_failures: float | None) -> None:
    """Print the run folder as the last stdout line, then exit by :func:`failure_exit`."""
    code = failure_exit(run_dir, max_failures)
    print_result_path(run_dir)
    if code:
        sys.exit(code)


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal or disabled)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        disable=not enabled,
        transient=False,
    ) as progress:
        yield progress


def system_progress(
    progress: Any,
    label_prefix: str = "",
    status: str | None = None,
) -> tuple[Callable[[str, int], None], Callable[[Any], None]]:
    """``on_start(spec, n)`` / ``on_record(rec)`` callbacks for a suite run: one bar of
    ``progress`` (a rich Progress, or None for no bars) per system, labelled
    ``label_prefix + spec`` and advanced once per record.

    With ``status`` (e.g. ``"failed"``) a bar's status shows ``"<status> N"`` once N of that
    system's records are not ok.
    A record of a system that got no bar is ignored.
    """
    bars: dict[str, Any] = {}
    counts: Counter[tuple[str, str]] = Counter()

    def on_start(spec: str, n: int) -> None:
        if progress is not None:
            from rich.markup import escape

            bars[spec] = progress.add_task(escape(f"{label_prefix}{spec}"), total=n, status="")

    def on_record(rec: Any) -> None:
        bar = bars.get(rec.system)
        if bar is None:
            return
        if status is None:
            progress.advance(bar)
            return
        counts[(rec.system, rec.status)] += 1
        bad = sum(v for (system, st), v in counts.items() if st != "ok" and system == rec.system)
        progress.update(bar, advance=1, status=f"{status} {bad}" if bad else "")

    return on_start, on_record
