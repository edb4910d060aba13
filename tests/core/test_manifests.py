"""Manifest readers on real audio from ../shared/data: every format, detection, offsets,
table cells, and the refusals (a pipe in wav.scp, a lhotse command or URL source)."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxassay.core.audio import load_audio
from voxassay.core.errors import AudioError, InputError, ManifestError
from voxassay.core.items import Item, load_item_audio
from voxassay.core.manifests import detect_format, parse_columns, read_items, source_sha256

LJ = ("LJ001-0001", "LJ001-0002", "LJ001-0003")


@pytest.fixture
def read_speech(data_dir: Path) -> list[dict[str, str]]:
    with open(data_dir / "read_speech/manifest.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [r for r in rows if Path(r["path"]).stem in LJ]


@pytest.fixture
def ami(data_dir: Path) -> Path:
    return data_dir / "conversational/ami_excerpts/trn01.wav"


def test_csv_with_named_columns_reads_the_real_manifest(data_dir: Path) -> None:
    cols = parse_columns("audio=path,text=transcript_or_label,duration=duration_s")
    got = read_items(data_dir / "read_speech/manifest.csv", columns=cols)
    assert got.format == "csv" and got.detected
    first = got.items[0]
    assert first.id == "LJ001-0001" and first.speaker == "LJ"
    assert first.text and first.text.startswith("Printing, in the only sense")
    assert first.meta["license"].startswith("Public domain")
    audio = load_item_audio(first)
    assert audio.duration == pytest.approx(first.duration, abs=0.01)
    assert "csv, detected" in got.describe()


def test_csv_errors_name_the_file_line_and_what_was_expected(tmp_path: Path) -> None:
    bad = tmp_path / "m.csv"
    bad.write_text("path,transcript\na.wav,hello\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no column 'spk'; the header has path, transcript"):
        read_items(bad, columns={"audio": "path", "speaker": "spk"})
    bad.write_text("clip,words\na.wav,hello\n", encoding="utf-8")
    with pytest.raises(InputError, match="no audio column; expected one of audio_filepath"):
        read_items(bad)
    bad.write_text("path,text\na.wav,hello\nb.wav,x,extra\na.wav,again\n", encoding="utf-8")
    with pytest.raises(ManifestError) as exc:
        read_items(bad)
    assert exc.value.problems[0][0] == 3 and "more fields" in exc.value.problems[0][1]
    with pytest.raises(InputError, match="unknown field 'wav'"):
        parse_columns("wav=path")


def test_tsv_and_json_array(
    read_speech: list[dict[str, str]], data_dir: Path, tmp_path: Path
) -> None:
    base = data_dir / "read_speech"
    tsv = tmp_path / "m.tsv"
    lines = ["audio\ttranscript\tspeaker\taccent"]
    lines += [f"{base / r['path']}\t{r['transcript_or_label']}\tLJ\tUS" for r in read_speech]
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = read_items(tsv)
    assert got.format == "tsv" and [it.id for it in got.items] == list(LJ)
    assert got.items[1].text == "in being comparatively modern."
    assert got.items[0].labels == {"accent": "US"}  # a known label column becomes a group
    arr = tmp_path / "m.json"
    arr.write_text(json.dumps([it.to_dict() for it in got.items]), encoding="utf-8")
    as_json = read_items(arr)
    assert as_json.format == "json" and as_json.items == got.items
    # a JSON array under a .jsonl name, or forced as jsonl, is refused with the reason
    with pytest.raises(
        InputError, match="is a JSON array; voxassay reads JSONL, one object per line"
    ):
        read_items(arr, "jsonl")
    arr.write_text(json.dumps([{"audio_filepath": "a.wav"}, {"audio_filepath": 3}]))
    with pytest.raises(ManifestError, match="element 2"):
        read_items(arr)


def test_kaldi_data_dir_with_segments_reads_parts_of_one_recording(
    ami: Path, tmp_path: Path
) -> None:
    d = tmp_path / "kaldi"
    d.mkdir()
    (d / "wav.scp").write_text(f"trn01 {ami}\n", encoding="utf-8")
    (d / "segments").write_text("u1 trn01 1.50 4.00\nu2 trn01 10.0 12.25\n", encoding="utf-8")
    (d / "text").write_text("u1 okay so\nu2 right\n", encoding="utf-8")
    (d / "utt2spk").write_text("u1 MEE068\nu2 FEE005\n", encoding="utf-8")
    got = read_items(d)
    assert got.format == "kaldi"
    u1, u2 = got.items
    assert (u1.offset, u1.duration, u1.text, u1.speaker) == (1.5, 2.5, "okay so", "MEE068")
    whole = load_audio(ami, sr=None)
    seg = load_item_audio(u2, sr=None)
    assert seg.duration == pytest.approx(2.25, abs=1e-3)
    start = round(10.0 * whole.sr)
    np.testing.assert_allclose(
        seg.samples, whole.samples[start : start + len(seg.samples)], atol=1e-6
    )
    # without segments: one item per recording
    (d / "segments").unlink()
    (d / "wav.scp").write_text(f"u1 {ami}\n", encoding="utf-8")
    assert read_items(d, "kaldi").items[0].text == "okay so"


def test_kaldi_pipe_commands_are_refused_with_their_line(tmp_path: Path, ami: Path) -> None:
    d = tmp_path / "k"
    d.mkdir()
    marker = tmp_path / "ran"
    (d / "wav.scp").write_text(f"a {ami}\nb touch {marker} |\n", encoding="utf-8")
    with pytest.raises(ManifestError) as exc:
        read_items(d)
    assert exc.value.problems[0][0] == 2 and "never runs a command" in exc.value.problems[0][1]
    assert not marker.exists()


def test_audiofolder_with_metadata_csv_and_jsonl(
    read_speech: list[dict[str, str]], data_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "af"
    folder.mkdir()
    for r in read_speech:
        shutil.copy(data_dir / "read_speech" / r["path"], folder / Path(r["path"]).name)
    with open(folder / "metadata.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["file_name", "transcription"])
        for r in read_speech:
            w.writerow([Path(r["path"]).name, r["transcript_or_label"]])
    got = read_items(folder)
    assert got.format == "audiofolder" and [it.id for it in got.items] == list(LJ)
    assert Path(got.items[0].audio_filepath or "").parent == folder
    assert load_item_audio(got.items[1]).duration == pytest.approx(1.9, abs=0.01)
    (folder / "metadata.csv").unlink()
    with open(folder / "metadata.jsonl", "w", encoding="utf-8") as fh:
        for r in read_speech:
            fh.write(
                json.dumps({"file_name": Path(r["path"]).name, "text": r["transcript_or_label"]})
                + "\n"
            )
    assert [it.text for it in read_items(folder).items] == [
        r["transcript_or_label"] for r in read_speech
    ]


def _cut(
    cut_id: str, path: Path, start: float, dur: float, sups: list[dict], source_type: str = "file"
) -> dict:
    info = sf.info(str(path))
    return {
        "id": cut_id,
        "start": start,
        "duration": dur,
        "channel": 0,
        "supervisions": sups,
        "recording": {
            "id": path.stem,
            "sources": [{"type": source_type, "channels": [0], "source": str(path)}],
            "sampling_rate": info.samplerate,
            "num_samples": info.frames,
            "duration": info.frames / info.samplerate,
        },
        "type": "MonoCut",
    }


def test_lhotse_cutset_written_by_lhotse_reads_supervision_offsets(
    ami: Path, tmp_path: Path
) -> None:
    lhotse = pytest.importorskip("lhotse", reason="lhotse is a dev dependency")
    rec = lhotse.Recording.from_file(ami)
    sups = [
        lhotse.SupervisionSegment("s1", rec.id, 2.0, 1.0, text="so", speaker="A", language="en"),
        lhotse.SupervisionSegment("s2", rec.id, 3.2, 0.8, text="we start", speaker="A"),
    ]
    cut = lhotse.MonoCut("c1", start=2.0, duration=2.0, channel=0, recording=rec, supervisions=sups)
    cuts = lhotse.CutSet.from_cuts([cut])
    path = tmp_path / "cuts.jsonl.gz"
    cuts.to_file(path)
    got = read_items(path)
    assert got.format == "lhotse"
    item = got.items[0]
    assert (item.id, item.offset, item.duration, item.speaker) == ("c1", 2.0, 2.0, "A")
    assert item.text == "so we start" and item.labels == {"language": "en"}
    ours = load_item_audio(item, sr=None).samples
    theirs = cut.load_audio()[0]
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_lhotse_url_and_command_sources_are_refused(ami: Path, tmp_path: Path) -> None:
    path = tmp_path / "cuts.jsonl"
    good = _cut("c1", ami, 0.0, 1.0, [])
    bad = _cut("c2", ami, 0.0, 1.0, [], source_type="command")
    bad["recording"]["sources"][0]["source"] = f"touch {tmp_path / 'ran'}"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ManifestError) as exc:
        read_items(path)
    assert exc.value.problems == [(2, exc.value.problems[0][1])]
    assert "'command' source" in exc.value.problems[0][1]
    assert not (tmp_path / "ran").exists()
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(good) + "\n")
    assert detect_format(tmp_path / "c.jsonl.gz") == "lhotse"


def _hf_dataset(read_speech: list[dict[str, str]], data_dir: Path):  # type: ignore[no-untyped-def]
    datasets = pytest.importorskip("datasets", reason="datasets is a dev dependency")
    rows = {
        "audio": [
            {
                "bytes": (data_dir / "read_speech" / r["path"]).read_bytes(),
                "path": Path(r["path"]).name,
            }
            for r in read_speech
        ],
        "sentence": [r["transcript_or_label"] for r in read_speech],
        "client_id": ["LJ"] * len(read_speech),
    }
    # a {bytes, path} struct cast to the Audio feature (as `cast_column` does for users);
    # encoding through the feature itself would need torchcodec
    return datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio(decode=False))


def test_hugging_face_parquet_and_save_to_disk_decode_audio_bytes_in_memory(
    read_speech: list[dict[str, str]], data_dir: Path, tmp_path: Path
) -> None:
    ds = _hf_dataset(read_speech, data_dir)
    parquet = tmp_path / "train.parquet"
    ds.to_parquet(str(parquet))
    saved = tmp_path / "saved"
    ds.save_to_disk(str(saved))
    for source in (parquet, saved):
        got = read_items(source)
        assert got.format == "hf"
        assert [it.text for it in got.items] == [r["transcript_or_label"] for r in read_speech]
        assert {it.speaker for it in got.items} == {"LJ"}
        item = got.items[1]
        assert item.audio_row == 1 and item.audio_column == "audio"
        want = load_audio(data_dir / "read_speech" / read_speech[1]["path"])
        np.testing.assert_array_equal(load_item_audio(item).samples, want.samples)
    # the items survive the run folder's items.jsonl
    again = Item.from_dict(json.loads(json.dumps(got.items[2].to_dict())))
    assert again == got.items[2]
    with pytest.raises(InputError, match="no column 'voice'"):
        read_items(parquet, columns={"audio": "voice"})


def test_segments_and_manifest_durations_catch_truncation(data_dir: Path, tmp_path: Path) -> None:
    src = data_dir / "read_speech/ljspeech/LJ001-0002.wav"  # 1.90 s
    past_end = Item(id="x", audio_filepath=str(src), offset=1.0, duration=2.0)
    with pytest.raises(AudioError) as e1:
        load_item_audio(past_end)
    assert e1.value.kind == "truncated" and "runs past the end" in str(e1.value)
    # a complete file shorter than its manifest duration
    longer = Item(id="y", audio_filepath=str(src), duration=3.88)
    with pytest.raises(AudioError) as e2:
        load_item_audio(longer)
    assert e2.value.kind == "truncated"
    ok = Item(id="z", audio_filepath=str(src), duration=1.9)
    assert load_item_audio(ok).duration == pytest.approx(1.9, abs=0.01)


def test_source_fingerprint_covers_a_data_folder(ami: Path, tmp_path: Path) -> None:
    d = tmp_path / "k"
    d.mkdir()
    (d / "wav.scp").write_text(f"u1 {ami}\n", encoding="utf-8")
    (d / "text").write_text("u1 a\n", encoding="utf-8")
    before = source_sha256(d)
    (d / "text").write_text("u1 b\n", encoding="utf-8")
    assert source_sha256(d) != before


def test_unknown_format_and_folder_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown --format 'xml'"):
        read_items(tmp_path, "xml")
    with pytest.raises(InputError, match="not a Kaldi data dir"):
        read_items(tmp_path)


@pytest.mark.slow  # lhotse writes the cuts
def test_lhotse_cuts_whose_audio_is_not_the_file_are_refused_with_the_reason(
    ami: Path, tmp_path: Path
) -> None:
    """Speed, volume and resampling perturbations and one channel of a stereo recording,
    written by lhotse itself: each refused with its line and reason (they used to load the
    plain file: a 1.1x speed cut lost 9 % of its speech); the plain cut beside them reads."""
    lhotse = pytest.importorskip("lhotse", reason="lhotse is a dev dependency")
    rec = lhotse.Recording.from_file(ami)
    plain = lhotse.MonoCut("plain", start=0.0, duration=2.0, channel=0, recording=rec)
    stereo_path = tmp_path / "stereo.wav"
    x, sr = sf.read(str(ami))
    sf.write(str(stereo_path), np.stack([x, 0.5 * x], axis=1), sr)
    stereo = lhotse.Recording.from_file(stereo_path)
    right = lhotse.MonoCut("right", start=0.0, duration=2.0, channel=1, recording=stereo)
    cuts = [
        plain,
        plain.perturb_speed(1.1),
        plain.perturb_volume(0.5),
        plain.resample(8000),
        right,
    ]
    path = tmp_path / "cuts.jsonl.gz"
    lhotse.CutSet.from_cuts(cuts).to_file(path)
    with pytest.raises(ManifestError) as exc:
        read_items(path)
    reasons = dict(exc.value.problems)
    assert sorted(reasons) == [2, 3, 4, 5]
    assert "Speed" in reasons[2] and "transforms" in reasons[2]
    assert "Volume" in reasons[3] and "Resample" in reasons[4]
    assert "channel 1 of the 2-channel recording" in reasons[5]
    lhotse.CutSet.from_cuts([plain]).to_file(tmp_path / "plain.jsonl.gz")
    assert [it.id for it in read_items(tmp_path / "plain.jsonl.gz").items] == ["plain"]
