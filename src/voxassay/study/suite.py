"""The ``study`` suite entry: ``voxassay report RUN_DIR`` on a ``study analyze`` run folder.

Only the rebuild of the report is registered (a study has no embedded demo system and no
paired per-item metric); the analysis module is imported on first use.
"""

from __future__ import annotations

from typing import Any

from voxassay.core.registry import SuiteInfo, lazy_renderers


def _report(store: Any, **options: Any) -> Any:
    from voxassay.study.study_report import build_report

    return build_report(store, **options)


SUITE = SuiteInfo(
    name="study",
    description="Human rating studies: rater-controlled system means, reliability, rater QC, "
    "dimensions and judges vs humans",
    report=_report,
    extras={
        **lazy_renderers("voxassay.study.sections", ("document", "render_markdown", "render_html")),
        "title": "Rating study",
    },
)
