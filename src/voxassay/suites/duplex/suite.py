"""The duplex suite's registration: report builders and renderers for duplex runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxassay.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxassay.core.runstore import RunStore


def _report(store: RunStore, **options: Any) -> dict[str, Any]:
    """report.json: the run's Scorecard, each system gated against the matrix the run keeps."""
    from voxassay.suites.duplex.report import build_scorecard
    from voxassay.suites.duplex.report_gate import gate_systems

    return gate_systems(build_scorecard(store, **options), store).dump()


def _paired_units(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxassay.suites.duplex.paired import paired_units

    return paired_units(store, **options)


DEMO_AGENTS = ("reference:careful", "reference:naive")
DEMO_SETS = {"quick": "quick", "full": "demo"}
"""Scenario sets of the demo: ``quick`` (five scenarios, five categories) by default, the
``demo`` set (every category) with ``--full``."""


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """The quick scenario set (or with ``full`` the demo set: one or two scenarios per
    category) live against the reference agent, both policies as two systems of one run on
    the virtual clock at zero compute (latencies are the agents' decisions, not this machine's
    speed: a loaded machine would otherwise change the verdict), each checked against the
    example acceptance matrix (the report ends in their recommendations); the paired
    comparison of the two (``voxassay compare RUN RUN``) is written into the run as
    ``compare.{json,md}``.
    """
    import json

    from voxassay.report.compare import compare_runs, render_compare_markdown
    from voxassay.suites.duplex.evidence.validate import load_matrix
    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import EXAMPLE_MATRIX, load_scenario_set

    scenarios = load_scenario_set(DEMO_SETS["full" if full else "quick"])
    bar: Any = None
    if progress is not None:
        bar = progress.add_task(
            "duplex sessions", total=len(scenarios) * len(DEMO_AGENTS), status=""
        )
    store = run_scenarios(
        scenarios,
        list(DEMO_AGENTS),
        out,
        cache_dir=Path(out) / "_demo_data" / "duplex-render",
        matrix=load_matrix(EXAMPLE_MATRIX),
        matrix_source="example",
        compute="zero",
        on_record=(lambda rec: progress.advance(bar)) if progress is not None else None,
    )
    comparison = compare_runs(store.path, store.path, metric="acceptance")
    (store.path / "compare.json").write_text(json.dumps(comparison, indent=1))
    (store.path / "compare.md").write_text(render_compare_markdown(comparison))
    return store


SUITE = SuiteInfo(
    name="duplex",
    description="Full-duplex agent acceptance: evidence bundles and two-channel recordings scored "
    "for speed, behaviour, task and side effects; gates",
    report=_report,
    paired_units=_paired_units,
    demo=demo,
    demo_priority=True,
    demo_seconds=16.0,
    extras={
        **lazy_renderers("voxassay.suites.duplex.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Full-duplex turn-taking",
    },
)
