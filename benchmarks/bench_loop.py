"""The sound loop's added latency and jitter, and how far acoustic events on the capture sit
from the same sessions' modelled playback, in one run.

The reference agent (careful policy) is served by ``voxassay reference serve`` in its own
process over the Realtime WebSocket; ``run_scenarios(..., loop="pulseaudio")`` runs the
chosen scenarios of the default set through a private PulseAudio server: a real player
process plays what the agent sent into a null sink and its monitor is captured. Every bundle
then holds ``output.wav`` (the capture on the session clock) and ``received.wav`` (the same
audio as the playback model placed it: what an L2 run would call output.wav).

Printed:
- the self-check probe's loop latency and jitter (8 noise bursts) and each session's own
  (per 400 ms window of agent audio, ``loop.json``);
- edge error of the acoustic agent-speech events: the detector (silero, the scorer's
  default) runs on both tracks of each session; segments are matched one-to-one by overlap
  (``acoustic.edge_errors``) and ``capture - modelled`` is reported for starts and for ends,
  median and max of the absolute error, with ends cut by a barge-in (a flush) apart from the
  others: there the capture also holds what the null sink had rendered ahead.

No target is set by the issue for these figures; they are printed so that a gate on
acoustic times can be read with the loop's share in view.

Run: python benchmarks/bench_loop.py [--scenario ID ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import soundfile as sf

DEFAULT = ("interruption-2s", "interruption-500ms", "backchannel-okay", "bystander-in-gap")


def serve() -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "voxassay.cli.main", "reference", "serve", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip():
        proc.kill()
        raise RuntimeError("reference serve did not start")
    return proc, line.split()[0]


def _segments(path: Path) -> list[Any]:
    from voxassay.suites.duplex.evidence.acoustic import detect_segments

    x, sr = sf.read(path, dtype="float32")
    return detect_segments(x, sr)


def edge_rows(bundle: Path) -> list[dict[str, Any]]:
    """Per matched agent-speech segment: start and end error (ms) of the capture against the
    modelled playback, and whether a flush fell within 300 ms before the modelled end."""
    from voxassay.suites.duplex.evidence.acoustic_accuracy import edge_errors

    loop = json.loads((bundle / "loop.json").read_text())
    flushes = [f / 1000 for f in loop["flushes_ms"]]
    modelled = _segments(bundle / "received.wav")
    captured = _segments(bundle / "output.wav")
    res = edge_errors(captured, [(s.start_s, s.end_s) for s in modelled])
    rows = []
    for p in res["pairs"]:
        end = modelled[p["truth"]].end_s
        cut = any(0 <= end - f < 0.3 or 0 <= f - end < 0.05 for f in flushes)
        rows.append({"start_ms": p["onset_ms"], "end_ms": p["offset_ms"], "cut": cut})
    return rows


def _fig(values: list[float]) -> str:
    if not values:
        return "n=0 (not estimable)"
    a = [abs(v) for v in values]
    return (
        f"median |err| {statistics.median(a):6.1f} ms, max {max(a):6.1f} ms, "
        f"signed median {statistics.median(values):+6.1f} ms (n={len(values)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", action="append", help="scenario ids of the default set")
    args = ap.parse_args()
    chosen_ids = tuple(args.scenario or DEFAULT)

    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    chosen = [(sc, p) for sc, p in load_scenario_set("default") if sc.id in chosen_ids]
    proc, url = serve()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = run_scenarios(chosen, url, tmp, clock="real", loop="pulseaudio")
            info = json.loads((store.path / "run.json").read_text())
            probe = info["self_check"].get("loop") or {}
            print(
                f"loop self-check (PulseAudio {probe.get('pulseaudio_version')}): latency "
                f"{probe.get('latency_ms')} ms, jitter {probe.get('jitter_ms')} ms, range "
                f"{probe.get('min_ms')}..{probe.get('max_ms')} ms over {probe.get('n_windows')} bursts"
            )
            starts: list[float] = []
            ends: list[float] = []
            cut_ends: list[float] = []
            for manifest in sorted(store.path.glob("bundles/**/manifest.json")):
                b = manifest.parent
                loop = json.loads((b / "loop.json").read_text())
                rows = edge_rows(b)
                starts += [r["start_ms"] for r in rows]
                ends += [r["end_ms"] for r in rows if not r["cut"]]
                cut_ends += [r["end_ms"] for r in rows if r["cut"]]
                session = json.loads(manifest.read_text()).get("session_id")
                print(
                    f"  {b.parent.name:28s} latency {loop['latency_ms']:6.2f} ms, jitter "
                    f"{loop['jitter_ms'] if loop['jitter_ms'] is not None else float('nan'):5.2f} ms, "
                    f"{loop['n_windows']:3d} windows, {len(rows)} segments ({session})"
                )
            print("acoustic agent-speech edges, capture - modelled playback:")
            print(f"  starts:              {_fig(starts)}")
            print(f"  ends (played out):   {_fig(ends)}")
            print(f"  ends cut by a flush: {_fig(cut_ends)}")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
