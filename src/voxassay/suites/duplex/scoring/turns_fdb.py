"""Full-Duplex-Bench (FDB) metrics under FDB's own names, computed on a call's segments (``compat_metrics``; the docstring states what is computed and what is not), and pooled over calls."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from voxassay.stats.percentiles import MIN_N_P99 as MIN_N_P99  # re-exported
from voxassay.stats.percentiles import SOFT_N_P95 as SOFT_N_P95  # re-exported
from voxassay.suites.duplex.scoring.turn_types import (
    DEFAULT_PARAMS,
    SPEECH,
    AgentBurst,
    CallAnalysis,
)

__all__ = [
    "FDB_BC_TURN_S",
    "FDB_BC_WORDS",
    "FDB_MODEL_MERGE_S",
    "FDB_SOURCES",
    "FDB_TURN_DURATION_S",
    "FDB_TURN_WORDS",
    "FDB_USER_MERGE_S",
    "compat_metrics",
]


FDB_SOURCES = {
    "v1.0": "Full-Duplex-Bench v1_v1.5/evaluation/eval_{pause_handling,smooth_turn_taking,"
    "user_interruption,backchannel}.py (read in the public forks "
    "lamkdhe180931-arch/Full-Duplex-Bench and abePclWaseda/Full-Duplex-Bench of "
    "DanielLin94144/Full-Duplex-Bench)",
    "v1.5": "Full-Duplex-Bench v1_v1.5/evaluation/get_timing.py (read in cshape/Full-Duplex-Bench); "
    "metric names and directions from DanielLin94144/Full-Duplex-Bench v1_v1.5/README.md",
}


FDB_TURN_DURATION_S = 1.0  # FDB v1: output shorter than 1 s ...


FDB_TURN_WORDS = 3  # ... with at most 3 words is not a turn (TOR 0)


FDB_BC_TURN_S = 3.0  # FDB v1 backchannel task: a model segment over 3 s is a takeover


FDB_BC_WORDS = 2  # ... under 1 s with at most 2 words is a backchannel


FDB_USER_MERGE_S = 0.6  # FDB v1.5 get_timing: user VAD segments merged across gaps <= 0.6 s


FDB_MODEL_MERGE_S = 0.5  # ... model segments across gaps <= 0.5 s


def _fdb_tor(span_s: float, words: int | None) -> int:
    """FDB v1 turn rule: output spanning < 1 s with <= 3 words is not a turn. Without word counts
    the span alone decides (every sub-second output is taken to have at most 3 words)."""
    if span_s < FDB_TURN_DURATION_S and (words is None or words <= FDB_TURN_WORDS):
        return 0
    return 1


def _span(bs: Sequence[AgentBurst]) -> tuple[float, int | None]:
    if not bs:
        return 0.0, 0
    words = [b.n_words for b in bs]
    w = sum(x for x in words if x is not None) if all(x is not None for x in words) else None
    return max(b.end_s for b in bs) - min(b.start_s for b in bs), w


def _fdb_merge(iv: Sequence[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(iv):
        if out and s - out[-1][1] <= gap:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _fdb_stop_intervals(
    user: Sequence[tuple[float, float]], model: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """v1.5 stop latency intervals: every user/model overlap ``[later start, earlier end]``;
    of overlaps ending at the same millisecond the shortest is kept."""
    found: list[tuple[float, float]] = []
    i = j = 0
    while i < len(user) and j < len(model):
        s = max(user[i][0], model[j][0])
        e = min(user[i][1], model[j][1])
        if e > s:
            found.append((s, e))
        if user[i][1] < model[j][1]:
            i += 1
        else:
            j += 1
    best: dict[int, tuple[float, float]] = {}
    for s, e in found:
        key = round(e * 1000)
        if key not in best or e - s < best[key][1] - best[key][0]:
            best[key] = (s, e)
    return sorted(best.values(), key=lambda x: x[1])


def _fdb_response_intervals(
    user: Sequence[tuple[float, float]], model: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """v1.5 response latency intervals: each user segment end to the first model start after it;
    of user ends answered by the same model start the latest is kept."""
    best: dict[int, tuple[float, float]] = {}
    for _, ue in user:
        start = next((ms for ms, _ in model if ms > ue), None)
        if start is None:
            continue
        key = round(start * 1000)
        if key not in best or ue > best[key][0]:
            best[key] = (ue, start)
    return sorted(best.values(), key=lambda x: x[1])


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def compat_metrics(analysis: CallAnalysis) -> dict[str, Any]:
    """Full-Duplex-Bench (FDB) metrics under FDB's names, computed on this call's segments.

    These are compatibility metrics: FDB scores one isolated situation per sample with word
    timestamps from ASR; here every situation of a multi-turn call is one item and agent speech
    bursts stand in for the words (``n_words`` on agent segments enables FDB's word rule).

    * v1.0 ``pause_handling.TOR`` (lower is better): per pause inside a user turn, agent speech
      starting in the pause is a turn-over (1) unless it spans < 1 s (with <= 3 words); TOR = mean
      over pauses.
    * v1.0 ``smooth_turn_taking`` (turns that did not start during agent speech) and
      ``user_interruption`` (barge-in turns): ``TOR`` (higher is better) = the agent's speech
      after the turn, from its answer to the next turn, is a turn by the same rule; ``Latency``
      (s, lower is better) = mean over TOR = 1 items of ``max(0, answer onset - turn end)`` (FDB
      clips early starts to 0).
    * v1.0 ``backchannel``: per user turn, agent bursts starting while the user holds the turn:
      TOR = 1 if one spans > 3 s, or 1-3 s, or (with word counts) has > 2 words under 1 s;
      ``Freq`` = agent bursts under 1 s started during user turns / call duration (per s);
      ``JSD`` needs FDB's human backchannel-timing distribution for the same input: not computed.
    * v1.5 ``Stop Latency`` / ``Response Latency`` (s): FDB's get_timing on the call: user speech
      merged across gaps <= 0.6 s and agent speech across <= 0.5 s; stop intervals are the
      user/agent overlaps (later start to earlier end), response intervals run from a user
      segment's end to the next agent start. Values are means over the intervals.
    * v1.5 behaviour categories (respond/resume/uncertain/unknown) need ASR and an LLM judge:
      not computed.
    """
    a = analysis
    bursts = {b.id: b for b in a.bursts}
    ordered = sorted(a.bursts, key=lambda b: b.start_s)
    turns = a.turns
    # pause handling
    ph: list[dict[str, Any]] = []
    for pz in a.pauses:
        early = float(a.params.get("early_start_tol_s", DEFAULT_PARAMS.early_start_tol_s))
        inside = [b for b in ordered if pz.start_s - early <= b.start_s < pz.end_s]
        span, words = _span(inside)
        tor = _fdb_tor(span, words) if inside else 0
        ph.append({"ref": pz.id, "TOR": tor, "span_s": span, "n_words": words})
    # smooth turn-taking / user interruption
    stt: list[dict[str, Any]] = []
    ui: list[dict[str, Any]] = []
    for k, t in enumerate(turns):
        nxt = turns[k + 1].onset_s if k + 1 < len(turns) else math.inf
        item: dict[str, Any] = {"ref": t.id, "TOR": 0, "latency_s": None, "span_s": 0.0}
        if t.response_burst is not None:
            ans = bursts[t.response_burst]
            out = [b for b in ordered if ans.start_s <= b.start_s < nxt]
            span, words = _span(out)
            item.update(TOR=_fdb_tor(span, words), span_s=span, n_words=words)
            if item["TOR"]:
                item["latency_s"] = max(0.0, ans.start_s - t.end_s)
        (ui if t.barge_in else stt).append(item)
    # backchannel
    bc_items: list[dict[str, Any]] = []
    n_bc = 0
    for t in turns:
        during = [b for b in ordered if t.onset_s <= b.start_s < t.end_s]
        tor = 0
        for b in during:
            span = b.end_s - b.start_s
            words_over = b.n_words is not None and b.n_words > FDB_BC_WORDS
            if span > FDB_BC_TURN_S or span >= FDB_TURN_DURATION_S or words_over:
                tor = 1
            else:
                n_bc += 1
        bc_items.append({"ref": t.id, "TOR": tor, "n_agent_bursts": len(during)})
    # v1.5 timing
    user_iv = _fdb_merge(
        [(s["start_s"], s["end_s"]) for s in a.inputs.get("user", []) if s["kind"] == SPEECH],
        FDB_USER_MERGE_S,
    )
    model_iv = _fdb_merge(
        [(s["start_s"], s["end_s"]) for s in a.inputs.get("agent", [])], FDB_MODEL_MERGE_S
    )
    stop_iv = _fdb_stop_intervals(user_iv, model_iv)
    resp_iv = _fdb_response_intervals(user_iv, model_iv)

    def tor_block(items: list[dict[str, Any]], direction: str) -> dict[str, Any]:
        return {
            "value": _mean([x["TOR"] for x in items]),
            "n": len(items),
            "direction": direction,
            "items": items,
        }

    def lat_block(items: list[dict[str, Any]]) -> dict[str, Any]:
        xs = [x["latency_s"] for x in items if x["TOR"] == 1]
        return {"value_s": _mean(xs), "n": len(xs), "direction": "lower is better"}

    return {
        "call_id": a.call_id,
        "note": (
            "Full-Duplex-Bench compatibility metrics computed from two-channel segments; agent "
            "speech bursts stand in for ASR words; not a Full-Duplex-Bench result"
        ),
        "sources": FDB_SOURCES,
        "v1.0": {
            "pause_handling": {"TOR": tor_block(ph, "lower is better")},
            "smooth_turn_taking": {
                "TOR": tor_block(stt, "higher is better"),
                "Latency": lat_block(stt),
            },
            "user_interruption": {
                "TOR": tor_block(ui, "higher is better"),
                "Latency": lat_block(ui),
                "GPT-4o score": {"value": None, "reason": "needs ASR and an LLM judge"},
            },
            "backchannel": {
                "TOR": tor_block(bc_items, "lower is better"),
                "Freq": {
                    "value": n_bc / a.duration_s if a.duration_s > 0 else None,
                    "count": n_bc,
                    "duration_s": a.duration_s,
                    "direction": "higher is better",
                },
                "JSD": {
                    "value": None,
                    "reason": "needs Full-Duplex-Bench's human backchannel distribution for the input",
                },
            },
        },
        "v1.5": {
            "Stop Latency": {
                "value_s": _mean([e - s for s, e in stop_iv]),
                "n": len(stop_iv),
                "intervals": [list(x) for x in stop_iv],
            },
            "Response Latency": {
                "value_s": _mean([e - s for s, e in resp_iv]),
                "n": len(resp_iv),
                "intervals": [list(x) for x in resp_iv],
            },
            "behavior": {"value": None, "reason": "needs ASR and an LLM judge"},
        },
    }


def pool_compat(per_call: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pool per-call compatibility metrics: TOR and latency means over all items of all calls,
    backchannel Freq as total count / total duration, v1.5 means over all intervals."""

    def items(path: tuple[str, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for c in per_call:
            node: Any = c
            for key in path:
                node = node[key]
            out.extend({**x, "ref": f"{c['call_id']}/{x['ref']}"} for x in node["items"])
        return out

    def tor(path: tuple[str, ...], direction: str) -> dict[str, Any]:
        xs = items(path)
        return {"value": _mean([x["TOR"] for x in xs]), "n": len(xs), "direction": direction}

    def lat(path: tuple[str, ...]) -> dict[str, Any]:
        xs = [x["latency_s"] for x in items(path) if x["TOR"] == 1]
        return {"value_s": _mean(xs), "n": len(xs), "direction": "lower is better"}

    def v15(name: str) -> dict[str, Any]:
        xs = [e - s for c in per_call for s, e in c["v1.5"][name]["intervals"]]
        return {"value_s": _mean(xs), "n": len(xs)}

    count = sum(c["v1.0"]["backchannel"]["Freq"]["count"] for c in per_call)
    dur = sum(c["v1.0"]["backchannel"]["Freq"]["duration_s"] for c in per_call)
    return {
        "note": per_call[0]["note"] if per_call else None,
        "sources": FDB_SOURCES,
        "n_calls": len(per_call),
        "v1.0": {
            "pause_handling": {"TOR": tor(("v1.0", "pause_handling", "TOR"), "lower is better")},
            "smooth_turn_taking": {
                "TOR": tor(("v1.0", "smooth_turn_taking", "TOR"), "higher is better"),
                "Latency": lat(("v1.0", "smooth_turn_taking", "TOR")),
            },
            "user_interruption": {
                "TOR": tor(("v1.0", "user_interruption", "TOR"), "higher is better"),
                "Latency": lat(("v1.0", "user_interruption", "TOR")),
            },
            "backchannel": {
                "TOR": tor(("v1.0", "backchannel", "TOR"), "lower is better"),
                "Freq": {
                    "value": count / dur if dur > 0 else None,
                    "count": count,
                    "duration_s": dur,
                },
                "JSD": {"value": None, "reason": "not computed (needs a reference distribution)"},
            },
        },
        "v1.5": {"Stop Latency": v15("Stop Latency"), "Response Latency": v15("Response Latency")},
    }
