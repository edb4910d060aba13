"""``realtime:ws://...`` ``converse``: one turn over the OpenAI Realtime WebSocket protocol.

Each call opens a session with manual turns (``turn_detection: null``), sends the earlier
turns as ``conversation.item.create`` text items (user ``input_text``, assistant
``output_text``), then the turn: AO appends the user's audio (PCM16 at 24 kHz, 100 ms
chunks) and commits it; TO creates a user ``input_text`` item with the transcript. Then
``response.create``; the answer is the ``response.output_audio.delta`` audio and the output
transcript (or text) until ``response.done``. A ``response.done`` with another status than
completed, an ``error`` event, or no ``response.done`` within ``timeout`` s raises. Keys come
from ``key_env`` only.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample
from voxassay.core.errors import SpecError, SystemOutputError
from voxassay.systems.converse import HistoryTurn, Mode, Reply, Turn
from voxassay.systems.duplex.link_base import is_loopback
from voxassay.systems.duplex.realtime_protocol import (
    BETA_HEADER,
    PROTOCOL_RATE,
    b64_to_pcm16,
    canonical_name,
    client_session,
    pcm16_to_b64,
    server_name,
    to_int16,
)

__all__ = ["RealtimeConversant", "build_realtime_converse"]

CHUNK_S = 0.1


class RealtimeConversant:
    def __init__(
        self,
        url: str,
        *,
        protocol: str = "ga",
        key_env: str | None = None,
        voice: str | None = None,
        instructions: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.url, self.protocol, self.key_env = url, protocol, key_env
        self.voice, self.instructions, self.timeout = voice, instructions, timeout

    def load(self) -> None:
        import websockets.sync.client  # noqa: F401

    def _headers(self) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        if self.key_env:
            key = os.environ.get(self.key_env)
            if not key:
                raise PermissionError(f"environment variable {self.key_env} is not set")
            headers.append(("Authorization", f"Bearer {key}"))
        if self.protocol == "beta":
            headers.append(BETA_HEADER)
        return headers

    def _name(self, ga: str) -> str:
        return server_name(ga, self.protocol)  # type: ignore[arg-type]

    def _item(self, role: str, text: str) -> dict[str, Any]:
        kind = (
            "input_text" if role == "user" else ("output_text" if self.protocol == "ga" else "text")
        )
        return {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        }

    def converse(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> Reply:
        from websockets.sync.client import connect

        t0 = time.perf_counter()
        session = client_session(
            self.protocol,  # type: ignore[arg-type]
            turn="manual",
            voice=self.voice,
            instructions=self.instructions,
        )
        with connect(
            self.url,
            additional_headers=self._headers(),
            open_timeout=self.timeout,
            max_size=16 * 2**20,
            proxy=None if is_loopback(self.url) else True,
        ) as ws:
            ws.send(json.dumps({"type": "session.update", "session": session}))
            for h in history:
                if h.text.strip():
                    ws.send(json.dumps(self._item(h.role, h.text)))
            if mode == "ao":
                pcm = to_int16(resample(Audio(turn.audio, turn.sample_rate), PROTOCOL_RATE).samples)
                step = round(CHUNK_S * PROTOCOL_RATE)
                for k in range(0, pcm.size, step):
                    event = {
                        "type": "input_audio_buffer.append",
                        "audio": pcm16_to_b64(pcm[k : k + step]),
                    }
                    ws.send(json.dumps(event))
                ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            else:
                ws.send(json.dumps(self._item("user", turn.transcript)))
            ws.send(json.dumps({"type": "response.create"}))
            return self._collect(ws, t0)

    def _collect(self, ws: Any, t0: float) -> Reply:
        chunks: list[np.ndarray] = []
        words: list[str] = []
        first: float | None = None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.url}: no response.done within {self.timeout} s")
            ev = json.loads(ws.recv(timeout=left))
            kind = canonical_name(str(ev.get("type", "")))
            if kind == "error":
                err = ev.get("error") or {}
                raise SystemOutputError(f"{self.url}: error event: {err.get('message') or err}")
            if kind == "response.output_audio.delta":
                if first is None:
                    first = (time.perf_counter() - t0) * 1000.0
                chunks.append(b64_to_pcm16(str(ev.get("delta", ""))))
            elif kind in ("response.output_audio_transcript.delta", "response.output_text.delta"):
                words.append(str(ev.get("delta", "")))
            elif kind == "response.done":
                status = str((ev.get("response") or {}).get("status") or "completed")
                if status != "completed":
                    raise SystemOutputError(f"{self.url}: the response ended {status}")
                break
        audio = np.concatenate(chunks).astype(np.float32) / 32768.0 if chunks else None
        return Reply(
            text="".join(words).strip(),
            audio=audio if audio is not None and audio.size else None,
            sample_rate=PROTOCOL_RATE,
            first_audio_ms=first,
            total_ms=(time.perf_counter() - t0) * 1000.0,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "realtime",
            "capability": "converse",
            "url": self.url,
            "protocol": self.protocol,
            "turns": "manual: AO appends and commits the audio, TO creates an input_text item",
            "history": "earlier turns as text items",
            "voice": self.voice,
        }


def build_realtime_converse(spec: Any) -> RealtimeConversant:
    url = str(spec.target or "")
    if not url.startswith(("ws://", "wss://")):
        raise SpecError(f"realtime needs a ws:// or wss:// URL, got {spec.raw!r}")
    protocol = spec.option("protocol", "ga") or "ga"
    if protocol not in ("ga", "beta"):
        raise SpecError(f"protocol is ga or beta, not {protocol!r}")
    return RealtimeConversant(
        url,
        protocol=protocol,
        key_env=spec.option("key_env") or None,
        voice=spec.option("voice") or None,
        instructions=spec.option("instructions") or None,
    )
