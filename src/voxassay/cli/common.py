"""Shared CLI plumbing: error to exit-code mapping, progress bars, printing the run path."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT): what was finished is kept; ``--resume`` continues the run."""

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


def executor_options(f: Any) -> Any:
    """``--executor``, ``--ray-address`` and ``--ship-audio`` (one definition for every
    command that runs items on workers)."""
    f = click.option(
        "--ship-audio",
        is_flag=True,
        help="Send each item's audio to the workers through the executor (Ray's object "
        "store) instead of letting them open the manifest's paths: for a cluster that does "
        "not share this machine's storage.",
    )(f)
    f = click.option(
        "--ray-address",
        default=None,
        metavar="auto|ray://HOST:PORT|HOST:PORT",
        help="With --executor ray: the cluster to join (default: a Ray started for this run, "
        "on 127.0.0.1 only).",
    )(f)
    return click.option(
        "--executor",
        type=click.Choice(["thread", "process", "serial", "ray"]),
        default="thread",
        show_default=True,
        help="Where workers run: threads or processes here, or Ray actors on a cluster "
        "(pip install 'voxassay[ray]').",
    )(f)


def workers_option(help_text: str, most: int = 64) -> Any:
    """``--workers``/``-w`` (default 1): how many workers (threads, processes or Ray actors)
    a run command uses; ``help_text`` says what they do there."""
    return click.option(
        "--workers", "-w", default=1, show_default=True, type=click.IntRange(1, most),
        help=help_text,
    )  # fmt: skip


def manifest_option(
    help_text: str = "Manifest: a JSONL/JSON/CSV/TSV file, a Kaldi data dir, an audio folder, "
    "a Hugging Face save_to_disk or Parquet folder, or a lhotse cuts file (--format, "
    "detected when absent).",
) -> Any:
    return click.option(
        "--manifest",
        "-m",
        required=True,
        type=click.Path(path_type=Path),
        help=help_text,
    )


_interrupted: list[int] = []


def _on_interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C: noted, then Python's own behaviour (``KeyboardInterrupt``)."""
    _interrupted.append(signum)
    raise KeyboardInterrupt


def run_cli(cli: click.Group, argv: list[str]) -> Any:
    """Run ``cli``; voxassay input errors exit 2 with a one-paragraph message on stderr; a
    command stopped by Ctrl-C (click prints "Aborted!") exits 130, after the runners' own
    clean-up (records already written stay; work in flight is cancelled)."""
    import signal
    import threading

    from voxassay.core.errors import BackendUnavailable, InputError, Unreachable

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_interrupt)
    try:
        return cli.main(args=argv, prog_name="voxassay", standalone_mode=True)
    except (InputError, BackendUnavailable) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Unreachable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    except SystemExit as exc:
        if _interrupted and exc.code == EXIT_FAILED:
            click.echo(
                "interrupted: records already written are kept; --resume continues the run",
                err=True,
            )
            sys.exit(EXIT_INTERRUPTED)
        raise


def fail_usage(message: str) -> None:
    from voxassay.core.errors import InputError

    raise InputError(message)


def print_result_path(path: Path) -> None:
    """The last stdout line of every command that produces results is the result folder."""
    click.echo(str(path))


def _check_fraction(ctx: click.Context, param: click.Parameter, value: float | None) -> Any:
    from voxassay.core.failures import check_max_failures

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


def failure_exit(
    run_dir: Path, max_failures: float | None, flags: RunFlags | None = None
) -> tuple[int, list[Any]]:
    """Print each system's failures on stderr (``name: k/n failed: top reasons``; only when
    the command fails under ``--quiet``) and return the exit code by
    ``voxassay.core.failures``' rule (1 when a system failed the run) and the tallies."""
    from voxassay.core.failures import tally
    from voxassay.core.runstore import RunStore

    tallies = tally(RunStore.open(run_dir).load_records().records)
    code = EXIT_FAILED if any(s.fails(max_failures) for s in tallies) else EXIT_OK
    if flags is None or not flags.quiet or code:
        for s in tallies:
            if s.failed:
                click.echo(s.line(), err=True)
    if code == EXIT_FAILED:
        rule = f"more than {max_failures:g} of its items" if max_failures is not None else ""
        why = f"every item or {rule}" if rule else "every item"
        click.echo(f"exit 1: a system failed {why} (see above)", err=True)
    return code, tallies


def finish_run(
    run_dir: Path,
    max_failures: float | None,
    flags: RunFlags | None = None,
    code: int = EXIT_OK,
) -> None:
    """Print the run folder as the last stdout line (with ``--json``: one JSON object that
    holds ``run_dir``), then exit with the larger of ``code`` (a gate's) and
    :func:`failure_exit`'s."""
    failed, tallies = failure_exit(run_dir, max_failures, flags)
    code = max(code, failed)
    if flags is not None and flags.json:
        import json

        summary = {
            "run_dir": str(run_dir),
            "exit_code": code,
            "systems": [
                {
                    "system": s.system,
                    "attempted": s.attempted,
                    "failed": s.failed,
                    "reasons": dict(s.reasons.most_common()),
                }
                for s in tallies
            ],
        }
        report = run_dir / "report.json"
        if report.exists():
            summary["report_json"] = str(report)
            summary["report_html"] = str(run_dir / "report.html")
        click.echo(json.dumps(summary))
    else:
        print_result_path(run_dir)
    if code:
        sys.exit(code)


@dataclass
class RunFlags:
    """The flags every run command shares: what it prints (``--quiet``, ``--json``,
    ``--no-progress``), which items (``--format``, ``--columns``, ``--limit``,
    ``--sample``/``--seed``) and ``--dry-run``."""

    quiet: bool = False
    json: bool = False
    no_progress: bool = False
    format: str | None = None
    columns: str | None = None
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    dry_run: bool = False

    @classmethod
    def pop(cls, kwargs: dict[str, Any]) -> RunFlags:
        """Take this dataclass's fields out of a command's keyword arguments."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})

    @property
    def progress(self) -> bool:
        return not (self.no_progress or self.quiet or self.json)

    @property
    def chatty(self) -> bool:
        """Human-readable notes (summary tables, the detected format) go to stderr."""
        return not (self.quiet or self.json)

    def say(self, message: str) -> None:
        if self.chatty:
            click.echo(message, err=True)


def output_flags(f: Any) -> Any:
    """``--quiet``, ``--json``, ``--no-progress``."""
    f = click.option("--no-progress", is_flag=True, help="No progress bar.")(f)
    f = click.option(
        "--json",
        "json",
        is_flag=True,
        help="Print one JSON object on stdout (run_dir, exit code, per-system failures).",
    )(f)
    f = click.option(
        "--quiet", "-q", is_flag=True, help="No progress, no summary; errors still show."
    )(f)
    return f


def audio_flags(f: Any) -> Any:
    """``--audio inline|link|none`` and ``--audio-format opus|flac`` of a report."""
    f = click.option(
        "--audio-format",
        type=click.Choice(["opus", "flac"]),
        default=None,
        help="Clips as Ogg/Opus (about 24 kbit/s, default) or FLAC.",
    )(f)
    f = click.option(
        "--audio",
        type=click.Choice(["inline", "link", "none"]),
        default=None,
        help="Audio in report.html: embedded while the page stays within 3 MB (the rest "
        "linked), linked as files beside the report, or none. Default: inline, except "
        "recordings, production-shadow and redacted sessions (left out unless asked for).",
    )(f)
    return f


def subset_flags(seed: bool = True) -> Any:
    """``--limit N``, ``--sample N`` with ``--seed S``, ``--dry-run``."""

    def deco(f: Any) -> Any:
        f = click.option(
            "--dry-run",
            is_flag=True,
            help="Print items x systems x repeats and the first items, then exit; runs nothing.",
        )(f)
        if seed:
            f = click.option(
                "--seed", default=0, show_default=True, type=int, help="Seed of --sample."
            )(f)
        f = click.option(
            "--sample",
            type=click.IntRange(1, None),
            default=None,
            metavar="N",
            help="A reproducible random subset of N items (by --seed), recorded in run.json.",
        )(f)
        f = click.option(
            "--limit",
            type=click.IntRange(1, None),
            default=None,
            metavar="N",
            help="Only the first N items.",
        )(f)
        return f

    return deco


def format_flags(f: Any) -> Any:
    """``--format`` and ``--columns`` of manifest-reading commands."""
    from voxassay.core.manifests import FORMATS

    f = click.option(
        "--columns",
        default=None,
        metavar="FIELD=COL,...",
        help="Column names of a csv/tsv/audiofolder/hf manifest, e.g. "
        "audio=path,text=transcript,speaker=spk (labels.NAME=COL for report groups).",
    )(f)
    f = click.option(
        "--format",
        "format",
        type=click.Choice(FORMATS),
        default=None,
        help="Manifest format (detected when absent; the detection is printed).",
    )(f)
    return f


def read_source(manifest: Path, flags: RunFlags) -> Any:
    """The manifest read in its format and cut to ``--limit``/``--sample``; the detected
    format is printed on stderr."""
    from voxassay.core.manifests import parse_columns, read_items

    source = read_items(manifest, flags.format, parse_columns(flags.columns))
    source = source.select(flags.limit, flags.sample, flags.seed)
    flags.say(source.describe())
    return source


def dry_run_source(flags: RunFlags, systems: Any, repeats: int, source: Any) -> None:
    """:func:`dry_run` of a manifest read (``core.manifests.ManifestRead``): its items, format
    and, for a table, the column mapping and the columns left in meta."""
    dry_run(
        flags,
        systems,
        repeats,
        source.items,
        fmt=source.format,
        detected=source.detected,
        columns=source.columns,
        unmapped=source.unmapped,
    )


def dry_run(
    flags: RunFlags,
    systems: Any,
    repeats: int,
    items: list[Any],
    what: str = "items",
    fmt: str | None = None,
    detected: bool | None = None,
    first: int = 5,
    columns: dict[str, str] | None = None,
    unmapped: Sequence[str] = (),
) -> None:
    """``--dry-run``: print the plan (items x systems x repeats, the format, the first
    items) and exit 0 before anything is written or contacted."""
    import json

    systems = list(systems)
    calls = len(items) * len(systems) * repeats
    head = [_item_line(it) for it in items[:first]]
    if flags.json:
        click.echo(
            json.dumps(
                {
                    "dry_run": True,
                    what: len(items),
                    "systems": systems,
                    "repeats": repeats,
                    "calls": calls,
                    "format": fmt,
                    "detected": detected,
                    "columns": columns,
                    "unmapped": list(unmapped),
                    "first": [h[1] for h in head],
                }
            )
        )
    else:
        how = "" if fmt is None else f" ({fmt}, {'detected' if detected else '--format'})"
        click.echo(
            f"dry run: {len(items)} {what}{how} x {len(systems)} system(s) x {repeats} "
            f"repeat(s) = {calls} call(s)"
        )
        for s in systems:
            click.echo(f"  system: {s}")
        for line, _ in head:
            click.echo(f"  {line}")
        if len(items) > first:
            click.echo(f"  ... and {len(items) - first} more")
    sys.exit(EXIT_OK)


def _item_line(item: Any) -> tuple[str, dict[str, Any]]:
    d = item.to_dict() if hasattr(item, "to_dict") else dict(item)
    text = str(d.get("text") or "")
    shown = {k: d[k] for k in ("id", "audio_filepath", "offset", "duration") if k in d}
    if text:
        shown["text"] = text[:80]
    return " ".join(f"{k}={v}" for k, v in shown.items()), d


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
