"""Any server speaking the OpenAI ``/audio/transcriptions`` API.

Spec: ``openai-compat:BASE_URL[?model=whisper-1&key_env=OPENAI_API_KEY&timeout=60&language=en
&response_format=verbose_json&retries=2&backoff=1.0]``, e.g.
``openai-compat:http://127.0.0.1:8000/v1``.

Each call uploads a 16-bit 16 kHz mono WAV as multipart form data with ``temperature=0``
(and ``timestamp_granularities[]=word`` for ``verbose_json``). The API key is read from the
environment variable named by ``key_env`` at each call; without it no
``Authorization`` header is sent. The key is never stored in ``describe()``, ``repr()`` or
any error message (it is masked if a server echoes it back). 429 and 5xx answers and
connection failures are retried ``retries`` times with exponential backoff (honouring a
numeric ``Retry-After``); a read timeout raises :class:`TimeoutError` without retrying.
"""

from __future__ import annotations

import io
import json
import os
import time
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from voxeval.core.errors import BackendUnavailable, SpecError, SystemOutputError, VoxevalError
from voxeval.core.specs import SystemSpec
from voxeval.systems.base import Transcript, coerce_transcript

__all__ = ["APIStatusError", "OpenAICompatTranscriber", "build"]

_KNOWN_OPTIONS = (
    "model",
    "key_env",
    "timeout",
    "language",
    "response_format",
    "retries",
    "backoff",
    "prompt",
)
_FORMATS = ("verbose_json", "json", "text")
_INSTALL_HINT = "pip install 'voxeval[openai]'"
_MAX_RETRY_AFTER_S = 30.0


class APIStatusError(VoxevalError):
    """The server answered with a non-2xx status; ``status`` holds it."""

    kind = "http"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def build(spec: SystemSpec, capability: str) -> OpenAICompatTranscriber:
    """Registry factory; checks the URL and options, imports nothing heavy."""
    if capability != "transcribe":
        raise SpecError(f"openai-compat here provides 'transcribe', not {capability!r}")
    if not spec.target:
        raise SpecError("openai-compat needs the API base URL: openai-compat:http://HOST:PORT/v1")
    parts = urlsplit(spec.target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecError(f"openai-compat target {spec.target!r} is not an http(s) URL")
    spec.check_options(_KNOWN_OPTIONS)
    fmt = spec.option("response_format", "verbose_json") or "verbose_json"
    if fmt not in _FORMATS:
        raise SpecError(
            f"response_format {fmt!r} is not supported; use one of {', '.join(_FORMATS)}"
        )
    timeout = spec.float_option("timeout", 60.0, lo=0.001)
    retries = spec.int_option("retries", 2, lo=0)
    backoff = spec.float_option("backoff", 1.0, lo=0.0)
    return OpenAICompatTranscriber(
        base_url=spec.target,
        model=spec.option("model", "whisper-1") or "whisper-1",
        key_env=spec.option("key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
        timeout=timeout,
        language=spec.option("language", "en") or None,
        response_format=fmt,
        retries=retries,
        backoff=backoff,
        prompt=spec.option("prompt") or None,
        spec=spec.raw,
    )


def _wav_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    import soundfile as sf

    samples = np.asarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"expected mono 1-D audio, got shape {samples.shape}")
    buf = io.BytesIO()
    sf.write(buf, np.clip(samples, -1.0, 1.0), sample_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


class OpenAICompatTranscriber:
    """HTTP client for ``{base_url}/audio/transcriptions``; one request per call."""

    sample_rate = 16_000

    def __init__(
        self,
        base_url: str,
        model: str = "whisper-1",
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        language: str | None = "en",
        response_format: str = "verbose_json",
        retries: int = 2,
        backoff: float = 1.0,
        prompt: str | None = None,
        spec: str = "",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/audio/transcriptions"
        self.model = model
        self.key_env = key_env
        self.timeout = timeout
        self.language = language
        self.response_format = response_format
        self.retries = retries
        self.backoff = backoff
        self.prompt = prompt
        self.spec = spec or f"openai-compat:{base_url}"
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OpenAICompatTranscriber(url={self.url!r}, model={self.model!r}, key_env={self.key_env!r})"

    def load(self) -> None:
        """Create the HTTP client."""
        if self._client is not None:
            return
        try:
            import httpx
        except ImportError as exc:
            raise BackendUnavailable(f"httpx is not importable ({exc}): {_INSTALL_HINT}") from None
        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout))

    def close(self) -> None:
        """Close the HTTP client (a later call reopens it)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": self.model,
            "response_format": self.response_format,
            "temperature": "0",
        }
        if self.language:
            fields["language"] = self.language
        if self.prompt:
            fields["prompt"] = self.prompt
        if self.response_format == "verbose_json":
            fields["timestamp_granularities[]"] = ["word"]
        return fields

    def _key(self) -> str | None:
        # Read at each call and never kept on the object, so no dump of it can hold the key.
        return os.environ.get(self.key_env) or None

    def _redact(self, text: str) -> str:
        key = self._key()
        if key:
            text = text.replace(key, "***")
            if len(key) > 8:  # servers often echo a key partially ("sk-abc...wxyz")
                text = text.replace(key[:8], "***").replace(key[-4:], "***")
        return text

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """POST the audio, retrying 429/5xx and connection errors; parse the answer."""
        self.load()
        import httpx

        wav = _wav_bytes(audio, self.sample_rate)
        key = self._key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        attempt = 0
        while True:
            try:
                response = self._client.post(
                    self.url,
                    data=self._fields(),
                    files={"file": ("audio.wav", wav, "audio/wav")},
                    headers=headers,
                )
            except httpx.TimeoutException:
                raise TimeoutError(
                    f"{self.url} did not answer within timeout={self.timeout:g}s"
                ) from None
            except httpx.TransportError as exc:
                if attempt < self.retries:
                    time.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                raise ConnectionError(
                    f"cannot reach {self.url} after {attempt + 1} attempt(s): "
                    f"{type(exc).__name__}: {self._redact(str(exc))}"
                ) from None
            status = response.status_code
            if (status == 429 or status >= 500) and attempt < self.retries:
                time.sleep(self._delay(attempt, response.headers.get("retry-after")))
                attempt += 1
                continue
            if not 200 <= status < 300:
                body = " ".join(response.text.split())[:300]
                raise APIStatusError(
                    f"{self.url} answered HTTP {status} after {attempt + 1} attempt(s): "
                    f"{self._redact(body) or '(empty body)'}",
                    status,
                )
            return self._parse(response.text)

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER_S)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        return float(self.backoff * (2**attempt))

    def _parse(self, body: str) -> Transcript:
        where = f"{self.url} (response_format={self.response_format})"
        if self.response_format == "text":
            return Transcript(body.strip(), None, self.language)
        try:
            data = json.loads(body)
        except ValueError:
            excerpt = " ".join(body.split())[:120]
            raise SystemOutputError(
                f"{where} answered invalid JSON: {self._redact(excerpt)!r}"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise SystemOutputError(f"{where} answered JSON without a string 'text'")
        words = data.get("words")
        if words is None and isinstance(data.get("segments"), list):
            # some servers nest word timings inside segments
            nested = [
                w for s in data["segments"] if isinstance(s, dict) for w in s.get("words") or []
            ]
            words = nested or None
        out = coerce_transcript({"text": data["text"].strip(), "words": words}, where=where)
        for w in out.words or []:
            w.word = w.word.strip()
        language = data.get("language")
        out.language = language if isinstance(language, str) and language else self.language
        if isinstance(data.get("duration"), int | float):
            out.extra["server_duration_s"] = float(data["duration"])
        return out

    def describe(self) -> dict[str, Any]:
        """Endpoint and request settings for ``run.json`` (never the key itself)."""
        try:
            httpx_version: str | None = metadata.version("httpx")
        except metadata.PackageNotFoundError:
            httpx_version = None
        return {
            "backend": "openai-compat",
            "spec": self.spec,
            "url": self.url,
            "model": self.model,
            "response_format": self.response_format,
            "language": self.language,
            "temperature": 0,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "backoff_s": self.backoff,
            "key_env": self.key_env,
            "key_present": bool(os.environ.get(self.key_env)),
            "versions": {"httpx": httpx_version},
        }
