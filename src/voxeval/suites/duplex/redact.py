"""Privacy: turn an evidence bundle into one without raw audio that still scores.

``redact_bundle(src, dst)`` writes a copy of the bundle ``src`` into ``dst`` that keeps

- the **derived features** of the audio in ``features.json``: the speech segments of both
  sides (``acoustic.detect_segments``, the same detector the scorer uses, with their levels,
  kinds and internal gaps) and a **loudness envelope**: per side, the level of each
  non-overlapping 10 ms frame, ``L = 10 log10(mean(x^2))`` dBFS (floored at -120 dBFS, rounded
  to 0.1 dB), frame ``k`` covering samples ``[k * 160, (k + 1) * 160)`` at 16 kHz;
- the **event ledger**, with transcripts (string values under ``text``, ``transcript`` or
  ``delta`` in an event's ``data``) replaced by word-length masks (``"move it to Tuesday"``
  -> ``"**** ** ** *******"``; punctuation and spaces kept), or dropped, or kept as they are
  (``transcripts``: ``mask`` default, ``drop``, ``keep``);
- ``scenario.yaml``, ``tool-audit.json`` and ``final-state.json`` as they are (the business
  truth the task checks need; they may hold personal data of their own, which this step does
  not touch);

and drops ``input.wav``, ``output.wav`` and ``mixed.wav``. The manifest is rewritten: its file
list hashes the new files, and ``privacy`` records ``redacted: true``, ``retention_days`` and
``purpose``. ``features.json`` says what was dropped (each file's sha256 and size, so a kept
copy elsewhere can be matched), when, with which detector, and the evidence level the bundle
had before (``redaction.source_level``). The scorer reads the segments from ``features.json``;
the evidence level of the redacted bundle is derived from what it still holds (raw audio
dropped means no capture to check, so at most L2 unless production shadow traffic), and its
reasons say that the raw audio was dropped.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Literal

from voxeval.core.runstore import utc_now

__all__ = [
    "ENVELOPE_FLOOR_DB",
    "ENVELOPE_HOP_MS",
    "REDACTION_VERSION",
    "TEXT_KEYS",
    "loudness_envelope",
    "mask_text",
    "redact_bundle",
]

REDACTION_VERSION = 1
ENVELOPE_HOP_MS = 10
ENVELOPE_FLOOR_DB = -120.0
TEXT_KEYS = ("text", "transcript", "delta")
"""Keys of an event's ``data`` (at any depth) whose string values are transcripts."""
KEPT_FILES = ("events.jsonl", "scenario.yaml", "tool-audit.json", "final-state.json")
DROPPED_FILES = ("input.wav", "output.wav", "mixed.wav")
Transcripts = Literal["mask", "drop", "keep"]

_WORD = re.compile(r"\w+", re.UNICODE)


def mask_text(text: str) -> str:
    """Each word replaced by as many ``*`` as it has characters; everything else kept."""
    return _WORD.sub(lambda m: "*" * len(m.group(0)), text)


def _scrub(value: Any, how: Transcripts) -> tuple[Any, int]:
    """``value`` with transcript strings masked or dropped, and how many were changed."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        n = 0
        for k, v in value.items():
            if k in TEXT_KEYS and isinstance(v, str):
                n += 1
                if how == "drop":
                    continue
                out[k] = mask_text(v)
            else:
                out[k], m = _scrub(v, how)
                n += m
        return out, n
    if isinstance(value, list):
        items = [_scrub(v, how) for v in value]
        return [v for v, _ in items], sum(m for _, m in items)
    return value, 0


def loudness_envelope(samples: Any, sr: int, hop_ms: int = ENVELOPE_HOP_MS) -> list[float]:
    """Level of each non-overlapping ``hop_ms`` frame in dBFS (see the module docstring); a
    last partial frame counts with its own length."""
    import numpy as np

    x = np.asarray(samples, dtype=np.float64)
    hop = max(1, round(sr * hop_ms / 1000))
    n = int(np.ceil(len(x) / hop)) if len(x) else 0
    if n == 0:
        return []
    pad = np.zeros(n * hop)
    pad[: len(x)] = x * x
    counts = np.full(n, hop, dtype=np.float64)
    counts[-1] = len(x) - (n - 1) * hop
    power = pad.reshape(n, hop).sum(axis=1) / counts
    with np.errstate(divide="ignore"):
        db = 10 * np.log10(power)
    db = np.maximum(np.nan_to_num(db, neginf=ENVELOPE_FLOOR_DB), ENVELOPE_FLOOR_DB)
    return [round(float(v), 1) for v in db]


def _redact_ledger(src: Path, dst: Path, how: Transcripts) -> dict[str, int]:
    """Copy the ledger line by line, masking transcripts; lines that are not JSON objects are
    dropped (they cannot be checked for transcripts) and counted."""
    counts = {"lines": 0, "changed_values": 0, "dropped_lines": 0}
    with open(src, "rb") as fin, open(dst, "w", encoding="utf-8") as fout:
        for raw in fin:
            if not raw.strip():
                continue
            counts["lines"] += 1
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                counts["dropped_lines"] += 1
                continue
            if not isinstance(obj, dict):
                counts["dropped_lines"] += 1
                continue
            if how != "keep" and isinstance(obj.get("data"), dict):
                obj["data"], n = _scrub(obj["data"], how)
                if n:
                    obj["data"]["text_redacted"] = how
                counts["changed_values"] += n
            fout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return counts


def redact_bundle(
    src: str | Path,
    dst: str | Path,
    *,
    retention_days: int | None = None,
    purpose: str = "evaluation",
    transcripts: Transcripts = "mask",
    detector: str = "silero",
) -> dict[str, Any]:
    """Write the redacted copy of bundle ``src`` into ``dst`` (created; must not exist or be
    empty) and return its ``features.json`` ``redaction`` block.

    Raises ``bundle.BundleError`` when ``src`` has no valid manifest or no audio to derive
    features from; ``dst`` is then removed, so no partial copy is left.
    """
    from voxeval.suites.duplex.bundle import FEATURES_FILE, BundleError
    from voxeval.suites.duplex.schema import derive_evidence_level, file_entry
    from voxeval.suites.duplex.validate import validate_manifest

    if transcripts not in ("mask", "drop", "keep"):
        raise ValueError(f"transcripts must be mask, drop or keep, not {transcripts!r}")
    if retention_days is not None and retention_days < 0:
        raise ValueError("retention_days must be >= 0")
    src, dst = Path(src), Path(dst)
    if dst.exists() and any(dst.iterdir()):
        raise BundleError("exists", f"{dst}: not empty; a redacted copy needs a fresh folder")
    manifest, problems = validate_manifest(src / "manifest.json")
    if manifest is None:
        text = "; ".join(p.format() for p in problems if p.severity == "error")
        raise BundleError("invalid-manifest", f"cannot redact {src}: {text}", problems)
    dst.mkdir(parents=True, exist_ok=True)
    try:
        source_level, _ = derive_evidence_level(manifest, src)
        already = (src / FEATURES_FILE).is_file() and not any(
            (src / w).is_file() for w in DROPPED_FILES
        )
        if already:
            features = json.loads((src / FEATURES_FILE).read_text(encoding="utf-8"))
            red = dict(features.get("redaction") or {})
        else:
            features = _features(src, detector)
            red = {
                "version": REDACTION_VERSION,
                "at": utc_now(),
                "source_level": source_level,
                "dropped": [
                    {"path": e.path, "sha256": e.sha256, "bytes": e.bytes}
                    for e in (manifest.file(w) for w in DROPPED_FILES)
                    if e is not None and (src / e.path).is_file()
                ],
                "transcripts": transcripts,
            }
        if (src / "events.jsonl").is_file():
            red["ledger"] = _redact_ledger(src / "events.jsonl", dst / "events.jsonl", transcripts)
        for name in KEPT_FILES[1:]:
            if (src / name).is_file():
                shutil.copyfile(src / name, dst / name)
        red["transcripts"] = transcripts if not already else red.get("transcripts", transcripts)
        features["redaction"] = red
        (dst / FEATURES_FILE).write_text(
            json.dumps(features, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        data = manifest.model_dump(mode="json", exclude_none=True)
        listed = [n for n in (*KEPT_FILES, FEATURES_FILE) if (dst / n).is_file()]
        data["files"] = [
            file_entry(dst / n, dst).model_dump(mode="json", exclude_none=True) for n in listed
        ]
        privacy: dict[str, Any] = {"redacted": True, "purpose": purpose}
        if retention_days is not None:
            privacy["retention_days"] = retention_days
        elif manifest.privacy.retention_days is not None:
            privacy["retention_days"] = manifest.privacy.retention_days
        data["privacy"] = privacy
        (dst / "manifest.json").write_text(
            json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    return red


def _features(src: Path, detector: str) -> dict[str, Any]:
    """``features.json`` content: segments, duration and the 10 ms loudness envelopes."""
    from voxeval.suites.duplex.acoustic import detector_info
    from voxeval.suites.duplex.bundle import _load_sides, _segments_of

    user, agent, sr, _ = _load_sides(src)
    seg_out = _segments_of(user, agent, sr, detector)
    info = detector_info(detector)
    return {
        "version": REDACTION_VERSION,
        "sample_rate": sr,
        "duration_s": float(seg_out["duration_s"]),
        "detector": {
            "name": info.get("name"),
            "package": info.get("package"),
            "version": info.get("version"),
        },
        "segments": seg_out["segments"],
        "envelope": {
            "hop_ms": ENVELOPE_HOP_MS,
            "unit": "dBFS",
            "floor_db": ENVELOPE_FLOOR_DB,
            "user": loudness_envelope(user, sr),
            "agent": loudness_envelope(agent, sr),
        },
    }
