"""An agent nobody here wrote the turn-taking of: ``examples/pipecat_desk`` (Pipecat 1.14 in its
own environment, ``make pipecat-env``) reached over Pipecat's own transports, the Twilio
serializer's WebSocket and SmallWebRTC, on default scenarios of categories 2-4
(interruption, backchannel, ambient echo residue, bystander TV). The two transports run at
once, each with its own bot process.

Asserted: every session is a complete, scored bundle; the ledger holds Pipecat's own VAD,
transcription and interruption events (producer ``pipecat``, with its clock record) from the
observer, inside the session and in causal order with the harness's truth (Pipecat's VAD
start follows the user's speech start); the bot ran in another process. The figures of how
Pipecat's interruption handling differs from the reference agent's are printed (``-s``) for
the closing note, not asserted: they are a finding, not a target.

Under ``CI=true`` a missing Pipecat environment fails the test; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.helpers.duplex import need
from tests.helpers.served import stop_process
from tests.reference.test_fault_injection import _needs_speech_stack

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.xdist_group("realclock")]

PYTHON = Path(os.environ.get("VOXASSAY_PIPECAT_PYTHON", REPO / ".venv-pipecat" / "bin" / "python"))
BOT = REPO / "examples" / "pipecat_desk" / "bot.py"
PLAN = {
    "twilio": ("interruption-2s", "backchannel-okay", "ambient-echo-residue"),
    "smallwebrtc": ("interruption-2s", "backchannel-during-answer", "bystander-tv-and-chatter"),
}


class Bot:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(PYTHON), str(BOT), "--port", "0"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"the Pipecat desk did not start: {line!r}")
        self.url = line

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.helpers.duplex import importable, render_cache
    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    _needs_speech_stack()
    need("pipecat", PYTHON.is_file(), f"no Pipecat environment at {PYTHON} (make pipecat-env)")
    need("aiortc", importable("aiortc"), "pip install 'voxassay[webrtc]' (make test installs it)")
    cache = Path(render_cache(tmp_path_factory))
    scenarios = {sc.id: (sc, p) for sc, p in load_scenario_set("default")}
    bots = {name: Bot() for name in PLAN}
    specs = {
        "twilio": f"twilio-ws:{bots['twilio'].url.replace('http', 'ws')}/media"
        f"?observer={bots['twilio'].url}/voxassay/events",
        "smallwebrtc": f"smallwebrtc:{bots['smallwebrtc'].url}/api/offer"
        f"?observer={bots['smallwebrtc'].url}/voxassay/events",
    }
    stores: dict[str, Any] = {}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            stores[name] = run_scenarios(
                [scenarios[s] for s in PLAN[name]],
                specs[name],
                tmp_path_factory.mktemp(name),
                clock="real",
                self_check=False,
                cache_dir=cache,
            )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in PLAN]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        for bot in bots.values():
            bot.stop()
    if errors:
        raise errors[0]
    yield {"stores": stores, "pids": {b.proc.pid for b in bots.values()}}


def _events(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (bundle / "events.jsonl").read_text().splitlines()]


def test_every_session_is_a_complete_scored_bundle(runs: dict[str, Any]) -> None:
    from voxassay.suites.duplex.evidence.validate import validate_bundle

    for name, store in runs["stores"].items():
        records = [json.loads(x) for x in (store.path / "records.jsonl").read_text().splitlines()]
        assert [r["id"] for r in records] == list(PLAN[name])
        assert all(r["status"] == "ok" for r in records), [r.get("error") for r in records]
        for r in records:
            assert r["output"]["evidence"]["level"] == "L2"  # modelled playback here
            bundle = store.path / r["output"]["bundle"]
            problems = [p for p in validate_bundle(bundle) if p.severity == "error"]
            assert not problems, [p.format() for p in problems]
            agent = [e for e in _events(bundle) if e["producer"] == "agent"]
            assert any(e["event_type"] == "response.created" for e in agent), "the bot never spoke"
        assert os.getpid() not in runs["pids"]


def test_pipecats_own_events_are_in_the_ledger_in_causal_order(runs: dict[str, Any]) -> None:
    for store in runs["stores"].values():
        for manifest in sorted(store.path.glob("bundles/**/manifest.json")):
            events = _events(manifest.parent)
            mine = [e for e in events if e["producer"] == "pipecat"]
            kinds = {e["event_type"] for e in mine}
            assert {"vad.speech_started", "vad.speech_stopped", "asr.final"} <= kinds, kinds
            assert any(
                e["event_type"] == "clock.producer" and e["data"]["producer"] == "pipecat"
                for e in events
            )
            assert any(
                e["data"].get("text", "").strip() for e in mine if e["event_type"] == "asr.final"
            )
            end = max(e["monotonic_ns"] for e in events)
            assert all(0 <= e["monotonic_ns"] <= end for e in mine)
            first_user = min(
                e["monotonic_ns"] for e in events if e["event_type"] == "user.speech_started"
            )
            first_vad = min(
                e["monotonic_ns"] for e in mine if e["event_type"] == "vad.speech_started"
            )
            assert first_vad > first_user  # Pipecat's VAD hears the user after the user speaks
            info = json.loads((manifest.parent / "manifest.json").read_text())["system"]["config"]
            assert info["observer"]["events"] == len(mine) and info["observer"]["dropped"] == 0


def test_print_how_pipecat_handles_interruptions(runs: dict[str, Any]) -> None:
    """Figures for the closing note: per session, Pipecat's interruptions while the bot was
    speaking, the cut responses, and the report's turn metrics."""
    for name, store in runs["stores"].items():
        report = json.loads((store.path / "report.json").read_text())
        overall = report["systems"][0]["overall"]
        rates = overall.get("rates") or {}
        lat = overall.get("latencies") or {}
        keys = ("behaviour_accuracy", "backchannel_false_cancel", "false_cancel_rate")
        shown = {k: f"{rates[k].get('k')}/{rates[k].get('n')}" for k in keys if k in rates}
        stops = (lat.get("interrupt_stop_ms") or {}).get("p50")
        print(f"\n[{name}] {shown}; interrupt_stop_ms p50 {stops}")
        for manifest in sorted(store.path.glob("bundles/**/manifest.json")):
            events = _events(manifest.parent)
            interrupts = [
                e
                for e in events
                if e["producer"] == "pipecat" and e["data"].get("action") == "interrupt"
            ]
            cut = [e for e in events if e["event_type"] == "playback.interrupted"]
            done = [e for e in events if e["event_type"] == "response.done"]
            print(
                f"[{name}] {manifest.parent.parent.name}: {len(interrupts)} InterruptionFrames, "
                f"{len(done)} responses, {len(cut)} cut by the player"
            )
    assert runs["stores"]
