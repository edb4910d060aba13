"""``voxeval duplex validate|schema``: check scenarios, ledgers and bundles; export JSON Schemas.

Nothing heavy (pydantic, yaml, soundfile) is imported until a command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from voxeval.cli.common import EXIT_FAILED, EXIT_OK

SCHEMA_KIND_CHOICES = ("scenario", "event", "manifest", "matrix")


@click.group()
def duplex() -> None:
    """Full-duplex agent acceptance: scenarios, event ledgers, evidence bundles."""


@duplex.command("validate")
@click.argument(
    "paths",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, path_type=Path),
)
@click.option("--errors-only", is_flag=True, help="Do not print warnings.")
def validate_cmd(paths: tuple[Path, ...], errors_only: bool) -> None:
    """Check scenario or matrix YAML, events.jsonl, manifest.json or bundle directories.

    Prints every problem as FILE:LINE: SEVERITY: MESSAGE. Exit 0 when there are no errors
    (warnings allowed), 1 when a check failed, 2 for usage errors (a path that is missing).
    """
    from voxeval.suites.duplex.validate import validate_path

    errors = warnings = 0
    for path in paths:
        for problem in validate_path(path):
            if problem.severity == "error":
                errors += 1
            else:
                warnings += 1
                if errors_only:
                    continue
            click.echo(problem.format())
    click.echo(
        f"{errors} error(s), {warnings} warning(s) in {len(paths)} path(s)",
        err=True,
    )
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


@duplex.command("schema")
@click.argument("kind", required=False, type=click.Choice(SCHEMA_KIND_CHOICES))
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write KIND.json files into this folder (printed) instead of printing the schema.",
)
def schema_cmd(kind: str | None, out: Path | None) -> None:
    """Print or write the JSON Schema of a scenario, event, manifest or matrix (all if no KIND)."""
    import json

    from voxeval.suites.duplex.schema import SCHEMA_KINDS, export_schemas, json_schemas

    kinds = [kind] if kind else list(SCHEMA_KINDS)
    if out is not None:
        for path in export_schemas(out, kinds):
            click.echo(str(path))
        return
    schemas = json_schemas(kinds)
    body = schemas[kind] if kind else schemas
    click.echo(json.dumps(body, indent=2, ensure_ascii=False))
