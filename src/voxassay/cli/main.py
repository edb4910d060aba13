"""Entry point. Subcommand modules are imported only when used, so ``--help`` stays fast."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from voxassay.core.version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "asr": (
        "voxassay.cli.asr:asr",
        "ASR robustness: run systems, score predictions, build conditions.",
    ),
    "duplex": (
        "voxassay.cli.duplex:duplex",
        "Full-duplex agent acceptance: validate scenarios, ledgers and bundles; export schemas.",
    ),
    "study": (
        "voxassay.cli.study:study",
        "Human rating studies: create, serve the rating app, import and analyze ratings.",
    ),
    "tts": (
        "voxassay.cli.tts:tts",
        "Text-to-speech: synthesize item sets, score recordings, merge human ratings.",
    ),
    "su": (
        "voxassay.cli.su:su",
        "Speech understanding: build pairs, run emotion/speaker/synthetic-speech evals.",
    ),
    "sts": (
        "voxassay.cli.sts:sts",
        "Speech-to-speech: five dimensions, answered from the audio and from the transcript.",
    ),
    "reference": (
        "voxassay.cli.reference:reference",
        "The reference voice agent: serve it over the OpenAI Realtime WebSocket protocol.",
    ),
    "report": ("voxassay.cli.report:report", "Rebuild report.json/md/html of a run directory."),
    "compare": (
        "voxassay.cli.compare:compare",
        "Paired per-item differences of two runs, with CIs.",
    ),
    "ls": ("voxassay.cli.ls:ls", "List suites and systems, and whether they are usable here."),
    "demo": ("voxassay.cli.demo:demo", "Run every suite's embedded demo and write one report."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, _, attr = COMMANDS[name][0].partition(":")
        cmd: click.Command = getattr(importlib.import_module(module_name), attr)
        return cmd

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but an unknown command names the nearest ones (exit 2)."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and name not in COMMANDS and not name.startswith("-"):
            import difflib

            near = difflib.get_close_matches(name, list(COMMANDS), n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="voxassay")
def cli() -> None:
    """voxassay: evaluate voice AI the way it is used.

    Exit codes: 0 ok, 1 a gate or check failed, 2 usage or input error.
    """


def main(argv: list[str] | None = None) -> Any:
    from voxassay.core.threads import quiet_thread_pools

    quiet_thread_pools()  # before anything loads NumPy or a model
    from voxassay.cli.common import run_cli

    return run_cli(cli, argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    main()
