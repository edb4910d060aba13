"""A small stand-in for an OpenAI-style transcription server (stdlib only), for tests.

It listens on 127.0.0.1 on a free port in a background thread, checks the bearer token it
was given, parses the multipart upload and answers according to ``mode``:

- ``ok``: verbose_json with ``text`` and ``words`` (or plain text / json per response_format)
- ``ok_segment_words``: verbose_json with the words nested inside ``segments``
- ``error500``: always HTTP 500
- ``ratelimit_then_ok``: HTTP 429 (``Retry-After: 0``) for the first ``fail_times`` requests
- ``invalid_json``: HTTP 200 with a body that is not JSON
- ``missing_text``: HTTP 200 JSON without ``text``
- ``sleep``: waits ``sleep_s`` before answering like ``ok``

Every request is recorded in ``requests`` (path, headers, form fields, uploaded files).
"""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_WORDS = [
    {"word": "in", "start": 0.0, "end": 0.24},
    {"word": "being", "start": 0.24, "end": 0.56},
    {"word": "comparatively", "start": 0.56, "end": 1.24},
    {"word": "modern", "start": 1.24, "end": 1.68},
]


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
    ) -> None:
        self.token = token
        self.mode = mode
        self.text = text
        self.words = DEFAULT_WORDS if words is None else words
        self.fail_times = fail_times
        self.sleep_s = sleep_s
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
                fields, files = parse_multipart(self.headers.get("Content-Type", ""), body)
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers.items()),
                            "fields": fields,
                            "files": files,
                        }
                    )
                    n = len(server.requests)
                server.respond(self, n, fields)

        return Handler

    def respond(self, h: BaseHTTPRequestHandler, n: int, fields: dict[str, list[str]]) -> None:
        if h.path.rstrip("/") != "/v1/audio/transcriptions":
            return _send(h, 404, {"error": {"message": f"no route {h.path}"}})
        auth = h.headers.get("Authorization")
        if self.token is not None and auth != f"Bearer {self.token}":
            # like real APIs, echo what was received: the client must mask it in its errors
            return _send(h, 401, {"error": {"message": f"Incorrect API key provided: {auth}"}})
        if "file" not in self.requests[n - 1]["files"]:
            return _send(h, 400, {"error": {"message": "no file uploaded"}})
        mode = self.mode
        if mode == "error500":
            return _send(h, 500, {"error": {"message": "internal failure in fake server"}})
        if mode == "ratelimit_then_ok" and n <= self.fail_times:
            return _send(h, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if mode == "invalid_json":
            return _send_raw(h, 200, b"{not json at all", "application/json")
        if mode == "missing_text":
            return _send(h, 200, {"task": "transcribe", "duration": 1.9})
        if mode == "sleep":
            self._stop.wait(self.sleep_s)
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
