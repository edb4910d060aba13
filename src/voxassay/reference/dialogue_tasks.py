"""The reference desk's task flow (tool calls in flight and their outcomes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voxassay.reference.clinic import CallOutcome, normalize_phone
from voxassay.reference.phrasing import say_date, say_list, say_phone, say_time

if TYPE_CHECKING:
    pass
from voxassay.reference.dialogue_base import (
    DialogueBase,
    Pending,
    _ns,
    _Task,
    undone_text,
)


class TaskFlow(DialogueBase):
    """Tool calls as the desk runs them: request, hold, complete, announce, compensate,
    and reconcile what the user changed while a call was in flight."""

    def _begin(
        self, now_ms: float, *, user_turn: bool = False, utterance_id: str | None = None
    ) -> None:
        self._now_ms = max(self._now_ms, float(now_ms))
        self._out, self._speech, self._rid = [], [], None
        self._user_turn, self._utt = user_turn, utterance_id
        self._advance(self._now_ms)

    def _request(
        self,
        task: _Task,
        tool: str,
        arguments: dict[str, Any],
        *,
        key: str | None = None,
        version: int | None = None,
        response_id: str | None = None,
        compensates: str | None = None,
        retries: int = 0,
    ) -> Pending:
        write = tool != "check_availability"
        if write and key is None:
            task.attempts += 1
            key = f"{self.session_id}/{task.task_id}/w{task.attempts}"
        if response_id is None:
            response_id = (
                self._turn_rid() if self._user_turn else (task.response_id or self._turn_rid())
            )
        version = task.version if version is None else version
        call_id = self.db.request(
            tool,
            arguments,
            idempotency_key=key,
            task_id=task.task_id,
            task_version=version,
            response_id=response_id,
            requested_ns=_ns(self._now_ms),
            compensates=compensates,
            meta={"retry": retries} if retries else None,
        )
        self._n_seq += 1
        p = Pending(
            call_id,
            task.task_id,
            tool,
            dict(arguments),
            version,
            self._now_ms + self._latency(tool, write),
            key if write else None,
            write,
            response_id,
            self._n_seq,
            compensates,
            retries,
            self._now_ms,
        )
        self._pending[call_id] = p
        data: dict[str, Any] = {
            "call_id": call_id,
            "tool": tool,
            "arguments": dict(arguments),
            "idempotency_key": p.key,
            "task_version": version,
        }
        if compensates:
            data["compensates"] = compensates
        if retries:
            data["retry"] = retries
        self._event("tool.requested", data, task_id=task.task_id, response_id=response_id)
        return p

    def _holding(self, now: float) -> bool:
        """The user is speaking, or their text is not in yet (careful waits for it)."""
        return self._user_active or (self._hold_until is not None and self._hold_until > now)

    def _advance(self, now: float) -> None:
        """Finish every call that is due by ``now``, in time order: careful holds writes
        (no commit) and results (no announcement) while the user is speaking."""
        while True:
            self._finish_due(now)
            if self._hold_until is not None and self._hold_until <= now:
                self._hold_until = None
            if not self._deferred or self._holding(now):
                break
            deferred, self._deferred = self._deferred, []
            for p, out, t in deferred:
                self._on_outcome(p, out, t)
        self._notice_slow(now)

    def _finish_due(self, now: float) -> None:
        while True:
            ready: list[tuple[float, int, Pending]] = []
            for p in self._pending.values():
                t = p.due_ms
                if p.write and p.compensates is None and not self.policy.writes_after_stop:
                    if self._user_active:
                        continue
                    if self._hold_until is not None and t < self._hold_until:
                        if self._hold_until > now:
                            continue
                        t = self._hold_until
                if t <= now:
                    ready.append((t, p.seq, p))
            if not ready:
                break
            t, _, p = min(ready, key=lambda r: (r[0], r[1]))
            self._complete(p, t, now)

    def _notice_slow(self, now: float) -> None:
        if self.slow_notice_ms > 0:
            slow = [
                p
                for p in self._pending.values()
                if not p.noticed and now - p.requested_ms >= self.slow_notice_ms
            ]
            for p in slow:
                p.noticed = True
            if slow and self._connected:
                self._speak(
                    "Sorry, this is taking a little longer than usual. I'm still working on it.",
                    "answer",
                    self.tasks[slow[0].task_id],
                )

    def _complete(self, p: Pending, t: float, now: float) -> None:
        del self._pending[p.call_id]
        if not self._connected:
            self.db.execute(p.call_id, _ns(t), lost=True)
            self._lost.append(p)
            return
        out = self.db.execute(p.call_id, _ns(t))
        if not self.policy.delivers_stale_results and self._holding(now):
            self._deferred.append((p, out, t))  # handled once the user's words are in
            return
        self._on_outcome(p, out, t)

    def _on_outcome(self, p: Pending, out: CallOutcome, t: float) -> None:
        task = self.tasks[p.task_id]
        data: dict[str, Any] = {
            "call_id": p.call_id,
            "tool": p.tool,
            "arguments": p.arguments,
            "idempotency_key": p.key,
            "task_version": p.version,
            "status": "ok" if out.ok else "failed",
            "committed": out.committed,
            "replayed": out.replayed,
            "result": out.result,
        }
        if out.error:
            data["error"] = out.error
        self._event(
            "tool.completed" if out.ok else "tool.failed",
            data,
            task_id=task.task_id,
            response_id=p.response_id,
            at_ms=t,
        )
        res = out.result if isinstance(out.result, dict) else {}
        if p.compensates is not None:
            if not out.ok:
                self._speak(
                    "I'm sorry, I couldn't undo that change. A colleague will call you back "
                    "to sort it out.",
                    "announce",
                    task,
                )
            elif task.kind == "book" and task.appointment_id == res.get("appointment_id"):
                task.appointment_id = None
            if out.ok and task.status == "cancelled":
                # the undo is the task's last word: say it is done (its final result)
                self._speak(undone_text(p.tool, res), "announce", task, (p.call_id,), p.version)
            if task.status == "active":
                self._reconcile(task, quiet=True)
            return
        if out.ok and p.write:
            task.writes.append(p.call_id)
            if p.tool == "book_appointment" and res.get("appointment_id"):
                task.appointment_id = str(res["appointment_id"])
                self._session_appts.append(task.appointment_id)
        if task.status in ("cancelled", "superseded"):
            if out.ok and p.write:
                self._compensate(task, p.call_id)
            return
        stale = p.version < task.version
        if stale and not self.policy.delivers_stale_results:
            self._reconcile(task, quiet=True)
            return
        self._announce(task, p, out.ok, res)
        self._reconcile(task, quiet=True)

    def _announce(self, task: _Task, p: Pending, ok: bool, res: dict[str, Any]) -> None:
        calls = (p.call_id,)
        if p.tool == "check_availability" and ok:
            day, slots = str(res.get("date")), [str(x) for x in res.get("slots") or []]
            task.queried = (day, p.version)
            task.offered = slots
            if slots:
                text = (
                    f"On {say_date(day)} I have {say_list([say_time(x) for x in slots])}. "
                    "Which time would you like?"
                )
                task.awaiting = "time"
            else:
                text = f"I'm sorry, {say_date(day)} is fully booked. Would another day work?"
                task.awaiting = "date"
                task.blocked_version = task.version
            self._speak(text, "announce", task, calls, p.version)
            return
        if ok:
            if p.tool == "book_appointment":
                what = task.topic or "appointment"
                text = (
                    f"You're all set, {res.get('name')}. Your {what} is booked for "
                    f"{say_date(str(res['date']))} at {say_time(str(res['time']))}, and we'll "
                    f"text a reminder to {say_phone(str(res.get('contact')))}."
                )
            elif p.tool == "reschedule_appointment":
                text = (
                    f"Done. Your appointment is now on {say_date(str(res['date']))} at "
                    f"{say_time(str(res['time']))}."
                )
            elif p.tool == "cancel_appointment":
                text = (
                    f"Your appointment on {say_date(str(res['date']))} at "
                    f"{say_time(str(res['time']))} has been cancelled."
                )
            elif p.tool == "update_contact":
                text = f"I've updated your phone number to {say_phone(str(res.get('contact')))}."
            else:
                text = "That's done."
            task.awaiting = None
            self._speak(text, "announce", task, calls, p.version)
            return
        code = str(res.get("status") or "error")
        task.blocked_version = task.version
        if code == "unavailable":
            alts = [str(a) for a in res.get("alternatives") or []]
            day, time = str(res.get("date")), str(res.get("time"))
            task.offered = alts
            if alts:
                task.awaiting = "time"
                text = (
                    f"I'm sorry, {say_time(time)} on {say_date(day)} isn't available. That day "
                    f"I have {say_list([say_time(a) for a in alts])}. Which would you like?"
                )
            else:
                task.awaiting = "date"
                text = f"I'm sorry, {say_date(day)} is fully booked. Would another day work?"
        elif code == "past_date":
            task.awaiting = "date"
            text = "I'm sorry, that date has already passed. What day would you like instead?"
        elif code in ("not_found", "not_booked", "already_cancelled"):
            task.awaiting = "appointment"
            text = (
                "I'm sorry, I couldn't find a booked appointment for that. "
                "What name is it booked under?"
            )
        else:
            what = {
                "check_availability": "check the calendar",
                "book_appointment": "make the booking",
                "reschedule_appointment": "move the appointment",
                "cancel_appointment": "cancel the appointment",
                "update_contact": "change the phone number",
            }.get(p.tool, "do that")
            text = (
                f"I'm sorry, our system isn't working right now, so I couldn't {what} and "
                "nothing has been changed. Please try again a little later, or I can ask a "
                "colleague to call you back."
            )
            task.status = "cancelled"  # refused: nothing more will be tried for it
            task.awaiting = None
            self._state(task, "refuse")
        self._speak(text, "announce", task, calls, p.version)

    def _compensate(self, task: _Task, call_id: str) -> None:
        """Request the inverse of a committed write (once)."""
        row = self.db.call(call_id)
        if row["status"] == "compensated" or not row["committed"]:
            return
        if any(p.compensates == call_id for p in self._pending.values()):
            return
        tool, args = self.db.compensation_for(call_id)
        key = f"{row.get('idempotency_key') or call_id}:compensate"
        self._request(task, tool, args, key=key, compensates=call_id)

    def _standing_writes(self, task: _Task) -> list[str]:
        out = []
        for call_id in task.writes:
            row = self.db.call(call_id)
            if row["committed"] and row["status"] != "compensated":
                out.append(call_id)
        return out

    def _blocking(self, task: _Task) -> bool:
        """A call of the task is in flight (or its result waits) that the next step must
        wait for; careful does not wait for a read made for an older version (its result
        will be dropped)."""
        waiting = [*self._task_pending(task)]
        waiting += [p for p, _, _ in self._deferred if p.task_id == task.task_id]
        return any(
            p.write or p.version >= task.version or self.policy.delivers_stale_results
            for p in waiting
        )

    def _ask(self, task: _Task, what: str, text: str) -> None:
        task.awaiting = what
        self._speak(text, "clarify", task)

    def _reconcile(self, task: _Task, *, quiet: bool = False) -> None:
        """The next step that brings the backend to the task's fields: a tool call, a
        question for what is missing, or the task is completed."""
        if task.status != "active" or self._blocking(task):
            return
        if task.blocked_version == task.version:
            return
        f = task.fields
        if task.kind == "book":
            self._reconcile_book(task, f, quiet)
            return
        appt = self.db.appointment(str(f.get("appointment_id") or ""))
        if appt is None:
            self._ask(task, "appointment", "Which appointment is it? What name is it under?")
            return
        when = f"{say_date(appt['date'])} at {say_time(appt['time'])}"
        if task.kind == "reschedule":
            if not f.get("date"):
                self._ask(
                    task,
                    "date",
                    f"Your appointment is on {when}. What day would you like to move it to?",
                )
                return
            target = f.get("time") or appt["time"]
            if appt["status"] == "booked" and (appt["date"], appt["time"]) == (f["date"], target):
                self._complete_task(task)
                return
            args: dict[str, Any] = {"appointment_id": appt["id"], "date": f["date"]}
            if f.get("time"):
                args["time"] = f["time"]
            if not quiet:
                self._speak(
                    f"Sure, I'll move your appointment from {say_date(appt['date'])} to "
                    f"{say_date(f['date'])} at {say_time(target)}.",
                    "confirm",
                    task,
                )
            self._request(task, "reschedule_appointment", args)
        elif task.kind == "cancel":
            if appt["status"] == "cancelled":
                self._complete_task(task)
                return
            if self.policy.confirms_irreversible and not task.confirmed:
                task.awaiting = "confirm"
                self._speak(
                    f"Just to confirm, you'd like to cancel your appointment on {when}? "
                    "Please say yes to go ahead.",
                    "confirm",
                    task,
                )
                return
            task.awaiting = None
            self._speak(f"Okay, I'm cancelling your appointment on {when}.", "confirm", task)
            self._request(task, "cancel_appointment", {"appointment_id": appt["id"]})
        elif task.kind == "update_contact":
            if not f.get("contact"):
                self._ask(task, "contact", "Sure. What's the new phone number?")
                return
            if appt["contact"] == f["contact"]:
                self._complete_task(task)
                return
            if not quiet:
                self._speak(
                    f"Okay, I'm changing your number to {say_phone(str(f['contact']))}.",
                    "confirm",
                    task,
                )
            self._request(
                task, "update_contact", {"appointment_id": appt["id"], "contact": f["contact"]}
            )

    def _reconcile_book(self, task: _Task, f: dict[str, Any], quiet: bool) -> None:
        if not f.get("date"):
            self._ask(task, "date", "Sure. What day would you like to come in?")
            return
        if not f.get("time"):
            if task.queried == (f["date"], task.version) and task.offered:
                task.awaiting = "time"
                return  # the free times were offered: waiting for the user's pick
            self._speak(f"Let me check what we have on {say_date(f['date'])}.", "answer", task)
            self._request(task, "check_availability", {"date": f["date"]})
            return
        if not f.get("name"):
            if not self.caller_name:
                self._ask(task, "name", "What name should I put the appointment under?")
                return
            f["name"] = self.caller_name
        if not f.get("contact"):
            if not self.caller_contact:
                self._ask(task, "contact", "And what's the best phone number to reach you?")
                return
            f["contact"] = self.caller_contact
        task.awaiting = None
        if task.appointment_id is None:
            if not quiet:
                what = f"a {task.topic}" if task.topic else "an appointment"
                self._speak(
                    f"Great, I'm booking {what} for {f['name']} on {say_date(f['date'])} at "
                    f"{say_time(f['time'])}.",
                    "confirm",
                    task,
                )
            args = {k: f[k] for k in ("name", "date", "time", "contact")}
            self._request(task, "book_appointment", args)
            return
        appt = self.db.appointment(task.appointment_id)
        if appt is None or appt["status"] != "booked":
            task.appointment_id = None
            self._reconcile_book(task, f, quiet)
            return
        held = (appt["date"], appt["time"], appt["contact"], str(appt["name"]).casefold())
        want = (f["date"], f["time"], normalize_phone(str(f["contact"])), str(f["name"]).casefold())
        if held == want:
            self._complete_task(task)
            return
        # The booking committed with old values: cancel it (a compensation) and book again,
        # so that every write left standing carries the latest values.
        for call_id in self._standing_writes(task):
            self._compensate(task, call_id)

    def _complete_task(self, task: _Task) -> None:
        if task.status != "completed":
            task.status = "completed"
            task.awaiting = None
            self._state(task, "keep")
