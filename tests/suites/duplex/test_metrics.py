"""Latency pairs from a ledger: every pair type on hand-built ledgers, censoring, clocks,
splits, the P99 rule, bounded memory, and streaming == an all-in-memory reference."""

from __future__ import annotations

import datetime as dt
import math
import random
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.manifest import BundleManifest, ClockInfo, SystemInfo
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.stats import percentiles
from voxassay.stats.percentiles import summarize_values
from voxassay.suites.duplex.live.scenarios import SCENARIOS_DIR
from voxassay.suites.duplex.scoring import turns
from voxassay.suites.duplex.scoring.latency import (
    MetricAccumulator,
    NonMonotonicTimestampWarning,
    pairs_from_events,
    summarize,
)
from voxassay.suites.duplex.scoring.latency_pairs import (
    DEFAULT_PAIRS,
    PairDef,
    definitions_table,
    on,
)
from voxassay.suites.duplex.scoring.latency_table import (
    ALL_SPLIT_FIELDS,
    LatencyPair,
    LatencyTable,
    SessionMeta,
)

MS = 1_000_000


class Ledger:
    """Builds one session's events in the order they are added (already causal)."""

    def __init__(self, session_id: str = "s1") -> None:
        self.session_id = session_id
        self.events: list[Event] = []

    def add(self, event_type: str, ms: float, producer: str = "harness", **fields: Any) -> Event:
        event = Event.new(
            event_type,
            session_id=self.session_id,
            producer=producer,
            monotonic_ns=round(ms * MS),
            event_id=f"{self.session_id}-{len(self.events)}",
            **fields,
        )
        self.events.append(event)
        return event

    def user(self, kind: str, ms: float, utt: str, intents: Sequence[str] = ("start",)) -> Event:
        return self.add(f"user.speech_{kind}", ms, utterance_id=utt, data={"intents": [*intents]})

    def acoustic(self, kind: str, ms: float, role: str, **data: Any) -> Event:
        return self.add(f"acoustic.speech_{kind}", ms, "acoustic", data={"role": role, **data})

    def clock(self, producer: str, offset_ms: float) -> Event:
        record = ProducerClock(producer=producer, kind="monotonic", offset_ns=round(offset_ms * MS))
        event = record.to_event(self.session_id, monotonic_ns=0)
        self.events.append(event)
        return event


def run(
    events: Iterable[Event], **kw: Any
) -> tuple[dict[str, list[LatencyPair]], MetricAccumulator]:
    acc = MetricAccumulator(**kw)
    out: dict[str, list[LatencyPair]] = defaultdict(list)
    for p in acc.feed(events):
        out[p.metric].append(p)
    return out, acc


def ms(pairs: Sequence[LatencyPair]) -> list[float | None]:
    return [p.value_ms for p in pairs]


# --------------------------------------------------------------------------- one turn, twice


def two_turns() -> Ledger:
    led = Ledger()
    for k, base in enumerate((0.0, 5000.0)):
        utt = f"u{k}"
        led.user("started", base, utt)
        led.acoustic("started", base + 20, "user")
        led.acoustic("stopped", base + 1000, "user")
        led.user("stopped", base + 1000, utt)
        led.add("vad.speech_stopped", base + 1250 + 100 * k, "agent")
        led.add("response.created", base + 1400, "agent", response_id=f"r{k}", utterance_id=utt)
        led.add("playback.started", base + 1600 + 300 * k, "player", playback_id=f"p{k}")
        led.acoustic("started", base + 1700 + 300 * k, "agent")
        led.acoustic("stopped", base + 3000, "agent")
        led.add("playback.completed", base + 3000, "player", playback_id=f"p{k}")
        led.add("response.done", base + 3000, "agent", response_id=f"r{k}", data={"status": "ok"})
    return led


def test_response_and_end_of_input_pairs_for_several_responses_in_one_session() -> None:
    pairs, acc = run(two_turns().events)
    assert ms(pairs["end_of_input_ms"]) == [250.0, 350.0]
    assert ms(pairs["response_first_playback_ms"]) == [600.0, 900.0]
    assert ms(pairs["response_first_audio_ms"]) == [700.0, 1000.0]
    assert all(p.source == "primary" for p in pairs["response_first_audio_ms"])
    # the acoustic user ends are only a fallback: this session has scenario truth
    assert "superseded" not in acc.diagnostics()["metrics"]["response_first_audio_ms"]
    assert not pairs["interrupt_stop_ms"] and not pairs["reconnect_recovery_ms"]


def test_a_pause_is_withdrawn_and_a_start_without_end_is_censored() -> None:
    led = Ledger()
    led.user("started", 0, "u1")
    led.acoustic("started", 10, "user")
    led.acoustic("stopped", 900, "user")  # mid-sentence pause ...
    led.acoustic("started", 1500, "user")  # ... the user goes on: not an end of input
    led.acoustic("stopped", 2000, "user")
    led.user("stopped", 2000, "u1")
    led.add("vad.speech_stopped", 2400, "agent")
    led.user("started", 6000, "u2")
    led.user("stopped", 7000, "u2")  # no response follows
    led.user("started", 9000, "u3", intents=("backchannel",))
    led.user("stopped", 9400, "u3", intents=("backchannel",))  # not a respondable point
    led.add("task.state", 12000, "agent", task_id="t0")  # the session's last event
    pairs, acc = run(led.events)
    assert ms(pairs["end_of_input_ms"]) == [400.0]
    diag = acc.diagnostics()["metrics"]
    assert diag["end_of_input_ms"]["cancelled"] == 1
    # u2's end: censored at the session end, counted, never zero
    (censored,) = [p for p in pairs["response_first_playback_ms"] if p.censored]
    assert censored.value_ms is None and censored.censored_after_ms == pytest.approx(5000.0)
    # u1's end waited too, until u2's start withdrew it (the user spoke again); u3's
    # backchannel neither starts a wait nor withdraws u2's
    assert diag["response_first_playback_ms"] == {
        "cancelled": 1,
        "censored": 1,
        "pairs": 1,
        "started": 2,
    }
    summary = summarize(pairs["response_first_playback_ms"])
    s = summary["metrics"]["response_first_playback_ms"]["all"]
    assert s["n"] == 1 and s["n_censored"] == 1 and s["p50"] is None
    assert "censored" in s["withheld"]["p50"]
    assert summary["metrics"]["response_first_playback_ms"]["censored_examples"] == [censored.ref]


def test_acoustic_ends_stand_in_without_truth_and_acoustic_metrics_need_acoustic_events() -> None:
    led = Ledger()
    led.acoustic("started", 0, "user")
    led.acoustic("stopped", 1000, "user")
    led.add("playback.started", 1450, "player", playback_id="p1", response_id="r1")
    led.acoustic("started", 1500, "agent")
    pairs, _ = run(led.events)
    (p,) = pairs["response_first_audio_ms"]
    assert (p.value_ms, p.source) == (500.0, "fallback")
    assert ms(pairs["response_first_playback_ms"]) == [450.0]

    no_audio = Ledger()  # software events only: an acoustic end can never come
    no_audio.user("started", 0, "u1")
    no_audio.user("stopped", 1000, "u1")
    no_audio.add("playback.started", 1600, "player", playback_id="p1")
    no_audio.add("playback.completed", 4000, "player", playback_id="p1")
    pairs, acc = run(no_audio.events)
    assert "response_first_audio_ms" not in pairs
    assert acc.diagnostics()["metrics"]["response_first_audio_ms"]["not_measurable"] == 1
    assert ms(pairs["response_first_playback_ms"]) == [600.0]


def test_truth_supersedes_an_acoustic_start_already_open() -> None:
    led = Ledger()
    led.acoustic("started", 0, "user")
    led.acoustic("stopped", 900, "user")  # fallback start opens (no truth seen yet)
    led.user("started", 1000, "u1")  # truth arrives: the session uses truth from now on
    led.user("stopped", 2000, "u1")
    led.add("playback.started", 2500, "player", playback_id="p1")
    pairs, acc = run(led.events)
    (p,) = pairs["response_first_playback_ms"]
    assert (p.value_ms, p.source) == (500.0, "primary")
    assert acc.diagnostics()["metrics"]["response_first_playback_ms"]["superseded"] == 1


# --------------------------------------------------------------------------- interruption


def interruption() -> Ledger:
    led = Ledger()
    led.user("started", 0, "u1")
    led.user("stopped", 1000, "u1")
    led.add("response.created", 1300, "agent", response_id="r1", utterance_id="u1")
    for t in range(1400, 2000, 100):
        led.add("tts.chunk", t, "agent", response_id="r1")
        if t == 1600:
            led.add("playback.started", 1600, "player", playback_id="p1", response_id="r1")
        if t == 1700:
            led.acoustic("started", 1700, "agent")
    onset = led.user("started", 2000, "u2", intents=("interrupt",))  # effective interruption
    onset.data["expected_actions"] = ["interrupt"]  # accepted by two matches: one start
    # the aligned acoustic onset of the same utterance does not start a second pair
    led.acoustic("started", 2030, "user", intents=["interrupt"], segment_id="u2")
    led.events[-1] = led.events[-1].model_copy(update={"utterance_id": "u2"})
    led.add("tts.chunk", 2100, "agent", response_id="r1")
    led.add("tts.chunk", 2150, "agent", response_id="r1")  # transmission stopped
    led.acoustic("stopped", 2200, "agent")  # a 100 ms gap between words: not a stop
    led.acoustic("started", 2300, "agent")
    led.add("response.done", 2300, "agent", response_id="r1", data={"status": "cancelled"})
    led.add("playback.interrupted", 2400, "player", playback_id="p1", played_until_ms=800)
    led.acoustic("stopped", 2450, "agent")  # old playback acoustically silent
    led.user("stopped", 3000, "u2", intents=("interrupt",))  # intent stable
    led.add("response.created", 3200, "agent", response_id="r2", utterance_id="u2")
    led.add("tts.chunk", 3300, "agent", response_id="r2")
    led.add("playback.started", 3900, "player", playback_id="p2", response_id="r2")
    led.acoustic("started", 4000, "agent")
    led.acoustic("stopped", 5000, "agent")
    led.add("playback.completed", 5000, "player", playback_id="p2")
    led.add("response.done", 5000, "agent", response_id="r2", data={"status": "completed"})
    return led


def test_interruption_stop_and_all_three_cancel_propagation_ends() -> None:
    pairs, acc = run(interruption().events)
    assert ms(pairs["interrupt_stop_ms"]) == [450.0]
    assert ms(pairs["interrupt_stop_playback_ms"]) == [400.0]
    assert ms(pairs["cancel_generation_ms"]) == [300.0]  # generation stopped
    assert ms(pairs["cancel_transmission_ms"]) == [150.0]  # transmission stopped
    assert pairs["interrupt_stop_playback_ms"][0].key == "p1"
    assert pairs["cancel_generation_ms"][0].key == "r1"
    assert ms(pairs["new_response_recovery_ms"]) == [900.0]
    assert ms(pairs["response_first_audio_ms"]) == [700.0, 1000.0]
    diag = acc.diagnostics()["metrics"]
    assert diag["interrupt_stop_ms"]["resumed"] == 1
    assert diag["cancel_generation_ms"]["same_utterance"] == 1
    summary = summarize(p for ps in pairs.values() for p in ps)
    assert summary["groups"]["cancel propagation"] == [
        "interrupt_stop_playback_ms",
        "cancel_generation_ms",
        "cancel_transmission_ms",
    ]


def test_interruption_that_the_agent_does_not_honour() -> None:
    led = Ledger()
    led.add("response.created", 0, "agent", response_id="r1")
    led.add("tts.chunk", 50, "agent", response_id="r1")
    led.add("playback.started", 100, "player", playback_id="p1", response_id="r1")
    led.acoustic("started", 150, "agent")
    led.add("response.done", 200, "agent", response_id="r1", data={"status": "completed"})
    led.user("started", 1000, "u1", intents=("interrupt",))
    led.add("playback.completed", 3000, "player", playback_id="p1")  # played to the end
    led.acoustic("stopped", 3000, "agent")
    led.add("task.state", 5000, "agent", task_id="t9")
    pairs, _ = run(led.events)
    (stop,) = pairs["interrupt_stop_playback_ms"]
    assert stop.censored and stop.censored_after_ms == pytest.approx(2000.0)
    assert ms(pairs["interrupt_stop_ms"]) == [2000.0]  # it fell silent only at its end
    assert ms(pairs["cancel_generation_ms"]) == [0.0]  # generation was over before the onset
    assert ms(pairs["cancel_transmission_ms"]) == [0.0]  # no audio arrived after the onset

    late = Ledger("s2")
    late.add("response.created", 0, "agent", response_id="r1")
    late.add("playback.started", 100, "player", playback_id="p1", response_id="r1")
    late.acoustic("started", 150, "agent")
    late.user("started", 1000, "u1", intents=("correction",))
    late.add("response.done", 1500, "agent", response_id="r1", data={"status": "completed"})
    pairs, _ = run(late.events)
    (gen,) = pairs["cancel_generation_ms"]
    assert gen.censored and gen.censored_after_ms == pytest.approx(500.0)


def test_an_interruption_with_nothing_playing_is_not_counted() -> None:
    led = Ledger()
    led.user("started", 0, "u1", intents=("interrupt",))
    led.user("stopped", 800, "u1", intents=("interrupt",))
    pairs, acc = run(led.events)
    for name in ("interrupt_stop_ms", "interrupt_stop_playback_ms", "cancel_generation_ms"):
        assert name not in pairs
        assert acc.diagnostics()["metrics"][name]["unbound"] == 1


# --------------------------------------------------------------------------- tools, reconnects


def test_tool_result_announcement_via_the_response_and_restart_and_cancel() -> None:
    led = Ledger()
    led.add("tool.completed", 1000, "agent", task_id="t1")
    led.add("response.created", 1500, "agent", response_id="r5", task_id="t1")
    led.add("playback.started", 1800, "player", playback_id="p5", response_id="r5")
    led.add("tool.completed", 2000, "agent", task_id="t2")  # step 1 of 2
    led.add("tool.completed", 3000, "agent", task_id="t2")  # the result to announce
    led.add("playback.started", 3500, "player", playback_id="p6", task_id="t2")
    led.add("tool.completed", 4000, "agent", task_id="t3")
    led.add("task.state", 4100, "agent", task_id="t3", data={"status": "cancelled"})
    led.add("tool.completed", 6000, "agent", task_id="t4")  # never announced
    led.add("session.disconnected", 9000, "harness")
    pairs, acc = run(led.events)
    tools = pairs["tool_announcement_ms"]
    assert [(p.key, p.value_ms) for p in tools] == [("t1", 800.0), ("t2", 500.0), ("t4", None)]
    diag = acc.diagnostics()["metrics"]["tool_announcement_ms"]
    assert diag["restarted"] == 1 and diag["cancelled"] == 1


def test_reconnect_recovery_from_the_first_sign_of_loss() -> None:
    led = Ledger()
    led.add("network.drop", 1000, "harness")
    led.add("session.disconnected", 1100, "agent")
    led.add("session.resumed", 3000, "agent")
    led.add("session.disconnected", 8000, "agent")  # never back
    led.add("network.restored", 9000, "harness")
    pairs, acc = run(led.events)
    assert ms(pairs["reconnect_recovery_ms"]) == [2000.0, None]
    assert acc.diagnostics()["metrics"]["reconnect_recovery_ms"]["repeated"] == 1


# --------------------------------------------------------------------------- clocks and order


def skewed() -> Ledger:
    led = Ledger()
    led.clock("player", -5000)  # the player's clock runs 5 s ahead of the session clock
    led.clock("agent", 2000)  # the agent's runs 2 s behind
    led.user("started", 0, "u1")
    led.user("stopped", 1000, "u1")
    led.add("response.created", -700, "agent", response_id="r1")  # 1300 on the session clock
    led.add("playback.started", 6600, "player", playback_id="p1", response_id="r1")  # 1600
    led.user("started", 2000, "u2", intents=("interrupt",))
    led.add("response.done", 300, "agent", response_id="r1", data={"status": "cancelled"})  # 2300
    led.add("playback.interrupted", 7400, "player", playback_id="p1")  # 2400
    return led


def test_skewed_producer_clocks_are_mapped_to_the_session_clock() -> None:
    pairs, acc = run(skewed().events)
    assert ms(pairs["response_first_playback_ms"]) == [600.0]
    assert ms(pairs["interrupt_stop_playback_ms"]) == [400.0]
    assert ms(pairs["cancel_generation_ms"]) == [300.0]
    assert acc.diagnostics()["nonmonotonic"] == 0

    # without the clock records the raw clocks give nonsense, which the test must see
    raw = [e for e in skewed().events if e.event_type != "clock.producer"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonMonotonicTimestampWarning)
        bad, _ = run(raw)
    assert ms(bad["response_first_playback_ms"]) == [5600.0]

    # records given up front apply to the whole session, and file order does not matter
    # once the ledger is put in causal order
    shuffled = list(skewed().events)
    random.Random(4).shuffle(shuffled)
    pairs2 = pairs_from_events(shuffled)
    got = {p.metric: p.value_ms for p in pairs2}
    assert got["response_first_playback_ms"] == 600.0
    assert got["cancel_generation_ms"] == 300.0
    acc2 = MetricAccumulator()
    records = [ProducerClock.from_event(c) for c in skewed().events[:2]]
    clocks = {c.producer: c for c in records}
    acc2.open_session("s1", clocks=clocks)
    got2 = {p.metric: p.value_ms for p in acc2.feed(raw)}
    assert got2["interrupt_stop_playback_ms"] == 400.0


def test_non_monotonic_timestamps_warn_once_and_are_counted() -> None:
    led = Ledger()
    led.acoustic("stopped", 1000, "user")
    led.add("vad.speech_stopped", 900, "agent")  # skewed: earlier than the start
    led.acoustic("started", 1200, "user")
    led.acoustic("stopped", 2000, "user")
    led.add("vad.speech_stopped", 1950, "agent")
    with pytest.warns(NonMonotonicTimestampWarning, match="session s1") as record:
        pairs, acc = run(led.events)
    assert len([w for w in record if w.category is NonMonotonicTimestampWarning]) == 1
    assert acc.diagnostics()["nonmonotonic"] == 2
    assert ms(pairs["end_of_input_ms"]) == [-100.0, -50.0]  # kept as measured, and counted
    assert acc.diagnostics()["metrics"]["end_of_input_ms"]["negative"] == 2


# --------------------------------------------------------------------------- splits, P99


def eoi_session(sid: str, values: Sequence[float], route: str | None = None) -> list[Event]:
    led = Ledger(sid)
    for k, v in enumerate(values):
        base = 10_000.0 * k
        led.add("acoustic.speech_stopped", base, "acoustic", data={"role": "user"}, route=route)
        led.add("vad.speech_stopped", base + v, "agent")
    return led.events


def test_summaries_split_by_route_and_category() -> None:
    meta = {
        "a": SessionMeta(
            route="direct", category="interruption", language="en", scenario="interruption-2s"
        ),
        "b": SessionMeta(route="relay", category="interruption", language="de"),
    }
    events = [
        *eoi_session("a", [100, 200, 300]),
        *eoi_session("b", [400, 500, 600, 700]),
        *eoi_session("c", [1000, 1100], route="relay"),  # no meta: route from its events
    ]
    acc = MetricAccumulator(meta=meta)
    out = summarize(
        acc.feed(events), ("route", "category", ("route", "language")), n_boot=200, accumulator=acc
    )
    assert out["diagnostics"]["sessions"] == 3 and out["diagnostics"]["events"] == 18
    eoi = out["metrics"]["end_of_input_ms"]
    assert eoi["all"]["n"] == 9
    by_route = eoi["by"]["route"]
    assert set(by_route) == {"direct", "relay"}
    assert by_route["direct"]["n"] == 3 and by_route["direct"]["p50"] == pytest.approx(200.0)
    assert by_route["relay"]["n"] == 6
    assert by_route["relay"]["p50"] == pytest.approx(
        float(np.median([400, 500, 600, 700, 1000, 1100]))
    )
    assert eoi["by"]["category"]["unknown"]["n"] == 2
    assert eoi["by"]["route+language"]["relay|de"]["n"] == 4
    assert eoi["by"]["route+language"]["relay|unknown"]["n"] == 2
    assert eoi["all"]["ci_clusters"] == 3 and "sessions" in eoi["all"]["ci_method"]
    by_scenario = summarize(MetricAccumulator(meta=meta).feed(events), ("scenario",), n_boot=50)
    groups = by_scenario["metrics"]["end_of_input_ms"]["by"]["scenario"]
    assert {k: v["n"] for k, v in groups.items()} == {"interruption-2s": 3, "unknown": 6}
    table = LatencyTable().extend(MetricAccumulator(meta=meta).feed(events))
    assert len(table) >= 9 and table.nbytes == len(table) * 8 * (2 + len(ALL_SPLIT_FIELDS))
    with pytest.raises(ValueError, match="unknown split field"):
        summarize([], ("colour",))


def test_p99_withheld_below_100_pairs_and_reported_from_100() -> None:
    rng = np.random.default_rng(7)
    values = [float(x) for x in np.round(rng.gamma(4.0, 80.0, size=100), 3)]
    few, _ = run(eoi_session("s", values[:99]))
    s99 = summarize(few["end_of_input_ms"], ())["metrics"]["end_of_input_ms"]["all"]
    assert s99["n"] == 99 and s99["p99"] is None
    assert "n = 99 < 100" in s99["withheld"]["p99"]
    assert s99["p95"] == pytest.approx(float(np.percentile(values[:99], 95)), abs=1e-6)
    many, _ = run(eoi_session("s", values))
    s100 = summarize(many["end_of_input_ms"], ())["metrics"]["end_of_input_ms"]["all"]
    assert s100["p99"] == pytest.approx(float(np.percentile(values, 99)), abs=1e-6)
    assert "p99" not in s100["withheld"]


def test_cluster_bootstrap_equals_resampling_the_pooled_pairs() -> None:
    rng = np.random.default_rng(11)
    values = rng.gamma(3.0, 100.0, size=60)
    values[[3, 17, 40]] = math.inf  # censored pairs
    clusters = np.array([f"s{int(c)}" for c in rng.integers(0, 9, size=60)])
    got = summarize_values(values, clusters, n_boot=300, seed=5, unit="sessions")
    keys = sorted(set(clusters.tolist()))
    draws = np.random.default_rng(5).integers(0, len(keys), size=(300, len(keys)))
    stats: dict[str, list[float]] = {"p50": [], "p95": []}
    for row in draws:
        pooled = np.sort(np.concatenate([values[clusters == keys[i]] for i in row]))
        for name, q in (("p50", 0.5), ("p95", 0.95)):
            h = (len(pooled) - 1) * q
            a, b = pooled[math.floor(h)], pooled[math.ceil(h)]
            stats[name].append(
                math.inf if math.isinf(a) or math.isinf(b) else a + (b - a) * (h - math.floor(h))
            )
    for name in ("p50", "p95"):
        s = sorted(stats[name])
        lo, hi = s[math.floor(0.025 * 299)], s[math.ceil(0.975 * 299)]
        want = [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi]
        assert got[f"{name}_ci"] == pytest.approx(want)
    # the machinery moved out of turns.py; the old import path is the same object
    assert turns.percentile_summary is percentiles.percentile_summary
    assert turns.LatencyValue is percentiles.LatencyValue


# --------------------------------------------------------------------------- meta, memory


def test_session_meta_from_manifest_and_scenario_intents() -> None:
    scenario = Scenario.model_validate(
        yaml.safe_load((SCENARIOS_DIR / "interruption-2s.yaml").read_text())
    )
    manifest = BundleManifest(
        session_id="s1",
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        clock=ClockInfo(kind="real"),
        route="relay",
        device="pixel-7",
        system=SystemInfo(name="agent", version="1.2"),
    )
    meta = SessionMeta.from_manifest(manifest, scenario)
    assert (meta.route, meta.category, meta.device) == ("relay", "interruption", "pixel-7")
    assert (meta.language, meta.system_version) == ("en", "agent@1.2")
    led = Ledger()
    led.add("playback.started", 100, "player", playback_id="p1", response_id="r1")
    # the ledger names the segment but not its intents: they come from the scenario
    led.add("user.speech_started", 2100, utterance_id="x", data={"segment_id": "cut-in"})
    led.add("playback.stopped", 2350, "player", playback_id="p1")
    pairs, _ = run(led.events, meta={"s1": meta})
    (p,) = pairs["interrupt_stop_playback_ms"]
    assert p.value_ms == 250.0 and p.split_value("category") == "interruption"
    plain, _ = run(led.events)
    assert "interrupt_stop_playback_ms" not in plain


def _tv_scenario() -> Scenario:
    """A user question, then the TV talking (a bystander segment with no intents at all)."""
    return Scenario.model_validate(
        {
            "id": "tv-in-the-gap",
            "version": 1,
            "category": "bystander_ambient",
            "segments": [
                {
                    "id": "u1",
                    "role": "user",
                    "say": "What time is it?",
                    "voice": "piper",
                    "at_ms": 0,
                    "intents": ["start"],
                    "expected_actions": ["listen"],
                },
                {
                    "id": "tv",
                    "role": "bystander",
                    "say": "And now the weather.",
                    "voice": "piper",
                    "at_ms": 1200,
                    "expected_actions": ["ignore"],
                },
            ],
        }
    )


def _tv_meta(with_roles: bool = True) -> SessionMeta:
    manifest = BundleManifest(
        session_id="s1",
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        clock=ClockInfo(kind="real"),
    )
    meta = SessionMeta.from_manifest(manifest, _tv_scenario())
    if with_roles:
        return meta
    # the rule before roles: intents alone decide
    segs = {
        k: {x: y for x, y in v.items() if x != "segment_role"} for k, v in meta.segments.items()
    }
    return SessionMeta(segments=segs)


def test_a_bystander_segment_without_intents_is_not_a_respondable_point() -> None:
    meta = _tv_meta()
    assert meta.segments["tv"] == {
        "intents": [],
        "expected_actions": ["ignore"],
        "segment_role": "bystander",
    }
    assert meta.segments["u1"]["segment_role"] == "user"
    led = Ledger()
    for kind, t, seg in (
        ("started", 0, "u1"),
        ("stopped", 1000, "u1"),
        ("started", 1200, "tv"),  # the TV starts before the agent answers the user ...
        ("stopped", 1500, "tv"),  # ... and stops before it answers
    ):
        led.add(f"user.speech_{kind}", t, utterance_id=seg, data={"segment_id": seg})
    led.add("playback.started", 1600, "player", playback_id="p1", response_id="r1")
    led.acoustic("started", 1650, "agent")
    led.acoustic("stopped", 3000, "agent")
    pairs, acc = run(led.events, meta={"s1": meta})
    # the TV neither withdrew the user's wait nor opened one of its own
    assert ms(pairs["response_first_playback_ms"]) == [600.0]
    assert ms(pairs["response_first_audio_ms"]) == [650.0]
    diag = acc.diagnostics()["metrics"]["response_first_audio_ms"]
    assert diag == {"pairs": 1, "started": 1}
    # judged by intents alone, the TV's end was a respondable point and its onset withdrew
    # the user's wait: the agent looked 100 ms fast to a question the TV asked
    old, old_acc = run(led.events, meta={"s1": _tv_meta(with_roles=False)})
    assert ms(old["response_first_playback_ms"]) == [100.0]
    assert old_acc.diagnostics()["metrics"]["response_first_audio_ms"]["cancelled"] == 1


def test_acoustic_fallback_skips_aligned_non_user_segments() -> None:
    """Without scenario truth, aligned acoustic user-channel events of a bystander segment
    neither start nor withdraw a wait."""
    led = Ledger()
    led.acoustic("started", 0, "user", segment_id="u1")
    led.acoustic("stopped", 1000, "user", segment_id="u1")
    led.acoustic("started", 1200, "user", segment_id="tv")
    led.acoustic("stopped", 1500, "user", segment_id="tv")
    led.add("playback.started", 1600, "player", playback_id="p1", response_id="r1")
    led.acoustic("started", 1700, "agent")
    pairs, _ = run(led.events, meta={"s1": _tv_meta()})
    (p,) = pairs["response_first_audio_ms"]
    assert (p.value_ms, p.source) == (700.0, "fallback")
    old, _ = run(led.events, meta={"s1": _tv_meta(with_roles=False)})
    assert ms(old["response_first_audio_ms"]) == [200.0]


def test_horizon_censors_while_the_session_runs() -> None:
    led = Ledger()
    led.add("session.disconnected", 0, "agent")
    for k in range(1, 31):
        led.add("network.ping", 1000.0 * k, "harness")
    acc = MetricAccumulator(horizon_ms=10_000)
    emitted_at = None
    for k, e in enumerate(led.events):
        got = acc.add(e)
        if got:
            emitted_at = k
            (p,) = got
    assert emitted_at == 11  # the first event more than 10 s after the start
    assert p.censored and p.censored_after_ms == pytest.approx(11_000.0)
    assert acc.open_starts == 0 and acc.finish() == []
    assert acc.diagnostics()["metrics"]["reconnect_recovery_ms"]["horizon"] == 1


def test_session_limit_ends_the_least_recently_active_session() -> None:
    acc = MetricAccumulator(max_sessions=2)
    for sid in ("a", "b"):
        acc.add(Ledger(sid).add("session.disconnected", 0, "agent"))
    got = acc.add(Ledger("c").add("session.disconnected", 0, "agent"))
    assert [(p.session_id, p.censored) for p in got] == [("a", True)]
    assert acc.diagnostics()["sessions_ended_by_limit"] == 1
    assert acc.open_starts == 2


def test_working_set_does_not_grow_with_the_number_of_sessions() -> None:
    template = interruption().events + two_turns().events

    def stream(n: int) -> Iterable[Event]:
        for k in range(n):
            for e in template:
                yield e.model_copy(update={"session_id": f"s{k}"})

    peaks = []
    for n in (5, 60):
        acc = MetricAccumulator(max_sessions=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonMonotonicTimestampWarning)
            pairs = list(acc.feed(stream(n)))
        peaks.append(acc.diagnostics()["peak_open_starts"])
        assert len([p for p in pairs if p.metric == "interrupt_stop_ms"]) == n
    assert peaks[0] == peaks[1] > 0


def test_definitions_cover_the_design_table_and_reject_bad_ones() -> None:
    names = [d.name for d in DEFAULT_PAIRS]
    table = definitions_table()
    for name in names:
        assert f"| {name} |" in table
    groups = {g for d in DEFAULT_PAIRS for g in d.groups}
    assert groups == {
        "end-of-input detection",
        "response first audio",
        "interrupt stop",
        "cancel propagation",
        "new-response recovery",
        "tool result announcement",
        "reconnect recovery",
    }
    with pytest.raises(ValueError, match="bind"):
        PairDef("x", (on("a.b"),), (on("c.d"),), "session", "", bind=True)
    with pytest.raises(ValueError, match="unique"):
        MetricAccumulator([DEFAULT_PAIRS[0], DEFAULT_PAIRS[0]])


# --------------------------------------------------------------------------- streaming == naive


@dataclass
class Rec:
    """One non-clock event with everything the reference needs, computed up front."""

    e: Event
    t: int
    hw: int
    data: dict[str, Any]
    ids: dict[str, str | None]
    active_pb: str | None
    active_resp: str | None
    route: str | None


def context(events: list[Event], meta: SessionMeta) -> list[Rec]:
    clocks: dict[str, ProducerClock] = {}
    created: list[tuple[str, str | None, str | None]] = []  # (rid, task, utt) in order
    done: set[str] = set()
    pb_resp: dict[str, str | None] = {}
    playing: dict[str, str | None] = {}
    hw: int | None = None
    route: str | None = None
    recs = []
    for e in events:
        if e.event_type == "clock.producer":
            c = ProducerClock.from_event(e)
            if c.producer not in clocks or c.uncertainty_ns <= clocks[c.producer].uncertainty_ns:
                clocks[c.producer] = c
            continue
        t = e.monotonic_ns + (clocks[e.producer].offset_ns if e.producer in clocks else 0)
        hw = t if hw is None else max(hw, t)
        if e.route is not None:
            route = str(e.route)
        data = dict(e.data)
        if e.event_type.split(".")[0] in ("user", "acoustic"):
            seg = data.get("segment_id") or e.utterance_id
            enriched = ("intents", "expected_actions", "segment_role")
            if not all(k in data for k in enriched) and seg in meta.segments:
                data = {**meta.segments[seg], **data}
        rid = e.response_id or (pb_resp.get(e.playback_id) if e.playback_id else None)
        info = next((c for c in reversed(created) if c[0] == rid), None)
        ids = {
            "session": "",
            "response_id": rid,
            "playback_id": e.playback_id,
            "task_id": e.task_id if e.task_id is not None else (info[1] if info else None),
            "utterance_id": (
                e.utterance_id if e.utterance_id is not None else (info[2] if info else None)
            ),
        }
        last_pb = list(playing)[-1] if playing else None
        if last_pb is not None:
            active_resp = playing[last_pb]
        else:
            active_resp = next((c[0] for c in reversed(created) if c[0] not in done), None)
        recs.append(Rec(e, t, hw, data, ids, last_pb, active_resp, route))
        et = e.event_type
        if et == "response.created" and e.response_id:
            created.append((e.response_id, e.task_id, e.utterance_id))
            done.discard(e.response_id)
        elif et == "response.done" and e.response_id:
            done.add(e.response_id)
        elif et == "playback.started" and e.playback_id:
            playing[e.playback_id] = e.response_id
            pb_resp[e.playback_id] = e.response_id
        elif et in ("playback.stopped", "playback.interrupted", "playback.completed"):
            playing.pop(e.playback_id or "", None)
    return recs


def reference_pairs(d: PairDef, recs: list[Rec], horizon_ms: float) -> list[tuple[Any, ...]]:
    """All-in-memory: for every accepted start, scan forward for what resolves it."""

    def hit(ms_: tuple[Any, ...], r: Rec) -> bool:
        return any(r.e.event_type in m.event_types and m.data_ok(r.data) for m in ms_)

    n = len(recs)
    fb = d.fallback
    roles = {
        "start": [hit(d.start, r) for r in recs],
        "fstart": [fb is not None and hit(fb.start, r) for r in recs],
        "until": [fb is not None and hit(fb.until, r) for r in recs],
        "cancel": [hit(d.cancel, r) for r in recs],
        "fcancel": [fb is not None and hit(fb.cancel, r) for r in recs],
        "closes": [hit(d.closes, r) for r in recs],
        "end": [hit(d.end, r) for r in recs],
        "resume": [hit(d.resume, r) for r in recs],
        "final": [hit(d.final, r) for r in recs],
        "req": [hit(d.requires, r) for r in recs],
    }
    key_at = [r.ids[d.join] for r in recs]
    first_until = next((j for j in range(n) if roles["until"][j]), n)
    horizon = round(horizon_ms * MS) if d.horizon_ms is None else round(d.horizon_ms * MS)
    settle = round(d.settle_ms * MS)
    # agent speech state as seen by a start at event i (this event's own end/resume included)
    speaking, last_stop = [], []
    sp, ls = False, None
    for j in range(n):
        if roles["end"][j]:
            sp, ls = False, recs[j].t
        if roles["resume"][j]:
            sp = True
        speaking.append(sp)
        last_stop.append(ls)

    def pair(i: int, key: str, fallback: bool, end: int | None, end_id: str | None, at: int | None):
        r = recs[i]
        after = None if end is not None or at is None else max(0, at - r.t) / 1e6
        return (
            d.name,
            r.e.session_id,
            key,
            r.t,
            end,
            after,
            r.route,
            r.e.event_id,
            end_id,
            "fallback" if fallback else "primary",
        )

    def clamp(i: int, key: str, fb_: bool, cand: int | None, cid: str | None):
        t0 = recs[i].t
        return pair(i, key, fb_, t0 if cand is None or cand < t0 else cand, cid, None)

    def resolve(i: int, key: str, fallback: bool, cand: int | None, cid: str | None):
        """(index where resolved, pair or None)."""
        t0 = recs[i].t
        for j in range(i + 1, n):
            r = recs[j]
            if t0 + horizon < r.hw:
                if d.requires and not any(roles["req"][:j]):
                    return j, None
                if d.end_rule == "last" or (d.end_rule == "silence" and cand is not None):
                    return j, clamp(i, key, fallback, cand, cid)
                return j, pair(i, key, fallback, None, None, r.hw)
            if d.end_rule == "silence" and cand is not None and cand + settle <= r.hw:
                return j, clamp(i, key, fallback, cand, cid)
            same = key_at[j] == key
            if roles["until"][j] and fallback:
                return j, None
            if same and (
                (roles["cancel"][j] and not fallback) or (roles["fcancel"][j] and fallback)
            ):
                return j, None
            if same and roles["closes"][j]:
                return j, pair(i, key, fallback, None, None, r.t)
            if roles["end"][j]:
                if d.end_rule == "first" and same:
                    return j, pair(i, key, fallback, r.t, r.e.event_id, None)
                if d.end_rule == "last" and same:
                    cand, cid = r.t, r.e.event_id
                if d.end_rule == "silence" and cand is None:
                    cand, cid = r.t, r.e.event_id
            if roles["resume"][j]:
                cand = cid = None
            if roles["final"][j] and same:
                return j, clamp(i, key, fallback, cand, cid)
        at = recs[-1].hw
        if d.end_rule == "silence" and cand is not None:
            return n, clamp(i, key, fallback, cand, cid)
        if d.requires and not any(roles["req"]):
            return n, None
        if d.end_rule == "last":
            return n, clamp(i, key, fallback, cand, cid)
        return n, pair(i, key, fallback, None, None, at)

    used: set[str] = set()
    open_: dict[str, tuple[int, int]] = {}  # key -> (index in results, resolved at)
    results: list[tuple[Any, ...] | None] = []
    for i in range(n):
        r = recs[i]
        for fallback in (False, True):
            if not roles["fstart" if fallback else "start"][i]:
                continue
            if fallback and first_until <= i:
                continue
            uid = r.ids["utterance_id"]
            if d.once_per_utterance and uid is not None:
                if uid in used:
                    continue
                used.add(uid)
            if d.bind:
                key = r.active_pb if d.join == "playback_id" else r.active_resp
            else:
                key = r.ids[d.join]
            if key is None:
                continue
            ls = last_stop[i]
            if d.end_rule == "silence" and not speaking[i] and (ls is None or r.t - ls >= settle):
                continue
            if key in open_ and open_[key][1] > i:
                if d.on_repeat == "keep":
                    continue
                results[open_[key][0]] = None  # restarted: the earlier start is dropped
            ends_before = [j for j in range(i + 1) if key_at[j] == key]
            if d.end_rule == "first" and d.already:
                seen = [j for j in ends_before if roles["end"][j] or roles["closes"][j]]
                if seen:
                    results.append(pair(i, key, fallback, r.t, recs[seen[-1]].e.event_id, None))
                    open_[key] = (len(results) - 1, i)
                    continue
            cand: int | None = None
            cid: str | None = None
            if d.end_rule == "last":
                chunks = [j for j in ends_before if roles["end"][j]]
                if chunks:
                    cand, cid = recs[chunks[-1]].t, recs[chunks[-1]].e.event_id
                if any(roles["final"][j] for j in ends_before):
                    results.append(clamp(i, key, fallback, cand, cid))
                    open_[key] = (len(results) - 1, i)
                    continue
            if d.end_rule == "silence" and not speaking[i]:
                cand, cid = last_stop[i], None
            at, res = resolve(i, key, fallback, cand, cid)
            results.append(res)
            open_[key] = (len(results) - 1, at)
    return [x for x in results if x is not None]


def make_event(sid: str, n: int, t_ms: float, et: str, producer: str, **fields: Any) -> Event:
    return Event.new(
        et,
        session_id=sid,
        producer=producer,
        monotonic_ns=round(t_ms * MS),
        event_id=f"{sid}-{n}",
        **fields,
    )


def row(p: LatencyPair) -> tuple[Any, ...]:
    return (
        p.metric,
        p.session_id,
        p.key,
        p.start_ns,
        p.end_ns,
        p.censored_after_ms,
        p.route,
        p.start_event_id,
        p.end_event_id,
        p.source,
    )


def random_ledger(seed: int) -> tuple[list[Event], dict[str, SessionMeta]]:
    rnd = random.Random(seed)
    sessions: list[list[Event]] = []
    metas: dict[str, SessionMeta] = {}
    for s in range(rnd.randint(1, 4)):
        sid = f"s{s}"
        if rnd.random() < 0.5:
            metas[sid] = SessionMeta(
                route=rnd.choice(["direct", "relay", None]),
                segments={"u1": {"intents": ["interrupt"]}, "u2": {"intents": ["backchannel"]}},
            )
        evs: list[Event] = []
        t = 0.0
        responses: list[str] = []
        playbacks: list[str] = []

        def add(et: str, producer: str, **fields: Any) -> None:
            evs.append(make_event(sid, len(evs), t, et, producer, **fields))  # noqa: B023

        for _ in range(rnd.randint(0, 70)):
            # a coarse time grid, so that ties with the horizon and the settle window occur
            t += rnd.choice([0, 0, 250, 500, 500, 1000, 1500, 3000])
            if rnd.random() < 0.06:
                t -= rnd.choice([250, 500, 1000])  # a skewed timestamp
            utt = rnd.choice(["u0", "u1", "u2", "u3"])
            intents = rnd.choice([None, ["start"], ["interrupt"], ["correction"], ["backchannel"]])
            data: dict[str, Any] = {} if intents is None else {"intents": intents}
            route = rnd.choice([None, None, None, "direct", "relay"])
            k = rnd.random()
            if k < 0.03:
                prod = rnd.choice(["agent", "player"])
                rec = ProducerClock(
                    producer=prod, kind="monotonic", offset_ns=rnd.randint(-3, 3) * 500 * MS
                )
                evs.append(rec.to_event(sid, monotonic_ns=0))
            elif k < 0.18:
                add(
                    f"user.speech_{rnd.choice(['started', 'stopped'])}",
                    "harness",
                    utterance_id=utt,
                    data=data,
                    route=route,
                )
            elif k < 0.38:
                role = rnd.choice(["user", "agent", "agent"])
                extra: dict[str, Any] = {}
                if role == "user" and rnd.random() < 0.3:
                    extra = {"utterance_id": utt}
                add(
                    f"acoustic.speech_{rnd.choice(['started', 'stopped'])}",
                    "acoustic",
                    data={"role": role, **data},
                    **extra,
                )
            elif k < 0.43:
                add("vad.speech_stopped", "agent")
            elif k < 0.50:
                rid = f"r{len(responses)}"
                responses.append(rid)
                add(
                    "response.created",
                    "agent",
                    response_id=rid,
                    task_id=rnd.choice([None, "t0", "t1"]),
                    utterance_id=rnd.choice([None, utt]),
                )
            elif k < 0.56 and responses:
                add(
                    "response.done",
                    "agent",
                    response_id=rnd.choice(responses),
                    data={"status": rnd.choice(["completed", "cancelled"])},
                )
            elif k < 0.66 and responses:
                add("tts.chunk", "agent", response_id=rnd.choice(responses))
            elif k < 0.73:
                pid = f"p{len(playbacks)}"
                playbacks.append(pid)
                add(
                    "playback.started",
                    "player",
                    playback_id=pid,
                    response_id=rnd.choice([None, *responses]),
                    task_id=rnd.choice([None, None, "t2"]),
                )
            elif k < 0.80 and playbacks:
                et = rnd.choice(["playback.stopped", "playback.interrupted", "playback.completed"])
                add(et, "player", playback_id=rnd.choice(playbacks))
            elif k < 0.86:
                add("tool.completed", "agent", task_id=rnd.choice(["t0", "t1", "t2"]))
            elif k < 0.89:
                add(
                    "task.state",
                    "agent",
                    task_id=rnd.choice(["t0", "t1", "t2"]),
                    data={"status": rnd.choice(["cancelled", "running"])},
                )
            else:
                et = rnd.choice(
                    ["session.disconnected", "network.drop", "session.resumed", "session.connected"]
                )
                add(et, "harness", route=route)
        sessions.append(evs)
    # interleave the sessions, each keeping its own order
    stream: list[Event] = []
    queues = [list(reversed(s)) for s in sessions]
    while any(queues):
        q = rnd.choice([q for q in queues if q])
        stream.append(q.pop())
    return stream, metas


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_streaming_equals_the_all_in_memory_reference(seed: int) -> None:
    stream, metas = random_ledger(seed)
    horizon_ms = 6000.0
    acc = MetricAccumulator(
        meta=metas, horizon_ms=horizon_ms, max_sessions=8, memory_per_session=10_000
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonMonotonicTimestampWarning)
        got = sorted(
            (row(p) for p in acc.feed(stream)),
            key=repr,
        )
    want: list[tuple[Any, ...]] = []
    by_session: dict[str, list[Event]] = defaultdict(list)
    for e in stream:
        by_session[e.session_id].append(e)
    for sid, evs in by_session.items():
        recs = context(evs, metas.get(sid, SessionMeta()))
        if not recs:
            continue
        for d in DEFAULT_PAIRS:
            want += reference_pairs(d, recs, horizon_ms)
    assert got == sorted(want, key=repr)
    assert acc.open_starts == 0


def test_the_random_ledgers_exercise_every_metric() -> None:
    seen: set[str] = set()
    censored: set[str] = set()
    for seed in range(60):
        stream, metas = random_ledger(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonMonotonicTimestampWarning)
            for p in MetricAccumulator(meta=metas, horizon_ms=6000).feed(stream):
                (censored if p.censored else seen).add(p.metric)
    names = {d.name for d in DEFAULT_PAIRS}
    assert seen == names
    assert censored >= names - {"cancel_transmission_ms", "interrupt_stop_ms"}


def test_pairs_serialise_with_their_split_values(tmp_path: Path) -> None:
    pairs, _ = run(two_turns().events, meta={"s1": SessionMeta(route="direct", device="d1")})
    row = pairs["end_of_input_ms"][0].to_dict()
    assert row["route"] == "direct" and row["device"] == "d1" and row["value_ms"] == 250.0
    lv = pairs["end_of_input_ms"][0].to_latency_value()
    assert lv.value_ms == 250.0 and not lv.censored and lv.ref == "s1/s1-2"
