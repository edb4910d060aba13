"""A text-level session for the dialogue manager: scenario truth, VAD, ASR finals and playback
starts on one clock, recorded as ledger events so the real task checks can score the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxassay.contracts.duplex.business import ToolAudit
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.reference.clinic import tool_specs
from voxassay.reference.db import ClinicDB
from voxassay.reference.dialogue import Action, DialogueManager, Say
from voxassay.reference.dialogue import DeskEvent as DMEvent
from voxassay.suites.duplex.scoring.task import score_task
from voxassay.suites.duplex.scoring.task_context import TaskResult

MS = 1_000_000

SEED: dict[str, Any] = {
    "now": "2026-07-20",
    "appointments": [
        {
            "id": "A1",
            "name": "Sam Lee",
            "date": "2026-08-03",
            "time": "10:00",
            "contact": "555 0100",
        }
    ],
    "availability": {
        "2026-08-10": ["09:00", "10:00", "14:30"],
        "2026-08-11": ["09:00", "11:00"],
        "2026-08-12": ["10:00", "14:00", "16:00"],
    },
}
BOOK_TEXT = (
    "I'd like to book a cleaning on August tenth at ten a.m., my name is Sam Lee, "
    "my number is 555 0100"
)


@dataclass
class Turn:
    """A user segment: said from ``start_ms`` for ``dur_ms``; its final text comes ``asr_ms``
    after the speech ends."""

    segment: str
    text: str
    start_ms: float
    dur_ms: float = 1500.0
    asr_ms: float = 300.0
    intents: list[str] = field(default_factory=lambda: ["start"])
    task_action: str | None = None

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.dur_ms


def make_scenario(
    turns: Sequence[Turn],
    truth: dict[str, Any],
    allowed: Sequence[str],
    *,
    sid: str = "ref-test",
    category: str = "tools_background",
    initial_state: dict[str, Any] | None = None,
) -> Scenario:
    return Scenario.model_validate(
        {
            "id": sid,
            "version": 1,
            "category": category,
            "segments": [
                {
                    "id": t.segment,
                    "role": "user",
                    "say": t.text,
                    "voice": "piper",
                    "at_ms": int(t.start_ms),
                    "intents": t.intents,
                    **({"expected_task_action": t.task_action} if t.task_action else {}),
                }
                for t in turns
            ],
            "tools": tool_specs(),
            "business_truth": {
                "expected_final_state": truth,
                "allowed_side_effects": list(allowed),
            },
            "initial_state": initial_state if initial_state is not None else SEED,
        }
    )


class Sim:
    """Drives a DialogueManager through timed user turns, like the audio layer would."""

    def __init__(
        self,
        dm: DialogueManager,
        *,
        vad: bool = True,
        playback_delay_ms: float = 300.0,
        step_ms: float = 20.0,
    ) -> None:
        self.dm = dm
        self.vad = vad
        self.playback_delay_ms = playback_delay_ms
        self.step_ms = step_ms
        self.events: list[Event] = []
        self.says: list[tuple[float, Say]] = []
        self._agenda: list[tuple[float, int, Callable[[float], None]]] = []

    def _add(self, event_type: str, ms: float, producer: str = "agent", **kw: Any) -> None:
        self.events.append(
            Event(
                event_id=f"e{len(self.events) + 1}",
                session_id=self.dm.session_id,
                event_type=event_type,
                producer=producer,
                monotonic_ns=round(ms * MS),
                **kw,
            )
        )

    def at(self, ms: float, fn: Callable[[float], None]) -> None:
        self._agenda.append((ms, len(self._agenda), fn))

    def handle(self, actions: list[Action], now: float) -> None:
        for a in actions:
            if isinstance(a, DMEvent):
                self._add(
                    a.event_type,
                    a.at_ms if a.at_ms is not None else now,
                    task_id=a.task_id,
                    response_id=a.response_id,
                    utterance_id=a.utterance_id,
                    data=a.data,
                )
            else:
                self.says.append((now, a))
                self._add("response.created", now, response_id=a.response_id)
                start = now + self.playback_delay_ms

                def started(t: float, rid: str = a.response_id) -> None:
                    self._add("playback.started", t, producer="player", response_id=rid)
                    self.handle(self.dm.on_playback_started(rid, t), t)

                self.at(start, started)

    def run(self, turns: Sequence[Turn], end_ms: float) -> Sim:
        for turn in turns:
            utt = f"u-{turn.segment}"

            def start(t: float, turn: Turn = turn, utt: str = utt) -> None:
                self._add(
                    "user.speech_started",
                    t,
                    producer="harness",
                    utterance_id=utt,
                    data={"segment_id": turn.segment},
                )
                if self.vad:
                    self.handle(self.dm.on_user_speech(True, t), t)

            def stop(t: float, turn: Turn = turn, utt: str = utt) -> None:
                self._add(
                    "user.speech_stopped",
                    t,
                    producer="harness",
                    utterance_id=utt,
                    data={"segment_id": turn.segment},
                )
                if self.vad:
                    self.handle(self.dm.on_user_speech(False, t), t)

            def final(t: float, turn: Turn = turn, utt: str = utt) -> None:
                self._add("asr.final", t, utterance_id=utt, data={"text": turn.text})
                self.handle(self.dm.on_user_text(turn.text, utt, t), t)

            self.at(turn.start_ms, start)
            self.at(turn.end_ms, stop)
            self.at(turn.end_ms + turn.asr_ms, final)
        t = 0.0
        while t <= end_ms:
            while True:
                due = sorted(x for x in self._agenda if x[0] <= t)
                if not due:
                    break
                item = due[0]
                self._agenda.remove(item)
                item[2](item[0])
            self.handle(self.dm.tick(t), t)
            t += self.step_ms
        return self

    # ------------------------------------------------------------------ results

    def audit(self) -> ToolAudit:
        return ToolAudit.model_validate(self.dm.export_tool_audit())

    def score(self, scenario: Scenario) -> TaskResult:
        return score_task(scenario, self.dm.export_final_state(), self.audit(), self.events)

    def texts(self) -> list[str]:
        return [s.text for _, s in self.says]


def desk(
    policy: str = "careful",
    seed: dict[str, Any] | None = None,
    session_id: str = "s1",
    **options: Any,
) -> DialogueManager:
    return DialogueManager(
        ClinicDB(seed if seed is not None else SEED), policy, session_id, **options
    )
