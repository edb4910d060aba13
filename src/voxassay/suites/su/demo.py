"""The SU suite's embedded demo: its own labelled voices, pairs and baselines (< 2 min).

Voices: Piper's joe at two speaking rates (one speaker) and espeak-ng variants (``+f3``,
``+m7``, ``+m3``, ``+f4``: distinct voices), each reading four sentences. From them:

- speaker-match pairs (``build_pairs``, balanced, calibration split) answered by the
  ``resemblyzer`` specialist in both variants (a paired segmented-vs-merged comparison);
- synthetic-detection items where Piper's neural voice *stands in* for the human class and
  espeak-ng's formant voices are the synthetic class (everything here is synthetic: the
  items say so in ``labels.stand_in``), answered by ``dnsmos-human``;
- emotion evals are listed with no items: there is no emotional speech and no offline
  emotion specialist here, and the report says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from voxassay.core.audio import write_wav
from voxassay.core.items import Item, write_manifest
from voxassay.core.registry import REGISTRY
from voxassay.core.runstore import RunStore

DEMO_VERSION = "su-demo-1"
SENTENCES = (
    "The train to the coast leaves at half past nine.",
    "Please bring the blue folder to the second meeting.",
    "A cold wind blew across the empty harbour all night.",
    "We counted fourteen boats before the sun went down.",
)
VOICES = (
    ("piper-joe", "piper", None),
    ("piper-joe", "piper?length_scale=1.15", None),
    ("espeak-f3", "espeak-ng:en-us+f3", "en-us+f3"),
    ("espeak-m7", "espeak-ng:en-us+m7", "en-us+m7"),
    ("espeak-m3", "espeak-ng:en-us+m3", "en-us+m3"),
    ("espeak-f4", "espeak-ng:en-us+f4", "en-us+f4"),
)
STAND_IN = (
    "constructed demo: Piper (neural TTS) plays the human class, espeak-ng the synthetic "
    "class; no real human speech is involved"
)


def build_demo_data(out: str | Path, log: Any = None) -> Path:
    """Write the demo clips and a manifest (speaker pairs + synthetic-detection items)."""
    from voxassay.suites.su.pairs import build_pairs

    out = Path(out)
    clips_dir = out / "clips"
    clips_dir.mkdir(parents=True, exist_ok=True)
    manifest = out / "su_demo.jsonl"
    stamp = out / "built.json"
    if manifest.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()).get("version") == DEMO_VERSION:
                return manifest
        except ValueError:
            pass
    synths: dict[str, Any] = {}
    clips: list[Item] = []
    for v_index, (speaker, spec, _) in enumerate(VOICES):
        synth = synths.get(spec)
        if synth is None:
            synth = REGISTRY.build("synthesize", spec)
            synth.load()
            synths[spec] = synth
        # the two piper entries share a speaker: each reads two of the four sentences
        sentences = (
            SENTENCES if speaker != "piper-joe" else SENTENCES[v_index * 2 : v_index * 2 + 2]
        )
        for s_index, text in enumerate(sentences):
            cid = f"{spec.replace(':', '_').replace('?', '_').replace('=', '')}-{s_index}"
            path = clips_dir / f"{cid}.wav"
            audio = synth.synthesize(text)
            write_wav(path, audio)
            clips.append(
                Item(
                    id=cid,
                    audio_filepath=str(path),
                    duration=audio.duration,
                    text=text,
                    speaker=speaker,
                    labels={"voice": spec, "engine": spec.split(":")[0].split("?")[0]},
                )
            )
        if log:
            log(f"voice {spec}: {len(sentences)} clips")
    pairs = build_pairs(clips, "speaker_match", n=24, seed=0, calibration_fraction=0.25)
    synthetic_items = []
    for it in clips:
        neural = it.labels["engine"] == "piper"
        if not neural and it.id.endswith(("-2", "-3")):
            continue  # keep the classes near balance (6 neural, 8 formant)
        synthetic_items.append(
            Item(
                id=f"syn-{it.id}",
                audio_filepath=it.audio_filepath,
                duration=it.duration,
                speaker=it.speaker,
                labels={
                    "synthetic": not neural,
                    "source": it.labels["engine"],
                    "constructed": True,
                    "stand_in": STAND_IN,
                },
            )
        )
    synthetic = build_pairs(
        synthetic_items, "synthetic_detection", seed=0, calibration_fraction=0.25
    )
    write_manifest([*pairs, *synthetic], manifest)
    stamp.write_text(json.dumps({"version": DEMO_VERSION, "n_clips": len(clips)}))
    return manifest


def run_demo(out: str | Path, *, workers: int = 1, progress: Any = None) -> RunStore:
    """Build the data under ``out/_demo_data/su`` and run both specialists on it."""
    from voxassay.core.progress import system_progress
    from voxassay.suites.su.run import run_su
    from voxassay.suites.su.tasks import EVALS

    def say(message: str) -> None:
        if progress is not None:
            progress.console.log(f"su demo: {message}")

    manifest = build_demo_data(Path(out) / "_demo_data" / "su", log=say)
    on_start, on_record = system_progress(progress, "su ")
    return run_su(
        manifest,
        list(EVALS),
        ["resemblyzer", "dnsmos-human"],
        out,
        workers=workers,
        on_start=on_start,
        on_record=on_record,
    )
