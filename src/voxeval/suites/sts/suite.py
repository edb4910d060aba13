"""The STS suite's entry points: report and renderers (the demo and the paired units for
``voxeval compare`` come with the suite's later parts).

Speech-to-speech conversation in five dimensions (``items.DIMENSIONS``), each item answered
twice by the same system: from the user's audio (AO) and from the transcript only (TO); the
paired per-item difference is the suite's headline (``report.py``).
"""

from __future__ import annotations

from typing import Any

from voxeval.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxeval.core.runstore import RunStore
from voxeval.suites.sts.runner import SUITE_NAME


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.sts.report import build_report as _build

    return _build(store, **options)


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="Speech-to-speech: five dimensions, audio vs transcript (AO - TO)",
    report=build_report,
    extras={
        **lazy_renderers("voxeval.suites.sts.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Speech-to-speech",
    },
)

__all__ = ["SUITE"]
