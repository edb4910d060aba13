"""The duplex suite's registration: report builders and renderers for duplex runs."""

from __future__ import annotations

from typing import Any

from voxeval.core.registry import SuiteInfo
from voxeval.core.runstore import RunStore


def _report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.duplex.report import build_report

    return build_report(store, **options)


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
    description="Full-duplex agent acceptance: turn-taking from two-channel recordings (more to come)",
    report=_report,
    extras={
        "render_markdown": _md,
        "render_html": _html,
        "render_html_body": _html_body,
        "title": "Full-duplex turn-taking",
    },
)
