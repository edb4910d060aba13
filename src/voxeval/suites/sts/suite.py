"""The STS suite's entry points: report, renderers and the demo.

Speech-to-speech conversation in five dimensions (``items.DIMENSIONS``), each item answered
twice by the same system: from the user's audio (AO) and from the transcript only (TO); the
paired per-item difference is the suite's headline (``report.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxeval.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxeval.core.runstore import RunStore
from voxeval.suites.sts.runner import SUITE_NAME


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxeval.suites.sts.report import build_report as _build

    return _build(store, **options)


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """Both reference variants on a few natural emotion items (``demo.py``)."""
    from voxeval.suites.sts.demo import run_demo

    del workers
    return run_demo(out, progress=progress, full=full)


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="Speech-to-speech: five dimensions, audio vs transcript (AO - TO)",
    demo=demo,
    demo_seconds=20.0,
    report=build_report,
    extras={
        **lazy_renderers("voxeval.suites.sts.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Speech-to-speech",
    },
)

__all__ = ["SUITE"]
