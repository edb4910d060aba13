"""Evidence bundle I/O: find and plan bundles, read a bundle's ledger, its two sides' audio
(or a redacted bundle's features) and their speech segments. Scoring is in
``scoring/session.py``; what a bundle must hold is the contract (``contracts/duplex``)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.contracts.duplex.common import Problem
from voxassay.contracts.duplex.event import Event
from voxassay.core.errors import AudioError, InputError, VoxassayError
from voxassay.core.items import Item

if TYPE_CHECKING:
    pass

from voxassay.contracts.duplex.evidence import FEATURES_FILE

BUNDLE_WAVS = ("input.wav", "output.wav", "mixed.wav")
ANALYSIS_SR = 16_000


class BundleError(VoxassayError):
    """A bundle that cannot be scored: ``kind`` (short), message, and the problems found."""

    def __init__(self, kind: str, message: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.problems = list(problems)


# --------------------------------------------------------------------------- discovery


def find_bundles(paths: Iterable[str | Path]) -> list[Path]:
    """Bundle folders named by ``paths``, in order, without duplicates.

    A folder holding ``manifest.json`` is a bundle; a ``manifest.json`` file names its folder;
    any other folder is searched recursively for ``manifest.json`` (folders starting with
    ``.`` or ``__`` are skipped). A folder named explicitly that holds ``events.jsonl`` but no
    manifest is kept, so that it is reported (as an error) rather than silently skipped.
    Raises ``InputError`` for a path that does not exist or holds no bundle.
    """
    found: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            found.append(p)

    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_file():
            if p.name != "manifest.json":
                raise InputError(f"{p}: not a bundle (give a bundle folder or its manifest.json)")
            add(p.parent)
            continue
        if (p / "manifest.json").is_file() or (p / "events.jsonl").is_file():
            add(p)
            continue
        hits = sorted(
            m.parent
            for m in p.rglob("manifest.json")
            if not any(part.startswith((".", "__")) for part in m.relative_to(p).parts)
        )
        if not hits:
            raise InputError(f"{p}: no bundle found (no manifest.json below it)")
        for h in hits:
            add(h)
    return found


_KEY_SAFE = re.compile(r"[^A-Za-z0-9_.:@+=-]+")


def safe_key(text: str) -> str:
    """A session key usable in refs (``<key>/<id>``) and folder names: no ``/`` or spaces."""
    return _KEY_SAFE.sub("_", text).strip("._") or "session"


@dataclass
class BundleRef:
    """One bundle of a run: where it is, its unique key (the session id, made safe), the
    system it scores, its scenario and its repeat index among that system's bundles of the
    same scenario (ordered by ``created_at``, then path)."""

    path: Path
    key: str
    system: str
    session_id: str | None = None
    scenario_id: str | None = None
    scenario_version: int | None = None
    created_at: str | None = None
    repeat: int = 0
    stored: str | None = None
    """Where the run keeps it (relative to the run folder) when it was copied (``--redact``)."""

    @property
    def unit(self) -> str:
        """The key that pairs this session with a baseline run's: scenario id and repeat."""
        return f"{self.scenario_id}#{self.repeat}" if self.scenario_id else self.key

    def to_item(self) -> Item:
        where = self.stored or str(self.path)
        return Item(
            id=self.key,
            labels={"input": "bundle", "scenario": self.scenario_id or "unknown"},
            meta={
                "bundle": where,
                "source": str(self.path),
                "repeat": self.repeat,
                "session_id": self.session_id,
                "scenario_version": self.scenario_version,
                "unit": self.unit,
                "system": self.system,
            },
        )


def peek_manifest(folder: Path) -> dict[str, Any]:
    """The manifest as plain JSON, or {} when it is missing or not JSON (scoring says why)."""
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def plan_bundles(paths: Iterable[str | Path], system: str | None = None) -> list[BundleRef]:
    """``find_bundles`` with keys, systems and repeat indices assigned (see ``BundleRef``).

    ``system`` overrides the system name the manifests give (``name@version``).
    """
    refs: list[BundleRef] = []
    used: set[str] = set()
    for folder in find_bundles(paths):
        m = peek_manifest(folder)
        sid = m.get("session_id") if isinstance(m.get("session_id"), str) else None
        base = safe_key(sid or folder.name)
        key, i = base, 2
        while key in used:
            key, i = f"{base}~{i}", i + 1
        used.add(key)
        sc: dict[str, Any] = m["scenario"] if isinstance(m.get("scenario"), dict) else {}
        sysinfo: dict[str, Any] = m["system"] if isinstance(m.get("system"), dict) else {}
        name = sysinfo.get("name") if isinstance(sysinfo.get("name"), str) else None
        version = sysinfo.get("version")
        spec = system or (f"{name}@{version}" if name and version else (name or "unknown-system"))
        version_num = sc.get("version")
        refs.append(
            BundleRef(
                path=folder,
                key=key,
                system=spec,
                session_id=sid,
                scenario_id=str(sc["id"]) if sc.get("id") is not None else None,
                scenario_version=version_num if isinstance(version_num, int) else None,
                created_at=str(m.get("created_at")) if m.get("created_at") else None,
            )
        )
    groups: dict[tuple[str, str], list[BundleRef]] = {}
    for r in refs:
        groups.setdefault((r.system, r.scenario_id or r.key), []).append(r)
    for members in groups.values():
        for n, r in enumerate(sorted(members, key=lambda r: (r.created_at or "", str(r.path)))):
            r.repeat = n
    return refs


# --------------------------------------------------------------------------- one bundle


@dataclass
class BundleLedger:
    events: list[Event]
    lines: dict[str, int]
    malformed: int = 0
    foreign: int = 0
    unknown: Counter[str] = field(default_factory=Counter)


def problem_dict(p: Problem) -> dict[str, Any]:
    return {"file": p.file, "line": p.line, "severity": p.severity, "message": p.message}


def read_bundle_ledger(path: Path, session_id: str) -> BundleLedger:
    """Valid events of ``session_id`` with their line numbers; other lines are counted (the
    validator lists each one with its line)."""
    from voxassay.suites.duplex.evidence.ledger import read_events

    led = BundleLedger([], {})
    for line, item in read_events(path):
        if isinstance(item, Problem):
            led.malformed += 1
            continue
        if item.session_id != session_id:
            led.foreign += 1
            continue
        if not item.known_type:
            led.unknown[item.event_type] += 1
        led.events.append(item)
        led.lines.setdefault(item.event_id, line)
    return led


def load_features(folder: Path) -> dict[str, Any]:
    path = folder / FEATURES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError("invalid-features", f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        msg = f"{path}:{exc.lineno}: malformed JSON: {exc.msg}"
        raise BundleError("invalid-features", msg) from None
    segs = data.get("segments") if isinstance(data, dict) else None
    if not isinstance(segs, dict) or not all(
        isinstance(segs.get(side), list) for side in ("user", "agent")
    ):
        raise BundleError("invalid-features", f"{path}: no segments.user / segments.agent lists")
    if not isinstance(data.get("duration_s"), int | float):
        raise BundleError("invalid-features", f"{path}: duration_s missing")
    return data


def load_sides(folder: Path) -> tuple[Any, Any, int, list[Problem]]:
    """User and agent samples at 16 kHz on one clock, from input.wav + output.wav, else from
    the two channels of mixed.wav (left input, right output)."""
    import numpy as np
    import soundfile as sf

    from voxassay.core.audio import Audio, load_audio, resample

    notes: list[Problem] = []
    inp, outp, mixed = folder / "input.wav", folder / "output.wav", folder / "mixed.wav"
    try:
        if inp.is_file() and outp.is_file():
            sides = []
            for p in (inp, outp):
                try:
                    channels = int(sf.info(str(p)).channels)
                except Exception as exc:
                    raise AudioError(f"{p}: audio not readable: {exc}", kind="unreadable") from None
                if channels > 1:
                    msg = f"{channels} channels where one side (mono) is expected: downmixed"
                    notes.append(Problem(str(p), None, None, "warning", msg))
                sides.append(resample(load_audio(p, sr=None), ANALYSIS_SR).samples)
            user, agent = sides
        elif mixed.is_file():
            try:
                data, sr = sf.read(str(mixed), dtype="float32", always_2d=True)
            except Exception as exc:
                raise AudioError(f"{mixed}: audio not readable: {exc}", "unreadable") from None
            if data.shape[1] < 2:
                raise AudioError(
                    f"{mixed}: mono where stereo is expected (left: input, right: output), and "
                    "input.wav/output.wav are absent: the user side cannot be told from the agent",
                    kind="mono",
                )
            user = resample(Audio(data[:, 0].copy(), int(sr)), ANALYSIS_SR).samples
            agent = resample(Audio(data[:, 1].copy(), int(sr)), ANALYSIS_SR).samples
            notes.append(
                Problem(
                    str(mixed),
                    None,
                    None,
                    "warning",
                    "input.wav/output.wav absent: sides taken from mixed.wav (left input, right "
                    "output)",
                )
            )
        else:
            missing = [p.name for p in (inp, outp) if not p.is_file()]
            raise AudioError(
                f"{folder}: no audio to score ({', '.join(missing)} missing and no mixed.wav)",
                kind="no-audio",
            )
    except AudioError as exc:
        raise BundleError(exc.kind, str(exc)) from None
    n = max(len(user), len(agent))
    user = np.pad(user, (0, n - len(user)))
    agent = np.pad(agent, (0, n - len(agent)))
    return user, agent, ANALYSIS_SR, notes


def segments_from_audio(folder: Path, detector: str) -> tuple[dict[str, Any], list[Problem]]:
    """Both sides' segments (``include_noise=True``) and the audio length, as recordings."""
    user, agent, sr, notes = load_sides(folder)
    out = segments_of(user, agent, sr, detector)
    for side, name in (("user", "input.wav"), ("agent", "output.wav")):
        for msg in out["acoustic"][side]["problems"]:
            notes.append(Problem(str(folder / name), None, None, "warning", msg))
    return out, notes


def segments_of(user: Any, agent: Any, sr: int, detector: str) -> dict[str, Any]:
    """Segments as plain JSON values (gaps as lists), as a record or features.json holds them,
    with each side's acoustic report (each side checked against the other for leakage)."""
    from voxassay.suites.duplex.evidence.acoustic import detect_channels

    def plain(seg: Any) -> dict[str, Any]:
        d = asdict(seg)
        d["gaps"] = [list(g) for g in d["gaps"]]
        return d

    found, reports = detect_channels([user, agent], sr, detector=detector, include_noise=True)
    sides = ("user", "agent")
    return {
        "segments": {
            side: [plain(s) for s in segs] for side, segs in zip(sides, found, strict=True)
        },
        "duration_s": len(user) / sr,
        "detector": detector,
        "acoustic": {side: asdict(r) for side, r in zip(sides, reports, strict=True)},
    }
