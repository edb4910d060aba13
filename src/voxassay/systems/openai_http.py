"""The HTTP plumbing shared by the ``openai-compat`` adapters (private module).

One :class:`OpenAIClient` per system: the key is read from the environment variable named
by ``key_env`` at each request and never kept on the object, so no ``describe()``, ``repr()``
or ``vars()`` dump can hold it, and it is masked in every error message (also when a server
echoes it back, whole or shortened). 429 and 5xx answers and connection failures are retried
``retries`` times with exponential backoff ``backoff * 2**attempt`` seconds (a numeric
``Retry-After`` wins, capped at 30 s); a read timeout raises :class:`TimeoutError` at once.
"""

from __future__ import annotations

import base64
import io
import os
import time
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from voxassay.core.errors import BackendUnavailable, SpecError, VoxassayError
from voxassay.core.specs import SystemSpec

INSTALL_HINT = "pip install 'voxassay[openai]'"
MAX_RETRY_AFTER_S = 30.0


class APIStatusError(VoxassayError):
    """The server answered with a non-2xx status; ``status`` holds it."""

    kind = "http"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def check_base_url(spec: SystemSpec) -> str:
    """The spec's target as an http(s) base URL, or :class:`SpecError`."""
    if not spec.target:
        raise SpecError("openai-compat needs the API base URL: openai-compat:http://HOST:PORT/v1")
    parts = urlsplit(spec.target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecError(f"openai-compat target {spec.target!r} is not an http(s) URL")
    return spec.target


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """Mono float samples as a 16-bit PCM WAV file (clipped to [-1, 1])."""
    import soundfile as sf

    data = np.asarray(samples, dtype=np.float32)
    if data.ndim != 1:
        raise ValueError(f"expected mono 1-D audio, got shape {data.shape}")
    buf = io.BytesIO()
    sf.write(buf, np.clip(data, -1.0, 1.0), sample_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def wav_base64(samples: np.ndarray, sample_rate: int) -> str:
    """:func:`wav_bytes` as base64 text (what ``input_audio.data`` carries)."""
    return base64.b64encode(wav_bytes(samples, sample_rate)).decode("ascii")


def excerpt(text: str, limit: int = 120) -> str:
    """Whitespace-collapsed start of ``text``."""
    return " ".join(text.split())[:limit]


class OpenAIClient:
    """Base of the openai-compat adapters: endpoint, key handling, retries, timeout."""

    endpoint = ""

    def __init__(
        self,
        base_url: str,
        model: str,
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        spec: str = "",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/{self.endpoint}"
        self.model = model
        self.key_env = key_env
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.spec = spec or f"openai-compat:{base_url}"
        self._client: Any = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(url={self.url!r}, model={self.model!r}, "
            f"key_env={self.key_env!r})"
        )

    def load(self) -> None:
        """Create the HTTP client."""
        if self._client is not None:
            return
        try:
            import httpx
        except ImportError as exc:
            raise BackendUnavailable(f"httpx is not importable ({exc}): {INSTALL_HINT}") from None
        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout))

    def close(self) -> None:
        """Close the HTTP client (a later call reopens it)."""
        if self._client is not None:
            self._client.close()
            self._client = None

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

    def _post(self, **request: Any) -> Any:
        """POST ``request`` (httpx keyword arguments) to ``self.url`` with retries.

        Returns the 2xx ``httpx.Response``; raises :class:`TimeoutError`,
        :class:`ConnectionError` or :class:`APIStatusError` (messages redacted).
        """
        self.load()
        import httpx

        key = self._key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        attempt = 0
        while True:
            try:
                response = self._client.post(self.url, headers=headers, **request)
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
                body = excerpt(response.text, 300)
                raise APIStatusError(
                    f"{self.url} answered HTTP {status} after {attempt + 1} attempt(s): "
                    f"{self._redact(body) or '(empty body)'}",
                    status,
                )
            return response

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        return float(self.backoff * (2**attempt))

    def _describe_common(self) -> dict[str, Any]:
        try:
            httpx_version: str | None = metadata.version("httpx")
        except metadata.PackageNotFoundError:
            httpx_version = None
        return {
            "backend": "openai-compat",
            "spec": self.spec,
            "url": self.url,
            "model": self.model,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "backoff_s": self.backoff,
            "key_env": self.key_env,
            "key_present": bool(os.environ.get(self.key_env)),
            "versions": {"httpx": httpx_version},
        }
