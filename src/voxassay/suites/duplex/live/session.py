"""One scenario session against an in-process agent on a virtual clock.

The driver plays the scenario's rendered segments into the agent's input as fixed frames,
models the client's playback of the agent's audio (``playback.PlaybackModel``), answers tool
calls from the scenario's tool world, applies the scenario's network faults, and writes every
observation to the ledger on one session clock (``now_ns``, 0 = session start = sample 0 of
``input.wav`` and ``output.wav``).

Schedule
========
A segment with ``at_ms`` starts there. A segment with ``after: {event, ref, offset_ms}`` starts
``offset_ms`` after the first ledger event of type ``event`` that *belongs to* ``ref``: a
``user.*`` event belongs to the segment it names (``data.segment_id``); any other event
belongs to the latest **user** segment that started at or before it (the turn the agent is
answering). Without ``ref`` any event of the type counts. A start in the past (the trigger
came in the frame being sent) moves to the next frame. A trigger that never comes leaves the
segment unplayed; the manifest lists it (``harness.skipped_segments``) with the reason.

Scenario truth: ``user.speech_started`` / ``user.speech_stopped`` for every played segment
(``utterance_id`` = segment id, ``data.segment_id``, ``data.role``, ``data.intents``,
``data.expected_actions``) at the clip's speech edges by construction: the first and last
sample whose centred 5 ms RMS is within 24 dB of the clip's active speech level, over a
-60 dBFS floor (``clip_speech_edges``).

Virtual clock
=============
Frame ``k`` starts at ``k * frame`` samples. The agent handles one call at a time: a call due
at ``t`` (a frame, a playback report, a tool result) starts at ``max(t, agent_free)``; with
``compute="charged"`` (default) it takes its measured wall time ``c`` and its outputs are
stamped ``start + c`` (``agent_free = start + c``); with ``compute="zero"`` they are stamped
``start``. Outputs enter a time-ordered queue and take effect at their stamp: ``AgentEvent``
-> ledger (producer ``agent``); ``AudioOut`` -> the player, plus a ``tts.chunk`` ledger event
(producer ``harness``: the client received it); ``ClearAudio``, ``response.cancelled`` and
``response.done`` with status ``cancelled`` -> the player drops that response's audio;
``response.done`` -> the response's audio is complete; ``ToolCall`` -> ``tool.requested``,
and after the tool's latency ``tool.completed`` / ``tool.failed`` and the agent's
``on_tool_result``. Player events go to the ledger (producer ``player``) and ``started`` /
``interrupted`` / ``completed`` are reported to the agent (``on_playback``; for an
interruption ``played_ms`` is what the user heard, as Realtime's truncate ``audio_end_ms``).

End
===
The session ends when every segment was played or skipped, nothing is queued, the player is
idle and the agent produced nothing for ``tail_ms`` (while a trigger still waits: for
``trigger_timeout_ms``), or at the hard cap ``max_session_ms``.

Sound loop and echo
===================
With a ``loop`` (real clock only) every chunk of agent audio is also handed to a real player
as it is received and every cut is that player's flush; the model still renders the
received track (``received.wav``), and the runner replaces ``output.wav`` by the capture
(``live.loop``). A scenario with ``echo_db`` gives the agent's microphone an echo path: each
frame sent carries the played audio of the frame before (the capture with a loop, else the
model's track) at ``echo_db``; it is part of ``input.wav`` too, as the agent heard it.

Faults (scenario ``faults``, seeded)
====================================
``delay`` / ``jitter`` add a one-way delay to frames (uplink) and outputs (downlink), the order
kept; ``loss`` replaces lost uplink frames by silence (what packet-loss concealment yields)
and drops lost downlink audio chunks; ``disconnect`` drops everything both ways for its
duration, logs ``session.disconnected`` / ``session.resumed`` (``timed_by: scenario``: the
outage's length is the scenario's, so ``reconnect_recovery_ms`` does not pair them) and tells
the agent (``on_connection``); ``backlog`` adds ``backlog_ms`` to the player's output delay. Each fault
logs ``fault.started`` / ``fault.ended`` with its parameters. A link that impairs the real
network path (``applies_faults``: the kinds it applies, e.g. WebRTC through ``impair.py``'s
relay) is told when each window opens (``on_fault_window(i, start_ms)``) and those kinds are
not modelled here too.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    FRAME_MS,
    SAMPLE_RATE,
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    DuplexAgent,
    PlaybackReport,
    SessionEnd,
    SessionInfo,
    Stamped,
    ToolCall,
)
from voxassay.contracts.duplex.event import ClockKind, Event, ProducerClock
from voxassay.contracts.duplex.scenario import Scenario, Segment
from voxassay.contracts.duplex.vocabulary import Role, Route
from voxassay.suites.duplex.live.fault_model import FaultModel
from voxassay.suites.duplex.live.playback import PlaybackEvent, PlaybackModel
from voxassay.suites.duplex.live.tool_world import ToolWorld

__all__ = [
    "SessionConfig",
    "SessionResult",
    "ToolWorld",
    "clip_speech_edges",
    "run_session",
    "run_virtual_session",
]

PRODUCERS = ("harness", "agent", "player")


class PlayerLoop(Protocol):
    """A real player beside the playback model (``systems.duplex.sound_loop.SoundLoop``)."""

    def play(self, pcm: np.ndarray) -> None: ...

    def flush(self) -> None: ...

    def heard(self, t_ns: int, n: int) -> np.ndarray: ...


EDGE_REL_DB = -24.0
FLOOR_DBFS = -60.0


@dataclass(frozen=True)
class SessionConfig:
    """Knobs of one session (recorded in the bundle manifest)."""

    sample_rate: int = SAMPLE_RATE
    frame_ms: int = FRAME_MS
    clock: Literal["virtual", "real"] = "virtual"
    """real: frames are paced by the monotonic clock and outputs stamped when they happen."""
    compute: Literal["charged", "zero"] = "charged"
    route: str = "direct"
    device_delay_ms: float = 0.0
    progress_ms: float = 1000.0
    tail_ms: float = 2500.0
    trigger_timeout_ms: float = 15_000.0
    max_session_ms: float = 180_000.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.frame_ms not in (10, 20):
            raise ValueError(f"frame_ms must be 10 or 20, got {self.frame_ms}")


@dataclass
class SessionResult:
    """Everything a bundle needs from one session."""

    session_id: str
    scenario: Scenario
    input: np.ndarray
    output: np.ndarray
    sample_rate: int
    events: list[Event]
    end: SessionEnd
    tool_audit: dict[str, Any]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    route: str = "direct"
    origin_ns: int = 0
    """Monotonic time of session time 0 (real clock; a sound loop's capture is placed by it)."""


# --------------------------------------------------------------------------- truth edges


def clip_speech_edges(x: np.ndarray, sr: int) -> tuple[int, int] | None:
    """First and last sample of speech in a clean clip, by construction.

    Active level = mean power of the 10 ms frames within 35 dB of the loudest frame;
    threshold = max(active - 24 dB, -60 dBFS); the edges are the first and last sample whose
    centred 5 ms RMS reaches the threshold (end exclusive). None: nothing above the floor.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return None
    frame = max(1, sr // 100)
    n = x.size // frame
    if n == 0:
        return None
    p = np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1)
    loud = float(p.max())
    if loud <= 0:
        return None
    active = float(np.mean(p[p >= loud * 10 ** (-35 / 10)]))
    thr_db = max(10 * math.log10(active) + EDGE_REL_DB, FLOOR_DBFS)
    thr = 10 ** (thr_db / 10)
    win = max(1, round(0.005 * sr))
    c = np.concatenate(([0.0], np.cumsum(x * x)))
    half = win // 2
    lo = np.clip(np.arange(x.size) - half, 0, x.size)
    hi = np.clip(np.arange(x.size) - half + win, 0, x.size)
    rms = (c[hi] - c[lo]) / np.maximum(hi - lo, 1)
    above = np.flatnonzero(rms >= thr)
    if above.size == 0:
        return None
    return int(above[0]), int(above[-1]) + 1


# --------------------------------------------------------------------------- the session


@dataclass
class _Scheduled:
    seg: Segment
    start: int
    audio: np.ndarray
    edges: tuple[int, int] | None


class _Session:
    def __init__(
        self,
        scenario: Scenario,
        clips: Mapping[str, np.ndarray],
        agent: DuplexAgent,
        config: SessionConfig,
        session_id: str,
        loop: PlayerLoop | None = None,
    ) -> None:
        self.sc = scenario
        self.loop = loop
        self.echo_gain = 0.0 if scenario.echo_db is None else 10 ** (scenario.echo_db / 20)
        self.clips = clips
        self.agent = agent
        self.cfg = config
        self.sid = session_id
        self.sr = config.sample_rate
        self.frame = self.sr * config.frame_ms // 1000
        self.player = PlaybackModel(
            self.sr, device_delay_ms=config.device_delay_ms, progress_ms=config.progress_ms
        )
        self.tools = ToolWorld(scenario, session_id)
        real: frozenset[str] = frozenset(getattr(agent, "applies_faults", ()))
        self.link = FaultModel(list(scenario.faults), config.seed, frozenset(real))
        self.events: list[Event] = []
        self.route = config.route  # a link that measures its route replaces it (after start)
        self.seq = itertools.count()
        self.queue: list[tuple[int, int, str, Any]] = []
        self.agent_free = 0
        self.last_activity = 0
        self.input = np.zeros(0, np.float32)
        self.scheduled: list[_Scheduled] = []
        self.pending = [s for s in scenario.segments if s.at_ms is None]
        self.skipped: list[dict[str, Any]] = []
        self.fault_open: dict[int, bool] = {}
        self.was_connected = True
        self.compute_s = 0.0
        self.calls = 0
        self.next_frame = 0
        self.dead: str | None = None
        self.start_failure: tuple[str, str] | None = None
        """(kind, reason) of the first ``session.error`` the agent's transport logged for a
        connection or configuration that failed (kinds ``connect``, ``config``)."""
        self.took_part = False
        """The agent produced something other than an error."""
        self.no_agent: dict[str, str] | None = None
        """Why no agent took part, when none did (``stats["no_agent"]``)."""
        self.t_start = time.monotonic_ns()
        self.pacing: list[float] = []
        self.skipped_late = 0
        for seg in scenario.segments:
            if seg.at_ms is not None:
                self._schedule(seg, self._sample(seg.at_ms * 1_000_000))

    # -- time ----------------------------------------------------------------------------------
    def _real_now(self) -> int:
        return time.monotonic_ns() - self.t_start

    def _pace(self, nominal_ns: int) -> None:
        """Real clock: wait for the frame's deadline, then record how late it is sent.

        An agent with ``poll(now_ns)`` (a socket link) is polled about every millisecond while
        waiting, so what it received is handled at its receipt time, not at the next frame."""
        deadline = self.t_start + nominal_ns
        poll = getattr(self.agent, "poll", None)
        while True:
            left = deadline - time.monotonic_ns()
            if left <= 0:
                break
            if poll is not None and self.dead is None:
                self._call(self._real_now(), poll)
                self._drain_queue(self._real_now())
                left = deadline - time.monotonic_ns()
                if left > 0:
                    time.sleep(min(left, 1_000_000) / 1e9)
            elif left > 2_000_000:
                time.sleep((left - 1_500_000) / 1e9)
            else:
                time.sleep(0)  # the last ~2 ms: yield, then check again
        self.pacing.append((time.monotonic_ns() - deadline) / 1e6)

    def _drain_queue(self, now_ns: int) -> None:
        """Handle everything queued up to ``now_ns``, each at its own time."""
        while self.queue and self.queue[0][0] <= now_ns:
            ns, _, kind, payload = heapq.heappop(self.queue)
            self._render(self._sample(ns))
            self._handle(ns, kind, payload)

    def _ns(self, sample: int) -> int:
        return sample * 1_000_000_000 // self.sr

    def _sample(self, ns: int) -> int:
        return -(-ns * self.sr // 1_000_000_000)

    # -- ledger --------------------------------------------------------------------------------
    def log(self, event_type: str, ns: int, producer: str = "harness", **fields: Any) -> Event:
        ev = Event.new(
            event_type,
            session_id=self.sid,
            producer=producer,
            monotonic_ns=ns,
            seq=next(self.seq),
            route=self.route,
            **{k: v for k, v in fields.items() if v is not None},
        )
        self.events.append(ev)
        self._check_triggers(ev, ns)
        return ev

    # -- schedule ------------------------------------------------------------------------------
    def _schedule(self, seg: Segment, start: int) -> None:
        audio = np.asarray(self.clips[seg.id], dtype=np.float32).reshape(-1)
        edges = clip_speech_edges(audio, self.sr)
        end = start + audio.size
        if end > self.input.size:
            self.input = np.concatenate([self.input, np.zeros(end - self.input.size, np.float32)])
        self.input[start:end] += audio
        item = _Scheduled(seg, start, audio, edges)
        self.scheduled.append(item)
        data = {
            "segment_id": seg.id,
            "role": str(seg.role),
            "intents": [str(i) for i in seg.intents],
            "expected_actions": [str(a) for a in seg.expected_actions],
        }
        if edges is None:
            self.skipped.append({"segment": seg.id, "reason": "the clip is silent"})
            return
        a, b = edges
        self._push(self._ns(start + a), "truth", ("user.speech_started", seg.id, data))
        self._push(self._ns(start + b), "truth", ("user.speech_stopped", seg.id, data))

    def _belongs(self, ev: Event, ref: str | None, ns: int) -> bool:
        if ref is None:
            return True
        if ev.event_type.startswith("user."):
            return ev.data.get("segment_id") == ref
        latest = None
        for s in self.scheduled:
            later = latest is None or s.start >= latest.start
            if s.seg.role is Role.USER and self._ns(s.start) <= ns and later:
                latest = s
        return latest is not None and latest.seg.id == ref

    def _check_triggers(self, ev: Event, ns: int) -> None:
        for seg in list(self.pending):
            trig = seg.after
            assert trig is not None
            if trig.event == ev.event_type and self._belongs(ev, trig.ref, ns):
                self.pending.remove(seg)
                start = max(self._sample(ns + trig.offset_ms * 1_000_000), self.next_frame)
                self._schedule(seg, start)
        for i, f in enumerate(self.link.faults):
            fires = f.after is not None and f.after.event == ev.event_type
            if (
                f.after
                and fires
                and i not in self.link.windows
                and self._belongs(ev, f.after.ref, ns)
            ):
                self.link.open(i, (ns + f.after.offset_ms * 1_000_000) / 1e6)
                self._tell_window(i, self.link.windows[i][0])

    # -- queue ---------------------------------------------------------------------------------
    def _push(self, ns: int, kind: str, payload: Any) -> None:
        heapq.heappush(self.queue, (ns, next(self.seq), kind, payload))

    def _call(self, due_ns: int, fn: Callable[[int], list[AgentOutput]]) -> None:
        """Run one agent call at ``max(due, agent_free)`` and queue its outputs."""
        real = self.cfg.clock == "real"
        start = max(due_ns, self.agent_free) if not real else max(due_ns, self._real_now())
        if self.dead is not None:
            return  # the agent crashed: nothing reaches it any more
        t0 = time.perf_counter()
        try:
            outputs = fn(start)
        except Exception as exc:  # a crashing agent is evidence, not our crash
            self.dead = f"{type(exc).__name__}: {exc}"
            self.log("session.error", start, reason="agent raised", data={"error": self.dead})
            return
        spent = time.perf_counter() - t0
        self.compute_s += spent
        self.calls += 1
        if real:
            done = self._real_now()
        else:
            done = start + (round(spent * 1e9) if self.cfg.compute == "charged" else 0)
        self.agent_free = done
        for out in outputs or []:
            at = done
            if isinstance(out, Stamped):
                at, out = out.ns, out.output
                if isinstance(out, AudioOut | ClearAudio) or _cancels(out):
                    at = max(at, self._ns(self.player.pos))  # the player cannot act in the past
            delay = self.link.transit_ms(at / 1e6, "downlink")
            if delay is None:
                if isinstance(out, AudioOut):
                    continue  # lost audio
                if not self.link.connected(done / 1e6):
                    continue  # nothing crosses a dropped link
                delay = 0.0
            self._push(at + round(delay * 1e6), "out", out)

    # -- handling ------------------------------------------------------------------------------
    def _handle(self, ns: int, kind: str, payload: Any) -> None:
        if kind == "truth":
            etype, seg_id, data = payload
            self.log(etype, ns, utterance_id=seg_id, data=dict(data))
        elif kind == "out":
            self.last_activity = ns
            self._output(ns, payload)
        elif kind == "tool":
            call, requested = payload
            result, error = self.tools.answer(call, requested, ns)
            self.log(
                "tool.failed" if error else "tool.completed",
                ns,
                task_id=call.task_id,
                response_id=call.response_id,
                reason=error,
                data={"call_id": call.call_id, "tool": call.name, "result": result},
            )
            self._call(ns, lambda t: self.agent.on_tool_result(call.call_id, result, error, t))

    def _no_agent(self, now: int) -> bool:
        """The agent has taken no part and cannot: it raised before any call returned
        (``kind`` raised), or its transport could not connect or start (``connect``,
        ``config``) and it produced nothing else. The session ends (logged) and says why in
        ``no_agent``; the runner records it as an error, never a score."""
        if self.dead is not None and self.calls == 0:
            self.no_agent = {"kind": "raised", "reason": self.dead}
        elif self.start_failure is not None and not self.took_part:
            kind, reason = self.start_failure
            self.no_agent = {"kind": kind, "reason": reason}
        if self.no_agent is not None:
            self.log(
                "session.error",
                now,
                reason="no agent took part: the session ended early",
                data={"kind": "no_agent"},
            )
        return self.no_agent is not None

    def _output(self, ns: int, out: AgentOutput) -> None:
        if isinstance(out, AgentEvent) and out.event_type == "session.error":
            kind = str(out.data.get("kind"))
            if kind in ("connect", "config") and self.start_failure is None:
                self.start_failure = (kind, str(out.reason or ""))
        else:
            self.took_part = True
        sample = self._sample(ns)
        if isinstance(out, AudioOut):
            self._render(sample)
            self.player.delay = round(
                (self.cfg.device_delay_ms + self.link.backlog_ms(ns / 1e6)) * self.sr / 1000
            )
            self.player.enqueue(out.response_id, out.pcm, sample)
            if self.loop is not None:
                self.loop.play(np.asarray(out.pcm))
            n = int(np.asarray(out.pcm).size)
            self.log(
                "tts.chunk",
                ns,
                response_id=out.response_id,
                data={"samples": n, "ms": round(n * 1000 / self.sr, 3)},
            )
        elif isinstance(out, ClearAudio):
            self._cut(out.response_id, sample)
        elif isinstance(out, ToolCall):
            self.log(
                "tool.requested",
                ns,
                producer="agent",
                task_id=out.task_id,
                response_id=out.response_id,
                data={
                    "call_id": out.call_id,
                    "tool": out.name,
                    "arguments": out.arguments,
                    "idempotency_key": out.idempotency_key,
                    "task_version": out.task_version,
                },
            )
            lat = self.tools.latency_ms(out)
            self._push(ns + round(lat * 1e6), "tool", (out, ns))
        elif isinstance(out, AgentEvent):
            if _cancels(out):  # the cut is logged before the event it caused (causal order)
                cut = self._cut(out.response_id, sample)
                ns = max([ns, *(self._ns(pe.sample) for pe in cut)])
            self._clock(out.producer)
            self.log(
                out.event_type,
                ns,
                producer=out.producer,
                response_id=out.response_id,
                utterance_id=out.utterance_id,
                task_id=out.task_id,
                playback_id=out.playback_id,
                reason=out.reason,
                data=dict(out.data),
            )
            if out.event_type == "response.done" and out.response_id:
                self.player.mark_done(out.response_id)
                self._render(sample)
                self._player_events(self.player.flush_done())

    def _tell_window(self, i: int, start_ms: float) -> None:
        """A link that impairs the real path learns when a fault's window opens."""
        hook = getattr(self.agent, "on_fault_window", None)
        if callable(hook):
            hook(i, start_ms)

    def _observed_route(self) -> None:
        """A link that knows the network route it took (WebRTC: the nominated ICE pair) sets
        the session's route, for the events already logged too: the route is measured, never
        copied from a label."""
        observed = getattr(self.agent, "observed_route", None)
        if observed not in ("direct", "relay") or observed == self.route:
            return
        self.route = observed
        self.events = [e.model_copy(update={"route": Route(observed)}) for e in self.events]

    def _clock(self, producer: str) -> None:
        """A producer's clock record, written when it first appears (a link's ``transport``
        events: the link says how its stamps map to the session clock)."""
        if producer in self.clocked:
            return
        self.clocked.add(producer)
        describe = getattr(self.agent, "producer_clock", None)
        clock = describe(producer) if callable(describe) else None
        if not isinstance(clock, ProducerClock):
            clock = ProducerClock(
                producer=producer,
                kind=ClockKind.MONOTONIC if self.cfg.clock == "real" else ClockKind.VIRTUAL,
                method="stamped by the agent on the session clock (not stated further)",
            )
        self.events.append(clock.to_event(self.sid, 0))

    def _cut(self, response_id: str | None, sample: int) -> list[PlaybackEvent]:
        """Drop a response's audio at the player (the model; the loop's player flushes)."""
        busy = self.player.busy()
        cut = self.player.clear(response_id, sample)
        if self.loop is not None and busy:
            self.loop.flush()
        self._player_events(cut)
        return cut

    def _echo(self, t0: int) -> np.ndarray | None:
        """The agent's own playback in its microphone for the frame at ``t0``: the played
        audio of the frame before (the capture with a loop, else the model's track) at
        ``echo_db``; None without an echo path."""
        if not self.echo_gain or t0 < self.frame:
            return None
        if self.loop is not None:
            heard = self.loop.heard(self.t_start + self._ns(t0 - self.frame), self.frame)
        else:
            track = self.player.track()
            heard = np.zeros(self.frame, np.float32)
            part = track[t0 - self.frame : t0]
            heard[: part.size] = part
        return np.asarray(heard, np.float32) * self.echo_gain

    def _render(self, sample: int) -> None:
        self._player_events(self.player.advance_to(sample))

    def _player_events(self, evs: list[PlaybackEvent]) -> None:
        for pe in evs:
            ns = self._ns(pe.sample)
            self.last_activity = max(self.last_activity, ns)
            etype = pe.event_type
            self.log(
                etype,
                ns,
                producer="player",
                response_id=pe.response_id,
                playback_id=pe.playback_id,
                played_until_ms=pe.played_ms if etype == "playback.interrupted" else None,
                reason=pe.data.get("reason"),
                data=dict(pe.data),
            )
            status = etype.split(".", 1)[1]
            if status in ("started", "interrupted", "completed"):
                report = PlaybackReport(pe.response_id, status, pe.played_ms)  # type: ignore[arg-type]
                self._call(ns, partial(self.agent.on_playback, report))

    # -- faults bookkeeping --------------------------------------------------------------------
    def _faults(self, ns: int) -> None:
        t_ms = ns / 1e6
        for i, (a, b) in self.link.windows.items():
            f = self.link.faults[i]
            state = self.fault_open.get(i)
            if state is None and a <= t_ms:
                self.fault_open[i] = True
                params = f.model_dump(mode="json", exclude_none=True, exclude={"after"})
                self.log("fault.started", round(a * 1e6), data=params)
            if state is True and b <= t_ms:
                self.fault_open[i] = False
                self.log("fault.ended", round(b * 1e6), data={"kind": str(f.kind)})
        connected = self.link.connected(t_ms)
        if connected != self.was_connected:
            self.was_connected = connected
            self.log(
                "session.resumed" if connected else "session.disconnected",
                ns,
                reason="fault" if not connected else "reconnected",
                data={"timed_by": "scenario"},
            )
            self._call(ns, partial(self.agent.on_connection, connected))

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> SessionResult:
        info = SessionInfo(
            session_id=self.sid,
            sample_rate=self.sr,
            frame_ms=self.cfg.frame_ms,
            scenario=self.sc,
            clock=self.cfg.clock,
            route=self.cfg.route,
            compute=self.cfg.compute if self.cfg.clock == "virtual" else None,
            seed=self.cfg.seed,
        )
        for p in PRODUCERS:
            real = self.cfg.clock == "real"
            clock = ProducerClock(
                producer=p,
                kind=ClockKind.MONOTONIC if real else ClockKind.VIRTUAL,
                offset_ns=0,
                method="one monotonic clock, origin = session start"
                if real
                else "shared virtual clock",
            )
            self.events.append(clock.to_event(self.sid, 0))
        self.clocked = set(PRODUCERS)
        self.t_start = time.monotonic_ns()
        self.log(
            "session.connected",
            0,
            data={"clock": self.cfg.clock, "compute": self.cfg.compute},
        )
        self._call(0, lambda t: self.agent.start(info, t))
        self._observed_route()
        for i, (a, _) in sorted(self.link.windows.items()):
            self._tell_window(i, a)
        cap = self._sample(round(self.cfg.max_session_ms * 1e6))
        k = 0
        while True:
            t0 = k * self.frame
            self.next_frame = t0 + self.frame
            now = self._ns(t0)
            if self.cfg.clock == "real":
                # wait for the deadline *before* rendering the player to it: rendered ahead of
                # the real clock, it would hold audio received while we wait until ``t0``
                self._pace(now)
            self._faults(now)
            self._drain_queue(now)
            self._render(t0)
            if self._finished(t0) or t0 >= cap or self._no_agent(now):
                break
            end = t0 + self.frame
            frame = np.zeros(self.frame, np.float32)
            echo = self._echo(t0)
            if echo is not None:
                if end > self.input.size:
                    grow = np.zeros(end - self.input.size, np.float32)
                    self.input = np.concatenate([self.input, grow])
                self.input[t0:end] += echo
            if t0 < self.input.size:
                part = self.input[t0 : min(end, self.input.size)]
                frame[: part.size] = part
            delay = self.link.transit_ms(now / 1e6, "uplink")
            if delay is None:
                if self.link.connected(now / 1e6):  # lost: concealed as silence
                    pcm = np.zeros(self.frame, np.int16)
                    self._call(now, partial(self.agent.push_audio, pcm))
            else:
                pcm = _to_int16(frame)
                due = now + round(delay * 1e6)
                self._call(due, partial(self.agent.push_audio, pcm))
            k += 1
        end_ns = self._ns(self.player.pos)
        for seg in self.pending:
            self.skipped.append(
                {
                    "segment": seg.id,
                    "reason": f"trigger {seg.after.event if seg.after else '?'} "
                    f"(ref {seg.after.ref if seg.after else None}) never came",
                }
            )
        tick = time.perf_counter()
        session_end = SessionEnd(info={"crashed": self.dead}) if self.dead else None
        if session_end is None:
            try:
                session_end = self.agent.finish(end_ns)
            except Exception as exc:  # as in _call
                self.log(
                    "session.error",
                    end_ns,
                    reason="agent raised in finish",
                    data={"error": f"{type(exc).__name__}: {exc}"},
                )
                session_end = SessionEnd()
        self.compute_s += time.perf_counter() - tick
        self._late_events(session_end.events, end_ns)
        n = self.player.pos
        inp = np.zeros(n, np.float32)
        m = min(n, self.input.size)
        inp[:m] = self.input[:m]
        audit = session_end.tool_audit or self.tools.audit()
        return SessionResult(
            session_id=self.sid,
            scenario=self.sc,
            input=np.clip(inp, -1.0, 1.0),
            output=np.clip(self.player.track()[:n], -1.0, 1.0),
            sample_rate=self.sr,
            events=self.events,
            end=session_end,
            tool_audit=audit,
            skipped=self.skipped,
            route=self.route,
            origin_ns=self.t_start,
            stats={
                "duration_s": round(n / self.sr, 3),
                "agent_calls": self.calls,
                "agent_compute_s": round(self.compute_s, 4),
                "compute": self.cfg.compute if self.cfg.clock == "virtual" else "real",
                "clock": self.cfg.clock,
                **({"no_agent": self.no_agent} if self.no_agent else {}),
                **({"pacing_error_ms": _pacing_summary(self.pacing)} if self.pacing else {}),
                **({"late_events_outside": self.skipped_late} if self.skipped_late else {}),
            },
        )

    def _late_events(self, events: list[Stamped], end_ns: int) -> None:
        """Events an agent reports at the end (``SessionEnd.events``), at their own times;
        those outside the session are counted (``late_events_outside``), not logged."""
        outside = 0
        for st in events:
            out = st.output
            if not isinstance(out, AgentEvent):
                continue
            if not 0 <= st.ns <= end_ns:
                outside += 1
                continue
            self._clock(out.producer)
            self.log(
                out.event_type,
                st.ns,
                producer=out.producer,
                response_id=out.response_id,
                utterance_id=out.utterance_id,
                reason=out.reason,
                data=dict(out.data),
            )
        if outside:
            self.skipped_late = outside

    def _finished(self, t0: int) -> bool:
        now = self._ns(t0)
        if self.queue or self.player.busy():
            return False
        last_input = max((s.start + s.audio.size for s in self.scheduled), default=0)
        if t0 < last_input:
            return False
        quiet = now - max(self.last_activity, self._ns(last_input))
        if self.pending:
            return quiet >= self.cfg.trigger_timeout_ms * 1e6
        return quiet >= self.cfg.tail_ms * 1e6


def _pacing_summary(errors: list[float]) -> dict[str, float]:
    """Frame send lateness vs the monotonic deadline: median, P99, max (ms), n."""
    a = np.asarray(errors)
    return {
        "median": round(float(np.median(a)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "max": round(float(a.max()), 3),
        "n": int(a.size),
    }


def _to_int16(x: np.ndarray) -> np.ndarray:
    return (np.clip(x, -1.0, 32767 / 32768) * 32768.0).round().astype(np.int16)


def run_session(
    scenario: Scenario,
    clips: Mapping[str, np.ndarray],
    agent: DuplexAgent,
    config: SessionConfig | None = None,
    session_id: str | None = None,
    loop: PlayerLoop | None = None,
) -> SessionResult:
    """Run ``scenario`` (segment audio in ``clips``, float32 at ``config.sample_rate``)
    against ``agent`` on the session's clock (virtual by default); see the module docstring.
    ``loop``: a real player the agent's audio is also handed to (real clock only)."""
    cfg = config or SessionConfig()
    if loop is not None and cfg.clock != "real":
        raise ValueError("a sound loop runs on the real clock only")
    missing = [s.id for s in scenario.segments if s.id not in clips]
    if missing:
        raise ValueError(f"no rendered audio for segment(s) {', '.join(missing)}")
    sid = session_id or f"{scenario.id}-{uuid.uuid4().hex[:8]}"
    return _Session(scenario, clips, agent, cfg, sid, loop).run()


run_virtual_session = run_session
"""Alias kept for readability in tests of the virtual clock."""


def _cancels(out: object) -> bool:
    """An agent event that cancels a response (its playback is cut at once)."""
    return isinstance(out, AgentEvent) and (
        out.event_type == "response.cancelled"
        or (out.event_type == "response.done" and out.data.get("status") == "cancelled")
    )
