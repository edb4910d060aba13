"""Audio I/O: any rate or channel count in, mono float32 at the rate asked for out."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxeval.core.errors import AudioError

TARGET_SR = 16_000


@dataclass
class Audio:
    """Mono float32 samples in [-1, 1] and their sample rate."""

    samples: np.ndarray
    sr: int

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sr if self.sr else 0.0


def load_audio(path: str | Path, sr: int | None = TARGET_SR) -> Audio:
    """Read ``path`` (WAV/FLAC/OGG via libsndfile, other formats via PyAV), downmix, resample.

    Raises ``AudioError`` with kind ``missing``, ``unreadable`` or ``empty``.
    """
    p = Path(path)
    if not p.exists():
        raise AudioError(f"audio file not found: {p}", kind="missing")
    if p.stat().st_size == 0:
        raise AudioError(f"audio file is empty (0 bytes): {p}", kind="empty")
    try:
        samples, file_sr = _read_soundfile(p)
    except Exception as sf_exc:  # libsndfile cannot read it: try FFmpeg through PyAV
        try:
            samples, file_sr = _read_av(p)
        except ImportError:
            raise AudioError(f"cannot read audio {p}: {sf_exc}", kind="unreadable") from None
        except Exception as av_exc:
            raise AudioError(f"cannot read audio {p}: {av_exc}", kind="unreadable") from None
    if samples.size == 0:
        raise AudioError(f"audio has no samples: {p}", kind="empty")
    if not np.all(np.isfinite(samples)):
        raise AudioError(f"audio has NaN or infinite samples: {p}", kind="unreadable")
    audio = Audio(samples.astype(np.float32, copy=False), int(file_sr))
    return resample(audio, sr) if sr else audio


def _read_soundfile(p: Path) -> tuple[np.ndarray, int]:
    import soundfile as sf

    data, file_sr = sf.read(str(p), dtype="float32", always_2d=True)
    return data.mean(axis=1) if data.shape[1] > 1 else data[:, 0], int(file_sr)


def _read_av(p: Path) -> tuple[np.ndarray, int]:
    import av

    with av.open(str(p)) as container:
        stream = container.streams.audio[0]
        rate = stream.rate
        chunks = []
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
    if not chunks:
        return np.zeros(0, dtype=np.float32), int(rate)
    return np.concatenate(chunks).astype(np.float32), int(rate)


def resample(audio: Audio, sr: int) -> Audio:
    """Resample with soxr (high quality); no-op when the rate already matches."""
    if audio.sr == sr:
        return audio
    import soxr

    out = soxr.resample(audio.samples, audio.sr, sr, quality="HQ")
    return Audio(np.asarray(out, dtype=np.float32), sr)


def write_wav(path: str | Path, audio: Audio) -> None:
    """Write 16-bit PCM WAV (clipped to [-1, 1])."""
    import soundfile as sf

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.clip(audio.samples, -1.0, 1.0), audio.sr, subtype="PCM_16")


def wav_data_uri(audio: Audio, max_seconds: float = 30.0, sr: int = 16_000) -> str:
    """A ``data:audio/wav;base64,...`` URI (mono 16-bit, resampled, truncated) for HTML players."""
    import soundfile as sf

    a = resample(audio, sr)
    buf = io.BytesIO()
    sf.write(
        buf, np.clip(a.samples[: int(max_seconds * sr)], -1, 1), sr, format="WAV", subtype="PCM_16"
    )
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def rms_dbfs(samples: np.ndarray) -> float:
    """Root-mean-square level in dBFS (full scale sine = -3 dBFS); -inf for silence."""
    if samples.size == 0:
        return float("-inf")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    return 20.0 * np.log10(rms) if rms > 0 else float("-inf")
