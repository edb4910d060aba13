"""The reference voice agent: a real, local full-duplex agent built from the offline stack.

Ears (``speech.StreamingVAD``: Silero on 32 ms chunks; ``speech.transcribe``: whisper tiny.en),
a turn layer (below), the clinic's dialogue manager (``dialogue.DialogueManager`` on a real
SQLite database, ``db.ClinicDB``), and a voice (``speech.speak``: Piper). It implements the
in-process ``DuplexAgent`` API, so the driver runs it on a virtual clock, and
``reference.server`` serves it over the Realtime protocol.

Turn layer (``Policy`` switches in brackets)
============================================
*Speech* starts when the Silero probability of a chunk reaches 0.5 and ends when it drops
under 0.35 (Silero's own hysteresis). An utterance's *level* is the power mean of its speech
chunks' levels (dBFS); the caller's *reference level* is the median level of the utterances accepted
so far.

- **Bystander gate**: an utterance more than ``BYSTANDER_REL_DB`` (10 dB) under the reference
  level is not the caller; it is ignored (``turn.decision`` ignore) [``answers_bystanders``:
  no gate].
- **Endpointing**: the user's turn ends after ``endpoint_ms`` of silence (careful 700 ms); a
  transcript that ends mid-phrase (a conjunction, preposition, article, "um") waits up to
  ``incomplete_endpoint_ms`` (1500 ms) [``jumps_into_pauses``: 250 ms, no completeness check].
- **Overlap while the agent speaks**: after ``BARGE_IN_MS`` (450 ms) of speech at the caller's
  level the first words so far are read (``speech.first_words``: a short-window Whisper pass): anything but backchannel tokens (or a stop word) is
  a barge-in and the agent stops (``ClearAudio`` + ``response.done`` cancelled); backchannel
  tokens or no words yet ("mm hmm" lasts about half a second) hold the decision until the
  speech ends or reaches ``BACKCHANNEL_MAX_MS`` (1 s, longer than listener tokens), which is a
  barge-in. Speech that ends earlier is transcribed when it ends: a stop word ("stop", "wait")
  or anything that is not a backchannel token stops the agent; a backchannel ("uh-huh") does
  not (``turn.decision`` backchannel). The check costs one short ASR pass (~0.1 s here), which
  a charged-compute run adds to the stop latency (the price of not stopping for every
  "mm hmm"). [``answers_backchannels``: stops once ``ONSET_STOP_MS``
  (150 ms) of overlapping speech at the caller's level is confirmed, and treats a backchannel
  token as a turn; ``ignores_interruptions``: never stops; ``slow_stop_ms``: the stop
  reaches the player that much later.]
- **Transcripts**: an utterance is transcribed piece by piece, split at its inner pauses of
  ``PIECE_PAUSE_MS`` (250 ms) or more, and the pieces' texts joined (each piece once: a
  resumed utterance only adds a piece). Whisper on one stretch with a long silence inside
  drops or garbles words next to it ("my new number is ... 555 0199" lost "new").
- **History**: when the player reports a cut, the dialogue manager keeps only what was heard
  (``history.updated``) [``keeps_unheard_text``].

Speech output: each ``Say`` becomes one response (``response.created`` -> audio streamed at
``STREAM_SPEEDUP`` x real time in 100 ms chunks -> ``response.done``); responses queue, one at a
time.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentBase,
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
    Stamped,
)
from voxassay.reference.policy import Policy
from voxassay.reference.speech import CHUNK

__all__ = ["ReferenceAgent"]

VERSION = "1"
SPEECH_ON = 0.5
SPEECH_OFF = 0.35
BYSTANDER_REL_DB = 10.0
BARGE_IN_MS = 450.0
BACKCHANNEL_MAX_MS = 1000.0
PIECE_PAUSE_MS = 250.0
PIECE_PRE_ROLL_MS = 100.0
ONSET_STOP_MS = 150.0
"""``answers_backchannels`` stops once this much overlapping speech is confirmed: a VAD's
minimum speech duration, which also gives the bystander gate a level to judge. (Stopping at
the first 32 ms chunk made the agent fall silent ~30 ms after the onset, faster than any
system can react: the turn analysis rightly counts such an end as a terminal overlap.)"""
PRE_ROLL_MS = 200.0
CHUNK_MS = 100.0
STREAM_SPEEDUP = 4.0
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
INCOMPLETE_END = re.compile(
    r"\b(and|or|but|so|because|to|on|at|for|the|a|an|my|of|in|with|um|uh|er|like|is)\W*$",
    re.IGNORECASE,
)


@dataclass
class _Utterance:
    uid: str
    start_ms: float
    start_sample: int
    levels: list[float] = field(default_factory=list)
    speech_ms: float = 0.0
    end_ms: float | None = None
    overlap: str | None = None
    """Response that was playing at the onset (an overlap), if any."""
    told_dm: bool = False
    decided: str | None = None
    text: str | None = None
    asr_ms: float = 0.0
    pieces: list[int] = field(default_factory=list)
    """Start samples of the pieces after the first (split at inner pauses)."""
    piece_texts: dict[tuple[int, int], str] = field(default_factory=dict)
    held: bool = False
    """Overlap checked at BARGE_IN_MS and found to be backchannel tokens (or no words)."""


@dataclass
class _Response:
    rid: str
    text: str
    task_id: str | None
    todo: list[str]
    """Sentences not synthesized yet (speech is synthesized a sentence at a time)."""
    audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    words: list[tuple[str, float, float]] = field(default_factory=list)
    sent: int = 0
    created: bool = False
    done: bool = False
    started: bool = False


class ReferenceAgent(AgentBase):
    """See the module docstring. One object serves one session."""

    def __init__(
        self,
        policy: Policy | str = "careful",
        *,
        endpoint_ms: float | None = None,
        incomplete_endpoint_ms: float = 1500.0,
    ) -> None:
        self.policy = Policy.parse(policy) if isinstance(policy, str) else policy
        jumps = self.policy.jumps_into_pauses
        self.endpoint_ms = float(endpoint_ms) if endpoint_ms else (250.0 if jumps else 700.0)
        self.incomplete_ms = self.endpoint_ms if jumps else float(incomplete_endpoint_ms)
        self._memo = False
        from voxassay.reference.speech import warm_up

        warm_up()  # model loading is not the agent's latency

    @staticmethod
    def describe(policy: Policy | str = "careful", **options: Any) -> dict[str, Any]:
        """What the run records about the agent (without loading any model)."""
        p = Policy.parse(policy) if isinstance(policy, str) else policy
        return {
            "backend": "reference",
            "version": VERSION,
            "policy": p.name,
            "switches": p.to_dict(),
            "options": options,
        }

    # -- session --------------------------------------------------------------------------
    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        from voxassay.reference.dialogue import DialogueManager
        from voxassay.reference.speech import StreamingVAD

        self.session = session
        self.sr = session.sample_rate
        # compute not charged: a repeated utterance's text may be reused (same output, no
        # session time either way); charged, every transcription is paid for again
        self._memo = session.compute == "zero"
        if self.sr != 16_000:
            raise ValueError("the reference agent listens at 16 kHz")
        if session.scenario is not None:
            self.dm = DialogueManager.from_scenario(
                session.scenario, self.policy, session.session_id
            )
        else:
            from voxassay.reference.db import ClinicDB

            self.dm = DialogueManager(ClinicDB({}), self.policy, session.session_id)
        self.vad = StreamingVAD()
        self.in_speech = False
        self.silence_ms = 0.0
        self.utt: _Utterance | None = None
        self.n_utt = 0
        self.levels: list[float] = []
        self.heard: list[np.ndarray] = []
        """Every input frame (float32): utterances are cut from it for the ASR."""
        self.queue: deque[_Response] = deque()
        self.current: _Response | None = None
        self.playing: str | None = None
        """Response whose playback the client reported started and not yet ended."""
        self.delayed: list[tuple[float, list[AgentOutput]]] = []
        self.unplayed: list[str] = []
        """Responses sent (at least in part) whose playback has not started."""
        self.totals: dict[str, float] = {}
        self.typed: list[str] = []
        """User text from ``conversation.item.create`` waiting for a ``response.create``."""
        self.n_typed = 0
        self.manual = False
        """Manual turns (``turn_detection: null``): the client commits, then asks."""
        self.committed_from = 0
        """Manual turns: the first sample of the audio not yet committed."""
        self.committed: list[tuple[str, str]] = []
        """Manual turns: (item id, text) of committed audio waiting for a ``response.create``."""
        return []

    def finish(self, now_ns: int) -> SessionEnd:
        from voxassay.reference.speech import speech_versions

        return SessionEnd(
            final_state=self.dm.export_final_state(),
            tool_audit=self.dm.export_tool_audit(),
            info={"policy": self.policy.name, "version": VERSION, **speech_versions()},
        )

    # -- Realtime client items (``reference serve`` calls these hooks) ----------------------
    def on_item(self, item: dict[str, Any], now_ns: int) -> list[AgentOutput]:
        """A conversation item the client created: a user message's text waits for the next
        ``response.create`` (the Realtime protocol answers items only when asked)."""
        if item.get("type") == "message" and item.get("role") == "user":
            for part in item.get("content") or []:
                if not isinstance(part, dict) or part.get("type") not in ("input_text", "text"):
                    continue
                if isinstance(part.get("text"), str):
                    self.typed.append(part["text"])
        return []

    def configure(self, settings: dict[str, Any], now_ns: int) -> list[AgentOutput]:
        """``session.update``: ``turn`` manual (``turn_detection: null``) switches the agent's
        own turn taking off: it answers committed audio when asked, and nothing else."""
        manual = settings.get("turn") == "manual"
        if manual and not self.manual:
            self.committed_from = sum(x.size for x in self.heard)
            self.utt, self.in_speech, self.silence_ms = None, False, 0.0
        self.manual = manual
        return []

    def on_commit(self, item_id: str, now_ns: int) -> list[AgentOutput]:
        """``input_audio_buffer.commit`` with manual turns: the audio since the last commit is
        the user's turn (transcribed now, answered at the next ``response.create``)."""
        if not self.manual:
            return []
        if len(self.heard) > 1:
            self.heard = [np.concatenate(self.heard)]
        end = self.heard[0].size if self.heard else 0
        utt = _Utterance(item_id, now_ns / 1e6, self.committed_from)
        self.committed_from = end
        text = self._transcribe(utt, end)
        self.committed.append((item_id, text))
        return [AgentEvent("asr.final", {"text": text}, utterance_id=item_id)]

    def on_response_request(self, now_ns: int) -> list[AgentOutput]:
        """``response.create``: answer the user text created (and, with manual turns, the
        audio committed) since the last answer; nothing new: nothing to answer here (spoken
        turns under server turn detection are answered by their own endpoint)."""
        if not self.typed and not self.committed:
            return []
        now = now_ns / 1e6
        texts = [t.strip() for _, t in self.committed] + [t.strip() for t in self.typed]
        text = " ".join(t for t in texts if t)
        reason = (
            "response.create after a commit"
            if self.committed
            else ("response.create after a text item")
        )
        if self.committed:
            uid = self.committed[-1][0]
        else:
            self.n_typed += 1
            uid = f"typed-{self.n_typed}"
        self.typed.clear()
        self.committed.clear()
        out: list[AgentOutput] = [
            AgentEvent("turn.decision", {"action": "respond", "reason": reason}, utterance_id=uid)
        ]
        self.answering = uid
        out += self._dm(self.dm.on_user_text(text, uid, now))
        out += self._stream()
        return out

    # -- input ----------------------------------------------------------------------------
    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        now = now_ns / 1e6
        out: list[AgentOutput] = []
        self.heard.append(np.asarray(pcm, dtype=np.float32) / 32768.0)
        for start, prob, level in self.vad.push(pcm):
            if not self.manual:  # manual turns: the client decides where turns end
                out += self._chunk(start, prob, level, now)
        out += self._dm(self.dm.tick(now))
        out += self._release(now)
        out += self._stream()
        return out

    def _chunk(self, start: int, prob: float, level: float, now: float) -> list[AgentOutput]:
        out: list[AgentOutput] = []
        chunk_ms = 32.0
        if not self.in_speech:
            if prob >= SPEECH_ON:
                self.in_speech = True
                pause_ms, self.silence_ms = self.silence_ms, 0.0
                if self.utt is None:
                    out += self._onset(now, start)
                else:
                    # the user resumed after a pause that did not end the turn: a transcript
                    # made during the pause covers only the first part; a long enough pause
                    # starts a new piece (the earlier pieces keep their texts)
                    self.utt.text = None
                    if pause_ms >= PIECE_PAUSE_MS:
                        pre = int(PIECE_PRE_ROLL_MS * self.sr / 1000)
                        self.utt.pieces.append(max(self.utt.start_sample, start - pre))
            elif self.utt is not None:
                self.silence_ms += chunk_ms
                out += self._maybe_endpoint(now)
            return out
        utt = self.utt
        assert utt is not None
        if prob < SPEECH_OFF:
            self.in_speech = False
            self.silence_ms = chunk_ms
            utt.end_ms = now
            return out
        utt.levels.append(level)
        utt.speech_ms += chunk_ms
        if len(utt.levels) == 3 and not utt.told_dm and self._caller(utt):
            utt.told_dm = True
            out += self._dm(self.dm.on_user_speech(True, now))
        if utt.overlap and utt.decided is None and self._overlap_still_playing(utt):
            p = self.policy
            if not p.ignores_interruptions and (self._caller(utt) or p.answers_bystanders):
                if p.answers_backchannels and utt.speech_ms >= ONSET_STOP_MS:
                    utt.decided = "interrupt"
                    out += self._stop(utt, now, "any speech over the agent stops it")
                elif utt.held and utt.speech_ms >= BACKCHANNEL_MAX_MS:
                    utt.decided = "interrupt"
                    out += self._stop(utt, now, "barge-in: speech over the agent")
                elif not utt.held and utt.speech_ms >= BARGE_IN_MS:
                    words = self._first_words(utt, start + CHUNK)
                    if not words.strip() or (
                        self.dm.is_backchannel(words) and not self.dm.is_stop(words)
                    ):
                        utt.held = True
                    else:
                        utt.decided = "interrupt"
                        out += self._stop(utt, now, f"barge-in: words over the agent ({words!r})")
        return out

    def _onset(self, now: float, start: int) -> list[AgentOutput]:
        self.n_utt += 1
        uid = f"u{self.n_utt}"
        speaking = self._speaking()
        pre = int(PRE_ROLL_MS * self.sr / 1000)
        self.utt = _Utterance(uid, now, max(0, start - pre), overlap=speaking)
        return [AgentEvent("vad.speech_started", utterance_id=uid)]

    def _maybe_endpoint(self, now: float) -> list[AgentOutput]:
        utt = self.utt
        assert utt is not None
        if self.silence_ms < self.endpoint_ms:
            return []
        if utt.speech_ms < 64.0:  # a click, not speech
            self.utt = None
            return [
                AgentEvent("vad.speech_stopped", {"discarded": "too short"}, utterance_id=utt.uid)
            ]
        import time

        if utt.text is None:
            t0 = time.perf_counter()
            utt.text = self._transcribe(utt, None)
            utt.asr_ms = (time.perf_counter() - t0) * 1000
        text = utt.text
        if (
            not self.policy.jumps_into_pauses
            and INCOMPLETE_END.search(text)
            and self.silence_ms < self.incomplete_ms
        ):
            return []  # mid-phrase pause: keep listening
        self.utt = None
        return self._final(utt, text, now)

    def _final(self, utt: _Utterance, text: str, now: float) -> list[AgentOutput]:
        # the endpoint was reached at `now` (before the transcription ran). The transcript is
        # not stamped with the measured ASR time: the driver charges the call's compute to the
        # clock (compute "charged") or counts it as zero ("zero": logic-only runs); a stamp of
        # now + asr_ms would bring wall time back into a zero-compute run and, since the link
        # keeps the agent's outputs in order, delay every later output of the call with it.
        out: list[AgentOutput] = [
            Stamped(round(now * 1e6), AgentEvent("vad.speech_stopped", utterance_id=utt.uid)),
            AgentEvent(
                "asr.final", {"text": text, "asr_ms": round(utt.asr_ms, 1)}, utterance_id=utt.uid
            ),
        ]
        caller = self._caller(utt)
        if caller:
            self.levels.append(self._level(utt))
        elif not self.policy.answers_bystanders:
            if utt.told_dm:
                out += self._dm(self.dm.on_user_speech(False, now))
            out.append(
                AgentEvent(
                    "turn.decision",
                    {"action": "ignore", "reason": "below the caller's level (bystander)"},
                    utterance_id=utt.uid,
                )
            )
            return out
        if utt.told_dm:
            out += self._dm(self.dm.on_user_speech(False, now))
        if not text.strip():
            out.append(
                AgentEvent(
                    "turn.decision",
                    {"action": "ignore", "reason": "no words"},
                    utterance_id=utt.uid,
                )
            )
            return out
        overlap = utt.overlap is not None and utt.decided is None
        if overlap and self._overlap_still_playing(utt) and not self.policy.ignores_interruptions:
            if (
                self.dm.is_backchannel(text)
                and not self.dm.is_stop(text)
                and not self.policy.answers_backchannels
            ):
                out.append(
                    AgentEvent(
                        "turn.decision",
                        {"action": "backchannel", "reason": "backchannel token over the agent"},
                        utterance_id=utt.uid,
                    )
                )
                out += self._dm(self.dm.on_user_text(text, utt.uid, now))
                return out
            utt.decided = "interrupt"
            out += self._stop(utt, now, "short stop or question over the agent")
        if self._speaking() and self.policy.ignores_interruptions:
            out.append(
                AgentEvent(
                    "turn.decision",
                    {"action": "continue", "reason": "keeps talking (ignores interruptions)"},
                    utterance_id=utt.uid,
                )
            )
        else:
            out.append(AgentEvent("turn.decision", {"action": "respond"}, utterance_id=utt.uid))
        self.answering = utt.uid
        out += self._dm(self.dm.on_user_text(text, utt.uid, now))
        return out

    def _first_words(self, utt: _Utterance, end: int) -> str:
        """The first words of ``utt`` up to sample ``end`` (the short-window check)."""
        from voxassay.reference.speech import first_words

        if len(self.heard) > 1:
            self.heard = [np.concatenate(self.heard)]
        return first_words(self.heard[0][utt.start_sample : end], memo=self._memo)

    def _transcribe(self, utt: _Utterance, end: int | None) -> str:
        """Text of ``utt`` up to sample ``end`` (None: all heard), piece by piece."""
        from voxassay.reference.speech import transcribe

        if len(self.heard) > 1:
            self.heard = [np.concatenate(self.heard)]
        audio = self.heard[0]
        stop = audio.size if end is None else min(end, audio.size)
        bounds = [utt.start_sample, *[b for b in utt.pieces if b < stop], stop]
        texts = []
        for a, b in itertools.pairwise(bounds):
            key = (a, b)
            if key not in utt.piece_texts:
                utt.piece_texts[key] = transcribe(audio[a:b], memo=self._memo)
            texts.append(utt.piece_texts[key])
        return " ".join(t for t in texts if t).strip()

    # -- helpers: caller level, speaking state ----------------------------------------------
    @staticmethod
    def _level(utt: _Utterance) -> float:
        """Power mean of the speech chunks' levels (dBFS): dominated by the loud syllables,
        like an active speech level."""
        if not utt.levels:
            return -120.0
        power = float(np.mean(10.0 ** (np.asarray(utt.levels) / 10.0)))
        return 10.0 * math.log10(max(power, 1e-12))

    def _caller(self, utt: _Utterance) -> bool:
        if self.policy.answers_bystanders or not self.levels:
            return True
        return self._level(utt) >= statistics.median(self.levels) - BYSTANDER_REL_DB

    def _speaking(self) -> str | None:
        if self.playing:
            return self.playing
        if self.current is not None and self.current.created:
            return self.current.rid
        return None

    def _overlap_still_playing(self, utt: _Utterance) -> bool:
        return utt.overlap is not None and self._speaking() == utt.overlap

    # -- output -----------------------------------------------------------------------------
    def _dm(self, actions: list[Any]) -> list[AgentOutput]:
        from voxassay.reference.dialogue import DeskEvent, Say

        out: list[AgentOutput] = []
        for a in actions:
            if isinstance(a, Say):
                sentences = [x for x in SENTENCE_END.split(a.text.strip()) if x]
                self.queue.append(_Response(a.response_id, a.text, a.task_id, sentences))
            elif isinstance(a, DeskEvent):
                ev = AgentEvent(
                    a.event_type,
                    dict(a.data),
                    response_id=a.response_id,
                    utterance_id=a.utterance_id,
                    task_id=a.task_id,
                )
                out.append(Stamped(round(a.at_ms * 1e6), ev) if a.at_ms is not None else ev)
        return out

    def _stream(self) -> list[AgentOutput]:
        """Send the current response's audio, STREAM_SPEEDUP x faster than real time."""
        out: list[AgentOutput] = []
        if self.current is None and self.queue:
            self.current = self.queue.popleft()
        r = self.current
        if r is None:
            return out
        if not r.created:
            r.created = True
            self.unplayed.append(r.rid)
            out.append(
                AgentEvent(
                    "response.created",
                    {"text": r.text},
                    response_id=r.rid,
                    task_id=r.task_id,
                    utterance_id=getattr(self, "answering", None),
                )
            )
        budget = int(self.session.frame_ms * STREAM_SPEEDUP * self.sr / 1000)  # type: ignore[union-attr]
        step = int(CHUNK_MS * self.sr / 1000)
        if r.sent >= r.audio.size and r.todo:
            self._synthesize_next(r)
        while budget > 0 and r.sent < r.audio.size:
            n = min(step, r.audio.size - r.sent, budget)
            piece = r.audio[r.sent : r.sent + n]
            out.append(
                AudioOut(r.rid, (np.clip(piece, -1, 32767 / 32768) * 32768).astype(np.int16))
            )
            r.sent += n
            budget -= n
        if r.sent >= r.audio.size and not r.todo and not r.done:
            r.done = True
            out.append(AgentEvent("response.done", {"status": "completed"}, response_id=r.rid))
            self.current = None
        return out

    def _synthesize_next(self, r: _Response) -> None:
        """Synthesize the next sentence; word times are spread over it by character count
        (piper gives none)."""
        from voxassay.reference.speech import speak

        sentence = r.todo.pop(0)
        audio = speak(sentence, self.sr)
        offset = r.audio.size * 1000.0 / self.sr
        dur = audio.size * 1000.0 / self.sr
        words = sentence.split()
        if words:
            chars = np.cumsum([len(w) + 1 for w in words], dtype=float)
            ends = offset + chars / chars[-1] * dur
            starts = np.concatenate([[offset], ends[:-1]])
            r.words += list(zip(words, starts.tolist(), ends.tolist(), strict=True))
            self.dm.set_word_times(r.rid, r.words)
        r.audio = np.concatenate([r.audio, audio])
        self.totals[r.rid] = r.audio.size * 1000.0 / self.sr

    def _stop(self, utt: _Utterance, now: float, why: str) -> list[AgentOutput]:
        """Stop speaking (after slow_stop_ms when that switch is set)."""
        rid = self._speaking()
        if rid is None:
            return []
        outs: list[AgentOutput] = [
            AgentEvent(
                "turn.decision",
                {"action": "interrupt", "reason": why},
                utterance_id=utt.uid,
                response_id=rid,
            )
        ]
        # everything sent is dropped from the client's buffer, not only the response playing
        stop: list[AgentOutput] = [
            ClearAudio(None, "user barge-in"),
            AgentEvent("response.done", {"status": "cancelled"}, response_id=rid),
        ]
        for other in [x for x in self.unplayed if x != rid]:
            self.unplayed.remove(other)
            total = self.totals.get(other, 0.0)
            stop += self._dm(self.dm.on_heard(other, 0.0, max(total, 1.0), now))
        dropped = [r for r in self.queue]
        self.queue.clear()
        if self.current is not None:
            # the response being sent stops too, also when it is not the one playing (a
            # follow-up queued behind it at the client): its later chunks would play after
            # the clear, while its history already says nothing of it was heard
            if self.current.rid != rid:
                dropped.insert(0, self.current)
            self.current.done = True
            self.current = None
        for r in dropped:  # queued answers that were never spoken
            stop.append(AgentEvent("response.done", {"status": "cancelled"}, response_id=r.rid))
        self.playing = None if self.playing == rid else self.playing
        if self.policy.slow_stop_ms > 0:
            self.delayed.append((now + self.policy.slow_stop_ms, stop))
            return outs
        return outs + stop

    def _release(self, now: float) -> list[AgentOutput]:
        out: list[AgentOutput] = []
        due = [d for d in self.delayed if d[0] <= now]
        self.delayed = [d for d in self.delayed if d[0] > now]
        for _, outs in due:
            out += outs
        return out

    # -- client reports ---------------------------------------------------------------------
    def on_playback(self, report: PlaybackReport, now_ns: int) -> list[AgentOutput]:
        now = now_ns / 1e6
        if report.response_id in self.unplayed:
            self.unplayed.remove(report.response_id)
        if report.status == "started":
            self.playing = report.response_id
            return self._dm(self.dm.on_playback_started(report.response_id, now))
        if self.playing == report.response_id:
            self.playing = None
        if report.status == "interrupted":
            # total = what was synthesized (a cut response may have unsynthesized sentences)
            r = self.current if self.current and self.current.rid == report.response_id else None
            total = self.totals.get(report.response_id, 0.0)
            if r is None or r.todo or total <= report.played_ms:
                total = max(total, report.played_ms + 1.0)
            return self._dm(self.dm.on_heard(report.response_id, report.played_ms, total, now))
        return []

    def on_connection(self, connected: bool, now_ns: int) -> list[AgentOutput]:
        return self._dm(self.dm.on_connection(connected, now_ns / 1e6))
