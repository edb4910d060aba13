"""The harness self-check that every live run carries: can its timing be trusted?

Two figures, both stored in ``run.json`` (``info.self_check``) and shown in the bundle report
(``harness_self_check``):

Pacing error
============
Real clock: every frame is sent when the monotonic clock reaches its deadline; the session
records how late each one went (``SessionResult.stats["pacing_error_ms"]``: median, P99, max
and n of that session's frames). ``pacing_summary`` pools the run's sessions from those
per-session summaries (a record keeps ``output.session_stats``): ``max`` is exact; the pooled
median and P99 cannot be recomputed exactly from summaries, so the pooled value of a quantile
is bracketed by the smallest and the largest session value of that quantile (each session has
at least that share of its frames at or under its own value). The report states the bracket,
the frame-weighted median of the session medians as the median estimate, and the *largest*
session P99 as the P99 (an upper bound: the target is met if it is). Virtual clock: frames are
exact, pacing does not apply.

Harness-added latency
=====================
Before the run's sessions, a short session (``BURSTS`` bursts of speech-shaped noise, about
3 s, generated deterministically: the run needs no data files) goes to an ``EchoAgent``
through the same transport as the run: for socket agents a ``RealtimeServer`` serving the echo
agent on 127.0.0.1 (ephemeral port) reached through ``RealtimeAgentLink``; for in-process
agents the echo agent in process. Everything between the user track and the played track is
then the harness: pacing, the link's 16 <-> 24 kHz resampling, the protocol and the socket, the
link's polling, the playback model. The served echo works at the protocol's 24 kHz, as a
Realtime-native agent does, so the server adds no resampling of its own (a 16 kHz agent behind
``voxassay reference serve`` carries the server's 24 <-> 16 kHz conversion, ~2 ms, as part of its own latency;
``measure_harness_latency(server_rate=16000)`` measures that set-up). The echo is called on the
server's event loop (``RealtimeServer(agent_thread=False)``: no worker-thread hops; it takes
microseconds).

Per burst, two lags of the output track behind the input track, each to one sample (62.5 us at
16 kHz): *onset to onset* (the first sample at ``ONSET_REL`` of the burst's peak, on both
tracks), the figure reported, because the latency metrics are onset-based (first agent audio
heard, ...): it is what the harness adds to them; and *cross-correlation* (the lag maximising
the normalised cross-correlation of the whole burst, ``xcorr``), which also counts the delay
that player underruns build up within a burst (a late chunk delays everything after it). A
burst whose echo correlates under ``MIN_CORRELATION`` was not echoed recognisably and is
counted apart. The figure is the median over bursts. On the real clock a one-burst warm-up
session goes first and is discarded, so that the figure is the steady state, not the
first-call costs (imports, a first response) that a run pays once. On the virtual clock the same session
runs with compute counted as zero (the echo's own compute is not the harness's) and both lags
must be exactly 0 in every burst: this also tests the driver.

Socket probes are hop-traced (``RealtimeAgentLink(hop_trace=True)``: the appends carry an
event id, the server returns its own stamps with the echo; both processes read the same
``CLOCK_MONOTONIC``): ``hops`` gives per-hop medians (driver, link encode, link to socket, socket
up, server to agent, agent, agent to server, server to socket, socket down, link decode), and the
block reports, beside the end-to-end figure held against the target, the server's own receive ->
send time (``agent_ms``: the agent's side) and the lag net of it (``net_of_agent``). The onset lag
is about the ``total`` hop (frame deadline -> receipt stamp) of a burst's first frame plus the
uplink resampler's look-ahead (~1.2 ms: the server leads the stream with that much silence so
that its frames end where the appends end).

Errors of the self-check are recorded (``errors``), never fatal to the run.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from voxassay.contracts.duplex.agent_api import SAMPLE_RATE
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.suites.duplex.live.session import SessionConfig, SessionResult, run_session
from voxassay.systems.duplex.simple_agents import EchoAgent

__all__ = [
    "BURSTS",
    "SELF_CHECK_VERSION",
    "TARGETS",
    "add_target_status",
    "burst_signal",
    "measure_harness_latency",
    "measure_lags",
    "pacing_from_records",
    "pacing_summary",
    "report_block",
    "run_self_check",
]

SELF_CHECK_VERSION = "1"
BURSTS = 6
BURST_MS = 200.0
PERIOD_MS = 450.0
FIRST_MS = 300.0
MAX_LAG_MS = 300.0
NEG_LAG_MS = 50.0
MIN_CORRELATION = 0.5
ONSET_REL = 0.1
ONSET_QUIET_MS = 20.0
SEGMENT_ID = "selfcheck-bursts"
TARGETS = {"pacing_median_ms": 2.0, "pacing_p99_ms": 10.0, "latency_median_ms": 5.0}
"""The issue's performance targets (on 2 shared cores), shown beside the measured values."""
VIRTUAL_PACING_NOTE = "virtual clock: frames are exact, pacing not applicable"

Transport = Literal["in_process", "socket"]


# --------------------------------------------------------------------------- the signal


def burst_signal(
    sample_rate: int = SAMPLE_RATE, seed: int = 20_240
) -> tuple[np.ndarray, list[int]]:
    """The probe: ``BURSTS`` bursts of speech-shaped noise in digital silence; (float32
    samples, burst start samples).

    Noise with a speech-like spectrum (white noise through a one-pole low-pass at 800 Hz, a
    little of the white part, and a voiced buzz: 12 harmonics of a 110-140 Hz fundamental
    falling 12 dB per octave), a 4 Hz syllable envelope, 5 ms raised-cosine edges, -20 dBFS
    RMS. Burst starts are offset by a few milliseconds from one another so that they do not
    all fall on frame boundaries.
    """
    rng = np.random.default_rng(seed)
    sr = sample_rate
    n_burst = round(BURST_MS * sr / 1000)
    starts = [round((FIRST_MS + i * PERIOD_MS + 3.7 * i) * sr / 1000) for i in range(BURSTS)]
    total = starts[-1] + n_burst + round(0.2 * sr)
    x = np.zeros(total, np.float64)
    t = np.arange(n_burst) / sr
    ramp = round(0.005 * sr)
    edge = 0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)
    a = float(np.exp(-2 * np.pi * 800 / sr))
    for s in starts:
        white = rng.standard_normal(n_burst)
        low = np.empty(n_burst)
        acc = 0.0
        for i, w in enumerate(white):  # one-pole low-pass (n is small: 3200 samples)
            acc = a * acc + (1 - a) * w
            low[i] = acc
        low /= np.std(low) or 1.0
        f0 = 110 + 30 * rng.random()
        buzz = np.zeros(n_burst)
        for k in range(1, 13):
            buzz += np.sin(2 * np.pi * k * f0 * t + rng.random() * 6.28) / k**2
        buzz /= float(np.std(buzz)) or 1.0
        burst = low + 0.7 * buzz + 0.03 * white
        burst *= 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t + rng.random() * 6.28)
        burst[:ramp] *= edge
        burst[-ramp:] *= edge[::-1]
        burst *= 0.1 / (np.sqrt(np.mean(burst**2)) or 1.0)  # -20 dBFS RMS
        x[s : s + n_burst] = burst
    return x.astype(np.float32), starts


def _probe_scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "id": "harness-self-check",
            "version": 1,
            "category": "normal_turns",
            "description": "loopback echo probe of the harness's own latency",
            "segments": [
                {
                    "id": SEGMENT_ID,
                    "role": "user",
                    "audio": "generated:speech-shaped-bursts",
                    "at_ms": 0,
                }
            ],
        }
    )


# --------------------------------------------------------------------------- measurement


def measure_lags(
    inp: np.ndarray,
    out: np.ndarray,
    starts: Sequence[int],
    burst_len: int,
    sample_rate: int,
) -> list[dict[str, Any]]:
    """Per burst, two lags of the output track behind the input (samples and ms):

    - ``xcorr``: the lag that maximises the normalised cross-correlation of the whole burst
      (``correlation``: its peak, 1.0 = an exact copy);
    - ``onset``: output onset - input onset, each the first sample whose magnitude reaches
      ``ONSET_REL`` of the input burst's peak; the output onset must follow at least
      ``ONSET_QUIET_MS`` below that level and is the last such one up to the cross-correlation
      alignment (a player that underruns only delays the rest of a burst, never its start).
    """
    neg = round(NEG_LAG_MS * sample_rate / 1000)
    pos = round(MAX_LAG_MS * sample_rate / 1000)
    quiet = round(ONSET_QUIET_MS * sample_rate / 1000)
    slack = round(0.001 * sample_rate)
    inp = np.asarray(inp, np.float64).reshape(-1)
    out = np.asarray(out, np.float64).reshape(-1)
    rows = []
    for s in starts:
        x = inp[s : s + burst_len]
        lo = max(0, s - neg)
        y = out[lo : s + burst_len + pos]
        row: dict[str, Any] = {"start_ms": round(s * 1000 / sample_rate, 3)}
        ex = float(np.dot(x, x))
        if x.size < burst_len or y.size < x.size or ex <= 0:
            rows.append({**row, "xcorr_lag_ms": None, "onset_lag_ms": None, "correlation": 0.0})
            continue
        n = y.size + x.size
        nfft = 1 << (n - 1).bit_length()
        c = np.fft.irfft(np.fft.rfft(y, nfft) * np.conj(np.fft.rfft(x, nfft)), nfft)
        valid = y.size - x.size + 1
        c = c[:valid]  # c[k] = sum_j x[j] * y[j + k]
        e = np.concatenate(([0.0], np.cumsum(y * y)))
        ey = e[x.size : x.size + valid] - e[:valid]
        norm = np.sqrt(np.maximum(ey, 1e-20) * ex)
        r = np.where(ey > ex * 1e-6, c / norm, 0.0)
        k = int(np.argmax(r))
        lag = lo + k - s
        thr = ONSET_REL * float(np.max(np.abs(x)))
        onset_in = int(np.flatnonzero(np.abs(x) >= thr)[0])
        above = np.abs(y) >= thr
        hits = np.flatnonzero(above)
        # a crossing preceded by ``quiet`` samples under the threshold (or the window start)
        gaps = np.diff(np.concatenate(([-quiet - 1], hits)))
        starts_out = hits[gaps > quiet]
        limit = (s - lo) + lag + onset_in + slack
        cand = starts_out[starts_out <= limit]
        onset = int(lo + cand[-1] - (s + onset_in)) if cand.size else None
        rows.append(
            {
                **row,
                "xcorr_lag_samples": lag,
                "xcorr_lag_ms": round(lag * 1000 / sample_rate, 4),
                "onset_lag_samples": onset,
                "onset_lag_ms": None if onset is None else round(onset * 1000 / sample_rate, 4),
                "correlation": round(float(r[k]), 4),
            }
        )
    return rows


def measure_harness_latency(
    transport: Transport,
    clock: Literal["real", "virtual"],
    *,
    frame_ms: int = 20,
    sample_rate: int = SAMPLE_RATE,
    agent: Any = None,
    url: str | None = None,
    server_rate: int | None = None,
    hop_trace: bool = True,
    make_link: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Run the probe session through ``transport`` on ``clock`` and measure the lag.

    ``agent`` replaces the ``EchoAgent`` (tests use a delayed echo); for the socket transport
    it is served by a ``RealtimeServer`` in a thread of this process, unless ``url`` names an
    echo server already running (benchmarks: one in its own process). The served echo runs at
    ``server_rate`` (default: the protocol's 24 kHz, so the server does no resampling of its
    own and what is measured is the driver, the link, the protocol and the socket, as in front
    of any Realtime-native agent; 16000 adds the reference server's 24 <-> 16 kHz resampling,
    which every 16 kHz agent it serves carries as part of its own latency). ``make_link``
    (with ``url``, the same server): another transport's link to it (WebRTC, Twilio Media
    Streams), probed the same way, not hop-traced. Raises on a failure to run (the caller
    records it).

    Socket probes are hop-traced (``hop_trace``, see ``hop_breakdown``): the block gets
    ``hops`` (per-hop medians) and, beside the end-to-end ``median_ms`` (the figure held against
    the target), ``agent_ms`` (median of the server's receive -> send time of each burst's first
    echoed frame: the echo agent's side, not the harness's) and ``net_of_agent`` (per burst,
    onset lag - that burst's server time; median, min, max).
    """
    signal, starts = burst_signal(sample_rate)
    scenario = _probe_scenario()
    cfg = SessionConfig(
        sample_rate=sample_rate,
        frame_ms=frame_ms,
        clock=clock,
        compute="zero",  # the echo's own compute is not the harness's (virtual clock only)
        tail_ms=300.0,
        trigger_timeout_ms=1000.0,
        max_session_ms=20_000.0,
    )
    clips = {SEGMENT_ID: signal}
    burst = round(BURST_MS * sample_rate / 1000)
    # real clock: a short session first (one burst, discarded), so that the figure is the
    # steady state and not first-call costs (imports, first response) that a run pays once
    warm = {SEGMENT_ID: signal[: starts[0] + burst + sample_rate // 10]}
    warm_cfg = dataclasses.replace(cfg, tail_ms=100.0)
    t0 = time.perf_counter()
    where = "in process"
    if transport == "socket":
        from voxassay.reference.server import RealtimeServer
        from voxassay.systems.duplex.realtime_protocol import PROTOCOL_RATE
        from voxassay.systems.duplex.realtime_ws import RealtimeAgentLink

        server = None
        hops: list[dict[str, Any]] = []
        if url is None:
            served = agent
            rate = server_rate or PROTOCOL_RATE
            server = RealtimeServer(
                (lambda: served) if served is not None else EchoAgent,
                host="127.0.0.1",
                port=0,
                sample_rate=rate,
                frame_ms=frame_ms,
                agent_thread=False,  # the echo takes microseconds: no worker-thread hops
            )
            url = server.start_in_thread()
            where = (
                f"RealtimeServer on 127.0.0.1 at {rate // 1000} kHz "
                "(a thread of the driver's process)"
            )
        else:
            where = f"a server at {url}"
        if make_link is not None:
            where += " via the link given"

        def once(audio: dict[str, np.ndarray], config: SessionConfig, sid: str) -> SessionResult:
            assert url is not None
            link = make_link() if make_link else RealtimeAgentLink(url, hop_trace=hop_trace)
            try:
                res = run_session(scenario, audio, link, config, sid)
                hops[:] = getattr(link, "hops", [])
            finally:
                with contextlib.suppress(Exception):
                    link.close()
            errors = [e for e in res.events if e.event_type == "session.error"]
            if errors:
                raise RuntimeError(f"the loopback session reported: {errors[0].reason}")
            return res

        try:
            if clock == "real":
                once(warm, warm_cfg, "harness-self-check-warm-up")
            result = once(clips, cfg, "harness-self-check")
        finally:
            if server is not None:
                server.stop()
    else:
        echo = agent if agent is not None else EchoAgent()
        if clock == "real":
            run_session(scenario, warm, echo, warm_cfg, "harness-self-check-warm-up")
        result = run_session(scenario, clips, echo, cfg, "harness-self-check")
    wall = time.perf_counter() - t0
    block = _latency_block(result, starts, transport, clock, wall, where)
    if transport == "socket" and hop_trace and hops:
        block["hops"] = hop_breakdown(hops)
        block.update(_net_of_agent(block["bursts"], hops))
    return block


def _net_of_agent(
    bursts: Sequence[Mapping[str, Any]], hops: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per burst: onset lag - the server's receive -> send time of its first echoed frame
    (bursts and responses pair up in order; nothing when their counts differ)."""
    first = [
        (h["server_send"] - h["server_recv"]) / 1e6
        for h in hops
        if h.get("first") and isinstance(h.get("server_send"), int)
    ]
    if len(first) != len(bursts) or not first:
        return {"net_of_agent_note": f"{len(first)} responses for {len(bursts)} bursts"}
    net = [
        b["onset_lag_ms"] - a
        for b, a in zip(bursts, first, strict=True)
        if b.get("onset_lag_ms") is not None and b.get("correlation", 0) >= MIN_CORRELATION
    ]
    return {
        "agent_ms": round(statistics.median(first), 4),
        "net_of_agent": _spread(net),
        "net_of_agent_method": (
            "per burst, onset lag minus the server's receive -> send time of the burst's first "
            "echoed frame (stamps of both processes on one monotonic clock); informational: "
            "median_ms, end to end, is held against the target"
        ),
    }


HOPS = (
    ("driver", "deadline", "hand"),
    ("link encode", "hand", "queued"),
    ("link to socket", "queued", "written"),
    ("socket up", "written", "server_recv"),
    ("server to agent", "server_recv", "server_agent_start"),
    ("agent", "server_agent_start", "server_agent_end"),
    ("agent to server", "server_agent_end", "server_apply"),
    ("server to socket", "server_apply", "server_send"),
    ("socket down", "server_send", "recv"),
    ("link decode", "recv", "stamped"),
)
"""Hop trace: (hop, from stamp, to stamp), in the order a frame travels."""


def hop_breakdown(hops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-hop medians (ms) of traced frames (``RealtimeAgentLink(hop_trace=True)``): each
    hop = later stamp - earlier stamp (one monotonic clock shared by the processes), median
    over the frames whose echo came back; ``total`` = receipt stamp - the frame's deadline;
    ``server`` = the server's receive -> send time (the agent's side of the socket)."""
    out: dict[str, Any] = _hop_medians(hops)
    first = [h for h in hops if h.get("first")]
    if first:
        out["first_of_response"] = _hop_medians(first)
    return out


def _hop_medians(hops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"frames": len(hops)}
    spans = [*HOPS, ("server", "server_recv", "server_send"), ("total", "deadline", "stamped")]
    for name, a, b in spans:
        d = [
            (h[b] - h[a]) / 1e6
            for h in hops
            if isinstance(h.get(a), int) and isinstance(h.get(b), int)
        ]
        out[name] = round(statistics.median(d), 4) if d else None
    return out


def _latency_block(
    result: SessionResult,
    starts: Sequence[int],
    transport: Transport,
    clock: str,
    wall_s: float,
    where: str,
) -> dict[str, Any]:
    sr = result.sample_rate
    burst_len = round(BURST_MS * sr / 1000)
    rows = measure_lags(result.input, result.output, starts, burst_len, sr)
    ok = [r for r in rows if r["correlation"] >= MIN_CORRELATION]
    onset = [r["onset_lag_ms"] for r in ok if r["onset_lag_ms"] is not None]
    xcorr = [r["xcorr_lag_ms"] for r in ok if r["xcorr_lag_ms"] is not None]
    block: dict[str, Any] = {
        "transport": transport,
        "clock": clock,
        "agent": f"echo over {where}"
        + ("" if "via the link" in where else " via RealtimeAgentLink")
        if transport == "socket"
        else "echo in process",
        **_spread(onset),
        "xcorr": _spread(xcorr),
        "n_bursts": len(rows),
        "n_measured": len(onset),
        "bursts": rows,
        "method": (
            "onset to onset: per burst, the output track's onset minus the input's (first "
            f"sample at {ONSET_REL:g} of the burst's peak), median over the bursts whose echo "
            f"correlates >= {MIN_CORRELATION:g}; xcorr: the lag maximising the normalised "
            "cross-correlation of the whole burst (adds the delay that player underruns build "
            "up within a burst)"
        ),
        "resolution_ms": round(1000 / sr, 4),
        "session_s": round(result.input.size / sr, 3),
        "wall_s": round(wall_s, 3),
    }
    if clock == "virtual":
        block["compute"] = "zero"
    if "pacing_error_ms" in result.stats:
        block["pacing_error_ms"] = result.stats["pacing_error_ms"]
    if not onset:
        block["note"] = f"no burst came back recognisably (peak correlation < {MIN_CORRELATION})"
    return block


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"median_ms": None, "min_ms": None, "max_ms": None}
    return {
        "median_ms": round(statistics.median(values), 4),
        "min_ms": round(min(values), 4),
        "max_ms": round(max(values), 4),
    }


# --------------------------------------------------------------------------- pacing


def pacing_summary(
    stats: Iterable[Mapping[str, Any] | None], clock: str | None = None
) -> dict[str, Any]:
    """Pool per-session ``pacing_error_ms`` summaries (see the module docstring)."""
    if clock == "virtual":
        return {"applicable": False, "note": VIRTUAL_PACING_NOTE}
    sessions = []
    for st in stats:
        p = (st or {}).get("pacing_error_ms") if isinstance(st, Mapping) else None
        if isinstance(p, Mapping) and int(p.get("n") or 0) > 0:
            sessions.append(p)
    if not sessions:
        return {
            "applicable": clock == "real",
            "sessions": 0,
            "frames": 0,
            "note": "no real-clock session recorded its pacing",
        }
    n = [int(p["n"]) for p in sessions]
    med = [float(p["median"]) for p in sessions]
    p99 = [float(p["p99"]) for p in sessions]
    mx = max(float(p["max"]) for p in sessions)
    order = sorted(range(len(med)), key=lambda i: med[i])
    half, acc, median_est = sum(n) / 2, 0, med[order[-1]]
    for i in order:  # frame-weighted median of the session medians
        acc += n[i]
        if acc >= half:
            median_est = med[i]
            break
    exact = len(sessions) == 1
    out: dict[str, Any] = {
        "applicable": True,
        "sessions": len(sessions),
        "frames": sum(n),
        "median_ms": round(median_est, 3),
        "median_bounds_ms": [round(min(med), 3), round(max(med), 3)],
        "p99_ms": round(max(p99), 3),
        "p99_bounds_ms": [round(min(p99), 3), round(max(p99), 3)],
        "max_ms": round(mx, 3),
        "method": "exact (one session)"
        if exact
        else (
            "pooled from per-session summaries: max exact; median = frame-weighted median of "
            "session medians; P99 = the largest session P99 (an upper bound); the pooled values "
            "lie within the bounds"
        ),
    }
    return out


def pacing_from_records(records: Iterable[Any], clock: str | None) -> dict[str, Any]:
    """``{"pacing": pooled}`` over every record's ``output.session_stats``, plus
    ``pacing_by_system`` when the run has several systems."""
    by: dict[str, list[Any]] = {}
    for r in records:
        by.setdefault(str(r.system), []).append((r.output or {}).get("session_stats"))
    out: dict[str, Any] = {"pacing": pacing_summary([s for v in by.values() for s in v], clock)}
    if len(by) > 1 and clock != "virtual":
        out["pacing_by_system"] = {k: pacing_summary(v, clock) for k, v in sorted(by.items())}
    return out


def _pacing_status(pacing: dict[str, Any]) -> None:
    if not (pacing.get("applicable") and pacing.get("frames")):
        return
    med, p99 = pacing.get("median_ms"), pacing.get("p99_ms")
    pacing["target_median_ms"] = TARGETS["pacing_median_ms"]
    pacing["target_p99_ms"] = TARGETS["pacing_p99_ms"]
    ok = med is not None and med <= TARGETS["pacing_median_ms"]
    ok = ok and p99 is not None and p99 <= TARGETS["pacing_p99_ms"]
    pacing["status"] = "ok" if ok else "over target"


def _latency_status(block: dict[str, Any]) -> None:
    median = block.get("median_ms")
    if block.get("clock") == "virtual":
        block["expected_ms"] = 0.0
        xcorr = block.get("xcorr") or {}
        exact = (
            median is not None
            and block.get("min_ms") == block.get("max_ms") == 0
            and xcorr.get("min_ms") == xcorr.get("max_ms") == 0
            and block.get("n_measured") == block.get("n_bursts")
        )
        block["status"] = "ok" if exact else "driver error: the virtual clock must measure 0"
        return
    block["target_median_ms"] = TARGETS["latency_median_ms"]
    if median is None:
        block["status"] = "not measured"
    else:
        block["status"] = "ok" if median <= TARGETS["latency_median_ms"] else "over target"


def add_target_status(check: dict[str, Any]) -> dict[str, Any]:
    """Mark each figure against ``TARGETS`` (in place; returns ``check``); on the virtual
    clock the latency must be exactly 0 in every burst."""
    if isinstance(check.get("pacing"), dict):
        _pacing_status(check["pacing"])
    for pacing in (check.get("pacing_by_system") or {}).values():
        if isinstance(pacing, dict):
            _pacing_status(pacing)
    for block in (check.get("latency") or {}).values():
        if isinstance(block, dict):
            _latency_status(block)
    return check


# --------------------------------------------------------------------------- the run's check


def run_self_check(
    transports: Iterable[str],
    clock: str,
    *,
    frame_ms: int = 20,
    sample_rate: int = SAMPLE_RATE,
) -> dict[str, Any]:
    """The latency part, before the run's sessions: one probe per transport of the run.
    Never raises: a failure is recorded in ``errors``."""
    check: dict[str, Any] = {
        "version": SELF_CHECK_VERSION,
        "clock": clock,
        "latency": {},
        "errors": [],
    }
    for transport in sorted(set(transports)):
        try:
            block = measure_harness_latency(
                "socket" if transport == "socket" else "in_process",
                "real" if clock == "real" else "virtual",
                frame_ms=frame_ms,
                sample_rate=sample_rate,
            )
            check["latency"][transport] = block
        except Exception as exc:  # the self-check never ends a run
            check["errors"].append(
                {"stage": f"latency.{transport}", "error": f"{type(exc).__name__}: {exc}"}
            )
    return check


def report_block(info: Mapping[str, Any], records: Iterable[Any]) -> dict[str, Any]:
    """The report's ``harness_self_check``: the latency probe from ``run.json`` and the pacing
    recomputed from the records (so a resumed run counts every session)."""
    live = (info.get("config") or {}).get("live")
    if not isinstance(live, Mapping):
        return {
            "status": "not applicable",
            "note": "no live session ran: the bundles were recorded elsewhere and scored here",
        }
    clock = str(live.get("clock") or "virtual")
    stored = info.get("self_check")
    if not isinstance(stored, Mapping):
        return {
            "status": "not run",
            "clock": clock,
            "note": "this live run has no harness self-check (it was switched off)",
        }
    check = copy.deepcopy(dict(stored))
    check["status"] = "run"
    records = list(records)
    try:
        check.update(pacing_from_records(records, clock))
    except Exception as exc:  # the report never fails on the self-check
        check.setdefault("errors", []).append({"stage": "pacing", "error": repr(exc)})
    if live.get("loop") not in (None, "none"):
        check["loop"] = loop_block(check.get("loop"), records)
    return add_target_status(check)


def loop_block(probe: Any, records: Iterable[Any]) -> dict[str, Any]:
    """The sound loop's added latency and jitter: the self-check's probe (``run.json``) and
    the sessions' own measurements (``session_stats.loop`` of each record): median of the
    sessions' latencies, their range, and the largest session jitter. Stated beside the
    metrics; nothing is subtracted from any of them."""
    lat, jit = [], []
    for r in records:
        stats = ((getattr(r, "output", None) or {}).get("session_stats") or {}).get("loop")
        if isinstance(stats, Mapping) and stats.get("latency_ms") is not None:
            lat.append(float(stats["latency_ms"]))
            if stats.get("jitter_ms") is not None:
                jit.append(float(stats["jitter_ms"]))
    sessions: dict[str, Any] = {"n": len(lat)}
    if lat:
        sessions.update(
            latency_median_ms=round(float(np.median(lat)), 3),
            latency_min_ms=round(min(lat), 3),
            latency_max_ms=round(max(lat), 3),
            jitter_max_ms=round(max(jit), 3) if jit else None,
        )
    return {
        "probe": dict(probe) if isinstance(probe, Mapping) else None,
        "sessions": sessions,
        "subtracted": False,
        "note": "the loop's latency is part of every acoustic time of these sessions; "
        "it is stated here and not subtracted from any metric",
    }
