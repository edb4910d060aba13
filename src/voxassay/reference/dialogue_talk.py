"""The reference desk's conversation policy: from an understood utterance to an action."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from voxassay.reference.phrasing import say_date, say_field, say_list, say_time
from voxassay.reference.understanding import (
    ASK_APPOINTMENT,
    ASK_HOURS,
    ASK_LOCATION,
    ASK_POLICY,
    AVAILABILITY,
    BACKCHANNEL,
    BOOK,
    BYE,
    CANCEL_APPT,
    CONFIRM,
    CORRECTION,
    DENY,
    EMPTY,
    GREETING,
    HOLD,
    INFORM,
    PRESENCE,
    QUESTION_INTENTS,
    RESCHEDULE,
    STOP,
    TASK_INTENTS,
    THANKS,
    UNKNOWN,
    UPDATE_CONTACT,
    DateMention,
    Understanding,
    free_name,
)

if TYPE_CHECKING:
    pass
from voxassay.reference.dialogue_base import (
    CLARIFY_TEXT,
    FIELDS,
    GREETING_TEXT,
    HOURS_TEXT,
    LOCATION_TEXT,
    POLICY_TEXT,
    Pending,
    _ns,
    _Task,
    resolve_time,
)
from voxassay.reference.dialogue_tasks import TaskFlow


class Conversation(TaskFlow):
    """What the desk does with an understood utterance: dispatch it, ask and re-ask, confirm,
    answer questions, and keep the slots of the task in hand (inform, identify, set, drop, stop)."""

    def _dispatch(self, u: Understanding) -> None:
        intent = u.intent
        waiting = self._awaiting()
        wants_name = self._lookup_pending or (
            waiting is not None and waiting.awaiting in ("name", "appointment")
        )
        if intent in (UNKNOWN, GREETING) and wants_name and free_name(u.text):
            intent = INFORM  # a bare name answering "what name is it under?"
        if intent == EMPTY:
            return
        if intent == BACKCHANNEL:
            task = self._awaiting("confirm")
            if task is not None and u.affirmative:
                self._confirm(task)
            elif self.policy.answers_backchannels:
                self._speak("Sorry, did you want to add something?", "answer")
            return
        if intent == HOLD:
            if not self.policy.writes_after_stop:
                self._hold_until = self._now_ms + self.hold_on_ms
            self._speak("Sure, take your time.", "backchannel")
            return
        if intent == STOP:
            self._stop()
        elif intent in TASK_INTENTS:
            self._start(u)
        elif intent == CONFIRM:
            task = self._awaiting("confirm")
            if task is not None:
                self._confirm(task)
            elif not self._reask():
                self._speak("Okay. What else can I help you with?", "answer")
        elif intent == DENY:
            task = self._awaiting("confirm")
            if task is not None:
                task.status = "cancelled"
                task.awaiting = None
                self._state(task, "cancel")
                self._speak("Okay, I'll leave your appointment as it is.", "answer", task)
            elif not self._reask():
                self._speak("Alright. Is there anything else I can help you with?", "answer")
        elif intent in (CORRECTION, INFORM):
            self._inform(u)
        elif intent == GREETING:
            self._speak(GREETING_TEXT, "answer")
        elif intent == PRESENCE:
            self._speak("Yes, I'm still here.", "answer")
            if not self._reask():
                self._speak("How can I help?", "answer")
        elif intent == THANKS:
            self._speak("You're welcome! Is there anything else I can help you with?", "answer")
        elif intent == BYE:
            self._speak("Thanks for calling Riverside Dental. Have a great day!", "answer")
        elif intent == UNKNOWN:
            self._speak(CLARIFY_TEXT, "clarify")
        questions = ([intent] if intent in QUESTION_INTENTS else []) + list(u.questions)
        for q in questions:
            self._answer(q)
        if intent in QUESTION_INTENTS:
            self._reask()

    def _awaiting(self, what: str | None = None) -> _Task | None:
        for task in sorted(self.tasks.values(), key=lambda t: -t.seq):
            if task.status == "active" and task.awaiting and what in (None, task.awaiting):
                return task
        return None

    def _reask(self) -> bool:
        """Repeat the open question of the task waiting for input, if any."""
        task = self._awaiting()
        if task is None:
            return False
        if task.awaiting == "confirm":
            task.confirmed = False
            task.awaiting = None
            self._reconcile(task)
            return True
        offered = say_list([say_time(x) for x in task.offered])
        questions = {
            "date": "What day would you like?",
            "time": f"Which time would you like: {offered}?" if offered else "What time?",
            "name": "What name should I put the appointment under?",
            "contact": "What's the best phone number to reach you?",
            "appointment": "What name is the appointment booked under?",
        }
        self._speak(questions.get(task.awaiting or "", "How can I help?"), "clarify", task)
        return True

    def _confirm(self, task: _Task) -> None:
        if not task.confirm_heard and not self.policy.keeps_unheard_text:
            # the question was cut before the user heard all of it: ask again, don't act
            appt = self.db.appointment(str(task.fields.get("appointment_id") or ""))
            when = f"{say_date(appt['date'])} at {say_time(appt['time'])}" if appt else "then"
            self._speak(
                f"Sorry, just to be sure: should I cancel your appointment on {when}?",
                "confirm",
                task,
            )
            return
        task.confirmed = True
        task.awaiting = None
        self._touch(task)
        self._reconcile(task)

    def _answer(self, q: str) -> None:
        if q == ASK_POLICY:
            self._speak(POLICY_TEXT, "answer")
        elif q == ASK_HOURS:
            self._speak(HOURS_TEXT, "answer")
        elif q == ASK_LOCATION:
            self._speak(LOCATION_TEXT, "answer")
        elif q == ASK_APPOINTMENT:
            appts = self._my_appointments()
            booking = [
                t
                for t in self.tasks.values()
                if t.status == "active" and t.kind == "book" and t.fields.get("time")
                if any(p.write for p in self._task_pending(t))
            ]
            if booking and not any(a["id"] in self._session_appts for a in appts):
                f = booking[-1].fields
                self._speak(
                    f"I'm still booking your appointment for {say_date(f['date'])} at "
                    f"{say_time(f['time'])}. I'll confirm as soon as it's done.",
                    "answer",
                )
                return
            if not appts or (len(appts) > 1 and self.caller_name is None):
                self._lookup_pending = True
                self._speak(
                    "Let me look that up. What name is the appointment booked under?", "clarify"
                )
                return
            self._lookup_pending = False
            parts = [f"{say_date(a['date'])} at {say_time(a['time'])}" for a in appts]
            if len(parts) == 1:
                text = f"Your appointment is on {parts[0]}."
            else:
                text = f"You have {len(parts)} appointments: on {say_list(parts)}."
            moving = [
                t
                for t in self.tasks.values()
                if t.status == "active"
                and t.kind == "reschedule"
                and t.fields.get("date")
                and any(p.write for p in self._task_pending(t))
            ]
            if moving:
                text += f" I'm moving it to {say_date(moving[-1].fields['date'])} right now."
            self._speak(text, "answer")

    def _my_appointments(self, date: str | None = None) -> list[dict[str, Any]]:
        """The caller's booked appointments: the one booked in this session, else those
        under the caller's name once it is known, else every booked one (on ``date``)."""
        booked = self.db.appointments(date=date)
        session = [a for a in booked if a["id"] in self._session_appts]
        if session and date is None:
            return [max(session, key=lambda a: self._session_appts.index(a["id"]))]
        if self.caller_name:
            name = self.caller_name.casefold()
            return [a for a in booked if str(a["name"]).casefold() == name]
        return booked

    def _find_appointment(
        self, u: Understanding, all_dates: bool = False
    ) -> tuple[str | None, list[dict[str, Any]]]:
        refs = [d for d in u.dates if all_dates or d.ref]
        date = self._resolve_date(refs[-1], None) if refs else None
        cands = self._my_appointments(date)
        if len(cands) == 1:
            return str(cands[0]["id"]), cands
        return None, cands

    def _start(self, u: Understanding) -> None:
        kind = {
            BOOK: "book",
            AVAILABILITY: "book",
            RESCHEDULE: "reschedule",
            CANCEL_APPT: "cancel",
            UPDATE_CONTACT: "update_contact",
        }[u.intent]
        current = self._current()
        if kind == "book":
            if current is not None and current.kind == "book" and current.status == "active":
                self._inform(u)
                return
            values = self._values(u, None, None, include_refs=True)
            if values.get("contact"):
                self.caller_contact = values["contact"]
            book = {k: values.get(k) for k in FIELDS["book"]}
            self._reconcile(self._new_task("book", book, u.topic))
            return
        appt_id, cands = self._find_appointment(u, all_dates=kind == "cancel")
        if (
            current is not None
            and current.status == "active"
            and current.kind == kind
            and current.fields.get("appointment_id") in (appt_id, None)
        ):
            self._inform(u)  # the same request again (after a drop, or reworded)
            return
        appt = self.db.appointment(appt_id) if appt_id else None
        values = self._values(u, appt["date"] if appt else None, None)
        fields: dict[str, Any] = {"appointment_id": appt_id}
        if kind == "reschedule":
            fields.update(date=values.get("date"), time=values.get("time"))
        elif kind == "update_contact":
            fields["contact"] = values.get("contact")
            if values.get("contact"):
                self.caller_contact = values["contact"]
        task = self._new_task(kind, fields)
        if appt_id is None:
            if len(cands) > 1:
                listed = say_list(
                    [f"{say_date(a['date'])} at {say_time(a['time'])}" for a in cands[:4]]
                )
                self._ask(
                    task, "appointment", f"I see appointments on {listed}. Which one is yours?"
                )
            else:
                self._ask(task, "appointment", "Sure. What name is the appointment booked under?")
            return
        self._reconcile(task)

    def _current(self) -> _Task | None:
        """The task values go to: one awaiting input, else the latest active, else the latest
        completed (a correction right after a task finished reopens it)."""
        order = sorted(self.tasks.values(), key=lambda t: -t.seq)
        for status, needs_wait in (("active", True), ("active", False), ("completed", False)):
            for t in order:
                if t.status == status and (t.awaiting is not None or not needs_wait):
                    return t
        return None

    def _values(
        self,
        u: Understanding,
        ref_date: str | None,
        task: _Task | None,
        *,
        include_refs: bool = False,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        dates = [d for d in u.dates if not d.negated and (include_refs or not d.ref)]
        if dates:
            resolved = self._resolve_date(dates[-1], ref_date)
            if resolved:
                out["date"] = resolved
        offered = task.offered if task is not None else []
        times = [t for t in u.times if not t.negated]
        if times:
            t = times[-1]
            out["time"] = resolve_time(t.hour, t.minute, t.ampm, offered)
        elif task is not None and task.awaiting == "time" and u.bare_numbers:
            out["time"] = resolve_time(u.bare_numbers[-1], 0, None, offered)
        if u.phone:
            out["contact"] = u.phone
        name = u.name
        if name is None and task is not None and task.awaiting in ("name", "appointment"):
            name = free_name(u.text)
        if name:
            out["name"] = name
        return out

    def _resolve_date(self, m: DateMention, ref: str | None) -> str | None:
        """A date mention as ISO: the year is this year (next year once the date passed); a
        day alone takes the month of ``ref`` (the date being corrected) or the next month
        that has it (and the weekday, when one was said); a weekday alone is that day in
        the week of ``ref``, else the next one."""
        today = self.today
        base = dt.date.fromisoformat(ref) if ref else None
        if m.rel_days is not None:
            return (today + dt.timedelta(days=m.rel_days)).isoformat()
        if m.day is not None and m.month is not None:
            year = m.year or today.year
            for y in (year, year + 1):
                try:
                    d = dt.date(y, m.month, m.day)
                except ValueError:
                    return None
                if d >= today or m.year is not None:
                    return d.isoformat()
            return None
        if m.day is not None:
            start = base or today
            for k in range(14):
                y, mo = divmod(start.month - 1 + k, 12)
                try:
                    d = dt.date(start.year + y, mo + 1, m.day)
                except ValueError:
                    continue
                if d >= today and (m.weekday is None or d.weekday() == m.weekday):
                    return d.isoformat()
            return None
        if m.weekday is not None:
            if base is not None:
                d = base + dt.timedelta(days=m.weekday - base.weekday())
                if d > today:
                    return d.isoformat()
            ahead = (m.weekday - today.weekday()) % 7 or 7
            return (today + dt.timedelta(days=ahead)).isoformat()
        return None

    def _inform(self, u: Understanding) -> None:
        """Values (date, time, phone, name) for the current task, or a new booking."""
        if self._lookup_pending and (u.name or u.dates or free_name(u.text)):
            self._lookup_pending = False
            self.caller_name = u.name or free_name(u.text) or self.caller_name
            self._answer(ASK_APPOINTMENT)
            return
        task = self._current()
        if task is None:
            values = self._values(u, None, None, include_refs=True)
            if values.get("contact"):
                self.caller_contact = values["contact"]
            if values.get("date") or values.get("time"):
                fields = {k: values.get(k) for k in FIELDS["book"]}
                self._reconcile(self._new_task("book", fields, u.topic))
            elif values.get("name"):
                self._speak(f"Thanks, {values['name']}. How can I help you today?", "answer")
            elif values.get("contact"):
                self._speak("Thanks, I've noted your number. How can I help you today?", "answer")
            else:
                self._speak(CLARIFY_TEXT, "clarify")
            return
        if task.awaiting == "appointment":
            self._identify(task, u)
            return
        appt = self.db.appointment(
            str(task.fields.get("appointment_id") or task.appointment_id or "")
        )
        ref = task.fields.get("date") or (appt["date"] if appt else None)
        values = self._values(u, ref, task, include_refs=task.kind == "book")
        if "contact" in values:
            self.caller_contact = values["contact"]
        if u.partial_phone and "contact" not in values and task.awaiting == "contact":
            self._speak(
                f"Sorry, I only caught {len(u.partial_phone)} digits. Could you say the whole "
                "number again?",
                "clarify",
                task,
            )
            return
        fits = {k: v for k, v in values.items() if k in FIELDS[task.kind]}
        spill = {k: v for k, v in values.items() if k not in fits and k != "name"}
        if fits:
            self._set_fields(task, fits)
        if spill:
            self._spill(task, spill)
        if not fits and not spill and not self._reask():
            self._speak(CLARIFY_TEXT, "clarify")

    def _identify(self, task: _Task, u: Understanding) -> None:
        """The answer to "which appointment / what name is it under?"."""
        name = u.name or free_name(u.text)
        hits: list[dict[str, Any]] = []
        if name:
            self.caller_name = name
            hits = self.db.appointments(name=name)
        if u.dates and len(hits) != 1:
            d = self._resolve_date(u.dates[-1], None)
            pool = hits or self.db.appointments()
            hits = [a for a in pool if a["date"] == d]
        if len(hits) != 1:
            self._speak(
                "I'm sorry, I can't find that appointment. Could you tell me the name and the "
                "date it's booked for?",
                "clarify",
                task,
            )
            return
        task.awaiting = None
        self._set_fields(task, {"appointment_id": hits[0]["id"]})

    def _spill(self, task: _Task, values: dict[str, Any]) -> None:
        """Values that belong to another task on the same appointment (a new number while
        rescheduling, a new date after a contact change)."""
        appt_id = task.fields.get("appointment_id") or task.appointment_id
        if not appt_id:
            self._speak(CLARIFY_TEXT, "clarify")
            return
        if "contact" in values:
            fields = {"appointment_id": appt_id, "contact": values["contact"]}
            self._reconcile(self._new_task("update_contact", fields))
        if "date" in values or "time" in values:
            fields = {
                "appointment_id": appt_id,
                "date": values.get("date") or (self.db.appointment(str(appt_id)) or {}).get("date"),
                "time": values.get("time"),
            }
            self._reconcile(self._new_task("reschedule", fields))

    def _set_fields(self, task: _Task, values: dict[str, Any]) -> None:
        """Apply new field values: a new task version; careful drops writes in flight for
        the old version; then the next step."""
        changes = {k: v for k, v in values.items() if task.fields.get(k) != v}
        self._touch(task)
        if not changes:
            if not self._reask() and not self._task_pending(task):
                self._speak("Yes, that's what I have.", "answer", task)
            return
        picked = task.awaiting in changes  # an answer to the open question, not a correction
        corrected = {
            k: (task.fields.get(k), v)
            for k, v in changes.items()
            if task.fields.get(k) and not (picked and k == task.awaiting)
        }
        task.fields.update(changes)
        task.version += 1
        task.blocked_version = None
        if task.awaiting in changes or task.awaiting in ("date", "time", "confirm"):
            task.awaiting = None
        if task.kind == "cancel":
            task.confirmed = False
        if task.status == "completed":
            task.status = "active"
        self._state(task, "modify" if corrected else "keep")
        if not self.policy.delivers_stale_results:
            for p in self._task_pending(task):
                if p.write and p.compensates is None and p.version < task.version:
                    self._drop(p, f"superseded by task version {task.version}")
        parts = [
            f"{say_field(k, new)} instead of {say_field(k, old)}"
            for k, (old, new) in corrected.items()
            if k != "appointment_id"
        ]
        if parts:
            self._speak(f"Got it: {say_list(parts)}.", "confirm", task)
        before = {p.call_id for p in self._task_pending(task)}
        self._reconcile(task, quiet=bool(parts))
        if parts and any(p.write for p in self._task_pending(task) if p.call_id not in before):
            self._speak("I'm updating that now.", "confirm", task)

    def _drop(self, p: Pending, reason: str) -> None:
        """A pending call that will not run (nothing commits)."""
        self._pending.pop(p.call_id, None)
        self.db.cancel_call(p.call_id, _ns(self._now_ms), reason)
        self._event(
            "tool.failed",
            {
                "call_id": p.call_id,
                "tool": p.tool,
                "arguments": p.arguments,
                "idempotency_key": p.key,
                "task_version": p.version,
                "status": "cancelled",
                "committed": False,
                "error": reason,
            },
            task_id=p.task_id,
            response_id=p.response_id,
        )

    def _stop(self) -> None:
        """Cancel the current (or just-finished) task: pending calls are dropped (a write is
        let through with ``writes_after_stop``), committed writes are compensated."""
        order = sorted(self.tasks.values(), key=lambda t: -t.seq)
        task = next((t for t in order if t.status == "active"), None) or next(
            (t for t in order if t.status == "completed"), None
        )
        if task is None:
            self._speak("Okay, no problem. What else can I help you with?", "answer")
            return
        dropped = False
        for p in self._task_pending(task):
            if p.compensates is not None or (p.write and self.policy.writes_after_stop):
                dropped = dropped or p.write
                continue
            self._drop(p, "cancelled: the user said stop")
            dropped = dropped or p.write
        undo = self._standing_writes(task)
        task.status = "cancelled"
        task.awaiting = None
        self._touch(task)
        self._state(task, "compensate" if undo else "cancel")
        for call_id in reversed(undo):
            self._compensate(task, call_id)
        appt = self.db.appointment(str(task.fields.get("appointment_id") or ""))
        if task.kind == "book":
            tail = (
                "I'm cancelling the booking I just made, so nothing is booked."
                if undo
                else "Nothing has been booked."
            )
        elif task.kind == "reschedule" and appt is not None:
            prev = (self.db.call(undo[0]).get("result") or {}).get("previous") if undo else None
            if prev:
                tail = (
                    f"I'm moving your appointment back to {say_date(prev['date'])} at "
                    f"{say_time(prev['time'])}."
                )
            else:
                tail = (
                    f"Your appointment stays on {say_date(appt['date'])} at "
                    f"{say_time(appt['time'])}."
                )
        elif task.kind == "cancel":
            tail = (
                "I'm restoring your appointment." if undo else "Your appointment is still booked."
            )
        elif task.kind == "update_contact":
            tail = "I'm changing your number back." if undo else "Your number stays the same."
        else:
            tail = "Nothing has been changed."
        head = "Okay, I've stopped that." if dropped or undo else "Okay, no problem."
        self._speak(f"{head} {tail}", "answer", task)
