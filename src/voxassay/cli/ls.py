"""``voxassay ls [BACKEND]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from voxassay.core.registry import BackendInfo


@click.command()
@click.argument("backend", required=False)
def ls(backend: str | None) -> None:
    """List suites and system backends, and whether each backend is usable here (and why not).

    With BACKEND: that backend's target, its option table and the harness's keys.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from voxassay.core.registry import REGISTRY

    console = Console()
    if backend:
        _one_backend(console, backend)
        return
    suites = Table(title="Suites")
    suites.add_column("suite")
    suites.add_column("description")
    for s in REGISTRY.suites():
        if s.extras.get("hidden"):
            continue
        suites.add_row(escape(s.name), escape(s.description))
    console.print(suites)
    systems = Table(title="Systems (voxassay ls BACKEND: its options)")
    for col in ("backend", "capabilities", "usable", "description"):
        systems.add_column(col)
    for b in sorted(REGISTRY.backends(), key=lambda b: b.name):
        systems.add_row(
            escape(b.name), ", ".join(b.capabilities), _usable(b), escape(b.description)
        )
    console.print(systems)
    console.print(_executors())


def _executors() -> str:
    """One line on where ``--executor ray`` would run."""
    from rich.markup import escape

    from voxassay.core.ray_executor import INSTALL_HINT, ray_status

    status = ray_status()
    if status["version"] is None:
        return f"Executors: thread, process, serial; ray [red]not installed[/] ({escape(INSTALL_HINT)})"
    auto = (
        f"--ray-address auto joins the cluster at {escape(str(status['address']))}"
        if status["address"]
        else "--ray-address auto finds no cluster (RAY_ADDRESS unset, no `ray start` here)"
    )
    return (
        f"Executors: thread, process, serial; ray {status['version']}: without --ray-address "
        f"a run starts a Ray of its own on 127.0.0.1; {auto}"
    )


def _usable(b: BackendInfo) -> str:
    from rich.markup import escape

    missing = b.missing()
    if not missing:
        return "[green]yes[/]"
    return f"[red]no[/]: missing {escape(', '.join(missing))} ({escape(b.install_hint())})"


def _one_backend(out: Console, name: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from voxassay.core.errors import SpecError
    from voxassay.core.registry import REGISTRY, _miss
    from voxassay.core.specs import HARNESS_OPTIONS

    infos = {b.name: b for b in REGISTRY.backends()}
    info = infos.get(name)
    if info is None:
        raise SpecError(_miss("backend", name, list(infos)))
    out.print(f"[bold]{escape(info.name)}[/]: {escape(info.description)}")
    out.print(f"capabilities: {', '.join(info.capabilities)}; usable: {_usable(info)}")
    if info.target:
        out.print(f"target: {escape(info.target)}")
    table = Table(title=f"{info.name} options")
    for col in ("option", "type", "default", "applies to", "meaning"):
        table.add_column(col)
    for o in info.options:
        applies = ", ".join(o.capabilities) or "all"
        table.add_row(o.name, o.kind, escape(o.default or "-"), applies, escape(o.help))
    if info.options:
        out.print(table)
    else:
        out.print("options: none of its own")
    if info.more_options:
        out.print(f"also: {escape(info.more_options)}")
    out.print(
        f"harness keys (every backend): {', '.join(HARNESS_OPTIONS)}, and any *_env "
        "(the name of an environment variable holding a secret)"
    )
