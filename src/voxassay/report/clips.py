"""Audio in reports: Ogg/Opus (about 24 kbit/s) or FLAC, embedded, linked or left out.

``AudioPolicy.mode``: ``inline`` embeds clips as data URIs until the page's byte budget is
spent (most important clips first: failing and worst items), then links the rest as files
beside the report; ``link`` writes every clip beside the report; ``none`` leaves audio out.
A clip marked private (recordings, production shadow and redacted sessions) is left out
unless the policy was asked for explicitly. Every report says which audio it left out and
why.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from voxassay.report.document import Clip

AudioMode = Literal["inline", "link", "none"]
AudioFormat = Literal["opus", "flac"]
AUDIO_MODES: tuple[AudioMode, ...] = ("inline", "link", "none")
PAGE_BUDGET = 3_000_000
"""report.html stays at most this many bytes whatever the run size."""
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
CLIP_DIR = "report_audio"
OPUS_KBPS_MONO = 24.0
OPUS_KBPS_PER_CHANNEL = 16.0
"""Stereo clips (a call: user left, agent right) at about 32 kbit/s in all."""
MAX_CLIP_S = 60.0


@dataclass
class AudioPolicy:
    """How a report treats audio; ``explicit``: the user chose the mode (``--audio``)."""

    mode: AudioMode = "inline"
    fmt: AudioFormat = "opus"
    page_budget: int = PAGE_BUDGET
    explicit: bool = False
    out_dir: Path | None = None
    """Where linked clips are written (the run folder); None: linking is impossible."""


@dataclass
class ClipPlan:
    """What happened to every clip of one rendering: embedded, linked, left out (and why)."""

    inline: dict[str, str] = field(default_factory=dict)
    """clip key -> data URI"""
    linked: dict[str, str] = field(default_factory=dict)
    """clip key -> path relative to the report"""
    left_out: dict[str, str] = field(default_factory=dict)
    """clip key -> reason"""
    durations: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        parts = []
        if self.inline:
            parts.append(f"{len(self.inline)} clip(s) embedded")
        if self.linked:
            parts.append(f"{len(self.linked)} linked in {CLIP_DIR}/")
        if self.left_out:
            reasons = sorted(set(self.left_out.values()))
            parts.append(f"{len(self.left_out)} left out ({'; '.join(reasons)})")
        return "Audio: " + (", ".join(parts) if parts else "none in this report") + "."


def mime(fmt: AudioFormat) -> str:
    return "audio/ogg; codecs=opus" if fmt == "opus" else "audio/flac"


def suffix(fmt: AudioFormat) -> str:
    return ".opus.ogg" if fmt == "opus" else ".flac"


def encode(samples: np.ndarray, sr: int, fmt: AudioFormat = "opus") -> tuple[bytes, float]:
    """Encoded bytes and duration (s) of at most ``MAX_CLIP_S`` seconds of audio. Opus runs at
    the nearest rate it supports at or above 16 kHz (speech clips: 16 kHz, about 24 kbit/s);
    FLAC keeps 16-bit PCM at the clip's rate."""
    import soundfile as sf

    from voxassay.core.audio import Audio, resample

    x = np.asarray(samples, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    x = x[: int(MAX_CLIP_S * sr)]
    rate = sr
    if fmt == "opus" and sr not in OPUS_RATES[2:]:
        rate = 16000 if sr <= 16000 else 24000 if sr <= 24000 else 48000
        x = np.stack(
            [resample(Audio(x[:, c].copy(), sr), rate).samples for c in range(x.shape[1])], axis=1
        )
    x = np.clip(x, -1.0, 1.0)
    if fmt == "opus":
        kbps = OPUS_KBPS_MONO if x.shape[1] == 1 else OPUS_KBPS_PER_CHANNEL * x.shape[1]
        try:
            return _opus_av(x, rate, kbps), len(x) / rate
        except ImportError:
            pass
    buf = io.BytesIO()
    if fmt == "opus":
        level = opus_level(OPUS_KBPS_MONO if x.shape[1] == 1 else OPUS_KBPS_PER_CHANNEL)
        sf.write(buf, x, rate, format="OGG", subtype="OPUS", compression_level=level)
    else:
        sf.write(buf, x, rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue(), len(x) / rate


def _opus_av(x: np.ndarray, rate: int, kbps: float) -> bytes:
    """Ogg/Opus through PyAV's libopus at ``kbps`` (complexity 5): about 5x faster here than
    libsndfile's encoder, which the caller falls back to when PyAV (installed with
    faster-whisper) is absent."""
    import av

    buf = io.BytesIO()
    layout = "mono" if x.shape[1] == 1 else "stereo"
    pcm = (x[:, :2] * 32767).astype(np.int16)
    with av.open(buf, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=rate)
        stream.bit_rate = int(kbps * 1000)
        stream.layout = layout
        stream.codec_context.options = {"compression_level": "5", "application": "audio"}
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout=layout)
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buf.getvalue()


def opus_level(kbps_per_channel: float) -> float:
    """libsndfile's Opus compression level for a bitrate per channel: measured here, the
    bitrate falls linearly from about 133 kbit/s at level 0.5 to about 6 kbit/s at 1.0."""
    return min(1.0, max(0.0, 1.0 - (kbps_per_channel - 5.7) / 255.0))


def plan_clips(clips: list[tuple[Clip, str]], policy: AudioPolicy, page_bytes: int) -> ClipPlan:
    """Decide and encode every clip. ``clips``: (clip, why it is private or "") in document order;
    ``page_bytes``: the page without audio. Inline: by priority (then document order) while
    the data URIs fit the budget left; the rest linked (or left out when nothing can be
    written beside the report)."""
    plan = ClipPlan()
    budget = policy.page_budget - page_bytes - 2_000 * len(clips) - 20_000
    order = sorted(range(len(clips)), key=lambda i: (clips[i][0].priority, i))
    for i in order:
        clip, private = clips[i]
        if private and not policy.explicit:
            plan.left_out[clip.key] = private
            continue
        if policy.mode == "none":
            plan.left_out[clip.key] = "--audio none"
            continue
        try:
            samples, sr = clip.load()
            data, dur = encode(samples, sr, policy.fmt)
        except Exception as exc:  # a clip that cannot be read is left out, with the reason
            plan.left_out[clip.key] = f"unreadable: {exc}"
            continue
        plan.durations[clip.key] = dur
        uri = f"data:{mime(policy.fmt)};base64," + base64.b64encode(data).decode("ascii")
        if policy.mode == "inline" and len(uri) <= budget:
            plan.inline[clip.key] = uri
            budget -= len(uri)
            continue
        if policy.out_dir is None:
            plan.left_out[clip.key] = "over the page's audio budget"
            continue
        rel = f"{CLIP_DIR}/{_file_name(clip.key)}{suffix(policy.fmt)}"
        target = policy.out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        plan.linked[clip.key] = rel
    return plan


def _file_name(key: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_")[:120] or "clip"
