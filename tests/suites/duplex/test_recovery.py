"""After the break: history consistency after a truncation and recovery accuracy after a
component failure, on bundles of the duplex truth kit's real two-channel calls with
constructed ledgers (the kit says where the agent's audio was cut, so the answer is known by
construction), through the pure functions, the bundle scorer, the report and the gates."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.suites.duplex.test_bundle import (
    NS,
    build_bundle,
    kit,
    records_of,
    rehash,
    report_of,
    run_dir,
)
from voxassay.contracts.duplex.event import Event
from voxassay.suites.duplex.scoring.history import (
    HISTORY_TOLERANCE_MS,
    AgentCut,
    history_consistency,
)
from voxassay.suites.duplex.scoring.recovery import is_fault, recovery_accuracy
from voxassay.suites.duplex.scoring.score import score_bundle_folder

D02 = "d02_bargein_cut_200"
"""User u2 barges in at 5.516 s; the agent's answer a1 (playback from 2.726 s) is cut after
2990 ms of audio; the ledger's playback.interrupted says played_until_ms = 2990."""
D02_HEARD_MS = 2990.0


def truth(name: str) -> dict[str, Any]:
    f: dict[str, Any] = kit()["files"][name]
    return f


def utt(name: str, uid: str) -> dict[str, Any]:
    return next(u for u in truth(name)["utterances"] if u["id"] == uid)


def new_event(kind: str, t_s: float, sid: str, n: int, **fields: Any) -> Event:
    return Event.new(
        kind,
        session_id=sid,
        producer=fields.pop("producer", "agent"),
        monotonic_ns=round(t_s * NS),
        event_id=f"{sid}-x{n}",
        **fields,
    )


def inject(*added: tuple[str, float, dict[str, Any]]) -> Callable[[list[Event]], list[Event]]:
    """A ledger transform adding events (type, time in s, fields), kept in time order."""

    def fn(events: list[Event]) -> list[Event]:
        sid = events[-1].session_id
        extra = [new_event(k, t, sid, i, **dict(kw)) for i, (k, t, kw) in enumerate(added)]
        return sorted([*events, *extra], key=lambda e: e.monotonic_ns)

    return fn


def edit(fn: Callable[[Event], Event | None]) -> Callable[[list[Event]], list[Event]]:
    """A ledger transform mapping each event (None drops it)."""

    def apply(events: list[Event]) -> list[Event]:
        out = [fn(e) for e in events]
        return [e for e in out if e is not None]

    return apply


def set_segments(folder: Path, **changes: dict[str, Any]) -> None:
    """Change scenario segments (by id) of a built bundle and rehash its manifest."""
    path = folder / "scenario.yaml"
    sc = yaml.safe_load(path.read_text())
    for seg in sc["segments"]:
        for key, value in changes.get(seg["id"], {}).items():
            if value is None:
                seg.pop(key, None)
            else:
                seg[key] = value
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    rehash(folder)


def history_cases(folder: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = score_bundle_folder(folder).output.to_output()[
        "history_consistency"
    ]["cases"]
    return cases


def recovery_cases(folder: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = score_bundle_folder(folder).output.to_output()[
        "recovery_accuracy"
    ]["cases"]
    return cases


# =========================================================================== history


def test_a_truncation_recorded_where_the_audio_stopped_is_consistent(tmp_path: Path) -> None:
    b = build_bundle(tmp_path / "b", D02)
    scored = score_bundle_folder(b)
    (case,) = scored.output.to_output()["history_consistency"]["cases"]
    a1 = utt(D02, "a1")
    assert case["passed"] is True and case["cut"] is True
    assert case["response_id"] == "r-a1" and case["recorded_source"] == "played_until_ms"
    # acoustic truth from output.wav: onset to stop of the cut answer, within the detector's
    # edge error of the kit's construction
    assert case["acoustic_onset_s"] == pytest.approx(a1["start_s"], abs=0.02)
    assert case["acoustic_stop_s"] == pytest.approx(a1["end_s"], abs=0.02)
    assert case["acoustic_heard_ms"] == pytest.approx(D02_HEARD_MS, abs=25)
    assert case["recorded_heard_ms"] == D02_HEARD_MS
    # both the acoustic yield and the ledger's cut are named as evidence
    assert any(x.startswith("acoustic: the agent yielded to u2") for x in case["cut_evidence"])
    assert any("playback.interrupted" in x for x in case["cut_evidence"])
    assert scored.metrics["rates"]["history_consistency"] == {
        "k": 1,
        "n": 1,
        "not_assessable": 0,
    }


def _played(ms: float | None) -> Callable[[list[Event]], list[Event]]:
    def fn(e: Event) -> Event:
        if e.event_type == "playback.interrupted":
            return e.model_copy(update={"played_until_ms": ms})
        return e

    return edit(fn)


def test_a_truncation_that_claims_more_than_was_heard_is_inconsistent(tmp_path: Path) -> None:
    over = build_bundle(tmp_path / "over", D02, transform=_played(D02_HEARD_MS + 1500))
    (case,) = history_cases(over)
    assert case["passed"] is False and case["status"] == "inconsistent"
    assert case["diff_ms"] == pytest.approx(1500, abs=25)
    assert "unheard kept" in case["reason"]
    # just inside the tolerance is still consistent; a claim of less than was heard is not
    inside = build_bundle(
        tmp_path / "in", D02, transform=_played(D02_HEARD_MS + HISTORY_TOLERANCE_MS - 50)
    )
    assert history_cases(inside)[0]["passed"] is True
    under = build_bundle(tmp_path / "under", D02, transform=_played(D02_HEARD_MS - 1000))
    (case,) = history_cases(under)
    assert case["passed"] is False and "dropped" in case["reason"]


def test_no_truncation_after_an_acoustic_cut_keeps_unheard_text(tmp_path: Path) -> None:
    # the agent logs the stop but not how much was heard
    b = build_bundle(tmp_path / "b", D02, transform=_played(None))
    (case,) = history_cases(b)
    assert case["passed"] is False and case["recorded_whole_response"] is True
    assert "no truncation recorded" in case["reason"]
    # the ledger does not even say it stopped: the audio (the agent yielded) shows the cut
    silent = build_bundle(
        tmp_path / "silent",
        D02,
        drop_types=("playback.interrupted",),
        transform=edit(lambda e: None if e.event_type == "response.done" else e),
    )
    (case,) = history_cases(silent)
    assert case["passed"] is False and case["cut"] is True
    assert case["cut_evidence"] == [
        f"acoustic: the agent yielded to u2 (its speech stopped at {case['acoustic_stop_s']:.3f} s)"
    ]


def test_missing_evidence_is_not_assessable_never_pass_or_fail(tmp_path: Path) -> None:
    # no playback.started: the cut audio cannot be tied to a response
    b = build_bundle(tmp_path / "b", D02, drop_types=("playback.started",))
    scored = score_bundle_folder(b)
    (case,) = scored.output.to_output()["history_consistency"]["cases"]
    assert case["passed"] is None and case["status"] == "not_assessable"
    assert "no playback.started" in case["reason"]
    assert scored.metrics["rates"]["history_consistency"] == {
        "k": 0,
        "n": 0,
        "not_assessable": 1,
    }
    # an expected history action on a segment without a truth onset
    nt = build_bundle(tmp_path / "nt", D02, drop_types=("user.speech_started",))
    set_segments(nt, u2={"expected_history_action": "truncate"})
    seg = [c for c in history_cases(nt) if c["id"] == "history:segment:u2"]
    assert seg and seg[0]["passed"] is None and "no user.speech_started" in seg[0]["reason"]


def _history_updated(action: str | None, heard: float | None) -> Callable[[list[Event]], Any]:
    a1 = utt(D02, "a1")
    data: dict[str, Any] = {"segment_id": "u2"}
    if action is not None:
        data["action"] = action
    if heard is not None:
        data["heard_until_ms"] = heard
    return inject(("history.updated", a1["end_s"] + 0.05, {"response_id": "r-a1", "data": data}))


@pytest.mark.slow
def test_history_updated_heard_point_and_expected_action(tmp_path: Path) -> None:
    def bundle(name: str, action: str | None, heard: float | None, expected: str) -> Path:
        b = build_bundle(tmp_path / name, D02, transform=_history_updated(action, heard))
        set_segments(b, u2={"expected_history_action": expected})
        return b

    # the new convention takes precedence over played_until_ms
    (ok,) = history_cases(bundle("ok", "truncate", D02_HEARD_MS - 40, "truncate"))
    assert ok["passed"] is True and ok["recorded_source"] == "history.updated"
    assert (ok["segment_id"], ok["expected_action"], ok["observed_action"]) == (
        "u2",
        "truncate",
        "truncate",
    )
    (wrong,) = history_cases(bundle("wrong", "truncate", D02_HEARD_MS, "clarify"))
    assert wrong["passed"] is False and "expects 'clarify'" in wrong["reason"]
    # clarify and mark_uncertain are accepted for each other
    (unc,) = history_cases(bundle("unc", "mark_uncertain", D02_HEARD_MS, "clarify"))
    assert unc["passed"] is True
    # keep after a cut keeps the whole response, with or without a heard point
    (keep,) = history_cases(bundle("keep", "keep", None, "keep"))
    assert keep["passed"] is False and "history.updated keep (the whole" in keep["reason"]
    (keep2,) = history_cases(bundle("keep2", "keep", D02_HEARD_MS, "keep"))
    assert keep2["passed"] is False and keep2["recorded_whole_response"] is True
    # a truncate without heard_until_ms falls back to played_until_ms (2990: consistent)
    (fb,) = history_cases(bundle("fb", "truncate", None, "truncate"))
    assert fb["passed"] is True and fb["recorded_source"] == "history.updated + played_until_ms"
    # an action outside the vocabulary cannot be judged
    (bad,) = history_cases(bundle("bad", "forget", D02_HEARD_MS, "truncate"))
    assert bad["passed"] is None and "'forget'" in bad["reason"]


def test_expected_keep_on_a_response_that_was_not_cut(tmp_path: Path) -> None:
    # d05: two backchannels during a long answer; the agent talks through them
    name = "d05_backchannel_agent_continues"
    b = build_bundle(tmp_path / "b", name)
    set_segments(b, bc1={"expected_history_action": "keep"})
    (case,) = history_cases(b)
    a1 = utt(name, "a1")
    assert case["cut"] is False and case["segment_id"] == "bc1" and case["passed"] is True
    assert case["acoustic_heard_ms"] == pytest.approx(a1["dur_ms"], abs=25)
    # the agent states a truncation of an answer that was played to its end
    cut = build_bundle(
        tmp_path / "cut",
        name,
        transform=inject(
            (
                "history.updated",
                a1["end_s"] + 0.1,
                {"response_id": "r-a1", "data": {"action": "truncate", "heard_until_ms": 1200}},
            )
        ),
    )
    set_segments(cut, bc1={"expected_history_action": "keep"})
    (case,) = history_cases(cut)
    assert case["passed"] is False
    assert "dropped" in case["reason"] and "expects 'keep'" in case["reason"]


def test_history_from_features_json_of_a_redacted_bundle(tmp_path: Path) -> None:
    from voxassay.suites.duplex.evidence.redact import redact_bundle

    src = build_bundle(tmp_path / "src", D02, transform=_played(D02_HEARD_MS + 1500))
    dst = tmp_path / "red"
    redact_bundle(src, dst, retention_days=7, purpose="qa")
    assert not (dst / "output.wav").exists()
    (case,) = history_cases(dst)
    (raw,) = history_cases(src)
    assert case["passed"] is False and case["diff_ms"] == raw["diff_ms"]


def test_history_pure_function_on_constructed_segments() -> None:
    """The kit's own segment edges of d02 (constructed truth), no detector involved."""
    a1 = utt(D02, "a1")
    agent = [{"start_s": a1["start_s"], "end_s": a1["end_s"]}]
    ev = [
        (new_event("playback.started", 0, "s", 1, response_id="r1", playback_id="p1"), 2.7),
        (
            new_event("playback.interrupted", 0, "s", 2, playback_id="p1", played_until_ms=3230.0),
            5.72,
        ),
    ]
    cut = AgentCut(a1["end_s"], a1["start_s"], 5.5155625, "u2", "e1")
    (case,) = history_consistency(ev, agent, cuts=[cut])
    # 3230 - 2990 = 240 ms: inside the 250 ms tolerance
    assert case["passed"] is True and case["diff_ms"] == pytest.approx(240.0, abs=0.1)
    ev[1] = (ev[1][0].model_copy(update={"played_until_ms": 3250.0}), 5.72)
    assert history_consistency(ev, agent, cuts=[cut])[0]["passed"] is False
    # a ledger cut long after the audio ended is not a cut while playing: no case at all
    late = [ev[0], (ev[1][0], a1["end_s"] + 2.0)]
    assert history_consistency(late, agent) == []


def _cut_at(t_s: float, played_ms: float, **data: Any) -> list[tuple[Event, float]]:
    start = new_event("playback.started", 0, "s", 1, response_id="r1", playback_id="p1")
    stop = new_event(
        "playback.interrupted", 0, "s", 2, playback_id="p1", played_until_ms=played_ms, data=data
    )
    return [(start, 1.0), (stop, t_s)]


def test_a_flush_inside_a_pause_was_heard_up_to_the_flush() -> None:
    # the response sounds 1.0-2.0 and 2.4-3.0 s and is flushed at 3.3 s, 300 ms into a pause:
    # 2000 ms sounded, the player position (2300 ms) is as true; 2600 ms is not
    agent = [{"start_s": 1.0, "end_s": 2.0}, {"start_s": 2.4, "end_s": 3.0}]
    (case,) = history_consistency(_cut_at(3.3, 2300.0), agent)
    assert case["passed"] is True and case["acoustic_heard_ms"] == pytest.approx(2000.0)
    assert case["silent_tail_ms"] == pytest.approx(300.0) and case["diff_ms"] == 300.0
    (over,) = history_consistency(_cut_at(3.3, 2600.0), agent)
    assert over["passed"] is False and over["diff_ms"] == pytest.approx(600.0)
    assert "300 ms unheard kept" in over["reason"]
    # dropping what sounded is judged against the last sound
    (under,) = history_consistency(_cut_at(3.3, 1700.0), agent)
    assert under["passed"] is False and under["diff_ms"] == pytest.approx(-300.0)


def test_the_players_stall_is_wall_time_not_audio() -> None:
    # 1.0-2.0 s of audio, a 1.5 s network stall, 0.5 s more audio, flushed at 4.0 s: the
    # player played 1500 ms of the response in 3000 ms of wall time
    agent = [{"start_s": 1.0, "end_s": 2.0}, {"start_s": 3.5, "end_s": 4.0}]
    (case,) = history_consistency(_cut_at(4.0, 1500.0, stalled_ms=1500.0), agent)
    assert case["passed"] is True and case["acoustic_heard_ms"] == pytest.approx(1500.0)
    assert case["player_stalled_ms"] == pytest.approx(1500.0)
    # without the player's report the 1.5 s of silence would count as heard
    (blind,) = history_consistency(_cut_at(4.0, 1500.0), agent)
    assert blind["passed"] is False and blind["acoustic_heard_ms"] == pytest.approx(3000.0)


# =========================================================================== recovery


def test_fault_events() -> None:
    def ev(kind: str, **data: Any) -> Event:
        return new_event(kind, 0, "s", 0, data=data)

    assert is_fault(ev("tool.failed")) and is_fault(ev("session.disconnected"))
    assert is_fault(ev("network.drop")) and is_fault(ev("network.link_lost"))
    assert is_fault(ev("response.done", status="failed")) and is_fault(ev("session.error"))
    assert not is_fault(ev("network.jitter")) and not is_fault(ev("network.downlink_loss"))
    assert not is_fault(ev("response.done", status="cancelled"))


D01 = "d01_latency_300_700_1100"
"""Three turns: u1 0.455-2.145, a1 2.445-4.201, u2 5.001-6.541, a2 7.241-9.394, u3, a3."""


def test_a_reconnect_followed_by_the_right_turn_action_is_a_recovery(tmp_path: Path) -> None:
    b = build_bundle(
        tmp_path / "b",
        D01,
        transform=inject(
            ("network.drop", 4.40, {"producer": "harness"}),
            ("session.disconnected", 4.45, {}),
            ("session.resumed", 4.80, {}),
        ),
    )
    scored = score_bundle_folder(b)
    (case,) = scored.output.to_output()["recovery_accuracy"]["cases"]
    assert case["passed"] is True and case["status"] == "recovered"
    # the drop and the disconnect are one episode; back at the resume
    assert [f[0] for f in case["faults"]] == ["network.drop", "session.disconnected"]
    assert case["interactive_by"][0] == "session.resumed"
    assert case["interactive_at_s"] == pytest.approx(4.80)
    # the first labelled user segment after it, answered as expected (turn end: respond)
    assert case["segment_id"] == "u2"
    assert [d["point"] for d in case["decisions"]] == ["turn_end"]
    assert all(d["correct"] for d in case["decisions"])
    assert scored.metrics["rates"]["recovery_accuracy"] == {"k": 1, "n": 1, "not_assessable": 0}


def test_a_fault_followed_by_a_wrong_turn_action_is_not_a_recovery(tmp_path: Path) -> None:
    # d06: a tool fails during the answer; the agent then wrongly stops at the user's
    # backchannel (expected: continue); it is interactive again (its next response)
    b = build_bundle(
        tmp_path / "b",
        "d06_backchannel_agent_wrongly_stops",
        transform=inject(("tool.failed", 4.0, {})),
    )
    (case,) = recovery_cases(b)
    assert case["passed"] is False and case["segment_id"] == "bc1"
    assert case["interactive_by"][0] == "response.created"
    (d,) = case["decisions"]
    assert (d["expected"], d["observed"], d["correct"]) == ("continue", "pause", False)
    assert "expected continue, observed pause" in case["reason"]


def test_a_fault_with_nothing_labelled_after_it_is_not_assessable(tmp_path: Path) -> None:
    b = build_bundle(tmp_path / "b", D01, transform=inject(("tool.failed", 14.4, {})))
    scored = score_bundle_folder(b)
    (case,) = scored.output.to_output()["recovery_accuracy"]["cases"]
    assert case["passed"] is None and "no scenario-labelled user segment" in case["reason"]
    assert scored.metrics["rates"]["recovery_accuracy"] == {"k": 0, "n": 0, "not_assessable": 1}
    # a bystander's line after the fault is not a user segment to judge recovery by
    d09 = build_bundle(
        tmp_path / "d09", "d09_bystander_speech", transform=inject(("tool.failed", 6.6, {}))
    )
    (case,) = recovery_cases(d09)
    assert case["segment_id"] == "u2"


def test_recovery_needs_the_agent_back_and_an_uncorrupted_task() -> None:
    """Pure function: never interactive again fails whatever the segment shows; a duplicate
    write requested after the fault fails; one requested before it does not."""
    labels = [{"id": "u2", "start_s": 5.0, "role": "user", "expected_actions": ["listen"]}]
    good = {"u2": [{"id": "d1", "point": "turn_end", "expected": "respond", "correct": True}]}
    down = [(new_event("session.disconnected", 0, "s", 1), 4.0)]
    (case,) = recovery_accuracy(down, labels, good)
    assert case["passed"] is False and "never became interactive" in case["reason"]
    back = [*down, (new_event("response.created", 0, "s", 2, response_id="r2"), 4.5)]
    dup = {
        "name": "duplicate_side_effects",
        "passed": False,
        "details": {"calls": [{"call_id": "c2", "requested_ns": 4_200_000_000}]},
    }
    (case,) = recovery_accuracy(back, labels, good, task_checks=[dup])
    assert case["passed"] is False and "c2" in case["reason"]
    dup["details"] = {"calls": [{"call_id": "c2", "requested_ns": 3_000_000_000}]}
    (case,) = recovery_accuracy(back, labels, good, task_checks=[dup])
    assert case["passed"] is True and case["task"]["checked"] is True
    broken = {"name": "reconnect_consistency", "passed": False, "reason": "'date' lost"}
    (case,) = recovery_accuracy(back, labels, good, task_checks=[broken])
    assert case["passed"] is False and "'date' lost" in case["reason"]
    # no decision at the segment while the agent is back: not assessable
    (case,) = recovery_accuracy(back, labels, {})
    assert case["passed"] is None and "no decision" in case["reason"]


# =========================================================================== report, gates


@pytest.fixture(scope="module")
def after_break_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kit()
    root = tmp_path_factory.mktemp("ab")
    build_bundle(root / "b" / "ok", D02, session_id="ok")
    build_bundle(root / "b" / "over", D02, session_id="over", transform=_played(4490.0))
    build_bundle(
        root / "b" / "rec",
        D01,
        session_id="rec",
        transform=inject(("session.disconnected", 4.45, {}), ("session.resumed", 4.8, {})),
    )
    build_bundle(
        root / "b" / "na", D01, session_id="na", transform=inject(("tool.failed", 14.4, {}))
    )
    return run_dir([str(root / "b"), "--out", str(root / "runs")])


def test_report_rows_per_hour_and_gates(after_break_run: Path) -> None:
    from voxassay.suites.duplex.gate_table import metric_table_from_run

    report = report_of(after_break_run)
    system = report["systems"][0]
    rates = system["overall"]["rates"]
    hc, ra = rates["history_consistency"], rates["recovery_accuracy"]
    assert (hc["k"], hc["n"], hc["not_assessable"]) == (1, 2, 0)
    assert hc["denominator"] == ["ok/history:r-a1", "over/history:r-a1"]
    assert hc["failures"][0]["ref"] == "over/history:r-a1"
    assert 0 < hc["ci_low"] < 0.5 < hc["ci_high"] < 1
    assert (ra["k"], ra["n"], ra["not_assessable"]) == (1, 1, 1)
    assert "no scenario-labelled" in ra["not_assessable_cases"][0]["reason"]
    rows = {r["name"]: r for r in system["metric_rows"]}
    for name in ("history_consistency", "recovery_accuracy"):
        assert rows[name]["group"] == "behaviour" and rows[name]["label_text"] == "VERIFIED at L2"
        assert "n = " in rows[name]["note"]
    assert rows["history_consistency"]["summary"].startswith("1/2 = 0.500 [")
    assert "1 not assessable" in rows["recovery_accuracy"]["summary"]
    # per hour: k over the sessions' audio hours, stated with the hours
    recs = records_of(after_break_run)
    hours = sum(r.output["duration_s"] for r in recs.values()) / 3600
    fs = rates["false_silence_rate"]
    assert fs["hours"] == pytest.approx(hours, rel=1e-5)
    assert fs["per_hour"] == pytest.approx(fs["k"] / hours)
    assert "per_hour" not in rates["behaviour_accuracy"]
    md = (after_break_run / "report.md").read_text()
    # these sessions hold well under 10 minutes of audio: the views withhold per-hour rates
    assert "history_consistency" in md and "per hour: withheld" in md and "< 10 min" in md
    assert "/h over" not in md  # one rule: no table beside it gives the hourly figure
    assert "per hour withheld" in rows["false_silence_rate"]["summary"]
    html = (after_break_run / "report.html").read_text()
    assert "per hour: withheld" in html
    # the gates find both rates (and per-hour rates) by name
    table = metric_table_from_run(after_break_run)
    row, _ = table.lookup("history_consistency")
    assert row is not None and (row.overall.k, row.overall.n) == (1, 2)
    assert row.evidence_level == "L2"
    row, _ = table.lookup("recovery_accuracy")
    assert row is not None and (row.overall.k, row.overall.n) == (1, 1)
    row, _ = table.lookup("false_silence_per_hour")
    assert row is not None and row.overall.value == pytest.approx(fs["per_hour"])
    # stratum groups carry the rates too (split gates)
    cat = [g for g in system["groups"] if g["group"] == "scenario" or g["group"] == "category"]
    assert any("history_consistency" in g["rates"] for g in cat)
    json.dumps(report)
