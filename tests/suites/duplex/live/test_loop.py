"""L3 earned on this machine: ``duplex run --loop pulseaudio`` against the reference agent's
careful and naive policies, each in its own ``voxassay reference serve`` process over the
Realtime WebSocket, on an interruption and a bystander scenario of the default set.

Asserted:
- every bundle is L3 *derived from its files*: ``output.wav`` is the capture at the offset
  ``loop.json`` states, the capture matches ``received.wav`` window by window at the stated
  latency, the player was a process of its own, the barge-in stop is the player's flush
  (``loop.json`` records it, and ``output.wav`` is silent after it);
- the run's self-check measured the loop's latency and jitter, the report states them (the
  figures themselves are the machine's: ``benchmarks/bench_loop.py`` prints them; asserted
  here is that each is the median and spread of the windows it states);
- gating: a test matrix with the example's gates at L3 ships careful and not naive and names
  the gates that decided; the same gates with the contract's L4 floor for duplicate side
  effects end in ``collect_more_data`` for careful and name that gate;
- forged bundles that claim the loop are refused L3, each with its reason.

Under ``CI=true`` a PulseAudio that cannot start fails the test; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml
from click.testing import CliRunner

from tests.helpers.duplex import need
from tests.helpers.served import Served
from tests.reference.test_fault_injection import _needs_speech_stack
from voxassay.cli.main import cli
from voxassay.contracts.duplex.evidence import derive_evidence_level
from voxassay.contracts.duplex.loop_check import LAG_AFTER_MS, LAG_BEFORE_MS
from voxassay.contracts.duplex.manifest import BundleManifest, file_entry

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.xdist_group("realclock")]

SCENARIOS = ("interruption-2s", "bystander-in-gap")
MATRIX = Path(__file__).parent / "data" / "l3-matrix.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.helpers.duplex import render_cache
    from voxassay.suites.duplex.evidence.validate import load_matrix
    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.systems.duplex.pulse_simple import library_available
    from voxassay.systems.duplex.sound_server import pulseaudio_path

    _needs_speech_stack()
    need(
        "pulseaudio",
        pulseaudio_path() is not None and library_available(),
        "apt install pulseaudio pulseaudio-utils (make system-deps-test)",
    )
    careful, naive = Served("realtime-ws", "careful"), Served("realtime-ws", "naive")
    try:
        chosen = [(sc, p) for sc, p in load_scenario_set("default") if sc.id in SCENARIOS]
        store = run_scenarios(
            chosen,
            [careful.url, naive.url],
            tmp_path_factory.mktemp("l3"),
            clock="real",
            loop="pulseaudio",
            cache_dir=Path(render_cache(tmp_path_factory)),
            matrix=load_matrix(MATRIX),
            matrix_source=str(MATRIX),
        )
        yield {"store": store, "careful": careful.url, "naive": naive.url}
    finally:
        careful.stop()
        naive.stop()


def _bundles(store: Any) -> list[Path]:
    return sorted(p.parent for p in store.path.glob("bundles/**/manifest.json"))


def _pcm(path: Path) -> np.ndarray:
    return sf.read(path, dtype="int16")[0]


def test_every_session_is_l3_derived_from_its_capture(run: dict[str, Any]) -> None:
    store = run["store"]
    bundles = _bundles(store)
    assert len(bundles) == len(SCENARIOS) * 2
    for b in bundles:
        manifest = BundleManifest.model_validate_json((b / "manifest.json").read_text())
        level, reasons = derive_evidence_level(manifest, b)
        assert level == "L3", (b, reasons)
        listed = {f.path for f in manifest.files}
        assert {"capture.wav", "received.wav", "loop.json", "output.wav"} <= listed
        assert manifest.provenance.player == "process"
        assert manifest.provenance.loop == "virtual_sound_card"
        loop = json.loads((b / "loop.json").read_text())
        assert loop["player"]["pid"] not in (0, os.getpid())
        assert loop["pulseaudio_version"].split(".")[0] in ("15", "16", "17")
        _states_its_windows(loop)
        assert loop["n_windows"] >= 3 and loop["uncaptured_samples"] == 0
        out, cap = _pcm(b / "output.wav"), _pcm(b / "capture.wav")
        k = loop["capture"]["offset_samples"]
        assert np.array_equal(out, cap[k : k + out.size])
        assert manifest.producers["player"].startswith("voxassay pulse_player")
    records = [json.loads(x) for x in (store.path / "records.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in records)
    assert {r["output"]["evidence"]["level"] for r in records} == {"L3"}


def _states_its_windows(loop: dict[str, Any]) -> None:
    """The loop's stated latency is the median of its counted windows' lags and its jitter
    their standard deviation (``loop.json``'s method: a window counts when it correlates at
    0.5 or more), every counted lag inside the search range, and most windows counted."""
    counted = [w for w in loop["windows"] if w["correlation"] >= 0.5]
    lags = [w["lag_ms"] for w in counted]
    assert len(lags) == loop["n_windows"] and 2 * len(lags) >= len(loop["windows"])
    assert all(-20 <= lag <= 300 for lag in lags)
    assert loop["latency_ms"] == pytest.approx(float(np.median(lags)), abs=1e-3)
    assert loop["jitter_ms"] == pytest.approx(float(np.std(lags)), abs=1e-3)


def test_a_barge_in_stop_is_the_players_flush_on_the_capture(run: dict[str, Any]) -> None:
    """Careful stops for the cut-in: the player flushed (loop.json) after the ledger's
    ``playback.interrupted`` and before the user's cut-in ended, and the capture is silent
    from 300 ms after the flush while the user speaks on (the null sink hands its monitor what
    it rendered ahead before the flush: 40-90 ms measured, so 300 ms is over 3x that)."""
    b = next(
        p
        for p in (run["store"].path / "bundles" / "interruption-2s" / "0").iterdir()
        if json.loads((p / "manifest.json").read_text())["system"]["name"] == run["careful"]
    )
    loop = json.loads((b / "loop.json").read_text())
    events = [json.loads(x) for x in (b / "events.jsonl").read_text().splitlines()]
    cut = [e for e in events if e["event_type"] == "playback.interrupted"]
    assert cut and loop["flushes_ms"], "the cut-in did not stop playback"
    cut_ms = cut[0]["monotonic_ns"] / 1e6
    flush_ms = min(loop["flushes_ms"], key=lambda f: abs(f - cut_ms))
    user_end = [
        e["monotonic_ns"] / 1e6
        for e in events
        if e["event_type"] == "user.speech_stopped" and e["monotonic_ns"] / 1e6 > cut_ms
    ]
    assert user_end and cut_ms <= flush_ms < user_end[0]
    sr = loop["sample_rate"]
    out = np.abs(_pcm(b / "output.wav").astype(np.int32))
    before = out[round((cut_ms - 300) * sr / 1000) : round(cut_ms * sr / 1000)]
    after = out[round((flush_ms + 300) * sr / 1000) : round(user_end[0] * sr / 1000)]
    assert after.size > sr // 5
    assert before.max() > 1000 and after.max() < 64


def test_the_self_check_and_report_state_the_loop(run: dict[str, Any]) -> None:
    store = run["store"]
    check = json.loads((store.path / "run.json").read_text())["self_check"]["loop"]
    assert check["n_windows"] == check["n_bursts"] == 8
    # measured and recorded, inside the lag search range (the figure is the machine's)
    lo, hi = -LAG_BEFORE_MS, LAG_AFTER_MS  # the search range: a structural bound, no timing
    assert lo <= check["min_ms"] <= check["latency_ms"] <= check["max_ms"] <= hi
    assert check["jitter_ms"] >= 0
    report = json.loads((store.path / "report.json").read_text())
    block = report["harness_self_check"]["loop"]
    assert block["probe"]["latency_ms"] == check["latency_ms"]
    assert block["sessions"]["n"] == len(SCENARIOS) * 2
    md = (store.path / "report.md").read_text()
    assert "Sound loop" in md and "not subtracted" in md


def _gate(run_path: Path, matrix: Path, system: str) -> tuple[int, str]:
    res = CliRunner().invoke(
        cli, ["duplex", "gate", str(run_path), "-m", str(matrix), "--system", system]
    )
    return res.exit_code, res.stdout


def test_the_l3_matrix_ships_careful_and_not_naive(run: dict[str, Any], tmp_path: Path) -> None:
    path = run["store"].path
    code, text = _gate(path, MATRIX, run["careful"])
    assert code == 0 and "recommendation: ship" in text, text
    code, text = _gate(path, MATRIX, run["naive"])
    assert code == 1 and "recommendation: ship" not in text
    assert "bystander-false-responses-per-hour: failed" in text  # the gate that decided
    # the contract's L4 floor for duplicate side effects: nothing at L3 can pass it
    doc = yaml.safe_load(MATRIX.read_text())
    for gate in doc["gates"]:
        if gate["id"] == "duplicate-side-effects":
            gate["min_evidence"] = "L4"
    floors = tmp_path / "l4-floors.yaml"
    floors.write_text(yaml.safe_dump(doc))
    code, text = _gate(path, floors, run["careful"])
    assert code == 1
    rec = text.split("recommendation: ", 1)[1].split()[0]
    assert rec in ("collect_more_data", "keep_in_shadow"), text
    assert "duplicate-side-effects" in text.split("recommendation: ", 1)[1]
    assert "L4" in text.split("recommendation: ", 1)[1]
    # the example matrix itself (its thresholds are examples; first audio <= 1.2 s is over
    # what the CPU reference answers in here, so its outcome is not pinned): its L4 gates
    # are named as needing L4 whatever else happens
    from voxassay.suites.duplex.live.scenarios import EXAMPLE_MATRIX

    code, text = _gate(path, Path(EXAMPLE_MATRIX), run["careful"])
    assert code == 1 and "recommendation: ship" not in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    for gate in ("duplicate-side-effects", "reconnect-success"):
        assert "/L4" in rows[gate] and "pass" not in rows[gate].split("/L4", 1)[1], rows[gate]


# --------------------------------------------------------------------------- forged bundles


def _rehash(b: Path) -> BundleManifest:
    """Rewrite the manifest's file list so every file matches its hash again (a forger's
    first step); the derivation then has only the artifacts to go on."""
    doc = json.loads((b / "manifest.json").read_text())
    doc["files"] = [
        file_entry(b / f["path"], b, channels=f.get("channels")).model_dump(exclude_none=True)
        for f in doc["files"]
        if (b / f["path"]).is_file()
    ]
    (b / "manifest.json").write_text(json.dumps(doc))
    return BundleManifest.model_validate(doc)


def _copy(run: dict[str, Any], tmp_path: Path, name: str) -> Path:
    src = _bundles(run["store"])[0]
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _level(b: Path) -> tuple[str, str]:
    level, reasons = derive_evidence_level(_rehash(b), b)
    return level, " ".join(reasons)


def test_forged_bundles_that_claim_the_loop_are_refused_l3(
    run: dict[str, Any], tmp_path: Path
) -> None:
    # output.wav swapped for the received audio (the modelled track dressed as a capture)
    b = _copy(run, tmp_path, "swapped")
    shutil.copy(b / "received.wav", b / "output.wav")
    level, why = _level(b)
    assert level == "L2" and "output.wav is not the capture" in why
    # the received audio copied into the capture and output: no player in between
    b = _copy(run, tmp_path, "copied")
    rec = _pcm(b / "received.wav")
    sf.write(b / "capture.wav", rec, 16_000, subtype="PCM_16")
    shutil.copy(b / "received.wav", b / "output.wav")
    loop = json.loads((b / "loop.json").read_text())
    loop["capture"].update(offset_samples=0, samples=int(rec.size))
    loop["latency_ms"] = 0.0
    (b / "loop.json").write_text(json.dumps(loop))
    level, why = _level(b)
    assert level == "L2" and "copied sample for sample" in why
    # a latency the audio does not show
    b = _copy(run, tmp_path, "latency")
    loop = json.loads((b / "loop.json").read_text())
    loop["latency_ms"] += 80.0
    (b / "loop.json").write_text(json.dumps(loop))
    level, why = _level(b)
    assert level == "L2" and "loop.json states" in why
    # the capture's files dropped, the claim kept
    b = _copy(run, tmp_path, "dropped")
    (b / "capture.wav").unlink()
    (b / "loop.json").unlink()
    level, why = _level(b)
    assert level == "L2" and "no hashed capture.wav, loop.json" in why
    # a bundle modelled at L2 whose provenance was edited to claim the loop
    b = _copy(run, tmp_path, "edited")
    for name in ("capture.wav", "loop.json"):
        (b / name).unlink()
    shutil.copy(b / "received.wav", b / "output.wav")
    (b / "received.wav").unlink()
    level, why = _level(b)
    assert level == "L2" and "do not back it" in why
