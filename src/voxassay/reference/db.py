"""The reference agent's business backend: a real SQLite database for a dental clinic's desk.

``ClinicDB`` holds the appointments of "Riverside Dental", the free slots, an idempotency table
and an audit of every tool call. Its state is the business truth of a reference-agent session:
``export_final_state()`` is ``final-state.json`` and ``export_tool_audit()`` is
``tool-audit.json`` (both in the formats of ``voxassay.contracts.duplex.business``).

Initial state (a scenario's seed; every key optional)::

    {"now": "2026-07-20",                     # the clinic's today (default 2026-07-20)
     "appointments": [{"id": "A1", "name": "Sam Lee", "date": "2026-08-03",
                       "time": "10:00", "contact": "555 0100",
                       "status": "booked"}],  # status optional (booked | cancelled)
     "availability": {"2026-08-10": ["09:00", "10:00", "14:30"],
                      "2026-08-15": []},      # [] = no free slot that day
     "chairs": 2}                             # appointments one slot time can hold

Availability: a date listed in ``availability`` offers exactly its times; a date not listed
offers 09:00, 11:00 and 15:00 (``DEFAULT_SLOTS``). An offered time is free while fewer than
``chairs`` (default 2: two dentists) booked appointments hold it; ``check_availability``
returns the free times. Dates are ISO (``YYYY-MM-DD``), times ``HH:MM`` (24 h), phone numbers
are kept as digits grouped ``555 0100`` (7 digits) or ``555 123 4567`` (10 digits), see
``normalize_phone``.

Tools (each a method; every call is audited)::

    check_availability(date)                              read
    book_appointment(name, date, time, contact)           write -> new id A<n>
    reschedule_appointment(appointment_id, date, time=None)   write (time None: keep the time)
    cancel_appointment(appointment_id)                    write
    update_contact(appointment_id, contact)               write
    restore_appointment(appointment_id)                   write, only as a compensation

Writes run in one transaction together with their idempotency record and their audit row.
A write that carries an ``idempotency_key`` already seen returns the stored result and commits
nothing (its audit row says ``committed: false`` and ``meta.idempotent_replay_of``); the same
key with other arguments fails. ``compensate(call_id)`` undoes a committed write with the
inverse call (a booking -> ``cancel_appointment``, a reschedule -> ``reschedule_appointment``
back, a contact update -> ``update_contact`` back, a cancellation -> ``restore_appointment``);
the compensating call names the original in ``compensates`` and the original's status becomes
``compensated``.

Component faults (scenario category 8): ``set_tool_faults(tool, rules)`` makes calls fail
like a scenario's scripted tool results: the first rule whose ``match`` is a subset of the
call's arguments decides; an ``error`` fails the call with that message (code
``service_error``, nothing committed), ``None`` lets it run. A real business failure (a slot
that is taken) wins over a scripted error.

Two ways to call a tool: the methods above (request and completion at once), or the
two-phase ``request()`` then ``execute()`` / ``cancel_call()`` the dialogue manager uses for
calls that take time (``execute(..., lost=True)`` commits on the backend but records that the
result never reached the agent: a dropped connection). All times are session-clock ns.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Unpack

from voxassay.reference.clinic import (
    CALL_COLUMNS,
    DEFAULT_CHAIRS,
    DEFAULT_SLOTS,
    DEFAULT_TODAY,
    READ_TOOLS,
    TOOLS,
    WRITE_TOOLS,
    AuditKw,
    CallOutcome,
    ClinicData,
    ToolError,
    dumps,
    normalize_phone,
    tool_specs,
)

__all__ = [
    "DEFAULT_CHAIRS",
    "DEFAULT_SLOTS",
    "DEFAULT_TODAY",
    "READ_TOOLS",
    "TOOLS",
    "WRITE_TOOLS",
    "AuditKw",
    "CallOutcome",
    "ClinicDB",
    "ToolError",
    "normalize_phone",
    "tool_specs",
]


# --------------------------------------------------------------------------- formats


class ClinicDB(ClinicData):
    """Riverside Dental's appointment book in SQLite (see the module docstring).

    ``path``: ``":memory:"`` (default) or a database file (created; an existing file is
    reused as is, without seeding again).
    """

    # ------------------------------------------------------------------ setup

    # ------------------------------------------------------------------ reads (not audited)

    # ------------------------------------------------------------------ tools (audited)

    def check_availability(self, date: str, **audit: Unpack[AuditKw]) -> CallOutcome:
        return self._call_now("check_availability", {"date": date}, audit)

    def book_appointment(
        self, name: str, date: str, time: str, contact: str, **audit: Unpack[AuditKw]
    ) -> CallOutcome:
        args = {"name": name, "date": date, "time": time, "contact": contact}
        return self._call_now("book_appointment", args, audit)

    def reschedule_appointment(
        self, appointment_id: str, date: str, time: str | None = None, **audit: Unpack[AuditKw]
    ) -> CallOutcome:
        args: dict[str, Any] = {"appointment_id": appointment_id, "date": date}
        if time is not None:
            args["time"] = time
        return self._call_now("reschedule_appointment", args, audit)

    def cancel_appointment(self, appointment_id: str, **audit: Unpack[AuditKw]) -> CallOutcome:
        return self._call_now("cancel_appointment", {"appointment_id": appointment_id}, audit)

    def update_contact(
        self, appointment_id: str, contact: str, **audit: Unpack[AuditKw]
    ) -> CallOutcome:
        args = {"appointment_id": appointment_id, "contact": contact}
        return self._call_now("update_contact", args, audit)

    def _call_now(self, tool: str, args: dict[str, Any], audit: AuditKw) -> CallOutcome:
        requested = int(audit.get("requested_ns", 0))
        completed = audit.get("completed_ns")
        call_id = self.request(
            tool,
            args,
            idempotency_key=audit.get("idempotency_key"),
            task_id=audit.get("task_id"),
            task_version=audit.get("task_version"),
            response_id=audit.get("response_id"),
            requested_ns=requested,
        )
        return self.execute(call_id, requested if completed is None else int(completed))

    # ------------------------------------------------------------------ two-phase calls

    def request(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        task_id: str | None = None,
        task_version: int | None = None,
        response_id: str | None = None,
        requested_ns: int = 0,
        compensates: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a call as requested (pending); returns its ``call_id`` (``c1``, ``c2``...)."""
        if tool not in TOOLS:
            raise ValueError(f"unknown tool {tool!r} (tools: {', '.join(TOOLS)})")
        self._calls += 1
        call_id = f"c{self._calls}"
        self._conn.execute(
            "INSERT INTO tool_calls (call_id, tool, arguments, idempotency_key, task_id, "
            "task_version, response_id, requested_ns, status, side_effect, compensates, meta) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (
                call_id,
                tool,
                dumps(dict(arguments)),
                idempotency_key if tool in WRITE_TOOLS else None,
                task_id,
                task_version,
                response_id,
                int(requested_ns),
                int(tool in WRITE_TOOLS),
                compensates,
                dumps(dict(meta or {})),
            ),
        )
        return call_id

    def execute(self, call_id: str, completed_ns: int, *, lost: bool = False) -> CallOutcome:
        """Run a pending call now: one transaction for the write, its idempotency record and
        its audit row. ``lost``: the backend ran it but the agent never got the answer (the
        audit says ``failed`` with ``error`` "result lost", ``committed`` as it happened)."""
        row = self._call_row(call_id)
        if row["status"] != "pending":
            raise ValueError(f"call {call_id} is {row['status']}, not pending")
        tool, args = str(row["tool"]), json.loads(row["arguments"])
        key = row["idempotency_key"]
        completed_ns = max(int(completed_ns), int(row["requested_ns"]))
        meta = json.loads(row["meta"])
        if tool in WRITE_TOOLS and key:
            stored = self._conn.execute(
                "SELECT * FROM idempotency WHERE key = ?", (key,)
            ).fetchone()
            if stored is not None:
                return self._replay(call_id, stored, tool, args, completed_ns, lost, meta)
        write = tool in WRITE_TOOLS
        try:
            with self._tx():
                result = self._run(tool, args, undo=bool(row["compensates"]))
                scripted = self._scripted_error(tool, args)
                if scripted is not None:
                    raise ToolError("service_error", scripted)
                if write and key:
                    self._remember(key, tool, args, call_id, True, result, None)
                self._finish(call_id, completed_ns, True, write, result, None, lost, meta)
                if write and row["compensates"]:
                    self._conn.execute(
                        "UPDATE tool_calls SET status = 'compensated' WHERE call_id = ?",
                        (row["compensates"],),
                    )
            return CallOutcome(
                call_id, tool, True, result, None, committed=write, lost=lost, meta=meta
            )
        except ToolError as exc:
            with self._tx():
                if write and key:
                    self._remember(key, tool, args, call_id, False, exc.result, str(exc))
                self._finish(call_id, completed_ns, False, False, exc.result, str(exc), lost, meta)
            return CallOutcome(call_id, tool, False, exc.result, str(exc), lost=lost, meta=meta)

    def _replay(
        self,
        call_id: str,
        stored: sqlite3.Row,
        tool: str,
        args: dict[str, Any],
        completed_ns: int,
        lost: bool,
        meta: dict[str, Any],
    ) -> CallOutcome:
        if stored["tool"] != tool or stored["arguments"] != dumps(args):
            error = (
                f"idempotency key {stored['key']!r} was used by {stored['call_id']} "
                "with other arguments"
            )
            conflict = {"status": "idempotency_conflict"}
            with self._tx():
                self._finish(call_id, completed_ns, False, False, conflict, error, lost, meta)
            return CallOutcome(call_id, tool, False, conflict, error, lost=lost, meta=meta)
        ok = bool(stored["ok"])
        result: Any = json.loads(stored["result"]) if stored["result"] is not None else None
        error = stored["error"]
        meta = {**meta, "idempotent_replay_of": stored["call_id"]}
        with self._tx():
            self._finish(call_id, completed_ns, ok, False, result, error, lost, meta)
        return CallOutcome(call_id, tool, ok, result, error, replayed=True, lost=lost, meta=meta)

    def _remember(
        self,
        key: str,
        tool: str,
        args: dict[str, Any],
        call_id: str,
        ok: bool,
        result: Any,
        error: str | None,
    ) -> None:
        self._conn.execute(
            "INSERT INTO idempotency VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, tool, dumps(args), call_id, int(ok), dumps(result), error),
        )

    def _finish(
        self,
        call_id: str,
        completed_ns: int,
        ok: bool,
        committed: bool,
        result: Any,
        error: str | None,
        lost: bool,
        meta: dict[str, Any],
    ) -> None:
        status = "ok" if ok else "failed"
        if lost:
            status = "failed"
            error = "result lost: the connection dropped before the answer arrived" + (
                f" (backend error: {error})" if error else ""
            )
        self._conn.execute(
            "UPDATE tool_calls SET completed_ns = ?, status = ?, committed = ?, result = ?, "
            "error = ?, meta = ? WHERE call_id = ?",
            (completed_ns, status, int(committed), dumps(result), error, dumps(meta), call_id),
        )

    def cancel_call(self, call_id: str, at_ns: int, reason: str = "cancelled") -> None:
        """A pending call that will never run (nothing committed)."""
        row = self._call_row(call_id)
        if row["status"] != "pending":
            raise ValueError(f"call {call_id} is {row['status']}, not pending")
        at = max(int(at_ns), int(row["requested_ns"]))
        self._conn.execute(
            "UPDATE tool_calls SET status = 'cancelled', completed_ns = ?, error = ? "
            "WHERE call_id = ?",
            (at, reason, call_id),
        )

    def mark_delivered(
        self,
        call_id: str,
        delivered_ns: int,
        task_version: int | None,
        response_id: str | None = None,
    ) -> None:
        """The call's result was announced to the user (playback of ``response_id`` started)."""
        row = self._call_row(call_id)
        floor = row["completed_ns"] if row["completed_ns"] is not None else row["requested_ns"]
        self._conn.execute(
            "UPDATE tool_calls SET delivered_ns = ?, delivered_task_version = ?, "
            "delivered_response_id = ? WHERE call_id = ?",
            (max(int(delivered_ns), int(floor)), task_version, response_id, call_id),
        )

    def clear_delivery(self, call_id: str) -> None:
        """The announcement was never played: the result was not delivered."""
        self._conn.execute(
            "UPDATE tool_calls SET delivered_ns = NULL, delivered_task_version = NULL, "
            "delivered_response_id = NULL WHERE call_id = ?",
            (call_id,),
        )

    def compensation_for(self, call_id: str) -> tuple[str, dict[str, Any]]:
        """The inverse call (tool, arguments) that undoes a committed write."""
        row = self._call_row(call_id)
        if not row["committed"]:
            raise ValueError(f"call {call_id} did not commit: nothing to compensate")
        if row["status"] == "compensated":
            raise ValueError(f"call {call_id} is already compensated")
        tool, result = str(row["tool"]), json.loads(row["result"] or "null") or {}
        appt = result.get("appointment_id")
        if tool == "book_appointment":
            return "cancel_appointment", {"appointment_id": appt}
        if tool == "reschedule_appointment":
            prev = result.get("previous") or {}
            return "reschedule_appointment", {
                "appointment_id": appt,
                "date": prev.get("date"),
                "time": prev.get("time"),
            }
        if tool == "update_contact":
            return "update_contact", {
                "appointment_id": appt,
                "contact": result.get("previous_contact"),
            }
        if tool == "cancel_appointment":
            return "restore_appointment", {"appointment_id": appt}
        raise ValueError(f"call {call_id} ({tool}) cannot be compensated")

    def request_compensation(
        self,
        call_id: str,
        *,
        requested_ns: int,
        task_id: str | None = None,
        task_version: int | None = None,
        response_id: str | None = None,
    ) -> str:
        """Request (pending) the inverse of a committed write; ``execute`` it to commit. When
        it commits, the original's status becomes ``compensated``."""
        tool, args = self.compensation_for(call_id)
        row = self._call_row(call_id)
        return self.request(
            tool,
            args,
            idempotency_key=f"{row['idempotency_key'] or call_id}:compensate",
            task_id=task_id if task_id is not None else row["task_id"],
            task_version=task_version if task_version is not None else row["task_version"],
            response_id=response_id,
            requested_ns=requested_ns,
            compensates=call_id,
        )

    def compensate(
        self,
        call_id: str,
        *,
        requested_ns: int,
        completed_ns: int | None = None,
        task_id: str | None = None,
        task_version: int | None = None,
        response_id: str | None = None,
    ) -> CallOutcome:
        """Undo a committed write with its inverse call at once (see the module docstring)."""
        comp = self.request_compensation(
            call_id,
            requested_ns=requested_ns,
            task_id=task_id,
            task_version=task_version,
            response_id=response_id,
        )
        return self.execute(comp, requested_ns if completed_ns is None else completed_ns)

    def _call_row(self, call_id: str) -> sqlite3.Row:
        row = self._conn.execute(
            "SELECT * FROM tool_calls WHERE call_id = ?", (call_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no tool call {call_id!r}")
        return row

    def call(self, call_id: str) -> dict[str, Any]:
        """One audit row as a ``task.ToolCall`` dict (pending shown as ``pending``)."""
        return self._call_dict(self._call_row(call_id), export=False)

    def calls(self) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT * FROM tool_calls ORDER BY seq").fetchall()
        return [self._call_dict(r, export=False) for r in rows]

    # ------------------------------------------------------------------ tool bodies

    # ------------------------------------------------------------------ exports

    def export_tool_audit(self, session_id: str) -> dict[str, Any]:
        """``tool-audit.json`` (``task.ToolAudit``). A call still pending is exported as
        ``cancelled`` with ``meta.pending_at_export``."""
        rows = self._conn.execute("SELECT * FROM tool_calls ORDER BY seq").fetchall()
        return {
            "schema_version": 1,
            "session_id": session_id,
            "calls": [self._call_dict(r, export=True) for r in rows],
        }

    def _call_dict(self, row: sqlite3.Row, *, export: bool) -> dict[str, Any]:
        d = {k: row[k] for k in CALL_COLUMNS}
        d["arguments"] = json.loads(d["arguments"])
        d["result"] = json.loads(d["result"]) if d["result"] is not None else None
        d["meta"] = json.loads(d["meta"] or "{}")
        d["side_effect"] = bool(d["side_effect"])
        d["committed"] = bool(d["committed"])
        if export and d["status"] == "pending":
            d["status"] = "cancelled"
            d["error"] = d["error"] or "still pending when the session ended"
            d["meta"] = {**d["meta"], "pending_at_export": True}
        return {k: v for k, v in d.items() if v is not None or k in ("result",)}
