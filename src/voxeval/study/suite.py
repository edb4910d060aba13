"""The ``study`` suite entry: ``voxeval report RUN_DIR`` on a ``study analyze`` run folder.

Only the rebuild of the report is registered (a study has no embedded demo system and no
paired per-item metric); the analysis module is imported on first use.
"""

from __future__ import annotations

from typing import Any

from voxeval.core.registry import SuiteInfo


def _report(store: Any, **options: Any) -> Any:
    from voxeval.study.analysis import build_report

    return build_report(store, **options)


def _md(report: Any) -> str:
    from voxeval.study.analysis import render_markdown

    return render_markdown(report)


def _html(report: Any, store: Any = None) -> str:
    from voxeval.study.analysis import render_html

    return render_html(report, store)


SUITE = SuiteInfo(
    name="study",
    description="Human rating studies: rater-controlled system means, reliability, rater QC, "
    "dimensions and judges vs humans",
    report=_report,
    extras={"render_markdown": _md, "render_html": _html, "title": "Rating study"},
)
