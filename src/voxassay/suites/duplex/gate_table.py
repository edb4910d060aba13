"""A run's metric table for the gates, read from its Scorecard (report.json validated, or rebuilt from the run folder): every metric overall and per split, at the weakest evidence level of the sessions behind it, with where each session can be replayed from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from voxassay.contracts.duplex.scorecard import (
    CheckEntry,
    CountEntry,
    GroupCard,
    LatencyEntry,
    Overall,
    RateEntry,
    Scorecard,
    SessionCard,
    ValueEntry,
)
from voxassay.suites.duplex.gate_types import (
    LEVEL_RANK,
    Measurement,
    MetricRow,
    MetricTable,
    ReplaySource,
    RunProvenance,
    Unit,
    _num,
    session_of,
)

__all__ = ["Entry", "load_scorecard", "metric_table_from_report", "metric_table_from_run"]


def _level(x: Any) -> str | None:
    return x if isinstance(x, str) and x in LEVEL_RANK else None


def _session_levels(card: Scorecard, sessions: Sequence[SessionCard]) -> dict[str, str | None]:
    """Each session's derived level: the run's ``evidence.sessions`` table, then the level
    listed with the session itself."""
    out: dict[str, str | None] = {}
    table = (card.evidence.model_extra or {}).get("sessions")
    if isinstance(table, dict):
        for sid, lvl in table.items():
            out[str(sid)] = _level(lvl.get("level") if isinstance(lvl, dict) else lvl)
    for s in sessions:
        if s.evidence_level is not None:
            out[s.id] = _level(s.evidence_level)
    return out


def _declared_levels(card: Scorecard, sessions: Sequence[SessionCard]) -> dict[str, str | None]:
    """Each recording's level counting its declared provenance (only sessions that declare)."""
    out: dict[str, str | None] = {}
    table = (card.evidence.model_extra or {}).get("declared_sessions")
    if isinstance(table, dict):
        out.update({str(sid): _level(lvl) for sid, lvl in table.items()})
    for s in sessions:
        if s.declared_level is not None:
            out[s.id] = _level(s.declared_level)
    return out


def _replay_source(session: SessionCard, run_dir: Path | None) -> ReplaySource:
    """Where a session can be replayed from: its bundle, else its recording's audio files,
    else ``bundles/<id>`` of the run."""

    def resolve(p: str) -> Path:
        path = Path(p)
        return path if path.is_absolute() or run_dir is None else run_dir / path

    if session.bundle:
        path = resolve(session.bundle)
        return ReplaySource(session.id, str(path), path.is_dir())
    audio = session.audio
    paths = [audio] if isinstance(audio, str) else list(audio or [])
    if paths:
        resolved = [resolve(str(p)) for p in paths]
        return ReplaySource(
            session.id, ", ".join(map(str, resolved)), all(p.is_file() for p in resolved)
        )
    if run_dir is not None:
        path = run_dir / "bundles" / session.id
        return ReplaySource(session.id, str(path), path.is_dir())
    return ReplaySource(session.id, None, False)


def _opportunity_units(events: Sequence[str], denominator: Sequence[str]) -> list[Unit]:
    hit = set(events)
    if denominator:
        return [Unit(r, session_of(r), event=r in hit) for r in denominator]
    return [Unit(r, session_of(r), event=True) for r in events]


Entry = LatencyEntry | RateEntry | CheckEntry | CountEntry | ValueEntry


def _measurement(e: Entry) -> Measurement:
    """One scorecard entry (latency, rate, task check, count or value) as a Measurement."""
    if isinstance(e, LatencyEntry):
        units = [
            Unit(
                v.ref,
                v.session or session_of(v.ref),
                None if v.censored or _num(v.value_ms) is None else _num(v.value_ms),
                v.censored or _num(v.value_ms) is None,
            )
            for v in e.values
        ]
        summary = e.model_dump(include={"n", "p50", "p95", "p99", "n_censored", "withheld"})
        summary.update({"p50_ci": e.p50_ci, "p95_ci": e.p95_ci})
        return Measurement._from_latency_summary(summary, units)
    if isinstance(e, RateEntry | CheckEntry):
        k = e.k if isinstance(e, RateEntry) else e.passed
        value = e.value if isinstance(e, RateEntry) else e.rate
        lo, hi = _num(e.ci_low), _num(e.ci_high)
        return Measurement(
            kind="rate",
            n=e.n,
            k=None if k is None else int(k),
            value=_num(value),
            ci={"rate": (lo, hi)} if lo is not None or hi is not None else {},
            units=_opportunity_units(e.events, e.denominator),
        )
    if isinstance(e, CountEntry):
        total = _num(e.total)
        return Measurement(
            kind="count",
            n=e.sessions_counted,
            value=total,
            k=None if total is None else int(total),
            units=[Unit(r, session_of(r), event=True) for r in e.events],
        )
    return Measurement(
        kind="value",
        n=e.n,
        value=_num(e.value),
        k=e.k,
        units=_opportunity_units(e.events, e.denominator),
    )


def _row_level(
    m: Measurement,
    stated: str | None,
    run_level: str | None,
    session_levels: Mapping[str, str | None],
) -> tuple[str | None, str]:
    """The level a metric was measured at: the weakest level among the sessions behind it
    (a sample is only as strong as its weakest part); unknown if any of them is unknown."""
    explicit = _level(stated)
    if explicit is not None:
        return explicit, "level stated by the scorer for this metric"
    sessions = {u.session for u in m.units}
    if sessions and session_levels:
        levels = [session_levels.get(s, run_level) for s in sorted(sessions)]
        if any(lv is None for lv in levels):
            unknown = sum(1 for lv in levels if lv is None)
            return None, f"{unknown} of {len(levels)} session(s) have no derived evidence level"
        weakest = min(levels, key=lambda lv: LEVEL_RANK[str(lv)])
        return weakest, f"weakest level among {len(levels)} session(s)"
    if run_level is None:
        return None, "provenance unknown: the run has no derived evidence level"
    return run_level, "run-wide evidence level"


def _entries(block: Overall | GroupCard) -> list[tuple[str, str, Entry]]:
    """(name, source, entry) of every metric of an overall block or a split group."""
    out: list[tuple[str, str, Entry]] = []
    sections: tuple[tuple[str, Mapping[str, Entry]], ...] = (
        ("latencies", block.latencies),
        ("rates", block.rates),
        ("counts", block.counts),
        ("values", block.values),
    )
    for section, entries in sections:
        out += [(name, f"overall.{section}.{name}", e) for name, e in entries.items()]
    if isinstance(block, Overall) and block.task is not None:
        out += [(n, f"overall.task.checks.{n}", e) for n, e in block.task.checks.items()]
        out += [(n, f"overall.task.counts.{n}", e) for n, e in block.task.counts.items()]
    return out


def metric_table_from_report(
    report: Scorecard | Mapping[str, Any],
    *,
    run_dir: str | Path | None = None,
    run_info: Mapping[str, Any] | None = None,
    system: str | None = None,
) -> MetricTable:
    """The table of one system of a duplex run, read from its Scorecard (a report.json's
    content is validated into one first).

    Per metric: the overall entry (latencies, rates, counts, values, task checks and counts)
    and its splits (``by`` inside an entry, or the system's ``groups``), at the weakest
    evidence level of the sessions behind it; the sessions' replay sources (bundle, else
    the recording's audio, else ``bundles/<id>``); the run's hours. ``run_info``
    (``run.json``, read from ``run_dir`` when omitted) supplies the provenance. ``system``
    picks a system when the run has several.
    """
    card = report if isinstance(report, Scorecard) else Scorecard.model_validate(report)
    rdir = Path(run_dir) if run_dir is not None else None
    if run_info is None and rdir is not None and (rdir / "run.json").is_file():
        run_info = json.loads((rdir / "run.json").read_text(encoding="utf-8"))
    entry = card.system(system)
    spec = entry.system
    sessions = [s for s in card.sessions if (s.system or spec) == spec]
    replay = {src.session: src for src in (_replay_source(s, rdir) for s in sessions)}
    durations = [_num(s.duration_s) for s in sessions]
    hours = (
        sum(d for d in durations if d is not None) / 3600.0
        if durations and all(d is not None for d in durations)
        else None
    )
    run_level = _level(card.evidence.level)
    run_note = str(card.evidence.note or card.evidence.status or "")
    levels = _session_levels(card, sessions)
    declared = _declared_levels(card, sessions)

    rows: dict[str, MetricRow] = {}
    for name, source, item in _entries(entry.overall):
        m = _measurement(item)
        level, note = _row_level(m, item.evidence_level, run_level, levels)
        declared_level, declared_note = (
            _row_level(
                m, None, _level(card.evidence.declared_level) or run_level, {**levels, **declared}
            )
            if declared and item.evidence_level is None
            else (None, "")
        )
        row = MetricRow(
            name=name,
            source=source,
            overall=m,
            evidence_level=level,
            evidence_note=note,
            definition=item.definition,
            declared_level=declared_level,
            declared_note=declared_note
            + (" (declared provenance counted)" if declared_note else ""),
        )
        by: Mapping[str, Mapping[str, Entry]] = getattr(item, "by", {}) or {}
        for key, by_value in by.items():
            for value, sub in by_value.items():
                row.splits.setdefault(str(key), {})[str(value)] = _measurement(sub)
        rows[name] = row
    for g in entry.groups:
        for name, _, item in _entries(g):
            if name in rows:
                rows[name].splits.setdefault(g.group, {})[g.name] = _measurement(item)

    errored = [str(f.get("id")) for f in entry.failures if isinstance(f, dict)]
    return MetricTable(
        rows=rows,
        run_id=card.run_id or (run_info or {}).get("run_id"),
        system=spec,
        evidence_level=run_level,
        evidence_note=run_note,
        replay=replay,
        provenance=RunProvenance.from_run_info(run_info) if run_info is not None else None,
        hours=hours,
        errored_items=errored,
    )


def load_scorecard(run_dir: str | Path) -> tuple[Scorecard, dict[str, Any]]:
    """A duplex run's Scorecard (its report.json, or rebuilt in memory from the folder when
    the file is absent; nothing is written) and its run.json."""
    from voxassay.core.errors import InputError
    from voxassay.core.runstore import RunStore

    store = RunStore.open(run_dir)
    info = store.info()
    if info.get("suite") != "duplex":
        raise InputError(f"{run_dir} is a {info.get('suite')!r} run, not a duplex run")
    path = store.path / "report.json"
    if not path.is_file():
        from voxassay.suites.duplex.report import build_scorecard

        return build_scorecard(store), info
    try:
        return Scorecard.model_validate_json(path.read_bytes()), info
    except ValidationError as exc:
        raise InputError(
            f"{path}: not a duplex scorecard: {exc.errors()[0]['msg']} at "
            f"{'.'.join(map(str, exc.errors()[0]['loc']))}"
        ) from None


def metric_table_from_run(run_dir: str | Path, *, system: str | None = None) -> MetricTable:
    """``metric_table_from_report`` on a run folder (``load_scorecard``)."""
    card, info = load_scorecard(run_dir)
    return metric_table_from_report(card, run_dir=Path(run_dir), run_info=info, system=system)
