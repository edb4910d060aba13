"""Audio I/O: any rate or channel count in, mono float32 at the rate asked for out."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxassay.core.errors import AudioError

TARGET_SR = 16_000


@dataclass
class Audio:
    """Mono float32 samples in [-1, 1] and their sample rate."""

    samples: np.ndarray
    sr: int

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sr if self.sr else 0.0


def load_audio(
    path: str | Path,
    sr: int | None = TARGET_SR,
    *,
    offset: float | None = None,
    duration: float | None = None,
) -> Audio:
    """Read ``path`` (WAV/FLAC/OGG via libsndfile, other formats via PyAV), downmix, resample.

    ``offset``/``duration`` (seconds) read one segment of a longer recording; a segment that
    runs past the end of the file is ``truncated``, as is a WAV whose data chunk is shorter
    than its header declares. Raises ``AudioError`` with kind ``missing``, ``unreadable``,
    ``empty`` or ``truncated``.
    """
    p = _checked_file(path)
    data, file_sr, whole = _decode(p, offset, duration)
    samples = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if whole:  # PyAV decoded the whole file: cut the segment here
        samples = _segment(samples, file_sr, offset, duration, str(p))
    return _finish(samples, file_sr, sr, str(p))


def load_channels(path: str | Path) -> tuple[np.ndarray, int]:
    """Every channel of ``path`` as float32 ``[frames, channels]`` at the file's rate, with
    :func:`load_audio`'s checks (``missing``, ``empty``, ``truncated``, NaN/inf samples are
    ``unreadable``). For recordings whose channels are different talkers."""
    p = _checked_file(path)
    data, file_sr, _ = _decode(p, None, None)
    if data.shape[0] == 0:
        raise AudioError(f"audio has no samples: {p}", kind="empty")
    if not np.all(np.isfinite(data)):
        raise AudioError(f"audio has NaN or infinite samples: {p}", kind="unreadable")
    return data, file_sr


def _checked_file(path: str | Path) -> Path:
    """``path`` if it exists, is not empty and (a WAV) holds the data its header declares."""
    p = Path(path)
    if not p.exists():
        raise AudioError(f"audio file not found: {p}", kind="missing")
    if not p.is_file():
        raise AudioError(f"audio path is not a file (a folder?): {p}", kind="unreadable")
    if p.stat().st_size == 0:
        raise AudioError(f"audio file is empty (0 bytes): {p}", kind="empty")
    _check_wav_complete(p)
    return p


def _decode(p: Path, offset: float | None, duration: float | None) -> tuple[np.ndarray, int, bool]:
    """``[frames, channels]`` samples and rate through libsndfile (the segment only), else
    PyAV (mono, the whole file: the flag says so)."""
    try:
        data, file_sr = _read_soundfile(p, offset, duration)
        return data, file_sr, False
    except AudioError:
        raise
    except Exception as sf_exc:  # libsndfile cannot read it: try FFmpeg through PyAV
        try:
            mono, file_sr = _read_av(p)
        except ImportError:
            raise AudioError(f"cannot read audio {p}: {sf_exc}", kind="unreadable") from None
        except Exception as av_exc:
            raise AudioError(f"cannot read audio {p}: {av_exc}", kind="unreadable") from None
        return mono[:, None], file_sr, True


def channel_count(path: str | Path) -> int:
    """The channel count a file's header declares (nothing is decoded); AudioError when the
    file is missing or not audio libsndfile reads."""
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise AudioError(f"audio file not found: {p}", kind="missing")
    try:
        return int(sf.info(str(p)).channels)
    except Exception as exc:
        raise AudioError(f"cannot read audio {p}: {exc}", kind="unreadable") from None


def decode_audio_bytes(
    data: bytes,
    sr: int | None = TARGET_SR,
    *,
    where: str = "audio bytes",
    offset: float | None = None,
    duration: float | None = None,
) -> Audio:
    """Decode an encoded file held in memory (WAV/FLAC/OGG/MP3 bytes, e.g. a Hugging Face
    audio cell), with the same checks as :func:`load_audio`."""
    if not data:
        raise AudioError(f"{where}: no audio bytes", kind="empty")
    import soundfile as sf

    if data[:4] == b"RIFF":
        _check_wav_header(data[:65536], len(data), where)
    try:
        raw, file_sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as exc:
        raise AudioError(f"cannot decode {where}: {exc}", kind="unreadable") from None
    samples = raw.mean(axis=1) if raw.shape[1] > 1 else raw[:, 0]
    samples = _segment(samples, int(file_sr), offset, duration, where)
    return _finish(samples, int(file_sr), sr, where)


def _finish(samples: np.ndarray, file_sr: int, sr: int | None, where: str) -> Audio:
    if samples.size == 0:
        raise AudioError(f"audio has no samples: {where}", kind="empty")
    if not np.all(np.isfinite(samples)):
        raise AudioError(f"audio has NaN or infinite samples: {where}", kind="unreadable")
    audio = Audio(samples.astype(np.float32, copy=False), int(file_sr))
    return resample(audio, sr) if sr else audio


def _segment_bounds(
    offset: float | None, duration: float | None, file_sr: int, total: int, where: str
) -> tuple[int, int]:
    """Sample positions ``[start, stop)`` of a segment of ``total`` samples; a segment past
    the end (beyond ``_SEGMENT_SLACK``) is ``truncated``."""
    start = round((offset or 0.0) * file_sr)
    stop = total if duration is None else start + round(duration * file_sr)
    if start < 0 or (duration is not None and duration <= 0):
        raise AudioError(f"{where}: bad segment offset={offset} duration={duration}")
    if stop > total + _SEGMENT_SLACK * file_sr:
        raise AudioError(
            f"{where}: segment {start / file_sr:.3f}-{stop / file_sr:.3f} s runs past the end "
            f"of the audio ({total / file_sr:.3f} s)",
            kind="truncated",
        )
    return start, stop


def _segment(
    samples: np.ndarray, file_sr: int, offset: float | None, duration: float | None, where: str
) -> np.ndarray:
    """``samples[offset : offset + duration]`` (see :func:`_segment_bounds`)."""
    if offset is None and duration is None:
        return samples
    start, stop = _segment_bounds(offset, duration, file_sr, len(samples), where)
    return samples[start:stop]


_SEGMENT_SLACK = 0.02
"""Seconds a segment may run past the end (rounding of offsets written to 10 ms)."""


def _check_wav_complete(p: Path) -> None:
    with open(p, "rb") as fh:
        head = fh.read(65536)
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        _check_wav_header(head, p.stat().st_size, str(p))


def _check_wav_header(head: bytes, size: int, where: str) -> None:
    """A RIFF/WAVE file whose ``data`` chunk declares more bytes than the file holds is
    ``truncated`` (libsndfile would silently read what is there). Sizes 0 and 0xFFFFFFFF
    (streaming writers that never went back to fill them in) are not checked."""
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return
    pos = 12
    while pos + 8 <= len(head):
        cid, n = head[pos : pos + 4], int.from_bytes(head[pos + 4 : pos + 8], "little")
        if cid == b"data":
            if n in (0, 0xFFFFFFFF):
                return
            have = size - (pos + 8)
            if have < n:
                raise AudioError(
                    f"{where}: truncated WAV: the header declares {n} data bytes, the file "
                    f"holds {max(have, 0)} ({100 * max(have, 0) / n:.0f} %)",
                    kind="truncated",
                )
            return
        pos += 8 + n + (n & 1)


def _read_soundfile(
    p: Path, offset: float | None = None, duration: float | None = None
) -> tuple[np.ndarray, int]:
    import soundfile as sf

    if offset is None and duration is None:
        data, file_sr = sf.read(str(p), dtype="float32", always_2d=True)
    else:
        info = sf.info(str(p))
        start, stop = _segment_bounds(offset, duration, info.samplerate, info.frames, str(p))
        frames = -1 if duration is None else stop - start
        data, file_sr = sf.read(str(p), start=start, frames=frames, dtype="float32", always_2d=True)
    return data, int(file_sr)


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
    """Write 16-bit PCM WAV (clipped to [-1, 1]): the bytes of :func:`wav_bytes`."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(wav_bytes(audio))


def wav_bytes(audio: Audio) -> bytes:
    """A 16-bit PCM WAV file of ``audio`` (clipped to [-1, 1]), in memory."""
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.clip(audio.samples, -1.0, 1.0), audio.sr, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def rms_dbfs(samples: np.ndarray) -> float:
    """Root-mean-square level in dBFS (full scale sine = -3 dBFS); -inf for silence."""
    if samples.size == 0:
        return float("-inf")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    return 20.0 * np.log10(rms) if rms > 0 else float("-inf")
