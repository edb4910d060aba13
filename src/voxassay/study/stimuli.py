"""Audio made for a study: the headphone check, trap copies, duplex session mixes.

Everything is generated with numpy from a seed (no data files). Stimuli are written as
16-bit PCM WAV without metadata chunks, so nothing in a served file names its source.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HP_SR = 24_000
HP_FREQ_HZ = 200.0
HP_TONE_S = 1.0
HP_GAP_S = 0.5
HP_RAMP_S = 0.1
HP_LEVEL = 0.1  # about -23 dBFS RMS per channel (peak -20 dBFS)
HP_QUIET_DB = -6.0


def read_stimulus(path: Path) -> tuple[np.ndarray, int]:
    """Samples (frames x channels, float32) and rate of any readable file, channels kept,
    through the checked loader (missing, empty, truncated or NaN audio is an AudioError)."""
    from voxassay.core.audio import load_channels

    return load_channels(path)


def write_stimulus(path: Path, samples: np.ndarray, sr: int) -> float:
    """Write PCM16 WAV (clipped); returns the duration in seconds."""
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    sf.write(str(path), data, sr, subtype="PCM_16", format="WAV")
    return float(data.shape[0]) / sr


def _tone(sr: int, seconds: float, freq: float, ramp_s: float) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    tone = np.sin(2 * np.pi * freq * t)
    n_ramp = int(sr * ramp_s)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, n_ramp))
    tone[:n_ramp] *= ramp
    tone[-n_ramp:] *= ramp[::-1]
    return tone.astype(np.float32)


def headphone_trial(quiet_position: int, antiphase_position: int) -> np.ndarray:
    """Three 200 Hz tones (stereo): one 6 dB quieter, one with the right channel inverted.

    Over headphones the quieter tone is heard as quietest. Over loudspeakers the antiphase
    tone partly cancels in the air and sounds quietest instead, so a listener on speakers
    picks the wrong tone (the screening of Woods et al., 2017).
    """
    if quiet_position == antiphase_position or not {quiet_position, antiphase_position} <= {
        1,
        2,
        3,
    }:
        raise ValueError("positions must be two different numbers from 1 to 3")
    tone = _tone(HP_SR, HP_TONE_S, HP_FREQ_HZ, HP_RAMP_S) * HP_LEVEL
    gap = np.zeros((int(HP_SR * HP_GAP_S), 2), dtype=np.float32)
    parts = [np.zeros((int(HP_SR * 0.3), 2), dtype=np.float32)]
    for pos in (1, 2, 3):
        left = tone.copy()
        if pos == quiet_position:
            left *= 10 ** (HP_QUIET_DB / 20)
        right = -left if pos == antiphase_position else left
        parts.append(np.stack([left, right], axis=1))
        parts.append(gap)
    return np.concatenate(parts)


def calibration_noise(seed: int, seconds: float = 4.0) -> np.ndarray:
    """Pink-ish noise at about the level of the tones, to set a comfortable volume."""
    rng = np.random.default_rng(seed)
    n = int(HP_SR * seconds)
    white = rng.standard_normal(n)
    spectrum = np.fft.rfft(white)
    freqs = np.fft.rfftfreq(n, 1 / HP_SR)
    spectrum[1:] /= np.sqrt(freqs[1:] / freqs[1])
    spectrum[0] = 0
    pink = np.fft.irfft(spectrum, n)
    pink *= (HP_LEVEL / np.sqrt(2)) / (np.sqrt(np.mean(pink**2)) + 1e-12)
    ramp = np.linspace(0, 1, int(0.05 * HP_SR))
    pink[: ramp.size] *= ramp
    pink[-ramp.size :] *= ramp[::-1]
    return np.stack([pink, pink], axis=1).astype(np.float32)


def degrade(samples: np.ndarray, sr: int, seed: int) -> np.ndarray:
    """A clearly bad copy for trap items: band-limited to 300-1000 Hz, coarse 5-bit
    quantisation and noise at 0 dB SNR (relative to the speech's RMS)."""
    from scipy.signal import butter, sosfilt

    rng = np.random.default_rng(seed)
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    hi = min(1000.0, sr / 2 * 0.9)
    sos = butter(4, [300.0, hi], btype="bandpass", fs=sr, output="sos")
    x = sosfilt(sos, mono)
    peak = float(np.max(np.abs(x))) or 1.0
    x = np.round(x / peak * 15) / 15 * peak
    rms = float(np.sqrt(np.mean(x**2))) or 1e-3
    x = x + rng.standard_normal(x.size) * rms
    x *= 0.5 / (float(np.max(np.abs(x))) or 1.0)
    return x.astype(np.float32)


def mix_sides(user: np.ndarray, agent: np.ndarray) -> np.ndarray:
    """Mono mix of a duplex session's two sides (same rate); scaled down only if it clips."""
    n = max(user.size, agent.size)
    mix = np.zeros(n, dtype=np.float64)
    mix[: user.size] += user
    mix[: agent.size] += agent
    peak = float(np.max(np.abs(mix))) if n else 0.0
    if peak > 0.99:
        mix *= 0.99 / peak
    return mix.astype(np.float32)
