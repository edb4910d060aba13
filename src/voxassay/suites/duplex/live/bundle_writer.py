"""Write one session as an evidence bundle (DESIGN.md layout), with hashes and provenance.

Files: ``input.wav`` (what the user side played into the agent), ``output.wav`` (what the
modelled player played, same timeline and length), ``events.jsonl`` (the ledger in session-clock
order), ``tool-audit.json``, ``final-state.json`` (when the agent exported one),
``scenario.yaml`` (the scenario as run) and ``manifest.json`` (versions, hashes, clock,
provenance facts; never an evidence level: the scoring core derives it).

With a sound loop (``loop``): ``output.wav`` is the capture on the session clock,
``capture.wav`` the whole capture as recorded, ``received.wav`` the agent's audio as the
transport delivered it (the playback model's track) and ``loop.json`` the loop's facts and
measured latency and jitter (``live.loop``); the player producer names the real player.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import soundfile as sf
import yaml

from voxassay.contracts.duplex.manifest import (
    BundleManifest,
    ClockInfo,
    Provenance,
    ScenarioRef,
    SystemInfo,
    file_entry,
)
from voxassay.contracts.duplex.vocabulary import Route
from voxassay.core.version import __version__
from voxassay.suites.duplex.live.loop import CAPTURE_FILE, LOOP_FILE, RECEIVED_FILE, LoopEvidence
from voxassay.suites.duplex.live.session import SessionResult

__all__ = ["write_bundle"]


def write_bundle(
    result: SessionResult,
    folder: str | Path,
    *,
    system: SystemInfo,
    provenance: Provenance,
    clock: ClockInfo,
    device: str | None = None,
    extra: dict[str, Any] | None = None,
    extra_files: Mapping[str, Callable[[Path], Any]] | None = None,
    loop: LoopEvidence | None = None,
) -> Path:
    """Write ``result`` into ``folder`` (created) and return it. ``extra_files``: name ->
    writer(path) of more files to keep and hash (e.g. a socket link's raw protocol log)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sr = result.sample_rate
    sf.write(folder / "input.wav", result.input, sr, subtype="PCM_16")
    names = ["input.wav", "output.wav"]
    player = f"voxassay.playback-model {__version__}"
    if loop is None:
        sf.write(folder / "output.wav", result.output, sr, subtype="PCM_16")
    else:
        sf.write(folder / "output.wav", loop.output, sr, subtype="PCM_16")
        sf.write(folder / CAPTURE_FILE, loop.capture, sr, subtype="PCM_16")
        sf.write(folder / RECEIVED_FILE, result.output, sr, subtype="PCM_16")
        (folder / LOOP_FILE).write_text(json.dumps(loop.doc, indent=1))
        names += [CAPTURE_FILE, RECEIVED_FILE, LOOP_FILE]
        player = f"voxassay pulse_player {__version__} on PulseAudio {loop.doc.get('pulseaudio_version')}"
    events = sorted(result.events, key=lambda e: (e.monotonic_ns, e.seq or 0))
    with (folder / "events.jsonl").open("w", encoding="utf-8") as fh:
        for e in events:
            fh.write(e.to_json() + "\n")
    (folder / "tool-audit.json").write_text(json.dumps(result.tool_audit, indent=1))
    names += ["events.jsonl", "tool-audit.json"]
    if result.end.final_state is not None:
        (folder / "final-state.json").write_text(json.dumps(result.end.final_state, indent=1))
        names.append("final-state.json")
    doc = result.scenario.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    names.append("scenario.yaml")
    for name, writer in (extra_files or {}).items():
        writer(folder / name)
        if (folder / name).is_file():
            names.append(name)
    manifest = BundleManifest(
        session_id=result.session_id,
        scenario=ScenarioRef(id=result.scenario.id, version=result.scenario.version),
        created_at=dt.datetime.now(dt.UTC),
        producers={
            "harness": f"voxassay {__version__}",
            "player": player,
            "agent": f"{system.name} {system.version or ''}".strip(),
        },
        files=[
            file_entry(folder / n, folder, channels=1 if n.endswith(".wav") else None)
            for n in names
        ],
        clock=clock,
        provenance=provenance,
        route=Route(result.route),
        device=device,
        language=result.scenario.language,
        system=system,
    )
    data = manifest.model_dump(mode="json", exclude_none=True)
    data["harness"] = {
        "skipped_segments": result.skipped,
        "stats": result.stats,
        **(extra or {}),
    }
    (folder / "manifest.json").write_text(json.dumps(data, indent=2))
    return folder
