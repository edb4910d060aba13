"""Validation of the automatic quality metrics against real listeners (MUSHRA, neural codecs).

Data: ../shared/data/ratings/neural_codec_mushra (Stahl et al. 2024, CC BY 4.0): 16 signals x
9 conditions rated 0-100 by 21 listeners; 8 conditions have audio (the Anchor has none and is
left out), so 128 stimuli. Every automatic quality metric is computed per stimulus and compared
with the mean listener score by Spearman's rank correlation, at stimulus level (n = 128) and at
condition level (n = 8 condition means), each with a bootstrap CI that resamples signals.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import load_audio
from voxassay.measures.quality import QUALITY_VERSION, artifact_metrics, dnsmos, dnsmos_unavailable

VALIDATION_VERSION = "tts-quality-validation-1"

# metric id -> which direction is better ("higher", "lower", "lower |x|", "target")
METRIC_DIRECTIONS: dict[str, str] = {
    "dnsmos_ovrl": "higher",
    "dnsmos_sig": "higher",
    "dnsmos_bak": "higher",
    "dnsmos_p808": "higher",
    "bandwidth_hz": "higher",
    "clipping_fraction": "lower",
    "dropout_count": "lower",
    "longest_silence_s": "lower",
    "lead_silence_s": "lower",
    "trail_silence_s": "lower",
    "dc_offset": "lower |x|",
    "loudness_lufs": "target (no direction)",
    "peak_dbfs": "target (no direction)",
}
_DNSMOS_KEYS = {"ovrl_mos": "dnsmos_ovrl", "sig_mos": "dnsmos_sig", "bak_mos": "dnsmos_bak",
                "p808_mos": "dnsmos_p808"}  # fmt: skip


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson of average ranks); NaN when either side is constant."""
    from scipy.stats import rankdata

    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def load_ratings(ratings_dir: Path, screened_only: bool = False) -> list[dict[str, Any]]:
    """Rows of ratings_long.csv (rater_id, item_id = signal, system_id = condition, score,
    audio_path); ``screened_only`` keeps the authors' screened raters (19 of 21)."""
    path = Path(ratings_dir) / "ratings_long.csv"
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if screened_only:
        rows = [r for r in rows if r.get("rater_kept_in_filtered") == "1"]
    return rows


def _stimulus_metrics(path: Path) -> tuple[dict[str, float], str | None]:
    """All automatic quality metrics of one file, or ({}, reason)."""
    try:
        audio = load_audio(path, sr=None)
        out = dict(artifact_metrics(audio))
        d = dnsmos(audio)
        for k, v in d.items():
            out[_DNSMOS_KEYS[k]] = v
        return out, None
    except Exception as exc:  # one bad stimulus is an error record, not a crash
        return {}, f"{type(exc).__name__}: {exc}"


def validate_quality_metrics(
    ratings_dir: Path,
    n_boot: int = 1000,
    seed: int = 0,
    screened_only: bool = False,
    max_signals: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Spearman of each automatic quality metric with mean MUSHRA scores.

    Stimulus level: one point per (signal, condition) with audio; human score = mean of its
    ratings (10-11 listeners). Condition level: per condition, mean over its signals of the
    metric and of the stimulus means (n = 8). CI: percentile bootstrap (``n_boot`` resamples,
    ``seed``) over the 16 signals with replacement, recomputing both correlations; resamples
    where a side is constant are skipped (``boot_valid`` counts those kept). A metric constant
    over all stimuli is reported with ``constant: true`` and no correlation.
    ``max_signals`` keeps the first N signals (sorted ids; a quick look, wider CIs);
    ``progress(done, total)`` is called after each stimulus.
    """
    reason = dnsmos_unavailable()
    if reason:
        raise RuntimeError(f"DNSMOS unavailable: {reason}")
    ratings_dir = Path(ratings_dir)
    rows = load_ratings(ratings_dir, screened_only)
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    paths: dict[tuple[str, str], str] = {}
    no_audio: set[str] = set()
    for r in rows:
        key = (r["item_id"], r["system_id"])
        scores[key].append(float(r["score"]))
        if r["audio_path"]:
            paths[key] = r["audio_path"]
        else:
            no_audio.add(r["system_id"])
    errors: list[dict[str, str]] = []
    stimuli: list[dict[str, Any]] = []
    keep = sorted({k[0] for k in paths})[:max_signals] if max_signals else None
    todo = [k for k in sorted(paths) if keep is None or k[0] in keep]
    for done, key in enumerate(todo, 1):
        m, err = _stimulus_metrics(ratings_dir / paths[key])
        if progress is not None:
            progress(done, len(todo))
        if err:
            errors.append({"signal": key[0], "condition": key[1], "reason": err})
            continue
        stimuli.append(
            {
                "signal": key[0],
                "condition": key[1],
                "human": float(np.mean(scores[key])),
                "n_ratings": len(scores[key]),
                "metrics": m,
            }
        )
    signals = sorted({s["signal"] for s in stimuli})
    conditions = sorted({s["condition"] for s in stimuli})
    sig_idx = np.array([signals.index(s["signal"]) for s in stimuli])
    cond_idx = np.array([conditions.index(s["condition"]) for s in stimuli])
    human = np.array([s["human"] for s in stimuli])
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(signals), len(signals)) for _ in range(n_boot)]
    # row indices of each signal, for the cluster resample
    by_signal = [np.nonzero(sig_idx == i)[0] for i in range(len(signals))]

    def cond_means(rows_sel: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = cond_idx[rows_sel]
        cnt = np.bincount(c, minlength=len(conditions)).astype(float)
        ok = cnt > 0
        mv = np.bincount(c, weights=v[rows_sel], minlength=len(conditions))[ok] / cnt[ok]
        mh = np.bincount(c, weights=human[rows_sel], minlength=len(conditions))[ok] / cnt[ok]
        return mv, mh

    metrics_out: list[dict[str, Any]] = []
    all_rows = np.arange(len(stimuli))
    for name, better in METRIC_DIRECTIONS.items():
        vals = np.array([s["metrics"].get(name, np.nan) for s in stimuli], dtype=float)
        have = np.isfinite(vals)
        entry: dict[str, Any] = {"metric": name, "better": better, "n_missing": int((~have).sum())}
        if not have.any():
            entry.update(constant=None, note="not computed on any stimulus")
            metrics_out.append(entry)
            continue
        v = np.where(have, vals, np.nanmean(vals))
        entry["range"] = [float(np.nanmin(vals)), float(np.nanmax(vals))]
        if np.ptp(vals[have]) == 0:
            entry.update(constant=True, note=f"constant ({vals[have][0]:g}) on every stimulus")
            metrics_out.append(entry)
            continue
        entry["constant"] = False
        keep = all_rows[have]
        rho_s = _spearman(v[keep], human[keep])
        mv, mh = cond_means(keep, v)
        rho_c = _spearman(mv, mh)
        bs: list[float] = []
        bc: list[float] = []
        for d in draws:
            sel = np.concatenate([by_signal[i] for i in d])
            sel = sel[have[sel]]
            bs.append(_spearman(v[sel], human[sel]))
            a, b = cond_means(sel, v)
            bc.append(_spearman(a, b))
        entry["stimulus"] = _summary(rho_s, bs, int(keep.size))
        entry["condition"] = _summary(rho_c, bc, int(mv.size))
        entry["condition_means"] = {c: float(x) for c, x in zip(conditions, mv, strict=False)}
        metrics_out.append(entry)
    cond_human: dict[str, float] = {}
    for ci, c in enumerate(conditions):
        cond_human[c] = float(human[cond_idx == ci].mean())
    notes = [
        "Human score: mean MUSHRA (0-100) over the listeners who rated the stimulus"
        + (" (authors' screened raters only)." if screened_only else " (all 21 listeners)."),
        f"Conditions without audio left out: {', '.join(sorted(no_audio)) or 'none'}.",
        f"CIs: 95 % percentile bootstrap over the {len(signals)} signals ({n_boot} resamples, "
        f"seed {seed}); the condition level has only {len(conditions)} points, so its CIs are "
        "wide.",
        "Codec artefacts differ from TTS errors: agreement here says the metric tracks signal "
        "degradation, not that it judges wrong words, prosody or voice.",
        "Metrics with no direction (loudness, peak) are reported for completeness; a "
        "correlation there reflects level differences between codecs, not quality.",
    ]
    return {
        "version": VALIDATION_VERSION,
        "quality_version": QUALITY_VERSION,
        "dataset": str(ratings_dir),
        "n_stimuli": len(stimuli),
        "n_signals": len(signals),
        "n_conditions": len(conditions),
        "n_ratings": int(sum(s["n_ratings"] for s in stimuli)),
        "conditions": [{"condition": c, "human_mean": cond_human[c]} for c in conditions],
        "metrics": metrics_out,
        "stimuli": stimuli,
        "errors": errors,
        "notes": notes,
    }


def _summary(rho: float, boots: list[float], n: int) -> dict[str, Any]:
    b = np.array([x for x in boots if math.isfinite(x)])
    lo, hi = (
        (float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))) if b.size else (None, None)
    )
    return {
        "spearman": None if not math.isfinite(rho) else rho,
        "ci": [lo, hi],
        "n": n,
        "boot_valid": int(b.size),
    }


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def render_validation_markdown(result: dict[str, Any]) -> str:
    """A Markdown section: one row per metric with both Spearman values, CIs and n."""
    lines = [
        "## Quality metrics vs human MUSHRA scores",
        "",
        f"{result['n_stimuli']} stimuli, {result['n_signals']} signals, "
        f"{result['n_conditions']} conditions, {result['n_ratings']} ratings.",
        "",
        "| metric | better | stimulus rho [95% CI] (n) | condition rho [95% CI] (n) |",
        "|---|---|---|---|",
    ]
    for m in result["metrics"]:
        if m.get("constant") is not False:
            lines.append(f"| {m['metric']} | {m['better']} | {m.get('note', '')} | |")
            continue
        cells = []
        for level in ("stimulus", "condition"):
            s = m[level]
            lo, hi = s["ci"]
            cells.append(f"{_fmt(s['spearman'])} [{_fmt(lo)}, {_fmt(hi)}] ({s['n']})")
        lines.append(f"| {m['metric']} | {m['better']} | {cells[0]} | {cells[1]} |")
    lines += ["", "| condition | human mean |", "|---|---|"]
    lines += [f"| {c['condition']} | {c['human_mean']:.1f} |" for c in result["conditions"]]
    if result.get("errors"):
        lines += ["", "Stimuli that failed:"]
        lines += [f"- {e['signal']} / {e['condition']}: {e['reason']}" for e in result["errors"]]
    lines += ["", *[f"- {n}" for n in result["notes"]], ""]
    return "\n".join(lines)
