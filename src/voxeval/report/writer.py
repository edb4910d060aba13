"""Write ``report.json``, ``report.md`` and ``report.html`` for a run directory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from voxeval.core.errors import InputError
from voxeval.core.registry import REGISTRY
from voxeval.core.runstore import RunStore


def json_safe(obj: Any) -> Any:
    """Replace NaN and infinities by ``None`` (JSON has no NaN); tuples become lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def write_report(run_dir: str | Path, **options: Any) -> dict[str, Path]:
    """Rebuild the three report files of ``run_dir`` from the run directory alone."""
    store = RunStore.open(run_dir)
    suite_name = store.info().get("suite")
    if not suite_name:
        raise InputError(f"{run_dir}/run.json names no suite")
    suite = REGISTRY.suite(suite_name)
    if suite.report is None:
        raise InputError(f"suite {suite_name!r} has no report builder")
    report = json_safe(suite.report(store, **options))
    paths = {
        "json": store.path / "report.json",
        "md": store.path / "report.md",
        "html": store.path / "report.html",
    }
    paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    render_md = suite.extras.get("render_markdown")
    render_html = suite.extras.get("render_html")
    if render_md:
        paths["md"].write_text(render_md(report), encoding="utf-8")
    if render_html:
        paths["html"].write_text(render_html(report, store), encoding="utf-8")
    return paths


def finish_run(store: RunStore, write_reports: bool = True) -> RunStore:
    """Close the record file, stamp ``ended_at`` in ``run.json`` and (by default) write the
    reports: the common last step of every command that produces a run."""
    from voxeval.core.runstore import utc_now

    store.close()
    store.update_info(ended_at=utc_now())
    if write_reports:
        write_report(store.path)
    return store
