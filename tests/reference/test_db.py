"""ClinicDB: a real SQLite backend, idempotent writes, compensation, and the two exports in
the formats the scoring core reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.reference.sim import SEED
from voxassay.contracts.duplex.business import FinalStateMeta, ToolAudit
from voxassay.contracts.duplex.scenario import Tool
from voxassay.reference.clinic import DEFAULT_SLOTS, normalize_phone, tool_specs
from voxassay.reference.db import ClinicDB

MS = 1_000_000


def db(**changes: object) -> ClinicDB:
    return ClinicDB({**SEED, **changes})


def test_seed_and_availability() -> None:
    d = db()
    assert d.today.isoformat() == "2026-07-20"
    assert d.appointment("A1")["contact"] == "555 0100"
    assert d.free_slots("2026-08-10") == ["09:00", "10:00", "14:30"]
    assert d.free_slots("2026-09-01") == list(DEFAULT_SLOTS)  # not listed: default slots
    assert d.free_slots("2026-07-01") == []  # the past
    out = d.check_availability("2026-08-11", requested_ns=5 * MS)
    assert out.ok and out.result == {"date": "2026-08-11", "slots": ["09:00", "11:00"]}
    assert not out.committed
    with pytest.raises(ValueError, match="unknown key"):
        ClinicDB({"appointments": [], "clients": []})
    with pytest.raises(ValueError, match="appointment 0"):
        ClinicDB({"appointments": [{"id": "A1", "name": "X", "date": "someday", "time": "10:00"}]})


def test_chairs_limit_a_slot() -> None:
    one = db(chairs=1)
    assert one.book_appointment("Ann Bo", "2026-08-10", "10:00", "555 0101").ok
    taken = one.book_appointment("Cy Di", "2026-08-10", "10:00", "555 0102")
    assert not taken.ok and taken.result["status"] == "unavailable"
    assert taken.result["alternatives"] == ["09:00", "14:30"]
    assert one.check_availability("2026-08-10").result["slots"] == ["09:00", "14:30"]
    two = db()  # default: two chairs per slot
    assert two.book_appointment("Ann Bo", "2026-08-10", "10:00", "555 0101").ok
    assert two.book_appointment("Cy Di", "2026-08-10", "10:00", "555 0102").ok
    assert not two.book_appointment("Ed Fu", "2026-08-10", "10:00", "555 0103").ok


def test_writes_and_business_failures() -> None:
    d = db()
    booked = d.book_appointment("ann bo", "2026-08-10", "14:30", "555-0111")
    assert booked.ok and booked.committed and booked.result["appointment_id"] == "A2"
    assert d.appointment("A2")["contact"] == "555 0111"
    moved = d.reschedule_appointment("A1", "2026-08-12")  # time kept
    assert moved.result["time"] == "10:00" and moved.result["previous"]["date"] == "2026-08-03"
    assert d.appointment("A1")["version"] == 2
    assert d.update_contact("A1", "five five five zero one nine nine").result["contact"] == (
        "555 0199"
    )
    assert d.cancel_appointment("A1").ok
    again = d.cancel_appointment("A1")
    assert not again.ok and again.result["status"] == "already_cancelled" and not again.committed
    assert d.reschedule_appointment("A9", "2026-08-12").result["status"] == "not_found"
    assert d.book_appointment("X", "2026-07-01", "09:00", "555 0100").result["status"] == (
        "past_date"
    )
    bad = d.book_appointment("X", "August 10", "09:00", "555 0100")
    assert bad.result["status"] == "invalid_date"


def test_same_idempotency_key_commits_once() -> None:
    d = db()
    first = d.book_appointment(
        "Ann Bo", "2026-08-10", "09:00", "555 0111", idempotency_key="k1", requested_ns=1 * MS
    )
    second = d.book_appointment(
        "Ann Bo", "2026-08-10", "09:00", "555 0111", idempotency_key="k1", requested_ns=2 * MS
    )
    assert first.committed and not second.committed and second.replayed
    assert second.result == first.result
    assert d.export_final_state()["booked_count"] == 2  # A1 and one new booking, not two
    calls = ToolAudit.model_validate(d.export_tool_audit("s1")).calls
    assert [c.committed for c in calls] == [True, False]
    assert calls[1].meta["idempotent_replay_of"] == first.call_id
    conflict = d.book_appointment("Ann Bo", "2026-08-11", "09:00", "555 0111", idempotency_key="k1")
    assert not conflict.ok and "other arguments" in (conflict.error or "")
    # without a key the same write commits again: that is a duplicate
    d.book_appointment("Ann Bo", "2026-08-10", "09:00", "555 0111")
    assert d.export_final_state()["booked_count"] == 3


def test_compensation_undoes_a_write_and_marks_it() -> None:
    d = db()
    b = d.book_appointment("Ann Bo", "2026-08-10", "09:00", "555 0111", requested_ns=1 * MS)
    comp = d.compensate(b.call_id, requested_ns=3 * MS, completed_ns=4 * MS)
    assert comp.ok and comp.tool == "cancel_appointment"
    audit = ToolAudit.model_validate(d.export_tool_audit("s1"))
    orig, undo = audit.call(b.call_id), audit.call(comp.call_id)
    assert orig.status == "compensated" and orig.committed
    assert undo.compensates == b.call_id and undo.committed
    assert d.appointment("A2")["status"] == "cancelled"
    r = d.reschedule_appointment("A1", "2026-08-12", "14:00")
    d.compensate(r.call_id, requested_ns=5 * MS)
    assert (d.appointment("A1")["date"], d.appointment("A1")["time"]) == ("2026-08-03", "10:00")
    c = d.cancel_appointment("A1")
    assert d.compensate(c.call_id, requested_ns=6 * MS).tool == "restore_appointment"
    assert d.appointment("A1")["status"] == "booked"
    with pytest.raises(ValueError, match="already compensated"):
        d.compensate(b.call_id, requested_ns=7 * MS)


def test_two_phase_calls_cancel_and_lost_results() -> None:
    d = db()
    c1 = d.request(
        "book_appointment",
        {"name": "A B", "date": "2026-08-10", "time": "09:00", "contact": "555 0111"},
        idempotency_key="k",
        requested_ns=MS,
    )
    d.cancel_call(c1, 2 * MS, "the user said stop")
    c2 = d.request(
        "update_contact",
        {"appointment_id": "A1", "contact": "555 0122"},
        idempotency_key="k2",
        requested_ns=3 * MS,
    )
    lost = d.execute(c2, 4 * MS, lost=True)
    assert lost.committed and lost.lost
    c3 = d.request("check_availability", {"date": "2026-08-10"}, requested_ns=5 * MS)
    audit = ToolAudit.model_validate(d.export_tool_audit("s1"))
    assert audit.call(c1).status == "cancelled" and not audit.call(c1).committed
    assert audit.call(c2).status == "failed" and audit.call(c2).committed
    assert "result lost" in (audit.call(c2).error or "")
    pending = audit.call(c3)  # still pending at export
    assert pending.status == "cancelled" and pending.meta["pending_at_export"]
    assert d.appointment("A1")["contact"] == "555 0122"
    assert d.export_final_state()["booked_count"] == 1


def test_scripted_faults_fail_without_committing() -> None:
    d = db()
    d.set_tool_faults("book_appointment", [({"time": "10:00"}, "gateway timeout"), ({}, None)])
    failed = d.book_appointment("Ann Bo", "2026-08-10", "10:00", "555 0111")
    assert not failed.ok and failed.error == "gateway timeout" and not failed.committed
    assert d.appointments(name="Ann Bo") == []  # rolled back
    assert d.book_appointment("Ann Bo", "2026-08-10", "09:00", "555 0111").ok
    d.set_tool_faults("check_availability", [({}, "availability service unavailable")])
    assert d.check_availability("2026-08-10").result == {"status": "service_error"}


def test_final_state_flat_keys_and_meta() -> None:
    d = db()
    state = d.export_final_state(exported_ns=9 * MS)
    assert state["final_date"] == "2026-08-03" and state["contact"] == "555 0100"  # the only one
    assert FinalStateMeta.model_validate(state["_meta"]).source == "reference-sqlite"
    d.book_appointment("Ann Bo", "2026-08-12", "16:00", "555 0111")
    d.book_appointment("Cy Di", "2026-08-10", "09:00", "555 0122")
    state = d.export_final_state()
    assert (state["final_date"], state["final_time"], state["contact"]) == (
        "2026-08-10",
        "09:00",
        "555 0122",
    )  # the most recently written booked appointment
    assert state["booked_count"] == 3
    assert state["appointments"]["A2"] == {
        "name": "Ann Bo",
        "date": "2026-08-12",
        "time": "16:00",
        "contact": "555 0111",
        "status": "booked",
    }
    d.cancel_appointment("A3")
    assert d.export_final_state()["final_date"] == "2026-08-12"
    empty = ClinicDB({"appointments": []}).export_final_state()
    assert empty["final_date"] is None and empty["booked_count"] == 0


def test_a_file_database_persists_and_is_real_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "clinic.sqlite"
    with ClinicDB(SEED, path=path) as d:
        d.book_appointment("Ann Bo", "2026-08-10", "09:00", "555 0111", idempotency_key="k")
    con = sqlite3.connect(path)
    assert con.execute("SELECT COUNT(*) FROM appointments").fetchone()[0] == 2
    assert con.execute("SELECT key FROM idempotency").fetchall() == [("k",)]
    con.close()
    again = ClinicDB({"appointments": []}, path=path)  # reused, not seeded again
    assert again.appointment("A2") is not None
    replay = again.book_appointment(
        "Ann Bo", "2026-08-10", "09:00", "555 0111", idempotency_key="k"
    )
    assert replay.replayed and not replay.committed
    assert [c["call_id"] for c in again.calls()] == ["c1", "c2"]


@pytest.mark.parametrize(
    ("spoken", "digits"),
    [
        ("555-0100", "555 0100"),
        ("(555) 123 4567", "555 123 4567"),
        ("1 555 123 4567", "555 123 4567"),
        ("five five five oh one oh oh", "555 0100"),
        ("12345", "12345"),
    ],
)
def test_normalize_phone(spoken: str, digits: str) -> None:
    assert normalize_phone(spoken) == digits


def test_tool_specs_are_scenario_tools() -> None:
    specs = [Tool.model_validate(s) for s in tool_specs()]
    assert [t.name for t in specs][:2] == ["check_availability", "book_appointment"]
    assert [t.side_effect for t in specs] == [False, True, True, True, True, True]
