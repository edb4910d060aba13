"""Declared provenance of recordings voxassay did not capture (a ``provenance.json`` sidecar),
and the evidence level of a recording with or without one.

A recording scored with ``duplex score --stereo`` is fixed audio: without a sidecar it
counts as **L2, provenance unknown** (the level of deterministic checks on recorded audio).
A sidecar states the facts of how it was captured, in the bundle manifest's own provenance
model plus ``device``, ``route``, ``privacy`` and ``declared_by``; the level is derived from
those facts by the same rules as a bundle's (``assess_evidence``) and is labelled
**declared** wherever it is used. A gate counts a declared level only when the matrix (or
the gate) says ``evidence: declared``; otherwise the recording counts at its derived level.
Evidence voxassay captured itself (a bundle) is always derived: a sidecar never applies to it.

Where a sidecar is found for ``calls/a.wav``: ``calls/a.provenance.json``, else
``calls/provenance.json`` (one sidecar for every recording of the folder).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from voxassay.contracts.duplex.common import Strict
from voxassay.contracts.duplex.evidence import EvidenceLevel, assess_evidence
from voxassay.contracts.duplex.manifest import (
    BundleManifest,
    ClockInfo,
    FileEntry,
    Provenance,
    sha256_file,
)
from voxassay.contracts.duplex.vocabulary import Route
from voxassay.core import jsonio

PROVENANCE_FILE = "provenance.json"
PROVENANCE_SCHEMA_VERSION = 1
UNKNOWN_LEVEL: EvidenceLevel = "L2"
"""A recording without declared provenance: fixed audio, the contract's level for
deterministic checks on recorded audio."""
EvidenceBasis = Literal["derived", "declared"]


class DeclaredPrivacy(Strict):
    """How the recorded people's data is handled."""

    purpose: str = Field(min_length=1)
    retention_days: int | None = Field(default=None, ge=0)
    access: str | None = None
    """Who may open the audio (a role or team, never a person's credentials)."""


class DeclaredProvenance(Strict):
    """``provenance.json``: facts about audio voxassay did not capture, and who states them."""

    schema_version: int = Field(
        default=PROVENANCE_SCHEMA_VERSION, ge=1, le=PROVENANCE_SCHEMA_VERSION
    )
    declared_by: str = Field(min_length=1)
    """Who states these facts (a team, a system, a person's role)."""
    provenance: Provenance
    device: str | None = None
    route: Route | None = None
    privacy: DeclaredPrivacy | None = None


@dataclass(frozen=True)
class RecordingEvidence:
    """The evidence of one recording.

    ``derived_level`` is what voxassay can derive itself (always L2: fixed audio);
    ``level`` counts the sidecar's facts when there is one (``basis`` = declared).
    """

    level: EvidenceLevel
    basis: EvidenceBasis
    derived_level: EvidenceLevel
    reasons: list[str] = field(default_factory=list)
    declared_by: str | None = None
    sidecar: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "level": self.derived_level,
            "basis": self.basis,
            "declared_level": self.level if self.basis == "declared" else None,
            "declared_by": self.declared_by,
            "sidecar": self.sidecar,
            "reasons": list(self.reasons),
        }


def sidecar_for(audio: Path) -> Path | None:
    """The sidecar that applies to a recording (its own, else its folder's), or None."""
    own = audio.with_name(f"{audio.stem}.{PROVENANCE_FILE}")
    if own.is_file():
        return own
    shared = audio.with_name(PROVENANCE_FILE)
    return shared if shared.is_file() else None


def read_sidecar(path: Path) -> DeclaredProvenance:
    """Parse a sidecar; ``ValueError`` names the file and what is wrong."""
    try:
        data = jsonio.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({exc})") from None
    try:
        return DeclaredProvenance.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise ValueError(f"{path}: {where}: {first['msg']}") from None


def recording_evidence(
    audio: list[Path], declared: DeclaredProvenance | None, sidecar: Path | None = None
) -> RecordingEvidence:
    """The evidence of a recording (one stereo file, or the user's and the agent's files).

    Without a declaration: L2, provenance unknown. With one: the bundle rules applied to a
    manifest made of the declared facts and the recording's own files (hashed); voxassay
    derives the acoustic events from the recording itself, so they come from the capture
    when one is declared and from the output stream otherwise.
    """
    unknown = (
        f"{UNKNOWN_LEVEL}: fixed audio (a recording scored by voxassay); provenance unknown: "
        "how it was captured is not stated"
    )
    if declared is None:
        return RecordingEvidence(UNKNOWN_LEVEL, "derived", UNKNOWN_LEVEL, [unknown])
    facts = declared.provenance.model_copy()
    facts.acoustic_events = "capture" if (facts.capture or "none") != "none" else "output_stream"
    names = ["mixed.wav"] if len(audio) == 1 else ["input.wav", "output.wav"]
    files = [
        FileEntry(path=name, sha256=sha256_file(p), bytes=p.stat().st_size)
        for name, p in zip(names, audio, strict=True)
    ]
    if len(audio) == 1:  # the stereo file holds the agent's side: it stands for output.wav
        files.append(files[0].model_copy(update={"path": "output.wav"}))
    manifest = BundleManifest(
        session_id=audio[0].stem,
        created_at=dt.datetime.now(dt.UTC),
        files=files,
        clock=ClockInfo(kind="real" if facts.clock == "monotonic" else "virtual"),
        provenance=facts,
        route=declared.route,
        device=declared.device,
    )
    a = assess_evidence(manifest, events_from_audio=True)
    where = f" in {sidecar.name}" if sidecar is not None else ""
    reasons = [
        f"declared by {declared.declared_by}{where}: {a.reasons[0]}",
        *a.reasons[1:],
        "acoustic events are derived by voxassay from the recording itself",
        f"without the declaration: {unknown}",
    ]
    return RecordingEvidence(
        a.level,
        "declared",
        UNKNOWN_LEVEL,
        reasons,
        declared.declared_by,
        str(sidecar) if sidecar is not None else None,
    )
