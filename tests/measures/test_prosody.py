"""Prosody features on real speech modified in known ways, and real female vs male voices."""

from __future__ import annotations

import csv
from collections import defaultdict

import numpy as np
import pytest
import soxr

from tests.conftest import shared_data
from voxassay.core.audio import Audio, load_audio
from voxassay.measures.prosody import prosody_contrast, prosody_features

LJ_TEXT = (
    "Printing, in the only sense with which we are at present concerned, differs from most if "
    "not from all the arts and crafts represented in the Exhibition"
)


def _lj() -> Audio:
    return load_audio(shared_data() / "read_speech" / "ljspeech" / "LJ001-0001.wav", sr=16_000)


def _speed(a: Audio, factor: float) -> Audio:
    """Tape-speed change: resample as if the clip were recorded at 16 kHz * factor and play it
    at 16 kHz. Every frequency (so F0) and the tempo scale by ``factor`` exactly: F0 moves by
    12 log2(factor) semitones and syllables per second multiply by ``factor``."""
    y = soxr.resample(a.samples, 16_000 * factor, 16_000)
    return Audio(np.asarray(y, dtype=np.float32), 16_000)


@pytest.mark.parametrize("semitones", [2.0, -2.0, 4.0])
def test_speed_change_moves_f0_and_rate_by_the_known_factor(semitones: float) -> None:
    a = _lj()
    base = prosody_features(a)
    factor = 2 ** (semitones / 12)
    moved = prosody_features(_speed(a, factor))
    assert moved["f0_median_st"] - base["f0_median_st"] == pytest.approx(semitones, abs=0.35)
    assert moved["f0_range_st"] == pytest.approx(base["f0_range_st"], abs=1.0)
    assert moved["rate_sps"] / base["rate_sps"] == pytest.approx(factor, rel=0.08)
    assert moved["duration_s"] == pytest.approx(base["duration_s"] / factor, rel=0.01)


def test_energy_follows_gain_exactly_and_nothing_else_moves() -> None:
    a = _lj()
    base = prosody_features(a)
    louder = prosody_features(Audio(a.samples * 10 ** (6 / 20), 16_000))
    assert louder["energy_db"] - base["energy_db"] == pytest.approx(6.0, abs=0.01)
    for k in ("f0_median_st", "f0_range_st", "rate_sps", "pause_ratio", "voiced_fraction"):
        assert louder[k] == pytest.approx(base[k], abs=1e-6), k


def test_inserted_pauses_raise_pause_ratio_not_rate() -> None:
    a = _lj()
    base = prosody_features(a, LJ_TEXT)
    x = a.samples
    n = len(x)
    gap = np.zeros(8000, np.float32)  # 0.5 s
    y = np.concatenate([x[: n // 3], gap, x[n // 3 : 2 * n // 3], gap, x[2 * n // 3 :]])
    paused = prosody_features(Audio(y, 16_000), LJ_TEXT)
    assert paused["pause_ratio"] > base["pause_ratio"] + 0.06  # ~1 s more pause in ~10.6 s
    assert paused["rate_sps"] == pytest.approx(base["rate_sps"], rel=0.05)
    assert paused["words_per_min"] < base["words_per_min"]
    # 25 words over the speech span (about 9.5 s): 120-200 words per minute
    assert 120 < base["words_per_min"] < 200


def _median_f0_by_speaker(folder: str, path_filter: str = "") -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    with open(shared_data() / folder / "manifest.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if path_filter not in row["path"]:
                continue
            f = prosody_features(load_audio(shared_data() / folder / row["path"]))
            out[row["speaker"] + "|" + row["notes"]].append(f["f0_median_st"])
    return out


@pytest.mark.slow
def test_female_librispeech_speakers_are_higher_than_male() -> None:
    by = _median_f0_by_speaker("speaker")
    fem = {k: float(np.median(v)) for k, v in by.items() if "gender=F" in k}
    male = {k: float(np.median(v)) for k, v in by.items() if "gender=M" in k}
    assert len(fem) == 5 and len(male) == 4
    print("\nF0 median (st re 100 Hz) female:", sorted(round(v, 1) for v in fem.values()))
    print("male:", sorted(round(v, 1) for v in male.values()))
    assert min(fem.values()) > max(male.values()) + 1.0
    assert np.mean(list(fem.values())) - np.mean(list(male.values())) > 6.0  # about half an octave


def test_arctic_female_above_male() -> None:
    data = shared_data()
    male = prosody_features(load_audio(data / "read_speech/cmu_arctic/aew_arctic_a0001.wav"))
    fem = prosody_features(load_audio(data / "accented/cmu_arctic/axb_arctic_a0004.wav"))
    assert fem["f0_median_st"] - male["f0_median_st"] > 6.0
    # plausible absolute values: male ~80-160 Hz, female ~160-300 Hz
    assert -4.0 < male["f0_median_st"] < 8.0 < fem["f0_median_st"] < 19.0


def test_silence_and_bad_audio() -> None:
    f = prosody_features(Audio(np.zeros(16_000, np.float32), 16_000), "two words")
    assert f == {"duration_s": 1.0}
    with pytest.raises(ValueError):
        prosody_features(Audio(np.zeros(0, np.float32), 16_000))


def test_contrast_on_real_features() -> None:
    a = _lj()
    ref = prosody_features(a)
    up = prosody_features(_speed(Audio(a.samples * 2.0, 16_000), 2 ** (3 / 12)))
    res = prosody_contrast(up, ref, {"f0_median": "up", "energy": "up", "rate": "up",
                                     "pause_ratio": "up"})  # fmt: skip
    feats = res["features"]
    assert feats["f0_median"]["met"] and feats["energy"]["met"] and feats["rate"]["met"]
    assert feats["pause_ratio"]["met"] is False  # unchanged pauses stay inside the dead band
    assert res["met"] == 3 and res["total"] == 4 and res["fraction"] == 0.75


def test_contrast_dead_bands() -> None:
    ref = {"f0_median_st": 10.0, "f0_range_st": 5.0, "energy_db": -20.0, "rate_sps": 4.0,
           "pause_ratio": 0.10}  # fmt: skip
    inside = {"f0_median_st": 10.4, "f0_range_st": 5.9, "energy_db": -19.1, "rate_sps": 4.19,
              "pause_ratio": 0.119}  # fmt: skip
    beyond = {"f0_median_st": 9.4, "f0_range_st": 6.1, "energy_db": -18.9, "rate_sps": 3.7,
              "pause_ratio": 0.13}  # fmt: skip
    expect = {"f0_median": "down", "f0_range": "up", "energy": "up", "rate": "down",
              "pause_ratio": "up"}  # fmt: skip
    assert prosody_contrast(inside, ref, expect)["fraction"] == 0.0
    assert prosody_contrast(beyond, ref, expect)["fraction"] == 1.0
    wrong = prosody_contrast(beyond, ref, {"f0_median": "up"})
    assert wrong["fraction"] == 0.0 and wrong["features"]["f0_median"]["delta"] == pytest.approx(
        -0.6
    )
    missing = prosody_contrast({"energy_db": -10.0}, ref, {"f0_median": "up", "energy": "up"})
    assert missing["features"]["f0_median"]["met"] is None
    assert missing["total"] == 1 and missing["fraction"] == 1.0
    nothing = prosody_contrast({}, ref, {"f0_median": "up", "volume": "up"})
    assert nothing["fraction"] is None and "unknown" in nothing["features"]["volume"]["reason"]
