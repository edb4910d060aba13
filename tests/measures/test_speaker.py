"""Speaker embeddings on LibriSpeech test-other (9 speakers x 4 clips)."""

from __future__ import annotations

import csv
import itertools

import numpy as np
import pytest

from tests.conftest import shared_data
from voxassay.core.audio import Audio, load_audio
from voxassay.measures.speaker import SpeakerEncoder, cosine, speaker_unavailable

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    reason = speaker_unavailable()
    if reason:
        pytest.skip(reason)
    enc = SpeakerEncoder()
    enc.load()
    return enc


def _eer(same: list[float], diff: list[float]) -> float:
    """Equal error rate: min over thresholds of max(false reject, false accept)."""
    s, d = np.array(same), np.array(diff)
    best = 1.0
    for t in np.unique(np.concatenate([s, d])):
        frr = float(np.mean(s < t))
        far = float(np.mean(d >= t))
        best = min(best, max(frr, far))
    return best


def test_same_speaker_beats_different_speaker(encoder: SpeakerEncoder) -> None:
    base = shared_data() / "speaker"
    with open(base / "manifest.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    embs = [encoder.embed(load_audio(base / r["path"])) for r in rows]
    spk = [r["speaker"] for r in rows]
    for e in embs:
        assert e.shape == (256,) and e.dtype == np.float32
        assert float(np.linalg.norm(e)) == pytest.approx(1.0, abs=1e-5)
    same, diff = [], []
    for i, j in itertools.combinations(range(len(rows)), 2):
        (same if spk[i] == spk[j] else diff).append(cosine(embs[i], embs[j]))
    eer = _eer(same, diff)
    print(f"\n{len(set(spk))} speakers, {len(same)} same / {len(diff)} different pairs: "
          f"same mean {np.mean(same):.3f} (min {min(same):.3f}), different mean "
          f"{np.mean(diff):.3f} (max {max(diff):.3f}), EER {eer:.3f}")  # fmt: skip
    assert len(same) == 54 and len(diff) == 576
    assert np.mean(same) - np.mean(diff) > 0.2
    assert eer < 0.2
    # every speaker's clips are closer to each other than to other speakers on average
    for s in set(spk):
        idx = [i for i, x in enumerate(spk) if x == s]
        other = [i for i, x in enumerate(spk) if x != s]
        within = np.mean([cosine(embs[i], embs[j]) for i, j in itertools.combinations(idx, 2)])
        across = np.mean([cosine(embs[i], embs[j]) for i in idx for j in other])
        assert within > across, s


def test_long_form_windows_of_one_speaker_stay_similar(encoder: SpeakerEncoder) -> None:
    base = shared_data() / "speaker" / "librispeech_test-other"
    # one long passage of one speaker: her four clips back to back (~36 s)
    clips = [load_audio(p) for p in sorted((base / "1998").glob("*.flac"))]
    passage = Audio(np.concatenate([c.samples for c in clips]), 16_000)
    wins = encoder.embed_windows(passage, window_s=6.0, hop_s=3.0)
    assert len(wins) >= 9
    sims = [cosine(wins[0], w) for w in wins[1:]]
    other = encoder.embed(load_audio(next((base / "2033").glob("*.flac"))))
    print(f"\nwindow similarity to the first window: min {min(sims):.3f}, mean {np.mean(sims):.3f}; "
          f"another speaker: {cosine(wins[0], other):.3f}")  # fmt: skip
    assert min(sims) > 0.75
    assert min(sims) > cosine(wins[0], other) + 0.1


def test_bad_input_is_a_value_error(encoder: SpeakerEncoder) -> None:
    with pytest.raises(ValueError):
        encoder.embed(Audio(np.zeros(0, np.float32), 16_000))
    with pytest.raises(ValueError):
        encoder.embed(Audio(np.zeros(16_000, np.float32), 16_000))  # no speech
    assert encoder.embed_windows(Audio(np.zeros(32_000, np.float32), 16_000)) == []
    info = encoder.describe()
    assert info["dim"] == 256 and "resemblyzer" in info["encoder"]


def test_cosine() -> None:
    a = np.array([1.0, 0.0], np.float32)
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, np.array([0.0, 2.0])) == pytest.approx(0.0)
    assert cosine(a, np.zeros(2)) == 0.0
