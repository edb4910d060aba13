"""The reference clinic's data: appointments, chairs and offered slots in SQLite, the tool specs and their faults, phone normalisation, and the business effects of each tool (the call log and its replay are in db.py)."""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypedDict

DEFAULT_SLOTS = ("09:00", "11:00", "15:00")
"""Free times of a date the initial state does not list."""
DEFAULT_CHAIRS = 2
"""How many booked appointments one slot time can hold."""
DEFAULT_TODAY = "2026-07-20"
"""The clinic's today when the initial state has no ``now``."""
FINAL_STATE_SOURCE = "reference-sqlite"
READ_TOOLS = ("check_availability",)
WRITE_TOOLS = (
    "book_appointment",
    "reschedule_appointment",
    "cancel_appointment",
    "update_contact",
    "restore_appointment",
)
TOOLS = (*READ_TOOLS, *WRITE_TOOLS)
_DATE = {"type": "string", "format": "date"}
_TIME = {"type": "string", "pattern": r"^\d{2}:\d{2}$"}
_ID = {"type": "string"}
_SPECS: dict[str, dict[str, Any]] = {
    "check_availability": {
        "description": "Free appointment times on a date.",
        "properties": {"date": _DATE},
        "required": ["date"],
    },
    "book_appointment": {
        "description": "Book a new appointment.",
        "properties": {"name": _ID, "date": _DATE, "time": _TIME, "contact": _ID},
        "required": ["name", "date", "time", "contact"],
    },
    "reschedule_appointment": {
        "description": "Move an appointment to another date (and time; none keeps the time).",
        "properties": {"appointment_id": _ID, "date": _DATE, "time": _TIME},
        "required": ["appointment_id", "date"],
    },
    "cancel_appointment": {
        "description": "Cancel an appointment.",
        "properties": {"appointment_id": _ID},
        "required": ["appointment_id"],
    },
    "update_contact": {
        "description": "Change the phone number of an appointment.",
        "properties": {"appointment_id": _ID, "contact": _ID},
        "required": ["appointment_id", "contact"],
    },
    "restore_appointment": {
        "description": "Undo a cancellation (used only to compensate a cancel_appointment).",
        "properties": {"appointment_id": _ID},
        "required": ["appointment_id"],
    },
}


def tool_specs(read_ms: int = 1500, write_ms: int = 800) -> list[dict[str, Any]]:
    """The clinic's tools as scenario ``tools:`` entries (name, description, argument schema,
    latency, side_effect, may_go_stale), for scenario writers and agent wrappers."""
    out = []
    for name in TOOLS:
        spec = _SPECS[name]
        write = name in WRITE_TOOLS
        out.append(
            {
                "name": name,
                "description": spec["description"],
                "arguments": {
                    "type": "object",
                    "properties": dict(spec["properties"]),
                    "required": list(spec["required"]),
                },
                "latency_ms": write_ms if write else read_ms,
                "may_go_stale": True,
                "side_effect": write,
            }
        )
    return out


class ToolError(Exception):
    """A business failure of a tool (nothing is committed); ``code`` is machine-readable."""

    def __init__(self, code: str, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.result = {"status": code, **(result or {})}


class AuditKw(TypedDict, total=False):
    """Audit fields of a tool call (keyword arguments of every tool method)."""

    idempotency_key: str | None
    task_id: str | None
    task_version: int | None
    response_id: str | None
    requested_ns: int
    completed_ns: int | None


@dataclass(frozen=True)
class CallOutcome:
    """What a tool call returned."""

    call_id: str
    tool: str
    ok: bool
    result: Any
    error: str | None = None
    committed: bool = False
    replayed: bool = False
    """An idempotent replay: the stored result of an earlier call with the same key."""
    lost: bool = False
    """The backend ran the call but the result never reached the agent."""
    meta: dict[str, Any] = field(default_factory=dict)


_WORD_DIGITS = {
    "zero": "0",
    "oh": "0",
    "o": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}


def normalize_phone(text: str) -> str:
    """Digits of a phone number, grouped: ``555 0100`` (7), ``555 123 4567`` (10), else plain.

    Accepts digits with any separators (``555-0100``, ``(555) 010 0``) and single digit words
    (``five five five zero one zero zero``); the dialogue manager handles richer spoken forms.
    """
    digits = "".join(
        _WORD_DIGITS.get(tok, "".join(ch for ch in tok if ch.isdigit()))
        for tok in re.split(r"[^0-9a-z]+", text.casefold())
        if tok
    )
    if len(digits) == 7:
        return f"{digits[:3]} {digits[3:]}"
    if len(digits) == 10:
        return f"{digits[:3]} {digits[3:6]} {digits[6:]}"
    if len(digits) == 11 and digits[0] == "1":
        return f"{digits[1:4]} {digits[4:7]} {digits[7:]}"
    return digits


def _check_date(value: Any) -> str:
    if not isinstance(value, str):
        raise ToolError("invalid_date", f"date must be an ISO date string, got {value!r}")
    try:
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise ToolError("invalid_date", f"{value!r} is not an ISO date (YYYY-MM-DD)") from None


def _check_time(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"\d{1,2}:\d{2}", value.strip()):
        raise ToolError("invalid_time", f"time must be HH:MM (24 h), got {value!r}")
    hh, mm = (int(x) for x in value.strip().split(":"))
    if not (0 <= hh <= 23 and 0 <= mm <= 59):
        raise ToolError("invalid_time", f"{value!r} is not a time of day")
    return f"{hh:02d}:{mm:02d}"


def _check_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"invalid_{what}", f"{what} must be a non-empty string, got {value!r}")
    return " ".join(value.split())


def _id_key(appointment_id: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", appointment_id)
    return (int(m.group(1)) if m else 0, appointment_id)


_SCHEMA = """
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE appointments (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    date TEXT NOT NULL,
    time TEXT NOT NULL,
    contact TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('booked', 'cancelled')),
    version INTEGER NOT NULL DEFAULT 1,
    written_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE listed_days (date TEXT PRIMARY KEY);
CREATE TABLE slots (date TEXT NOT NULL, time TEXT NOT NULL, PRIMARY KEY (date, time));
CREATE TABLE idempotency (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    call_id TEXT NOT NULL,
    ok INTEGER NOT NULL,
    result TEXT,
    error TEXT
);
CREATE TABLE tool_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id TEXT NOT NULL UNIQUE,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    idempotency_key TEXT,
    task_id TEXT,
    task_version INTEGER,
    response_id TEXT,
    requested_ns INTEGER NOT NULL,
    completed_ns INTEGER,
    status TEXT NOT NULL,
    side_effect INTEGER NOT NULL,
    committed INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error TEXT,
    compensates TEXT,
    delivered_ns INTEGER,
    delivered_task_version INTEGER,
    delivered_response_id TEXT,
    meta TEXT NOT NULL DEFAULT '{}'
);
"""
CALL_COLUMNS = (
    "call_id",
    "tool",
    "arguments",
    "idempotency_key",
    "task_id",
    "task_version",
    "response_id",
    "requested_ns",
    "completed_ns",
    "status",
    "side_effect",
    "committed",
    "result",
    "error",
    "compensates",
    "delivered_ns",
    "delivered_task_version",
    "delivered_response_id",
    "meta",
)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class ClinicData:
    """The clinic's tables and what each tool does to them (book, reschedule, cancel, update contact), with the final business state."""

    def __init__(
        self, initial_state: Mapping[str, Any] | None = None, path: str | Path = ":memory:"
    ) -> None:
        self.path = str(path)
        fresh = self.path == ":memory:" or not Path(self.path).exists()
        self._conn = sqlite3.connect(self.path, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA foreign_keys = ON")
        if fresh:
            self._conn.executescript(_SCHEMA)
            self._seed(dict(initial_state or {}))
        self._faults: dict[str, list[tuple[dict[str, Any], str | None]]] = {}
        self._seq = self._scalar("SELECT COALESCE(MAX(written_seq), 0) FROM appointments")
        self._calls = self._scalar("SELECT COUNT(*) FROM tool_calls")

    def _seed(self, state: dict[str, Any]) -> None:
        unknown = set(state) - {"now", "appointments", "availability", "chairs"}
        if unknown:
            raise ValueError(
                f"initial state: unknown key(s) {sorted(unknown)} "
                "(known: now, appointments, availability, chairs)"
            )
        today = _check_date(str(state.get("now") or DEFAULT_TODAY))
        chairs = int(state.get("chairs", DEFAULT_CHAIRS))
        if chairs < 1:
            raise ValueError("initial state: chairs must be >= 1")
        with self._tx():
            self._conn.execute("INSERT INTO settings VALUES ('today', ?)", (today,))
            self._conn.execute("INSERT INTO settings VALUES ('chairs', ?)", (str(chairs),))
            for date, times in (state.get("availability") or {}).items():
                day = _check_date(str(date))
                self._conn.execute("INSERT OR IGNORE INTO listed_days VALUES (?)", (day,))
                for t in times or []:
                    self._conn.execute(
                        "INSERT OR IGNORE INTO slots VALUES (?, ?)", (day, _check_time(str(t)))
                    )
            for i, appt in enumerate(state.get("appointments") or []):
                try:
                    status = str(appt.get("status") or "booked")
                    if status not in ("booked", "cancelled"):
                        raise ToolError("invalid_status", f"status {status!r}")
                    self._conn.execute(
                        "INSERT INTO appointments (id, name, date, time, contact, status) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            _check_text(appt.get("id") or f"A{i + 1}", "id"),
                            _check_text(appt.get("name"), "name"),
                            _check_date(appt.get("date")),
                            _check_time(appt.get("time")),
                            normalize_phone(str(appt.get("contact") or "")),
                            status,
                        ),
                    )
                except (ToolError, sqlite3.IntegrityError, AttributeError) as exc:
                    raise ValueError(f"initial state: appointment {i}: {exc}") from None

    def set_tool_faults(
        self, tool: str, rules: Sequence[tuple[Mapping[str, Any], str | None]]
    ) -> None:
        """Scripted failures of ``tool``: ``(match, error or None)`` rules, first match wins
        (see the module docstring). An empty list removes them."""
        if tool not in TOOLS:
            raise ValueError(f"unknown tool {tool!r} (tools: {', '.join(TOOLS)})")
        self._faults[tool] = [(dict(m), e) for m, e in rules]

    def _scripted_error(self, tool: str, args: Mapping[str, Any]) -> str | None:
        for match, error in self._faults.get(tool, []):
            if all(k in args and args[k] == v for k, v in match.items()):
                return error
        return None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        row = self._conn.execute(sql, params).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    @property
    def today(self) -> dt.date:
        row = self._conn.execute("SELECT value FROM settings WHERE key = 'today'").fetchone()
        return dt.date.fromisoformat(row[0] if row else DEFAULT_TODAY)

    @property
    def chairs(self) -> int:
        row = self._conn.execute("SELECT value FROM settings WHERE key = 'chairs'").fetchone()
        return int(row[0]) if row else DEFAULT_CHAIRS

    def offered_slots(self, date: str) -> list[str]:
        """Times the clinic offers on ``date`` (listed times, else ``DEFAULT_SLOTS``)."""
        day = _check_date(date)
        listed = self._conn.execute("SELECT 1 FROM listed_days WHERE date = ?", (day,)).fetchone()
        if not listed:
            return list(DEFAULT_SLOTS)
        rows = self._conn.execute("SELECT time FROM slots WHERE date = ? ORDER BY time", (day,))
        return [r[0] for r in rows]

    def free_slots(self, date: str, ignore: str | None = None) -> list[str]:
        """Offered times on ``date`` that still have a free chair (``ignore``: an appointment
        id not to count, the one being moved)."""
        day = _check_date(date)
        if dt.date.fromisoformat(day) < self.today:
            return []
        out = []
        for t in self.offered_slots(day):
            taken = self._scalar(
                "SELECT COUNT(*) FROM appointments WHERE date = ? AND time = ? "
                "AND status = 'booked' AND id != ?",
                (day, t, ignore or ""),
            )
            if taken < self.chairs:
                out.append(t)
        return out

    def appointment(self, appointment_id: str) -> dict[str, Any] | None:
        row = self._conn.execute(
            "SELECT * FROM appointments WHERE id = ?", (appointment_id,)
        ).fetchone()
        return dict(row) if row else None

    def appointments(
        self, *, name: str | None = None, date: str | None = None, status: str | None = "booked"
    ) -> list[dict[str, Any]]:
        """Appointments (booked by default), optionally of a patient (case-insensitive name)
        and on a date, ordered by date and time."""
        sql, params = "SELECT * FROM appointments WHERE 1 = 1", []
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        if date is not None:
            sql += " AND date = ?"
            params.append(date)
        rows = [dict(r) for r in self._conn.execute(sql + " ORDER BY date, time, id", params)]
        if name is not None:
            want = " ".join(name.casefold().split())
            rows = [r for r in rows if " ".join(str(r["name"]).casefold().split()) == want]
        return rows

    def _run(self, tool: str, args: Mapping[str, Any], undo: bool = False) -> dict[str, Any]:
        """One tool's body (inside the caller's transaction). ``undo``: a compensation,
        which may put an appointment back on a time the day no longer offers."""
        allowed = set(_SPECS[tool]["properties"])
        extra = set(args) - allowed
        if extra:
            raise ToolError("invalid_arguments", f"unexpected argument(s) {sorted(extra)}")
        missing = [k for k in _SPECS[tool]["required"] if args.get(k) in (None, "")]
        if missing:
            raise ToolError("invalid_arguments", f"missing argument(s) {missing}")
        if tool == "check_availability":
            day = _check_date(args["date"])
            return {"date": day, "slots": self.free_slots(day)}
        if tool == "book_appointment":
            return self._book(args)
        appt = self._existing(args["appointment_id"])
        if tool == "reschedule_appointment":
            return self._reschedule(appt, args, undo)
        if tool == "cancel_appointment":
            if appt["status"] == "cancelled":
                raise ToolError("already_cancelled", f"appointment {appt['id']} is cancelled")
            self._write(appt["id"], status="cancelled")
            return {
                "status": "cancelled",
                "appointment_id": appt["id"],
                "date": appt["date"],
                "time": appt["time"],
                "version": appt["version"] + 1,
            }
        if tool == "update_contact":
            if appt["status"] != "booked":
                raise ToolError("not_booked", f"appointment {appt['id']} is cancelled")
            contact = normalize_phone(_check_text(args["contact"], "contact"))
            if not contact:
                raise ToolError("invalid_contact", f"{args['contact']!r} has no digits")
            self._write(appt["id"], contact=contact)
            return {
                "status": "updated",
                "appointment_id": appt["id"],
                "contact": contact,
                "previous_contact": appt["contact"],
                "version": appt["version"] + 1,
            }
        if tool == "restore_appointment":
            if appt["status"] != "cancelled":
                raise ToolError("not_cancelled", f"appointment {appt['id']} is not cancelled")
            self._need_slot(appt["date"], appt["time"], appt["id"], undo=True)
            self._write(appt["id"], status="booked")
            return {
                "status": "restored",
                "appointment_id": appt["id"],
                "date": appt["date"],
                "time": appt["time"],
                "version": appt["version"] + 1,
            }
        raise ToolError("unknown_tool", f"unknown tool {tool!r}")  # pragma: no cover

    def _existing(self, appointment_id: Any) -> dict[str, Any]:
        appt = self.appointment(str(appointment_id))
        if appt is None:
            raise ToolError("not_found", f"no appointment {appointment_id!r}")
        return appt

    def _need_slot(
        self, day: str, time: str, ignore: str | None = None, undo: bool = False
    ) -> None:
        if dt.date.fromisoformat(day) < self.today:
            raise ToolError("past_date", f"{day} is in the past (today is {self.today})")
        free = self.free_slots(day, ignore=ignore)
        if undo and time not in self.offered_slots(day):
            taken = self._scalar(
                "SELECT COUNT(*) FROM appointments WHERE date = ? AND time = ? "
                "AND status = 'booked' AND id != ?",
                (day, time, ignore or ""),
            )
            if taken < self.chairs:
                return
        if time not in free:
            raise ToolError(
                "unavailable",
                f"{time} on {day} is not available",
                {"date": day, "time": time, "alternatives": free},
            )

    def _book(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = _check_text(args["name"], "name")
        day, time = _check_date(args["date"]), _check_time(args["time"])
        contact = normalize_phone(_check_text(args["contact"], "contact"))
        if not contact:
            raise ToolError("invalid_contact", f"{args['contact']!r} has no digits")
        self._need_slot(day, time)
        ids = [r[0] for r in self._conn.execute("SELECT id FROM appointments")]
        n = max((_id_key(i)[0] for i in ids), default=0) + 1
        new_id = f"A{n}"
        self._seq += 1
        self._conn.execute(
            "INSERT INTO appointments (id, name, date, time, contact, status, version, "
            "written_seq) VALUES (?, ?, ?, ?, ?, 'booked', 1, ?)",
            (new_id, name, day, time, contact, self._seq),
        )
        return {
            "status": "booked",
            "appointment_id": new_id,
            "name": name,
            "date": day,
            "time": time,
            "contact": contact,
            "version": 1,
        }

    def _reschedule(
        self, appt: dict[str, Any], args: Mapping[str, Any], undo: bool = False
    ) -> dict[str, Any]:
        if appt["status"] != "booked":
            raise ToolError("not_booked", f"appointment {appt['id']} is cancelled")
        day = _check_date(args["date"])
        time = _check_time(args["time"]) if args.get("time") else appt["time"]
        self._need_slot(day, time, ignore=appt["id"], undo=undo)
        self._write(appt["id"], date=day, time=time)
        return {
            "status": "rescheduled",
            "appointment_id": appt["id"],
            "date": day,
            "time": time,
            "previous": {"date": appt["date"], "time": appt["time"]},
            "version": appt["version"] + 1,
        }

    def _write(self, appointment_id: str, **values: str) -> None:
        self._seq += 1
        sets = ", ".join(f"{k} = ?" for k in values)
        self._conn.execute(
            f"UPDATE appointments SET {sets}, version = version + 1, written_seq = ? WHERE id = ?",
            (*values.values(), self._seq, appointment_id),
        )

    def export_final_state(self, exported_ns: int | None = None) -> dict[str, Any]:
        """``final-state.json``: every appointment by id, plus flat keys for the appointment
        a session is about: ``final_date``/``final_time``/``contact`` of the most recently
        written booked appointment (else the only booked one; else None), ``booked_count``."""
        rows = sorted(
            (dict(r) for r in self._conn.execute("SELECT * FROM appointments")),
            key=lambda r: _id_key(str(r["id"])),
        )
        booked = [r for r in rows if r["status"] == "booked"]
        written = [r for r in booked if r["written_seq"] > 0]
        focus = max(written, key=lambda r: r["written_seq"]) if written else None
        if focus is None and len(booked) == 1:
            focus = booked[0]
        meta: dict[str, Any] = {"source": FINAL_STATE_SOURCE}
        if exported_ns is not None:
            meta["exported_ns"] = int(exported_ns)
        return {
            "appointments": {
                r["id"]: {
                    "name": r["name"],
                    "date": r["date"],
                    "time": r["time"],
                    "contact": r["contact"],
                    "status": r["status"],
                }
                for r in rows
            },
            "final_date": focus["date"] if focus else None,
            "final_time": focus["time"] if focus else None,
            "contact": focus["contact"] if focus else None,
            "booked_count": len(booked),
            "_meta": meta,
        }
