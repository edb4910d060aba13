"""Virtual-clock speed: the default scenario set against the in-process reference agent.

Every scenario of ``load_scenario_set("default")`` runs once against a fresh
``ReferenceAgent("careful")`` on the virtual clock with the agent's compute charged to the clock
(the default: latencies include real compute). Rendering (cached, done first) and scoring are
not part of it; model loading happens once before the clock starts (the agent warms up its
models at construction). Measured per session: the session's audio seconds (``duration_s``)
and the wall seconds of ``run_session``; the figure is total audio / total wall (target >= 5x
real time, on the full set). The process CPU time is printed beside it: on a machine shared
with other work, wall time also counts the time this process waited for a core, CPU time
does not (ONNX/CTranslate2 may use more than one thread, so CPU time can exceed wall time).

Run: python benchmarks/bench_virtual_speed.py [--only GLOB ...] [--limit N] [--policy careful]
``--only``/``--limit`` shorten it for a quick look; the target is stated for the full set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

TARGET = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="category or id glob")
    ap.add_argument("--limit", type=int, default=None, help="at most N scenarios")
    ap.add_argument("--policy", default="careful")
    args = ap.parse_args()
    try:
        from voxassay.reference.agent import ReferenceAgent
    except ImportError as exc:
        print(f"skip: the reference agent is not installed ({exc})")
        return 0
    from voxassay.suites.duplex.live.runner import select_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.live.session import SessionConfig, run_session
    from voxassay.suites.duplex.live.stimuli import default_cache_dir, render_segments

    scenarios = select_scenarios(load_scenario_set("default"), args.only)
    full = not args.only and args.limit is None
    if args.limit is not None:
        scenarios = scenarios[: args.limit]
    cache = default_cache_dir()
    t = time.perf_counter()
    audio = {sc.id: render_segments(sc, path.parent, cache_dir=cache) for sc, path in scenarios}
    print(f"rendered {len(scenarios)} scenarios in {time.perf_counter() - t:.1f} s (cache {cache})")
    t = time.perf_counter()
    ReferenceAgent(args.policy)  # model loading, once, off the clock
    print(f"agent models loaded in {time.perf_counter() - t:.1f} s")
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)"
    )
    cfg = SessionConfig(clock="virtual", compute="charged")
    rows = []
    print(f"{'scenario':42s} {'audio s':>8s} {'wall s':>7s} {'cpu s':>7s} {'x real':>7s}")
    for sc, _ in scenarios:
        agent = ReferenceAgent(args.policy)
        w0, c0 = time.perf_counter(), time.process_time()
        res = run_session(sc, audio[sc.id], agent, cfg, f"{sc.id}-speed")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        dur = float(res.stats["duration_s"])
        rows.append((sc.id, dur, wall, cpu, float(res.stats["agent_compute_s"])))
        print(f"{sc.id:42s} {dur:8.1f} {wall:7.2f} {cpu:7.2f} {dur / wall:7.1f}")
    audio_s = sum(r[1] for r in rows)
    wall_s = sum(r[2] for r in rows)
    cpu_s = sum(r[3] for r in rows)
    agent_s = sum(r[4] for r in rows)
    ratio = audio_s / wall_s
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"sessions: {len(rows)}, audio {audio_s:.1f} s, wall {wall_s:.1f} s, process CPU {cpu_s:.1f} s"
    )
    print(
        f"agent compute (charged to the clock) {agent_s:.1f} s = {agent_s / wall_s:.0%} of wall; "
        f"driver and the rest {wall_s - agent_s:.1f} s"
    )
    print(f"audio / CPU time: {audio_s / cpu_s:.1f}x (what an idle machine would give, roughly)")
    verdict = "OK" if ratio >= TARGET else "MISSED"
    scope = "full default set" if full else "SUBSET: the target is stated for the full set"
    print(f"audio / wall: {ratio:.1f}x real time (target >= {TARGET:.0f}x; {scope}) {verdict}")
    return 0 if ratio >= TARGET or not full else 1


if __name__ == "__main__":
    sys.exit(main())
