"""Privacy: redacted bundles keep segments, a 10 ms loudness envelope and the ledger with
masked transcripts, drop raw audio, record retention and purpose, and still score."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.suites.duplex.test_bundle import (
    KIT,
    L3,
    build_bundle,
    invoke,
    kit,
    pair_values,
    report_of,
)
from voxeval.core.runstore import RunStore
from voxeval.suites.duplex.bundle import (
    FEATURES_FILE,
    BundleError,
    _masked_transcripts,
    score_bundle_folder,
)
from voxeval.suites.duplex.redact import loudness_envelope, mask_text, redact_bundle


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit's barge-in call as an L3 bundle (loopback capture)."""
    kit()
    root = tmp_path_factory.mktemp("src")
    return build_bundle(
        root / "d02", "d02_bargein_cut_200", provenance=L3, decisions={"u2": "interrupt"}
    )


@pytest.fixture(scope="module")
def redacted(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("dst") / "d02"
    redact_bundle(source, dst, retention_days=7, purpose="qa")
    return dst


def test_mask_text_keeps_word_lengths() -> None:
    assert mask_text("Move it to Tuesday, please.") == "**** ** ** *******, ******."
    assert mask_text("café at 10:30") == "**** ** **:**"
    assert mask_text("") == ""


def test_loudness_envelope_of_real_audio() -> None:
    kit()
    data, sr = sf.read(KIT / "wav" / "d02_bargein_cut_200.wav", always_2d=True)
    x = data[:, 0]
    env = loudness_envelope(x, sr)
    assert len(env) == math.ceil(len(x) / 160)
    k = int(1.0 * 100)  # the frame at 1.0 s, inside the user's first utterance
    frame = x[k * 160 : (k + 1) * 160]
    assert env[k] == pytest.approx(10 * math.log10(np.mean(frame**2)), abs=0.051)
    # the utterance at -27 dBFS active level is loud frames; the dither floor is -60 dBFS
    assert -35 < max(env) < -10 and min(env) == pytest.approx(-60, abs=6)
    assert loudness_envelope(np.zeros(480), 16000) == [-120.0] * 3


def test_redacted_bundle_holds_no_audio_and_records_privacy(source: Path, redacted: Path) -> None:
    assert not list(redacted.glob("*.wav"))
    manifest = json.loads((redacted / "manifest.json").read_text())
    assert manifest["privacy"] == {"redacted": True, "purpose": "qa", "retention_days": 7}
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == {
        "events.jsonl",
        "scenario.yaml",
        "tool-audit.json",
        "final-state.json",
        FEATURES_FILE,
    }
    for name, entry in listed.items():
        assert entry["sha256"] == sha(redacted / name), name
    assert (
        manifest["provenance"] == json.loads((source / "manifest.json").read_text())["provenance"]
    )
    features = json.loads((redacted / FEATURES_FILE).read_text())
    red = features["redaction"]
    assert red["source_level"] == "L3" and red["transcripts"] == "mask"
    assert {d["path"]: d["sha256"] for d in red["dropped"]} == {
        "input.wav": sha(source / "input.wav"),
        "output.wav": sha(source / "output.wav"),
    }
    n_frames = math.ceil(features["duration_s"] * 100 - 1e-9)
    assert len(features["envelope"]["user"]) == len(features["envelope"]["agent"]) == n_frames
    # the envelope is the source audio's: compare one frame with the kit recording
    data, _ = sf.read(KIT / "wav" / "d02_bargein_cut_200.wav", always_2d=True)
    frame = data[300 * 160 : 301 * 160, 1]
    assert features["envelope"]["agent"][300] == pytest.approx(
        10 * math.log10(np.mean(frame**2)), abs=0.051
    )


def test_transcripts_are_masked_and_nothing_else_changes(source: Path, redacted: Path) -> None:
    before, after = events(source / "events.jsonl"), events(redacted / "events.jsonl")
    assert len(before) == len(after)
    masked = 0
    for b, a in zip(before, after, strict=True):
        if b["event_type"] == "asr.final":
            text, mask = b["data"]["text"], a["data"]["text"]
            assert mask != text and len(mask) == len(text)
            assert [len(w) for w in mask.split()] == [len(w) for w in text.split()]
            assert set(mask) <= {"*", " ", ",", ".", "'"}
            masked += 1
            a["data"] = {k: v for k, v in a["data"].items() if k != "text_redacted"}
            a["data"]["text"] = text
        assert a == b
    assert masked == 2


def test_redacted_bundle_scores_like_the_original(source: Path, redacted: Path) -> None:
    orig = score_bundle_folder(source)
    red = score_bundle_folder(redacted)
    o, r = orig.output, red.output
    assert r["segments_source"] == FEATURES_FILE and o["segments_source"] == "audio"
    assert r["segments"] == o["segments"] and r["labels"] == o["labels"]
    assert r["pairs"] == o["pairs"]
    assert red.metrics["rates"] == orig.metrics["rates"]
    assert r["task"] == o["task"]
    assert pair_values(r, "interrupt_stop_ms") == pair_values(o, "interrupt_stop_ms")
    # the level is derived from what is left, and says that the audio was dropped
    assert o["evidence"]["level"] == "L3"
    assert r["evidence"]["level"] == "L2" and r["evidence"]["raw_audio"] == "dropped"
    assert any("raw audio dropped" in x and "at L3" in x for x in r["evidence"]["reasons"]), r[
        "evidence"
    ]["reasons"]
    # no missing-audio errors for a redacted bundle
    assert not [p for p in r["problems"] if p["severity"] == "error"], r["problems"]


def test_transcripts_drop_and_keep(source: Path, tmp_path: Path) -> None:
    redact_bundle(source, tmp_path / "drop", transcripts="drop")
    finals = [
        e for e in events(tmp_path / "drop" / "events.jsonl") if e["event_type"] == "asr.final"
    ]
    assert finals and all("text" not in e["data"] for e in finals)
    redact_bundle(source, tmp_path / "keep", transcripts="keep")
    kept = [e for e in events(tmp_path / "keep" / "events.jsonl") if e["event_type"] == "asr.final"]
    assert kept[0]["data"]["text"] == "I'm phoning about my car rental."
    # redacting a redacted bundle keeps its features and updates privacy
    redact_bundle(tmp_path / "drop", tmp_path / "again", retention_days=1, purpose="audit")
    f1 = json.loads((tmp_path / "drop" / FEATURES_FILE).read_text())
    f2 = json.loads((tmp_path / "again" / FEATURES_FILE).read_text())
    assert f2["segments"] == f1["segments"] and f2["redaction"]["source_level"] == "L3"
    m = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert m["privacy"] == {"redacted": True, "purpose": "audit", "retention_days": 1}


def test_redaction_refuses_what_it_cannot_do(source: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("manifest.json", "events.jsonl"):
        (broken / name).write_bytes((source / name).read_bytes())
    with pytest.raises(BundleError, match="no audio"):
        redact_bundle(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # no partial copy left behind
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(BundleError, match="not empty"):
        redact_bundle(source, busy)
    with pytest.raises(ValueError, match="transcripts"):
        redact_bundle(source, tmp_path / "o2", transcripts="blur")  # type: ignore[arg-type]


def test_masked_transcripts_do_not_blame_perception() -> None:
    sl: dict[str, Any] = {
        "gates": [
            {
                "gate": "heard",
                "layer": "perception",
                "passed": False,
                "note": "asr.final '***' lacks 'Tuesday': misheard",
            },
            {"gate": "decided", "layer": "decision", "passed": False, "note": "wrong"},
        ],
        "layer": "perception",
        "first_failing_gate": "heard",
    }
    _masked_transcripts(sl)
    assert sl["gates"][0]["passed"] is None
    assert (sl["first_failing_gate"], sl["layer"]) == ("decided", "decision")


def test_score_redact_cli_keeps_no_raw_audio(tmp_path: Path) -> None:
    kit()
    build_bundle(
        tmp_path / "in" / "d06",
        "d06_backchannel_agent_wrongly_stops",
        decisions={"bc1": "interrupt"},
    )
    path, _, _ = invoke(
        [
            "duplex",
            "score",
            str(tmp_path / "in"),
            "--redact",
            "--retention-days",
            "30",
            "--purpose",
            "regression",
            "--out",
            str(tmp_path / "runs"),
        ]
    )
    assert path is not None
    assert not list(path.rglob("*.wav"))
    (rec,) = RunStore.open(path).load_records().records
    assert rec.status == "ok" and rec.output["bundle"] == f"bundles/{rec.id}/0"
    manifest = json.loads((path / rec.output["bundle"] / "manifest.json").read_text())
    assert manifest["privacy"] == {"redacted": True, "purpose": "regression", "retention_days": 30}
    report = report_of(path)
    assert report["evidence"]["redacted_sessions"] == [rec.id]
    assert report["key_failures"][0]["layer"] == "decision"
    html = (path / "report.html").read_text()
    assert "raw audio dropped by redaction" in html and "<audio" not in html


def test_validate_accepts_a_redacted_bundle_without_raw_audio(source: Path, tmp_path: Path) -> None:
    """`duplex validate` on a redacted bundle: no "required file missing" for the dropped WAVs."""
    from voxeval.suites.duplex.validate import validate_path

    dst = tmp_path / "redacted"
    redact_bundle(source, dst)
    assert not (dst / "input.wav").exists() and (dst / "features.json").exists()
    missing = [p for p in validate_path(dst) if "required bundle file missing" in p.message]
    assert missing == []
    (dst / "features.json").unlink()  # without the features the audio really is missing
    assert any("required bundle file missing" in p.message for p in validate_path(dst))
