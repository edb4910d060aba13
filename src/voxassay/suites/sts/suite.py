"""The STS suite's entry points: report, renderers and the demo.

Speech-to-speech conversation in five dimensions (``items.DIMENSIONS``), each item answered
twice by the same system: from the user's audio (AO) and from the transcript only (TO); the
paired per-item difference is the suite's headline (``report.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxassay.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxassay.core.runstore import RunStore
from voxassay.suites.sts.runner import SUITE_NAME


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    from voxassay.suites.sts.report import build_report as _build

    return _build(store, **options)


def paired_units(store: RunStore, metric: str | None = None) -> dict[str, Any]:
    """Per (system, answer): (proxy score, 1) for ``voxassay compare``; ``metric`` a proxy
    (default ``checklist``; higher is better except first-audio time)."""
    from voxassay.suites.sts.scoring import PROXIES

    name = metric or "checklist"
    if name not in PROXIES:
        from voxassay.core.errors import InputError

        raise InputError(f"--metric for sts runs is one of {', '.join(PROXIES)}, not {name!r}")
    items = {it.id: it for it in store.items()}
    units: dict[str, dict[str, tuple[float, float]]] = {}
    for r in store.load_records().records:
        v = r.metrics.get(name)
        if r.status == "ok" and r.repeat == 0 and isinstance(v, int | float):
            units.setdefault(r.system, {})[r.id] = (float(v), 1.0)
    return {
        "metric": name,
        "lower_is_better": not PROXIES[name][1],
        "units": units,
        "clusters": {},
        "groups": {
            i: {"dimension": str(it.labels.get("dimension")), "mode": str(it.labels.get("mode"))}
            for i, it in items.items()
        },
    }


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """Both reference variants on a few natural emotion items (``demo.py``)."""
    from voxassay.suites.sts.demo import run_demo

    del workers
    return run_demo(out, progress=progress, full=full)


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="Speech-to-speech: five dimensions, audio vs transcript (AO - TO)",
    demo=demo,
    demo_seconds=20.0,
    report=build_report,
    paired_units=paired_units,
    extras={
        **lazy_renderers("voxassay.suites.sts.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Speech-to-speech",
    },
)

__all__ = ["SUITE"]
