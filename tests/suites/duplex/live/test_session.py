"""The virtual-clock driver: schedule, truth edges, playback, tools, faults, compute charging,
and bundles that the scoring core reads. Real speech from ../shared/data."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.helpers.duplex import arctic_clip, cut_in_scenario
from voxassay.contracts.duplex.agent_api import AgentBase, AgentEvent, ToolCall
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.suites.duplex.live.session import (
    SessionConfig,
    clip_speech_edges,
    run_session,
    run_virtual_session,
)
from voxassay.systems.duplex.simple_agents import EchoAgent, EnergyAgent

SR = 16_000
ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
pytestmark = pytest.mark.skipif(
    not ARCTIC.is_dir(), reason=f"needs ../shared/data read speech ({ARCTIC})"
)


def clip(name: str) -> np.ndarray:
    return arctic_clip(name)


def scenario(**over: Any) -> Scenario:
    return cut_in_scenario("drv", 500, **over)


@pytest.fixture(scope="module")
def clips() -> dict[str, np.ndarray]:
    return {"ask": clip("aew_arctic_a0001.wav"), "cut": clip("aew_arctic_a0002.wav")}


def events_of(res: Any, etype: str) -> list[Any]:
    return [e for e in res.events if e.event_type == etype]


def ms(e: Any) -> float:
    return e.monotonic_ns / 1e6


def test_truth_edges_come_from_construction(clips: dict[str, np.ndarray]) -> None:
    x = np.zeros(SR, np.float32)
    x[4000:8000] = 0.1 * np.sin(np.arange(4000) * 0.3)
    assert clip_speech_edges(x, SR) == (pytest.approx(4000, abs=40), pytest.approx(8000, abs=40))
    a, b = clip_speech_edges(clips["ask"], SR) or (0, 0)
    assert 0 < a < b < clips["ask"].size
    assert clip_speech_edges(np.zeros(SR, np.float32), SR) is None


def test_schedule_triggers_and_truth(clips: dict[str, np.ndarray]) -> None:
    res = run_virtual_session(scenario(), clips, EnergyAgent(), SessionConfig(compute="zero"), "s1")
    starts = {e.data["segment_id"]: e for e in events_of(res, "user.speech_started")}
    a0, _ = clip_speech_edges(clips["ask"], SR) or (0, 0)
    c0, _ = clip_speech_edges(clips["cut"], SR) or (0, 0)
    assert ms(starts["ask"]) == pytest.approx(500 + a0 * 1000 / SR, abs=0.1)
    (first_play,) = [e for e in events_of(res, "playback.started") if e.response_id == "r1"]
    cut_start = ms(first_play) + 1000  # the trigger, to the sample
    assert ms(starts["cut"]) == pytest.approx(cut_start + c0 * 1000 / SR, abs=0.1)
    # input.wav holds the clip exactly there
    i0 = round(cut_start * SR / 1000)
    assert np.allclose(res.input[i0 : i0 + 1000], clips["cut"][:1000], atol=1e-6)
    # the agent yielded: the cut is logged with what was heard, and the track is silent after
    (cut,) = events_of(res, "playback.interrupted")
    heard = cut.played_until_ms
    assert heard == pytest.approx(ms(cut) - ms(first_play), abs=0.1)
    k = round(ms(cut) * SR / 1000)
    assert np.abs(res.output[k - 800 : k]).max() > 0.01 and not res.output[k : k + 800].any()
    assert res.input.size == res.output.size
    assert not res.skipped


def test_zero_compute_is_deterministic_and_charged_compute_delays(
    clips: dict[str, np.ndarray],
) -> None:
    def times(res: Any) -> list[tuple[str, int]]:
        return [(e.event_type, e.monotonic_ns) for e in res.events]

    a = run_virtual_session(scenario(), clips, EnergyAgent(), SessionConfig(compute="zero"), "a")
    b = run_virtual_session(scenario(), clips, EnergyAgent(), SessionConfig(compute="zero"), "b")
    assert times(a) == times(b)

    class Slow(EnergyAgent):
        def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[Any]:
            out = super().push_audio(pcm, now_ns)
            if any(isinstance(o, AgentEvent) and o.event_type == "response.created" for o in out):
                time.sleep(0.08)  # 80 ms of "thinking" when it decides to answer
            return out

    fast = events_of(a, "response.created")[0]
    slow_run = run_virtual_session(scenario(), clips, Slow(), SessionConfig(), "c")
    slow = events_of(slow_run, "response.created")[0]
    assert ms(slow) - ms(fast) >= 80
    # the agent fell behind: later frames were handed over late, not dropped
    assert slow_run.stats["agent_compute_s"] >= 0.08


def test_tool_world_latency_results_and_idempotency(clips: dict[str, np.ndarray]) -> None:
    class Booker(AgentBase):
        def __init__(self) -> None:
            self.sent = 0
            self.results: list[Any] = []

        def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[Any]:
            if self.sent < 3 and now_ns >= 1_000_000_000 * (self.sent + 1):
                self.sent += 1
                key = "k1" if self.sent < 3 else "k2"  # the second call is a retry
                return [ToolCall(f"c{self.sent}", "book", {"date": "2026-08-10"}, key, "t1", 1)]
            return []

        def on_tool_result(self, call_id: str, result: Any, error: str | None, now_ns: int):
            self.results.append((call_id, result, error, now_ns))
            return []

    sc = scenario(
        tools=[
            {
                "name": "book",
                "latency_ms": 400,
                "side_effect": True,
                "results": [{"result": {"status": "booked"}}],
            }
        ]
    )
    agent = Booker()
    res = run_virtual_session(sc, clips, agent, SessionConfig(compute="zero"), "t")
    req = {e.data["call_id"]: e for e in events_of(res, "tool.requested")}
    done = {e.data["call_id"]: e for e in events_of(res, "tool.completed")}
    assert set(req) == set(done) == {"c1", "c2", "c3"}
    for cid in req:
        assert ms(done[cid]) - ms(req[cid]) == pytest.approx(400, abs=0.01)
    calls = {c["call_id"]: c for c in res.tool_audit["calls"]}
    assert calls["c1"]["committed"] and not calls["c2"]["committed"]  # same key: replayed
    assert calls["c3"]["committed"]  # a new key commits again (a duplicate side effect)
    assert [r[0] for r in agent.results] == ["c1", "c2", "c3"]
    from voxassay.contracts.duplex.business import ToolAudit

    ToolAudit.model_validate(res.tool_audit)


def test_disconnect_fault_and_unfired_trigger(clips: dict[str, np.ndarray]) -> None:
    class Listener(AgentBase):
        def __init__(self) -> None:
            self.links: list[tuple[bool, int]] = []
            self.frames: list[int] = []

        def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[Any]:
            self.frames.append(now_ns)
            return []

        def on_connection(self, connected: bool, now_ns: int) -> list[Any]:
            self.links.append((connected, now_ns))
            return []

    sc = scenario(faults=[{"kind": "disconnect", "at_ms": 1000, "duration_ms": 700}])
    agent = Listener()
    res = run_virtual_session(
        sc, clips, agent, SessionConfig(compute="zero", trigger_timeout_ms=3000), "f"
    )
    (down,) = [e for e in events_of(res, "session.disconnected") if e.reason == "fault"]
    (up,) = events_of(res, "session.resumed")
    assert (ms(down), ms(up)) == (1000, 1700)
    assert [c for c, _ in agent.links] == [False, True]
    assert not [t for t in agent.frames if 1_000_000_000 <= t < 1_700_000_000]
    assert {e.event_type for e in res.events} >= {"fault.started", "fault.ended"}
    # nobody ever played audio: the interruption never came, and the manifest will say so
    assert [s["segment"] for s in res.skipped] == ["cut"]
    assert "never came" in res.skipped[0]["reason"]


def test_echo_agent_adds_no_harness_latency(clips: dict[str, np.ndarray]) -> None:
    sc = scenario(segments=[scenario().segments[0].model_dump(exclude_none=True)])
    res = run_virtual_session(sc, clips, EchoAgent(), SessionConfig(compute="zero"), "e")
    n = min(res.input.size, res.output.size)
    k = int(np.argmax(np.abs(res.input[:n]) > 0.01))
    assert np.allclose(res.output[k : k + 4000], res.input[k : k + 4000], atol=1 / 32768)


def test_bundle_from_a_session_scores_at_l2(clips: dict[str, np.ndarray], tmp_path: Path) -> None:
    from voxassay.contracts.duplex.manifest import ClockInfo, Provenance, SystemInfo
    from voxassay.suites.duplex.live.bundle_writer import write_bundle
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    # zero compute: the agent's figures are its own decisions, not this machine's speed
    res = run_virtual_session(scenario(), clips, EnergyAgent(), SessionConfig(compute="zero"), "b1")
    folder = write_bundle(
        res,
        tmp_path / "b1",
        system=SystemInfo(name="energy-agent", version="1"),
        provenance=Provenance(
            transport="in_process",
            clock="virtual",
            playback="modelled",
            capture="none",
            traffic="synthetic",
            acoustic_events="output_stream",
        ),
        clock=ClockInfo(kind="virtual", compute="zero", audio_origin_ns=0),
    )
    scored = score_bundle_folder(folder, detector="energy")
    assert scored.output.to_output()["evidence"]["level"] == "L2"
    errors = [p for p in scored.output.to_output()["problems"] if p["severity"] == "error"]
    assert not errors, errors
    pairs = scored.metrics["pairs"]
    # the agent answers ~500 ms (its endpoint) after the user's end, measured acoustically
    assert 400 <= pairs["response_first_audio_ms"]["median_ms"] <= 700
    assert scored.output.to_output()["scenario"]["id"] == "drv"


def test_real_clock_paces_frames_and_echo_round_trip(clips: dict[str, np.ndarray]) -> None:
    sc = scenario(segments=[{"id": "ask", "role": "user", "audio": "a.wav", "at_ms": 100}])
    short = {"ask": clips["ask"][: SR // 2]}
    t0 = time.monotonic()
    res = run_session(sc, short, EchoAgent(), SessionConfig(clock="real", tail_ms=200), "rt")
    wall = time.monotonic() - t0
    # real time, not faster (a lower bound: a loaded machine can only make it longer)
    assert wall >= res.stats["duration_s"] * 0.95
    # the pacing error is measured and recorded; its size is the machine's
    # (benchmarks/bench_live_pacing.py prints it)
    pace = res.stats["pacing_error_ms"]
    assert pace["n"] > 20 and pace["median"] >= 0 and pace["max"] >= pace["median"]
    clock = [e for e in res.events if e.event_type == "clock.producer"]
    assert {e.data["kind"] for e in clock} == {"monotonic"}


def test_a_crashing_agent_is_evidence_and_the_session_ends(clips: dict[str, np.ndarray]) -> None:
    class Crashes(EnergyAgent):
        def on_playback(self, report: Any, now_ns: int) -> list[Any]:
            raise RuntimeError("boom in playback handler")

    res = run_virtual_session(
        scenario(), clips, Crashes(), SessionConfig(compute="zero", trigger_timeout_ms=2000), "x"
    )
    (err,) = [e for e in res.events if e.event_type == "session.error"]
    assert "boom in playback handler" in err.data["error"] and err.reason == "agent raised"
    assert res.end.info["crashed"].startswith("RuntimeError")
    # nothing reaches a dead agent: no response after the crash
    assert not [
        e for e in res.events if e.producer == "agent" and e.monotonic_ns > err.monotonic_ns
    ]


def test_echo_db_puts_the_agents_playback_into_its_microphone(
    clips: dict[str, np.ndarray],
) -> None:
    """With ``echo_db`` the frames the agent receives carry what was played the frame before,
    at that level; without it they carry only the scenario's audio."""
    sc = scenario(segments=[scenario().segments[0].model_dump(exclude_none=True)])
    cfg = SessionConfig(compute="zero")
    dry = run_virtual_session(sc, clips, EnergyAgent(yields=False), cfg, "dry")
    wet = run_virtual_session(
        sc.model_copy(update={"echo_db": -20.0}), clips, EnergyAgent(yields=False), cfg, "wet"
    )
    n = min(dry.input.size, wet.input.size, wet.output.size)
    echo = wet.input[:n] - dry.input[:n]
    frame = SR * cfg.frame_ms // 1000
    played = np.zeros(n, np.float32)
    played[frame:] = wet.output[: n - frame]
    assert np.abs(wet.output).max() > 0.05  # the agent answered
    assert np.allclose(echo, played * 10 ** (-20 / 20), atol=2e-4)
    assert np.abs(echo).max() > 0.004
