"""The duplex suite's registration: report builders and renderers for duplex runs."""

from __future__ import annotations

from typing import Any

from voxeval.core.registry import SuiteInfo
from voxeval.core.runstore import RunStore


def _report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.duplex.report import build_report

    return build_report(store, **options)


def _paired_units(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.duplex.report import paired_units

    return paired_units(store, **options)


def _md(report: dict[str, Any]) -> str:
    from voxeval.suites.duplex.render import render_markdown

    return render_markdown(report)


def _html(report: dict[str, Any], store: RunStore) -> str:
    from voxeval.suites.duplex.render import render_html

    return render_html(report, store)


def _html_body(report: dict[str, Any], store: RunStore) -> str:
    from voxeval.suites.duplex.render import render_html_body

    return render_html_body(report, store)


SUITE = SuiteInfo(
    name="duplex",
    description="Full-duplex agent acceptance: evidence bundles and two-channel recordings scored "
    "for speed, behaviour, task and side effects; gates",
    report=_report,
    paired_units=_paired_units,
    extras={
        "render_markdown": _md,
        "render_html": _html,
        "render_html_body": _html_body,
        "title": "Full-duplex turn-taking",
    },
)
