"""``openai-compat`` ``converse``: chat completions that hear audio and answer with audio.

Spec: ``openai-compat:BASE_URL[?model=gpt-4o-audio-preview&voice=alloy&key_env=...&timeout=60
&retries=2&backoff=1.0&seed=N&max_tokens=N]``.

One POST to ``{base}/chat/completions`` per turn. AO: the user's turn is one ``input_audio``
part (16-bit 16 kHz mono WAV, base64); TO: the same model gets the transcript as text. Earlier
turns: the user's as audio in AO when they were spoken (else text), the assistant's as text.
``modalities: ["text", "audio"]`` with ``audio: {voice, format: wav}`` asks for a spoken
answer: ``message.audio.data`` (WAV, base64) and ``message.audio.transcript``; a server that
answers ``content`` only gives a text-only reply (unscored on the audio dimensions). The
provider's defaults are used for everything else (no temperature is sent), as the benchmark
this follows did; ``describe()`` records them. Keys, retries, timeouts: ``openai_http``.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample
from voxassay.core.errors import SystemOutputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec
from voxassay.systems.converse import HistoryTurn, Mode, Reply, Turn
from voxassay.systems.openai_http import OpenAIClient, excerpt, wav_base64

__all__ = ["OpenAICompatConversant", "build_converse"]

DEFAULT_MODEL = "gpt-4o-audio-preview"
DEFAULT_VOICE = "alloy"
_SR = 16_000


def build_converse(spec: SystemSpec) -> OpenAICompatConversant:
    spec.check_options(options_of("openai-compat", "converse"), "openai-compat converse")
    return OpenAICompatConversant(
        base_url=str(spec.target),
        model=spec.option("model", DEFAULT_MODEL) or DEFAULT_MODEL,
        voice=spec.option("voice", DEFAULT_VOICE) or DEFAULT_VOICE,
        key_env=spec.option("key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
        timeout=spec.float_option("timeout", 60.0, lo=0.001),
        retries=spec.int_option("retries", 2, lo=0),
        backoff=spec.float_option("backoff", 1.0, lo=0.0),
        seed=spec.int_option("seed", 0) if spec.option("seed") else None,
        max_tokens=spec.int_option("max_tokens", 1, lo=1) if spec.option("max_tokens") else None,
        spec=spec.raw,
    )


def _audio_part(samples: np.ndarray, sr: int) -> dict[str, Any]:
    clip = resample(Audio(np.asarray(samples, np.float32), sr), _SR)
    return {
        "type": "input_audio",
        "input_audio": {"data": wav_base64(clip.samples, _SR), "format": "wav"},
    }


class OpenAICompatConversant(OpenAIClient):
    endpoint = "chat/completions"

    def __init__(
        self,
        base_url: str,
        model: str = DEFAULT_MODEL,
        voice: str = DEFAULT_VOICE,
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        spec: str = "",
    ) -> None:
        super().__init__(base_url, model, key_env, timeout, retries, backoff, spec)
        self.voice, self.seed, self.max_tokens = voice, seed, max_tokens

    def payload(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for h in history:
            if h.role == "user" and mode == "ao" and h.audio is not None and h.sample_rate:
                messages.append({"role": "user", "content": [_audio_part(h.audio, h.sample_rate)]})
            else:
                messages.append({"role": h.role, "content": h.text})
        if mode == "ao":
            messages.append(
                {"role": "user", "content": [_audio_part(turn.audio, turn.sample_rate)]}
            )
        else:
            messages.append({"role": "user", "content": turn.transcript})
        body: dict[str, Any] = {
            "model": self.model,
            "modalities": ["text", "audio"],
            "audio": {"voice": self.voice, "format": "wav"},
            "messages": messages,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def converse(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> Reply:
        response = self._post(json=self.payload(turn, history, mode))
        return self._parse(response.text)

    def _parse(self, body: str) -> Reply:
        where = f"{self.url} (model={self.model})"
        try:
            message = json.loads(body)["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise SystemOutputError(
                f"{where} answered without choices[0].message: {self._redact(excerpt(body))!r}"
            ) from None
        audio = message.get("audio") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(audio, dict) and audio.get("data"):
            import soundfile as sf

            try:
                raw = base64.b64decode(audio["data"])
                samples, sr = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
            except Exception as exc:
                raise SystemOutputError(
                    f"{where}: the answer's audio does not decode: {exc}"
                ) from None
            text = str(audio.get("transcript") or content or "")
            return Reply(text=text, audio=samples.mean(axis=1), sample_rate=int(sr))
        if isinstance(content, str):
            return Reply(text=content)  # text only: unscored on the audio dimensions
        raise SystemOutputError(f"{where} answered neither audio nor text")

    def describe(self) -> dict[str, Any]:
        info = self._describe_common()
        info.update(
            capability="converse",
            voice=self.voice,
            modalities=["text", "audio"],
            decoding="provider defaults (no temperature sent)",
            seed=self.seed,
            max_tokens=self.max_tokens,
            audio_format=f"wav pcm16 mono {_SR} Hz input_audio parts; wav answers",
        )
        return info
