"""Automatic proxies of one STS answer, labelled as proxies (people and judges come first).

- ``checklist``: the share of the item's text-checkable checklist lines the answer's
  transcript has (``items.Check.passes``); denominator: checkable lines (None when none is).
- ``empty``: no words and no audio; ``refusal``: the answer declines (``REFUSAL`` patterns).
- ``first_audio_ms``: the system's own first-audio time when it states one, else the
  runner's wall time of the call (a cascade speaks when all of it is ready).
- ``f0_range_st`` (naturalness proxy: prosodic variability of the answer's own voice, p90 -
  p10 of voiced F0 in semitones, ``measures.prosody``) and ``speech_rate_sps``; unscored
  (absent) for a text-only answer, never zero.
- With ``AudioProxies`` (``sts run --proxies all``): ``answer_wer``, the intelligibility of
  the answer (faster-whisper's transcript of the answer's audio against the text the system
  says it spoke, word errors / words, ``suites.asr.wer``), and ``dnsmos_ovrl`` (DNSMOS P.835
  overall, ``measures.quality``: noise and distortion, not emotion).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from voxassay.suites.sts.items import StsItem
from voxassay.systems.converse import Reply

__all__ = ["METRICS_VERSION", "PROXIES", "REFUSAL", "score_reply"]

METRICS_VERSION = "sts-metrics-1"
PROXIES: dict[str, tuple[str, bool]] = {
    "checklist": ("checklist (text-checkable lines met)", True),
    "f0_range_st": ("pitch variability of the answer, st", True),
    "first_audio_ms": ("first audio, ms", False),
    "answer_wer": ("answer intelligibility: ASR round-trip WER", False),
    "dnsmos_ovrl": ("answer quality: DNSMOS overall", True),
}
"""Proxy metric -> (label, higher is better): the per-item scores the AO-TO tables use."""

REFUSAL = re.compile(
    r"\b(i (can(no|')t|am unable to|'m unable to|won't) (help|assist|do that)|"
    r"i'm sorry, but i can't)\b"
)


def score_reply(item: StsItem, reply: Reply, wall_ms: float) -> dict[str, Any]:
    """The record's ``metrics`` for ``reply`` to ``item``."""
    text = reply.text.strip()
    checks = [c.passes(text) for c in item.checklist]
    checkable = [c for c in checks if c is not None]
    out: dict[str, Any] = {
        "checklist": (sum(checkable) / len(checkable)) if checkable else None,
        "checklist_lines": checks,
        "empty": not text and reply.audio is None,
        "refusal": bool(REFUSAL.search(text.lower())),
        "text_only": reply.audio is None,
        "first_audio_ms": reply.first_audio_ms if reply.first_audio_ms is not None else wall_ms,
        "reply_s": round(reply.duration_s, 3),
    }
    if reply.audio is not None and reply.sample_rate and reply.audio.size:
        from voxassay.core.audio import Audio
        from voxassay.measures.prosody import prosody_features

        try:
            f = prosody_features(Audio(np.asarray(reply.audio, np.float32), reply.sample_rate))
        except ValueError:
            f = {}
        if "f0_range_st" in f:
            out["f0_range_st"] = round(float(f["f0_range_st"]), 3)
        if "rate_sps" in f:
            out["speech_rate_sps"] = round(float(f["rate_sps"]), 3)
    return out


class AudioProxies:
    """The slower proxies of the answer's audio (module docstring), models loaded once."""

    def __init__(self) -> None:
        import threading

        self._asr: Any = None
        self._lock = threading.Lock()

    def score(self, reply: Reply) -> dict[str, Any]:
        if reply.audio is None or not reply.sample_rate or reply.duration_s < 0.2:
            return {}
        from voxassay.core.audio import TARGET_SR, Audio, resample
        from voxassay.measures.quality import dnsmos
        from voxassay.suites.asr.wer import score_text

        audio = Audio(np.asarray(reply.audio, np.float32), int(reply.sample_rate))
        out: dict[str, Any] = {"dnsmos_ovrl": round(dnsmos(audio)["ovrl_mos"], 4)}
        if reply.text.strip():
            with self._lock:
                if self._asr is None:
                    from voxassay.core.registry import REGISTRY

                    self._asr = REGISTRY.build("transcribe", "faster-whisper")
                    self._asr.load()
            heard = self._asr.transcribe(resample(audio, TARGET_SR).samples).text
            c = score_text(reply.text, heard)
            if c["ref_words"]:
                out["answer_wer"] = round((c["sub"] + c["del"] + c["ins"]) / c["ref_words"], 4)
            out["answer_heard"] = heard
        return out
