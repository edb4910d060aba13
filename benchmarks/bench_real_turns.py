"""Benchmark: speech edges on real conversation, voxassay beside the peers, one table.

Truth: the AMI ES2004a meeting excerpt (``../shared/real_conversations/ami_es2004a``: four
headsets, human word timing in ``truth.rttm``). Every tool gets each headset as it comes; the
same matching rule (``acoustic_accuracy.match_real_truth``, fixed before any tuning) scores them
all: each detected segment belongs to the wearer's truth segment it overlaps most, pauses inside
a truth segment are neither errors nor edges, edges cut by the window (0 s, 60 s) are not
scored, a truth segment of 150 ms or more that nothing overlaps is a miss, and a detected
segment that overlaps none of the wearer's truth is a false segment (crosstalk). Pooled onset
and offset errors: median, P90 and max with n.

Tools:

* voxassay with each detector (``silero``, ``webrtc``, ``energy``), all four headsets as one
  recording (``detect_channels``: each headset checked against the others for crosstalk);
* voicebench (PyPI) ``voicebench.vad.detect_segments`` per headset, in its own venv;
* callback-voice (PyPI) ``SpeechDetector(SileroVad())`` per headset, in its own venv;
* Full-Duplex-Bench ``v1_v1.5/evaluation/get_timing.py`` ``seg_sec`` (its user merge gap), from
  the checkout given with ``--fdb-repo``, in its own venv (torch, torchaudio, silero-vad).

The peers' venvs are made under ``--peer-dir`` (kept between runs) with ``pip install`` from
the package index; a peer that cannot be installed or run prints ``not run`` and why.
Also printed: the FEE013 -> FEE016 floor transfer offset (FEE016's onset minus FEE013's end;
truth -10 ms) each tool's segments give.

Run: ``python benchmarks/bench_real_turns.py [--fdb-repo DIR] [--peer-dir DIR] [--no-peers]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.suites.duplex.evidence.acoustic_accuracy import (  # noqa: E402
    evaluate_meeting,
    match_real_truth,
    pooled,
    read_rttm,
)

AMI = ROOT.parent / "shared" / "real_conversations" / "ami_es2004a"
MIN_TRUTH_S = 0.15
TRANSFER = ("FEE013", "FEE016", 29.78)  # previous speaker, next speaker, truth onset (s)

VOICEBENCH = """
import json, sys, numpy as np, soundfile as sf
from voicebench.vad import detect_segments
out = {}
for p in sys.argv[1:]:
    x, sr = sf.read(p, dtype="float32")
    out[p] = [(s.start, s.end) for s in detect_segments(x, sr)]
print(json.dumps(out))
"""

CALLBACK = """
import json, sys, numpy as np, soundfile as sf
from callback_voice.providers.vad.silero_vad import SileroVad
from callback_voice.providers.vad.speech_detector import SpeechDetector
out = {}
for p in sys.argv[1:]:
    x, sr = sf.read(p, dtype="float32")
    det = SpeechDetector(SileroVad())
    edges = det.push(x) + [e for e in [det._tracker.flush()] if e is not None]
    segs, start = [], None
    for e in edges:
        if e.kind == "start":
            start = e.t_s
        elif start is not None:
            segs.append((start, e.t_s)); start = None
    out[p] = segs
print(json.dumps(out))
"""

FDB = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import get_timing as g
out = {}
for p in sys.argv[2:]:
    out[p] = [list(s) for s in g.seg_sec(g.load_wav(Path(p)), g.USER_MERGE_GAP)]
print(json.dumps(out))
"""

PEERS = {
    "voicebench": (["voicebench", "soundfile"], VOICEBENCH),
    "callback-voice": (["callback-voice", "soundfile"], CALLBACK),
    "full-duplex-bench": (["torch", "torchaudio", "silero-vad", "soundfile"], FDB),
}


def _venv(root: Path, name: str, packages: list[str]) -> Path:
    """A venv for one peer (made once), its packages installed; raises with pip's last line."""
    env = root / name
    py = env / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    done = env / ".installed"
    if not done.exists():
        res = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *packages], capture_output=True, text=True
        )
        if res.returncode != 0:
            lines = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
            raise RuntimeError((lines or res.stderr.splitlines() or ["pip failed"])[0])
        done.write_text("\n".join(packages))
    return py


def run_peer(name: str, root: Path, wavs: list[Path], fdb: Path | None) -> dict[str, list[Any]]:
    packages, script = PEERS[name]
    py = _venv(root, name, packages)
    args = [str(py), "-c", script]
    if name == "full-duplex-bench":
        if fdb is None:
            raise RuntimeError("give --fdb-repo DIR (a Full-Duplex-Bench checkout)")
        args.append(str(fdb / "v1_v1.5" / "evaluation"))
    res = subprocess.run([*args, *map(str, wavs)], capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError((res.stderr.strip().splitlines() or ["failed"])[-1][:200])
    return {Path(k).stem: v for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}


def score(
    segs: dict[str, list[Any]], truth: dict[str, list[tuple[float, float]]]
) -> dict[str, Any]:
    """The matching rule over every headset, pooled; and the floor transfer offset."""
    window = (0.0, 60.0)
    errors: list[float] = []
    misses = false = 0
    for spk, found in segs.items():
        m = match_real_truth([tuple(s) for s in found], truth[spk], window)
        errors += [r[k] for r in m["rows"] for k in ("onset_ms", "offset_ms") if r[k] is not None]
        misses += sum(1 for a, b in m["misses"] if b - a >= MIN_TRUTH_S)
        false += len(m["false"])
    prev, nxt, t = TRANSFER
    onset = min((s[0] for s in segs[nxt] if abs(s[0] - t) < 0.5), default=None)
    end = max((s[1] for s in segs[prev] if s[0] < t < s[1] + 0.5), default=None)
    transfer = None if onset is None or end is None else round((onset - end) * 1000.0)
    return {"edges": pooled(errors), "misses": misses, "false": false, "transfer_ms": transfer}


def truth_backchannels(truth: dict[str, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Truth backchannels of the FEE013/FEE016 pair: a segment of 1 s or less lying wholly
    inside the other's segment (the listener's "Mm-hmm", "Yeah" while the other holds the
    floor; the words files confirm each)."""
    a, b = truth[TRANSFER[0]], truth[TRANSFER[1]]
    out = []
    for mine, other in ((a, b), (b, a)):
        for s, e in mine:
            if e - s <= 1.0 and any(os_ <= s and e <= oe for os_, oe in other):
                out.append((s, e))
    return sorted(out)


def found_backchannels(segs: dict[str, list[Any]], ami: Path) -> list[tuple[float, float]]:
    """The sounds voxassay's turn layer takes for backchannels (user sounds and agent bursts)
    when the pair's segments are those a tool found: the same layer for every tool, each
    segment's level measured on its headset."""
    import numpy as np
    import soundfile as sf

    from voxassay.suites.duplex.scoring.turns import analyze_call

    def with_levels(spk: str) -> list[dict[str, float]]:
        x, sr = sf.read(str(ami / f"{spk}.wav"), dtype="float32")
        out = []
        for s, e in segs.get(spk, []):
            part = x[int(s * sr) : max(int(s * sr) + 1, int(e * sr))]
            level = 10.0 * np.log10(max(float(np.mean(part.astype(np.float64) ** 2)), 1e-12))
            out.append({"start_s": float(s), "end_s": float(e), "level_dbfs": level})
        return out

    a = analyze_call(with_levels(TRANSFER[0]), with_levels(TRANSFER[1]), duration_s=60.0)
    found = [(u.start_s, u.end_s) for u in a.sounds if u.kind == "backchannel"]
    found += [(b.start_s, b.end_s) for b in a.bursts if b.role == "backchannel"]
    return sorted(found)


def backchannel_pr(found: list[tuple[float, float]], truth: list[tuple[float, float]]) -> str:
    def hits(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> int:
        return sum(1 for s, e in xs if any(min(e, b) > max(s, a) for a, b in ys))

    return f"{hits(found, truth)}/{len(found)} {hits(truth, found)}/{len(truth)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ami", type=Path, default=AMI)
    ap.add_argument("--fdb-repo", type=Path, default=None)
    ap.add_argument("--peer-dir", type=Path, default=Path(tempfile.gettempdir()) / "voxassay-peers")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    if not (args.ami / "truth.rttm").exists():
        print(f"AMI truth not found at {args.ami}")
        return 2
    truth = read_rttm(args.ami / "truth.rttm")
    wavs = sorted(args.ami / f"{s}.wav" for s in truth if (args.ami / f"{s}.wav").exists())
    rows: list[tuple[str, dict[str, Any] | str]] = []
    for det in ("silero", "webrtc", "energy"):
        r = evaluate_meeting(args.ami, detector=det)
        segs = {spk: [tuple(x) for x in p["segments"]] for spk, p in r["speakers"].items()}
        rows.append((f"voxassay ({det})", {**score(segs, truth), "segs": segs}))
    if not args.no_peers:
        args.peer_dir.mkdir(parents=True, exist_ok=True)
        for name in PEERS:
            try:
                found = run_peer(name, args.peer_dir, wavs, args.fdb_repo)
                rows.append((name, {**score(found, truth), "segs": found}))
            except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
                rows.append((name, f"not run: {exc}"))
    print(f"== speech edges on {args.ami.name} (4 headsets, 60 s; matching rule fixed)")
    print(
        f"{'tool':26s} {'n':>3s} {'median':>7s} {'P90':>7s} {'max':>7s}  {'missed':>6s} "
        f"{'false':>5s}  {'FEE013->FEE016 transfer (truth -10 ms)':>38s}  backchannels P / R"
    )
    bc_truth = truth_backchannels(truth)
    for name, r in rows:
        if isinstance(r, str):
            print(f"{name:26s} {r}")
            continue
        e = r["edges"]
        tr = "none" if r["transfer_ms"] is None else f"{r['transfer_ms']} ms"
        print(
            f"{name:26s} {e['n']:3d} {e['median_ms']:7.1f} {e['p90_ms']:7.1f} {e['max_ms']:7.1f}"
            f"  {r['misses']:6d} {r['false']:5d}  {tr:>38s}  "
            f"{backchannel_pr(found_backchannels(r['segs'], args.ami), bc_truth)}"
        )
    print(
        "targets (issue 31): median <= 20 ms, P90 <= 60 ms, no miss of 150 ms or more, no false "
        "segment, FEE016's four backchannels found and no floor-taking segment called one"
    )
    print(
        f"backchannels: found ones that are truth / found, truth ones found / truth ({len(bc_truth)}:"
        f" {', '.join(f'{a:.2f}' for a, _ in bc_truth)} s), by voxassay's turn layer on each "
        "tool's FEE013 (user) / FEE016 (agent) segments"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
