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
  (``transcripts``: ``mask`` default, ``drop``, ``keep``); the scenario's scripted user text
  (``segments[].say``) gets the same word-length mask unless transcripts are kept;
- ``scenario.yaml``, ``tool-audit.json`` and ``final-state.json``, the business truth the task
  checks need, with **personal data masked** (``personal_data``: ``mask`` default, ``keep``).

Personal data (``PersonalDataMasker``, rule version ``PERSONAL_DATA_RULE_VERSION``) is looked
for in the business values only: ``final-state.json`` (all but ``_meta``), the ``arguments``,
``result``, ``error`` and ``meta`` of each call in ``tool-audit.json``, the payload of the
ledger's ``tool.*`` events (``TOOL_PAYLOAD_KEYS``), ``task.state`` ``data.fields``,
``session.*`` ``data.state`` snapshots, and in ``scenario.yaml`` the ``initial_state``, the
``business_truth.expected_final_state``, the tools' canned ``results`` and the free text
(``description``, segment ``notes``, tool ``description``). Values of keys that name personal
data (``key_class``: name, e-mail, phone, address, contact, birth date, card / IBAN / account
numbers, customer / passenger / ...; transcript keys too) and strings that are or contain an
e-mail address, IBAN or long digit run become ``<label:hex>`` tokens that keep equality, so
the task checks score the redacted copy exactly as the original; ids, statuses, versions,
dates, amounts and idempotency keys are left alone. The HMAC key behind the tokens is random
per redaction and never written (``personal_data_key`` supplies one, e.g. to link the tokens of
several bundles). A business file that cannot be parsed cannot be checked: it is not copied.

and drops ``input.wav``, ``output.wav``, ``mixed.wav`` and a sound loop's ``capture.wav`` and
``received.wav``. The manifest is rewritten: its file
list hashes the new files, and ``privacy`` records ``redacted: true``, ``retention_days`` and
``purpose``. ``features.json`` says what was dropped (each file's sha256 and size, so a kept
copy elsewhere can be matched), when, with which detector, the evidence level the bundle had
before (``redaction.source_level``) and which fields of which files had personal data masked
by which rule version (``redaction.personal_data``). The scorer reads the segments from
``features.json``. The evidence level of the redacted bundle (``schema.assess_evidence``) is
the level its original evidence supported: the capture behind an L3/L4 claim is accounted for
by the redaction record (hashes of the dropped audio), never more than ``source_level``; a
missing or inconsistent record leaves the claim without audio (a provenance contradiction).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from voxassay.contracts.duplex.evidence import REDACTION_VERSION
from voxassay.core.runstore import utc_now
from voxassay.suites.duplex.evidence.personal_data import (
    PERSONAL_COMPOUNDS,
    TEXT_KEYS,
    TOKEN_RE,
    PersonalDataMasker,
)

__all__ = [
    "ENVELOPE_FLOOR_DB",
    "ENVELOPE_HOP_MS",
    "TEXT_KEYS",
    "TOOL_PAYLOAD_KEYS",
    "loudness_envelope",
    "mask_text",
    "redact_bundle",
]

ENVELOPE_HOP_MS = 10
ENVELOPE_FLOOR_DB = -120.0
"""Keys of an event's ``data`` (at any depth) whose string values are transcripts."""
KEPT_FILES = ("events.jsonl", "scenario.yaml", "tool-audit.json", "final-state.json")
DROPPED_FILES = ("input.wav", "output.wav", "mixed.wav", "capture.wav", "received.wav")
TOOL_PAYLOAD_KEYS = (
    "arguments",
    "args",
    "parameters",
    "input",
    "result",
    "results",
    "output",
    "response",
    "error",
)
"""Keys of a ``tool.*`` event's ``data`` that hold business values (the rest are ids, the
tool's name and flags)."""
Transcripts = Literal["mask", "drop", "keep"]
PersonalData = Literal["mask", "keep"]

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
            if k in TEXT_KEYS and isinstance(v, str) and not TOKEN_RE.fullmatch(v):
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


# --------------------------------------------------------------------------- personal data


PERSONAL_COMPOUNDS["code"] = {
    "postal": "address",
    "zip": "address",
    "post": "address",
    "sort": "account",
}
PERSONAL_COMPOUNDS["id"] = dict.fromkeys(
    ("national", "tax", "personal", "citizen", "voter"), "id_number"
)
PERSONAL_COMPOUNDS["date"] = {"birth": "dob"}
"""Keys that end in a protected word but name personal data (``phone_number``,
``card_number``, ``account_no``, ``postal_code``, ``national_id``, ``birth_date``): tail ->
the word before it -> label."""


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


def _ledger_objects(src: Path) -> Iterator[tuple[bytes, dict[str, Any] | None]]:
    """Each non-blank line of the ledger with its JSON object (None: not a JSON object)."""
    with open(src, "rb") as fin:
        for raw in fin:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                yield raw, None
                continue
            yield raw, obj if isinstance(obj, dict) else None


def _event_scopes(obj: dict[str, Any]) -> list[str]:
    """Keys of the event's ``data`` that hold business values (see the module docstring)."""
    data = obj.get("data")
    if not isinstance(data, dict):
        return []
    et = str(obj.get("event_type") or "")
    if et.startswith("tool."):
        keys: tuple[str, ...] = TOOL_PAYLOAD_KEYS
    elif et == "task.state":
        keys = ("fields",)
    elif et.startswith("session."):
        keys = ("state",)
    else:
        return []
    return [k for k in keys if k in data]


def _redact_ledger(
    src: Path, dst: Path, how: Transcripts, masker: PersonalDataMasker | None = None
) -> dict[str, int]:
    """Copy the ledger line by line, masking personal data in business values (``masker``,
    after its ``collect`` pass) and transcripts; lines that are not JSON objects are dropped
    (they cannot be checked) and counted."""
    counts = {"lines": 0, "changed_values": 0, "dropped_lines": 0}
    with open(dst, "w", encoding="utf-8") as fout:
        for _, obj in _ledger_objects(src):
            counts["lines"] += 1
            if obj is None:
                counts["dropped_lines"] += 1
                continue
            if masker is not None:
                et = str(obj.get("event_type") or "")
                for k in _event_scopes(obj):
                    obj["data"][k] = masker.mask(obj["data"][k], "events.jsonl", f"{et} data.{k}")
            if how != "keep" and isinstance(obj.get("data"), dict):
                obj["data"], n = _scrub(obj["data"], how)
                if n:
                    obj["data"]["text_redacted"] = how
                counts["changed_values"] += n
            fout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return counts


def _scenario_values(doc: dict[str, Any]) -> Iterator[tuple[str, Any, Callable[[Any], None]]]:
    """(field path, value, setter) of every business value and free text of a scenario."""

    def setter(container: dict[str, Any], key: str) -> Callable[[Any], None]:
        def put(value: Any) -> None:
            container[key] = value

        return put

    if isinstance(doc.get("description"), str):
        yield "description", doc["description"], setter(doc, "description")
    for seg in doc.get("segments") or []:
        if isinstance(seg, dict) and isinstance(seg.get("notes"), str):
            yield "segments[].notes", seg["notes"], setter(seg, "notes")
    if "initial_state" in doc:
        yield "initial_state", doc["initial_state"], setter(doc, "initial_state")
    truth = doc.get("business_truth")
    if isinstance(truth, dict) and "expected_final_state" in truth:
        path = "business_truth.expected_final_state"
        yield path, truth["expected_final_state"], setter(truth, "expected_final_state")
    for tool in doc.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("description"), str):
            yield "tools[].description", tool["description"], setter(tool, "description")
        for res in tool.get("results") or []:
            if isinstance(res, dict):
                for key in ("match", "result", "error"):
                    if key in res:
                        yield f"tools[].results[].{key}", res[key], setter(res, key)


def _tool_audit_values(doc: dict[str, Any]) -> Iterator[tuple[str, Any, Callable[[Any], None]]]:
    for call in doc.get("calls") or []:
        if isinstance(call, dict):
            for key in ("arguments", "result", "error", "meta"):
                if key in call:

                    def put(value: Any, call: dict[str, Any] = call, key: str = key) -> None:
                        call[key] = value

                    yield f"calls[].{key}", call[key], put


def _final_state_values(doc: dict[str, Any]) -> Iterator[tuple[str, Any, Callable[[Any], None]]]:
    from voxassay.contracts.duplex.business import META_KEY

    state = {k: v for k, v in doc.items() if k != META_KEY}

    def put(value: Any) -> None:
        meta = doc.get(META_KEY)
        doc.clear()
        doc.update(value)
        if meta is not None:
            doc[META_KEY] = meta

    yield "", state, put


_BUSINESS_FILES: dict[str, Callable[[dict[str, Any]], Iterator[tuple[str, Any, Any]]]] = {
    "scenario.yaml": _scenario_values,
    "final-state.json": _final_state_values,
    "tool-audit.json": _tool_audit_values,
}


def _read_business(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The parsed document, or None with the reason it cannot be checked."""
    import yaml

    from voxassay.core import yamlload

    try:
        text = path.read_text(encoding="utf-8")
        doc = yamlload.safe_load(text) if path.suffix == ".yaml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        return None, f"cannot be parsed ({type(exc).__name__}): not checked for personal data"
    if not isinstance(doc, dict):
        return None, "not a mapping: not checked for personal data"
    return doc, None


def _copy_business_files(
    src: Path,
    dst: Path,
    masker: PersonalDataMasker | None,
    transcripts: Transcripts,
    ledger: bool,
) -> tuple[dict[str, Any], int, dict[str, str]]:
    """Copy scenario.yaml, final-state.json and tool-audit.json into ``dst`` with personal
    data masked (both masker passes run here, the ledger's included: every value must be
    collected before the first is masked) and the scenario's ``say`` texts masked like
    transcripts, and the ledger when ``ledger``. Returns the ledger counts, the number of
    ``say`` texts masked and the files not copied with why. A file without changes is copied
    byte for byte."""
    import yaml

    docs: dict[str, dict[str, Any]] = {}
    not_copied: dict[str, str] = {}
    said = 0
    for name in _BUSINESS_FILES:
        if not (src / name).is_file():
            continue
        if masker is None and not (name == "scenario.yaml" and transcripts != "keep"):
            shutil.copyfile(src / name, dst / name)
            continue
        doc, why = _read_business(src / name)
        if doc is None:
            if masker is None:
                shutil.copyfile(src / name, dst / name)
            else:
                not_copied[name] = str(why)
            continue
        docs[name] = doc
    if masker is not None:
        for name, doc in docs.items():
            for _, value, _ in _BUSINESS_FILES[name](doc):
                masker.collect(value)
        if ledger:
            for _, obj in _ledger_objects(src / "events.jsonl"):
                if obj is not None:
                    for k in _event_scopes(obj):
                        masker.collect(obj["data"][k])
    for name, doc in docs.items():
        before = json.dumps(doc, sort_keys=True, default=str)
        if masker is not None:
            for path, value, put in list(_BUSINESS_FILES[name](doc)):
                put(masker.mask(value, name, path))
        if name == "scenario.yaml" and transcripts != "keep":
            n = 0
            for seg in doc.get("segments") or []:
                if isinstance(seg, dict) and isinstance(seg.get("say"), str):
                    seg["say"] = mask_text(seg["say"])
                    n += 1
            said += n
        if json.dumps(doc, sort_keys=True, default=str) == before:
            shutil.copyfile(src / name, dst / name)
        elif name.endswith(".yaml"):
            (dst / name).write_text(
                yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8"
            )
        else:
            (dst / name).write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    counts: dict[str, Any] = {}
    if ledger:
        counts = _redact_ledger(src / "events.jsonl", dst / "events.jsonl", transcripts, masker)
    return counts, said, not_copied


def redact_bundle(
    src: str | Path,
    dst: str | Path,
    *,
    retention_days: int | None = None,
    purpose: str = "evaluation",
    transcripts: Transcripts = "mask",
    personal_data: PersonalData = "mask",
    personal_data_key: bytes | None = None,
    detector: str = "silero",
) -> dict[str, Any]:
    """Write the redacted copy of bundle ``src`` into ``dst`` (created; must not exist or be
    empty) and return its ``features.json`` ``redaction`` block.

    ``personal_data_key``: the HMAC key of the personal-data tokens (default: 32 random
    bytes, used for this bundle only and never written anywhere).

    Raises ``bundle.BundleError`` when ``src`` has no valid manifest or no audio to derive
    features from; ``dst`` is then removed, so no partial copy is left.
    """
    from voxassay.contracts.duplex.evidence import FEATURES_FILE, derive_evidence_level
    from voxassay.contracts.duplex.manifest import file_entry
    from voxassay.suites.duplex.evidence.bundle_io import BundleError
    from voxassay.suites.duplex.evidence.validate import validate_manifest

    if transcripts not in ("mask", "drop", "keep"):
        raise ValueError(f"transcripts must be mask, drop or keep, not {transcripts!r}")
    if personal_data not in ("mask", "keep"):
        raise ValueError(f"personal_data must be mask or keep, not {personal_data!r}")
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
        masker = (
            PersonalDataMasker(personal_data_key or secrets.token_bytes(32))
            if personal_data == "mask"
            else None
        )
        ledger, said, not_copied = _copy_business_files(
            src, dst, masker, transcripts, (src / "events.jsonl").is_file()
        )
        if ledger:
            red["ledger"] = ledger
        if said:
            red["scenario_say"] = {"masked": said}
        red["transcripts"] = transcripts if not already else red.get("transcripts", transcripts)
        pd: dict[str, Any] = {"mode": personal_data}
        if masker is not None:
            pd.update(masker.record())
            pd["key"] = (
                "supplied by the caller; not stored"
                if personal_data_key is not None
                else "random for this redaction; not stored"
            )
        if not_copied:
            pd["not_copied"] = not_copied
        earlier = red.get("personal_data")
        if already and isinstance(earlier, dict) and earlier.get("mode") == "mask":
            if masker is None or not masker.masked:
                pd = earlier  # nothing new to mask: the first redaction's record stands
            else:
                pd["earlier"] = earlier
        red["personal_data"] = pd
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
    from voxassay.suites.duplex.evidence.acoustic_accuracy import detector_info
    from voxassay.suites.duplex.evidence.bundle_io import load_sides, segments_of

    user, agent, sr, _ = load_sides(src)
    seg_out = segments_of(user, agent, sr, detector)
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
