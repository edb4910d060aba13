"""Harness-added latency: a loopback echo agent, measured the way every run's self-check does.

The probe (``live.selfcheck``): ~3 s of speech-shaped noise bursts on the real clock into an
echo agent; per burst, the lag of the played output track behind the input track, onset to
onset (the figure held against the target, as in the self-check: what the onset-based latency
metrics absorb) and by whole-burst cross-correlation (adds the delay that player underruns
build up within a burst); resolution one sample, 62.5 us at 16 kHz. Set-ups, ``--probes`` sessions each (bursts pooled):

* socket, echo at 24 kHz in its own process (``serve_agent(EchoAgent, sample_rate=24000)``):
  a Realtime-native echo, no resampling on the server side, so everything measured is the
  harness: the driver, ``RealtimeAgentLink`` (16 <-> 24 kHz), the protocol and the loopback
  socket. This is the figure held against the target;
* socket, the same echo in a thread of the driver's process (the self-check's own set-up);
* socket, ``voxassay reference serve --agent echo`` (16 kHz): adds the reference server's own
  24 <-> 16 kHz resampling and framing, which every 16 kHz agent it serves carries;
* in process: ``EchoAgent`` called by the driver on the real clock.

Target: median <= 5 ms (the first set-up; the in-process one is printed against it too). The
frame pacing error of the probe sessions is printed, and the load average, because on a
shared machine both move with other processes' work. The 24 kHz echoes are called on the
server's event loop (``agent_thread=False``: the echo takes microseconds; the reference serve
set-up keeps its worker thread).

Hop breakdown (socket set-ups): every probe frame is stamped on the one ``CLOCK_MONOTONIC`` of
both processes (``RealtimeAgentLink(hop_trace=True)``, ``selfcheck.hop_breakdown``): driver
(deadline -> handed to the link), link encode (resample, base64, JSON), link to socket (the
link's loop thread writes it), socket up (-> the server's receive), server to agent, agent,
agent to server, server to socket, socket down (-> the link's receive), link decode (-> the
receipt stamp); medians over all echoed frames and over each burst's first frame (the one the
onset lag rides on). Beside the held end-to-end figure, the server's own receive -> send time
of each burst's first frame (the agent's side, not the harness's) and the onset lag net of it
are printed: informational, the held figure is end to end.

``--sched fifo`` (root): the driver with real-time scheduling, a diagnostic of how much the
machine's other work adds (echo servers in their own process run with normal scheduling).

Run: python benchmarks/bench_harness_latency.py [--probes 5] [--frame-ms 20] [--sched normal|fifo]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from typing import Any

from _live_common import add_sched_option, set_scheduling

TARGET_MS = 5.0


def start_server(cmd: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Start a server process that prints its ws:// URL first; (process, URL)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ws://"):
        proc.kill()
        raise RuntimeError(f"the echo server did not start: {line!r}")
    return proc, line.split()[0]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


ECHO_24K = (
    "from voxassay.reference.server import serve_agent\n"
    "from voxassay.systems.duplex.simple_agents import EchoAgent\n"
    "serve_agent(EchoAgent, port=0, sample_rate=24000, frame_ms={frame_ms},"
    " agent_thread={agent_thread}, ready=lambda url: print(url, flush=True))\n"
)


def probe(kind: str, n: int, frame_ms: int, url: str | None = None) -> dict[str, Any]:
    """``n`` probe sessions; every measured burst's onset and cross-correlation lags."""
    from voxassay.suites.duplex.live.selfcheck import MIN_CORRELATION, measure_harness_latency

    transport = "in_process" if kind == "in_process" else "socket"
    onset: list[float] = []
    agent: list[float] = []
    net: list[float] = []
    hops: list[dict[str, Any]] = []
    xcorr: list[float] = []
    medians: list[float | None] = []
    pacing: list[float] = []
    lost = 0
    for _ in range(n):
        b = measure_harness_latency(transport, "real", frame_ms=frame_ms, url=url)  # type: ignore[arg-type]
        for r in b["bursts"]:
            if r["correlation"] >= MIN_CORRELATION and r["onset_lag_ms"] is not None:
                onset.append(r["onset_lag_ms"])
                xcorr.append(r["xcorr_lag_ms"])
            else:
                lost += 1
        medians.append(b["median_ms"])
        if "hops" in b:
            hops.append(b["hops"])
            agent.append(b.get("agent_ms") or 0.0)
            if (b.get("net_of_agent") or {}).get("median_ms") is not None:
                net.append(b["net_of_agent"]["median_ms"])
        pacing.append(b["pacing_error_ms"]["p99"])
    return {
        "onset": onset,
        "xcorr": xcorr,
        "medians": medians,
        "pacing_p99": pacing,
        "lost": lost,
        "hops": hops,
        "agent": agent,
        "net": net,
    }


def hop_table(results: dict[str, dict[str, Any]]) -> None:
    """Per-hop medians (ms), the median over a set-up's probes of each probe's median."""
    from voxassay.suites.duplex.live.selfcheck import HOPS

    names = [h[0] for h in HOPS] + ["server", "total"]
    rows = [(n, r["hops"]) for n, r in results.items() if r.get("hops")]
    if not rows:
        return
    print(
        "\nhop breakdown, ms (median over probes of the per-probe median; all frames | "
        "each burst's first frame)"
    )
    print(f"{'hop':18s}" + "".join(f"{n[:22]:>24s}" for n, _ in rows))
    for hop in names:
        cells = []
        for _, probes in rows:
            a = [p[hop] for p in probes if p.get(hop) is not None]
            f = [
                p["first_of_response"][hop]
                for p in probes
                if (p.get("first_of_response") or {}).get(hop) is not None
            ]
            ma = f"{statistics.median(a):6.3f}" if a else "     -"
            mf = f"{statistics.median(f):6.3f}" if f else "     -"
            cells.append(f"{ma} | {mf}")
        print(f"{hop:18s}" + "".join(f"{c:>24s}" for c in cells))


def spread(values: list[float]) -> str:
    v = sorted(values)
    p10, p90 = v[int(0.1 * (len(v) - 1))], v[int(0.9 * (len(v) - 1))]
    return f"{statistics.median(v):7.2f} {p10:6.2f} {p90:7.2f} {v[-1]:7.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=5, help="probe sessions per set-up")
    ap.add_argument("--frame-ms", type=int, default=20, choices=(10, 20))
    add_sched_option(ap)
    args = ap.parse_args()
    try:
        import websockets  # noqa: F401
    except ImportError:
        print("skip: websockets is not installed (pip install 'voxassay[live]')")
        return 0
    print(f"scheduling: {set_scheduling(args.sched)}")
    load0 = os.getloadavg()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load0)} ({os.cpu_count()} cores)")
    results: dict[str, dict[str, Any]] = {}
    exe = os.path.join(os.path.dirname(sys.executable), "voxassay")
    setups: list[tuple[str, list[str] | None]] = [
        (
            "socket 24k, own process",
            [sys.executable, "-c", ECHO_24K.format(frame_ms=args.frame_ms, agent_thread=False)],
        ),
        ("socket 24k, thread", None),
        (
            "socket 16k, reference serve",
            [
                exe,
                "reference",
                "serve",
                "--agent",
                "echo",
                "--port",
                "0",
                "--frame-ms",
                str(args.frame_ms),
            ],
        ),
    ]
    for name, cmd in setups:
        if cmd is None:
            results[name] = probe("socket", args.probes, args.frame_ms)
            continue
        proc, url = start_server(cmd)
        try:
            results[name] = probe("socket", args.probes, args.frame_ms, url)
        finally:
            stop(proc)
    results["in process"] = probe("in_process", args.probes, args.frame_ms)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"\n{'':30s} {'onset to onset (ms)':>29s}   {'whole-burst xcorr (ms)':>29s}\n"
        f"{'set-up':24s} {'bursts':>5s} {'median':>7s} {'p10':>6s} {'p90':>7s} {'max':>7s}   "
        f"{'median':>7s} {'p10':>6s} {'p90':>7s} {'max':>7s}  probe medians; probe pacing P99"
    )
    ok = True
    for name, r in results.items():
        if not r["onset"]:
            print(f"{name:24s} no burst came back")
            ok = False
            continue
        per = ", ".join("-" if m is None else f"{m:.1f}" for m in r["medians"])
        pac = ", ".join(f"{p:.1f}" for p in r["pacing_p99"])
        lost = f" ({r['lost']} lost)" if r["lost"] else ""
        print(
            f"{name:24s} {len(r['onset']):5d} {spread(r['onset'])}   {spread(r['xcorr'])}  "
            f"[{per}]; [{pac}]{lost}"
        )
        r["median"] = statistics.median(r["onset"])
        if name.startswith("socket 24k, own") or name == "in process":
            ok = ok and r["median"] <= TARGET_MS
    hop_table(results)
    print()
    for name, r in results.items():
        if "median" in r:
            held = name.startswith("socket 24k, own") or name == "in process"
            verdict = ("OK" if r["median"] <= TARGET_MS else "MISSED") if held else "(info)"
            side = ""
            if r["net"]:
                side = (
                    f"; server receive->send {statistics.median(r['agent']):.2f} ms (the "
                    f"agent's), net of it {statistics.median(r['net']):.2f} ms (info)"
                )
            print(
                f"harness-added latency, {name}: median {r['median']:.2f} ms onset to onset, "
                f"end to end (target <= {TARGET_MS:.0f} ms) {verdict}{side}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
