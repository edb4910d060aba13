"""The Ray executor on a real multi-node Ray cluster on this machine (``tests.helpers.ray_cluster``:
a head with no CPUs and two one-CPU worker nodes, each its own raylet and processes).

Asserted: an ASR run on Ray gives the records of the thread executor (outputs and metrics, not
timings) with every record naming the node that ran it, over at least two nodes; killing a
worker node while it holds items loses nothing and records nothing twice; an item that kills
every worker it reaches is an error record with the reason once its retries are spent, and
the run goes on; a bad ``--ray-address`` is a usage error before any work.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import make_manifest
from tests.helpers.ray_cluster import RayCluster, ray_cluster
from tests.helpers.same import assert_same
from voxassay.cli.main import cli
from voxassay.core.records import Record

# on the worker of the other long modules that mostly wait (tests/conftest.py REAL_CLOCK_GROUP)
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("realclock")]

ASR = "faster-whisper"


SECRET_ENV = "VOXASSAY_RAY_TEST_KEY"
SECRET = "sk-voxassay-ray-5b1d07c3e9"
"""An API key the cluster's nodes get from their environment (as a deployment would give it)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    pytest.importorskip("ray", reason="pip install 'voxassay[ray]' (make test installs it)")
    old = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = SECRET  # the nodes inherit it when they start
    try:
        with ray_cluster(nodes=2) as c:
            yield c
    finally:
        if old is None:
            os.environ.pop(SECRET_ENV, None)
        else:
            os.environ[SECRET_ENV] = old


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_manifest(tmp_path_factory.mktemp("m") / "m.jsonl", limit=6)


@pytest.fixture(scope="module")
def threads(manifest: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Record]:
    from voxassay.suites.asr.suite import run_asr

    store = run_asr(manifest, [ASR], tmp_path_factory.mktemp("threads"), repeats=2)
    return {f"{r.id}#{r.repeat}": r for r in store.load_records().records}


def _records(run_dir: Path) -> list[Record]:
    return [Record.from_dict(json.loads(x)) for x in (run_dir / "records.jsonl").open()]


def _same_results(ray_recs: list[Record], threads: dict[str, Record]) -> None:
    keys = [f"{r.id}#{r.repeat}" for r in ray_recs]
    assert sorted(keys) == sorted(threads)  # every item once: none lost, none twice
    for r in ray_recs:
        t = threads[f"{r.id}#{r.repeat}"]
        assert r.status == t.status == "ok", r.error
        assert_same((_answer(r), r.metrics), (_answer(t), t.metrics), str(r.key))


def _keyed(store: object) -> dict[tuple[str, str, int], Record]:
    """A run's records by (id, system, repeat)."""
    return {r.key: r for r in store.load_records().records}  # type: ignore[attr-defined]


def _answer(r: Record) -> dict[str, object]:
    """The output without the system's description (on the first record of each load)."""
    return {k: v for k, v in r.output.items() if k != "system_info"}


def test_asr_on_ray_equals_threads_on_two_nodes(
    cluster: RayCluster, manifest: Path, threads: dict[str, Record], tmp_path: Path
) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "asr",
            "run",
            "-m",
            str(manifest),
            "-s",
            ASR,
            "--repeats",
            "2",
            "--out",
            str(tmp_path),
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--workers",
            "2",
            "--no-progress",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    recs = _records(run_dir)
    _same_results(recs, threads)
    nodes = {r.worker["node"] for r in recs if r.worker}
    assert len(recs) == 12 and all(r.worker and r.worker["executor"] == "ray" for r in recs)
    assert len(nodes) >= 2 and nodes <= {n.node_id for n in cluster.workers}
    execution = json.loads((run_dir / "run.json").read_text())["execution"]
    assert execution["executor"] == "ray" and execution["ray"]["nodes"] == 3


def test_a_node_killed_mid_run_loses_nothing_and_records_nothing_twice(
    cluster: RayCluster, manifest: Path, threads: dict[str, Record], tmp_path: Path
) -> None:
    from voxassay.suites.asr.suite import run_asr

    killed: list[str] = []

    def kill_first_node(rec: Record) -> None:  # the node of the first record still holds items
        if not killed and rec.worker:
            killed.append(rec.worker["node"])
            cluster.kill(rec.worker["node"])

    try:
        store = run_asr(
            manifest,
            [ASR],
            tmp_path,
            repeats=2,
            workers=2,
            executor="ray",
            ray_address=cluster.address,
            on_record=kill_first_node,
        )
    finally:
        cluster.add_worker()  # the next test gets two worker nodes again
    recs = _records(store.path)
    _same_results(recs, threads)
    assert killed
    retried = [r for r in recs if r.worker and r.worker["attempt"] > 1]
    assert retried, "no item was in flight on the killed node"
    assert all(r.worker and r.worker["node"] != killed[0] for r in retried)


def test_an_item_that_kills_every_worker_is_an_error_record_and_the_run_goes_on(
    cluster: RayCluster, manifest: Path, tmp_path: Path
) -> None:
    """Only the item an actor was running when it died is charged the death: the short items
    queued behind the long ones (two in flight per actor) are never lost with them."""
    from voxassay.suites.asr.suite import run_asr

    store = run_asr(
        manifest,
        ["python:tests.helpers.ray_systems:dies_on_long_audio"],
        tmp_path,
        workers=1,  # one actor: a short item is always queued behind a long one
        executor="ray",
        ray_address=cluster.address,
        write_reports=False,
    )
    recs = {r.id: r for r in _records(store.path)}
    durations = {
        json.loads(x)["id"]: json.loads(x)["duration"] for x in manifest.read_text().splitlines()
    }
    assert set(recs) == set(durations)
    for item, rec in recs.items():
        if durations[item] > 5:
            assert rec.status == "error" and rec.error is not None
            assert rec.error["kind"] == "worker_lost"
            assert "died 3 time(s)" in rec.error["message"], rec.error
        else:
            assert rec.status == "ok" and rec.output["pred_text"] == "short", rec


def _listening() -> set[tuple[str, int]]:
    """Every TCP socket listening on this machine: (address, port), from /proc/net."""
    out: set[tuple[str, int]] = set()
    for name, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # LISTEN
                continue
            hexaddr, hexport = local.split(":")
            raw = bytes.fromhex(hexaddr)
            words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]  # little-endian words
            addr = b"".join(words)
            if width == 8:
                text = ".".join(str(b) for b in addr)
            elif addr[:12] == b"\0" * 10 + b"\xff\xff":
                text = ".".join(str(b) for b in addr[12:])  # IPv4-mapped
            else:
                text = addr.hex()
            out.add((text, int(hexport, 16)))
    return out


def test_a_ray_started_for_the_run_listens_on_loopback_only(tmp_path: Path) -> None:
    """Without --ray-address the run starts its own Ray, even with RAY_ADDRESS set; every
    server it opens (GCS, raylet, object manager, workers) listens on 127.0.0.1, never on the
    machine's addresses."""
    import subprocess
    import sys

    pytest.importorskip("ray", reason="pip install 'voxassay[ray]'")
    before = _listening()
    script = (
        "import sys, time\n"
        "from voxassay.core.ray_executor import RayExecutor\n"
        "ex = RayExecutor(1)\n"
        "print(list(ex.map_unordered(lambda: (lambda t: t * 2), [1, 2, 3])), flush=True)\n"
        "sys.stdin.readline()\n"
        "ex.close()\n"
    )
    # a cluster named in the environment (as `ray start` or a joined driver leaves it) is not
    # joined: without --ray-address the run starts its own
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:9"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert sorted(json.loads(proc.stdout.readline())) == [2, 4, 6]
        opened = _listening() - before
    finally:
        proc.communicate("\n", timeout=60)
    assert len(opened) >= 3, opened  # GCS, raylet, object manager at least
    assert {addr for addr, _ in opened} == {"127.0.0.1"}, opened


def test_tts_on_ray_equals_threads_and_the_driver_writes_the_audio(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """espeak-ng over the demo's phone numbers and dates with the faster-whisper round trip
    and every measure: the same records and byte-identical WAVs from Ray actors (which
    synthesize and measure) as from this process; only the driver wrote the run."""
    from voxassay.suites.tts.suite import run_tts

    args = dict(items="demo", only=["phone_numbers", "dates"], write_reports=False)
    local = run_tts(["espeak-ng:en-us+f3"], tmp_path / "local", **args)  # type: ignore[arg-type]
    remote = run_tts(
        ["espeak-ng:en-us+f3"],
        tmp_path / "ray",
        executor="ray",
        workers=1,  # one actor loads the models (two nodes: the ASR test)
        ray_address=cluster.address,
        **args,  # type: ignore[arg-type]
    )
    mine, theirs = _keyed(local), _keyed(remote)
    assert set(mine) == set(theirs) and len(mine) >= 4
    for key, r in theirs.items():
        assert r.status == mine[key].status == "ok", r.error
        assert_same((_answer(r), r.metrics), (_answer(mine[key]), mine[key].metrics), str(key))
        assert r.worker and r.worker["node"] in {n.node_id for n in cluster.workers}
        wav = r.output["audio_path"]
        assert (remote.path / wav).read_bytes() == (local.path / wav).read_bytes()
    execution = json.loads((remote.path / "run.json").read_text())["execution"]
    assert execution["executor"] == "ray" and execution["workers"] == 1


def test_su_on_ray_equals_threads_with_a_real_speaker_model(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """resemblyzer (a speaker encoder on torch) on real same/different-speaker pairs: the
    calibration split and the test split run on Ray actors, with the pairs' clips shipped
    through the object store, and give the thread executor's records (scores, answers and
    the threshold calibrated from them)."""
    from tests.conftest import csv_rows, shared_data
    from voxassay.core.items import Item, write_manifest
    from voxassay.suites.su.pairs import build_pairs
    from voxassay.suites.su.run import run_su

    pytest.importorskip("resemblyzer", reason="pip install 'voxassay[speaker]'")
    clips = [
        Item(
            id=Path(r["path"]).stem,
            audio_filepath=str(shared_data() / "speaker" / r["path"]),
            speaker=r["speaker"],
        )
        for r in csv_rows("speaker")
    ]
    pairs = tmp_path / "pairs.jsonl"
    write_manifest(build_pairs(clips, "speaker_match", n=16, seed=1), pairs)
    common = dict(tasks=["speaker_match"], systems=["resemblyzer"], write_reports=False)
    local = run_su(pairs, out=tmp_path / "local", **common)  # type: ignore[arg-type]
    remote = run_su(
        pairs,
        out=tmp_path / "ray",
        executor="ray",
        workers=1,  # one actor loads the models (two nodes: the ASR test)
        ray_address=cluster.address,
        ship_audio=True,  # both clips of each pair through the object store
        **common,  # type: ignore[arg-type]
    )
    mine, theirs = _keyed(local), _keyed(remote)
    assert set(mine) == set(theirs) and len(mine) == 32  # two evals per pair
    for key, r in theirs.items():
        assert r.status == mine[key].status == "ok", r.error
        assert_same((_answer(r), r.metrics), (_answer(mine[key]), mine[key].metrics), str(key))
        assert r.worker and r.worker["executor"] == "ray"
    assert json.loads((remote.path / "run.json").read_text())["execution"]["ship_audio"] is True
    thresholds = [json.loads((s.path / "run.json").read_text())["systems"] for s in (local, remote)]
    assert_same(
        thresholds[0]["resemblyzer"]["thresholds"], thresholds[1]["resemblyzer"]["thresholds"]
    )


def test_sts_on_ray_equals_threads_and_the_driver_writes_the_answers(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """The offline cascade (faster-whisper, rules, piper) answering a natural and a scripted
    scenario (two earlier turns played first), one item each, from the audio and from the
    transcript: two actors give this process's records (all but the wall-clock first-audio
    time) and byte-identical answer WAVs, written by the driver."""
    from tests.reference.test_fault_injection import _needs_speech_stack
    from voxassay.suites.sts.runner import run_sts

    _needs_speech_stack()
    spec = "reference-sts:prosody_aware"
    args = dict(
        only=["parcel-eu", "head-eu"],
        cache_dir=tmp_path / "cache",
        write_reports=False,
    )
    local = run_sts([spec], tmp_path / "local", **args)  # type: ignore[arg-type]
    remote = run_sts(
        [spec],
        tmp_path / "ray",
        executor="ray",
        workers=2,
        ray_address=cluster.address,
        **args,  # type: ignore[arg-type]
    )
    mine, theirs = _keyed(local), _keyed(remote)
    assert set(mine) == set(theirs) and len(mine) == 4  # 2 items x (ao, to)

    def same(r: Record) -> dict[str, object]:
        return {k: v for k, v in r.metrics.items() if k != "first_audio_ms"}

    for key, r in theirs.items():
        assert r.status == mine[key].status == "ok", r.error
        assert_same((r.output, same(r)), (mine[key].output, same(mine[key])), str(key))
        assert r.worker and r.worker["node"] in {n.node_id for n in cluster.workers}
        wav = r.output["audio_path"]
        assert (remote.path / wav).read_bytes() == (local.path / wav).read_bytes()
    said = {r.id: r.output["text"] for r in mine.values()}
    assert said["head-eu#ao"] != said["parcel-eu#ao"]  # two dialogues, not one answer
    info = json.loads((remote.path / "run.json").read_text())
    assert info["execution"]["executor"] == "ray" and info["execution"]["workers"] == 2
    assert info["systems"][spec]["system_info"] == local.info()["systems"][spec]["system_info"]


_EVENT_ID = re.compile(r"\b[0-9a-f]{32}\b")


def _session_view(rec: Record, run: Path) -> str:
    """A session record's output as JSON, without what differs between two runs of the same
    sessions: the run's folder and id (in session ids), the ledger's random event ids, the
    agent's compute seconds and the process's CPU figures (timings of the machine)."""
    output = dict(rec.output)
    output["session_stats"] = {
        k: v for k, v in output["session_stats"].items() if k not in ("agent_compute_s", "cpu")
    }
    text = json.dumps(output, sort_keys=True).replace(str(run), "RUN")
    return _EVENT_ID.sub("E", re.sub(r"-r(\d+)-[0-9a-f]{4}\b", r"-r\1-ID", text))


def test_duplex_sessions_and_scoring_on_ray_equal_threads(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """The reference agent (careful) on two scenarios (a cut-in, network faults) on the virtual clock with compute counted as zero: Ray actors give this
    process's records (metrics exactly; outputs but for run ids and random event ids) and
    byte-identical input and output audio; the self-check ran on the workers. Scoring the
    Ray run's bundles on Ray gives the records of scoring them here."""
    from tests.reference.test_fault_injection import _needs_speech_stack
    from voxassay.suites.duplex.evidence.bundle_io import plan_bundles
    from voxassay.suites.duplex.live.runner import run_scenarios, select_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.scoring.score_run import score_bundles

    _needs_speech_stack()
    chosen = ["interruption-2s", "network-jitter-loss-drop"]
    scenarios = select_scenarios(load_scenario_set("demo"), chosen)
    args = dict(compute="zero", cache_dir=tmp_path / "cache", write_reports=False)
    local = run_scenarios(scenarios, "reference:careful", tmp_path / "local", **args)  # type: ignore[arg-type]
    remote = run_scenarios(
        scenarios,
        "reference:careful",
        tmp_path / "ray",
        executor="ray",
        workers=2,
        ray_address=cluster.address,
        **args,  # type: ignore[arg-type]
    )
    mine, theirs = _keyed(local), _keyed(remote)
    assert set(mine) == set(theirs) and len(mine) == 2
    for key, r in theirs.items():
        m = mine[key]
        assert r.status == m.status == "ok", r.error
        assert_same(r.metrics, m.metrics, str(r.key))
        assert _session_view(r, remote.path) == _session_view(m, local.path)
        assert r.worker and r.worker["node"] in {n.node_id for n in cluster.workers}
        for name in ("input.wav", "output.wav", "scenario.yaml"):
            stored = r.output["bundle"]
            assert (remote.path / stored / name).read_bytes() == (
                local.path / stored / name
            ).read_bytes()
    info = json.loads((remote.path / "run.json").read_text())
    check = info["self_check"]
    assert check["latency"]["in_process"] and check["pid"] != os.getpid()
    assert {c["pid"] for c in check["workers"]} <= {r.worker["pid"] for r in theirs.values()}
    assert info["execution"]["executor"] == "ray" and info["execution"]["workers"] == 2
    # the bundles scored again, here and on Ray
    refs = plan_bundles([remote.path / "bundles"])
    here = score_bundles(refs, tmp_path / "score-here", write_reports=False)
    there = score_bundles(
        plan_bundles([remote.path / "bundles"]),
        tmp_path / "score-ray",
        executor="ray",
        workers=2,
        ray_address=cluster.address,
        write_reports=False,
    )
    a = {r.key: r for r in here.load_records().records}
    b = {r.key: r for r in there.load_records().records}
    assert set(a) == set(b) and len(a) == 2
    for key, r in b.items():
        assert r.status == a[key].status == "ok" and r.worker
        assert_same((r.metrics, r.output), (a[key].metrics, a[key].output), str(key))


def test_duplex_with_ship_audio_workers_render_nothing_and_write_nothing_of_the_run(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """An agent that reports the files its worker opened under the scenarios' folder, the
    render cache and the run's folder: rendering on the workers opens the cache; with
    --ship-audio the driver renders, the segments travel through Ray's object store, and the
    workers open nothing there (the bundles reach the run through the driver)."""
    import shutil

    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    scen = tmp_path / "scenarios"
    scen.mkdir()
    by_id = {sc.id: p for sc, p in load_scenario_set("demo")}
    for sid in ("interruption-500ms", "normal-turns-pause-600ms"):
        shutil.copy(by_id[sid], scen / by_id[sid].name)
    out = tmp_path / "runs"  # the render cache is OUT/.render-cache
    agent = f"python:tests.helpers.audited_agent:audited_energy?watch={scen},{out}"
    opened = {}
    for ship in (False, True):
        res = CliRunner().invoke(
            cli,
            ["duplex", "run", "--scenarios", str(scen), "--agent", agent, "--out", str(out),
             "--executor", "ray", "--ray-address", cluster.address, "--workers", "2",
             "--no-progress", *(["--ship-audio"] if ship else [])],
            catch_exceptions=False,
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        run = Path(res.stdout.strip().splitlines()[-1])
        manifests = sorted(run.glob("bundles/*/0/manifest.json"))
        assert len(manifests) == 2
        opened[ship] = [json.loads(m.read_text())["system"]["config"]["opened"] for m in manifests]
        execution = json.loads((run / "run.json").read_text())["execution"]
        assert execution["ship_audio"] is ship
    assert max(opened[False]) > 0, opened  # a worker that rendered read the cache
    assert opened[True] == [0, 0], opened


def test_with_ship_audio_workers_open_no_file_of_the_manifest_or_the_run(
    cluster: RayCluster, manifest: Path, tmp_path: Path
) -> None:
    """An audit hook in every worker counts the files it opens under the audio's folder and the
    run's folder. By path, the workers open the audio; with --ship-audio they open nothing
    there: the audio came through Ray's object store, and the records reach the run through
    the driver. (The hook is installed when a worker builds its system, which it does after
    reading its first item: each worker's first item precedes it, hence 12 tasks.)"""
    from tests.conftest import shared_data

    out = tmp_path / "runs"
    out.mkdir()
    watch = f"{shared_data() / 'read_speech'},{out}"
    system = f"python:tests.helpers.ray_systems:opened_files?watch={watch}"
    runs = {}
    for ship in (False, True):
        res = CliRunner().invoke(
            cli,
            ["asr", "run", "-m", str(manifest), "-s", system, "--out", str(out), "--repeats", "2",
             "--executor", "ray", "--ray-address", cluster.address, "--workers", "2",
             "--no-progress", *(["--ship-audio"] if ship else [])],
            catch_exceptions=False,
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        runs[ship] = Path(res.stdout.strip().splitlines()[-1])
    by_path = [r.output["pred_text"] for r in _records(runs[False])]
    shipped = [r.output["pred_text"] for r in _records(runs[True])]
    assert len(shipped) == 12 and all(r.worker for r in _records(runs[True]))
    # the hook sees the workers' opens: a worker with 6 or more of the 12 saw 5 or more
    assert max(int(t.split(":")[1]) for t in by_path) >= 5
    assert set(shipped) == {"opened:0"}, shipped
    execution = json.loads((runs[True] / "run.json").read_text())["execution"]
    assert execution["ship_audio"] is True and execution["executor"] == "ray"


def _lines(out: Path) -> list[str]:
    """The complete lines of the run's records.jsonl (a kill may leave half a line)."""
    found = sorted(out.glob("*/records.jsonl"))
    text = found[0].read_text() if found else ""
    return [x for x in text.splitlines(keepends=True) if x.endswith("\n")]


def _run_until(
    args: list[str], out: Path, kill_at: int | None, sig: int = 9, actors: list[int] | None = None
) -> int:
    """Run ``voxassay`` in a subprocess; send it ``sig`` (SIGKILL; SIGINT is Ctrl-C) once the
    run under ``out`` holds ``kill_at`` records (None: let it finish). Its exit code (-9 when
    killed, 130 when interrupted). ``actors`` gets the actor processes alive at the signal."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "voxassay.cli.main", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    while kill_at is not None and proc.poll() is None and time.monotonic() < deadline:
        if len(_lines(out)) >= kill_at:
            if actors is not None:
                actors.extend(_actor_processes())
            proc.send_signal(signal.Signals(sig))
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode in (0, -9, 130), err[-2000:]
    if proc.returncode == 130:
        assert "interrupted" in err, err[-2000:]
    return proc.returncode


def _actor_processes() -> list[int]:
    """PIDs of the processes on this machine that host a voxassay Ray actor."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and b"_Host" in cmd and b"ray::" in cmd:
            pids.append(int(proc.name))
    return pids


def test_killed_and_interrupted_drivers_resume_on_ray_and_locally(
    cluster: RayCluster, manifest: Path, tmp_path: Path
) -> None:
    """Started with threads and killed; resumed on Ray and stopped with Ctrl-C (exit 130, the
    run's actors gone from the cluster); resumed on Ray and killed; resumed with threads and
    killed; finished on Ray. Every item is in the run once, what was written before each stop
    is kept as it was, and the records made on Ray name their node."""
    import time

    out = tmp_path / "runs"
    base = ["asr", "run", "-m", str(manifest), "-s", "mock:hang?seconds=0.4&text=x",
            "--repeats", "4", "--out", str(out), "--no-progress", "--workers", "2"]  # fmt: skip
    ray = ["--executor", "ray", "--ray-address", cluster.address]
    assert _run_until(base, out, kill_at=4) == -9
    kept = _lines(out)
    steps = [(ray, 2, 130), (ray, 9, -9), ([], 9, -9)]  # where it runs, the signal, its exit
    for where, sig, code in steps:
        actors: list[int] = []
        args = [*base, "--resume", *where]
        assert _run_until(args, out, kill_at=len(kept) + 3, sig=sig, actors=actors) == code
        now = _lines(out)
        assert now[: len(kept)] == kept and len(now) > len(kept)  # nothing written was lost
        kept = now
        if sig == 2:  # Ctrl-C removed the run's actors (a kill leaves Ray to reap them)
            assert actors, "no actor was running when Ctrl-C came"
            deadline = time.monotonic() + 20
            while _actor_processes() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _actor_processes()
    assert _run_until([*base, "--resume", *ray], out, kill_at=None) == 0  # finished on Ray
    final = _lines(out)
    assert final[: len(kept)] == kept
    recs = [Record.from_dict(json.loads(x)) for x in final]
    keys = [r.key for r in recs]
    assert len(keys) == len(set(keys)) == 24  # 6 items x 4 repeats, none twice
    on_ray = {r.key for r in recs if r.worker}
    assert on_ray and len(on_ray) < 24  # some done on Ray, the rest with threads
    assert {r.key for r in recs[len(kept) :]} <= on_ray  # the last ones on Ray
    assert {r.worker["node"] for r in recs if r.worker} <= {n.node_id for n in cluster.workers}


def test_workers_read_the_key_from_their_environment_and_ray_keeps_no_copy(
    cluster: RayCluster, manifest: Path, tmp_path: Path
) -> None:
    """An OpenAI-compatible server on loopback that requires the key: the run on Ray
    authenticates (the workers read it from their own environment) and no file in Ray's
    session folder (logs, task and actor records, spilled objects) holds it."""
    from tests.systems.fake_openai_server import FakeOpenAIServer
    from voxassay.suites.asr.suite import run_asr

    with FakeOpenAIServer(token=SECRET) as server:
        spec = f"openai-compat:{server.base_url}?model=whisper-1&key_env={SECRET_ENV}"
        store = run_asr(
            manifest,
            [spec],
            tmp_path,
            workers=2,
            executor="ray",
            ray_address=cluster.address,
            write_reports=False,
        )
        assert len(server.requests) >= 6  # the items, and each worker's warm-up call
        assert {r["headers"]["Authorization"] for r in server.requests} == {f"Bearer {SECRET}"}
    recs = _records(store.path)
    assert len(recs) == 6 and all(r.status == "ok" and r.worker for r in recs), recs
    session = Path(cluster.cluster.head_node.get_session_dir_path())
    files = [p for p in session.rglob("*") if p.is_file()]
    assert len(files) > 10  # logs and records of the run are there
    holding = [p for p in files if SECRET.encode() in p.read_bytes()]
    assert holding == []
    assert SECRET not in (store.path / "run.json").read_text()
