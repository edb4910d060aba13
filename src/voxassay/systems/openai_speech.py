"""``openai-compat`` ``synthesize``: the ``/audio/speech`` API.

Spec: ``openai-compat:BASE_URL[?model=tts-1&voice=alloy&response_format=wav&speed=1.0
&pcm_rate=24000&key_env=OPENAI_API_KEY&timeout=60&retries=2&backoff=1.0]``.

Each call POSTs JSON ``{model, input, voice, response_format[, speed][, instructions]}`` to
``{base}/audio/speech``; ``instructions`` is sent only when the item has one (models
without instruction control refuse or ignore it), and ``describe()`` says so. The answer
is decoded by its content: a WAV (RIFF) body with libsndfile; ``audio/pcm`` (or
``response_format=pcm``) as raw 16-bit little-endian mono at ``pcm_rate`` (24 kHz, what the
OpenAI API sends). A JSON or text body where audio was expected, an undecodable body, or
empty/NaN audio is an error with the reason. Key handling, retries and timeouts:
:mod:`voxassay.systems.openai_http`.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.core.errors import InputError, SpecError, SystemOutputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec
from voxassay.systems.audio_output import check_audio
from voxassay.systems.openai_http import OpenAIClient, excerpt

__all__ = ["DEFAULT_TTS_MODEL", "DEFAULT_TTS_VOICE", "OpenAICompatSynthesizer", "build_speech"]

DEFAULT_TTS_MODEL = "tts-1"
DEFAULT_TTS_VOICE = "alloy"
_FORMATS = ("wav", "pcm")


def build_speech(spec: SystemSpec) -> OpenAICompatSynthesizer:
    """Build the ``synthesize`` adapter from a checked ``openai-compat`` spec."""
    spec.check_options(options_of("openai-compat", "synthesize"), "openai-compat synthesize")
    fmt = spec.option("response_format", "wav") or "wav"
    if fmt not in _FORMATS:
        raise SpecError(
            f"response_format {fmt!r} is not supported for speech; use one of {', '.join(_FORMATS)}"
        )
    speed_raw = spec.option("speed")
    return OpenAICompatSynthesizer(
        base_url=str(spec.target),
        model=spec.option("model", DEFAULT_TTS_MODEL) or DEFAULT_TTS_MODEL,
        voice=spec.option("voice", DEFAULT_TTS_VOICE) or DEFAULT_TTS_VOICE,
        response_format=fmt,
        speed=spec.float_option("speed", 1.0, lo=0.25, hi=4.0) if speed_raw else None,
        pcm_rate=spec.int_option("pcm_rate", 24_000, lo=4_000, hi=192_000),
        key_env=spec.option("key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
        timeout=spec.float_option("timeout", 60.0, lo=0.001),
        retries=spec.int_option("retries", 2, lo=0),
        backoff=spec.float_option("backoff", 1.0, lo=0.0),
        spec=spec.raw,
    )


class OpenAICompatSynthesizer(OpenAIClient):
    """HTTP client for ``{base_url}/audio/speech``; one request per call.

    ``sample_rate`` is ``pcm_rate`` until the first WAV answer, then that answer's rate.
    """

    endpoint = "audio/speech"

    def __init__(
        self,
        base_url: str,
        model: str = DEFAULT_TTS_MODEL,
        voice: str = DEFAULT_TTS_VOICE,
        response_format: str = "wav",
        speed: float | None = None,
        pcm_rate: int = 24_000,
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        spec: str = "",
    ) -> None:
        super().__init__(base_url, model, key_env, timeout, retries, backoff, spec)
        self.voice = voice
        self.response_format = response_format
        self.speed = speed
        self.pcm_rate = pcm_rate
        self.sample_rate = pcm_rate
        self.instructions_sent = 0  # calls that carried an instruction

    def payload(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> dict[str, Any]:
        """The JSON body for one call."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("openai-compat synthesize: nothing to say (empty text)")
        body: dict[str, Any] = {
            "model": self.model,
            "input": text,
            "voice": voice or self.voice,
            "response_format": self.response_format,
        }
        if self.speed is not None:
            body["speed"] = self.speed
        if instructions:
            body["instructions"] = instructions
        return body

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        """Speak ``text``; mono float32 at the server's rate (WAV header, or ``pcm_rate``)."""
        body = self.payload(text, voice, instructions)
        response = self._post(json=body)
        audio = self._decode(response.content, response.headers.get("content-type", ""))
        if "instructions" in body:
            self.instructions_sent += 1
        self.sample_rate = audio.sr
        return audio

    def _decode(self, data: bytes, content_type: str) -> Audio:
        ctype = content_type.split(";")[0].strip().lower()
        where = f"{self.url} (model={self.model})"
        if ctype.startswith(("application/json", "text/")) or data[:1] in (b"{", b"["):
            text = self._redact(excerpt(data.decode("utf-8", "replace")))
            raise SystemOutputError(
                f"{where} answered {ctype or 'no content-type'} instead of audio: {text!r}"
            )
        if data[:4] == b"RIFF" or ctype in ("audio/wav", "audio/x-wav", "audio/wave"):
            import soundfile as sf

            try:
                samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
            except Exception as exc:
                raise SystemOutputError(f"{where} answered undecodable WAV: {exc}") from None
            mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
            return check_audio(Audio(mono.astype(np.float32, copy=False), int(rate)), where)
        if ctype in ("audio/pcm", "audio/l16") or self.response_format == "pcm":
            usable = data[: len(data) - len(data) % 2]
            pcm = np.frombuffer(usable, dtype="<i2").astype(np.float32) / 32768.0
            return check_audio(Audio(pcm, self.pcm_rate), where)
        raise SystemOutputError(
            f"{where} answered {ctype or 'no content-type'} ({len(data)} bytes), which is "
            f"neither WAV nor 16-bit PCM"
        )

    def describe(self) -> dict[str, Any]:
        """Endpoint, voice and settings for ``run.json`` (never the key itself)."""
        info = self._describe_common()
        info.update(
            capability="synthesize",
            voice=self.voice,
            response_format=self.response_format,
            speed=self.speed,
            pcm_rate=self.pcm_rate if self.response_format == "pcm" else None,
            sample_rate=self.sample_rate,
            instructions="sent when the item has one (field 'instructions')",
            instructions_sent_calls=self.instructions_sent,
        )
        return info
