"""The client's player, modelled sample by sample: what the user actually heard, and when.

Agent audio arrives in chunks (``enqueue``) and enters a playback buffer that drains at real
time into the output track (``output.wav``, on the same timeline as ``input.wav``). Rules:

- A response's audio starts at ``max(arrival + device delay, end of what is already queued)``:
  an idle player starts a chunk the moment it arrives (plus ``device_delay_ms``, the output
  latency of a real device: 0 by default); a busy one plays it after what is queued.
- ``advance_to(t)`` renders the track up to ``t`` and returns the ``playback.*`` events that
  happened on the way, each at its exact sample time: ``playback.started`` (first sample of a
  response), ``playback.progress`` (every ``progress_ms`` of played audio, with
  ``data.played_ms``), ``playback.completed`` (the buffer ran dry after the agent said the
  response's audio was complete, ``mark_done``); a buffer that runs dry before that is an
  *underrun* (counted in ``data.underruns`` of the response's last event, nothing is played
  meanwhile and playback continues when audio comes; the silent time of the underruns that
  ended before that event is its ``data.stalled_ms``, so wall time minus ``stalled_ms`` is the
  response audio the user heard).
- ``clear(response_id, t)`` drops what is buffered (all, or that response's): a response cut
  before its end gives ``playback.interrupted`` with ``played_until_ms`` = the milliseconds
  of it that were played; the cut is hard (no fade), so the acoustic stop is at ``t``.

``played_ms`` always counts samples written to the track, never what was merely received.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["PlaybackEvent", "PlaybackModel"]


@dataclass(frozen=True)
class PlaybackEvent:
    """One ``playback.*`` event at a sample position of the output track."""

    event_type: str
    response_id: str
    sample: int
    played_ms: float
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def playback_id(self) -> str:
        return playback_id(self.response_id)


def playback_id(response_id: str) -> str:
    """The playback id the model gives a response's audio."""
    return f"pb-{response_id}"


@dataclass
class _Response:
    response_id: str
    received: int = 0
    played: int = 0
    started: bool = False
    done: bool = False
    finished: bool = False
    next_progress: int = 0
    underruns: int = 0
    starving: bool = False
    stall_since: int = 0
    stalled: int = 0
    """Samples of silence inside the response while it starved (underruns that ended)."""


class PlaybackModel:
    """Sample-accurate playback buffer (see the module docstring)."""

    def __init__(
        self,
        sample_rate: int,
        *,
        device_delay_ms: float = 0.0,
        progress_ms: float = 1000.0,
    ) -> None:
        self.sr = sample_rate
        self.delay = round(device_delay_ms * sample_rate / 1000)
        self.progress = max(1, round(progress_ms * sample_rate / 1000))
        self.pos = 0
        """Next sample of the track to render."""
        self._chunks: deque[tuple[str, np.ndarray, int]] = deque()
        """Queued audio: (response id, samples not yet played, earliest start sample)."""
        self._responses: dict[str, _Response] = {}
        self._track: list[np.ndarray] = []
        self._track_len = 0

    # -- input ---------------------------------------------------------------------------------
    def enqueue(self, response_id: str, pcm: np.ndarray, arrival_sample: int) -> None:
        """Agent audio for ``response_id`` received at ``arrival_sample``."""
        x = np.asarray(pcm)
        if x.dtype.kind == "i":
            x = x.astype(np.float32) / 32768.0
        x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
        if x.size == 0:
            return
        r = self._responses.setdefault(response_id, _Response(response_id))
        if r.finished:  # audio after the response was cut or completed: a new playback round
            r.finished = False
            r.done = False
        r.received += x.size
        self._chunks.append((response_id, x, arrival_sample + self.delay))

    def mark_done(self, response_id: str) -> None:
        """The agent sent all of ``response_id``'s audio."""
        r = self._responses.setdefault(response_id, _Response(response_id))
        r.done = True

    # -- rendering -----------------------------------------------------------------------------
    def advance_to(self, sample: int) -> list[PlaybackEvent]:
        """Render the track up to ``sample`` (exclusive); the events on the way, in order."""
        events: list[PlaybackEvent] = []
        while self.pos < sample:
            if not self._chunks:
                self._silence(sample - self.pos)
                break
            rid, x, earliest = self._chunks[0]
            r = self._responses[rid]
            if earliest > self.pos:
                self._silence(min(earliest, sample) - self.pos)
                continue
            if not r.started:
                r.started = True
                events.append(self._event("playback.started", r))
            elif r.starving:
                r.starving = False
                r.stalled += self.pos - r.stall_since
            n = min(x.size, sample - self.pos)
            # progress marks inside this piece
            while r.next_progress + self.progress <= r.played + n:
                r.next_progress += self.progress
                at = self.pos + (r.next_progress - r.played)
                events.append(
                    PlaybackEvent(
                        "playback.progress",
                        rid,
                        at,
                        self._ms(r.next_progress),
                        {"played_ms": self._ms(r.next_progress)},
                    )
                )
            self._write(x[:n])
            r.played += n
            if n == x.size:
                self._chunks.popleft()
                if not any(c[0] == rid for c in self._chunks):
                    if r.done:
                        r.finished = True
                        events.append(self._event("playback.completed", r))
                    elif not r.starving:
                        r.starving = True
                        r.stall_since = self.pos
                        r.underruns += 1
            else:
                self._chunks[0] = (rid, x[n:], self.pos)
        return events

    def flush_done(self) -> list[PlaybackEvent]:
        """``playback.completed`` for responses whose audio was all played before the agent
        said it was complete (their buffer is empty now)."""
        out: list[PlaybackEvent] = []
        for r in self._responses.values():
            if (
                r.started
                and r.done
                and not r.finished
                and not any(c[0] == r.response_id for c in self._chunks)
            ):
                r.finished = True
                r.starving = False
                out.append(self._event("playback.completed", r, at=self.pos))
        return out

    def clear(self, response_id: str | None, sample: int) -> list[PlaybackEvent]:
        """Drop buffered audio (of ``response_id``, or all) at ``sample`` (rendered first)."""
        events = self.advance_to(sample)
        cut: list[str] = []
        kept: deque[tuple[str, np.ndarray, int]] = deque()
        for rid, x, earliest in self._chunks:
            if response_id is None or rid == response_id:
                if rid not in cut:
                    cut.append(rid)
            else:
                kept.append((rid, x, earliest))
        self._chunks = kept
        for rid in cut:
            r = self._responses[rid]
            r.finished = True
            if r.started:
                events.append(self._event("playback.interrupted", r, at=self.pos, reason="cleared"))
        return events

    # -- state ---------------------------------------------------------------------------------
    def playing(self) -> str | None:
        """The response whose audio is being played at ``pos`` (None: silence)."""
        if not self._chunks:
            return None
        rid, _, earliest = self._chunks[0]
        return rid if earliest <= self.pos and self._responses[rid].started else None

    def busy(self) -> bool:
        """Audio is still queued or a response awaits its completion."""
        return bool(self._chunks) or any(
            r.started and not r.finished for r in self._responses.values()
        )

    def played_ms(self, response_id: str) -> float:
        r = self._responses.get(response_id)
        return self._ms(r.played) if r else 0.0

    def track(self) -> np.ndarray:
        """The rendered output track (float32), ``pos`` samples long."""
        if len(self._track) > 1:
            self._track = [np.concatenate(self._track)]
        return self._track[0] if self._track else np.zeros(0, np.float32)

    # -- helpers -------------------------------------------------------------------------------
    def _ms(self, samples: int) -> float:
        return round(samples * 1000.0 / self.sr, 3)

    def _event(
        self, kind: str, r: _Response, at: int | None = None, reason: str | None = None
    ) -> PlaybackEvent:
        data: dict[str, Any] = {"played_ms": self._ms(r.played)}
        if r.underruns:
            data["underruns"] = r.underruns
        if r.stalled:
            data["stalled_ms"] = self._ms(r.stalled)
        if reason:
            data["reason"] = reason
        return PlaybackEvent(
            kind, r.response_id, self.pos if at is None else at, data["played_ms"], data
        )

    def _silence(self, n: int) -> None:
        if n > 0:
            self._write(np.zeros(n, np.float32))

    def _write(self, x: np.ndarray) -> None:
        self._track.append(x)
        self._track_len += x.size
        self.pos += x.size
