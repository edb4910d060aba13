"""Per-item automatic metrics of the TTS suite, and the per-item scores of the profile.

:func:`item_metrics` runs every measure on one synthesized item: the ASR round trip
(``suites/tts/spoken.py``), quality and artifact detectors (``measures/quality.py``), rate
and duration sanity, prosody (``measures/prosody.py``), the speaker embedding and, for
long-form items, the window-by-window stability (``measures/speaker.py``). Each measure is
guarded: one that raises or is not installed records its reason in
``output["unavailable"][name]`` and every other metric stays.
Per-item *scores* of the profile (primary metric -> [0, 1]) live in ``profile.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from voxassay.core.audio import Audio, resample

METRICS_VERSION = "tts-metrics-1"
"""Bumps whenever a metric's definition or a measure's settings change."""

RATE_OK_MIN_WPM = 90.0
RATE_OK_MAX_WPM = 230.0
RATE_OK_MAX_SILENCE_S = 2.0
LONGFORM_WINDOW_S = 6.0
LONGFORM_MIN_WINDOW_S = 3.0

_DNSMOS_KEYS = {
    "ovrl_mos": "dnsmos_ovrl",
    "sig_mos": "dnsmos_sig",
    "bak_mos": "dnsmos_bak",
    "p808_mos": "dnsmos_p808",
}

_WORD = re.compile(r"[\w']+", re.UNICODE)


def word_count(text: str) -> int:
    """Number of written words (runs of letters, digits and apostrophes)."""
    return len(_WORD.findall(text or ""))


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))


def _floats(d: Mapping[str, Any] | None, keys: Sequence[str] | None = None) -> dict[str, float]:
    """The finite numeric entries of ``d`` (restricted to ``keys`` when given) as floats."""
    if not d:
        return {}
    out: dict[str, float] = {}
    for k, v in d.items():
        if keys is not None and k not in keys:
            continue
        if _finite(v):
            out[str(k)] = float(v)
    return out


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class _Guard:
    """Collects metrics and per-measure failure reasons."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.extras: dict[str, Any] = {}
        self.unavailable: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        import time

        t0 = time.perf_counter()
        try:
            return fn()
        except ImportError as exc:
            self.unavailable[name] = f"not installed: {exc}"[:300]
        except Exception as exc:  # one failing measure never takes the others down
            self.unavailable[name] = _reason(exc)
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
        return None


# -- the measures ---------------------------------------------------------------------------


def _round_trip(g: _Guard, item_text: str, transcript: str | None, critical: list[str]) -> None:
    if transcript is None:
        g.unavailable.setdefault("asr", "no transcript (ASR unavailable or failed)")
        return

    def go() -> None:
        from voxassay.suites.tts.spoken import round_trip_metrics

        res = round_trip_metrics(item_text, transcript, critical)
        for k, v in res.items():
            if _finite(v):
                g.metrics[k] = float(v)
            elif k == "critical":
                g.extras["critical"] = v
            elif k not in g.extras:
                g.extras[f"round_trip_{k}" if k != "normalized" else "normalized"] = v

    g.run("round_trip", go)


def _quality(g: _Guard, audio: Audio) -> None:
    def dns() -> None:
        from voxassay.measures import quality

        reason = quality.dnsmos_unavailable()
        if reason:
            g.unavailable["dnsmos"] = str(reason)
            return
        for k, v in _floats(quality.dnsmos(audio)).items():
            g.metrics[_DNSMOS_KEYS.get(k, k)] = v

    g.run("dnsmos", dns)

    def art() -> None:
        from voxassay.measures.quality import artifact_metrics

        g.metrics.update(_floats(artifact_metrics(audio)))

    g.run("artifacts", art)


def _rate(g: _Guard, audio: Audio, text: str) -> None:
    """``duration_s``; ``words_per_min`` = written words / speech span (duration less the
    leading and trailing silence when the artifact detector measured them) x 60; ``rate_ok``
    = 1 when 90 <= wpm <= 230 and no inner silence is longer than 2 s."""
    dur = audio.duration
    g.metrics["duration_s"] = round(dur, 4)
    span = dur - g.metrics.get("lead_silence_s", 0.0) - g.metrics.get("trail_silence_s", 0.0)
    words = word_count(text)
    if span <= 0.05 or words == 0:
        g.unavailable["rate"] = "no speech span or no words to time"
        return
    wpm = words / span * 60.0
    g.metrics["words_per_min"] = round(wpm, 3)
    longest = g.metrics.get("longest_silence_s")
    silence_ok = longest is None or longest <= RATE_OK_MAX_SILENCE_S
    g.metrics["rate_ok"] = float(RATE_OK_MIN_WPM <= wpm <= RATE_OK_MAX_WPM and silence_ok)


def _prosody(g: _Guard, audio: Audio, text: str) -> dict[str, float]:
    def go() -> dict[str, float]:
        from voxassay.measures.prosody import prosody_features

        feats = _floats(prosody_features(audio, text))
        for k in ("f0_median_st", "f0_range_st", "energy_db", "rate_sps", "pause_ratio"):
            if k in feats:
                g.metrics[k] = feats[k]
        if "voiced_fraction" in feats:
            g.metrics["voiced_fraction"] = feats["voiced_fraction"]
        return feats

    out = g.run("prosody", go)
    return out or {}


def _embed(encoder: Any, audio: Audio) -> np.ndarray:
    vec = np.asarray(encoder.embed(audio), dtype=np.float64).reshape(-1)
    if vec.size == 0 or not np.all(np.isfinite(vec)):
        raise ValueError("speaker embedding is empty or not finite")
    return vec


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    from voxassay.measures.speaker import cosine

    return float(cosine(a, b))


def _speaker(g: _Guard, audio: Audio, encoder: Any, encoder_reason: str | None) -> None:
    if encoder is None:
        g.unavailable["speaker"] = encoder_reason or "no speaker encoder"
        return

    def go() -> None:
        vec = _embed(encoder, audio)
        g.extras["embedding"] = [round(float(x), 5) for x in vec]

    g.run("speaker", go)


def _windows(audio: Audio, win_s: float) -> list[Audio]:
    """Consecutive windows of ``win_s`` seconds; a last piece shorter than 3 s joins the
    previous window."""
    n = round(win_s * audio.sr)
    total = len(audio.samples)
    if n <= 0 or total <= n:
        return [audio]
    starts = list(range(0, total, n))
    if total - starts[-1] < LONGFORM_MIN_WINDOW_S * audio.sr and len(starts) > 1:
        starts.pop()
    out = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else total
        out.append(Audio(audio.samples[s:e], audio.sr))
    return out


def _thirds(audio: Audio) -> tuple[Audio, Audio]:
    n = len(audio.samples) // 3
    return Audio(audio.samples[:n], audio.sr), Audio(audio.samples[-n:], audio.sr)


def _text_thirds(text: str) -> tuple[str, str]:
    words = text.split()
    k = max(1, len(words) // 3)
    return " ".join(words[:k]), " ".join(words[-k:])


def _longform(g: _Guard, audio: Audio, text: str, encoder: Any, encoder_reason: str | None) -> None:
    """``longform_sim_min/mean``: cosine of each ~6 s window's embedding with the first
    window's (windows 2..n; n >= 2 needed). ``longform_rate_drift`` = |rate_sps(last third) -
    rate_sps(first third)| / rate_sps(first third); ``longform_loudness_drift_db`` =
    |energy_db(last third) - energy_db(first third)|."""
    wins = _windows(audio, LONGFORM_WINDOW_S)
    if encoder is None:
        g.unavailable["longform_speaker"] = encoder_reason or "no speaker encoder"
    elif len(wins) < 2:
        g.unavailable["longform_speaker"] = (
            f"audio of {audio.duration:.1f} s gives fewer than two {LONGFORM_WINDOW_S:g} s windows"
        )
    else:

        def sims() -> None:
            if hasattr(encoder, "embed_windows"):
                raw = encoder.embed_windows(audio, LONGFORM_WINDOW_S, LONGFORM_WINDOW_S)
                vecs = [np.asarray(v, dtype=np.float64).reshape(-1) for v in raw]
            else:
                vecs = [_embed(encoder, w) for w in wins]
            if len(vecs) < 2:
                raise ValueError(f"only {len(vecs)} window(s) with enough speech")
            cos = [_cos(vecs[0], v) for v in vecs[1:]]
            g.metrics["longform_sim_min"] = round(float(min(cos)), 6)
            g.metrics["longform_sim_mean"] = round(float(np.mean(cos)), 6)
            g.extras["longform_windows"] = len(wins)

        g.run("longform_speaker", sims)

    def drift() -> None:
        from voxassay.measures.prosody import prosody_features

        first, last = _thirds(audio)
        t_first, t_last = _text_thirds(text)
        fa = _floats(prosody_features(first, t_first))
        fb = _floats(prosody_features(last, t_last))
        if fa.get("rate_sps", 0.0) > 0 and "rate_sps" in fb:
            g.metrics["longform_rate_drift"] = round(
                abs(fb["rate_sps"] - fa["rate_sps"]) / fa["rate_sps"], 6
            )
        if "energy_db" in fa and "energy_db" in fb:
            g.metrics["longform_loudness_drift_db"] = round(
                abs(fb["energy_db"] - fa["energy_db"]), 6
            )

    g.run("longform_drift", drift)


def item_metrics(
    item: Any,
    audio: Audio,
    transcript: str | None,
    *,
    encoder: Any = None,
    encoder_reason: str | None = None,
    measures: Sequence[str] | None = None,
    timings: dict[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Every per-item metric of the contract for one synthesized item.

    ``item`` is a ``core.items.Item`` from ``to_item()`` (``text``, ``meta.critical_tokens``,
    ``meta.segments``) or a ``TTSItem``; ``audio`` the synthesized audio at its own rate;
    ``transcript`` the ASR text (None: the round trip is unavailable); ``encoder`` a loaded
    speaker encoder with ``embed(audio)`` (None: ``encoder_reason`` is recorded). ``measures``
    limits the measures run (names: round_trip, quality, rate, prosody, speaker, longform).

    Returns ``(metrics, output_extras)``: float metrics, and extras for ``Record.output``
    (``critical``, ``embedding``, ``unavailable`` when any measure could not run).
    ``timings`` (if given) accumulates seconds per measure.
    """
    text = getattr(item, "text", None) or ""
    meta = getattr(item, "meta", None) or {}
    critical = list(getattr(item, "critical_tokens", None) or meta.get("critical_tokens") or [])
    segments = getattr(item, "segments", None) or meta.get("segments")
    want = set(measures) if measures is not None else None

    def on(name: str) -> bool:
        return want is None or name in want

    g = _Guard()
    if on("round_trip"):
        _round_trip(g, text, transcript, critical)
    if on("quality"):
        _quality(g, audio)
    if on("rate"):
        g.run("rate", lambda: _rate(g, audio, text))
    if on("prosody"):
        _prosody(g, audio, text)
    if on("speaker"):
        _speaker(g, audio, encoder, encoder_reason)
    if on("longform") and segments:
        _longform(g, audio, text, encoder, encoder_reason)
    extras = dict(g.extras)
    if g.unavailable:
        extras["unavailable"] = dict(g.unavailable)
    if timings is not None:
        for k, v in g.timings.items():
            timings[k] = timings.get(k, 0.0) + v
    return g.metrics, extras


MAX_TEXT_CHARS = 20_000


def text_problem(text: str | None) -> str | None:
    """Why ``text`` is not sent to a synthesizer (an ``input`` error record), or None.

    Empty or whitespace-only text; more than ``MAX_TEXT_CHARS`` characters (long-form items
    are a few thousand); control characters other than tab and newline, unpaired surrogates
    and unassigned code points (named with their position). Emoji and non-Latin scripts are
    sent: whether a voice copes with them is the synthesizer's result to record.
    """
    import unicodedata

    if text is None or not text.strip():
        return "item has no text"
    if len(text) > MAX_TEXT_CHARS:
        return f"text too long: {len(text)} characters (limit {MAX_TEXT_CHARS})"
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if (cat == "Cc" and ch not in "\t\n\r") or cat in ("Cs", "Cn"):
            return f"unsupported character U+{ord(ch):04X} ({cat}) at position {i}"
    return None


def audio_problem(audio: Audio) -> str | None:
    """Why ``audio`` cannot be scored (``empty_audio``), or None.

    Empty, non-finite (NaN/inf) and all-silent (peak below 1e-4, about -80 dBFS) audio are
    refused; so is a sample rate outside 4 kHz..192 kHz.
    """
    x = np.asarray(audio.samples)
    if not isinstance(audio.sr, int | np.integer) or not 4000 <= int(audio.sr) <= 192_000:
        return f"implausible sample rate {audio.sr!r}"
    if x.size == 0:
        return "no samples"
    if not np.all(np.isfinite(x)):
        return f"{int(np.count_nonzero(~np.isfinite(x)))} NaN or infinite samples"
    peak = float(np.max(np.abs(x)))
    if peak < 1e-4:
        return f"silent audio (peak {peak:.1e})"
    return None


def to_16k(audio: Audio) -> Audio:
    """Mono float32 at 16 kHz (the ASR's rate), clipped to [-1, 1]."""
    a = resample(Audio(np.asarray(audio.samples, dtype=np.float32), int(audio.sr)), 16_000)
    return Audio(np.clip(a.samples, -1.0, 1.0).astype(np.float32, copy=False), 16_000)


__all__ = [
    "MAX_TEXT_CHARS",
    "METRICS_VERSION",
    "audio_problem",
    "item_metrics",
    "text_problem",
    "to_16k",
    "word_count",
]
