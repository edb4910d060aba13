"""The reference desk's state and vocabulary: what it says (``Say``), what it emits (``DeskEvent``, a ledger event of the desk), its tasks, pending tool calls and turns, and ``DialogueBase``, the moves every part of the dialogue uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from voxassay.reference.clinic import CallOutcome
from voxassay.reference.db import ClinicDB
from voxassay.reference.phrasing import say_date, say_phone, say_time
from voxassay.reference.policy import Policy

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_LATENCY_MS",
    "HOURS_TEXT",
    "LOCATION_TEXT",
    "POLICY_TEXT",
    "Action",
    "DeskEvent",
    "DialogueBase",
    "Say",
]

SayKind = Literal["answer", "confirm", "announce", "clarify", "backchannel"]


@dataclass(frozen=True)
class Say:
    """Speak ``text`` as response ``response_id`` (the audio layer synthesizes and plays it)."""

    response_id: str
    text: str
    task_id: str | None = None
    kind: SayKind = "answer"


@dataclass(frozen=True)
class DeskEvent:
    """A ledger event the dialogue manager owns (``task.state``, ``tool.*``,
    ``history.updated``). ``at_ms``: when it happened on the session clock, when that is
    earlier than the call that returned it (a tool that finished between two calls)."""

    event_type: str
    data: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    response_id: str | None = None
    utterance_id: str | None = None
    at_ms: float | None = None


Action = Say | DeskEvent

DEFAULT_LATENCY_MS = {"read": 1500, "write": 800}

POLICY_TEXT = (
    "Our cancellation policy is simple. If you need to cancel or move an appointment, please "
    "let us know at least twenty-four hours ahead and there is no charge at all. With less "
    "than twenty-four hours' notice, or if you miss the appointment, we may charge a fifty "
    "dollar fee, although we always make an exception for emergencies."
)
HOURS_TEXT = (
    "We're open Monday to Friday from eight in the morning until six in the evening, and on "
    "Saturdays and Sundays from nine in the morning until four in the afternoon. The last "
    "appointment of the day starts one hour before closing, and we're closed on public "
    "holidays."
)
LOCATION_TEXT = (
    "We're at 42 River Street, right next to the public library. There's free patient "
    "parking behind the building: use the entrance on Mill Lane, take a ticket at the gate, "
    "and we'll validate it at the front desk."
)
GREETING_TEXT = "Hello, thanks for calling Riverside Dental. How can I help you today?"
CLARIFY_TEXT = (
    "Sorry, I didn't quite catch that. I can book, move or cancel an appointment, or answer "
    "questions about the clinic. What would you like to do?"
)

# =========================================================================== phrasing


# =========================================================================== tasks and calls

_STRENGTH = {"backchannel": 0, "answer": 1, "clarify": 2, "confirm": 3, "announce": 4}
FIELDS = {
    "book": ("date", "time", "name", "contact"),
    "reschedule": ("appointment_id", "date", "time"),
    "cancel": ("appointment_id",),
    "update_contact": ("appointment_id", "contact"),
}


@dataclass
class _Task:
    task_id: str
    kind: str
    fields: dict[str, Any]
    version: int = 1
    status: str = "active"
    awaiting: str | None = None
    appointment_id: str | None = None
    """book: the appointment it created."""
    confirmed: bool = False
    confirm_rid: str | None = None
    confirm_heard: bool = True
    offered: list[str] = field(default_factory=list)
    queried: tuple[str, int] | None = None
    blocked_version: int | None = None
    attempts: int = 0
    writes: list[str] = field(default_factory=list)
    response_id: str | None = None
    utterance_id: str | None = None
    topic: str | None = None
    seq: int = 0


@dataclass
class Pending:
    call_id: str
    task_id: str
    tool: str
    arguments: dict[str, Any]
    version: int
    due_ms: float
    key: str | None
    write: bool
    response_id: str | None
    seq: int
    compensates: str | None = None
    retries: int = 0
    requested_ms: float = 0.0
    noticed: bool = False


@dataclass
class Entry:
    role: Literal["user", "assistant"]
    text: str
    full: str
    response_id: str | None = None
    utterance_id: str | None = None
    task_id: str | None = None
    truncated: bool = False


@dataclass
class _Speech:
    text: str
    kind: SayKind
    task_id: str | None
    calls: tuple[str, ...] = ()
    version: int | None = None
    status: str | None = None
    """The task's status when this was queued."""


class DialogueBase:
    """The desk's state and its low-level moves: begin and end turns, speak, emit ledger events
    and task states, open tasks. ``TaskFlow`` and ``Conversation`` build on it."""

    def __init__(
        self,
        db: ClinicDB,
        policy: Policy | str = "careful",
        session_id: str = "session",
        *,
        latencies: Mapping[str, int] | None = None,
        hold_grace_ms: float = 2000.0,
        hold_on_ms: float = 5000.0,
        slow_notice_ms: float = 5000.0,
    ) -> None:
        self.db = db
        self.policy = Policy.parse(policy)
        self.session_id = session_id
        self.latencies = {**DEFAULT_LATENCY_MS, **dict(latencies or {})}
        self.hold_grace_ms = float(hold_grace_ms)
        self.hold_on_ms = float(hold_on_ms)
        self.slow_notice_ms = float(slow_notice_ms)
        self.today = db.today
        self.tasks: dict[str, _Task] = {}
        self.caller_name: str | None = None
        self.caller_contact: str | None = None
        self._pending: dict[str, Pending] = {}
        self._lost: list[Pending] = []
        self._deferred: list[tuple[Pending, CallOutcome, float]] = []
        self._history: list[Entry] = []
        self._word_times: dict[str, list[tuple[str, float, float]]] = {}
        self._deliveries: dict[str, list[str]] = {}
        self._session_appts: list[str] = []
        self._lookup_pending = False
        self._n_resp = 0
        self._n_task = 0
        self._n_seq = 0
        self._now_ms = 0.0
        self._connected = True
        self._user_active = False
        self._hold_until: float | None = None
        self._out: list[Action] = []
        self._speech: list[_Speech] = []
        self._rid: str | None = None
        self._user_turn = False
        self._utt: str | None = None

    def _fresh(self, s: _Speech) -> bool:
        """Careful says nothing about a result whose task changed since it arrived."""
        if not s.calls or s.task_id is None or self.policy.delivers_stale_results:
            return True
        task = self.tasks[s.task_id]
        dropped = ("cancelled", "superseded")
        if task.status in dropped and s.status not in dropped:
            return False  # stopped after the result was queued
        return s.version is None or task.version <= s.version

    def _end(self) -> list[Action]:
        out = list(self._out)
        speech = [s for s in self._speech if self._fresh(s)]
        if speech:
            rid = self._turn_rid()
            text = " ".join(s.text for s in speech)
            kind = max((s.kind for s in speech), key=lambda k: _STRENGTH[k])
            task_id = next((s.task_id for s in speech if s.task_id), None)
            out.append(Say(rid, text, task_id, kind))
            self._history.append(Entry("assistant", text, text, response_id=rid, task_id=task_id))
            for s in speech:
                task = self.tasks.get(s.task_id or "")
                for call_id in s.calls:
                    self.db.mark_delivered(
                        call_id, _ns(self._now_ms), task.version if task else None, rid
                    )
                    self._deliveries.setdefault(rid, []).append(call_id)
                if task is not None and s.kind == "confirm" and task.awaiting == "confirm":
                    task.confirm_rid = rid
                    task.confirm_heard = True
        self._out, self._speech, self._rid = [], [], None
        self._user_turn, self._utt = False, None
        return out

    def _turn_rid(self) -> str:
        if self._rid is None:
            self._n_resp += 1
            self._rid = f"r{self._n_resp}"
        return self._rid

    def _speak(
        self,
        text: str,
        kind: SayKind,
        task: _Task | None = None,
        calls: Sequence[str] = (),
        version: int | None = None,
    ) -> None:
        text = text.replace("..", ".")  # "at 10 a.m.." -> "at 10 a.m."
        self._speech.append(
            _Speech(
                text,
                kind,
                task.task_id if task else None,
                tuple(calls),
                version,
                task.status if task else None,
            )
        )

    def _event(
        self,
        event_type: str,
        data: dict[str, Any],
        *,
        task_id: str | None = None,
        response_id: str | None = None,
        at_ms: float | None = None,
    ) -> None:
        utt = self._utt if self._user_turn else None
        self._out.append(DeskEvent(event_type, data, task_id, response_id, utt, at_ms))

    def _state(self, task: _Task, action: str) -> None:
        if self._user_turn:
            task.response_id = self._turn_rid()
            task.utterance_id = self._utt
        self._event(
            "task.state",
            {
                "version": task.version,
                "fields": {k: v for k, v in task.fields.items() if v is not None},
                "status": task.status,
                "action": action,
                "kind": task.kind,
            },
            task_id=task.task_id,
            response_id=task.response_id,
        )

    def _new_task(self, kind: str, fields: dict[str, Any], topic: str | None = None) -> _Task:
        for old in self.tasks.values():
            if old.status == "active" and old.awaiting and not self._task_pending(old):
                old.status = "superseded"
                self._state(old, "cancel")
        self._n_task += 1
        self._n_seq += 1
        task = _Task(f"t{self._n_task}", kind, dict(fields), topic=topic, seq=self._n_seq)
        self.tasks[task.task_id] = task
        self._state(task, "keep")
        return task

    def _touch(self, task: _Task) -> None:
        self._n_seq += 1
        task.seq = self._n_seq

    def _task_pending(self, task: _Task) -> list[Pending]:
        return [p for p in self._pending.values() if p.task_id == task.task_id]

    def _latency(self, tool: str, write: bool) -> float:
        return float(self.latencies.get(tool, self.latencies["write" if write else "read"]))


def undone_text(tool: str, res: Mapping[str, Any]) -> str:
    when = ""
    if res.get("date") and res.get("time"):
        when = f" for {say_date(str(res['date']))} at {say_time(str(res['time']))}"
    if tool == "cancel_appointment":
        return f"That's undone: the booking{when} is cancelled."
    if tool == "reschedule_appointment":
        return f"That's undone: your appointment is back{when.replace(' for', ' on')}."
    if tool == "restore_appointment":
        return f"That's undone: your appointment{when} is booked again."
    if tool == "update_contact":
        return f"That's undone: your number is {say_phone(str(res.get('contact')))} again."
    return "That's undone."


def resolve_time(hour: int, minute: int, ampm: str | None, offered: Sequence[str]) -> str:
    h = hour
    if ampm == "am":
        h = hour % 12
    elif ampm == "pm":
        h = hour % 12 + 12
    elif hour <= 12:
        options = [f"{(hour % 12) + add:02d}:{minute:02d}" for add in (0, 12)]
        for opt in options:
            if opt in offered:
                return opt
        if 7 <= hour <= 11:
            h = hour
        elif hour == 12:
            h = 12
        elif 1 <= hour <= 6:
            h = hour + 12
    return f"{h:02d}:{minute:02d}"


def _ns(ms: float) -> int:
    return round(float(ms) * 1_000_000)
