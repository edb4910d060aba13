"""The harness self-check: loopback echo latency (0 on the virtual clock, a known delay found,
the socket path runs), pooled frame pacing, and its place in run.json and the report.

No timing targets here: real-clock figures are only checked for being measured and causal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml

from voxassay.contracts.duplex.agent_api import (
    AgentBase,
    AgentEvent,
    AgentOutput,
    AudioOut,
    SessionInfo,
)
from voxassay.suites.duplex.live import selfcheck
from voxassay.suites.duplex.live.selfcheck import (
    BURSTS,
    add_target_status,
    burst_signal,
    measure_harness_latency,
    measure_lags,
    pacing_summary,
)

pytestmark = pytest.mark.live

SR = 16_000


class DelayedEcho(AgentBase):
    """Echoes its input through a delay line of ``delay_ms`` (any number of samples)."""

    def __init__(self, delay_ms: float = 40.0) -> None:
        self.delay_ms = delay_ms
        self.line = np.zeros(0, np.int16)
        self.n = 0
        self.active: str | None = None

    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        self.line = np.zeros(round(self.delay_ms * session.sample_rate / 1000), np.int16)
        return super().start(session, now_ns)

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        buf = np.concatenate([self.line, np.asarray(pcm, np.int16)])
        out_pcm, self.line = buf[: pcm.size], buf[pcm.size :]
        if out_pcm.any():
            out: list[AgentOutput] = []
            if self.active is None:
                self.n += 1
                self.active = f"late{self.n}"
                out.append(AgentEvent("response.created", response_id=self.active))
            out.append(AudioOut(self.active, out_pcm))
            return out
        if self.active is not None:
            rid, self.active = self.active, None
            return [AgentEvent("response.done", {"status": "completed"}, response_id=rid)]
        return []


# --------------------------------------------------------------------------- measurement


def test_the_probe_is_deterministic_speech_shaped_bursts_in_silence() -> None:
    x, starts = burst_signal(SR)
    y, starts2 = burst_signal(SR)
    assert np.array_equal(x, y) and starts == starts2 and len(starts) == BURSTS
    assert 2.5 <= x.size / SR <= 3.5  # a short session
    burst = round(selfcheck.BURST_MS * SR / 1000)
    for s in starts:
        rms = float(np.sqrt(np.mean(x[s : s + burst] ** 2)))
        assert 20 * np.log10(rms) == pytest.approx(-20.0, abs=0.5)
        assert not x[s - 160 : s].any()  # digital silence between bursts
    # most of its energy is in the speech band, little above 4 kHz
    spec = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(x.size, 1 / SR)
    assert spec[freqs > 4000].sum() / spec.sum() < 0.1
    # not all bursts start on a 20 ms frame boundary
    assert {s % 320 for s in starts} != {0}


def test_lags_are_found_to_the_sample_both_ways() -> None:
    x, starts = burst_signal(SR)
    burst = round(selfcheck.BURST_MS * SR / 1000)
    for shift in (0, 1, 123, 640, -37):
        y = np.roll(x, shift)
        rows = measure_lags(x, y, starts, burst, SR)
        assert [r["xcorr_lag_samples"] for r in rows] == [shift] * BURSTS
        assert [r["onset_lag_samples"] for r in rows] == [shift] * BURSTS
        assert all(r["correlation"] > 0.999 for r in rows)
    # a player that underruns mid-burst: the onset keeps the first chunk's lag, the
    # cross-correlation follows the bulk of the burst, which was pushed back
    y = np.zeros_like(x)
    for s in starts:
        y[s + 80 : s + 80 + 480] = x[s : s + 480]  # 30 ms at +5 ms ...
        y[s + 80 + 480 + 240 : s + burst + 320] = x[s + 480 : s + burst]  # ... the rest at +20
    rows = measure_lags(x, y, starts, burst, SR)
    assert [r["onset_lag_samples"] for r in rows] == [80] * BURSTS
    assert [r["xcorr_lag_samples"] for r in rows] == [320] * BURSTS
    # an output that never echoes anything is not a measurement
    rows = measure_lags(x, np.zeros_like(x), starts, burst, SR)
    assert all(r["correlation"] < selfcheck.MIN_CORRELATION for r in rows)


def test_virtual_clock_measures_exactly_zero() -> None:
    block = add_target_status(
        {"latency": {"in_process": measure_harness_latency("in_process", "virtual")}}
    )
    lat = block["latency"]["in_process"]
    assert lat["median_ms"] == lat["min_ms"] == lat["max_ms"] == 0.0
    assert lat["xcorr"] == {"median_ms": 0.0, "min_ms": 0.0, "max_ms": 0.0}
    assert lat["n_measured"] == lat["n_bursts"] == BURSTS
    assert all(b["correlation"] == pytest.approx(1.0) for b in lat["bursts"])
    assert lat["status"] == "ok" and lat["resolution_ms"] == 0.0625
    assert lat["compute"] == "zero" and "pacing_error_ms" not in lat


@pytest.mark.parametrize("frame_ms", [20, 10])
def test_a_known_delay_is_measured_within_the_resolution(frame_ms: int) -> None:
    lat = measure_harness_latency("in_process", "virtual", frame_ms=frame_ms, agent=DelayedEcho(40))
    assert lat["n_measured"] == BURSTS
    assert abs(lat["median_ms"] - 40.0) <= lat["resolution_ms"]
    assert abs(lat["xcorr"]["median_ms"] - 40.0) <= lat["resolution_ms"]
    assert lat["max_ms"] - lat["min_ms"] <= lat["resolution_ms"]  # every burst, not just most
    # a delay that is no multiple of a frame, to the sample
    odd = measure_harness_latency("in_process", "virtual", agent=DelayedEcho(37.5))
    assert abs(odd["median_ms"] - 37.5) <= odd["resolution_ms"]
    # and the virtual clock's 0 check would flag it as a driver error
    checked = add_target_status({"latency": {"in_process": lat}})
    assert checked["latency"]["in_process"]["status"].startswith("driver error")


def test_the_socket_path_runs_on_loopback() -> None:
    pytest.importorskip("websockets")
    plain = measure_harness_latency("socket", "real")
    assert plain["transport"] == "socket" and plain["clock"] == "real"
    assert "RealtimeServer" in plain["agent"]
    # a loaded machine may split a burst's echo (player underruns) below the correlation
    # floor; some bursts always come back, and none earlier than it was sent
    assert plain["n_measured"] >= 1, plain["bursts"]
    assert plain["median_ms"] is not None and plain["min_ms"] >= 0  # causal: never early
    assert plain["pacing_error_ms"]["n"] > 100
    # the hop trace: per-hop medians, and the server's own time reported beside the lag
    hops = plain["hops"]
    assert hops["frames"] >= 10 and hops["first_of_response"]["frames"] >= 1
    assert all(hops[name] is not None for name, _, _ in selfcheck.HOPS)
    assert hops["total"] > 0 and hops["server"] >= hops["agent"] >= 0
    if "net_of_agent" in plain:  # bursts and responses paired
        assert plain["agent_ms"] >= 0
        assert plain["net_of_agent"]["median_ms"] <= plain["median_ms"] + 1e-9
    # the delayed echo over the socket: at least its own 40 ms (causality), plus the harness
    late = measure_harness_latency("socket", "real", agent=DelayedEcho(40))
    assert late["n_measured"] >= 1, late["bursts"]
    assert late["min_ms"] >= 40.0 - late["resolution_ms"]


# --------------------------------------------------------------------------- pacing


def test_pacing_is_pooled_from_session_summaries() -> None:
    stats = [
        {"pacing_error_ms": {"median": 0.1, "p99": 2.0, "max": 9.0, "n": 100}},
        {"pacing_error_ms": {"median": 0.3, "p99": 6.0, "max": 30.0, "n": 300}},
        {"clock": "real"},  # a session without pacing (e.g. it crashed at once)
        None,  # an error record
    ]
    p = pacing_summary(stats, "real")
    assert p["sessions"] == 2 and p["frames"] == 400
    assert p["median_ms"] == 0.3  # frame-weighted: the 300-frame session holds the middle
    assert p["median_bounds_ms"] == [0.1, 0.3]
    assert p["p99_ms"] == 6.0 and p["p99_bounds_ms"] == [2.0, 6.0]  # upper bound
    assert p["max_ms"] == 30.0
    add_target_status(checked := {"pacing": p})
    assert checked["pacing"]["status"] == "ok"
    one = pacing_summary(stats[:1], "real")
    assert one["method"].startswith("exact") and one["p99_ms"] == 2.0
    over = add_target_status({"pacing": pacing_summary(stats[1:2], "real")})
    assert over["pacing"]["status"] == "ok"
    late = {"pacing_error_ms": {"median": 2.5, "p99": 6.0, "max": 30.0, "n": 10}}
    assert (
        add_target_status({"pacing": pacing_summary([late], "real")})["pacing"]["status"]
        == "over target"
    )
    virtual = pacing_summary(stats, "virtual")
    assert virtual == {"applicable": False, "note": selfcheck.VIRTUAL_PACING_NOTE}
    assert pacing_summary([], "real")["frames"] == 0


# --------------------------------------------------------------------------- in a run


def _scenario_folder(tmp: Path) -> Path:
    folder = tmp / "scenarios"
    folder.mkdir()
    x, _ = burst_signal(SR, seed=7)
    sf.write(folder / "bursts.wav", x[: SR * 3 // 2], SR, subtype="PCM_16")
    doc: dict[str, Any] = {
        "id": "echo-check",
        "version": 1,
        "category": "normal_turns",
        "segments": [{"id": "u", "role": "user", "audio": "bursts.wav", "at_ms": 100}],
    }
    (folder / "echo-check.yaml").write_text(yaml.safe_dump(doc))
    return folder


def _run(tmp: Path, agent: str, **kw: Any) -> Path:
    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    scenarios = load_scenario_set(str(_scenario_folder(tmp)))
    store = run_scenarios(scenarios, agent, tmp / "runs", detector="energy", **kw)
    return store.path


def _report(path: Path) -> tuple[dict[str, Any], dict[str, Any], str, str]:
    info = json.loads((path / "run.json").read_text())
    report = json.loads((path / "report.json").read_text())
    return info, report, (path / "report.md").read_text(), (path / "report.html").read_text()


def test_a_virtual_run_carries_the_self_check(tmp_path: Path) -> None:
    info, report, md, html = _report(_run(tmp_path, "echo"))
    check = info["self_check"]
    assert check["clock"] == "virtual" and not check["errors"]
    assert check["latency"]["in_process"]["median_ms"] == 0.0
    assert check["latency"]["in_process"]["status"] == "ok"
    assert check["pacing"] == {"applicable": False, "note": selfcheck.VIRTUAL_PACING_NOTE}
    shown = report["harness_self_check"]
    assert shown["status"] == "run" and shown["latency"]["in_process"]["max_ms"] == 0.0
    assert "## Harness self-check" in md
    assert "virtual clock: frames are exact, pacing not applicable" in md
    assert "Harness-added latency (in_process, virtual clock" in md
    assert "<h2 id='harness-self-check'>Harness self-check</h2>" in html


def test_a_socket_run_measures_pacing_and_loopback_latency(tmp_path: Path) -> None:
    pytest.importorskip("websockets")
    from voxassay.reference.server import RealtimeServer
    from voxassay.systems.duplex.simple_agents import EchoAgent

    server = RealtimeServer(EchoAgent, port=0)
    url = server.start_in_thread()
    try:
        info, report, md, _ = _report(_run(tmp_path, url))
    finally:
        server.stop()
    check = info["self_check"]
    assert check["clock"] == "real" and not check["errors"], check["errors"]
    assert set(check["latency"]) == {"socket"}
    assert check["latency"]["socket"]["n_measured"] >= 1
    pacing = check["pacing"]
    assert pacing["applicable"] and pacing["sessions"] == 1 and pacing["frames"] > 50
    assert pacing["method"].startswith("exact")
    shown = report["harness_self_check"]
    assert shown["pacing"]["frames"] == pacing["frames"]
    assert shown["latency"]["socket"]["target_median_ms"] == 5.0
    assert "Frame pacing: send error median" in md and "Harness-added latency (socket" in md


def test_a_failing_self_check_is_recorded_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kw: Any) -> dict[str, Any]:
        raise OSError("no loopback today")

    monkeypatch.setattr(selfcheck, "measure_harness_latency", broken)
    path = _run(tmp_path, "echo")
    info, report, md, _ = _report(path)
    assert (path / "records.jsonl").read_text().count("\n") == 1  # the session ran
    assert report["harness_self_check"]["errors"] == info["self_check"]["errors"]
    assert info["self_check"]["errors"] == [
        {"stage": "latency.in_process", "error": "OSError: no loopback today"}
    ]
    assert "Self-check error (latency.in_process): OSError: no loopback today" in md
    assert "Harness-added latency: not measured." in md


def test_the_self_check_can_be_switched_off(tmp_path: Path) -> None:
    info, report, md, _ = _report(_run(tmp_path, "echo", self_check=False))
    assert "self_check" not in info
    assert report["harness_self_check"]["status"] == "not run"
    assert "Not run: this live run has no harness self-check (it was switched off)" in md
    # a bundle run scored from recordings ran no live session: not applicable
    from voxassay.suites.duplex.live.selfcheck import report_block

    assert report_block({"config": {"mode": "bundles"}}, [])["status"] == "not applicable"
