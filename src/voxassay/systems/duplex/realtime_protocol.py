"""The OpenAI Realtime protocol subset that voxassay speaks on both sides of a WebSocket.

Shared by the client (``realtime_ws.RealtimeAgentLink``, the driver's side) and the server
(``voxassay.reference.server``, which serves any in-process ``DuplexAgent``). Event names come
from ``voxassay.contracts.duplex.realtime`` (``CLIENT_EVENT_TYPES``, ``SERVER_EVENT_TYPES``
and ``BETA_NAMES``), so the importer, the client and the server read one vocabulary.

Dialects
========
``ga`` and ``beta`` use the same client event names; they differ in

- a few server names: GA ``response.output_audio.delta`` / ``.done``, beta
  ``response.audio.delta`` / ``.done`` (``server_name``; the table is ``BETA_NAMES``);
- the ``session`` object of ``session.update`` / ``session.created`` / ``session.updated``
  (GA: ``type: realtime`` with ``audio.input`` / ``audio.output`` blocks and ``{"type":
  "audio/pcm", "rate": 24000}`` formats; beta: flat ``input_audio_format: pcm16``,
  ``turn_detection``, ``modalities``);
- conversation item events (GA ``conversation.item.added`` + ``.done``; beta
  ``conversation.item.created``) and assistant content part types (GA ``output_audio``,
  beta ``audio``).

Beta clients announce themselves with the ``OpenAI-Beta: realtime=v1`` header.

Audio on the wire is mono pcm16 little-endian at ``PROTOCOL_RATE`` (24 kHz), base64 in
JSON; agents work at 16 kHz. ``StreamResampler`` converts between the two in a stream
(windowed-sinc polyphase; output sample ``m`` is the input signal at ``m / rate_out``
exactly, so milliseconds mean the same on both sides: a player's ``played_ms`` at 16 kHz is
the ``audio_end_ms`` of the 24 kHz item).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from voxassay.contracts.duplex.realtime import BETA_NAMES, CLIENT_EVENT_TYPES, SERVER_EVENT_TYPES

__all__ = [
    "AUDIO_OMITTED",
    "BETA_HEADER",
    "CLIENT_EVENT_TYPES",
    "GA_TO_BETA",
    "PROTOCOL_RATE",
    "SERVER_EVENT_TYPES",
    "Dialect",
    "StreamResampler",
    "b64_to_pcm16",
    "canonical_name",
    "client_session",
    "elide_audio",
    "pcm16_to_b64",
    "server_name",
]

Dialect = Literal["ga", "beta"]

PROTOCOL_RATE = 24_000
"""Sample rate of pcm16 audio on the wire (GA ``audio/pcm`` and beta ``pcm16``)."""

BETA_HEADER = ("OpenAI-Beta", "realtime=v1")
"""The header a beta client sends (and a server reads to pick the beta dialect)."""

GA_TO_BETA: dict[str, str] = {ga: beta for beta, ga in BETA_NAMES.items()}
"""GA server event name -> its beta name (only names that differ)."""

AUDIO_OMITTED = "<base64 audio omitted: {n} bytes>"
"""What replaces base64 audio in raw logs (the same text ``realtime_import`` uses)."""

_AUDIO_FIELDS = {"input_audio_buffer.append": "audio", "response.output_audio.delta": "delta"}


def canonical_name(event_type: str) -> str:
    """The GA name of a server event (beta names mapped, others unchanged)."""
    return BETA_NAMES.get(event_type, event_type)


def server_name(ga_name: str, dialect: Dialect) -> str:
    """The wire name of a server event in ``dialect``."""
    return GA_TO_BETA.get(ga_name, ga_name) if dialect == "beta" else ga_name


# --------------------------------------------------------------------------- audio codec


def pcm16_to_b64(pcm: np.ndarray) -> str:
    """Mono int16 samples -> base64 of little-endian bytes."""
    return base64.b64encode(np.asarray(pcm, dtype="<i2").tobytes()).decode("ascii")


def b64_to_pcm16(text: str) -> np.ndarray:
    """Base64 pcm16 little-endian -> int16 samples.

    Raises ValueError for text that is not base64 or an odd number of bytes.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"audio is not valid base64 ({exc})") from None
    if len(raw) % 2:
        raise ValueError(f"pcm16 audio must have an even number of bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype="<i2").astype(np.int16)


def to_float(pcm: np.ndarray) -> np.ndarray:
    """int16 -> float32 in [-1, 1)."""
    return np.asarray(pcm, dtype=np.float32) / 32768.0


def to_int16(x: np.ndarray) -> np.ndarray:
    """float -> int16 with clipping and rounding."""
    return (np.clip(x, -1.0, 32767 / 32768) * 32768.0).round().astype(np.int16)


def elide_audio(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``event`` whose base64 audio is replaced by ``AUDIO_OMITTED`` (for logs)."""
    key = _AUDIO_FIELDS.get(canonical_name(str(event.get("type", ""))))
    value = event.get(key) if key else None
    if key is None or not isinstance(value, str):
        return event
    out = dict(event)
    body = value.rstrip("=")
    out[key] = AUDIO_OMITTED.format(n=len(body) * 3 // 4)
    return out


# --------------------------------------------------------------------------- resampling


class StreamResampler:
    """Streaming rational resampler (Kaiser-windowed sinc, polyphase), time-aligned.

    Output sample ``m`` is the band-limited input at time ``m / rate_out`` (no group delay):
    ``process`` returns every output sample whose filter support is already available and
    holds back the rest (about ``zero_crossings / (2 * cutoff)`` input samples, ~1 ms at the
    defaults); ``flush`` pads the end with zeros, returns what is left and resets the stream.
    Over a whole stream the output has ``ceil(n_in * rate_out / rate_in)`` samples, however
    the input was chunked, and is identical to resampling it in one piece.

    ``cutoff`` is the pass band edge as a fraction of the lower of the two rates (0.45: 7.2 kHz
    between 16 and 24 kHz); each polyphase row is normalised to unit DC gain.
    """

    def __init__(
        self,
        rate_in: int,
        rate_out: int,
        *,
        zero_crossings: int = 16,
        cutoff: float = 0.45,
        kaiser_beta: float = 8.6,
    ) -> None:
        if rate_in <= 0 or rate_out <= 0:
            raise ValueError("sample rates must be positive")
        g = math.gcd(rate_in, rate_out)
        self.rate_in, self.rate_out = rate_in, rate_out
        self.up, self.down = rate_out // g, rate_in // g
        self.identity = self.up == self.down == 1
        fc = cutoff * min(rate_in, rate_out) / (rate_in * self.up)  # cycles per up-sample
        half = math.ceil(zero_crossings / (2 * fc))
        self.r_lo = -math.floor(half / self.up) - 1
        self.r_hi = math.ceil(half / self.up) + 1
        r = np.arange(self.r_lo, self.r_hi + 1)
        phases = np.arange(self.up)
        d = phases[:, None] - self.up * r[None, :]  # offset in up-samples
        w = np.where(
            np.abs(d) <= half, np.i0(kaiser_beta * np.sqrt(np.clip(1 - (d / half) ** 2, 0, 1))), 0
        ) / np.i0(kaiser_beta)
        h = np.sinc(2 * fc * d) * w
        self.table = h / h.sum(axis=1, keepdims=True)
        self.offsets = r
        self.reset()

    def reset(self) -> None:
        """Forget the stream (the next sample is time 0 again)."""
        self.n_in = 0
        self.m = 0
        self.buf_start = self.r_lo  # absolute index of buf[0]; pre-history is zeros
        self.buf = np.zeros(-self.r_lo, np.float64)

    def _outputs(self, n_avail: int, total: int | None) -> np.ndarray:
        k = n_avail - 1 - self.r_hi  # the last input index usable as a base
        end = -(-(k + 1) * self.up // self.down) if k >= 0 else 0
        if total is not None:
            end = total
        if end <= self.m:
            return np.zeros(0, np.float32)
        # Polyphase, without gathering an (outputs x taps) matrix: outputs ``m`` that share
        # ``m % up`` share a filter row and their bases step by ``down`` input samples, so
        # each phase is one correlation of a slice of the buffer with that row (every
        # ``down``-th value kept). A gathered matrix is ~150 kB per 20 ms chunk: fresh pages
        # and many more numpy calls each time; the link resamples on the latency path.
        n = end - self.m
        y = np.empty(n, np.float64)
        for p in range(min(self.up, n)):
            t0 = (self.m + p) * self.down
            row0 = t0 // self.up + self.r_lo - self.buf_start
            count = len(range(p, n, self.up))
            seg = self.buf[row0 : row0 + (count - 1) * self.down + self.offsets.size]
            y[p :: self.up] = np.correlate(seg, self.table[t0 % self.up], "valid")[:: self.down]
        self.m = end
        keep_from = (self.m * self.down) // self.up + self.r_lo  # next base + r_lo
        drop = max(0, keep_from - self.buf_start)
        if drop:
            self.buf = self.buf[drop:]
            self.buf_start += drop
        return y.astype(np.float32)

    def process(self, x: np.ndarray) -> np.ndarray:
        """Feed float samples; returns the output samples that are ready (float32)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if self.identity:
            self.n_in += x.size
            return x.astype(np.float32)
        self.buf = np.concatenate([self.buf, x])
        self.n_in += x.size
        return self._outputs(self.n_in, None)

    def flush(self) -> np.ndarray:
        """The rest of the stream (zero-padded end), then ``reset``."""
        if self.identity:
            self.reset()
            return np.zeros(0, np.float32)
        total = -(-self.n_in * self.up // self.down)
        self.buf = np.concatenate([self.buf, np.zeros(self.r_hi + 1, np.float64)])
        y = self._outputs(self.n_in + self.r_hi + 1, total)
        self.reset()
        return y

    def process_pcm16(self, pcm: np.ndarray) -> np.ndarray:
        """int16 in, int16 out (``process`` on the float scale)."""
        if self.identity:  # the same samples the float round trip gives, without it
            pcm = np.array(pcm, dtype=np.int16).reshape(-1)
            self.n_in += pcm.size
            return pcm
        return to_int16(self.process(to_float(pcm)))

    def flush_pcm16(self) -> np.ndarray:
        return to_int16(self.flush())


# --------------------------------------------------------------------------- client side


def function_tools(tools: Iterable[Any], dialect: Dialect) -> list[dict[str, Any]]:
    """Realtime function tools from scenario tools (``name``, ``description``, ``arguments``
    JSON Schema); the same shape in both dialects."""
    out = []
    for t in tools:
        params = dict(getattr(t, "arguments", None) or {"type": "object"})
        out.append(
            {
                "type": "function",
                "name": str(t.name),
                "description": str(getattr(t, "description", "") or ""),
                "parameters": params,
            }
        )
    return out


def client_session(
    dialect: Dialect,
    *,
    turn: Literal["server_vad", "manual"] = "server_vad",
    tools: list[dict[str, Any]] | None = None,
    voice: str | None = None,
    instructions: str | None = None,
    transcribe: str | None = None,
    vad: dict[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """The ``session`` object of a ``session.update`` in ``dialect``.

    ``turn=manual`` disables server turn detection (``turn_detection: null``): the client
    commits the input buffer and asks for a response itself.
    """
    detection: dict[str, Any] | None = None
    if turn == "server_vad":
        detection = {
            "type": "server_vad",
            "create_response": True,
            "interrupt_response": True,
            **(vad or {}),
        }
    if dialect == "ga":
        audio_in: dict[str, Any] = {
            "format": {"type": "audio/pcm", "rate": PROTOCOL_RATE},
            "turn_detection": detection,
        }
        if transcribe:
            audio_in["transcription"] = {"model": transcribe}
        audio_out: dict[str, Any] = {"format": {"type": "audio/pcm", "rate": PROTOCOL_RATE}}
        if voice:
            audio_out["voice"] = voice
        session: dict[str, Any] = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": audio_in, "output": audio_out},
        }
    else:
        session = {
            "modalities": ["audio", "text"],
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "turn_detection": detection,
        }
        if transcribe:
            session["input_audio_transcription"] = {"model": transcribe}
        if voice:
            session["voice"] = voice
    if tools:
        session["tools"] = tools
        session["tool_choice"] = "auto"
    if instructions:
        session["instructions"] = instructions
    if model:
        session["model"] = model
    return session


def read_session(session: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a server needs from a client ``session`` object (either dialect).

    Returns ``(settings, problems)``: settings has ``turn`` (``server_vad`` | ``semantic_vad``
    | ``manual`` | None when not given), ``tools`` (list of function tools, or None when not
    given), ``instructions``, ``voice``, ``transcribe``; problems lists what cannot be served
    (an audio format other than pcm16 at 24 kHz, malformed blocks).
    """
    problems: list[str] = []
    out: dict[str, Any] = {}
    if session.get("audio") is not None and not isinstance(session.get("audio"), dict):
        problems.append("session.audio must be an object")
    audio = _obj(session.get("audio"))
    a_in = _obj(audio.get("input"))
    a_out = _obj(audio.get("output"))
    for label, fmt in (
        ("audio.input.format", a_in.get("format")),
        ("audio.output.format", a_out.get("format")),
        ("input_audio_format", session.get("input_audio_format")),
        ("output_audio_format", session.get("output_audio_format")),
    ):
        if fmt is None:
            continue
        if isinstance(fmt, str):
            ok = fmt == "pcm16"
        elif isinstance(fmt, dict):
            ok = fmt.get("type", "audio/pcm") == "audio/pcm" and fmt.get("rate", PROTOCOL_RATE) in (
                PROTOCOL_RATE,
            )
        else:
            ok = False
        if not ok:
            problems.append(f"{label} {fmt!r} is not supported (pcm16 at 24 kHz only)")
    detection_given = "turn_detection" in a_in or "turn_detection" in session
    if detection_given:
        td = a_in.get("turn_detection", session.get("turn_detection"))
        if td is None:
            out["turn"] = "manual"
        elif isinstance(td, dict) and td.get("type", "server_vad") in (
            "server_vad",
            "semantic_vad",
        ):
            out["turn"] = td.get("type", "server_vad")
        else:
            problems.append(f"turn_detection {td!r} is not supported")
    tools = session.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
        ):
            problems.append("tools must be a list of objects with a name")
        else:
            out["tools"] = tools
    for key in ("instructions", "voice"):
        value = session.get(key, a_out.get(key) if key == "voice" else None)
        if value is not None:
            out[key] = value
    tr = a_in.get("transcription", session.get("input_audio_transcription"))
    if isinstance(tr, dict):
        out["transcribe"] = tr.get("model")
    return out, problems


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def server_session(
    dialect: Dialect, settings: dict[str, Any], session_id: str, model: str
) -> dict[str, Any]:
    """The ``session`` object of ``session.created`` / ``session.updated`` in ``dialect``:
    every accepted setting echoed (turn detection, tools, instructions, voice, input
    transcription model)."""
    turn = settings.get("turn", "server_vad")
    voice = settings.get("voice")
    transcribe = settings.get("transcribe")
    detection: dict[str, Any] | None = None if turn == "manual" else {"type": turn}
    tools = settings.get("tools") or []
    if dialect == "ga":
        audio_in: dict[str, Any] = {
            "format": {"type": "audio/pcm", "rate": PROTOCOL_RATE},
            "turn_detection": detection,
        }
        if transcribe:
            audio_in["transcription"] = {"model": transcribe}
        audio_out: dict[str, Any] = {"format": {"type": "audio/pcm", "rate": PROTOCOL_RATE}}
        if voice:
            audio_out["voice"] = voice
        out: dict[str, Any] = {
            "type": "realtime",
            "model": model,
            "output_modalities": ["audio"],
            "audio": {"input": audio_in, "output": audio_out},
            "tools": tools,
        }
    else:
        out = {  # beta's model field is a closed list of OpenAI model names: left out
            "id": session_id,
            "modalities": ["audio", "text"],
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "turn_detection": detection,
            "tools": tools,
        }
        if transcribe:
            out["input_audio_transcription"] = {"model": transcribe}
        if voice:
            out["voice"] = voice
    if settings.get("instructions"):
        out["instructions"] = settings["instructions"]
    return out
