"""Privacy: redacted bundles keep segments, a 10 ms loudness envelope and the ledger with
masked transcripts, drop raw audio, record retention and purpose, and still score."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml

from tests.suites.duplex.test_bundle import (
    KIT,
    L3,
    build_bundle,
    invoke,
    kit,
    pair_values,
    report_of,
)
from voxassay.contracts.duplex.evidence import FEATURES_FILE, REDACTED_REASON
from voxassay.core.runstore import RunStore
from voxassay.suites.duplex.evidence.bundle_io import BundleError
from voxassay.suites.duplex.evidence.redact import loudness_envelope, mask_text, redact_bundle
from voxassay.suites.duplex.scoring.score import masked_transcripts, score_bundle_folder


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
        "capture.wav": sha(source / "capture.wav"),  # the sound loop's audio goes too
        "received.wav": sha(source / "received.wav"),
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
    o, r = orig.output.to_output(), red.output.to_output()
    assert r["segments_source"] == FEATURES_FILE and o["segments_source"] == "audio"
    assert r["segments"] == o["segments"] and r["labels"] == o["labels"]
    assert r["pairs"] == o["pairs"]
    assert red.metrics["rates"] == orig.metrics["rates"]
    assert r["task"] == o["task"]
    assert pair_values(r, "interrupt_stop_ms") == pair_values(o, "interrupt_stop_ms")
    # the level the original evidence supported is kept: redaction is its own reason, not a
    # provenance contradiction
    assert o["evidence"]["level"] == "L3"
    assert r["evidence"]["level"] == "L3" and r["evidence"]["raw_audio"] == "dropped"
    reasons = r["evidence"]["reasons"]
    assert any(x.startswith(REDACTED_REASON) and "L3" in x for x in reasons), reasons
    assert not any("contradiction" in x for x in reasons), reasons
    assert any("raw audio dropped" in x and "at L3" in x for x in reasons), reasons
    # no missing-audio errors for a redacted bundle; the redaction is shown, not a contradiction
    assert not [p for p in r["problems"] if p["severity"] == "error"], r["problems"]
    messages = [p["message"] for p in r["problems"]]
    assert any(m.startswith(REDACTED_REASON) for m in messages), messages
    assert not any("contradiction" in m for m in messages), messages


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
    masked_transcripts(sl)
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
    from voxassay.suites.duplex.evidence.validate import validate_path

    dst = tmp_path / "redacted"
    redact_bundle(source, dst)
    assert not (dst / "input.wav").exists() and (dst / "features.json").exists()
    missing = [p for p in validate_path(dst) if "required bundle file missing" in p.message]
    assert missing == []
    (dst / "features.json").unlink()  # without the features the audio really is missing
    assert any("required bundle file missing" in p.message for p in validate_path(dst))


# --------------------------------------------------------------------------- evidence reason


def rehash(folder: Path) -> None:
    """Rewrite the manifest's file list hashes after a test edited a bundle file."""
    from voxassay.contracts.duplex.manifest import file_entry

    m = json.loads((folder / "manifest.json").read_text())
    m["files"] = [
        file_entry(folder / f["path"], folder, channels=f.get("channels")).model_dump(
            exclude_none=True
        )
        for f in m["files"]
        if (folder / f["path"]).is_file()
    ]
    (folder / "manifest.json").write_text(json.dumps(m, indent=2))


def edited_copy(redacted: Path, dst: Path, edit_features: Any = None, edit_manifest: Any = None):
    shutil.copytree(redacted, dst)
    if edit_features is not None:
        f = json.loads((dst / FEATURES_FILE).read_text())
        edit_features(f)
        (dst / FEATURES_FILE).write_text(json.dumps(f))
    if edit_manifest is not None:
        m = json.loads((dst / "manifest.json").read_text())
        edit_manifest(m)
        (dst / "manifest.json").write_text(json.dumps(m, indent=2))
    rehash(dst)
    return dst


def assessment(folder: Path) -> Any:
    from voxassay.contracts.duplex.evidence import assess_evidence
    from voxassay.suites.duplex.evidence.validate import load_manifest

    return assess_evidence(load_manifest(folder / "manifest.json"), folder)


def test_consistent_redaction_keeps_the_level_and_validate_says_redacted(redacted: Path) -> None:
    from voxassay.suites.duplex.evidence.validate import validate_path

    a = assessment(redacted)
    assert a.level == "L3" and a.contradictions == []
    assert a.redaction is not None and a.redaction.consistent
    assert set(a.redaction.dropped) == {"input.wav", "output.wav", "capture.wav", "received.wav"}
    assert any(r.startswith(REDACTED_REASON) for r in a.reasons), a.reasons
    problems = validate_path(redacted)
    text = [p.format() for p in problems]
    assert not [p for p in problems if p.severity == "error"], text
    assert not any("contradiction" in t for t in text), text
    (note,) = [p for p in problems if REDACTED_REASON in p.message]
    assert note.severity == "warning" and note.file.endswith("manifest.json") and note.line
    # the manifest alone (validate manifest.json) reads the features next to it
    alone = validate_path(redacted / "manifest.json")
    assert any(REDACTED_REASON in p.message for p in alone)
    assert not any("contradiction" in p.message for p in alone)


@pytest.mark.parametrize(
    ("what", "edit"),
    [
        ("no redaction block", lambda f: f.pop("redaction")),
        ("no dropped audio", lambda f: f["redaction"].update(dropped=[])),
        ("no source level", lambda f: f["redaction"].pop("source_level")),
        ("bad hash", lambda f: f["redaction"]["dropped"][0].update(sha256="x" * 64)),
        ("unknown version", lambda f: f["redaction"].update(version=99)),
    ],
)
def test_missing_or_inconsistent_redaction_record_stays_a_contradiction(
    redacted: Path, tmp_path: Path, what: str, edit: Any
) -> None:
    from voxassay.suites.duplex.evidence.validate import validate_path

    dst = edited_copy(redacted, tmp_path / "b", edit_features=edit)
    a = assessment(dst)
    assert a.level == "L2", what
    assert a.redaction is not None and not a.redaction.consistent
    assert a.contradictions, what
    assert any("redaction record" in r for r in a.reasons), a.reasons
    assert not any(r.startswith(REDACTED_REASON) for r in a.reasons)
    text = [p.format() for p in validate_path(dst)]
    assert any("provenance contradiction" in t for t in text), text
    assert not any(REDACTED_REASON in t for t in text), text
    # the raw audio is missing for real now
    assert any("input.wav" in t and "required bundle file missing" in t for t in text), text
    # and the scorer agrees: no longer L3
    out = score_bundle_folder(dst).output.to_output()
    assert out["evidence"]["level"] == "L2"
    assert any("contradiction" in p["message"] for p in out["problems"])


def test_redaction_record_is_checked_against_the_manifest(redacted: Path, tmp_path: Path) -> None:
    # the record says the audio is dropped but the manifest still lists it: inconsistent
    def relist(m: dict[str, Any]) -> None:
        m["files"].append({"path": "output.wav", "sha256": "0" * 64, "bytes": 1})

    shutil.copytree(redacted, tmp_path / "b")
    rehash(tmp_path / "b")
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    relist(m)
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(m))
    a = assessment(tmp_path / "b")
    assert a.redaction is not None and "still listed" in str(a.redaction.problem)
    assert a.level == "L2" and a.contradictions
    # a redaction not declared in the manifest is no redaction: the audio is just missing
    dst = edited_copy(
        redacted, tmp_path / "c", edit_manifest=lambda m: m["privacy"].update(redacted=False)
    )
    a = assessment(dst)
    assert a.redaction is None and a.level == "L2" and a.contradictions


def test_redacted_bundle_never_rises_above_its_source_level(redacted: Path, tmp_path: Path) -> None:
    def claim_device(m: dict[str, Any]) -> None:
        m["provenance"]["capture"] = "device_mic"
        m["device"] = "pixel-9"

    dst = edited_copy(redacted, tmp_path / "b", edit_manifest=claim_device)
    a = assessment(dst)
    assert a.level == "L3", a.reasons
    assert any(r.startswith("capped at L3") and "L4" in r for r in a.reasons), a.reasons


def test_gates_read_the_redacted_level(source: Path, tmp_path: Path) -> None:
    """A run scored from redacted L3 bundles is measured at L3 (gates use the level)."""
    from voxassay.suites.duplex.gate_table import metric_table_from_report

    (tmp_path / "in").mkdir()
    shutil.copytree(source, tmp_path / "in" / "d02")
    path, _, _ = invoke(
        ["duplex", "score", str(tmp_path / "in"), "--redact", "--out", str(tmp_path / "runs")]
    )
    assert path is not None
    report = report_of(path)
    assert report["evidence"]["level"] == "L3"
    (sid,) = report["evidence"]["redacted_sessions"]
    assert any(r.startswith(REDACTED_REASON) for r in report["evidence"]["details"][sid]["reasons"])
    table = metric_table_from_report(report, run_dir=path)
    levels = {row.evidence_level for row in table.rows.values()}
    assert levels == {"L3"}, levels
    html = (path / "report.html").read_text()
    assert REDACTED_REASON in html and "L3 (redacted)" in html
    assert "provenance contradiction" not in html


# --------------------------------------------------------------------------- personal data

NAME, PHONE, EMAIL = "Ada Lovelace", "+44 20 7946 0958", "ada.lovelace@example.org"
OTHER_PHONE, OTHER_EMAIL, OLD_EMAIL = (
    "+44 20 7946 0111",
    "grace.h@example.org",
    "ada.old@example.org",
)
PERSONAL = (NAME, "Lovelace", PHONE, "7946 0958", EMAIL, OTHER_PHONE, OTHER_EMAIL, OLD_EMAIL)


def _personal_ledger(lines: list[str]) -> list[str]:
    """The kit ledger with personal data in a transcript, the tool call's arguments and
    result, and a task whose e-mail is corrected from version 1 to 2."""
    out = []
    said = False
    for line in lines:
        e = json.loads(line)
        t, data = e["event_type"], e.setdefault("data", {})
        if t == "asr.final" and not said:
            data["text"] = f"This is {NAME}, call me on {PHONE}"
            said = True
        elif t == "task.state":
            data["fields"] = {"ticket": "open", "email": OLD_EMAIL, "customer_name": NAME}
            out.append(json.dumps(e))
            e = json.loads(json.dumps(e))
            e["event_id"] += "-v2"
            e["monotonic_ns"] += 1_000_000
            e["data"].update(version=2)
            e["data"]["fields"]["email"] = EMAIL
        elif t == "tool.requested":
            data["arguments"] = {
                "customer_name": NAME,
                "phone": PHONE,
                "email": EMAIL,
                "callback_date": "2026-08-10",
                "amount": 42,
            }
        elif t == "tool.completed":
            data["result"] = {
                "status": "logged",
                "ticket_id": "T-1001",
                "message": f"Callback for {NAME} on {PHONE} logged",
            }
        out.append(json.dumps(e))
    return out


@pytest.fixture(scope="module")
def personal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle whose business files hold a name, phone numbers and e-mail addresses, and
    whose task checks fail in three ways that depend on comparing them (a duplicate write
    whose arguments differ only in case, a wrong phone in the final state, a last write with
    an e-mail the user had corrected away from)."""
    kit()
    root = tmp_path_factory.mktemp("pii")
    dst = build_bundle(
        root / "d02",
        "d02_bargein_cut_200",
        provenance=L3,
        decisions={"u2": "interrupt"},
        lines=_personal_ledger,
        final_state={
            "ticket": "open",
            "customer_name": NAME,
            "email": EMAIL,
            "phone": OTHER_PHONE,
            "callback_date": "2026-08-10",
            "_meta": {"source": "crm"},
        },
    )
    audit = json.loads((dst / "tool-audit.json").read_text())
    (c1,) = audit["calls"]
    args = {
        "customer_name": NAME,
        "phone": PHONE,
        "email": EMAIL,
        "callback_date": "2026-08-10",
        "amount": 42,
    }
    c1.update(arguments=args, idempotency_key="idem-1", result={"status": "logged"})
    c2 = {
        **c1,
        "call_id": "c2",
        "idempotency_key": "idem-2",
        "arguments": {**args, "email": EMAIL.upper(), "customer_name": NAME.lower()},
        "requested_ns": c1["requested_ns"] + 300_000_000,
        "completed_ns": c1["requested_ns"] + 500_000_000,
    }
    c3 = {
        **c1,
        "call_id": "c3",
        "idempotency_key": "idem-3",
        "arguments": {**args, "phone": OTHER_PHONE, "email": OTHER_EMAIL},
        "requested_ns": c1["requested_ns"] + 600_000_000,
        "completed_ns": c1["requested_ns"] + 800_000_000,
        "meta": {"operator_note": f"{NAME} asked to be called on {OTHER_PHONE}"},
    }
    audit["calls"] = [c1, c2, c3]
    (dst / "tool-audit.json").write_text(json.dumps(audit))
    sc = yaml.safe_load((dst / "scenario.yaml").read_text())
    sc["description"] = f"Callback request from {EMAIL}"
    sc["segments"][0]["say"] = f"Hi, this is {NAME}, my number is {PHONE}"
    sc["tools"][0]["results"] = [{"match": {"email": EMAIL}, "result": {"status": "logged"}}]
    sc["business_truth"]["expected_final_state"] = {
        "ticket": "open",
        "customer_name": NAME.upper(),
        "email": EMAIL,
        "phone": PHONE,
        "callback_date": "2026-08-10",
    }
    (dst / "scenario.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))
    rehash(dst)
    return dst


@pytest.fixture(scope="module")
def personal_redacted(personal: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("pii-red") / "d02"
    redact_bundle(personal, dst)
    return dst


def _all_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_personal_data_is_gone_from_every_file(personal: Path, personal_redacted: Path) -> None:
    before = b"\n".join(_all_bytes(personal).values()).lower()
    assert all(x.lower().encode() in before for x in PERSONAL)  # the source really has them
    for name, data in _all_bytes(personal_redacted).items():
        low = data.lower()
        for x in PERSONAL:
            assert x.lower().encode() not in low, (name, x)


def _verdicts(task: dict[str, Any]) -> dict[str, Any]:
    """What a task result decides: per check passed / value / unscored / evidence ids, and
    the session counts (reasons and details quote the values, which are masked)."""
    return {
        "passed": task["passed"],
        "counts": [task[k] for k in ("duplicate_side_effects", "stale_deliveries")],
        "writes_after_stop": task["writes_after_stop"],
        "checks": {
            c["name"]: (c["passed"], c["value"], c["unscored"], c["evidence"])
            for c in task["checks"]
        },
    }


def test_task_checks_score_the_redacted_copy_identically(
    personal: Path, personal_redacted: Path
) -> None:
    o = score_bundle_folder(personal).output.to_output()
    r = score_bundle_folder(personal_redacted).output.to_output()
    assert o["task"] is not None and _verdicts(r["task"]) == _verdicts(o["task"])
    checks = {c["name"]: c for c in o["task"]["checks"]}
    # the checks that compare personal values really decided something
    assert checks["duplicate_side_effects"]["passed"] is False
    assert checks["duplicate_side_effects"]["value"] == 1
    assert checks["goal_completion"]["passed"] is False
    assert checks["goal_completion"]["value"] == pytest.approx(0.8)
    assert checks["parameter_consistency"]["passed"] is False
    assert checks["tool_choice"]["passed"] is True
    # the rest of the scoring is untouched, and the level is kept
    assert r["pairs"] == o["pairs"] and r["labels"] == o["labels"]
    assert r["evidence"]["level"] == o["evidence"]["level"] == "L3"
    # the failure reasons quote tokens, not the values
    red = {c["name"]: c for c in r["task"]["checks"]}
    assert "<phone:" in red["goal_completion"]["reason"]
    assert PHONE not in json.dumps(r["task"])


def test_tokens_keep_equality_across_files_and_leave_business_values(
    personal: Path, personal_redacted: Path
) -> None:
    state = json.loads((personal_redacted / "final-state.json").read_text())
    audit = json.loads((personal_redacted / "tool-audit.json").read_text())
    sc = yaml.safe_load((personal_redacted / "scenario.yaml").read_text())
    evs = events(personal_redacted / "events.jsonl")
    truth = sc["business_truth"]["expected_final_state"]
    c1, c2, c3 = audit["calls"]
    email = state["email"]
    assert email.startswith("<email:") and email.endswith(">")
    # one token per value in every file, whatever its case
    assert truth["email"] == c1["arguments"]["email"] == c2["arguments"]["email"] == email
    assert sc["tools"][0]["results"][0]["match"]["email"] == email
    (v2,) = [e for e in evs if e["event_type"] == "task.state" and e["data"]["version"] == 2]
    assert v2["data"]["fields"]["email"] == email
    name = state["customer_name"]
    assert name.startswith("<name:") and truth["customer_name"] == name
    assert c2["arguments"]["customer_name"] == name
    # different values, different tokens
    assert c3["arguments"]["email"] != email and c3["arguments"]["phone"] == state["phone"]
    assert truth["phone"] == c1["arguments"]["phone"] != state["phone"]
    # free text: names and numbers replaced where they stand
    assert sc["description"] == f"Callback request from {email}"
    assert c3["meta"]["operator_note"] == f"{name} asked to be called on {state['phone']}"
    (done,) = [e for e in evs if e["event_type"] == "tool.completed"]
    assert done["data"]["result"]["message"] == f"Callback for {name} on {truth['phone']} logged"
    # dates, amounts, ids, statuses, versions and idempotency keys untouched
    orig = json.loads((personal / "tool-audit.json").read_text())
    for a, b in zip(orig["calls"], audit["calls"], strict=True):
        for k in ("call_id", "idempotency_key", "task_id", "status", "requested_ns", "tool"):
            assert a[k] == b[k]
        assert b["arguments"]["callback_date"] == "2026-08-10" and b["arguments"]["amount"] == 42
    assert state["ticket"] == "open" and state["_meta"] == {"source": "crm"}
    assert done["data"]["result"]["ticket_id"] == "T-1001"
    assert [e["data"]["version"] for e in evs if e["event_type"] == "task.state"] == [1, 2]
    # the scripted user text is masked like a transcript
    assert sc["segments"][0]["say"] == mask_text(f"Hi, this is {NAME}, my number is {PHONE}")


def test_redaction_block_records_masked_fields(personal_redacted: Path) -> None:
    red = json.loads((personal_redacted / FEATURES_FILE).read_text())["redaction"]
    pd = red["personal_data"]
    assert pd["mode"] == "mask" and pd["rule_version"] == 1
    assert "not stored" in pd["key"]
    fields = {f: {(x["field"], x["rule"]) for x in v} for f, v in pd["files"].items()}
    assert {("email", "key"), ("phone", "key"), ("customer_name", "key")} <= fields[
        "final-state.json"
    ]
    assert ("calls[].arguments.email", "key") in fields["tool-audit.json"]
    assert ("calls[].meta.operator_note", "text") in fields["tool-audit.json"]
    assert ("task.state data.fields.email", "key") in fields["events.jsonl"]
    assert ("tool.completed data.result.message", "pattern") in fields["events.jsonl"]
    assert ("business_truth.expected_final_state.email", "key") in fields["scenario.yaml"]
    assert ("description", "pattern") in fields["scenario.yaml"]
    assert pd["distinct_values"] >= 6
    assert red["scenario_say"] == {
        "masked": len(yaml.safe_load((personal_redacted / "scenario.yaml").read_text())["segments"])
    }


def test_tokens_depend_on_a_key_that_is_never_written(personal: Path, tmp_path: Path) -> None:
    def email_token(folder: Path) -> str:
        return str(json.loads((folder / "final-state.json").read_text())["email"])

    redact_bundle(personal, tmp_path / "a")
    redact_bundle(personal, tmp_path / "b")
    assert email_token(tmp_path / "a") != email_token(tmp_path / "b")  # random per redaction
    key = bytes(range(32))
    redact_bundle(personal, tmp_path / "c", personal_data_key=key)
    redact_bundle(personal, tmp_path / "d", personal_data_key=key)
    assert email_token(tmp_path / "c") == email_token(tmp_path / "d")
    for data in _all_bytes(tmp_path / "c").values():
        assert key.hex().encode() not in data and key not in data
    pd = json.loads((tmp_path / "c" / FEATURES_FILE).read_text())["redaction"]["personal_data"]
    assert pd["key"].startswith("supplied by the caller")


def test_redacting_again_and_keeping_personal_data(
    personal: Path, personal_redacted: Path, tmp_path: Path
) -> None:
    redact_bundle(personal_redacted, tmp_path / "again")
    for name in ("final-state.json", "tool-audit.json", "scenario.yaml", "events.jsonl"):
        assert (tmp_path / "again" / name).read_bytes() == (personal_redacted / name).read_bytes()
    f1 = json.loads((personal_redacted / FEATURES_FILE).read_text())["redaction"]
    f2 = json.loads((tmp_path / "again" / FEATURES_FILE).read_text())["redaction"]
    assert f2["personal_data"] == f1["personal_data"]
    redact_bundle(personal, tmp_path / "keep", personal_data="keep", transcripts="keep")
    for name in ("final-state.json", "tool-audit.json", "scenario.yaml"):
        assert (tmp_path / "keep" / name).read_bytes() == (personal / name).read_bytes()
    pd = json.loads((tmp_path / "keep" / FEATURES_FILE).read_text())["redaction"]["personal_data"]
    assert pd == {"mode": "keep"}
    with pytest.raises(ValueError, match="personal_data"):
        redact_bundle(personal, tmp_path / "x", personal_data="blur")  # type: ignore[arg-type]


def test_a_business_file_that_cannot_be_read_is_not_copied(personal: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(personal, src)
    (src / "final-state.json").write_text('{"customer_name": "' + NAME + '", ')
    rehash(src)
    redact_bundle(src, tmp_path / "out")
    assert not (tmp_path / "out" / "final-state.json").exists()
    red = json.loads((tmp_path / "out" / FEATURES_FILE).read_text())["redaction"]
    assert "final-state.json" in red["personal_data"]["not_copied"]
    for data in _all_bytes(tmp_path / "out").values():
        assert NAME.encode() not in data


def test_personal_data_rule() -> None:
    from voxassay.suites.duplex.evidence.personal_data import PersonalDataMasker, key_class

    personal = [
        "name",
        "firstName",
        "customer_email",
        "phone_number",
        "contactPhone2",
        "address_line1",
        "postal_code",
        "birth_date",
        "date_of_birth",
        "dob",
        "card_number",
        "iban",
        "account_no",
        "national_id",
        "passenger",
    ]
    protected = [
        "booking_id",
        "customer_id",
        "status",
        "final_date",
        "amount",
        "task_version",
        "idempotency_key",
        "order_number",
        "confirmation_code",
    ]
    assert all(key_class(k)[0] == "personal" for k in personal), [
        k for k in personal if key_class(k)[0] != "personal"
    ]
    assert all(key_class(k)[0] == "protected" for k in protected)
    assert key_class("party_size") == ("plain", None)
    m = PersonalDataMasker(b"k")
    doc = {
        "note": (
            f"mail {EMAIL}; call {PHONE}; on 2026-08-10 10:30 or 10.08.2026; pay 1234567.50; "
            "ref 3f2a9c81-1234-5678-9abc-def012345678; card 4111 1111 1111 1111; order 12345"
        ),
        "contact": {"id": "c-1", "value": "ada", "verified": True},
        "booking_ref": "5551234567",
        "callback": "555 123 4567",
    }
    m.collect(doc)
    out = m.mask(doc, "f")
    note = out["note"]
    assert EMAIL not in note and PHONE not in note and "4111" not in note
    for kept in ("2026-08-10 10:30", "10.08.2026", "1234567.50", "3f2a9c81-1234-5678", "12345"):
        assert kept in note, kept
    assert out["contact"]["id"] == "c-1" and out["contact"]["verified"] is True
    assert out["contact"]["value"].startswith("<contact:")
    assert out["booking_ref"] == "5551234567"  # protected, and no equal value was masked
    assert out["callback"].startswith("<phone:")
    # masking is idempotent: tokens are never masked again
    m2 = PersonalDataMasker(b"other")
    m2.collect(out)
    assert m2.mask(out, "f") == out
