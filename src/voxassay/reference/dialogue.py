"""The reference agent's text-level dialogue manager: ASR text in, actions out.

``DialogueManager`` runs the appointment desk of Riverside Dental on top of ``ClinicDB``:
rule-based understanding of ASR text (faster-whisper tiny.en style: case, punctuation, digits
or words all vary), tasks with versions, background tool calls with latency, stale results,
stop and compensation, idempotent retries, and a conversation history that can be truncated
to what the user actually heard. No audio here and no clock of its own: every entry point
takes ``now_ms`` on the session clock and first runs everything that became due by then. The
same inputs always give the same outputs.

Grammar (what the rules understand; case and punctuation never matter; numbers may be digits
or words; tiny.en spellings such as ``10 a.m.``, ``10am``, ``3.30pm``, ``Mm-hmm.`` work)::

    intent          example utterances
    --------------  ----------------------------------------------------------------------
    book            "I'd like to book a cleaning on August tenth at ten a.m., my name is
                    Sam Lee, my number is 555 0100" / "Can I make an appointment for
                    Tuesday?" / "I need a checkup next week" / "Do you have anything on
                    the 12th?" (availability: starts a booking and checks the free times)
    reschedule      "Can you move my appointment to August twelfth?" / "I need to
                    reschedule to the 14th at 3 p.m." / "Move my August 3rd appointment
                    to Friday" / "Push it back to half past three"
    cancel          "Cancel my appointment" / "I need to cancel my booking on the 3rd"
    (appointment)   (careful asks "Just to confirm...?" first; "yes" cancels)
    update contact  "Can you update my phone number to 555 0199?" / "My new number is
                    five five five, zero one nine nine"
    ask             "When is my appointment?" / "What are your opening hours?" / "What's
                    your cancellation policy?" / "Where can I park?" / "What's your
                    address?" (also after a task: "Also, where can I park?")
    correction      "No wait, the tenth" / "Sorry, I meant Tuesday the 11th" / "Not the
                    twelfth, the tenth" / "Make that 11 a.m." / "My number is 555 0199"
                    (any date, time, phone or name while a task is open, or right after it
                    finished, updates that task; a value after "not" or "instead of" is
                    the old one)
    stop            "Stop" / "Cancel that" / "Actually, cancel that" / "Never mind" /
                    "Forget it" / "Hold on, don't" / "Don't do that" / "Scratch that"
                    (cancels the current or just-finished task: pending writes are
                    dropped, committed ones undone)
    hold            "Hold on" / "Wait" / "One moment" / "Hang on" (no task change; careful
                    holds pending writes a little longer)
    confirm / deny  "Yes" / "Yes, please" / "Yeah, go ahead" / "That's right" / "Correct"
                    / "No" / "No, thanks" / "Don't cancel it"
    backchannel     "Uh-huh" / "Mm-hmm" / "Mhm" / "Okay" / "Right" / "Yeah" / "I see" /
                    "Got it" / "Alright" (no answer; an affirmative one confirms when the
                    agent is waiting for a yes)
    greeting/thanks "Hi" / "Good morning" / "Thank you" / "That's all, bye" / "Are you
                    still there?"
    unknown         anything else -> a polite clarification question

Values: dates ``August 10th``, ``august tenth``, ``the 10th``, ``10th of August``,
``Tuesday``, ``Tuesday the 11th``, ``tomorrow`` (year 2026 unless said; a day without a month
takes the month of the date being corrected, else the next such day); times ``10 a.m.``,
``ten am``, ``3:30 p.m.``, ``3.30pm``, ``half past three``, ``quarter to four``, ``ten
thirty``, ``10 o'clock``, ``noon``, ``at 2`` (no a.m./p.m.: 7-11 morning, 12-6 afternoon, or
the offered slot with that hour); phone numbers as digits (``555 0100``, ``555-0100``) or
words (``five five five zero one zero zero``, ``oh``, ``double five``, ``one hundred``), 7 to
11 digits; names after ``my name is``, ``name's``, ``this is``, ``I'm`` (capitalized), ``under
the name``, or as the whole answer when the agent asked for a name.

Policy effects (``policy.Policy``; turn-layer switches are read by the audio layer, not here):
``delivers_stale_results`` announces a result whose task version was superseded (careful
drops it, cancels the superseded pending write and re-queries); ``repeats_side_effects``
retries a write whose result was lost in a disconnect with a new idempotency key (careful
reuses the key, so the backend replays the stored result); ``writes_after_stop`` lets a
pending write commit after "stop" and ignores the write hold (careful drops it; both undo a
write that committed before or after the stop with a compensating call);
``keeps_unheard_text`` keeps the whole response in history after a cut (careful keeps the
words heard); ``confirms_irreversible`` asks before cancelling an appointment;
``answers_backchannels`` answers a backchannel the turn layer passed on as a turn.

Contract with the audio layer (all times are session-clock ms; call ``tick`` every frame):

- ``on_user_speech(True/False, now)`` at VAD speech start/stop of the user (not of speech the
  turn layer already judged a bystander): careful holds writes and result announcements
  while a stop or correction may be on its way. Without these calls a write that falls due
  while the user says "stop" commits (a ``write_after_stop`` failure).
- ``on_user_text(text, utterance_id, now)`` for every final transcript the turn layer treats
  as the user's (careful: backchannels too; the DM answers nothing to them and ends the
  hold). Returns ``Say`` and ``DeskEvent`` actions; emit the events as ``producer=agent``
  (``DeskEvent.at_ms`` when set is the true time) and speak the ``Say``.
- ``on_playback_started(response_id, now)`` when a response's audio starts playing (that is
  when an announced result counts as delivered); ``on_heard(response_id, heard_ms,
  total_ms, now)`` when it was cut (``heard_ms`` 0 for one dropped before it played);
  ``set_word_times`` before that if the TTS gives per-word timings.
- ``on_connection(False/True, now)`` when the link drops and comes back.
- The DM never emits ``turn.decision``, ``response.*`` or ``playback.*``: those belong to the
  turn and audio layers. ``is_backchannel`` and ``is_stop`` help the turn layer decide.

Write hold (careful): between ``on_user_speech(True)`` and the text of that speech (or
``hold_grace_ms`` after the speech ends), writes that fall due wait, so a "stop" that is
still being spoken or transcribed can drop them. A booking that was already committed
when the user said "cancel that" is undone (``cancel_appointment`` with ``compensates``); a
correction of a committed booking cancels it and books again (so every standing write holds
the latest values); a correction of a committed reschedule or contact change repeats that
tool with the new value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.reference.clinic import TOOLS
from voxassay.reference.db import ClinicDB
from voxassay.reference.policy import Policy
from voxassay.reference.understanding import (
    BACKCHANNEL,
    EMPTY,
    HOLD,
    NEUTRAL,
    STOP,
    understand,
)

if TYPE_CHECKING:
    from voxassay.contracts.duplex.scenario import Scenario

__all__ = [
    "DEFAULT_LATENCY_MS",
    "HOURS_TEXT",
    "LOCATION_TEXT",
    "POLICY_TEXT",
    "Action",
    "DeskEvent",
    "DialogueManager",
    "Say",
]

from voxassay.reference.dialogue_base import (
    DEFAULT_LATENCY_MS,
    GREETING_TEXT,
    HOURS_TEXT,
    LOCATION_TEXT,
    POLICY_TEXT,
    Action,
    DeskEvent,
    Entry,
    Say,
    _ns,
)
from voxassay.reference.dialogue_talk import Conversation


class DialogueManager(Conversation):
    """Rule-based appointment desk (see the module docstring).

    ``latencies``: ms per tool name, or ``read`` / ``write`` for every read / write tool
    (defaults ``DEFAULT_LATENCY_MS``: 1500 / 800). ``hold_grace_ms``: how long after the user
    stops speaking careful still holds pending writes while the text is not in.
    ``hold_on_ms``: how long "hold on" holds them. ``slow_notice_ms``: a call still running
    this long gets one "this is taking longer than usual" (0: never).
    """

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        policy: Policy | str = "careful",
        session_id: str = "session",
        *,
        db_path: str | Path = ":memory:",
        **options: Any,
    ) -> DialogueManager:
        """A fresh desk for a scenario: the database seeded from ``initial_state``, the
        latency of each clinic tool the scenario sets (``latency_ms``), and its scripted
        ``error`` results as component faults (``ClinicDB.set_tool_faults``). Scripted
        ``result`` values are not used: the database computes the real ones. The scenario's
        truth is never read."""
        db = ClinicDB(getattr(scenario, "initial_state", None) or {}, path=db_path)
        latencies: dict[str, int] = {}
        for tool in scenario.tools:
            if tool.name not in TOOLS:
                continue
            if "latency_ms" in tool.model_fields_set:
                latencies[tool.name] = tool.latency_ms
            if any(r.error for r in tool.results):
                db.set_tool_faults(tool.name, [(r.match, r.error) for r in tool.results])
        latencies.update(options.pop("latencies", None) or {})
        return cls(db, policy, session_id, latencies=latencies, **options)

    @staticmethod
    def is_backchannel(text: str) -> bool:
        """Only backchannel tokens ("uh-huh", "mm-hmm", "okay", "right", "yeah", "I see")."""
        return understand(text).intent == BACKCHANNEL

    @staticmethod
    def is_stop(text: str) -> bool:
        """A request to stop: the task ("stop", "cancel that", "never mind", "hold on, don't")
        or just the speech ("hold on", "wait"). The turn layer should stop playback on both."""
        return understand(text).intent in (STOP, HOLD)

    @property
    def history(self) -> list[tuple[str, str]]:
        """The conversation as the agent remembers it: (role, text), cut to what was heard."""
        return [(e.role, e.text) for e in self._history]

    def greet(self, now_ms: float) -> list[Action]:
        """The opening line (optional: most scenarios start with the user)."""
        self._begin(now_ms)
        self._speak(GREETING_TEXT, "answer")
        return self._end()

    def on_user_text(self, text: str, utterance_id: str | None, now_ms: float) -> list[Action]:
        """A final transcript of the user's speech."""
        self._begin(now_ms, user_turn=True, utterance_id=utterance_id)
        u = understand(text)
        if u.intent != EMPTY:
            self._history.append(Entry("user", text, text, utterance_id=utterance_id))
        if u.name:
            self.caller_name = u.name
        if self._user_active or self._hold_until is not None:
            # writes held for this utterance commit (if still wanted) now, not at their due time
            for p in self._pending.values():
                if p.write and p.compensates is None and p.due_ms < self._now_ms:
                    p.due_ms = self._now_ms
        self._user_active = False
        self._hold_until = None
        if u.intent in NEUTRAL:
            self._advance(self._now_ms)  # nothing to stop or correct: release what was held
        self._dispatch(u)
        self._advance(self._now_ms)
        return self._end()

    def on_user_speech(self, active: bool, now_ms: float) -> list[Action]:
        """The user started (True) or stopped (False) speaking (VAD). Careful holds writes
        that fall due from the start of the speech until its text arrives (at most
        ``hold_grace_ms`` after the speech ends)."""
        self._begin(now_ms)
        self._user_active = bool(active)
        self._hold_until = None if active else self._now_ms + self.hold_grace_ms
        return self._end()

    def tick(self, now_ms: float) -> list[Action]:
        """Time passes: tool calls that are due finish and their results are handled."""
        self._begin(now_ms)
        return self._end()

    def on_heard(
        self, response_id: str, heard_ms: float, total_ms: float, now_ms: float
    ) -> list[Action]:
        """The user heard only the first ``heard_ms`` of response ``response_id`` (of
        ``total_ms``). Careful keeps the words heard (per-word timings from
        ``set_word_times`` if given: words that ended by ``heard_ms``; else the same share of
        words as of time); ``keeps_unheard_text`` keeps everything. Emits
        ``history.updated`` (data: action truncate|keep, heard_until_ms, total_ms, text_kept,
        words_kept, words_total, text_full)."""
        self._begin(now_ms)
        entry = next(
            (e for e in self._history if e.role == "assistant" and e.response_id == response_id),
            None,
        )
        if entry is None:
            return self._end()
        words = entry.full.split()
        heard = max(0.0, float(heard_ms))
        cut = total_ms > 0 and heard < total_ms
        action = "keep"
        kept_words = words
        if cut and not self.policy.keeps_unheard_text:
            times = self._word_times.get(response_id)
            if times:
                kept_words = [w for (w, _start, end) in times if end <= heard]
            else:
                kept_words = words[: int(len(words) * heard / total_ms)]
            action = "truncate"
            entry.truncated = True
            for task in self.tasks.values():
                if task.confirm_rid == response_id:
                    task.confirm_heard = False
        entry.text = " ".join(kept_words)
        if cut and heard <= 0:
            for call_id in self._deliveries.pop(response_id, []):
                self.db.clear_delivery(call_id)
        self._event(
            "history.updated",
            {
                "action": action,
                "heard_until_ms": heard,
                "total_ms": float(total_ms),
                "text_kept": entry.text,
                "words_kept": len(kept_words),
                "words_total": len(words),
                "text_full": entry.full,
            },
            task_id=entry.task_id,
            response_id=response_id,
        )
        return self._end()

    def set_word_times(self, response_id: str, words: Sequence[tuple[str, float, float]]) -> None:
        """Per-word timings of a response: (word, start_ms, end_ms) from its start."""
        self._word_times[response_id] = [(str(w), float(s), float(e)) for w, s, e in words]

    def on_playback_started(self, response_id: str, now_ms: float) -> list[Action]:
        """Playback of ``response_id`` began: the results it announces count as delivered now
        (until this is called, the time the Say was returned stands in)."""
        self._begin(now_ms)
        for call_id in self._deliveries.get(response_id, []):
            task_id = self.db.call(call_id).get("task_id")
            task = self.tasks.get(str(task_id))
            self.db.mark_delivered(
                call_id, _ns(self._now_ms), task.version if task else None, response_id
            )
        return self._end()

    def on_connection(self, connected: bool, now_ms: float) -> list[Action]:
        """The link dropped (False) or came back (True). Calls that finish while it is down
        run on the backend but their results are lost; after the reconnect each is retried:
        with the same idempotency key (careful: the backend replays the stored result and
        commits nothing) or a new one (``repeats_side_effects``: the write commits again)."""
        self._begin(now_ms)
        if not connected:
            self._connected = False
            return self._end()
        self._connected = True
        lost, self._lost = self._lost, []
        wrote = False
        for p in lost:
            self._event(
                "tool.failed",
                {
                    "call_id": p.call_id,
                    "tool": p.tool,
                    "arguments": p.arguments,
                    "idempotency_key": p.key,
                    "task_version": p.version,
                    "status": "failed",
                    "error": "result lost: the connection dropped",
                },
                task_id=p.task_id,
                response_id=p.response_id,
            )
            key = p.key
            if p.write and p.compensates is None and self.policy.repeats_side_effects:
                key = f"{p.key}/retry{p.retries + 1}"
            self._request(
                self.tasks[p.task_id],
                p.tool,
                p.arguments,
                key=key,
                version=p.version,
                response_id=p.response_id,
                compensates=p.compensates,
                retries=p.retries + 1,
            )
            wrote = wrote or p.write
        if wrote:
            self._speak(
                "Sorry, we were cut off for a moment. I'm just finishing that for you.", "answer"
            )
        return self._end()

    def export_final_state(self) -> dict[str, Any]:
        """``final-state.json`` (see ``ClinicDB.export_final_state``)."""
        return self.db.export_final_state(exported_ns=_ns(self._now_ms))

    def export_tool_audit(self) -> dict[str, Any]:
        """``tool-audit.json`` of this session (validates as ``task.ToolAudit``)."""
        return self.db.export_tool_audit(self.session_id)

    def snapshot(self) -> dict[str, Any]:
        """The business state without ``_meta`` (for ``session.*`` events' ``data.state``)."""
        state = self.db.export_final_state()
        state.pop("_meta", None)
        return state
