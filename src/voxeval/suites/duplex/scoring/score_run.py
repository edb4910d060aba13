"""Scoring a run of bundles: the scoring configuration every bundle of the run shares, one bundle as one record (an unscorable bundle is an error record with its problems), and the whole run with resume."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxeval.core.records import Record, error_record
from voxeval.core.runstore import RunStore, utc_now
from voxeval.suites.duplex.evidence.bundle_io import (
    BundleError,
    BundleRef,
    problem_dict,
)

if TYPE_CHECKING:
    pass

from voxeval.suites.duplex.scoring.score import (
    BUNDLE_METRICS_VERSION,
    score_bundle_folder,
)

__all__ = ["score_bundles", "score_ref", "scoring_config"]


def scoring_config(detector: str) -> dict[str, Any]:
    """What decides how bundles are scored (part of every bundle run's config and its resume
    fingerprint): the detector and the versions of every scorer."""
    from voxeval.suites.duplex.evidence.acoustic import detector_info
    from voxeval.suites.duplex.scoring.latency_table import (
        METRICS_VERSION as LEDGER_METRICS_VERSION,
    )
    from voxeval.suites.duplex.scoring.task_context import TASK_METRICS_VERSION
    from voxeval.suites.duplex.scoring.turn_types import TURNS_VERSION

    return {
        "detector": detector_info(detector),
        "metrics_version": BUNDLE_METRICS_VERSION,
        "versions": {
            "ledger_metrics": LEDGER_METRICS_VERSION,
            "turns": TURNS_VERSION,
            "task": TASK_METRICS_VERSION,
        },
    }


def score_ref(
    ref: BundleRef,
    store: RunStore,
    *,
    detector: str = "silero",
    redact: Mapping[str, Any] | None = None,
) -> Record:
    """The record of one bundle of a run: scored, or an error record with its reasons (the
    bundle is first redacted into the run when ``redact`` is given and ``ref.stored`` set)."""
    started = utc_now()
    t0 = time.perf_counter()
    folder = ref.path
    try:
        if redact is not None and ref.stored:
            from voxeval.suites.duplex.evidence.redact import redact_bundle

            folder = store.path / ref.stored
            redact_bundle(ref.path, folder, detector=detector, **dict(redact))
        scored = score_bundle_folder(folder, key=ref.key, detector=detector)
        scored.output.repeat = ref.repeat  # type: ignore[attr-defined]
        scored.output.unit = ref.unit
        if ref.stored:
            scored.output.bundle = ref.stored
        rec = Record(
            id=ref.key,
            system=ref.system,
            repeat=ref.repeat,
            output=scored.output.to_output(),
            metrics=scored.metrics,
        )
        rec.timing = {
            "compute_s": round(time.perf_counter() - t0, 4),
            "audio_s": round(scored.audio_s, 4),
        }
    except BundleError as exc:
        rec = error_record(ref.key, ref.system, ref.repeat, exc.kind, exc.message)
        rec.output = {
            "bundle": ref.stored or str(ref.path),
            "source": str(ref.path),
            "repeat": ref.repeat,
            "unit": ref.unit,
            "problems": [problem_dict(p) for p in exc.problems],
        }
    rec.started_at, rec.ended_at = started, utc_now()
    return rec


def _manifest_sha(folder: Path) -> str | None:
    """sha256 of a bundle's manifest.json (it holds the hashes of every other file)."""
    from voxeval.core.items import file_sha256

    path = Path(folder) / "manifest.json"
    return file_sha256(path) if path.is_file() else None


def score_bundles(
    refs: Sequence[BundleRef],
    out: str | Path,
    *,
    detector: str = "silero",
    redact: Mapping[str, Any] | None = None,
    baseline: str | Path | None = None,
    inputs: Sequence[str] = (),
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
    resume: bool = False,
    on_plan: Callable[[int], None] | None = None,
) -> RunStore:
    """Score every bundle into ``out/<run_id>/``: one record per bundle (id = session key,
    repeat = its repeat index); a bundle that cannot be scored is an error record with its
    reasons in ``error`` and the problems in ``output.problems``.

    ``resume``: continue the newest run under ``out`` with the same configuration (bundle
    paths and the hashes of their manifests, detector, versions, redaction, baseline);
    bundles it already recorded are not scored again. ``on_plan`` hears how many bundles
    will be scored (after resuming).

    ``redact``: options of ``redact.redact_bundle`` (``retention_days``, ``purpose``,
    ``transcripts``); each bundle is then redacted into ``bundles/<key>/<repeat>/`` of the run
    and scored from that copy, so the run holds no raw audio. ``baseline``: a previous duplex
    run whose differences the report lists ("what changed").
    """

    if redact is not None:
        for r in refs:
            r.stored = f"bundles/{r.key}/{r.repeat}"
    config = {
        "mode": "bundles",
        "systems": sorted({r.system for r in refs}),
        **scoring_config(detector),
        "inputs": list(inputs) or sorted({str(r.path) for r in refs}),
        "bundles": [str(r.path) for r in refs],
        "manifest_sha256": [_manifest_sha(r.path) for r in refs],
        "redact": dict(redact) if redact is not None else None,
        "baseline": str(Path(baseline).resolve()) if baseline else None,
    }
    store, done, _ = RunStore.start_or_resume(
        out, "duplex", config, [r.to_item() for r in refs], resume
    )
    todo = [r for r in refs if (r.key, r.system, r.repeat) not in done]
    if on_plan:
        on_plan(len(todo))
    for ref in todo:
        rec = score_ref(ref, store, detector=detector, redact=redact)
        store.append(rec)
        if on_record:
            on_record(rec)
    from voxeval.report import finish_run

    return finish_run(store, write_reports)
