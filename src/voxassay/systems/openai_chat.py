"""``openai-compat`` ``understand``: chat completions with audio input parts.

Spec: ``openai-compat:BASE_URL[?model=gpt-4o-audio-preview&key_env=OPENAI_API_KEY&timeout=60
&retries=2&backoff=1.0&seed=N&max_tokens=N]``.

Each call POSTs ``{base}/chat/completions`` with one user message whose content is the
prompt as a ``text`` part followed by one ``input_audio`` part per clip (16-bit 16 kHz mono
WAV, base64), ``temperature: 0`` (always; recorded in ``describe()``), ``seed`` and
``max_tokens`` when given. The answer is ``choices[0].message.content`` as returned (a list
of text parts is joined); parsing it is the suite's job. Key handling, retries and timeouts:
:mod:`voxassay.systems.openai_http`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample
from voxassay.core.errors import InputError, SystemOutputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec
from voxassay.systems.openai_http import OpenAIClient, excerpt, wav_base64

__all__ = ["DEFAULT_CHAT_MODEL", "OpenAICompatUnderstander", "build_chat"]

DEFAULT_CHAT_MODEL = "gpt-4o-audio-preview"
_AUDIO_SR = 16_000


def build_chat(spec: SystemSpec) -> OpenAICompatUnderstander:
    """Build the ``understand`` adapter from a checked ``openai-compat`` spec."""
    spec.check_options(options_of("openai-compat", "understand"), "openai-compat understand")
    seed_raw = spec.option("seed")
    max_raw = spec.option("max_tokens")
    return OpenAICompatUnderstander(
        base_url=str(spec.target),
        model=spec.option("model", DEFAULT_CHAT_MODEL) or DEFAULT_CHAT_MODEL,
        key_env=spec.option("key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
        timeout=spec.float_option("timeout", 60.0, lo=0.001),
        retries=spec.int_option("retries", 2, lo=0),
        backoff=spec.float_option("backoff", 1.0, lo=0.0),
        seed=spec.int_option("seed", 0) if seed_raw else None,
        max_tokens=spec.int_option("max_tokens", 1, lo=1) if max_raw else None,
        spec=spec.raw,
    )


class OpenAICompatUnderstander(OpenAIClient):
    """HTTP client for ``{base_url}/chat/completions`` with ``input_audio`` parts."""

    endpoint = "chat/completions"
    audio_sample_rate = _AUDIO_SR

    def __init__(
        self,
        base_url: str,
        model: str = DEFAULT_CHAT_MODEL,
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        spec: str = "",
    ) -> None:
        super().__init__(base_url, model, key_env, timeout, retries, backoff, spec)
        self.seed = seed
        self.max_tokens = max_tokens

    def payload(self, audio_parts: list[Audio], prompt: str) -> dict[str, Any]:
        """The JSON body sent for one call (audio resampled to 16 kHz WAV, base64)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise InputError("understand needs a non-empty text prompt")
        if not isinstance(audio_parts, list | tuple) or not audio_parts:
            raise InputError("understand needs at least one audio clip")
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        for i, part in enumerate(audio_parts):
            if not isinstance(part, Audio):
                raise InputError(
                    f"audio part {i} is {type(part).__name__}, not voxassay.core.audio.Audio"
                )
            samples = np.asarray(part.samples)
            if samples.ndim != 1 or samples.size == 0 or part.sr <= 0:
                raise InputError(
                    f"audio part {i} must be non-empty mono audio, got shape {samples.shape} "
                    f"at {part.sr} Hz"
                )
            if not np.all(np.isfinite(samples)):
                raise InputError(f"audio part {i} has NaN or infinite samples")
            clip = resample(Audio(samples.astype(np.float32, copy=False), part.sr), _AUDIO_SR)
            content.append(
                {
                    "type": "input_audio",
                    "input_audio": {"data": wav_base64(clip.samples, _AUDIO_SR), "format": "wav"},
                }
            )
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": 0,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def understand(self, audio_parts: list[Audio], prompt: str) -> str:
        """Send the clips and the prompt; return the model's answer text unparsed."""
        body = self.payload(list(audio_parts), prompt)
        response = self._post(json=body)
        return self._parse(response.text, response.headers.get("content-type", ""))

    def _parse(self, body: str, content_type: str) -> str:
        where = f"{self.url} (model={self.model})"
        try:
            data = json.loads(body)
        except ValueError:
            raise SystemOutputError(
                f"{where} answered non-JSON ({content_type or 'no content-type'}): "
                f"{self._redact(excerpt(body))!r}"
            ) from None
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            keys = ", ".join(map(str, data)) if isinstance(data, dict) else type(data).__name__
            raise SystemOutputError(
                f"{where} answered JSON without choices[0].message (got: {keys})"
            ) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some servers answer with content parts
            texts = [p.get("text") for p in content if isinstance(p, dict)]
            content = "".join(t for t in texts if isinstance(t, str)) if texts else None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            why = f" (refusal: {self._redact(excerpt(str(refusal)))!r})" if refusal else ""
            raise SystemOutputError(f"{where} answered without a string message content{why}")
        return content

    def describe(self) -> dict[str, Any]:
        """Endpoint and decoding settings for ``run.json`` (never the key itself)."""
        info = self._describe_common()
        info.update(
            capability="understand",
            temperature=0,
            seed=self.seed,
            max_tokens=self.max_tokens,
            audio_format=f"wav pcm16 mono {_AUDIO_SR} Hz, base64 input_audio parts",
        )
        return info
