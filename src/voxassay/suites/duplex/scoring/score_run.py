"""Scoring a run of bundles: the scoring configuration every bundle of the run shares, one bundle as one record (an unscorable bundle is an error record with its problems), and the whole run with resume."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.core.records import Record, error_record
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.duplex.evidence.bundle_io import (
    BundleError,
    BundleRef,
    problem_dict,
)

if TYPE_CHECKING:
    from voxassay.core.executor import Executor

from voxassay.suites.duplex.scoring.score import (
    BUNDLE_METRICS_VERSION,
    score_bundle_folder,
)

__all__ = ["BundleScorer", "Scored", "score_bundles", "score_ref", "scoring_config"]


def scoring_config(detector: str) -> dict[str, Any]:
    """What decides how bundles are scored (part of every bundle run's config and its resume
    fingerprint): the detector and the versions of every scorer."""
    from voxassay.suites.duplex.evidence.acoustic_accuracy import detector_info
    from voxassay.suites.duplex.scoring.latency_table import (
        METRICS_VERSION as LEDGER_METRICS_VERSION,
    )
    from voxassay.suites.duplex.scoring.task_context import TASK_METRICS_VERSION
    from voxassay.suites.duplex.scoring.turn_types import TURNS_VERSION

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
    *,
    detector: str = "silero",
    redact: Mapping[str, Any] | None = None,
    into: Path | None = None,
) -> Record:
    """The record of one bundle of a run: scored, or an error record with its reasons (the
    bundle is first redacted into the folder ``into`` when ``redact`` is given)."""
    started = utc_now()
    t0 = time.perf_counter()
    folder = ref.path
    try:
        if redact is not None and into is not None:
            from voxassay.suites.duplex.evidence.redact import redact_bundle

            folder = into
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
    from voxassay.core.items import file_sha256

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
    executor: str = "thread",
    workers: int = 1,
    ray_address: str | None = None,
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

    ``executor``/``workers``: score on ``workers`` threads here (default one), or on a
    distributed executor (``ray``: the workers read the bundles where ``refs`` say, on shared
    storage, and a redacted copy comes back to this process, which alone writes the run).
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
    from voxassay.core.execution import make_executor

    local = executor in ("thread", "serial")  # one scorer here, bundles one at a time
    pool: Executor[Any, Any] = make_executor(
        executor, 1 if local else workers, ray_address=ray_address
    )
    scorer = BundleScorer(detector, redact, str(store.path))
    make: Callable[[], BundleScorer] = (
        (lambda: scorer) if local else functools.partial(BundleScorer, detector, redact, None)
    )
    try:
        for scored in pool.map_unordered(make, todo, lost=_lost_bundle):
            rec = scored.record
            if scored.files is not None and scored.stored:
                from voxassay.core.shipped import RUN_FOLDER, rebase, write_tree

                write_tree(store.path / scored.stored, scored.files)
                rec.output = rebase(rec.output, RUN_FOLDER, str(store.path))
            store.append(rec)
            if on_record:
                on_record(rec)
    finally:
        store.close()
        if not local:
            store.update_info(
                execution={"executor": executor, "workers": workers, **pool.describe()}
            )
        pool.close()
    from voxassay.report import finish_run

    return finish_run(store, write_reports)


@dataclass
class Scored:
    """One bundle's record and, when it was redacted away from the run, the copy's files."""

    record: Record
    stored: str | None = None
    files: dict[str, bytes] | None = None


def _lost_bundle(ref: BundleRef, reason: str) -> Scored:
    return Scored(error_record(ref.key, ref.system, ref.repeat, "worker_lost", reason))


@dataclass
class BundleScorer:
    """Scores bundles (the speech detector loads once per worker). ``run_path``: redact into
    the run's folder; None (a distributed worker): into a private folder whose files go back
    to the driver."""

    detector: str = "silero"
    redact: Mapping[str, Any] | None = None
    run_path: str | None = None

    def __call__(self, ref: BundleRef) -> Scored:
        if self.redact is None or not ref.stored:
            return Scored(score_ref(ref, detector=self.detector))
        if self.run_path is not None:
            into = Path(self.run_path) / ref.stored
            return Scored(score_ref(ref, detector=self.detector, redact=self.redact, into=into))
        import shutil
        import tempfile

        from voxassay.core.shipped import RUN_FOLDER, read_tree, rebase

        scratch = Path(tempfile.mkdtemp(prefix="voxassay-redact-"))
        try:
            into = scratch / ref.stored
            rec = score_ref(ref, detector=self.detector, redact=self.redact, into=into)
            files = read_tree(into) if into.is_dir() else None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        rec.output = rebase(rec.output, str(scratch), RUN_FOLDER)
        return Scored(rec, ref.stored, files)
