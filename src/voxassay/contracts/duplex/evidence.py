"""Evidence levels (L1-L4) derived from what a bundle holds, never from what it claims; the redaction record."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from voxassay.contracts.duplex.common import (
    Loc,
)
from voxassay.contracts.duplex.loop_check import check_loop
from voxassay.contracts.duplex.manifest import (
    BundleManifest,
    sha256_file,
)

SELF_DECLARED_LEVEL_KEYS = ("evidence_level", "evidence", "level")
EvidenceLevel = Literal["L1", "L2", "L3", "L4"]
EVIDENCE_LEVELS: tuple[EvidenceLevel, ...] = ("L1", "L2", "L3", "L4")
_AUDIO = ("input.wav", "output.wav", "mixed.wav", "capture.wav", "received.wav")
FEATURES_FILE = "features.json"
"""Derived audio features that a redacted bundle keeps instead of its raw audio."""
REDACTION_VERSION = 1
"""Version of voxassay's redaction record in ``features.json`` (``redact.redact_bundle`` writes it)."""
REDACTED_REASON = "redacted (features from raw audio; raw audio dropped)"
"""How reasons and the validator name a bundle whose raw audio voxassay's redaction dropped."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class EvidenceAssessment:
    """The derived level, why, and which manifest fields contradict each other.

    ``notes``: located findings that are not contradictions (the validator shows them as
    warnings): a redacted bundle whose capture claim rests on the redaction record.
    ``redaction``: the check of a declared redaction (None: the bundle declares none).
    """

    level: EvidenceLevel
    reasons: list[str]
    contradictions: list[tuple[Loc, str]]
    notes: list[tuple[Loc, str]] = field(default_factory=list)
    redaction: RedactionCheck | None = None


@dataclass(frozen=True)
class RedactionCheck:
    """Whether a bundle that declares ``privacy.redacted`` holds a consistent record of
    voxassay's redaction (``redact.redact_bundle``) in ``features.json``: its segments, a known
    redaction version, every dropped audio file with sha256 and size (and no longer listed
    in the manifest), and the level the bundle had before (``source_level``).
    ``problem`` says what is missing or inconsistent (None when consistent)."""

    problem: str | None
    dropped: tuple[str, ...] = ()
    source_level: EvidenceLevel | None = None
    at: str | None = None

    @property
    def consistent(self) -> bool:
        return self.problem is None


def read_features(bundle_dir: Path) -> dict[str, Any] | None:
    """``features.json`` of a bundle folder, or None when absent or not a JSON object."""
    try:
        data = json.loads((bundle_dir / FEATURES_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_redaction(
    manifest: BundleManifest, features: Any, listed: Iterable[str] | None = None
) -> RedactionCheck:
    """Check the redaction record of a bundle (see ``RedactionCheck``). ``features`` is the
    content of ``features.json`` (None: not available); ``listed`` the bundle files that
    count (default: the manifest's file list)."""
    files = set(listed) if listed is not None else {f.path for f in manifest.files}
    if FEATURES_FILE not in files:
        return RedactionCheck(f"{FEATURES_FILE} is not among the bundle's verified files")
    if not isinstance(features, dict):
        return RedactionCheck(f"{FEATURES_FILE} could not be read")
    segs = features.get("segments")
    if not isinstance(segs, dict) or not all(
        isinstance(segs.get(side), list) for side in ("user", "agent")
    ):
        return RedactionCheck(f"{FEATURES_FILE} holds no segments")
    red = features.get("redaction")
    if not isinstance(red, dict):
        return RedactionCheck(f"{FEATURES_FILE} has no redaction block")
    version = red.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        return RedactionCheck("the redaction block has no version")
    if not 1 <= version <= REDACTION_VERSION:
        return RedactionCheck(f"redaction version {version} is not one voxassay writes")
    level = red.get("source_level")
    if level not in EVIDENCE_LEVELS:
        return RedactionCheck("the redaction block records no source_level (L1..L4)")
    dropped = red.get("dropped")
    if not isinstance(dropped, list) or not dropped:
        return RedactionCheck("the redaction block records no dropped audio")
    paths: list[str] = []
    for i, entry in enumerate(dropped):
        ok = (
            isinstance(entry, dict)
            and entry.get("path") in _AUDIO
            and isinstance(entry.get("sha256"), str)
            and bool(_SHA256.match(entry["sha256"]))
            and isinstance(entry.get("bytes"), int)
            and entry["bytes"] >= 0
        )
        if not ok:
            return RedactionCheck(
                f"dropped entry {i} is not an audio file with its sha256 and bytes"
            )
        if entry["path"] in paths:
            return RedactionCheck(f"{entry['path']} is recorded as dropped twice")
        paths.append(str(entry["path"]))
    still = sorted(set(paths) & {f.path for f in manifest.files})
    if still:
        return RedactionCheck(f"{', '.join(still)} recorded as dropped but still listed")
    at = red.get("at")
    return RedactionCheck(None, tuple(paths), level, str(at) if at else None)


def derive_evidence_level(
    manifest: BundleManifest, bundle_dir: Path | None = None, *, features: Any = None
) -> tuple[EvidenceLevel, list[str]]:
    """The evidence level a bundle supports (DESIGN.md), with the reasons.

    L1: no events and no audio. L2: automated evidence (virtual clock, in-process, modelled
    playback). L3: socket transport, monotonic clock, real player captured (loopback or mic),
    acoustic events from that capture. L4: L3 on a named device with its microphone, or
    production shadow traffic. Missing facts count as the weakest value; contradictions
    void the claim. With ``bundle_dir``, files missing or not matching their hash are ignored.

    A redacted bundle (``privacy.redacted``) keeps the level its original evidence supported
    when ``features.json`` (read from ``bundle_dir``, or given as ``features``) holds a
    consistent record of voxassay's redaction (``check_redaction``): the dropped audio counts
    as present, since the kept features were derived from it, and the level is at most the
    recorded ``source_level``. The reasons then say ``REDACTED_REASON``. Without a
    consistent record the dropped audio counts as missing: a capture claim without its
    audio is a contradiction.
    """
    a = assess_evidence(manifest, bundle_dir, features=features)
    return a.level, a.reasons


def assess_evidence(
    manifest: BundleManifest,
    bundle_dir: Path | None = None,
    *,
    features: Any = None,
    events_from_audio: bool = False,
) -> EvidenceAssessment:
    """``derive_evidence_level`` plus the located contradictions and notes (for the
    validator). ``events_from_audio``: the session's events are derived by voxassay from
    its audio (a recording), so they count as present without an events.jsonl."""
    reasons: list[str] = []
    contra: list[tuple[Loc, str]] = []
    for key in SELF_DECLARED_LEVEL_KEYS:
        if manifest.model_extra and key in manifest.model_extra:
            reasons.append(f"manifest field {key!r} ignored: evidence levels are derived")
    present = {f.path for f in manifest.files}
    if bundle_dir is not None:
        for f in manifest.files:
            target = bundle_dir / f.path
            if not target.is_file():
                reasons.append(f"{f.path} listed but missing: not counted")
                present.discard(f.path)
            elif target.stat().st_size != f.bytes or sha256_file(target) != f.sha256:
                reasons.append(f"{f.path} does not match its sha256/size: not counted")
                present.discard(f.path)
    redaction: RedactionCheck | None = None
    derived: set[str] = set()
    if manifest.privacy.redacted and not present & set(_AUDIO):
        if features is None and bundle_dir is not None and FEATURES_FILE in present:
            features = read_features(bundle_dir)
        redaction = check_redaction(manifest, features, present)
        if redaction.consistent:
            derived = set(redaction.dropped)
            present |= derived
        else:
            reasons.append(
                f"privacy.redacted, but the redaction record is not usable "
                f"({redaction.problem}): dropped audio not accounted for"
            )
    has_events = "events.jsonl" in present or (events_from_audio and bool(present & set(_AUDIO)))
    has_audio = bool(present & set(_AUDIO))
    if not has_events and not has_audio:
        return EvidenceAssessment(
            "L1",
            ["L1: no events or audio in the bundle (schemas and configuration only)", *reasons],
            [],
            redaction=redaction,
        )

    p = manifest.provenance
    weakest = {
        "transport": "in_process",
        "clock": "virtual",
        "playback": "modelled",
        "capture": "none",
        "traffic": "synthetic",
        "acoustic_events": "none",
    }
    fact: dict[str, str] = {}
    for key, weak in weakest.items():
        value = getattr(p, key)
        if value is None:
            reasons.append(f"provenance.{key} not recorded: assumed {weak}")
        fact[key] = value or weak

    def contradict(loc: Loc, message: str, key: str) -> None:
        contra.append((loc, message))
        reasons.append(f"contradiction: {message}; {key} counted as {weakest[key]}")
        fact[key] = weakest[key]

    real_clock = manifest.clock.kind == "real"
    if p.clock is not None and (p.clock == "monotonic") != real_clock:
        contradict(
            ("provenance", "clock"),
            f"provenance.clock is {p.clock} but clock.kind is {manifest.clock.kind}",
            "clock",
        )
    if fact["playback"] == "real_device_capture" and fact["capture"] == "none":
        contradict(
            ("provenance", "playback"),
            "playback claims a real device but nothing was captured (capture: none)",
            "playback",
        )
    if fact["capture"] != "none" and fact["playback"] == "modelled":
        contradict(
            ("provenance", "capture"),
            f"capture {fact['capture']} with modelled playback: there was no real player to capture",
            "capture",
        )
    if fact["capture"] != "none" and fact["clock"] == "virtual":
        contradict(
            ("provenance", "capture"),
            "a sound-card or microphone capture cannot run on a virtual clock",
            "capture",
        )
    if fact["capture"] != "none" and "output.wav" not in present:
        if redaction is not None:
            contradict(
                ("privacy", "redacted"),
                f"capture {fact['capture']} claimed, output.wav is gone and the redaction "
                f"record does not account for it ({redaction.problem})",
                "capture",
            )
        else:
            reasons.append("capture claimed but output.wav is absent: capture counted as none")
            fact["capture"] = "none"
    unverified: str | None = None
    if fact["capture"] != "none" and not events_from_audio and "output.wav" not in derived:
        if bundle_dir is None:
            unverified = "the capture's loop artifacts were not checked (no bundle folder)"
        else:
            problem = check_loop(bundle_dir, present)
            if problem is not None:
                reasons.append(
                    f"capture claimed but its loop artifacts do not back it: {problem}; "
                    "capture counted as none"
                )
                fact["capture"] = "none"
                if fact["acoustic_events"] == "capture":
                    fact["acoustic_events"] = "none"
    if p.loop not in (None, "none") and fact["playback"] == "modelled":
        contradict(
            ("provenance", "loop"),
            f"a {p.loop} loop with modelled playback: nothing was played into it",
            "playback",
        )
    if p.player == "model" and fact["playback"] == "real_device_capture":
        contradict(
            ("provenance", "player"),
            "the player is voxassay's model, yet playback claims a real device",
            "playback",
        )
    notes: list[tuple[Loc, str]] = []
    if fact["capture"] != "none" and "output.wav" in derived:
        notes.append(
            (
                ("privacy", "redacted"),
                f"{REDACTED_REASON}: the {fact['capture']} capture behind this evidence "
                f"(output.wav) was dropped by voxassay's redaction; its sha256 and the "
                f"features derived from it are in {FEATURES_FILE}",
            )
        )
    if fact["acoustic_events"] == "capture" and fact["capture"] == "none":
        contradict(
            ("provenance", "acoustic_events"),
            "acoustic events said to come from a capture that does not exist",
            "acoustic_events",
        )
    if fact["traffic"] == "production_shadow" and fact["clock"] == "virtual":
        contradict(
            ("provenance", "traffic"),
            "production shadow traffic on a virtual clock",
            "traffic",
        )

    l3_missing: list[str] = []
    if fact["playback"] == "modelled":
        l3_missing.append("playback is modelled (modelled playback is L2 however realistic)")
    if fact["capture"] == "none":
        l3_missing.append("the agent's audio was not captured after a real player")
    if fact["acoustic_events"] != "capture":
        l3_missing.append(f"acoustic events come from {fact['acoustic_events']}, not the capture")
    if unverified:
        l3_missing.append(unverified)
    if fact["transport"] != "socket":
        l3_missing.append("the agent ran in-process, not behind a real socket")
    if fact["clock"] != "monotonic":
        l3_missing.append("the session ran on a virtual clock")
    if not has_events:
        l3_missing.append("no events.jsonl")
    shadow = (
        fact["traffic"] == "production_shadow"
        and fact["clock"] == "monotonic"
        and fact["transport"] == "socket"
        and has_events
    )
    if shadow:
        level: EvidenceLevel = "L4"
        head = "L4: production shadow traffic over real sockets on a real clock"
    elif l3_missing:
        level = "L2"
        head = "L2: automated evidence; not L3 because " + "; ".join(l3_missing)
    elif fact["capture"] == "device_mic" and manifest.device:
        level = "L4"
        head = f"L4: real device {manifest.device!r} captured with its microphone"
    else:
        level = "L3"
        head = "L3: real processes over sockets, real player captured, acoustic events from it"
        if fact["capture"] == "device_mic":
            head += "; not L4 because no device is named"
        else:
            head += "; not L4 because the capture is a loopback, not a real device"
    if redaction is not None and redaction.consistent and redaction.source_level is not None:
        source = redaction.source_level
        reasons.append(
            f"{REDACTED_REASON}: {', '.join(redaction.dropped)} dropped by voxassay's redaction"
            + (f" on {redaction.at}" if redaction.at else "")
            + f", their sha256 recorded in {FEATURES_FILE}; the bundle was at {source} then"
        )
        if EVIDENCE_LEVELS.index(level) > EVIDENCE_LEVELS.index(source):
            reasons.append(
                f"capped at {source}: a redacted bundle keeps at most the level its original "
                f"evidence supported (the provenance now claims {level})"
            )
            level = source
    return EvidenceAssessment(level, [head, *reasons], contra, notes, redaction)


def evidence_at_least(level: str, minimum: str) -> bool:
    return EVIDENCE_LEVELS.index(level) >= EVIDENCE_LEVELS.index(minimum)
