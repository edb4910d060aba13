"""Condition builders on real recordings from ../shared/data."""

from __future__ import annotations

import csv
import filecmp
import itertools
from pathlib import Path

import numpy as np
import pytest

from voxassay.core.audio import Audio, load_audio, write_wav
from voxassay.core.items import Item, load_manifest, write_manifest
from voxassay.suites.asr.conditions import (
    PEAK_CEILING,
    active_mask,
    active_speech_level,
    build_conditions,
    g711_alaw,
    g711_mulaw,
    make_babble,
    measure_snr,
    mix_at_snr,
    mix_at_snr_info,
    overlap_conversation,
    telephone,
)

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
CLEAN = "read_speech/cmu_arctic/aew_arctic_a0001.wav"
NOISE = "noise/speech_commands/running_tap_10s.wav"


def data() -> Path:
    if not (DATA / "read_speech" / "manifest.csv").exists():
        pytest.skip(f"real recordings not found at {DATA} (../shared/data beside the repo)")
    return DATA


def rows(folder: str) -> list[dict[str, str]]:
    with open(data() / folder / "manifest.csv", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["path"].endswith(".wav")]


def clip(rel: str) -> Audio:
    return load_audio(data() / rel)


def test_mix_real_clean_and_noise_hits_5db() -> None:
    speech, noise = clip(CLEAN), clip(NOISE)
    mixed, info = mix_at_snr_info(speech, noise, 5.0, np.random.default_rng(0))
    assert mixed.sr == speech.sr and mixed.samples.size == speech.samples.size
    scale = info["clip_scale"]
    speech_part = scale * speech.samples.astype(np.float64)
    noise_part = mixed.samples.astype(np.float64) - speech_part
    assert abs(measure_snr(speech_part, noise_part, speech.sr) - 5.0) < 0.1
    # still within 0.1 dB after a round trip through a 16-bit WAV
    assert info["noise_gain"] > 0 and info["noise_looped"] is False
    assert 0.0 <= info["noise_offset_s"] <= noise.duration - speech.duration


def test_mix_survives_pcm16_round_trip(tmp_path: Path) -> None:
    speech, noise = clip(CLEAN), clip(NOISE)
    mixed, info = mix_at_snr_info(speech, noise, 5.0, np.random.default_rng(3))
    write_wav(tmp_path / "m.wav", mixed)
    back = load_audio(tmp_path / "m.wav")
    speech_part = info["clip_scale"] * speech.samples.astype(np.float64)
    noise_part = back.samples.astype(np.float64) - speech_part
    assert abs(measure_snr(speech_part, noise_part, 16000) - 5.0) < 0.1


@pytest.mark.parametrize("snr", [20.0, 10.0, 0.0, -5.0])
def test_mix_snr_exact_and_never_clips(snr: float) -> None:
    speech = clip("read_speech/ljspeech/LJ001-0001.wav")
    noise = clip("noise/esc10/1-100032-A-0.wav")  # 5 s: shorter than the speech, so looped
    mixed, info = mix_at_snr_info(speech, noise, snr, np.random.default_rng(1))
    assert info["noise_looped"] is True
    assert np.max(np.abs(mixed.samples)) <= PEAK_CEILING + 1e-6
    speech_part = info["clip_scale"] * speech.samples.astype(np.float64)
    achieved = measure_snr(speech_part, mixed.samples - speech_part, speech.sr)
    assert abs(achieved - snr) < 0.1
    if snr <= 0:
        assert info["clip_scale"] < 1.0  # loud noise: the whole mixture was scaled down


def test_mix_is_deterministic_per_seed() -> None:
    speech, noise = clip(CLEAN), clip(NOISE)
    a = mix_at_snr(speech, noise, 5.0, np.random.default_rng(7))
    b = mix_at_snr(speech, noise, 5.0, np.random.default_rng(7))
    c = mix_at_snr(speech, noise, 5.0, np.random.default_rng(8))
    assert a.samples.tobytes() == b.samples.tobytes()
    assert a.samples.tobytes() != c.samples.tobytes()


def test_active_level_ignores_pauses() -> None:
    speech = clip(CLEAN)
    padded = np.concatenate(
        [np.zeros(32000, np.float32), speech.samples, np.zeros(32000, np.float32)]
    )
    assert (
        abs(active_speech_level(padded, 16000) - active_speech_level(speech.samples, 16000)) < 0.2
    )
    mask = active_mask(padded, 16000)
    assert not mask[:90].any() and mask.any()


def _talkers() -> list[Audio]:
    clips = [load_audio(data() / "accented" / r["path"]) for r in rows("accented")[:8]]
    clips += [load_audio(data() / "read_speech" / r["path"]) for r in rows("read_speech")[:4]]
    return clips


def _frame_db(x: np.ndarray, sr: int = 16000) -> np.ndarray:
    n = int(0.05 * sr)
    frames = x[: x.size // n * n].reshape(-1, n).astype(np.float64)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def test_babble_from_real_talkers() -> None:
    talkers = _talkers()
    babble = make_babble(talkers, 6, 8.0, np.random.default_rng(0))
    assert babble.sr == 16000 and babble.samples.size == 8 * 16000
    rms_db = 20 * np.log10(np.sqrt(np.mean(babble.samples.astype(np.float64) ** 2)))
    assert abs(rms_db - (-30.0)) < 0.05
    # many talkers fill each other's pauses: babble's level varies far less than one talker's
    single = talkers[0].samples
    assert np.std(_frame_db(babble.samples)) < 0.5 * np.std(_frame_db(single))
    assert np.mean(active_mask(babble.samples, 16000)) > 0.95
    again = make_babble(talkers, 6, 8.0, np.random.default_rng(0))
    other = make_babble(talkers, 6, 8.0, np.random.default_rng(1))
    assert babble.samples.tobytes() == again.samples.tobytes()
    assert babble.samples.tobytes() != other.samples.tobytes()


def _band_fraction(audio: Audio, lo: float, hi: float) -> float:
    spec = np.abs(np.fft.rfft(audio.samples.astype(np.float64))) ** 2
    f = np.fft.rfftfreq(audio.samples.size, 1 / audio.sr)
    return float(spec[(f >= lo) & (f < hi)].sum() / spec.sum())


@pytest.mark.parametrize("codec", ["mulaw", "alaw"])
def test_telephone_band_on_real_speech(codec: str) -> None:
    speech = clip("read_speech/ljspeech/LJ001-0002.wav")
    assert _band_fraction(speech, 4000, 8000) > 1e-3  # the original has energy up there
    phone = telephone(speech, codec)
    assert phone.sr == 16000
    assert abs(phone.duration - speech.duration) < 0.01
    assert _band_fraction(phone, 4000, 8000) < 1e-6
    assert _band_fraction(phone, 0, 200) < 1e-3
    assert _band_fraction(phone, 300, 3400) > 0.95


def test_g711_round_trip_is_8_bit_logarithmic() -> None:
    x = np.arange(-32768, 32768)
    for codec, levels in ((g711_mulaw, 255), (g711_alaw, 256)):
        y = codec(x)
        assert len(np.unique(y)) == levels
        big = np.abs(x) > 1024
        assert np.max(np.abs(y[big] - x[big]) / np.abs(x[big])) < 0.04  # ~3 % steps
        assert np.max(np.abs(y[np.abs(x) < 16])) <= 16  # fine steps near zero


def test_overlap_conversation_real_utterances() -> None:
    d = data()
    utts = [
        (load_audio(d / "accented/vctk/p225_003.wav"), "six spoons", "p225"),
        (load_audio(d / "read_speech/cmu_arctic/aew_arctic_a0001.wav"), "author of", "aew"),
        (load_audio(d / "accented/vctk/p225_008.wav"), "these take", "p225"),
        (load_audio(d / "read_speech/cmu_arctic/aew_arctic_a0002.wav"), "not at", "aew"),
    ]
    backchannel = [(load_audio(d / "read_speech/ljspeech/LJ001-0002.wav"), "modern", "aew")]
    audio, text, turns = overlap_conversation(
        utts, 0.6, np.random.default_rng(0), backchannels=backchannel
    )
    main = [t for t in turns if t["kind"] == "turn"]
    assert [t["speaker"] for t in main] == ["p225", "aew", "p225", "aew"]
    for prev, nxt in itertools.pairwise(main):
        assert nxt["start"] < prev["end"]  # overlapped
        assert prev["end"] - nxt["start"] <= 0.9 + 1e-6
    bcs = [t for t in turns if t["kind"] == "backchannel"]
    assert len(bcs) == 1 and bcs[0]["speaker"] == "aew"
    host = next(t for t in main if t["start"] <= bcs[0]["start"] <= t["end"])
    assert host["speaker"] == "p225"
    starts = [t["start"] for t in turns]
    assert starts == sorted(starts)
    assert text == " ".join(t["text"] for t in turns)
    assert abs(audio.duration - (max(t["end"] for t in turns) + 0.3)) < 0.01
    assert np.max(np.abs(audio.samples)) <= PEAK_CEILING + 1e-6


def test_overlap_needs_two_speakers() -> None:
    a = clip(CLEAN)
    with pytest.raises(Exception, match="two speakers"):
        overlap_conversation([(a, "x", "s1"), (a, "y", "s1")], 0.5, np.random.default_rng(0))


def _real_items() -> list[Item]:
    d = data()
    items = []
    for folder, n in (("read_speech", 2), ("accented", 2)):
        for r in rows(folder)[:n]:
            items.append(
                Item(
                    id=f"{folder}-{Path(r['path']).stem}",
                    audio_filepath=str(d / folder / r["path"]),
                    text=r["transcript_or_label"],
                    speaker=r["speaker"],
                    labels={"condition": "clean", "accent": folder},
                )
            )
    return items


@pytest.mark.slow  # 3-4 s on real audio: past the fast tier's 3 s
def test_build_conditions_real_items(tmp_path: Path) -> None:
    items = _real_items()
    noise = [data() / NOISE]
    kwargs = dict(noise=noise, snrs=[5], music=True, telephone=True, conversations=1, seed=0)
    out = build_conditions(items, tmp_path / "a", **kwargs)  # type: ignore[arg-type]
    by_cond: dict[str, int] = {}
    for it in out:
        by_cond[it.labels["condition"]] = by_cond.get(it.labels["condition"], 0) + 1
        assert it.labels["constructed"] is True
        assert "recipe" in it.meta
        assert Path(it.audio_filepath or "").exists()
        if it.labels["condition"] != "conversational":
            src = next(s for s in items if s.id == it.labels["source_item"])
            assert it.text == src.text and it.speaker == src.speaker
            assert it.labels["accent"] == src.labels["accent"]
    assert by_cond == {"background": 4 * 3, "channel": 4, "conversational": 1}
    bg = [it for it in out if it.labels["condition"] == "background"]
    assert {it.labels["background"] for it in bg} == {"noise", "babble", "music"}
    assert all(it.labels["snr_db"] == 5.0 for it in bg)
    for it in bg:
        if it.labels["background"] == "babble":
            talkers = it.meta["recipe"]["bed_info"]["talkers"]
            assert it.labels["source_item"] not in talkers
        if it.labels["background"] == "music":
            assert it.meta["recipe"]["bed_info"]["renderer"] in ("fluidsynth", "builtin")
    phone = [it for it in out if it.labels["condition"] == "channel"]
    assert all(it.labels["channel"] == "telephone" for it in phone)
    conv = next(it for it in out if it.labels["condition"] == "conversational")
    assert len(conv.labels["speakers"]) == 2 and conv.meta["turns"]

    # deterministic: same seed -> same bytes; another seed -> other noise
    again = build_conditions(items, tmp_path / "b", **kwargs)  # type: ignore[arg-type]
    assert [i.id for i in again] == [i.id for i in out]
    for x, y in zip(out, again, strict=True):
        assert filecmp.cmp(x.audio_filepath or "", y.audio_filepath or "", shallow=False)
    kwargs["seed"] = 1
    other = build_conditions(items[:1], tmp_path / "c", **kwargs | {"conversations": 0})  # type: ignore[arg-type]
    first_noise = next(i for i in other if i.labels.get("background") == "noise")
    same_id = next(i for i in out if i.id == first_noise.id)
    assert not filecmp.cmp(
        first_noise.audio_filepath or "", same_id.audio_filepath or "", shallow=False
    )

    # the items round-trip through a manifest
    write_manifest(out, tmp_path / "conditions.jsonl")
    loaded = load_manifest(tmp_path / "conditions.jsonl")
    assert [i.id for i in loaded] == [i.id for i in out]
