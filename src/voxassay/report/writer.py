"""Write ``report.json``, ``report.md`` and ``report.html`` for a run directory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError
from voxassay.core.registry import REGISTRY
from voxassay.core.runstore import RunStore


def json_safe(obj: Any) -> Any:
    """Replace NaN and infinities by ``None`` (JSON has no NaN); tuples become lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def write_report(
    run_dir: str | Path,
    *,
    audio: str | None = None,
    audio_format: str | None = None,
    **options: Any,
) -> dict[str, Path]:
    """Rebuild the three report files of ``run_dir`` from the run directory alone.

    A suite with a ``document`` view renders one ``report.document.Document`` to Markdown and
    HTML. ``audio`` (inline, link, none) and ``audio_format`` (opus, flac) choose how its
    clips appear; given, they are kept in run.json (``report_audio``) for later rebuilds.
    """
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
    document = suite.extras.get("document")
    if document is not None:
        from voxassay.report.render import write_document

        policy = audio_policy(store, audio, audio_format)
        write_document(document(report, store), store.path, policy)
        return paths
    render_md = suite.extras.get("render_markdown")
    render_html = suite.extras.get("render_html")
    if render_md:
        paths["md"].write_text(render_md(report), encoding="utf-8")
    if render_html:
        paths["html"].write_text(render_html(report, store), encoding="utf-8")
    return paths


def audio_policy(store: RunStore, audio: str | None, audio_format: str | None) -> Any:
    """The run's audio policy: the one given (kept in run.json), else the one kept, else
    inline Opus."""
    from voxassay.report.clips import AUDIO_MODES, AudioPolicy

    kept = store.info().get("report_audio") or {}
    if audio is not None or audio_format is not None:
        kept = {
            "mode": audio or kept.get("mode") or "inline",
            "format": audio_format or kept.get("format") or "opus",
        }
        store.update_info(report_audio=kept)
    mode = kept.get("mode") or "inline"
    if mode not in AUDIO_MODES:
        raise InputError(f"audio mode {mode!r} is not one of {', '.join(AUDIO_MODES)}")
    return AudioPolicy(
        mode=mode,
        fmt="flac" if kept.get("format") == "flac" else "opus",
        explicit=bool(kept),
        out_dir=store.path,
    )


def finish_run(store: RunStore, write_reports: bool = True) -> RunStore:
    """Close the record file, stamp ``ended_at`` in ``run.json`` and (by default) write the
    reports: the common last step of every command that produces a run."""
    from voxassay.core.runstore import utc_now

    store.close()
    store.update_info(ended_at=utc_now())
    if write_reports:
        write_report(store.path)
    return store
