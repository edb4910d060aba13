"""A small stand-in for an OpenAI-style audio API server, for tests (a fake at the edge only).

It listens on 127.0.0.1 on a free port in a background thread, checks the bearer token it
was given (``token``; ``None`` accepts anything) and serves three routes:

``POST /v1/audio/transcriptions`` (multipart upload) answers ``text``/``words``:
verbose_json with ``text`` and ``words`` (or plain text / json per response_format).

``POST /v1/audio/speech`` (JSON ``model, input, voice, instructions?, response_format,
speed?``) synthesizes ``input`` for real with the espeak-ng binary (OpenAI voice names map
to distinct espeak voices, see ``SPEECH_VOICES``; ``speed`` scales espeak's 175 wpm) at
24 kHz and answers ``audio/wav`` (``response_format=wav``) or raw 16-bit ``audio/pcm``
(``response_format=pcm``). Without espeak-ng it answers HTTP 503 (tests skip).

``POST /v1/chat/completions`` (JSON, OpenAI chat with ``input_audio`` parts) validates the
request like a strict server (400 for neither text nor audio, bad base64, non-WAV audio, a
``format`` other than ``wav``), decodes every clip and answers (with ``modalities`` holding
``audio``, ``message.audio`` = the answer spoken by espeak-ng as base64 WAV + its transcript)
``{"choices": [{"message": {"role": "assistant", "content": ANSWER}}]}`` where ANSWER is

- ``chat_reply(prompt, clips)`` when ``chat_reply`` is a callable (``clips``: list of
  ``(samples float32, sample_rate)``); a string ``chat_reply`` is returned as is;
- else ``chat_answers[digest]`` when the digest of the first clip is in that table
  (``clip_digest(samples, sr)`` computes the key the same way from a test's own audio);
- else the deterministic measurement ``describe_clips(clips)``, e.g.
  ``"clips=2; 1: 1.230 s -21.4 dBFS; 2: 0.800 s -30.0 dBFS; louder=1; longer=1"``.

``mode`` applies to every route:

- ``ok``: normal answers as above
- ``ok_segment_words``: (transcriptions) verbose_json with the words nested in ``segments``
- ``error500``: always HTTP 500
- ``ratelimit_then_ok``: HTTP 429 (``Retry-After: 0``) for the first ``fail_times`` requests
- ``invalid_json``: HTTP 200, ``application/json`` content-type, body not JSON
- ``missing_text``: HTTP 200 JSON without the answer (no ``text`` / no ``choices``; for
  speech: a JSON body instead of audio)
- ``sleep``: waits ``sleep_s`` before answering like ``ok``
- ``empty_audio``: (speech) a WAV with no samples

Every request is recorded in ``requests``: path, headers, form ``fields`` and ``files``
(multipart), ``json`` (parsed JSON body or None) and, for chat, ``prompt`` (the text parts
joined with newlines), ``clips`` (decoded audio) and ``digests`` (one per clip).

Typical use::

    from tests.systems.fake_openai_server import FakeOpenAIServer, clip_digest
    with FakeOpenAIServer(chat_reply=lambda prompt, clips: "Answer: B") as server:
        system = REGISTRY.build("understand", f"openai-compat:{server.base_url}?retries=0")
        assert system.understand([audio], "Which clip?") == "Answer: B"
    assert server.requests[0]["json"]["temperature"] == 0
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import shutil
import subprocess
import threading
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import soundfile as sf

DEFAULT_WORDS = [
    {"word": "in", "start": 0.0, "end": 0.24},
    {"word": "being", "start": 0.24, "end": 0.56},
    {"word": "comparatively", "start": 0.56, "end": 1.24},
    {"word": "modern", "start": 1.24, "end": 1.68},
]
SPEECH_SR = 24_000
SPEECH_VOICES = {"alloy": "en-us+f3", "echo": "en-us+m7", "fable": "en-gb", "onyx": "en-us+m3"}
ChatReply = str | Callable[[str, list[tuple[np.ndarray, int]]], str] | None


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Split a multipart/form-data body into text fields and files (name -> (filename, bytes))."""
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: dict[str, list[str]] = {}
    files: dict[str, Any] = {}
    if not message.is_multipart():
        return fields, files
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        raw = part.get_payload(decode=True)
        payload = raw if isinstance(raw, bytes) else b""
        if filename is not None:
            files[str(name)] = (filename, payload, part.get_content_type())
        else:
            fields.setdefault(str(name), []).append(payload.decode("utf-8"))
    return fields, files


def clip_digest(samples: np.ndarray, sample_rate: int) -> str:
    """The ``chat_answers`` key of a clip: SHA-1 of its 16-bit PCM at 16 kHz (first 16 hex).

    Tests pass their own float audio at any rate; it is resampled and quantised exactly as
    the adapter sends it, so the key matches what the server receives.
    """
    from voxassay.core.audio import Audio, resample

    clip = resample(Audio(np.asarray(samples, dtype=np.float32), sample_rate), 16_000)
    buf = io.BytesIO()
    sf.write(buf, np.clip(clip.samples, -1.0, 1.0), 16_000, format="WAV", subtype="PCM_16")
    decoded, _ = sf.read(io.BytesIO(buf.getvalue()), dtype="int16")
    return _pcm_digest(np.asarray(decoded, dtype="<i2"))


def _pcm_digest(pcm: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(pcm, dtype="<i2").tobytes()).hexdigest()[:16]


def describe_clips(clips: list[tuple[np.ndarray, int]]) -> str:
    """Deterministic answer measuring the received clips: duration (s) and RMS level (dBFS)."""
    parts = [f"clips={len(clips)}"]
    durations, levels = [], []
    for i, (samples, sr) in enumerate(clips, 1):
        duration = len(samples) / sr if sr else 0.0
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
        level = 20.0 * np.log10(rms) if rms > 0 else -120.0
        durations.append(duration)
        levels.append(level)
        parts.append(f"{i}: {duration:.3f} s {level:.1f} dBFS")
    if clips:
        parts.append(f"louder={int(np.argmax(levels)) + 1}")
        parts.append(f"longer={int(np.argmax(durations)) + 1}")
    return "; ".join(parts)


def espeak_speech(text: str, voice: str, speed: float = 1.0) -> tuple[np.ndarray, int] | None:
    """Real speech for ``text`` from the espeak-ng binary at 24 kHz, or None without it."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        return None
    wpm = str(int(min(450, max(80, round(175 * speed)))))
    proc = subprocess.run(
        [binary, "--stdout", "--stdin", "-b", "1", "-v", voice, "-s", wpm],
        input=text.encode("utf-8"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        return None
    from voxassay.core.audio import resample
    from voxassay.systems.espeak import parse_wav_stream

    audio = resample(parse_wav_stream(proc.stdout), SPEECH_SR)
    return audio.samples, SPEECH_SR


class FakeOpenAIServer:
    """Context manager running the fake server; ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        token: str | None = None,
        mode: str = "ok",
        text: str = "in being comparatively modern.",
        words: list[dict[str, Any]] | None = None,
        fail_times: int = 1,
        sleep_s: float = 5.0,
        chat_reply: ChatReply = None,
        chat_answers: dict[str, str] | None = None,
    ) -> None:
        self.token = token
        self.mode = mode
        self.text = text
        self.words = DEFAULT_WORDS if words is None else words
        self.fail_times = fail_times
        self.sleep_s = sleep_s
        self.chat_reply = chat_reply
        self.chat_answers = dict(chat_answers or {})
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                ctype = self.headers.get("Content-Type", "")
                fields, files = parse_multipart(ctype, body)
                parsed: Any = None
                if ctype.startswith("application/json"):
                    try:
                        parsed = json.loads(body)
                    except ValueError:
                        parsed = None
                record = {
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "fields": fields,
                    "files": files,
                    "json": parsed,
                }
                with server._lock:
                    server.requests.append(record)
                    n = len(server.requests)
                server.respond(self, n, fields)

        return Handler

    def respond(self, h: BaseHTTPRequestHandler, n: int, fields: dict[str, list[str]]) -> None:
        route = h.path.rstrip("/")
        if route not in ("/v1/audio/transcriptions", "/v1/audio/speech", "/v1/chat/completions"):
            return _send(h, 404, {"error": {"message": f"no route {h.path}"}})
        auth = h.headers.get("Authorization")
        if self.token is not None and auth != f"Bearer {self.token}":
            # like real APIs, echo what was received: the client must mask it in its errors
            return _send(h, 401, {"error": {"message": f"Incorrect API key provided: {auth}"}})
        request = self.requests[n - 1]
        if route == "/v1/audio/transcriptions" and "file" not in request["files"]:
            return _send(h, 400, {"error": {"message": "no file uploaded"}})
        if route != "/v1/audio/transcriptions" and not isinstance(request["json"], dict):
            return _send(h, 400, {"error": {"message": "body must be a JSON object"}})
        mode = self.mode
        if mode == "error500":
            return _send(h, 500, {"error": {"message": "internal failure in fake server"}})
        if mode == "ratelimit_then_ok" and n <= self.fail_times:
            return _send(h, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if mode == "invalid_json":
            return _send_raw(h, 200, b"{not json at all", "application/json")
        if mode == "sleep":
            self._stop.wait(self.sleep_s)
        if route == "/v1/audio/speech":
            return self._speech(h, request["json"])
        if route == "/v1/chat/completions":
            return self._chat(h, request)
        if mode == "missing_text":
            return _send(h, 200, {"task": "transcribe", "duration": 1.9})
        fmt = (fields.get("response_format") or ["json"])[0]
        if fmt == "text":
            return _send_raw(h, 200, self.text.encode("utf-8"), "text/plain")
        answer: dict[str, Any] = {"text": self.text}
        if fmt == "verbose_json":
            answer.update(task="transcribe", language="english", duration=1.9)
            if mode == "ok_segment_words":
                answer["segments"] = [{"id": 0, "text": self.text, "words": self.words}]
            else:
                answer["words"] = self.words
        return _send(h, 200, answer)

    def _speech(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            return _send(h, 400, {"error": {"message": "'input' must be a non-empty string"}})
        if not isinstance(body.get("model"), str) or not isinstance(body.get("voice"), str):
            return _send(h, 400, {"error": {"message": "'model' and 'voice' are required"}})
        fmt = body.get("response_format", "mp3")
        if fmt not in ("wav", "pcm"):
            return _send(h, 400, {"error": {"message": f"fake supports wav and pcm, not {fmt}"}})
        if self.mode == "missing_text":
            return _send(h, 200, {"object": "speech", "note": "no audio here"})
        if self.mode == "empty_audio":
            samples = np.zeros(0, dtype=np.float32)
        else:
            voice = SPEECH_VOICES.get(body["voice"], "en-us")
            speed = float(body.get("speed") or 1.0)
            made = espeak_speech(text, voice, speed)
            if made is None:
                return _send(h, 503, {"error": {"message": "espeak-ng not installed here"}})
            samples = made[0]
        if fmt == "pcm":
            pcm = np.round(np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
            return _send_raw(h, 200, pcm, "audio/pcm")
        buf = io.BytesIO()
        sf.write(buf, np.clip(samples, -1, 1), SPEECH_SR, format="WAV", subtype="PCM_16")
        return _send_raw(h, 200, buf.getvalue(), "audio/wav")

    def _chat(self, h: BaseHTTPRequestHandler, request: dict[str, Any]) -> None:
        body = request["json"]
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _send(h, 400, {"error": {"message": "'messages' must be a non-empty list"}})
        prompt_parts: list[str] = []
        clips: list[tuple[np.ndarray, int]] = []
        digests: list[str] = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                prompt_parts.append(content)
                continue
            for part in content if isinstance(content, list) else []:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    prompt_parts.append(str(part.get("text", "")))
                elif kind == "input_audio":
                    spec = part.get("input_audio") or {}
                    if spec.get("format") != "wav":
                        return _send(
                            h, 400, {"error": {"message": "input_audio format must be wav"}}
                        )
                    try:
                        raw = base64.b64decode(spec.get("data", ""), validate=True)
                        pcm, sr = sf.read(io.BytesIO(raw), dtype="int16")
                    except (binascii.Error, RuntimeError, ValueError, TypeError) as exc:
                        return _send(h, 400, {"error": {"message": f"bad input_audio: {exc}"}})
                    pcm = np.asarray(pcm if pcm.ndim == 1 else pcm[:, 0], dtype="<i2")
                    digests.append(_pcm_digest(pcm))
                    clips.append((pcm.astype(np.float32) / 32768.0, int(sr)))
                else:
                    return _send(h, 400, {"error": {"message": f"unknown content part {kind!r}"}})
        prompt = "\n".join(prompt_parts)
        request["prompt"] = prompt
        request["clips"] = clips
        request["digests"] = digests
        if not prompt.strip() and not clips:
            return _send(h, 400, {"error": {"message": "no text prompt and no audio"}})
        if self.mode == "missing_text":
            return _send(h, 200, {"id": "chatcmpl-fake", "object": "chat.completion"})
        if callable(self.chat_reply):
            answer = self.chat_reply(prompt, clips)
        elif isinstance(self.chat_reply, str):
            answer = self.chat_reply
        elif digests and digests[0] in self.chat_answers:
            answer = self.chat_answers[digests[0]]
        else:
            answer = describe_clips(clips)
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if "audio" in (body.get("modalities") or []):  # a spoken answer: WAV + transcript
            voice = str((body.get("audio") or {}).get("voice") or "alloy")
            spoken = espeak_speech(answer, SPEECH_VOICES.get(voice, "en-us"))
            if spoken is None:
                return _send(h, 503, {"error": {"message": "espeak-ng is not installed"}})
            buf = io.BytesIO()
            sf.write(buf, spoken[0], spoken[1], format="WAV", subtype="PCM_16")
            data = base64.b64encode(buf.getvalue()).decode()
            message = {"role": "assistant", "content": None,
                       "audio": {"id": "audio-fake", "data": data, "transcript": answer}}  # fmt: skip
        return _send(
            h,
            200,
            {
                "id": f"chatcmpl-fake-{len(self.requests)}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )


def _send(
    h: BaseHTTPRequestHandler, status: int, obj: Any, headers: dict[str, str] | None = None
) -> None:
    _send_raw(h, status, json.dumps(obj).encode("utf-8"), "application/json", headers)


def _send_raw(
    h: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    try:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (timeout tests)
