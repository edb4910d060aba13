"""``resemblyzer``: speaker verification by embedding cosine, a specialist SU baseline.

score = cosine(e_a, e_b) of resemblyzer's L2-normalised 256-d utterance embeddings
(``voxassay.measures.speaker``); answer ``same`` when score >= threshold. The SU runner picks
the threshold on the manifest's calibration split (maximum calibration accuracy) and records
it; without a calibration split the fixed default below is used and the report says so.
Answers the speaker-match evals only (for the merged variant it embeds the two clips
separately: the harness knows where the separator is). Options: ``threshold=F`` overrides
calibration.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from voxassay.core.errors import BackendUnavailable, InputError, SpecError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec

__all__ = ["DEFAULT_THRESHOLD", "ResemblyzerVerifier", "build"]

DEFAULT_THRESHOLD = 0.75
"""Used only without a calibration split (cosine; resemblyzer same-speaker LibriSpeech
pairs mostly score above it, different-speaker pairs below)."""

TASKS = ("speaker_match_segmented", "speaker_match_merged")

_CACHE: dict[str, Any] = {}
"""Embeddings by (sample hash, rate), shared by every instance of the process (a pair set
reuses each clip many times; calibration and test workers are separate instances)."""
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 8192


def build(spec: SystemSpec, capability: str) -> ResemblyzerVerifier:
    if capability != "understand":
        raise SpecError(f"resemblyzer provides understand (SU speaker match), not {capability!r}")
    if spec.target:
        raise SpecError(f"resemblyzer takes no target, got {spec.raw!r}")
    spec.check_options(options_of("resemblyzer", "understand"), "resemblyzer")
    threshold = spec.float_option("threshold", 0.0, -1.0, 1.0) if spec.option("threshold") else None
    return ResemblyzerVerifier(threshold=threshold, spec=spec.raw)


class ResemblyzerVerifier:
    """Speaker-match specialist (see the module docstring); embeddings are cached per clip
    (process-wide)."""

    specialist_tasks = TASKS
    score_meaning = (
        "cosine similarity of resemblyzer speaker embeddings of the two clips "
        "(higher = more likely the same speaker)"
    )

    def __init__(self, threshold: float | None = None, spec: str = "resemblyzer") -> None:
        self.fixed_threshold = threshold
        self.spec = spec
        self._encoder: Any = None

    def load(self) -> None:
        from voxassay.measures.speaker import SpeakerEncoder, speaker_unavailable

        reason = speaker_unavailable()
        if reason:
            raise BackendUnavailable(f"resemblyzer unavailable: {reason}")
        enc = SpeakerEncoder()
        enc.load()
        self._encoder = enc

    def _embed(self, audio: Any) -> Any:
        key = hashlib.sha1(audio.samples.tobytes()).hexdigest() + f":{audio.sr}"
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
        if self._encoder is None:
            self.load()
        emb = self._encoder.embed(audio)
        with _CACHE_LOCK:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = emb
        return emb

    def score(self, task: str, audio_parts: list[Any]) -> float:
        """Cosine of the two clips' embeddings."""
        from voxassay.measures.speaker import cosine

        if task not in TASKS:
            raise InputError(f"resemblyzer answers {', '.join(TASKS)} only, not {task!r}")
        if len(audio_parts) != 2:
            raise InputError(f"speaker match needs 2 clips, got {len(audio_parts)}")
        return float(cosine(self._embed(audio_parts[0]), self._embed(audio_parts[1])))

    def default_threshold(self, task: str) -> float | None:
        return self.fixed_threshold if self.fixed_threshold is not None else DEFAULT_THRESHOLD

    def answer(self, task: str, score: float, threshold: float | None) -> str:
        thr = DEFAULT_THRESHOLD if threshold is None else threshold
        verdict = "same" if score >= thr else "different"
        return f"cosine {score:.4f} vs threshold {thr:.4f}\nANSWER: {verdict}"

    def understand(self, audio_parts: list[Any], prompt: str) -> str:
        raise InputError(
            "resemblyzer is a specialist baseline: run it with `voxassay su run --task "
            "speaker_match_segmented|speaker_match_merged`, not as a free-prompt model"
        )

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "backend": "resemblyzer",
            "kind": "specialist",
            "tasks": list(TASKS),
            "score": self.score_meaning,
            "threshold_option": self.fixed_threshold,
            "default_threshold": DEFAULT_THRESHOLD,
        }
        if self._encoder is not None:
            try:
                info["encoder"] = self._encoder.describe()
            except Exception as exc:  # informative only
                info["encoder"] = {"error": str(exc)}
        return info
