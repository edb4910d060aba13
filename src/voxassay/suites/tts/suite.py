"""The TTS suite's entry points: run, score-audio, report, demo, paired units for compare."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.errors import InputError, ManifestError
from voxassay.core.execution import make_executor
from voxassay.core.items import Item
from voxassay.core.manifests import select_subset
from voxassay.core.records import Record
from voxassay.core.registry import DOCUMENT_RENDERERS, SuiteInfo, lazy_renderers
from voxassay.core.runstore import RunStore, utc_now
from voxassay.suites.tts.metrics import METRICS_VERSION
from voxassay.suites.tts.runner import DEFAULT_ASR, DEFAULT_TIMEOUT_S, Models, Unit, run_units

SUITE_NAME = "tts"
DEMO_SYSTEMS = ("piper", "espeak-ng:en-us+f3", "espeak-ng:en-us+m7")
"""The full demo's systems; the quick demo runs the first two (a neural and a formant voice)."""
QUICK_DEMO_SYSTEMS = DEMO_SYSTEMS[:2]
DEFAULT_SCORE_EVAL = "general_quality"


def _eval_dict(ev: Any) -> dict[str, Any]:
    """An eval (``TTSEval`` dataclass or dict) as a plain dict for ``run.json``."""
    if dataclasses.is_dataclass(ev) and not isinstance(ev, type):
        return dataclasses.asdict(ev)
    return dict(ev)


def _ev_field(ev: Any, key: str) -> Any:
    if ev is None:
        return None
    return ev.get(key) if isinstance(ev, Mapping) else getattr(ev, key, None)


def items_sha256(items: Sequence[Item]) -> str:
    """SHA-256 of the item snapshot (what ``items.jsonl`` holds), order included."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps(it.to_dict(), sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def run_config(
    items_name: str,
    items_version: str,
    items: Sequence[Item],
    systems: Sequence[str],
    *,
    only: Sequence[str],
    asr: str | None,
    judge: str | None,
    repeats: int,
    evals: Mapping[str, Any],
) -> dict[str, Any]:
    """What decides the meaning of the records (hashed into the resume fingerprint); the
    evals (dimension, question, scale, primary metric) are stored for the report."""
    return {
        "items": str(items_name),
        "items_version": items_version,
        "items_sha256": items_sha256(items),
        "only": list(only),
        "systems": list(systems),
        "asr": asr,
        "judge": judge,
        "repeats": repeats,
        "metrics_version": METRICS_VERSION,
        "evals": {k: _eval_dict(v) for k, v in evals.items()},
    }


def _finish(
    store: RunStore,
    result: Mapping[str, Any],
    *,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Fold the runner's load information into ``run.json`` (resumes keep earlier loads)."""
    info = store.info()
    sys_info = info.get("systems") or {}
    for spec, load in (result.get("systems") or {}).items():
        entry = sys_info.setdefault(spec, {})
        for k, v in load.items():
            if k in ("loads", "compute_s") and isinstance(entry.get(k), int | float):
                entry[k] = round(entry[k] + v, 6)
            elif v is not None:
                entry.setdefault(k, v)
    timings = info.get("measure_seconds") or {}
    for k, v in (result.get("measure_seconds") or {}).items():
        timings[k] = round(timings.get(k, 0.0) + v, 4)
    info.update(
        systems=sys_info,
        measure_seconds=timings,
        models=result.get("models"),
        ended_at=utc_now(),
    )
    info["synthesis_s"] = round(info.get("synthesis_s", 0.0) + result.get("synthesis_s", 0.0), 4)
    if extra:
        info.update(extra)
    store.write_info(info)


def run_tts(
    systems: Sequence[str],
    out: str | Path,
    items: str | Path = "default",
    only: Sequence[str] = (),
    asr: str | None = DEFAULT_ASR,
    judge: str | None = None,
    repeats: int = 1,
    resume: bool = False,
    study: bool = False,
    *,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    measures: Sequence[str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
    raters_per_item: int = 3,
    pipeline: bool = True,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    executor: str = "thread",
    workers: int = 1,
    ray_address: str | None = None,
) -> RunStore:
    """Synthesize the item set with every system into ``out/<run_id>/`` and measure it.

    ``items``: a set name (``default``, ``demo``), a set file, a YAML file or a JSONL of
    items; ``only``: dimension/eval ids or item-id globs. ``asr``: the round-trip ASR spec
    (None: no round trip). ``judge``: an audio-language judge spec. ``resume``: reopen the
    newest run under ``out`` with the same configuration and do only what is missing.
    ``study``: also export the run as a rating study (``RUN/study/``). ``pipeline``:
    synthesize on a second thread while the previous item is measured (False: one thread).
    ``limit``/``sample``/``seed``: a subset of the selected items (recorded in run.json).
    ``executor``: ``thread`` (this process, with ``pipeline``) or a distributed one (``ray``:
    ``workers`` actors per system, each synthesizing and measuring; the driver writes).
    """
    from voxassay.suites.tts.items import TTS_ITEMS_VERSION, load_item_set, to_item

    if not systems:
        raise InputError("name at least one --system")
    if len(set(systems)) != len(systems):
        raise InputError("a system is named twice")
    if repeats < 1:
        raise InputError("--repeat must be >= 1")
    from voxassay.core.registry import REGISTRY

    REGISTRY.check_all("synthesize", systems)  # before anything is written
    if asr:
        REGISTRY.check("transcribe", asr)
    if judge:
        REGISTRY.check("understand", judge)
    evals, tts_items = load_item_set(str(items), only)
    tts_items, subset = select_subset(tts_items, limit, sample, seed)
    if not tts_items:
        raise InputError(f"no items selected from {items!r} with --only {list(only)}")
    core_items = [to_item(it) for it in tts_items]
    config = run_config(
        str(items),
        TTS_ITEMS_VERSION,
        core_items,
        systems,
        only=only,
        asr=asr,
        judge=judge,
        repeats=repeats,
        evals=evals,
    )
    if subset:
        config["subset"] = subset
    pool = (
        None if executor == "thread" else make_executor(executor, workers, ray_address=ray_address)
    )
    store, done, _ = RunStore.start_or_resume(Path(out), SUITE_NAME, config, core_items, resume)
    units = [
        Unit(item, spec, r)
        for spec in systems
        for r in range(repeats)
        for item in core_items
        if (item.id, spec, r) not in done
    ]
    t0 = time.perf_counter()
    try:
        if pool is None:
            result = run_units(
                store,
                units,
                Models(asr, judge),
                evals,
                timeout=timeout,
                measures=measures,
                on_start=on_start,
                on_record=on_record,
                pipeline=pipeline,
            )
        else:
            from voxassay.suites.tts.remote import run_units_on

            result = run_units_on(
                pool,
                store,
                units,
                asr,
                judge,
                evals,
                timeout=timeout,
                measures=measures,
                on_start=on_start,
                on_record=on_record,
            )
    finally:
        if pool is not None:
            pool.close()
        store.close()
    execution: dict[str, Any] = {
        "timeout_s": timeout,
        "executor": executor,
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    if pool is None:
        execution["pipeline"] = pipeline
    else:
        execution.update(workers=workers, **pool.describe())
    _finish(store, result, extra={"execution": execution})
    if study:
        from voxassay.suites.tts.study_export import export_study

        export_study(store, raters_per_item=raters_per_item)
    if write_reports:
        _write_reports(store)
    return store


def _write_reports(store: RunStore) -> None:
    from voxassay.report import write_report

    write_report(store.path)


# -- score-audio ----------------------------------------------------------------------------


def _read_audio_manifest(path: Path) -> list[tuple[int, dict[str, Any]]]:
    from voxassay.core.items import read_json_objects

    rows, problems = read_json_objects(path)
    if problems:
        raise ManifestError(str(path), sorted(problems))
    if not rows:
        raise InputError(f"{path}: no lines")
    return rows


def score_audio(
    manifest: str | Path,
    out: str | Path,
    *,
    items: str | Path | None = None,
    asr: str | None = DEFAULT_ASR,
    judge: str | None = None,
    system: str | None = None,
    measures: Sequence[str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
) -> RunStore:
    """Measure audio produced elsewhere: a JSONL manifest, one line per recording.

    Fields: ``id``, ``audio_filepath`` (relative to the manifest's folder), ``text``,
    ``system`` (default: ``system`` argument, else the manifest's stem), optional ``eval``,
    ``dimension``, ``critical_tokens``, ``instructions``, ``labels``. With ``items`` (a set
    name or file) a line may carry only ``id`` and ``audio_filepath``: text, eval and tokens
    come from the set's item of that id. Lines without an eval count as
    ``general_quality`` (audio quality). Bad lines are refused with their line numbers.
    """
    from voxassay.suites.tts.items import TTS_ITEMS_VERSION, load_item_set, to_item

    manifest = Path(manifest)
    rows = _read_audio_manifest(manifest)
    set_evals: dict[str, Any] = {}
    set_items: dict[str, Item] = {}
    if items is not None:
        set_evals, tts_items = load_item_set(str(items))
        set_items = {it.id: to_item(it) for it in tts_items}
    else:
        try:
            set_evals, _ = load_item_set("default", (DEFAULT_SCORE_EVAL,))
        except Exception:  # the default catalogue is optional for score-audio
            set_evals = {}
    default_system = system or manifest.stem
    problems: list[tuple[int, str]] = []
    snapshot: dict[str, Item] = {}
    units: list[Unit] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, obj in rows:
        ident = obj.get("id")
        audio = obj.get("audio_filepath")
        if not isinstance(ident, str | int) or isinstance(ident, bool) or str(ident) == "":
            problems.append((lineno, "needs an 'id'"))
            continue
        ident = str(ident)
        if not isinstance(audio, str) or not audio:
            problems.append((lineno, "needs an 'audio_filepath'"))
            continue
        p = Path(audio)
        p = p if p.is_absolute() else manifest.parent / p
        sys_name = str(obj.get("system") or default_system)
        key = (ident, sys_name)
        if key in seen:
            problems.append(
                (
                    lineno,
                    f"duplicate id {ident!r} for system {sys_name!r} (first on line {seen[key]})",
                )
            )
            continue
        seen[key] = lineno
        base = set_items.get(ident)
        text = obj.get("text", base.text if base else None)
        if not isinstance(text, str) or not text.strip():
            problems.append((lineno, "needs a 'text' (or an id of the --items set)"))
            continue
        labels = dict(base.labels) if base else {}
        meta = dict(base.meta) if base else {}
        if isinstance(obj.get("labels"), dict):
            labels.update(obj["labels"])
        for k in ("eval", "dimension"):
            if obj.get(k):
                labels[k] = str(obj[k])
        labels.setdefault("eval", DEFAULT_SCORE_EVAL)
        ev = set_evals.get(labels["eval"])
        labels.setdefault("dimension", _ev_field(ev, "dimension") or "audio_quality")
        for k in ("critical_tokens", "instructions", "segments", "contrast"):
            if k in obj:
                meta[k] = obj[k]
        if "critical_tokens" in meta and not (
            isinstance(meta["critical_tokens"], list)
            and all(isinstance(t, str) and t in text for t in meta["critical_tokens"])
        ):
            problems.append((lineno, "'critical_tokens' must be substrings of 'text'"))
            continue
        item = Item(id=ident, text=text, labels=labels, meta=meta)
        prev = snapshot.get(ident)
        if prev is not None and prev.text != text:
            problems.append((lineno, f"id {ident!r} has another text on an earlier line"))
            continue
        snapshot.setdefault(ident, item)
        units.append(Unit(item, sys_name, 0, audio_file=str(p)))
    if problems:
        raise ManifestError(str(manifest), problems)
    evals = {k: v for k, v in set_evals.items()}
    used_evals = {u.item.labels.get("eval") for u in units}
    for name in sorted(e for e in used_evals if e and e not in evals):
        evals[name] = {
            "id": name,
            "dimension": next(
                u.item.labels.get("dimension") for u in units if u.item.labels.get("eval") == name
            ),
            "title": name,
            "question": "",
            "scale": {"min": 1, "max": 5},
            "automatic": [],
            "primary": None,
            "description": "eval named in a score-audio manifest",
        }
    evals = {k: v for k, v in evals.items() if k in used_evals}
    from voxassay.core.items import file_sha256

    systems = list(dict.fromkeys(u.system for u in units))
    config = {
        "mode": "score-audio",
        "manifest": str(manifest),
        "manifest_sha256": file_sha256(manifest),
        "items": str(items) if items is not None else None,
        "items_version": TTS_ITEMS_VERSION,
        "items_sha256": items_sha256(list(snapshot.values())),
        "systems": systems,
        "asr": asr,
        "judge": judge,
        "repeats": 1,
        "metrics_version": METRICS_VERSION,
        "evals": {k: _eval_dict(v) for k, v in evals.items()},
    }
    store = RunStore.create(out, SUITE_NAME, config, list(snapshot.values()))
    t0 = time.perf_counter()
    try:
        result = run_units(
            store,
            units,
            Models(asr, judge),
            evals,
            timeout=None,
            measures=measures,
            on_start=on_start,
            on_record=on_record,
        )
    finally:
        store.close()
    _finish(
        store,
        result,
        extra={"execution": {"wall_s": round(time.perf_counter() - t0, 3)}},
    )
    if write_reports:
        _write_reports(store)
    return store


# -- report, compare ------------------------------------------------------------------------


def run_evals(store: RunStore) -> dict[str, dict[str, Any]]:
    """The evals stored in ``run.json`` ``config.evals`` (id -> dict with dimension, question, scale, primary)."""
    evals = store.info().get("config", {}).get("evals") or {}
    return {str(k): dict(v) for k, v in evals.items()}


def build_report(store: RunStore, **options: Any) -> dict[str, Any]:
    """The TTS report (``suites/tts/report.py``)."""
    from voxassay.suites.tts.report import build_report as _build

    return _build(store, **options)


def paired_units(store: RunStore) -> dict[str, Any]:
    """Per system and item (repeat 0): ``(num, den)`` of the item's primary score (score =
    num / den in [0, 1], higher better; see ``profile.item_score``) for ``voxassay compare``.

    Prosody following is measured against the item's neutral partner and identity against
    its group's neutral anchor, both of the same system; anchors, partners and items whose
    score cannot be computed are left out.
    """
    from voxassay.suites.tts.profile import contrast_outcome, cosine, item_score

    evals = run_evals(store)
    items = {it.id: it for it in store.items()}
    recs = {
        (r.id, r.system): r
        for r in store.load_records().records
        if r.repeat == 0 and r.status == "ok"
    }
    anchors: dict[str, str] = {}
    for it in items.values():
        if it.labels.get("group") and it.labels.get("condition") == "neutral":
            anchors[str(it.labels["group"])] = it.id
    units: dict[str, dict[str, tuple[float, float]]] = {}
    groups: dict[str, dict[str, str]] = {}
    for (item_id, spec), rec in recs.items():
        found = items.get(item_id)
        if found is None:
            continue
        it = found
        ev = evals.get(str(it.labels.get("eval")), {})
        primary = ev.get("primary")
        if not primary:
            continue
        kwargs: dict[str, Any] = {}
        if primary == "prosody_following":
            contrast = (it.meta or {}).get("contrast") or {}
            ref = recs.get((str(contrast.get("reference")), spec))
            if ref is None or not contrast.get("expect"):
                continue
            kwargs["contrast"] = contrast_outcome(contrast["expect"], rec.metrics, ref.metrics)
        elif primary == "identity":
            group = it.labels.get("group")
            anchor_id = anchors.get(str(group)) if group else None
            if anchor_id is None or anchor_id == item_id:
                continue
            anchor = recs.get((anchor_id, spec))
            a, b = rec.output.get("embedding"), anchor.output.get("embedding") if anchor else None
            if not a or not b:
                continue
            kwargs["anchor_cosine"] = cosine(a, b)
        got = item_score(primary, rec.metrics, **kwargs)
        if isinstance(got, str):
            continue
        units.setdefault(spec, {})[item_id] = (float(got[0]), float(got[1]))
        groups[item_id] = {
            "eval": str(it.labels.get("eval")),
            "dimension": str(it.labels.get("dimension")),
        }
    return {
        "metric": "tts_primary_score",
        "lower_is_better": False,
        "units": units,
        "clusters": {},
        "groups": groups,
    }


# -- demo -----------------------------------------------------------------------------------


DEMO_SETS = {"quick": "quick", "full": "demo"}
"""Item sets of the demo: ``quick`` (every dimension, 11 items) by default, ``demo`` (two per
automatic eval, 55 items) with ``--full``."""


def demo(
    out: str | Path, *, workers: int = 1, progress: Any = None, full: bool = False
) -> RunStore:
    """Piper and espeak-ng en-us+f3 on the ``quick`` item set (``full``: with en-us+m7 too,
    on the ``demo`` set), with the default faster-whisper round trip. ``workers`` is accepted for the common demo signature; the TTS pipeline
    already keeps two threads busy.
    """
    from voxassay.core.progress import system_progress

    del workers
    systems = list(DEMO_SYSTEMS if full else QUICK_DEMO_SYSTEMS)
    on_start, on_record = system_progress(progress, "tts ")
    items = DEMO_SETS["full" if full else "quick"]
    return run_tts(systems, out, items=items, on_start=on_start, on_record=on_record)


# -- registration ---------------------------------------------------------------------------


SUITE = SuiteInfo(
    name=SUITE_NAME,
    description="TTS: seven dimensions, automatic metrics with CIs, judge and human studies",
    demo=demo,
    demo_seconds=32.0,
    report=build_report,
    paired_units=paired_units,
    extras={
        **lazy_renderers("voxassay.suites.tts.views", (*DOCUMENT_RENDERERS, "profile")),
        "title": "Text-to-speech",
    },
)

__all__ = ["SUITE", "demo", "paired_units", "run_tts", "score_audio"]
