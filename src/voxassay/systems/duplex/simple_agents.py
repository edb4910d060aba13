"""Small, fully transparent agents for harness self-checks and tests of the driver.

``EnergyAgent`` detects the user's speech by frame energy, answers every end of speech after
``endpoint_ms`` of silence with ``answer_ms`` of speech-shaped sound (or a given clip), and, when
``yields``, stops its audio (``ClearAudio`` + ``response.done`` cancelled) as soon as the user
speaks over it. ``EchoAgent`` sends every input frame straight back (the harness's own added
latency is what remains between input and output).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voxassay.contracts.duplex.agent_api import (
    AgentBase,
    AgentEvent,
    AgentOutput,
    AudioOut,
    ClearAudio,
    SessionInfo,
)

__all__ = ["EchoAgent", "EnergyAgent"]


class EnergyAgent(AgentBase):
    """An energy-threshold voice agent (see the module docstring)."""

    def __init__(
        self,
        *,
        threshold_dbfs: float = -40.0,
        endpoint_ms: float = 500.0,
        answer_ms: float = 3000.0,
        yields: bool = True,
        answer: np.ndarray | None = None,
        chunk_ms: float = 100.0,
        seed: int = 0,
    ) -> None:
        self.threshold = 10 ** (threshold_dbfs / 20) * 32768
        self.endpoint_ms = endpoint_ms
        self.answer_ms = answer_ms
        self.yields = yields
        self.answer = answer
        self.chunk_ms = chunk_ms
        self.rng = np.random.default_rng(seed)
        self.in_speech = False
        self.silence_ms = 0.0
        self.n = 0
        self.playing: str | None = None
        self.to_send: list[np.ndarray] = []

    def start(self, session: SessionInfo, now_ns: int) -> list[AgentOutput]:
        self.session = session
        self.sr = session.sample_rate
        return []

    def _voice(self) -> np.ndarray:
        if self.answer is not None:
            return np.asarray(self.answer, dtype=np.float32)
        n = int(self.answer_ms * self.sr / 1000)
        t = np.arange(n) / self.sr
        env = 0.5 * (1 + np.sin(2 * np.pi * 4 * t))  # syllable-rate modulation
        tone = np.sin(2 * np.pi * 140 * t) + 0.5 * np.sin(2 * np.pi * 280 * t)
        return (0.2 * env * tone + 0.01 * self.rng.standard_normal(n)).astype(np.float32)

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        out: list[AgentOutput] = []
        rms = float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))) if pcm.size else 0.0
        frame_ms = pcm.size * 1000 / self.sr
        loud = rms >= self.threshold
        if loud and not self.in_speech:
            self.in_speech = True
            out.append(AgentEvent("vad.speech_started"))
            if self.playing and self.yields:
                rid = self.playing
                self.playing = None
                self.to_send = []
                out += [
                    AgentEvent("turn.decision", {"action": "interrupt"}, response_id=rid),
                    ClearAudio(rid, "user speech"),
                    AgentEvent("response.done", {"status": "cancelled"}, response_id=rid),
                ]
        if loud:
            self.silence_ms = 0.0
        elif self.in_speech:
            self.silence_ms += frame_ms
            if self.silence_ms >= self.endpoint_ms:
                self.in_speech = False
                out.append(AgentEvent("vad.speech_stopped"))
                if self.playing is None:
                    self.n += 1
                    rid = f"r{self.n}"
                    self.playing = rid
                    voice = self._voice()
                    step = int(self.chunk_ms * self.sr / 1000)
                    self.to_send = [voice[i : i + step] for i in range(0, voice.size, step)]
                    out += [
                        AgentEvent("turn.decision", {"action": "respond"}, response_id=rid),
                        AgentEvent("response.created", response_id=rid),
                    ]
        if self.playing and self.to_send:
            # stream audio faster than real time, as servers do: two chunks per frame
            for _ in range(2):
                if self.to_send:
                    out.append(AudioOut(self.playing, _pcm16(self.to_send.pop(0))))
            if not self.to_send:
                out.append(
                    AgentEvent("response.done", {"status": "completed"}, response_id=self.playing)
                )
        return out

    def on_playback(self, report: Any, now_ns: int) -> list[AgentOutput]:
        if report.status in ("completed", "interrupted") and report.response_id == self.playing:
            self.playing = None
        return []


class EchoAgent(AgentBase):
    """Sends every non-silent input frame straight back; each burst is one response that is
    complete at the first silent frame."""

    def __init__(self) -> None:
        self.n = 0
        self.active: str | None = None

    def push_audio(self, pcm: np.ndarray, now_ns: int) -> list[AgentOutput]:
        if pcm.any():
            out: list[AgentOutput] = []
            if self.active is None:
                self.n += 1
                self.active = f"echo{self.n}"
                out.append(AgentEvent("response.created", response_id=self.active))
            out.append(AudioOut(self.active, pcm.copy()))
            return out
        if self.active is not None:
            rid, self.active = self.active, None
            return [AgentEvent("response.done", {"status": "completed"}, response_id=rid)]
        return []


def _pcm16(x: np.ndarray) -> np.ndarray:
    return (np.clip(x, -1.0, 32767 / 32768) * 32768).round().astype(np.int16)
