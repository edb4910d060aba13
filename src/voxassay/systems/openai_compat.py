"""Any server speaking the OpenAI audio APIs: ``transcribe``, ``synthesize``, ``understand``.

Spec: ``openai-compat:BASE_URL[?options]``, e.g. ``openai-compat:http://127.0.0.1:8000/v1``.
Options every capability takes: ``model``, ``key_env`` (default ``OPENAI_API_KEY``),
``timeout`` (s, default 60), ``retries`` (default 2), ``backoff`` (s, default 1.0).

* ``transcribe`` -> ``POST {base}/audio/transcriptions`` (this module). Extra options
  ``language=en``, ``response_format=verbose_json|json|text``, ``prompt``; default model
  ``whisper-1``. Each call uploads a 16-bit 16 kHz mono WAV as multipart form data with
  ``temperature=0`` (and ``timestamp_granularities[]=word`` for ``verbose_json``).
* ``synthesize`` -> ``POST {base}/audio/speech`` (:mod:`voxassay.systems.openai_speech`).
* ``understand`` -> ``POST {base}/chat/completions`` with ``input_audio`` parts
  (:mod:`voxassay.systems.openai_chat`).

The API key is read from the environment variable named by ``key_env`` at each call;
without it no ``Authorization`` header is sent. The key is never stored in ``describe()``,
``repr()`` or any error message (it is masked if a server echoes it back). 429 and 5xx
answers and connection failures are retried with exponential backoff (honouring a numeric
``Retry-After``); a read timeout raises :class:`TimeoutError` without retrying.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from voxassay.core.errors import SpecError, SystemOutputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec
from voxassay.systems.base import Transcript, coerce_transcript
from voxassay.systems.openai_http import (
    APIStatusError,
    OpenAIClient,
    check_base_url,
    excerpt,
    wav_bytes,
)

__all__ = ["APIStatusError", "OpenAICompatTranscriber", "build"]

_FORMATS = ("verbose_json", "json", "text")
_CAPABILITIES = ("transcribe", "synthesize", "understand", "converse")


def build(spec: SystemSpec, capability: str) -> Any:
    """Registry factory; checks the URL and options for ``capability``, imports nothing heavy."""
    if capability not in _CAPABILITIES:
        raise SpecError(f"openai-compat provides {', '.join(_CAPABILITIES)}, not {capability!r}")
    check_base_url(spec)
    if capability == "synthesize":
        from voxassay.systems.openai_speech import build_speech

        return build_speech(spec)
    if capability == "understand":
        from voxassay.systems.openai_chat import build_chat

        return build_chat(spec)
    if capability == "converse":
        from voxassay.systems.openai_converse import build_converse

        return build_converse(spec)
    spec.check_options(options_of("openai-compat", "transcribe"), "openai-compat transcribe")
    fmt = spec.option("response_format", "verbose_json") or "verbose_json"
    if fmt not in _FORMATS:
        raise SpecError(
            f"response_format {fmt!r} is not supported; use one of {', '.join(_FORMATS)}"
        )
    return OpenAICompatTranscriber(
        base_url=str(spec.target),
        model=spec.option("model", "whisper-1") or "whisper-1",
        key_env=spec.option("key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
        timeout=spec.float_option("timeout", 60.0, lo=0.001),
        language=spec.option("language", "en") or None,
        response_format=fmt,
        retries=spec.int_option("retries", 2, lo=0),
        backoff=spec.float_option("backoff", 1.0, lo=0.0),
        prompt=spec.option("prompt") or None,
        spec=spec.raw,
    )


class OpenAICompatTranscriber(OpenAIClient):
    """HTTP client for ``{base_url}/audio/transcriptions``; one request per call."""

    sample_rate = 16_000
    endpoint = "audio/transcriptions"

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
        super().__init__(base_url, model, key_env, timeout, retries, backoff, spec)
        self.language = language
        self.response_format = response_format
        self.prompt = prompt

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

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """POST the audio, retrying 429/5xx and connection errors; parse the answer."""
        wav = wav_bytes(audio, self.sample_rate)
        response = self._post(data=self._fields(), files={"file": ("audio.wav", wav, "audio/wav")})
        return self._parse(response.text)

    def _parse(self, body: str) -> Transcript:
        where = f"{self.url} (response_format={self.response_format})"
        if self.response_format == "text":
            return Transcript(body.strip(), None, self.language)
        try:
            data = json.loads(body)
        except ValueError:
            raise SystemOutputError(
                f"{where} answered invalid JSON: {self._redact(excerpt(body))!r}"
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
        info = self._describe_common()
        info.update(
            capability="transcribe",
            response_format=self.response_format,
            language=self.language,
            temperature=0,
        )
        return info
