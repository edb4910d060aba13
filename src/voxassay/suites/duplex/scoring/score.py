"""Score evidence bundles end to end: ``voxassay duplex score BUNDLE_DIR [BUNDLE_DIR ...]``.

A bundle (DESIGN.md, "Full-duplex ledger and bundle") is one session. Each is scored on its
own; a bundle that cannot be scored becomes an error record with its reasons and the run goes
on. Per bundle:

1. **Validation** (``validate.validate_bundle``): every problem is kept in the record as
   ``file:line: severity: message``. Most problems do not stop scoring (a malformed ledger
   line is skipped, an unknown event type is kept and ignored by the scorers); the bundle is
   an error record only when something scoring needs is unusable (see ``BundleError``): no or
   an invalid ``manifest.json``, no ledger or no valid event in it, audio that cannot be read,
   a mono ``mixed.wav`` where it is the only audio (the two sides cannot be told apart), or
   audio that ends before the ledger's last event (more than
   ``validate.AUDIO_SPAN_TOLERANCE_MS``): acoustic truth would be missing for the rest.
2. **Evidence level** from the manifest's provenance facts (``schema.derive_evidence_level``
   with the bundle folder, so missing or altered files do not count); never self-declared.
3. **Acoustic segments** of ``input.wav`` (user side) and ``output.wav`` (agent side), as for
   recordings (``acoustic.detect_segments``; a redacted bundle brings its stored segments in
   ``features.json``), and the derived ``acoustic.speech_started/stopped`` events on the
   session clock: ``t_session = audio_origin_ns + t_audio`` (``manifest.clock.audio_origin_ns``,
   else the first ledger event). ``acoustic.*`` events already in the ledger are replaced by
   these, so every bundle of a run uses one detector. A user-side segment whose onset lies
   within ``ALIGN_TOLERANCE_S`` of a scenario truth onset (``user.speech_started`` with
   ``data.segment_id``) is aligned to that segment: it takes its ``segment_id`` (and so its
   intents), which is how the ledger metrics know which acoustic
   onsets are interruptions and which user ends are not respondable (backchannels).
4. **Ledger latencies** (``metrics.MetricAccumulator`` with ``DEFAULT_PAIRS``): the ledger's
   valid events of this session plus the derived acoustic events, in causal order, with the
   session's clock records; ``SessionMeta`` from the manifest (route, device, language,
   system version) and the scenario (category, per-segment intents). A start whose end never
   came is censored: counted in n and in n_censored, never zero.
5. **Behaviour** (``turns.analyze_call``) from the two sides' segments with the scenario's
   labels: each segment's ``expected_actions`` and ``intents`` placed at its actual start,
   the time of its ``user.speech_started`` truth event (end: its ``user.speech_stopped``).
   A scenario segment without a truth event gets no label (counted in ``labels_missing``).
6. **Task and side effects** (``task.score_task``) from ``scenario.yaml``,
   ``final-state.json``, ``tool-audit.json`` and the ledger.
7. **Causal slices**: every failed task check (``task.task_failure_slice``, kind ``task``),
   every wrong turn decision (``behaviour_slice``, kind ``behaviour``), every failed history
   consistency case (``recovery.history_slice``, kind ``history``) and every failed recovery
   accuracy case (``recovery.recovery_slice``, kind ``recovery``) is walked back to its input
   with the first failing gate, the last gate that passed before it, and the layer of the
   first failing one.
   Agent utterances are linked to the scenario segments they heard by id or by time overlap
   (``task.UtteranceLinks``), so a live agent's own utterance ids do not break the chain.

The record keeps what the report needs to recompute everything without the audio: segments,
labels, compact pairs, the task result, the slices, the evidence level and its reasons, and
the problems.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.evidence import FEATURES_FILE
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.core.errors import InputError
from voxassay.suites.duplex.evidence.bundle_io import (
    BUNDLE_WAVS,
    BundleError,
    BundleRef,
    find_bundles,
    load_features,
    plan_bundles,
    problem_dict,
    read_bundle_ledger,
    safe_key,
    segments_from_audio,
)

if TYPE_CHECKING:
    pass
from voxassay.suites.duplex.scoring.session_score import PAIR_FIELDS, SessionScore
from voxassay.suites.duplex.scoring.slices import MARKER_TYPES, behaviour_slice

__all__ = [
    "ALIGN_TOLERANCE_S",
    "BUNDLE_METRICS_VERSION",
    "FEATURES_FILE",
    "PAIR_FIELDS",
    "BundleError",
    "BundleRef",
    "BundleScore",
    "behaviour_slice",
    "find_bundles",
    "plan_bundles",
    "score_bundle_folder",
]

BUNDLE_METRICS_VERSION = "duplex-bundle/1"
ALIGN_TOLERANCE_S = 0.3
"""A user acoustic onset this close to a truth onset belongs to that scenario segment."""
MAX_MARKERS = 400
"""Ledger events kept per session for the timeline."""


@dataclass
class BundleScore:
    """What one bundle gives its record."""

    output: SessionScore
    metrics: dict[str, Any]
    audio_s: float


def _truth_times(
    events: Sequence[Event],
    clocks: Mapping[str, ProducerClock],
    origin: int,
    seg_ids: set[str],
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """Per scenario segment: first truth start and stop (audio seconds), and its utterance id.

    A truth event names its segment in ``data.segment_id``, or by an ``utterance_id`` equal to
    a segment id (the convention of ``task.py``).
    """
    from voxassay.suites.duplex.evidence.ledger import session_ns

    starts: dict[str, float] = {}
    stops: dict[str, float] = {}
    utt: dict[str, str] = {}
    utt_seg: dict[str, str] = {}
    for e in events:
        if e.event_type not in ("user.speech_started", "user.speech_stopped"):
            continue
        sid = e.data.get("segment_id")
        if not isinstance(sid, str):
            sid = utt_seg.get(e.utterance_id or "") or (
                e.utterance_id if e.utterance_id in seg_ids or not seg_ids else None
            )
        if not isinstance(sid, str):
            continue
        t = (session_ns(e, dict(clocks)) - origin) / 1e9
        if e.event_type == "user.speech_started":
            if sid not in starts:
                starts[sid] = t
                utt[sid] = e.utterance_id or sid
                if e.utterance_id:
                    utt_seg[e.utterance_id] = sid
        elif sid not in stops and (sid not in starts or t >= starts[sid]):
            stops[sid] = t
    return starts, stops, utt


def _labels(
    scenario: Scenario | None,
    starts: Mapping[str, float],
    stops: Mapping[str, float],
    user_segments: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Scenario labels placed at the segments' truth onsets; segments without one listed."""
    if scenario is None:
        return [], []
    labels: list[dict[str, Any]] = []
    missing: list[str] = []
    for seg in scenario.segments:
        if seg.id not in starts:
            missing.append(seg.id)
            continue
        start = starts[seg.id]
        end = stops.get(seg.id)
        if end is None:  # no truth end: the acoustic segment that starts near the onset
            near = [
                float(s["end_s"])
                for s in user_segments
                if abs(float(s["start_s"]) - start) <= ALIGN_TOLERANCE_S
            ]
            end = max(near) if near else start
        labels.append(
            {
                "id": seg.id,
                "start_s": round(start, 6),
                "end_s": round(max(end, start), 6),
                "expected_actions": [str(a) for a in seg.expected_actions],
                "intents": [str(i) for i in seg.intents],
                "role": str(seg.role),
            }
        )
    return labels, missing


def _acoustic_events(
    segments: Mapping[str, Sequence[Mapping[str, Any]]],
    origin: int,
    session_id: str,
    detector: str,
    starts: Mapping[str, float],
    utterances: Mapping[str, str],
) -> tuple[list[Event], dict[str, str]]:
    """``acoustic.speech_started/stopped`` per speech segment, on the session clock, with user
    segments aligned to the nearest truth onset within ``ALIGN_TOLERANCE_S`` (each truth
    segment aligned at most once). An aligned event names its scenario segment in
    ``data.segment_id`` (and the truth's utterance in ``data.utterance_id``), which is what the
    ledger metrics read its intents by; it carries no ``utterance_id`` field, so causal
    ordering keeps it at its measured time instead of after the truth event (a detector edge
    a millisecond before the truth onset is not a causality violation). Returns the events and
    ``{segment_id: acoustic_id}``."""
    from voxassay.suites.duplex.evidence.acoustic import PRODUCER

    events: list[Event] = []
    alignment: dict[str, str] = {}
    taken: set[str] = set()
    for channel, role in enumerate(("user", "agent")):
        speech = [s for s in segments.get(role, []) if s.get("kind", "speech") == "speech"]
        for k, seg in enumerate(speech):
            aid = f"{role}-{channel}-{k}"
            data: dict[str, Any] = {
                "channel": channel,
                "role": role,
                "level_dbfs": seg.get("level_dbfs"),
                "segment_id": aid,
                "acoustic_id": aid,
                "detector": detector,
            }
            if role == "user":
                s0 = float(seg["start_s"])
                near = [
                    (abs(t - s0), sid)
                    for sid, t in starts.items()
                    if sid not in taken and abs(t - s0) <= ALIGN_TOLERANCE_S
                ]
                if near:
                    sid = min(near)[1]
                    taken.add(sid)
                    alignment[sid] = aid
                    data["segment_id"] = sid
                    data["utterance_id"] = utterances.get(sid, sid)
            for kind, t in (("started", seg["start_s"]), ("stopped", seg["end_s"])):
                events.append(
                    Event.new(
                        f"acoustic.speech_{kind}",
                        session_id=session_id,
                        producer=PRODUCER,
                        monotonic_ns=origin + round(float(t) * 1e9),
                        event_id=f"acoustic-{aid}-{kind}",
                        data=dict(data),
                    )
                )
    events.sort(key=lambda e: (e.monotonic_ns, e.event_type != "acoustic.speech_stopped"))
    return events, alignment


def _excused(p: Problem, features: bool) -> bool:
    """Problems that a redacted bundle (features.json instead of audio) is allowed to have."""
    if not features:
        return False
    name = Path(p.file).name
    return name in BUNDLE_WAVS and "missing" in p.message


def score_bundle_folder(
    folder: str | Path, *, key: str | None = None, detector: str = "silero"
) -> BundleScore:
    """Score one bundle folder (see the module docstring); raises ``BundleError``."""
    from voxassay.contracts.duplex.evidence import derive_evidence_level
    from voxassay.suites.duplex.evidence.ledger import (
        order_by_causality,
        producer_clocks,
        session_ns,
    )
    from voxassay.suites.duplex.evidence.validate import (
        AUDIO_SPAN_TOLERANCE_MS,
        DuplexInputError,
        load_scenario,
        validate_bundle,
        validate_manifest,
    )
    from voxassay.suites.duplex.scoring.latency import (
        MetricAccumulator,
        NonMonotonicTimestampWarning,
    )
    from voxassay.suites.duplex.scoring.latency_pairs import DEFAULT_PAIRS
    from voxassay.suites.duplex.scoring.latency_table import SessionMeta

    folder = Path(folder)
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise BundleError(
            "no-manifest",
            f"{mpath}: required bundle file missing (provenance, hashes and the session id "
            "come from it)",
        )
    manifest, mprobs = validate_manifest(mpath)
    if manifest is None:
        errors = [p for p in mprobs if p.severity == "error"]
        text = "; ".join(p.format() for p in errors[:5])
        raise BundleError("invalid-manifest", f"invalid manifest: {text}", mprobs)
    sid = manifest.session_id
    key = key or safe_key(sid)
    has_features = (folder / FEATURES_FILE).is_file() and not (
        (folder / "input.wav").is_file() and (folder / "output.wav").is_file()
    )
    problems = [p for p in validate_bundle(folder) if not _excused(p, has_features)]
    lpath = folder / "events.jsonl"
    if not lpath.is_file():
        raise BundleError("no-ledger", f"{lpath}: required bundle file missing", problems)
    ledger = read_bundle_ledger(lpath, sid)
    if not ledger.events:
        why = (
            f"{ledger.malformed} malformed line(s)"
            if ledger.malformed
            else f"{ledger.foreign} event(s) of other sessions"
            if ledger.foreign
            else "no events"
        )
        raise BundleError("empty-ledger", f"{lpath}: no valid event of session {sid!r} ({why})")

    clocks = producer_clocks(ledger.events)
    timed = [(session_ns(e, clocks), e) for e in ledger.events if e.event_type != "clock.producer"]
    if not timed:
        raise BundleError("empty-ledger", f"{lpath}: only clock records, no events to score")
    origin = (
        manifest.clock.audio_origin_ns
        if manifest.clock.audio_origin_ns is not None
        else min(t for t, _ in timed)
    )

    # ---- audio: segments of both sides
    features: dict[str, Any] | None = None
    if has_features:
        features = load_features(folder)
        seg_out: dict[str, Any] = {
            "segments": features["segments"],
            "duration_s": float(features["duration_s"]),
            "detector": str((features.get("detector") or {}).get("name") or detector),
        }
        segments_source = FEATURES_FILE
    else:
        seg_out, notes = segments_from_audio(folder, detector)
        problems += notes
        segments_source = "audio"
    duration_s = float(seg_out["duration_s"])
    last_ns, last_event = max(timed, key=lambda x: x[0])
    span_s = (last_ns - origin) / 1e9
    if span_s * 1000 > duration_s * 1000 + AUDIO_SPAN_TOLERANCE_MS:
        where = f"{lpath}:{ledger.lines.get(last_event.event_id, '?')}"
        audio = (
            str(folder / FEATURES_FILE)
            if features is not None
            else f"{folder}: the audio (input.wav, output.wav)"
        )
        raise BundleError(
            "audio-short",
            f"{audio} lasts {duration_s:.3f} s but the ledger reaches "
            f"{span_s:.3f} s after the audio origin ({where}: {last_event.event_type}); the "
            "acoustic truth does not cover the events",
            problems,
        )

    # ---- scenario and truth
    scenario: Scenario | None = None
    notes_out: list[str] = []
    if (folder / "scenario.yaml").is_file():
        try:
            scenario = load_scenario(folder / "scenario.yaml")
        except DuplexInputError:
            notes_out.append(
                "scenario.yaml has errors (listed in problems): no scenario labels, category "
                "or task scoring for this session"
            )
    else:
        notes_out.append("no scenario.yaml: expected actions come from the acoustic rules")
    seg_ids = {s.id for s in scenario.segments} if scenario else set()
    starts, stops, utts = _truth_times(ledger.events, clocks, origin, seg_ids)
    labels, labels_missing = _labels(scenario, starts, stops, seg_out["segments"]["user"])
    if labels_missing:
        notes_out.append(
            f"{len(labels_missing)} scenario segment(s) without a user.speech_started truth "
            f"event: {', '.join(labels_missing)} (no label placed)"
        )

    # ---- derived acoustic events and ledger latencies
    ac_events, alignment = _acoustic_events(
        seg_out["segments"], origin, sid, str(seg_out["detector"]), starts, utts
    )
    ledger_acoustic = [e for e in ledger.events if e.event_type.startswith("acoustic.")]
    if ledger_acoustic:
        notes_out.append(
            f"{len(ledger_acoustic)} acoustic.* event(s) of the ledger replaced by the ones "
            "derived here from the audio (one detector for every bundle of the run)"
        )
    base_events = [e for e in ledger.events if not e.event_type.startswith("acoustic.")]
    stream = order_by_causality([*base_events, *ac_events])
    meta = SessionMeta.from_manifest(manifest, scenario)
    acc = MetricAccumulator(DEFAULT_PAIRS)
    acc.open_session(sid, meta, producer_clocks(stream))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonMonotonicTimestampWarning)
        pairs = list(acc.feed(stream))
    diag = acc.diagnostics()
    for w in caught:
        if issubclass(w.category, NonMonotonicTimestampWarning):
            problems.append(Problem(str(lpath), None, None, "warning", str(w.message)))

    # ---- behaviour
    output: dict[str, Any] = {
        **seg_out,
        "session_id": sid,
        "segments_source": segments_source,
        "origin_ns": origin,
        "labels": labels,
        "labels_missing": labels_missing,
        "alignment": alignment,
        "agent_cuts_s": sorted(
            round((session_ns(e, clocks) - origin) / 1e9, 6)
            for e in ledger.events
            if e.event_type == "playback.interrupted"
        ),
    }
    analysis = SessionScore.model_validate(output).analysis(key)

    # ---- task and side effects
    task_dict: dict[str, Any] | None = None
    slices: list[dict[str, Any]] = []
    redaction = (features or {}).get("redaction") or {}
    masked = redaction.get("transcripts") in ("mask", "drop")
    dropped_lines = int((redaction.get("ledger") or {}).get("dropped_lines") or 0)
    if dropped_lines:
        problems.append(
            Problem(
                str(lpath),
                None,
                None,
                "warning",
                f"{dropped_lines} ledger line(s) that were not JSON objects were dropped by the "
                "redaction (they could not be checked for transcripts)",
            )
        )
    if scenario is not None:
        from voxassay.contracts.duplex.business import load_final_state, load_tool_audit
        from voxassay.suites.duplex.scoring.task import score_task
        from voxassay.suites.duplex.scoring.task_slice import task_failure_slice

        state = audit = None
        if (folder / "final-state.json").is_file():
            try:
                state, _ = load_final_state(folder / "final-state.json")
            except InputError as exc:
                problems.append(
                    Problem(str(folder / "final-state.json"), None, None, "error", str(exc))
                )
        if (folder / "tool-audit.json").is_file():
            try:
                audit = load_tool_audit(folder / "tool-audit.json")
            except InputError as exc:
                problems.append(
                    Problem(str(folder / "tool-audit.json"), None, None, "error", str(exc))
                )
        result = score_task(scenario, state, audit, base_events)
        task_dict = result.to_dict()
        for check in result.failures:
            sl = task_failure_slice(check, base_events)
            sl["kind"] = "task"
            sl["time_s"] = _slice_time(sl, check.details, origin)
            if masked:
                masked_transcripts(sl)
            slices.append(sl)
    else:
        notes_out.append("task and side effects not scored: no valid scenario.yaml")

    from voxassay.suites.duplex.scoring.recovery_slices import history_slice, recovery_slice
    from voxassay.suites.duplex.scoring.task_slice import UtteranceLinks

    rel = [(e, (session_ns(e, clocks) - origin) / 1e9) for e in base_events]
    links = UtteranceLinks(rel)
    for d in analysis.decisions:
        if not d.correct:
            slices.append(behaviour_slice(asdict(d), analysis, rel, links=links))
    after_break = _after_break(rel, seg_out, analysis, scenario, starts, labels, task_dict, origin)
    task_slices = {str(s["check"]): s for s in slices if s.get("kind") == "task"}
    for case in after_break["history_consistency"]["cases"]:
        if case.get("passed") is False:
            slices.append(history_slice(case, rel, links=links))
    for case in after_break["recovery_accuracy"]["cases"]:
        if case.get("passed") is False:
            slices.append(recovery_slice(case, rel, task_slices=task_slices, links=links))

    level, reasons = derive_evidence_level(manifest, folder)
    if features is not None:
        red = features.get("redaction") or {}
        reasons.append(
            "raw audio dropped by redaction"
            + (f" on {red.get('at')}" if red.get("at") else "")
            + f": segments and loudness come from {FEATURES_FILE}"
            + (
                f" (derived from the audio when the bundle was at {red.get('source_level')})"
                if red.get("source_level")
                else ""
            )
            + "; the level is that of the evidence the features were derived from, when the "
            + "redaction record is consistent (see the evidence reasons)"
        )
    severities = {p.severity for p in problems}
    output.update(
        {
            "bundle": str(folder),
            "scenario": (
                {
                    "id": scenario.id,
                    "version": scenario.version,
                    "category": str(scenario.category),
                }
                if scenario
                else (
                    {"id": manifest.scenario.id, "version": manifest.scenario.version}
                    if manifest.scenario
                    else None
                )
            ),
            "meta": {
                "route": meta.route,
                "category": meta.category,
                "device": meta.device,
                "language": meta.language,
                "system_version": meta.system_version,
                "scenario": meta.scenario,
            },
            "system": manifest.system.model_dump(mode="json") if manifest.system else None,
            "evidence": {
                "level": level,
                "reasons": reasons,
                "redacted": manifest.privacy.redacted,
                "raw_audio": "dropped" if features is not None else "present",
                "privacy": manifest.privacy.model_dump(mode="json"),
            },
            "pairs": {
                "fields": list(PAIR_FIELDS),
                "rows": [
                    [
                        p.metric,
                        p.key,
                        p.start_ns,
                        p.end_ns,
                        p.censored_after_ms,
                        p.start_event_id,
                        p.end_event_id,
                        p.source,
                        p.route,
                    ]
                    for p in pairs
                ],
            },
            "pair_diagnostics": diag.get("metrics", {}),
            "task": task_dict,
            **after_break,
            "slices": slices,
            "ledger": {
                "events": len(ledger.events),
                "malformed_lines": ledger.malformed,
                "foreign_session_lines": ledger.foreign,
                "unknown_types": dict(ledger.unknown),
                "nonmonotonic": int(diag.get("nonmonotonic", 0)),
                "producers": sorted({e.producer for e in ledger.events}),
                "clock_offsets_ms": {p: c.offset_ns / 1e6 for p, c in sorted(clocks.items())},
                "replaced_acoustic_events": len(ledger_acoustic),
            },
            "markers": _markers(rel),
            "notes": notes_out,
            "problems": [problem_dict(p) for p in problems],
            "integrity": "errors"
            if "error" in severities
            else "warnings"
            if severities
            else "clean",
        }
    )
    headline = _headline(analysis, pairs, task_dict, level, slices)
    for name, block in after_break.items():
        cases = block["cases"]
        headline["rates"][name] = {
            "k": sum(1 for c in cases if c.get("passed") is True),
            "n": sum(1 for c in cases if c.get("passed") is not None),
            "not_assessable": sum(1 for c in cases if c.get("passed") is None),
        }
    return BundleScore(SessionScore.model_validate(output), headline, duration_s)


def _after_break(
    rel: Sequence[tuple[Event, float]],
    seg_out: Mapping[str, Any],
    analysis: Any,
    scenario: Scenario | None,
    starts: Mapping[str, float],
    labels: Sequence[Mapping[str, Any]],
    task: Mapping[str, Any] | None,
    origin: int,
) -> dict[str, Any]:
    """``history_consistency`` and ``recovery_accuracy`` cases of the session (``recovery.py``:
    definitions, denominators, tolerance), as the record keeps them."""
    from voxassay.suites.duplex.scoring.history import (
        HISTORY_DEFINITION,
        HISTORY_TOLERANCE_MS,
        agent_cuts,
        history_consistency,
    )
    from voxassay.suites.duplex.scoring.recovery import (
        RECOVERY_DEFINITION,
        RECOVERY_VERSION,
        decisions_by_segment,
        recovery_accuracy,
    )

    expected = {
        s.id: str(s.expected_history_action)
        for s in (scenario.segments if scenario else [])
        if s.expected_history_action is not None
    }
    history = history_consistency(
        rel,
        seg_out["segments"]["agent"],
        cuts=agent_cuts(analysis),
        expected=expected,
        onsets=starts,
    )
    recovery = recovery_accuracy(
        rel,
        labels,
        decisions_by_segment(analysis),
        task_checks=list(task.get("checks") or []) if task else None,
        origin_ns=origin,
    )
    return {
        "history_consistency": {
            "version": RECOVERY_VERSION,
            "tolerance_ms": HISTORY_TOLERANCE_MS,
            "definition": HISTORY_DEFINITION,
            "cases": history,
        },
        "recovery_accuracy": {
            "version": RECOVERY_VERSION,
            "definition": RECOVERY_DEFINITION,
            "cases": recovery,
        },
    }


def _slice_time(sl: Mapping[str, Any], details: Mapping[str, Any], origin: int) -> float | None:
    trig = sl.get("trigger") or details.get("trigger") or {}
    ns = trig.get("ns") if isinstance(trig, Mapping) else None
    if ns is None:
        calls = details.get("calls") or []
        ns = calls[0].get("requested_ns") if calls and isinstance(calls[0], Mapping) else None
    return None if ns is None else round((int(ns) - origin) / 1e9, 3)


def masked_transcripts(sl: dict[str, Any]) -> None:
    """A redacted bundle's transcripts are masks: a perception gate that judged the text is
    not assessable; the first failing gate is recomputed without it."""
    changed = False
    for g in sl.get("gates") or []:
        if (
            g.get("gate") == "heard"
            and g.get("passed") is False
            and "asr.final " in str(g.get("note"))
        ):
            g["passed"] = None
            g["note"] = "transcript masked by redaction: what was heard cannot be judged"
            changed = True
    if not changed:
        return
    gates = sl["gates"]
    stop = next((i for i, g in enumerate(gates) if g.get("passed") is False), len(gates))
    passing = [g for g in gates[:stop] if g.get("passed") is True]
    failing = next((g for g in gates if g.get("passed") is False), None)
    sl["last_passing_gate"] = passing[-1]["gate"] if passing else None
    if failing is None:
        sl.update(
            first_failing_gate=None,
            layer="unknown",
            root_cause="unknown root cause",
            reason="no gate failed once masked transcripts are set aside",
        )
    else:
        sl.update(
            first_failing_gate=failing["gate"],
            layer=failing["layer"],
            root_cause=failing["layer"],
            reason=failing["note"],
        )


def _markers(rel: Sequence[tuple[Event, float]]) -> list[list[Any]]:
    """``[t_s, event_type, event_id, short label]`` of the ledger events a timeline shows."""
    out: list[list[Any]] = []
    for e, t in sorted(rel, key=lambda x: x[1]):
        if not e.event_type.startswith(MARKER_TYPES) or e.event_type == "tts.chunk":
            continue
        bits = [
            str(e.data.get(k))
            for k in ("action", "status", "segment_id")
            if e.data.get(k) is not None
        ]
        if e.reason:
            bits.append(e.reason)
        out.append([round(t, 4), e.event_type, e.event_id, " ".join(bits)])
        if len(out) >= MAX_MARKERS:
            break
    return out


def _headline(
    analysis: Any,
    pairs: Sequence[Any],
    task: Mapping[str, Any] | None,
    level: str,
    slices: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Per-session headline numbers (the report recomputes everything from the output)."""
    d = analysis.to_dict()
    by_metric: dict[str, list[float | None]] = {}
    for p in pairs:
        by_metric.setdefault(p.metric, []).append(p.value_ms)
    pair_summary = {
        m: {
            "n": len(v),
            "n_censored": sum(1 for x in v if x is None),
            "median_ms": _median([x for x in v if x is not None]),
        }
        for m, v in by_metric.items()
    }
    acc = d["rates"]["behaviour_accuracy"]
    return {
        "evidence_level": level,
        "rates": {k: {"k": v["k"], "n": v["n"]} for k, v in d["rates"].items()},
        "behaviour_accuracy": acc["value"],
        "latency_p50_ms": {k: v.get("summary", {}).get("p50") for k, v in d["latencies"].items()},
        "pairs": pair_summary,
        "task_passed": task.get("passed") if task else None,
        "task_failures": [
            c["name"] for c in (task or {}).get("checks", []) if c["passed"] is False
        ],
        "failures": len(slices),
    }


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# --------------------------------------------------------------------------- recompute


# --------------------------------------------------------------------------- behaviour slices
