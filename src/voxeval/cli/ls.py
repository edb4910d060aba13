"""``voxeval ls``."""

from __future__ import annotations

import click


@click.command()
def ls() -> None:
    """List suites and system backends, and whether each backend is usable here (and why not)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from voxeval.core.registry import REGISTRY

    console = Console()
    suites = Table(title="Suites")
    suites.add_column("suite")
    suites.add_column("description")
    for s in REGISTRY.suites():
        if s.extras.get("hidden"):
            continue
        suites.add_row(escape(s.name), escape(s.description))
    console.print(suites)
    systems = Table(title="Systems")
    for col in ("backend", "capabilities", "usable", "description"):
        systems.add_column(col)
    for b in sorted(REGISTRY.backends(), key=lambda b: b.name):
        missing = b.missing()
        usable = (
            "[green]yes[/]"
            if not missing
            else f"[red]no[/]: missing {escape(', '.join(missing))} ({escape(b.install_hint())})"
        )
        systems.add_row(escape(b.name), ", ".join(b.capabilities), usable, escape(b.description))
    console.print(systems)
