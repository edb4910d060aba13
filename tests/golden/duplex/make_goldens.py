"""Write the duplex goldens (report.json, gate.json) from a checkout of the code to compare with.

The committed goldens were made on dbc1e82, the last commit before the duplex typed-chain
redesign began (the issue named 78ed857, main when it was filed; between the two, the demo's
speed work changed the live stack's audio, e.g. the rendered input of correction-entity-tracking
is 365120 samples now and was 384960 then, so live runs on 78ed857 are not the baseline of this
refactor. The stereo and Realtime goldens are the same on both commits):

    git worktree add ../old dbc1e82          # from the repository root
    cd ../old && PYTHONPATH=src python ../<this checkout>/tests/golden/duplex/make_goldens.py WORK

(WORK: any scratch folder; runs already made there are reused.) The goldens are written next
to this script; the tests imported are the old checkout's (the current directory).

The ``careful`` and ``naive`` goldens were remade on 22679df (issue 17) with ``--policies``
from that checkout itself: the fault-window fix of issue 17 (a fault with neither ``at_ms``
nor ``after`` now runs from the session's start) meant to move the network sessions, and
nothing else moved between dbc1e82 and 22679df on that machine. With them, each session's
``asr.final`` texts (``<policy>.heard.json``): whisper int8 on another CPU can hear a borderline
word differently ("park" / "part"), and the test compares such a machine's sessions apart.

    PYTHONPATH=src python tests/golden/duplex/make_goldens.py WORK --policies

Issue 19 added two provenance facts (``player``, ``loop``) to every bundle manifest, which
moved the manifest's ``harness`` block two lines down; the one figure that moved in the
``careful`` and ``naive`` reports was the line of the validator's "unknown field 'harness'"
note (97 -> 99, 45 sessions each), and the goldens were shifted by exactly that.

The ``careful`` and ``naive`` goldens were remade again with ``--policies`` for issues 31 and 32
(commit "Goldens remade after the real-recordings front end"). Issue 31's acoustic front end
(noise estimated locally, turn layer v4, a merge never holding a silence of the minimum gap)
moves acoustic edges in most sessions and so every latency aggregate; the session figures that
moved are naive's ambient-hum-and-chatter and bystander-tv-and-chatter (the request and chatter
now found under the hum and TV: one more wrong yield each) and backchannel-mm-hmm-right and
recovery-disconnect-during-write (a backchannel in the agent's silence demands nothing; an
answer starting 0.3-0.5 s before the user's end is an overlapping floor transfer). Those
aggregate moves had gone unseen: on the machines the suite ran on since, whisper heard a
borderline word differently, and the test then compares session figures only. Issue 32: a
rate gate decides on its interval, and an outage the scenario scripts is not paired as
``reconnect_recovery_ms`` (the reconnect-success gate is now unknown: nothing measures it).

Four cases, each a report.json and a gate.json of the example matrix with a baseline:
``careful`` and ``naive`` (the reference agent's two policies over the default scenario set,
virtual clock, zero compute, seed 0; each is the other's baseline), ``stereo`` (one call of
the duplex truth kit scored with ``duplex score --stereo``; a second call is its baseline) and
``realtime`` (the Realtime log of tests/suites/duplex/test_realtime_import.py imported, its
latency pairs summarised).
"""

from __future__ import annotations

import gzip
import importlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parents[2]
KIT = REPO.parent / "shared" / "duplex_truth_dev" / "wav"
MATRIX = "src/voxassay/suites/duplex/data/example_matrix.yaml"


def voxassay(*args: str) -> Path:
    out = subprocess.run(
        [sys.executable, "-m", "voxassay.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr)
    return Path(out.stdout.strip().splitlines()[-1])


def save(name: str, text: str) -> None:
    """Goldens are gzipped (report.json of a whole scenario set is over a megabyte)."""
    with gzip.open(HERE / f"{name}.gz", "wt", encoding="utf-8", compresslevel=9) as fh:
        fh.write(text)


def gate(run: Path, baseline: Path, name: str, work: Path) -> None:
    folder = voxassay(
        "duplex",
        "gate",
        str(run),
        "--matrix",
        MATRIX,
        "--baseline",
        str(baseline),
        "--out",
        str(work / f"gate-{name}"),
    )
    save(f"{name}.gate.json", (folder / "gate.json").read_text())


def heard(run: Path) -> dict[str, list[str]]:
    """Per session folder (scenario/repeat), the texts of the agent's ``asr.final`` events."""
    out: dict[str, list[str]] = {}
    for events in sorted(run.glob("bundles/*/*/events.jsonl")):
        texts = []
        for line in events.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("event_type") == "asr.final":
                texts.append(str((event.get("data") or {}).get("text", "")))
        out[f"{events.parts[-3]}/{events.parts[-2]}"] = texts
    return out


def main(work: Path, policies_only: bool = False) -> None:
    work.mkdir(parents=True, exist_ok=True)
    runs = {}
    for policy in ("careful", "naive"):
        done = sorted(p for p in (work / policy).glob("duplex-*") if (p / "report.json").is_file())
        if done:  # a run made earlier by this script with the same code
            runs[policy] = done[-1]
            continue
        runs[policy] = voxassay(
            "duplex",
            "run",
            "--scenarios",
            "default",
            "--agent",
            f"reference:{policy}",
            "--compute",
            "zero",
            "--seed",
            "0",
            "--out",
            str(work / policy),
        )
    for policy, run in runs.items():
        save(f"{policy}.heard.json", json.dumps(heard(run), indent=1, sort_keys=True))
    if policies_only:
        for policy in ("careful", "naive"):
            report = json.loads((runs[policy] / "report.json").read_text())
            report.pop("gate", None)
            for system in report["systems"]:  # the test's runs (the Python API) embed no gate;
                system.pop("gate", None)  # the CLI applies the example matrix to its report
            save(f"{policy}.report.json", json.dumps(report, indent=1))
        for policy, other in (("careful", "naive"), ("naive", "careful")):
            folder = voxassay(  # today's ``duplex gate`` writes into the run (a scratch copy)
                "duplex", "gate", str(runs[policy]), "--matrix", MATRIX,
                "--baseline", str(runs[other]),
            )  # fmt: skip
            save(f"{policy}.gate.json", (folder / "gate.json").read_text())
        return
    calls = {}
    for name in ("d02_bargein_cut_200", "d03_bargein_cut_450"):
        calls[name] = voxassay(
            "duplex", "score", "--stereo", str(KIT / f"{name}.wav"), "--out", str(work / name)
        )
    for name, run in (
        ("careful", runs["careful"]),
        ("naive", runs["naive"]),
        ("stereo", calls["d02_bargein_cut_200"]),
    ):
        save(f"{name}.report.json", (run / "report.json").read_text())
    gate(runs["careful"], runs["naive"], "careful", work)
    gate(runs["naive"], runs["careful"], "naive", work)
    gate(calls["d02_bargein_cut_200"], calls["d03_bargein_cut_450"], "stereo", work)
    realtime(work)


def realtime(work: Path) -> None:
    sys.path.insert(0, str(Path.cwd()))  # the tests of the checkout being measured
    from tests.suites.duplex.test_realtime_import import ga_session, write_wrapped

    # the module names of the checkout the goldens are made on (78ed857)
    import_realtime_log = importlib.import_module(
        "voxassay.suites.duplex.realtime_import"
    ).import_realtime_log
    metrics = importlib.import_module("voxassay.suites.duplex.metrics")
    pairs_from_events, summarize = metrics.pairs_from_events, metrics.summarize

    log = write_wrapped(work / "ga.jsonl", ga_session())
    result = import_realtime_log(log)
    pairs = pairs_from_events(result.events)
    doc = {"stats": result.stats, "summary": summarize(pairs, split_by=())}
    save("realtime.report.json", json.dumps(doc, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]), policies_only="--policies" in sys.argv[2:])
