"""The turn layer's metrics, each defined in the catalogue: per call the rates (k of n opportunities, with the opportunities listed) and the acoustic latencies (censored where the end never came), and both pooled over calls with Wilson and bootstrap intervals (``aggregate``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from voxassay.contracts.duplex import catalogue
from voxassay.stats.intervals import wilson_interval
from voxassay.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxassay.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxassay.stats.percentiles import LatencyValue, percentile_summary
from voxassay.suites.duplex.scoring.turn_types import (
    ALL_ACTIONS,
    BACKGROUND,
    BARGE_IN,
    NOISE,
    TURNS_VERSION,
    CallAnalysis,
    Decision,
    Latency,
    Pause,
    Rate,
    Takeover,
    Turn,
    TurnEvent,
)
from voxassay.suites.duplex.scoring.turns_fdb import compat_metrics, pool_compat

__all__ = ["DEFINITIONS", "TURN_METRICS", "aggregate", "confusion_matrix"]


TURN_METRICS: tuple[str, ...] = (
    "floor_transfer_offset_ms",
    "barge_in_stop_ms",
    "premature_takeover_rate",
    "talk_over_rate",
    "false_yield_rate",
    "missed_interruption_rate",
    "correct_yield_rate",
    "bystander_false_response_rate",
    "ambient_false_activation_rate",
    "false_silence_rate",
    "behaviour_accuracy",
)
"""What the turn layer measures (two acoustic latencies, then the rates, in the order the
aggregate lists them); each is defined in the metric catalogue (``contracts/duplex/catalogue.py``)."""


DEFINITIONS: dict[str, str] = {name: catalogue.definition(name) for name in TURN_METRICS}
"""Metric name -> its catalogue definition (the text every report and view shows)."""


def confusion_matrix(decisions: Iterable[Decision]) -> dict[str, Any]:
    """Expected (rows) x observed (columns) counts over ``ALL_ACTIONS`` with per-class
    precision (diagonal / column sum) and recall (diagonal / row sum); None where undefined."""
    m = {e: dict.fromkeys(ALL_ACTIONS, 0) for e in ALL_ACTIONS}
    for d in decisions:
        m[d.expected][d.observed] += 1
    per_class: dict[str, Any] = {}
    for c in ALL_ACTIONS:
        row = sum(m[c].values())
        col = sum(m[e][c] for e in ALL_ACTIONS)
        per_class[c] = {
            "support": row,
            "predicted": col,
            "precision": m[c][c] / col if col else None,
            "recall": m[c][c] / row if row else None,
        }
    return {"labels": list(ALL_ACTIONS), "matrix": m, "per_class": per_class}


def _rate(name: str, hits: Sequence[str], pool: Sequence[str]) -> Rate:
    return Rate(
        name,
        len(hits),
        len(pool),
        len(hits) / len(pool) if pool else None,
        list(hits),
        list(pool),
        DEFINITIONS[name],
    )


def _rates(
    events: Sequence[TurnEvent],
    pauses: Sequence[Pause],
    takeovers: Sequence[Takeover],
    turns: Sequence[Turn],
    decisions: Sequence[Decision],
) -> dict[str, Rate]:
    overlaps = [e for e in events if e.agent_speaking_at_onset and not e.terminal]
    keep = [e for e in overlaps if not e.should_yield]
    yield_ = [e for e in overlaps if e.should_yield]
    bg = [e for e in events if e.kind == BACKGROUND and not e.terminal]
    nz = [e for e in events if e.kind == NOISE and not e.terminal]

    def reacted(e: TurnEvent) -> bool:
        return e.agent_stopped if e.agent_speaking_at_onset else bool(e.agent_responded)

    talk_turns = sorted({x.turn for x in takeovers if x.context == "speech"})
    return {
        "premature_takeover_rate": _rate(
            "premature_takeover_rate",
            [x.id for x in pauses if x.takeover],
            [x.id for x in pauses],
        ),
        "talk_over_rate": _rate("talk_over_rate", talk_turns, [t.id for t in turns]),
        "false_yield_rate": _rate(
            "false_yield_rate", [e.id for e in keep if e.agent_stopped], [e.id for e in keep]
        ),
        "missed_interruption_rate": _rate(
            "missed_interruption_rate",
            [e.id for e in yield_ if not e.agent_stopped],
            [e.id for e in yield_],
        ),
        "correct_yield_rate": _rate(
            "correct_yield_rate", [e.id for e in yield_ if e.agent_stopped], [e.id for e in yield_]
        ),
        "bystander_false_response_rate": _rate(
            "bystander_false_response_rate", [e.id for e in bg if reacted(e)], [e.id for e in bg]
        ),
        "ambient_false_activation_rate": _rate(
            "ambient_false_activation_rate", [e.id for e in nz if reacted(e)], [e.id for e in nz]
        ),
        "false_silence_rate": _rate(
            "false_silence_rate",
            [t.id for t in turns if t.censored and t.cut_by_file is None],
            [t.id for t in turns if t.cut_by_file is None],
        ),
        "behaviour_accuracy": _rate(
            "behaviour_accuracy", [d.id for d in decisions if d.correct], [d.id for d in decisions]
        ),
    }


def _latencies(turns: Sequence[Turn], events: Sequence[TurnEvent]) -> dict[str, Latency]:
    resp = [
        LatencyValue(t.id, t.response_latency_ms, t.censored, t.censored_after_ms)
        for t in turns
        if t.cut_by_file is None
    ]
    stops = [
        LatencyValue(
            e.id,
            e.stop_ms,
            not e.agent_stopped,
            None if e.agent_stopped else e.agent_end_after_onset_ms,
        )
        for e in events
        if e.kind == BARGE_IN and not e.terminal
    ]
    return {
        "floor_transfer_offset_ms": Latency(
            "floor_transfer_offset_ms",
            resp,
            percentile_summary(resp),
            DEFINITIONS["floor_transfer_offset_ms"],
        ),
        "barge_in_stop_ms": Latency(
            "barge_in_stop_ms", stops, percentile_summary(stops), DEFINITIONS["barge_in_stop_ms"]
        ),
    }


def summary_labels(a: CallAnalysis) -> dict[str, Any]:
    """The per-call labels in the duplex truth kit's vocabulary (``truth.json`` ``labels``);
    each label is its rate's ``k > 0``, so a label never disagrees with the call's rates
    (``premature_takeover``: a takeover in a pause; ``talk_over``: one while the user spoke)."""
    overlaps = [e for e in a.events if e.agent_speaking_at_onset and not e.terminal]
    return {
        "premature_takeover": a.rates["premature_takeover_rate"].k > 0,
        "talk_over": a.rates["talk_over_rate"].k > 0,
        "false_yield": any(e.outcome == "false_yield" for e in a.events),
        "should_yield": {e.id: e.should_yield for e in a.events if not e.terminal},
        "agent_stopped": {e.id: e.agent_stopped for e in a.events if not e.terminal},
        "barge_in_stop_ms": {
            e.id: e.stop_ms for e in a.events if e.kind == BARGE_IN and e.agent_stopped
        },
        "response_latency_ms": {t.id: t.response_latency_ms for t in a.turns},
        "agent_behaviour_correct": not any(t.premature_takeover for t in a.turns)
        and all(e.outcome in ("correct_yield", "correct_continue") for e in overlaps)
        and not any(e.outcome == "false_response" for e in a.events),
    }


def aggregate(analyses: Sequence[CallAnalysis]) -> dict[str, Any]:
    """Pool calls: rates as sum(k) / sum(n) with 95 % Wilson intervals, latencies as percentiles
    over all pairs (censored ranked last) with call-clustered bootstrap intervals, the summed
    confusion matrix, and the pooled Full-Duplex-Bench compatibility metrics.

    TurnEvent references are ``"<call_id>/<id>"``.
    """
    out: dict[str, Any] = {
        "version": TURNS_VERSION,
        "n_calls": len(analyses),
        "calls": [a.call_id for a in analyses],
        "expected_action_source": {a.call_id: a.expected_action_source for a in analyses},
    }
    rates: dict[str, Any] = {}
    for name, definition in DEFINITIONS.items():
        if name in ("floor_transfer_offset_ms", "barge_in_stop_ms"):
            continue
        k = sum(a.rates[name].k for a in analyses)
        n = sum(a.rates[name].n for a in analyses)
        lo, hi = wilson_interval(k, n)
        rates[name] = {
            "value": k / n if n else None,
            "k": k,
            "n": n,
            "ci_low": lo if n else None,
            "ci_high": hi if n else None,
            "ci_method": "wilson 95%",
            "events": [f"{a.call_id}/{x}" for a in analyses for x in a.rates[name].events],
            "denominator": [
                f"{a.call_id}/{x}" for a in analyses for x in a.rates[name].denominator
            ],
            "definition": definition,
        }
    out["rates"] = rates
    lat: dict[str, Any] = {}
    for name in ("floor_transfer_offset_ms", "barge_in_stop_ms"):
        vals: list[LatencyValue] = []
        clusters: list[str] = []
        for a in analyses:
            for v in a.latencies[name].values:
                vals.append(
                    LatencyValue(
                        f"{a.call_id}/{v.ref}", v.value_ms, v.censored, v.censored_after_ms
                    )
                )
                clusters.append(a.call_id)
        summary = percentile_summary(vals, clusters)
        lat[name] = {
            **summary,
            "values": [asdict(v) for v in vals],
            "definition": DEFINITIONS[name],
        }
    out["latencies"] = lat
    pooled = [d for a in analyses for d in a.decisions]
    out["confusion"] = confusion_matrix(pooled)
    out["compat"] = pool_compat([compat_metrics(a) for a in analyses])
    return out
