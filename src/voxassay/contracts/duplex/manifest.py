"""The evidence bundle manifest: files with hashes, clocks, provenance, system, privacy."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

from voxassay.contracts.duplex.common import (
    MANIFEST_SCHEMA_VERSION,
    Strict,
    version_check,
)
from voxassay.contracts.duplex.vocabulary import (
    Route,
)

# --------------------------------------------------------------------------- bundle manifest

REQUIRED_BUNDLE_FILES = ("input.wav", "output.wav", "events.jsonl", "manifest.json")
OPTIONAL_BUNDLE_FILES = (
    "mixed.wav",
    "tool-audit.json",
    "final-state.json",
    "scenario.yaml",
)
EXPECTED_CHANNELS = {"mixed.wav": 2}
"""Default channel count by file: mixed.wav keeps the input (left) and output (right) apart."""


class FileEntry(Strict):
    """A bundle file with its hash; audio may declare the channel count it must have."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)
    channels: int | None = Field(default=None, ge=1)


def file_entry(path: Path, root: Path, channels: int | None = None) -> FileEntry:
    """Hash ``path`` (streamed) into an entry named relative to the bundle ``root``."""
    return FileEntry(
        path=path.relative_to(root).as_posix(),
        sha256=sha256_file(path),
        bytes=path.stat().st_size,
        channels=channels,
    )


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ScenarioRef(Strict):
    id: str
    version: int = Field(ge=1)


class ClockInfo(Strict):
    """The session clock: virtual (advanced by the harness) or real; compute charged or not."""

    kind: Literal["virtual", "real"]
    compute: Literal["charged", "zero"] | None = None
    """Virtual clock only: agent compute added to the clock as measured, or counted as zero."""
    audio_origin_ns: int | None = None
    """Session-clock time of sample 0 of input.wav/output.wav (None: the first event)."""


class Provenance(BaseModel):
    """Facts about how the evidence was produced; the evidence level is derived from them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    transport: Literal["in_process", "socket"] | None = None
    """socket: the agent ran as its own process behind a real network socket."""
    clock: Literal["virtual", "monotonic"] | None = None
    playback: Literal["modelled", "real_device_capture"] | None = None
    """real_device_capture: agent audio went through a real player and was captured after it."""
    capture: Literal["none", "loopback_soundcard", "device_mic"] | None = None
    traffic: Literal["synthetic", "production_shadow"] | None = None
    acoustic_events: Literal["none", "output_stream", "capture"] | None = None
    """Where acoustic.* events were derived from: nowhere, the agent's output stream, or the capture."""
    player: Literal["model", "process", "device"] | None = None
    """What played the agent's audio: voxassay's playback model, a player process on this
    machine, or a device's own player."""
    loop: Literal["none", "virtual_sound_card", "acoustic"] | None = None
    """How the played audio reached the capture: not at all, a virtual sound card's monitor
    (a bundle then holds ``capture.wav`` and ``loop.json``), or through the air to a mic."""


class SystemInfo(Strict):
    name: str
    version: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class Privacy(Strict):
    redacted: bool = False
    retention_days: int | None = Field(default=None, ge=0)
    purpose: str = "evaluation"


class BundleManifest(BaseModel):
    """``manifest.json`` of an evidence bundle. Holds provenance facts, never a level."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    schema_version: int = Field(default=MANIFEST_SCHEMA_VERSION, ge=1)
    session_id: str = Field(min_length=1)
    scenario: ScenarioRef | None = None
    created_at: dt.datetime
    producers: dict[str, str] = Field(default_factory=dict)
    """Producer name -> version (harness, agent, player, acoustic detector)."""
    files: list[FileEntry] = Field(default_factory=list)
    clock: ClockInfo
    provenance: Provenance = Field(default_factory=lambda: Provenance())
    route: Route | None = None
    device: str | None = None
    language: str | None = None
    system: SystemInfo | None = None
    privacy: Privacy = Field(default_factory=lambda: Privacy())

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return version_check(value, MANIFEST_SCHEMA_VERSION, "manifest")

    def file(self, name: str) -> FileEntry | None:
        return next((f for f in self.files if f.path == name), None)
