"""One STS task: a system's dialogue for one (scenario, mode), answered by a worker.

A :class:`Dialogue` carries the scenario, the mode, the items to answer and the rendered user
turns (their audio travels with the task, so a worker opens no file). A
:class:`DialogueWorker` holds the system, the judge and the slower proxies, built once per
worker (in a Ray actor when the executor is Ray, or once in the driver for threads). It plays
the scenario's earlier turns, answers each item, scores the answer and hands back, per item,
the record and the answer's WAV bytes; the driver alone writes them into the run. The
proxies and the judge score the answer as its WAV file holds it (16-bit PCM, read back at
16 kHz), exactly as they would reading the file.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxassay.core.audio import TARGET_SR, Audio, decode_audio_bytes, wav_bytes
from voxassay.core.errors import VoxassayError
from voxassay.core.executor import CallTimedOut, call_with_timeout
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import utc_now
from voxassay.suites.sts.items import StsItem, StsScenario
from voxassay.suites.sts.scoring import score_reply
from voxassay.systems.converse import HistoryTurn, Mode, Reply, Turn, coerce_reply

__all__ = ["Answer", "Dialogue", "DialogueWorker", "Done", "answer_path", "lost_dialogue"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "system"


def answer_path(key: str, rid: str) -> str:
    """Where an answer's audio goes in the run: ``audio/<system>/<item>#<mode>.wav``."""
    return (Path("audio") / _slug(key) / f"{_slug(rid)}.wav").as_posix()


def earlier_key(scenario: StsScenario, k: int) -> str:
    return f"{scenario.id}.earlier-{k}"


@dataclass
class Dialogue:
    """One task: the earlier turns of ``scenario`` in ``mode``, then ``items`` in order."""

    scenario: StsScenario
    mode: str
    items: list[StsItem]
    turns: dict[str, Turn]
    """The rendered user turns by key: each item's id and ``<scenario>.earlier-<k>``."""


@dataclass
class Answer:
    """One item's record and, when the system spoke, its answer as WAV bytes."""

    record: Record
    wav: bytes | None = None


@dataclass
class Done:
    """What a worker hands back for one dialogue."""

    answers: list[Answer]
    loaded: dict[str, Any] | None = None
    """On a worker's first dialogue: the system's ``describe()`` and ``load_s`` (or its
    ``load_error``), and the judge's description."""

    @property
    def records(self) -> list[Record]:
        return [a.record for a in self.answers]


def lost_dialogue(key: str, dialogue: Dialogue, reason: str) -> Done:
    """Error records for a dialogue whose worker was lost more often than retried."""
    return Done(
        [
            Answer(error_record(f"{it.id}#{dialogue.mode}", key, 0, "worker_lost", reason))
            for it in dialogue.items
        ]
    )


@dataclass
class DialogueWorker:
    """The system, judge and proxies of one worker; :meth:`load` builds them once (a judge
    or proxies already set, shared by the systems of a local run, are kept)."""

    spec: str
    key: str
    timeout: float | None
    judge: str | None = None
    proxies: str = "fast"
    system: Any = field(default=None, init=False)
    rater: Any = field(default=None, init=False)
    extra: Any = field(default=None, init=False)
    load_error: str | None = field(default=None, init=False)
    info: dict[str, Any] | None = field(default=None, init=False)
    _reported: bool = field(default=False, init=False)

    def load(self) -> dict[str, Any]:
        """Build and load the system (a failure is kept as ``load_error``), the judge and
        the proxies; returns what ``run.json`` says of them."""
        if self.info is not None:
            return self.info
        from voxassay.core.registry import REGISTRY

        t0 = time.perf_counter()
        try:
            system = REGISTRY.build("converse", self.spec)
            system.load()
            self.system = system
            self.info = {
                "system_info": dict(system.describe()),
                "load_s": round(time.perf_counter() - t0, 3),
            }
        except VoxassayError as exc:
            self.load_error = str(exc)
            self.info = {"load_error": str(exc)}
            return self.info
        if self.proxies == "all" and self.extra is None:
            from voxassay.suites.sts.scoring import AudioProxies

            self.extra = AudioProxies()
        if self.judge:
            if self.rater is None:
                from voxassay.suites.sts.judge import StsJudge

                self.rater = StsJudge(self.judge)
            self.info["judge"] = self.rater.describe()
        return self.info

    def __call__(self, dialogue: Dialogue) -> Done:
        loaded = self.load()
        first = not self._reported
        self._reported = True
        mode = dialogue.mode
        if self.load_error is not None:
            answers = [
                Answer(error_record(f"{it.id}#{mode}", self.key, 0, "load", self.load_error))
                for it in dialogue.items
            ]
            return Done(answers, loaded if first else None)
        hist = self._history(dialogue)
        answers = []
        for it in dialogue.items:
            rid = f"{it.id}#{mode}"
            started = utc_now()
            if isinstance(hist, str):
                answer = Answer(error_record(rid, self.key, 0, "history", hist))
            else:
                turn = dialogue.turns[it.id]
                answer = self._one(it, turn, hist, mode)  # type: ignore[arg-type]
                self._score_more(answer, it, turn)
            answer.record.started_at, answer.record.ended_at = started, utc_now()
            answers.append(answer)
        return Done(answers, loaded if first else None)

    def _call(
        self, turn: Turn, hist: list[HistoryTurn], mode: str, where: str
    ) -> tuple[Reply, float]:
        t0 = time.perf_counter()
        raw = call_with_timeout(lambda: self.system.converse(turn, list(hist), mode), self.timeout)
        return coerce_reply(raw, where), (time.perf_counter() - t0) * 1000.0

    def _history(self, dialogue: Dialogue) -> list[HistoryTurn] | str:
        """The dialogue before the scenario's items (a reason string when a turn failed)."""
        scenario, mode = dialogue.scenario, dialogue.mode
        hist: list[HistoryTurn] = []
        for k, text in enumerate(scenario.earlier):
            turn = dialogue.turns[earlier_key(scenario, k)]
            try:
                reply, _ = self._call(turn, hist, mode, f"{scenario.id} turn {k}")
            except CallTimedOut:
                return f"earlier turn {k} of {scenario.id} timed out after {self.timeout} s"
            except Exception as exc:
                return f"earlier turn {k} of {scenario.id}: {type(exc).__name__}: {exc}"
            hist.append(HistoryTurn("user", text, turn.audio if mode == "ao" else None, TARGET_SR))
            hist.append(HistoryTurn("assistant", reply.text, reply.audio, reply.sample_rate))
        return hist

    def _one(self, it: StsItem, turn: Turn, hist: list[HistoryTurn], mode: Mode) -> Answer:
        rid, key = f"{it.id}#{mode}", self.key
        try:
            reply, wall_ms = self._call(turn, hist, mode, self.spec)
        except CallTimedOut:
            why = f"no answer within {self.timeout} s"
            return Answer(error_record(rid, key, 0, "timeout", why, "timeout"))
        except VoxassayError as exc:
            return Answer(error_record(rid, key, 0, "output", str(exc)))
        except Exception as exc:  # the system under test raised: recorded, the run goes on
            return Answer(error_record(rid, key, 0, "system", f"{type(exc).__name__}: {exc}"))
        if not reply.text.strip() and reply.audio is None:
            return Answer(error_record(rid, key, 0, "empty", "the system answered nothing"))
        output: dict[str, Any] = {"text": reply.text, "info": _jsonable(reply.info)}
        wav = None
        if reply.audio is not None and reply.sample_rate:
            wav = wav_bytes(Audio(reply.audio, int(reply.sample_rate)))
            output.update(audio_path=answer_path(key, rid), sample_rate=int(reply.sample_rate))
        rec = Record(id=rid, system=key, output=output)
        rec.metrics = score_reply(it, reply, wall_ms)
        rec.timing = {
            "compute_s": round(wall_ms / 1000.0, 4),
            "audio_s": round(reply.duration_s, 3),
        }
        return Answer(rec, wav)

    def _score_more(self, answer: Answer, it: StsItem, turn: Turn) -> None:
        """The slower proxies and the judge, for an answer that came."""
        rec = answer.record
        if rec.status != "ok" or (self.extra is None and self.rater is None):
            return
        heard = None if answer.wav is None else decode_audio_bytes(answer.wav, TARGET_SR)
        if self.extra is not None and heard is not None:
            more = self.extra.score(Reply(rec.output.get("text", ""), heard.samples, heard.sr))
            said = more.pop("answer_heard", None)
            rec.metrics.update(more)
            if said is not None:
                rec.output["answer_heard"] = said
        if self.rater is not None:
            if heard is None:
                rec.output["judge"] = {"spec": self.rater.spec, "score": None,
                                       "status": "unscored",
                                       "reason": "a text-only answer: nothing to hear"}  # fmt: skip
                return
            block = self.rater.rate_answer(it, Audio(turn.audio, turn.sample_rate), heard)
            rec.output["judge"] = block
            if block.get("score") is not None:
                rec.metrics["judge"] = float(block["score"])


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value)
        return value
    except TypeError:
        return json.loads(json.dumps(value, default=str))
