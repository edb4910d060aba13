"""``voxassay study create|serve|import|analyze``: human rating studies.

Nothing heavy (pydantic, numpy, starlette, uvicorn) is imported until a command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from voxassay.cli.common import EXIT_USAGE, print_result_path, results_out_option


@click.group()
def study() -> None:
    """Human rating studies: create a study, serve the rating app, import and analyse ratings."""


@study.command("create")
@click.option(
    "--from",
    "sources",
    multiple=True,
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A run folder (duplex runs: each session's two sides mixed) or an items.jsonl "
    "(id, system, audio|say[, voice], text, group, gold). Repeatable: two duplex runs over "
    "the same scenarios make a pairwise study.",
)
@click.option(
    "--questions",
    "-q",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Questions YAML: evals (id, dimension, kind likert|pairwise, question, scale), "
    "gold, headphone_check, profile.",
)
@results_out_option
@click.option(
    "--raters-per-item",
    type=click.IntRange(1, 1000),
    default=None,
    help="Raters per item (default: the YAML's raters_per_item, else 3).",
)
@click.option(
    "--raters",
    type=click.IntRange(1, 100_000),
    default=None,
    help="Number of raters (default: the YAML's raters, else enough for about "
    "items_per_rater (50) items each, and at least --raters-per-item).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the design.")
@click.option(
    "--base-url",
    default="http://127.0.0.1:8766",
    show_default=True,
    help="Address written into the invite links (where `study serve` will be reachable).",
)
def create_cmd(
    sources: tuple[Path, ...],
    questions: Path,
    out: Path,
    raters_per_item: int | None,
    raters: int | None,
    seed: int,
    base_url: str,
) -> None:
    """Make OUT/<study_id>/: study.json, audio under opaque names, assignments, invites.

    Each item gets --raters-per-item raters; systems are mixed and each rater's order is
    random; traps and gold items go to every rater; a headphone check is generated. Invite
    links are written once to OUT/<study_id>/invites.txt (mode 0600): only token hashes
    are stored. Prints the study folder as the last line.
    """
    from voxassay.study.create import create_study, eval_summary

    result = create_study(
        sources,
        questions,
        out,
        raters_per_item=raters_per_item,
        raters=raters,
        seed=seed,
        base_url=base_url,
    )
    s = result.study
    n_gold = sum(1 for i in s.items if i.gold)
    click.echo(
        f"study {s.study_id}: {len(s.items) - n_gold} item(s) + {n_gold} gold/trap, "
        f"{s.n_raters} rater(s), {s.raters_per_item} per item; evals: {eval_summary(s.evals)}",
        err=True,
    )
    for note in s.notes[:20]:
        click.echo(f"note: {note}", err=True)
    click.echo(
        f"invite links (keep private, shown nowhere else): {result.path / 'invites.txt'}",
        err=True,
    )
    print_result_path(result.path)


@study.command("serve")
@click.argument("study_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--port",
    default=8766,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0: any free port).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. Anything but loopback exposes the app to the network: "
    "put it behind a TLS proxy.",
)
def serve_cmd(study_dir: Path, port: int, host: str) -> None:
    """Serve the rating app for STUDY_DIR until interrupted (Ctrl-C).

    Prints the base URL as the first stdout line once it listens. Raters open their link
    from invites.txt; the admin link opens /admin (completion, rater QC, CSV export).
    """
    from voxassay.study.format import load_study
    from voxassay.study.server import serve
    from voxassay.study.store import StudyStore

    load_study(study_dir)  # a clear error (exit 2) when it is not a study folder
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        invited = bool(store.rater_hashes())
    finally:
        store.close()
    if not invited:
        click.echo(
            f"error: {study_dir} has no invited raters (an imported study?); "
            "make one with `voxassay study create`",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(
            f"warning: binding to {host}: the app is reachable from the network; use HTTPS "
            "through a reverse proxy so that invite tokens are not sent in clear text",
            err=True,
        )

    def announce(url: str) -> None:
        click.echo(url)
        sys.stdout.flush()
        click.echo(
            f"serving {study_dir} at {url} (links: {study_dir / 'invites.txt'}; Ctrl-C stops)",
            err=True,
        )

    try:
        serve(study_dir, host=host, port=port, announce=announce)
    except OSError as exc:
        click.echo(f"error: cannot listen on {host}:{port}: {exc}", err=True)
        sys.exit(EXIT_USAGE)


@study.command("import")
@click.argument("ratings_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--study",
    "study_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Add the ratings to this study (rows must match its items, evals and systems).",
)
@results_out_option
@click.option(
    "--scale",
    nargs=2,
    type=int,
    default=None,
    metavar="MIN MAX",
    help="New study only: the likert scale (default: inferred from the scores).",
)
@click.option("--strict", is_flag=True, help="Exit 2 when any row is bad (they are still skipped).")
def import_cmd(
    ratings_csv: Path,
    study_dir: Path | None,
    out: Path,
    scale: tuple[int, int] | None,
    strict: bool,
) -> None:
    """Import ratings collected elsewhere (long CSV: rater,item,system,eval,score[,timestamp]).

    Bad rows are listed with line numbers and reasons, counted and skipped. Without --study
    a minimal study folder is made under --out. Prints the study folder as the last line.
    Exit 2 when no row could be imported (or, with --strict, when any row was bad).
    """
    from voxassay.study.importer import import_ratings

    report = import_ratings(ratings_csv, study_dir=study_dir, out_parent=out, scale=scale)
    for line, reason in report.bad[:100]:
        click.echo(f"{ratings_csv}:{line}: {reason}", err=True)
    if len(report.bad) > 100:
        click.echo(f"... and {len(report.bad) - 100} more bad row(s)", err=True)
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    for line, old, new in report.revisions[:100]:
        click.echo(
            f"{ratings_csv}:{line}: warning: revises a stored rating ({old:g} -> {new:g}; "
            "the earlier score stays in the history)",
            err=True,
        )
    click.echo(report.summary(), err=True)
    nothing = report.imported + report.revised + report.unchanged == 0
    if nothing:
        click.echo("error: no row could be imported", err=True)
        sys.exit(EXIT_USAGE)
    print_result_path(report.study_dir)
    if strict and report.bad:
        sys.exit(EXIT_USAGE)


@study.command("analyze")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@results_out_option
@click.option(
    "--exclude-flagged",
    is_flag=True,
    help="Leave out raters flagged by QC (and report what that changes).",
)
@click.option(
    "--judges",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Automatic or model-as-judge scores of the same items, compared with the humans.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstraps.")
@click.option(
    "--screen",
    "screen",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Study folders: keep only raters whose profile answers FIELD with VALUE "
    "(e.g. hearing='no known hearing problems'). Repeatable; raters without the answer are left out.",
)
def analyze_cmd(
    source: Path,
    out: Path,
    exclude_flagged: bool,
    judges: Path | None,
    seed: int,
    screen: tuple[str, ...],
) -> None:
    """Rater-controlled system scores, reliability and rater QC of SOURCE.

    SOURCE is a study folder or a ratings CSV (long format). Writes OUT/<run_id>/ with the
    report and prints it as the last line.
    """
    from voxassay.core.errors import InputError
    from voxassay.study.study_report import run_analysis

    rules: dict[str, str] = {}
    for rule in screen:
        field, sep, value = rule.partition("=")
        if not sep or not field.strip():
            raise InputError(f"--screen {rule!r}: expected FIELD=VALUE")
        rules[field.strip()] = value.strip()
    folder = run_analysis(
        source, out, exclude_flagged=exclude_flagged, judges=judges, seed=seed, screen=rules
    )
    _analysis_warnings(Path(folder))
    print_result_path(Path(folder))


def _analysis_warnings(folder: Path) -> None:
    """Rows skipped and repeated rows taken as revisions, each with its line, on stderr."""
    import json

    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    src = report.get("source") or {}
    where = src.get("path") or "ratings"
    for bad in src.get("malformed") or []:
        click.echo(f"{where}:{bad['line']}: skipped: {bad['reason']}", err=True)
    if (src.get("malformed_count") or 0) > len(src.get("malformed") or []):
        click.echo(f"... {src['malformed_count']} malformed row(s) in all", err=True)
    for rev in src.get("revisions") or []:
        click.echo(
            f"{where}:{rev['line']}: warning: repeats line {rev['earlier_line']} (same rater, "
            "item, system and eval); taken as a revision, the newer one is kept",
            err=True,
        )


@study.command("attach")
@click.argument("study_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument(
    "run_dirs",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
def attach_cmd(study_dir: Path, run_dirs: tuple[Path, ...]) -> None:
    """Put a pairwise study's preferences into duplex runs (their subjective group).

    Writes RUN_DIR/subjective.json (system A, system B, winner, the rated sessions) for every
    RUN_DIR and rebuilds its report; the group stays beside speed, behaviour, task and side
    effects and never overrides them. Prints the last run folder as the last line.
    """
    import json

    from voxassay.core.errors import InputError
    from voxassay.core.runstore import RunStore
    from voxassay.report import write_report
    from voxassay.study.store import subjective_preferences
    from voxassay.suites.duplex.report import SUBJECTIVE_FILE

    doc = subjective_preferences(study_dir)
    if not doc.get("preferences"):
        raise InputError(f"{study_dir}: no pairwise ratings yet (nothing to attach)")
    for run_dir in run_dirs:
        suite = RunStore.open(run_dir).info().get("suite")
        if suite != "duplex":
            raise InputError(f"{run_dir} is a {suite!r} run; subjective groups are for duplex runs")
    for run_dir in run_dirs:
        (run_dir / SUBJECTIVE_FILE).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        write_report(run_dir)
        click.echo(
            f"{len(doc['preferences'])} preference(s) -> {run_dir / SUBJECTIVE_FILE}", err=True
        )
    print_result_path(run_dirs[-1])
