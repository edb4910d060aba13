"""The TTS runner end to end on real synthesizers (piper, espeak-ng) and real recordings."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import soundfile as sf

from tests.conftest import shared_data
from voxassay.core.runstore import RunStore
from voxassay.suites.tts.runner import system_slug
from voxassay.suites.tts.suite import paired_units, run_tts, score_audio

FIX = Path(__file__).parent / "fixtures"
FAKES = "python:tests.suites.tts.fake_synths"


def _records(store: RunStore) -> dict[tuple[str, str], dict]:
    out = {}
    for line in (store.path / "records.jsonl").read_text().splitlines():
        d = json.loads(line)
        out[(d["id"], d["system"])] = d
    return out


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    """piper + espeak-ng on three critical-content items, full measures and the ASR trip."""
    out = tmp_path_factory.mktemp("tts-real")
    return run_tts(["piper", "espeak-ng:en-us+f3"], out, items=str(FIX / "mini_critical.yaml"))


@pytest.mark.slow
def test_real_synthesizers_every_unit_recorded_with_audio_and_metrics(real_run: RunStore) -> None:
    recs = _records(real_run)
    assert len(recs) == 6
    for (item_id, system), rec in recs.items():
        assert rec["status"] == "ok", rec["error"]
        path = real_run.path / rec["output"]["audio_path"]
        assert rec["output"]["audio_path"] == f"audio/{system_slug(system)}/{item_id}.wav"
        info = sf.info(str(path))
        assert info.subtype == "PCM_16" and info.samplerate == rec["output"]["sample_rate"]
        assert abs(info.duration - rec["timing"]["audio_s"]) < 0.01
        m = rec["metrics"]
        for key in (
            "wer_errors",
            "wer_words",
            "critical_total",
            "critical_ok",
            "dnsmos_ovrl",
            "clipping_fraction",
            "duration_s",
            "words_per_min",
            "rate_ok",
            "f0_median_st",
        ):
            assert isinstance(m[key], float), key
        assert len(rec["output"]["embedding"]) == 256
        assert rec["output"]["critical"] and {"token", "ok", "heard"} <= set(
            rec["output"]["critical"][0]
        )
        assert rec["timing"]["compute_s"] > 0
        assert rec["output"]["asr_text"]
    # piper speaks clearly: its round trip keeps most words
    piper = [r for (i, s), r in recs.items() if s == "piper"]
    errors = sum(r["metrics"]["wer_errors"] for r in piper)
    words = sum(r["metrics"]["wer_words"] for r in piper)
    assert errors / words < 0.35


@pytest.mark.slow
def test_run_json_records_voices_versions_and_load_times(real_run: RunStore) -> None:
    info = real_run.info()
    cfg = info["config"]
    assert cfg["metrics_version"] and cfg["items_sha256"] and cfg["asr"] == "faster-whisper"
    assert cfg["evals"]["t_codes"]["primary"] == "critical_accuracy"
    piper = info["systems"]["piper"]
    assert piper["describe"]["voice"] == "en_US-joe-medium"
    assert piper["loads"] == 1 and piper["load_s"] >= 0
    assert info["systems"]["espeak-ng:en-us+f3"]["describe"]["voice"] == "en-us+f3"
    assert set(info["measure_seconds"]) >= {"asr", "dnsmos", "prosody", "speaker"}
    assert (real_run.path / "items.jsonl").exists() and (real_run.path / "report.json").exists()
    units = paired_units(real_run)
    assert units["lower_is_better"] is False
    for system in ("piper", "espeak-ng:en-us+f3"):
        for num, den in units["units"][system].values():
            assert 0 <= num <= den


@pytest.mark.slow
def test_resume_after_kill_loses_nothing(tmp_path: Path) -> None:
    fixture = str(FIX / "mini_critical.yaml")

    class Killed(Exception):
        pass

    seen: list[str] = []

    def die_after_two(rec: object) -> None:
        seen.append(rec.id)  # type: ignore[attr-defined]
        if len(seen) == 2:
            raise Killed()

    with pytest.raises(Killed):
        run_tts(["espeak-ng:en-us+m7"], tmp_path, items=fixture, asr=None, on_record=die_after_two)
    (run_dir,) = list(tmp_path.iterdir())
    before = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(before) == 2
    with open(run_dir / "records.jsonl", "a") as fh:  # a kill in the middle of a write
        fh.write('{"id": "t-date", "system": "espeak-ng:en-us+m7", "stat')
    store = run_tts(["espeak-ng:en-us+m7"], tmp_path, items=fixture, asr=None, resume=True)
    assert store.path == run_dir
    after = (run_dir / "records.jsonl").read_text().splitlines()
    assert after[:2] == before  # finished records untouched
    ids = [json.loads(x)["id"] for x in after]
    assert sorted(ids) == ["t-date", "t-dose", "t-phone"]
    assert len(store.info()["resumed_at"]) == 1
    # a different configuration is a new run, not a resume
    other = run_tts(
        ["espeak-ng:en-us+m7"], tmp_path, items=fixture, asr=None, resume=True, repeats=2
    )
    assert other.path != run_dir


@pytest.mark.slow
def test_failing_python_synthesizer_becomes_error_records(tmp_path: Path) -> None:
    store = run_tts(
        [f"{FAKES}:flaky"], tmp_path, items=str(FIX / "mini_bad.yaml"), asr=None, timeout=3.0
    )
    recs = {i: r for (i, _), r in _records(store).items()}
    assert len(recs) == 7
    assert recs["b-ok-1"]["status"] == "ok" and recs["b-ok-2"]["status"] == "ok"
    assert recs["b-raise"]["error"]["kind"] == "synthesis"
    assert "crashed on purpose" in recs["b-raise"]["error"]["message"]
    assert recs["b-silence"]["error"]["kind"] == "empty_audio"
    assert recs["b-nan"]["error"]["kind"] == "empty_audio"
    assert recs["b-hang"]["status"] == "timeout"
    assert recs["b-garbage"]["status"] == "unparseable"
    for bad in ("b-raise", "b-silence", "b-nan", "b-hang", "b-garbage"):
        assert recs[bad]["metrics"] == {}  # never scored as zero
    # the item after the hang got a fresh synthesizer and succeeded
    assert recs["b-ok-2"]["metrics"]["dnsmos_ovrl"] > 1.0
    assert store.info()["systems"][f"{FAKES}:flaky"]["loads"] == 2


@pytest.mark.live
@pytest.mark.slow
def test_bad_texts_and_a_wrong_rate_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    lines = [
        ("t-empty", "   "),
        ("t-long", "word " * 5000),
        ("t-control", "Ring the bell\x07 twice."),
        ("t-emoji", "Thanks for calling \U0001f600 goodbye."),
        ("t-rate", "This one comes back at the wrong rate."),
        ("t-ok", "The library opens at nine."),
    ]
    manifest = tmp_path / "items.jsonl"
    manifest.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "text": t,
                    "labels": {"dimension": "audio_quality", "eval": "general_quality"},
                }
            )
            + "\n"
            for i, t in lines
        )
    )
    store = run_tts([f"{FAKES}:flaky"], tmp_path / "out", items=str(manifest), asr=None)
    recs = {i: r for (i, _), r in _records(store).items()}
    assert set(recs) == {i for i, _ in lines}
    assert recs["t-empty"]["error"]["kind"] == "input"
    assert "text" in recs["t-empty"]["error"]["message"]
    assert "too long: 25000 characters" in recs["t-long"]["error"]["message"]
    assert "U+0007" in recs["t-control"]["error"]["message"]
    assert recs["t-emoji"]["status"] == "ok"  # sent: the voice's handling is its result
    assert recs["t-rate"]["status"] != "ok" and "100" in recs["t-rate"]["error"]["message"]
    assert recs["t-ok"]["status"] == "ok" and recs["t-ok"]["metrics"]["duration_s"] > 0.5
    for bad in ("t-empty", "t-long", "t-control", "t-rate"):
        assert recs[bad]["metrics"] == {}


@pytest.mark.slow
def test_prosody_following_sees_ignored_and_followed_instructions(tmp_path: Path) -> None:
    store = run_tts(
        [f"{FAKES}:deaf", f"{FAKES}:follower"],
        tmp_path,
        items=str(FIX / "mini_expressive.yaml"),
        asr=None,
    )
    recs = _records(store)
    assert recs[("t-excited-1", f"{FAKES}:deaf")]["output"]["instructions_sent"] is True
    assert recs[("t-neutral-1", f"{FAKES}:deaf")]["output"]["instructions_sent"] is False
    units = paired_units(store)["units"]
    deaf = units[f"{FAKES}:deaf"]
    follower = units[f"{FAKES}:follower"]
    assert set(deaf) == {"t-excited-1", "t-sad-2"}  # neutral partners are references
    assert sum(n for n, _ in deaf.values()) == 0  # identical audio: no expected change met
    score = sum(n for n, _ in follower.values()) / sum(d for _, d in follower.values())
    assert score >= 0.5


@pytest.mark.slow
def test_score_audio_on_real_recordings(tmp_path: Path) -> None:
    data = shared_data()
    lines = []
    with open(data / "read_speech" / "manifest.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["path"].startswith("ljspeech/") and len(lines) < 3:
                lines.append(
                    {
                        "id": Path(row["path"]).stem,
                        "system": "lj-real",
                        "audio_filepath": str(data / "read_speech" / row["path"]),
                        "text": row["transcript_or_label"],
                    }
                )
    with open(data / "real_vs_synthetic" / "manifest.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            label, _, text = row["transcript_or_label"].partition("|")
            if "LJ050-0029" in row["path"] or "LJ050-0031" in row["path"]:
                lines.append(
                    {
                        "id": Path(row["path"]).stem,
                        "system": label.replace("vocoded:", ""),
                        "audio_filepath": str(data / "real_vs_synthetic" / row["path"]),
                        "text": text,
                        "eval": "general_quality",
                        "dimension": "audio_quality",
                    }
                )
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = score_audio(manifest, tmp_path / "runs")
    recs = _records(store)
    assert len(recs) == len(lines)
    assert all(r["status"] == "ok" for r in recs.values())
    lj = [r for (_, s), r in recs.items() if s == "lj-real"]
    wer = sum(r["metrics"]["wer_errors"] for r in lj) / sum(r["metrics"]["wer_words"] for r in lj)
    assert wer < 0.2
    for r in recs.values():
        assert (store.path / r["output"]["audio_path"]).exists()
        assert "timing" in r and "compute_s" not in r["timing"]  # nothing was synthesized
    assert set(store.info()["config"]["systems"]) >= {"lj-real", "real", "kan-bayashi_melgan"}


def test_score_audio_refuses_bad_lines_with_numbers(tmp_path: Path) -> None:
    from voxassay.core.errors import ManifestError

    manifest = tmp_path / "bad.jsonl"
    manifest.write_text(
        json.dumps({"id": "a", "audio_filepath": "x.wav", "text": "hi"})
        + "\n"
        + json.dumps({"id": "a", "audio_filepath": "x.wav", "text": "hi"})
        + "\n"
        + json.dumps({"id": "b", "text": "no audio"})
        + "\n"
    )
    with pytest.raises(ManifestError) as err:
        score_audio(manifest, tmp_path / "runs")
    msg = str(err.value)
    assert "2" in msg and "3" in msg
    assert not (tmp_path / "runs").exists()


@pytest.mark.live
@pytest.mark.slow
def test_compare_two_tts_runs_pairs_items(tmp_path: Path) -> None:
    from voxassay.report.compare import compare_runs

    stores = [
        run_tts(
            [spec],
            tmp_path / spec.replace(":", "_"),
            items="demo",
            only=["general_quality", "dates"],
            asr=None,
            measures=("quality", "rate"),
        )
        for spec in ("espeak-ng:en-us+f3", "espeak-ng:en-us+m7")
    ]
    result = compare_runs(stores[0].path, stores[1].path)
    (cmp,) = result["comparisons"]
    assert cmp["system_a"] == "espeak-ng:en-us+f3" and cmp["system_b"] == "espeak-ng:en-us+m7"
    assert cmp["overall"]["n"] >= 2  # the shared scored items (quality; dates need ASR)
    o = cmp["overall"]
    assert o["ci_lo"] <= o["diff"] <= o["ci_hi"]


@pytest.mark.slow
def test_items_whose_ids_look_alike_get_their_own_files(tmp_path: Path) -> None:
    """``a b`` and ``a_b`` used to share ``a_b.wav``; ``x.r1`` and ``x`` repeat 1 would share
    ``x.r1.wav``. Each item and repeat now has its own file, with its own audio."""
    from voxassay.suites.tts.runner import item_filename

    assert item_filename("a_b", 0) == "a_b.wav"  # a safe id keeps its name
    names = {item_filename(i, r) for i, r in [("a b", 0), ("a_b", 0), ("x.r1", 0), ("x", 1)]}
    assert len(names) == 4
    manifest = tmp_path / "items.jsonl"
    texts = {"a b": "The first sentence.", "a_b": "A second, longer sentence here."}
    manifest.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "text": t,
                    "labels": {"dimension": "audio_quality", "eval": "general_quality"},
                }
            )
            + "\n"
            for i, t in texts.items()
        )
    )
    store = run_tts(["espeak-ng:en-us"], tmp_path / "out", items=str(manifest), asr=None)
    recs = {i: r for (i, _), r in _records(store).items()}
    paths = {i: store.path / r["output"]["audio_path"] for i, r in recs.items()}
    assert len(set(paths.values())) == 2
    durations = {i: sf.info(str(p)).duration for i, p in paths.items()}
    assert durations["a_b"] > durations["a b"]  # each file holds its own item's audio
