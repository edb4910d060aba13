"""``reference-sts[:prosody_aware]``: the offline speech-to-speech reference, a cascade.

AO: faster-whisper transcribes the user's audio; with ``prosody_aware`` the responder also
gets cues measured on that audio (``measures.prosody``, ``sts_responder.read_cues``). TO: the
responder reads the transcript it is given. Either way the rule-based responder
(``sts_responder.respond``) answers from that text and the dialogue so far, and piper (joe,
generator noise off) speaks the answer. A calibration instrument for the audio-vs-transcript
ablation: ``prosody_aware`` must make AO score above TO on the emotion items, and without it
AO and TO may differ only by what the ASR misheard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from voxassay.core.specs import SystemSpec
from voxassay.reference.sts_responder import Cues, read_cues, respond
from voxassay.systems.converse import HistoryTurn, Mode, Reply, Turn

__all__ = ["ReferenceSts", "build_reference_sts"]

ASR = "faster-whisper"
TTS = "piper?noise_scale=0&noise_w=0"


_HEARD: dict[str, str] = {}
_SPOKEN: dict[str, Any] = {}
"""ASR results by audio digest and piper audio by answer text: both are deterministic here
(piper's generator noise is off), so the variants of the cascade in one process transcribe
each turn and speak each answer once. Bounded (cleared at 4096 entries)."""


def _digest(audio: Any) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha1(np.ascontiguousarray(audio, np.float32).tobytes()).hexdigest()


class ReferenceSts:
    """The cascade (module docstring). ``responder_log`` keeps each call's responder inputs
    (what it was given: text, history, cues) so tests can see nothing else reached it."""

    def __init__(self, prosody_aware: bool = False) -> None:
        self.prosody_aware = prosody_aware
        self._asr: Any = None
        self._tts: Any = None
        self._lock = threading.Lock()
        self.responder_log: list[dict[str, Any]] = []

    def load(self) -> None:
        with self._lock:
            if self._asr is None:
                from voxassay.core.registry import REGISTRY

                self._asr = REGISTRY.build("transcribe", ASR)
                self._asr.load()
                self._tts = REGISTRY.build("synthesize", TTS)
                self._tts.load()

    def converse(self, turn: Turn, history: Sequence[HistoryTurn], mode: Mode) -> Reply:
        from voxassay.core.audio import TARGET_SR, Audio, resample

        self.load()
        t0 = time.perf_counter()
        cues: Cues | None = None
        if mode == "ao":
            audio = resample(Audio(turn.audio, turn.sample_rate), TARGET_SR).samples
            key = _digest(audio)
            if key not in _HEARD:
                if len(_HEARD) >= 4096:  # bounded: a long run keeps the latest turns
                    _HEARD.clear()
                _HEARD[key] = self._asr.transcribe(audio).text.strip()
            heard = _HEARD[key]
            if self.prosody_aware:
                from voxassay.measures.prosody import prosody_features

                cues = read_cues(prosody_features(Audio(audio, TARGET_SR)))
        else:
            heard = turn.transcript
        past = [(h.role, h.text) for h in history]
        self.responder_log.append({"text": heard, "history": past, "cues": cues})
        answer = respond(heard, past, cues)
        if answer not in _SPOKEN:
            if len(_SPOKEN) >= 4096:
                _SPOKEN.clear()
            _SPOKEN[answer] = self._tts.synthesize(answer)
        spoken = _SPOKEN[answer]
        total = (time.perf_counter() - t0) * 1000.0
        return Reply(
            text=answer,
            audio=spoken.samples,
            sample_rate=spoken.sr,
            first_audio_ms=total,  # a cascade speaks only when all of it is ready
            total_ms=total,
            info={"heard": heard, "cues": cues.__dict__ if cues else None},
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "reference-sts",
            "prosody_aware": self.prosody_aware,
            "asr": ASR,
            "tts": TTS,
            "responder": "rule-based (reference/sts_responder.py)",
        }


def build_reference_sts(spec: SystemSpec, capability: str) -> ReferenceSts:
    """``reference-sts`` or ``reference-sts:prosody_aware`` (``+prosody_aware`` also read)."""
    from voxassay.core.errors import SpecError

    target = (spec.target or "").lstrip("+")
    if target not in ("", "prosody_aware", "plain"):
        raise SpecError(f"{spec.raw}: reference-sts takes :prosody_aware or nothing")
    return ReferenceSts(prosody_aware=target == "prosody_aware")
