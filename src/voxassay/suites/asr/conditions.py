"""Condition builders for ASR robustness: noise, babble, music beds, phone band, overlap.

Pure functions on :class:`~voxassay.core.audio.Audio` plus :func:`build_conditions`, which
turns clean manifest items into constructed condition items (WAVs + manifest entries).

Definitions used throughout (levels are in dBFS: 0 dBFS is a full-scale square wave, so a
full-scale sine has an RMS level of -3 dBFS):

* **Active-speech power** ``P_s``: the signal is cut into 20 ms frames; a frame is
  *active* when its mean power is at least -80 dBFS and no more than 30 dB below the 95th
  percentile of all frame powers. ``P_s`` is the mean of the squared samples over the
  active frames. This follows the idea of ITU-T P.56 (the level of speech while it is
  present, so pauses do not lower it) with a fixed margin instead of P.56's adaptive
  threshold.
* **Noise power** ``P_n``: the mean of the squared samples of the noise segment actually
  added (over its whole length; beds are treated as stationary).
* **SNR** ``= 10 log10(P_s / P_n)`` in dB. The speech keeps its level; the noise is scaled.
  When the sum would exceed -1 dBFS peak, the whole mixture is scaled down (same factor for
  speech and noise, so the SNR is unchanged) and the factor is recorded as ``clip_scale``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import TARGET_SR, Audio, load_audio, resample, write_wav
from voxassay.core.errors import AudioError, InputError
from voxassay.core.items import Item, load_item_audio

CONDITIONS_VERSION = "1"
FRAME_S = 0.02
ACTIVE_MARGIN_DB = 30.0
ACTIVE_FLOOR_DBFS = -80.0
PEAK_CEILING = float(10 ** (-1.0 / 20.0))  # -1 dBFS
CROSSFADE_S = 0.05
SNR_DEFINITION = (
    "SNR = 10*log10(P_speech/P_noise); P_speech = mean square over active 20 ms frames "
    "(>= -80 dBFS and within 30 dB of the 95th-percentile frame power); P_noise = mean "
    "square of the added noise segment; speech level kept, noise scaled; mixture scaled "
    "down (clip_scale) if its peak would exceed -1 dBFS"
)

NoiseSource = str | Path | tuple[str, Audio]
Progress = Callable[[str], None]


# -- levels ---------------------------------------------------------------------------------


def _frame_powers(samples: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    n = max(1, round(frame_s * sr))
    if x.size < n:
        return np.array([float(np.mean(x**2))]) if x.size else np.zeros(0)
    usable = x[: (x.size // n) * n].reshape(-1, n)
    return np.mean(usable**2, axis=1)


def active_mask(samples: np.ndarray, sr: int, margin_db: float = ACTIVE_MARGIN_DB) -> np.ndarray:
    """Boolean per 20 ms frame: active speech as defined in the module docstring."""
    p = _frame_powers(samples, sr)
    if p.size == 0:
        return np.zeros(0, dtype=bool)
    ref = float(np.percentile(p, 95))
    threshold = max(ref * 10 ** (-margin_db / 10.0), 10 ** (ACTIVE_FLOOR_DBFS / 10.0))
    mask: np.ndarray = p >= threshold
    return mask


def active_speech_power(samples: np.ndarray, sr: int) -> float:
    """Active-speech power ``P_s`` (mean square over active frames); 0.0 when none."""
    p = _frame_powers(samples, sr)
    mask = active_mask(samples, sr)
    return float(np.mean(p[mask])) if mask.any() else 0.0


def active_speech_level(samples: np.ndarray, sr: int) -> float:
    """Active-speech level in dBFS, ``10 log10(P_s)``; ``-inf`` for silence."""
    p = active_speech_power(samples, sr)
    return 10.0 * float(np.log10(p)) if p > 0 else float("-inf")


def measure_snr(speech: np.ndarray, noise: np.ndarray, sr: int) -> float:
    """SNR in dB of a speech component and a noise component (module definition)."""
    ps = active_speech_power(speech, sr)
    pn = float(np.mean(np.asarray(noise, dtype=np.float64) ** 2))
    if ps <= 0 or pn <= 0:
        return float("inf") if pn <= 0 < ps else float("nan")
    return 10.0 * float(np.log10(ps / pn))


def set_active_level(audio: Audio, level_dbfs: float) -> Audio:
    """Scale ``audio`` so its active-speech level is ``level_dbfs``."""
    p = active_speech_power(audio.samples, audio.sr)
    if p <= 0:
        raise AudioError("cannot set the level of silent audio", kind="silent")
    gain = np.sqrt(10 ** (level_dbfs / 10.0) / p)
    return Audio((audio.samples * gain).astype(np.float32), audio.sr)


def set_rms_level(audio: Audio, level_dbfs: float) -> Audio:
    """Scale ``audio`` so its plain RMS level (whole signal) is ``level_dbfs``."""
    p = float(np.mean(np.asarray(audio.samples, dtype=np.float64) ** 2))
    if p <= 0:
        raise AudioError("cannot set the level of silent audio", kind="silent")
    gain = np.sqrt(10 ** (level_dbfs / 10.0) / p)
    return Audio((audio.samples * gain).astype(np.float32), audio.sr)


def _peak_guard(x: np.ndarray, ceiling: float = PEAK_CEILING) -> tuple[np.ndarray, float]:
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak <= ceiling or peak == 0.0:
        return x, 1.0
    scale = ceiling / peak
    return x * scale, scale


def trim_silence(audio: Audio) -> Audio:
    """Drop leading and trailing inactive frames (kept whole when nothing is active)."""
    mask = active_mask(audio.samples, audio.sr)
    if not mask.any():
        return audio
    n = max(1, round(FRAME_S * audio.sr))
    idx = np.flatnonzero(mask)
    start, end = idx[0] * n, min(audio.samples.size, (idx[-1] + 1) * n)
    return Audio(audio.samples[start:end], audio.sr)


# -- looping --------------------------------------------------------------------------------


def _seamless_cycle(x: np.ndarray, sr: int) -> np.ndarray:
    """A loop of ``x`` whose wrap-around is an equal-power crossfade of its tail and head."""
    cf = min(int(CROSSFADE_S * sr), x.size // 4)
    if cf < 2:
        return x
    t = np.linspace(0.0, 1.0, cf, endpoint=False) + 0.5 / cf
    cyc = x[: x.size - cf].astype(np.float64).copy()
    cyc[:cf] = x[:cf] * np.sin(t * np.pi / 2) + x[x.size - cf :] * np.cos(t * np.pi / 2)
    return cyc


def loop_to_length(
    x: np.ndarray, n: int, rng: np.random.Generator, sr: int
) -> tuple[np.ndarray, int, bool]:
    """A segment of ``x`` of ``n`` samples from a random offset, looping when ``x`` is short.

    Returns ``(segment, offset_samples, looped)``. A long enough ``x`` is cropped at an offset
    drawn uniformly from ``[0, len(x) - n]``; a short one is looped with a 50 ms crossfade at
    the seam and starts at an offset drawn from the whole loop.
    """
    if x.size == 0:
        raise AudioError("cannot loop empty audio", kind="empty")
    if x.size >= n:
        offset = int(rng.integers(0, x.size - n + 1))
        return np.asarray(x[offset : offset + n], dtype=np.float64), offset, False
    cyc = _seamless_cycle(np.asarray(x, dtype=np.float64), sr)
    offset = int(rng.integers(0, cyc.size))
    idx = (offset + np.arange(n)) % cyc.size
    return cyc[idx], offset, True


# -- conditions -----------------------------------------------------------------------------


def mix_at_snr_info(
    speech: Audio, noise: Audio, snr_db: float, rng: np.random.Generator
) -> tuple[Audio, dict[str, Any]]:
    """:func:`mix_at_snr` plus what was done: offset, gains, levels, ``clip_scale``."""
    noise = resample(noise, speech.sr)
    s = np.asarray(speech.samples, dtype=np.float64)
    if s.size == 0:
        raise AudioError("speech has no samples", kind="empty")
    ps = active_speech_power(s, speech.sr)
    if ps <= 0:
        raise AudioError("speech is silent: no active frames to set an SNR against", kind="silent")
    seg, offset, looped = loop_to_length(noise.samples, s.size, rng, speech.sr)
    pn = float(np.mean(seg**2))
    if pn <= 0:
        raise AudioError("noise segment is silent: cannot reach an SNR", kind="silent")
    gain = float(np.sqrt(ps / (pn * 10 ** (snr_db / 10.0))))
    mixed, clip_scale = _peak_guard(s + gain * seg)
    info = {
        "snr_db": float(snr_db),
        "speech_active_level_dbfs": round(10 * float(np.log10(ps)), 3),
        "noise_level_dbfs": round(10 * float(np.log10(pn * gain**2)), 3),
        "noise_gain": round(gain, 6),
        "noise_offset_s": round(offset / speech.sr, 4),
        "noise_looped": looped,
        "clip_scale": round(clip_scale, 6),
    }
    return Audio(mixed.astype(np.float32), speech.sr), info


def mix_at_snr(speech: Audio, noise: Audio, snr_db: float, rng: np.random.Generator) -> Audio:
    """Add ``noise`` to ``speech`` at ``snr_db`` (definitions in the module docstring).

    The noise is resampled to the speech rate and cropped (or looped with a crossfade) to the
    speech length from a random offset drawn from ``rng``. The speech keeps its level; the
    mixture is scaled down as a whole only if its peak would pass -1 dBFS (see
    :func:`mix_at_snr_info` for the recorded scale).
    """
    return mix_at_snr_info(speech, noise, snr_db, rng)[0]


def make_babble(
    talkers: Sequence[Audio],
    n_talkers: int,
    duration_s: float,
    rng: np.random.Generator,
    *,
    sr: int | None = None,
    level_dbfs: float = -30.0,
) -> Audio:
    """Babble: ``n_talkers`` streams of real speech summed at equal active-speech level.

    Each stream is one talker clip (edges trimmed of silence) looped to ``duration_s`` from
    its own random offset, scaled to the same active-speech level; the sum is scaled to an
    RMS level of ``level_dbfs`` (whole signal). Clips are drawn without replacement while
    there are enough, then reused (at other offsets). ``sr`` defaults to the first clip's.
    """
    if not talkers:
        raise InputError("make_babble needs at least one talker clip")
    if n_talkers < 1:
        raise InputError("make_babble needs n_talkers >= 1")
    rate = sr or talkers[0].sr
    n = max(1, round(duration_s * rate))
    order = list(rng.permutation(len(talkers)))
    while len(order) < n_talkers:
        order.append(int(rng.integers(0, len(talkers))))
    total = np.zeros(n, dtype=np.float64)
    for idx in order[:n_talkers]:
        clip = trim_silence(resample(talkers[int(idx)], rate))
        if active_speech_power(clip.samples, rate) <= 0:
            continue
        clip = set_active_level(clip, -26.0)
        seg, _, _ = loop_to_length(clip.samples, n, rng, rate)
        total += seg
    if not np.any(total):
        raise AudioError("babble talkers are all silent", kind="silent")
    out = set_rms_level(Audio(total.astype(np.float32), rate), level_dbfs)
    samples, _ = _peak_guard(out.samples.astype(np.float64))
    return Audio(samples.astype(np.float32), rate)


def g711_mulaw(pcm: np.ndarray) -> np.ndarray:
    """G.711 mu-law encode then decode of 16-bit integer samples (segmented, 8 bits)."""
    x = np.clip(pcm.astype(np.int64), -32768, 32767)
    sign = x < 0
    mag = np.minimum(np.abs(x), 32635) + 0x84
    exponent = np.clip(np.floor(np.log2(mag)).astype(np.int64) - 7, 0, 7)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    # code = ~(sign<<7 | exponent<<4 | mantissa); decoding inverts the same fields
    dec = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(sign, -dec, dec)


def g711_alaw(pcm: np.ndarray) -> np.ndarray:
    """G.711 A-law encode then decode of 16-bit integer samples (segmented, 8 bits)."""
    x = np.clip(pcm.astype(np.int64), -32768, 32767)
    negative = x < 0
    mag = np.minimum(np.where(negative, -x - 1, x), 32767) >> 3  # 13-bit magnitude
    exponent = np.where(mag < 32, 0, np.floor(np.log2(np.maximum(mag, 1))).astype(np.int64) - 4)
    exponent = np.clip(exponent, 0, 7)
    mantissa = np.where(exponent == 0, mag >> 1, mag >> np.maximum(exponent, 1)) & 0x0F
    dec = np.where(
        exponent == 0,
        (mantissa << 4) + 8,
        ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0),
    )
    return np.where(negative, -dec, dec)


def telephone(audio: Audio, codec: str = "mulaw", *, out_sr: int = TARGET_SR) -> Audio:
    """Narrow-band telephone channel.

    Resample to 8 kHz, band-pass 300-3400 Hz (4th-order Butterworth per edge, applied
    forward and backward so there is no delay), G.711 encode/decode (``codec`` ``mulaw``
    or ``alaw``; ``none`` skips it) at the signal's own level (16-bit full scale = 1.0),
    then resample to ``out_sr`` (16 kHz). Nothing above 4 kHz survives.
    """
    from scipy.signal import butter, sosfiltfilt

    if codec not in ("mulaw", "alaw", "none"):
        raise InputError(f"unknown telephone codec {codec!r}; use mulaw, alaw or none")
    narrow = resample(audio, 8000)
    sos = butter(4, [300.0, 3400.0], btype="bandpass", fs=8000, output="sos")
    x = np.asarray(narrow.samples, dtype=np.float64)
    if x.size > 27:
        x = sosfiltfilt(sos, x)
    if codec != "none":
        pcm = np.round(np.clip(x, -1.0, 32767 / 32768) * 32768.0)
        coded = g711_mulaw(pcm) if codec == "mulaw" else g711_alaw(pcm)
        x = coded.astype(np.float64) / 32768.0
    return resample(Audio(x.astype(np.float32), 8000), out_sr)


def overlap_conversation(
    utterances: Sequence[tuple[Audio, str, str]],
    overlap_s: float,
    rng: np.random.Generator,
    *,
    backchannels: Sequence[tuple[Audio, str, str]] = (),
    sr: int = TARGET_SR,
    level_dbfs: float = -26.0,
    backchannel_level_db: float = -6.0,
    lead_s: float = 0.3,
) -> tuple[Audio, str, list[dict[str, Any]]]:
    """A constructed conversation from ``(audio, text, speaker)`` utterances.

    Turns alternate between speakers (input order kept where possible; a speaker never
    overlaps themself: consecutive turns of one speaker get a 0.3 s gap). Each change of
    speaker starts the next turn ``overlap_s * U(0.5, 1.5)`` seconds before the previous
    one ends (at most half of either turn); a negative ``overlap_s`` is a gap instead.
    ``backchannels`` (short ``(audio, text, speaker)`` clips such as "yeah") are dropped into
    the middle (30-70 %) of turns of at least 1.5 s by another speaker, one per turn, while
    they last, 6 dB below the turns. Every turn is set to an active-speech level of
    ``level_dbfs``; the mixture is scaled down if its peak would pass -1 dBFS.

    Returns ``(audio, text, turns)``: the reference ``text`` is the concatenation of all
    texts (turns and backchannels) in order of start time; ``turns`` lists ``speaker``,
    ``start``, ``end`` (s), ``text`` and ``kind`` (``turn`` | ``backchannel``) in that order.
    """
    if len({spk for _, _, spk in utterances}) < 2:
        raise InputError("overlap_conversation needs utterances of at least two speakers")
    pending = list(utterances)
    ordered: list[tuple[Audio, str, str]] = []
    while pending:
        last = ordered[-1][2] if ordered else None
        pick = next((i for i, u in enumerate(pending) if u[2] != last), 0)
        ordered.append(pending.pop(pick))

    placed: list[tuple[np.ndarray, float, str, str, str]] = []  # samples, start, text, spk, kind
    t = lead_s
    prev_end = 0.0
    prev_spk: str | None = None
    prev_dur = 0.0
    for clip, text, spk in ordered:
        a = set_active_level(trim_silence(resample(clip, sr)), level_dbfs)
        dur = a.duration
        if prev_spk is None:
            start = t
        elif spk == prev_spk:
            start = prev_end + 0.3
        elif overlap_s >= 0:
            ov = overlap_s * float(rng.uniform(0.5, 1.5))
            start = prev_end - min(ov, 0.5 * prev_dur, 0.5 * dur)
        else:
            start = prev_end + (-overlap_s) * float(rng.uniform(0.5, 1.5))
        placed.append((a.samples, start, text, spk, "turn"))
        prev_end, prev_spk, prev_dur = start + dur, spk, dur

    bc_queue = list(backchannels)
    gain = 10 ** (backchannel_level_db / 20.0)
    for samples, start, _, spk, _ in list(placed):
        dur = samples.size / sr
        if not bc_queue or dur < 1.5:
            continue
        choice = next((i for i, b in enumerate(bc_queue) if b[2] != spk), None)
        if choice is None:
            continue
        bc_audio, bc_text, bc_spk = bc_queue.pop(choice)
        b = set_active_level(trim_silence(resample(bc_audio, sr)), level_dbfs)
        at = start + dur * float(rng.uniform(0.3, 0.7))
        placed.append((b.samples * gain, at, bc_text, bc_spk, "backchannel"))

    total_s = max(st + s.size / sr for s, st, _, _, _ in placed) + lead_s
    out = np.zeros(int(np.ceil(total_s * sr)), dtype=np.float64)
    for s, st, _, _, _ in placed:
        i0 = round(st * sr)
        out[i0 : i0 + s.size] += s
    out, _ = _peak_guard(out)
    placed.sort(key=lambda p: (p[1], p[4] != "turn"))
    turns = [
        {
            "speaker": spk,
            "start": round(st, 3),
            "end": round(st + s.size / sr, 3),
            "text": text,
            "kind": kind,
        }
        for s, st, text, spk, kind in placed
    ]
    text = " ".join(p[2].strip() for p in placed if p[2].strip())
    return Audio(out.astype(np.float32), sr), text, turns


# -- manifest level -------------------------------------------------------------------------


def item_rng(seed: int, key: str) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``key`` (stable across runs and order)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(key.encode("utf-8"))])


def _load_item_audio(item: Item) -> Audio:
    if not item.audio_filepath:
        raise InputError(
            f"item {item.id!r} has no audio_filepath (multi-clip items are not supported)"
        )
    return load_item_audio(item, TARGET_SR)


def _bed_name(src: NoiseSource, index: int) -> tuple[str, Audio]:
    if isinstance(src, tuple):
        return src[0], src[1]
    p = Path(src)
    return p.stem, load_audio(p, TARGET_SR)


def _new_item(
    src: Item, new_id: str, path: Path, audio: Audio, labels: dict[str, Any], recipe: dict[str, Any]
) -> Item:
    merged = {k: v for k, v in src.labels.items() if k not in ("condition", "background", "snr_db")}
    merged.update(labels)
    merged["source_item"] = src.id
    merged["constructed"] = True
    return Item(
        id=new_id,
        audio_filepath=str(path),
        duration=round(audio.duration, 3),
        text=src.text,
        speaker=src.speaker,
        labels=merged,
        meta={"recipe": recipe},
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _snr_tag(snr: float) -> str:
    return f"{snr:g}".replace("-", "m").replace(".", "p")


def build_conditions(
    items: Sequence[Item],
    out_dir: str | Path,
    *,
    noise: Sequence[NoiseSource] = (),
    babble_from: Sequence[Item | str | Path] | None = None,
    music: bool | Sequence[NoiseSource] = True,
    snrs: Sequence[float] = (20, 10, 5, 0),
    telephone: bool = True,
    telephone_codec: str = "mulaw",
    conversations: int = 0,
    overlap_s: float = 0.6,
    backchannels: Sequence[Item] = (),
    babble_talkers: int = 4,
    music_styles: Sequence[str] = ("piano", "band"),
    seed: int = 0,
    progress: Progress | None = None,
) -> list[Item]:
    """Write constructed condition WAVs (16 kHz PCM16) to ``out_dir``; return their items.

    For every source item (audio loaded at 16 kHz):

    * ``background`` for each bed type present (``noise`` beds given as paths or
      ``(name, Audio)``; ``babble`` from ``babble_from`` items/paths, default the input items
      themselves, never a clip with the target's id or text, and only clips of other
      speakers when there are ``babble_talkers`` of them; ``music``
      rendered by :mod:`voxassay.suites.asr.music` when ``True`` or given as beds) at each SNR
      in ``snrs``. Beds of one type rotate over items; one item uses the same bed at all SNRs.
      Labels: ``condition=background``, ``background``, ``bed``, ``snr_db``.
    * ``channel`` (when ``telephone``): ``channel=telephone``, ``codec``.

    Plus ``conversations`` constructed overlaps (two speakers, up to four turns, optional
    ``backchannels`` items) with ``condition=conversational`` and the turns in ``meta``.

    New items keep the source's ``text``, ``speaker`` and other labels (accent, voice, ...),
    and add ``source_item`` and ``constructed: true``; ``meta.recipe`` says how each was made.
    Randomness comes from :func:`item_rng` keyed by ``seed`` and the new item's id, so the
    same inputs and seed give byte-identical WAVs.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say: Progress = progress or (lambda _msg: None)
    sources = [(it, _load_item_audio(it)) for it in items]
    results: list[Item] = []

    beds: dict[str, list[tuple[str, Audio, dict[str, Any]]]] = {}
    if noise:
        beds["noise"] = [(*_bed_name(src, i), {}) for i, src in enumerate(noise)]
    if music is True:
        from voxassay.suites.asr.music import render_music_info

        longest = max((a.duration for _, a in sources), default=5.0)
        length = min(60.0, longest + 1.0)
        rendered = []
        for k, style in enumerate(music_styles):
            say(f"rendering music bed {style} ({length:.1f} s)")
            audio, info = render_music_info(length, sr=TARGET_SR, seed=seed + k, style=style)
            rendered.append((f"music-{style}", audio, info))
        beds["music"] = rendered
    elif music:
        beds["music"] = [(*_bed_name(src, i), {}) for i, src in enumerate(music)]

    pool: list[tuple[str, str | None, str | None, Audio]] = []  # (key, text, speaker, audio)
    if babble_from is None:
        pool = [(it.id, it.text, it.speaker, a) for it, a in sources]
    else:
        for entry in babble_from:
            if isinstance(entry, Item):
                pool.append((entry.id, entry.text, entry.speaker, _load_item_audio(entry)))
            else:
                pool.append((str(entry), None, None, load_audio(entry, TARGET_SR)))

    bed_types = [t for t in ("noise", "babble", "music") if t in beds or (t == "babble" and pool)]
    for n_item, (src, speech) in enumerate(sources):
        say(f"conditions for {src.id} ({n_item + 1}/{len(sources)})")
        for btype in bed_types:
            bed_meta: dict[str, Any] = {}
            if btype == "babble":
                others = _babble_candidates(pool, src, babble_talkers)
                if not others:
                    continue
                rng_b = item_rng(seed, f"{src.id}/babble")
                talkers = [others[int(i)] for i in rng_b.permutation(len(others))[:babble_talkers]]
                bed_name = f"babble{len(talkers)}"
                bed = make_babble(
                    [t[3] for t in talkers], len(talkers), speech.duration + 0.5, rng_b
                )
                bed_meta = {"talkers": [t[0] for t in talkers], "n_talkers": len(talkers)}
            else:
                choices = beds[btype]
                bed_name, bed, bed_meta = choices[n_item % len(choices)]
            for snr in snrs:
                new_id = f"{src.id}__{btype}-{_safe(bed_name)}-snr{_snr_tag(float(snr))}"
                mixed, info = mix_at_snr_info(speech, bed, float(snr), item_rng(seed, new_id))
                path = out / f"{_safe(new_id)}.wav"
                write_wav(path, mixed)
                recipe = {
                    "builder": "voxassay.suites.asr.conditions.build_conditions",
                    "version": CONDITIONS_VERSION,
                    "condition": "background",
                    "background": btype,
                    "bed": bed_name,
                    "bed_info": bed_meta,
                    "seed": seed,
                    "snr_definition": SNR_DEFINITION,
                    **info,
                }
                labels = {
                    "condition": "background",
                    "background": btype,
                    "bed": bed_name,
                    "snr_db": float(snr),
                }
                results.append(_new_item(src, new_id, path, mixed, labels, recipe))
        if telephone:
            new_id = f"{src.id}__telephone-{telephone_codec}"
            phone = telephone_channel(speech, telephone_codec)
            path = out / f"{_safe(new_id)}.wav"
            write_wav(path, phone)
            recipe = {
                "builder": "voxassay.suites.asr.conditions.telephone",
                "version": CONDITIONS_VERSION,
                "condition": "channel",
                "chain": f"resample 8 kHz, band-pass 300-3400 Hz (Butterworth 4, zero-phase), G.711 {telephone_codec}, resample 16 kHz",
            }
            labels = {"condition": "channel", "channel": "telephone", "codec": telephone_codec}
            results.append(_new_item(src, new_id, path, phone, labels, recipe))

    if conversations > 0:
        results.extend(
            _build_conversations(sources, out, conversations, overlap_s, backchannels, seed, say)
        )
    return results


def _babble_candidates(
    pool: list[tuple[str, str | None, str | None, Audio]], src: Item, wanted: int
) -> list[tuple[str, str | None, str | None, Audio]]:
    """Babble clips for ``src``: never its own clip or text; other speakers when enough."""
    others = [p for p in pool if p[0] != src.id and (src.text is None or p[1] != src.text)]
    if src.speaker is not None:
        strangers = [p for p in others if p[2] != src.speaker]
        if len(strangers) >= wanted:
            return strangers
    return others


telephone_channel = telephone  # alias: build_conditions' ``telephone`` flag shadows the name


def _build_conversations(
    sources: list[tuple[Item, Audio]],
    out: Path,
    count: int,
    overlap_s: float,
    backchannels: Sequence[Item],
    seed: int,
    say: Progress,
) -> list[Item]:
    by_speaker: dict[str, list[tuple[Item, Audio]]] = {}
    for it, a in sources:
        if it.text:
            by_speaker.setdefault(it.speaker or it.id, []).append((it, a))
    speakers = list(by_speaker)  # first-appearance order (deterministic)
    if len(speakers) < 2:
        raise InputError("conversations need source items of at least two speakers")
    bc_pool = [
        (load_item_audio(b, TARGET_SR), b.text or "", b.speaker or b.id) for b in backchannels
    ]
    results = []
    for k in range(count):
        conv_id = f"conv-{k:02d}"
        say(f"constructing conversation {conv_id}")
        rng = item_rng(seed, conv_id)
        a_spk, b_spk = speakers[k % len(speakers)], speakers[(k + 1) % len(speakers)]
        used: list[tuple[Item, Audio]] = []
        for turn in range(4):
            spk = a_spk if turn % 2 == 0 else b_spk
            options = [u for u in by_speaker[spk] if u[0].text not in {x[0].text for x in used}]
            if not options:
                continue
            used.append(options[int(rng.integers(0, len(options)))])
        utts = [(a, it.text or "", it.speaker or it.id) for it, a in used]
        bcs = [b for b in bc_pool if b[2] in (a_spk, b_spk)]
        audio, text, turns = overlap_conversation(utts, overlap_s, rng, backchannels=bcs[:2])
        path = out / f"{conv_id}.wav"
        write_wav(path, audio)
        accents = sorted({str(it.labels["accent"]) for it, _ in used if "accent" in it.labels})
        labels: dict[str, Any] = {
            "condition": "conversational",
            "constructed": True,
            "speakers": sorted({t["speaker"] for t in turns}),
        }
        if len(accents) == 1:
            labels["accent"] = accents[0]
        recipe = {
            "builder": "voxassay.suites.asr.conditions.overlap_conversation",
            "version": CONDITIONS_VERSION,
            "note": "constructed conversation: separate utterances overlapped, not a recording",
            "sources": [it.id for it, _ in used],
            "overlap_s": overlap_s,
            "n_turns": sum(1 for t in turns if t["kind"] == "turn"),
            "n_backchannels": sum(1 for t in turns if t["kind"] == "backchannel"),
            "seed": seed,
            "reference": "texts concatenated in order of start time",
        }
        results.append(
            Item(
                id=conv_id,
                audio_filepath=str(path),
                duration=round(audio.duration, 3),
                text=text,
                speaker=None,
                labels=labels,
                meta={"recipe": recipe, "turns": turns},
            )
        )
    return results


__all__ = [
    "CONDITIONS_VERSION",
    "SNR_DEFINITION",
    "active_mask",
    "active_speech_level",
    "active_speech_power",
    "build_conditions",
    "item_rng",
    "loop_to_length",
    "make_babble",
    "measure_snr",
    "mix_at_snr",
    "mix_at_snr_info",
    "overlap_conversation",
    "set_active_level",
    "set_rms_level",
    "telephone",
    "trim_silence",
]
