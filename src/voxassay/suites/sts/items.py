"""The speech-to-speech item set (``data/items.yaml``), typed and checked.

Five dimensions (``DIMENSIONS``), each with the raters' question. Scenarios are ``natural``
(one free-form message) or ``scripted`` (``earlier`` user turns are played first; the
system's own answers stay in its history, then each item in turn). An item: what the user
says (``say``: words only, fillers are words), how the shipped render says it (``style``),
its ``stressors`` (``STRESSORS``), the ``core_issue`` of a redirection item, and a checklist:
observable properties of a good answer, each checkable from the answer's transcript when it
has ``any`` (one of these substrings, lower case, must occur) and/or ``none`` (none may).
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from voxassay.core.errors import InputError

__all__ = [
    "DIMENSIONS",
    "STRESSORS",
    "STYLES",
    "Check",
    "StsItem",
    "StsScenario",
    "item_set_version",
    "load_items",
    "select_items",
]

DATA = Path(__file__).parent / "data" / "items.yaml"

DIMENSIONS = (
    "emotion_understanding",
    "emotion_alignment",
    "expressive_robustness",
    "speech_naturalness",
    "issue_redirection",
)
AUDIO_DIMENSIONS = frozenset({"speech_naturalness"})
"""Dimensions judged on the answer's sound: a text-only answer is unscored there."""

STRESSORS = (
    "degraded_noise",
    "degraded_codec",
    "degraded_packet_loss",
    "degraded_reverb",
    "hostile",
    "urgent",
    "hesitant",
    "ambiguous_emotion",
)
STYLES = ("neutral", "hesitant", "afraid", "upset", "angry", "urgent", "sad")
"""How a render says the words (``render.STYLE_PROSODY``)."""

EMOTION_DIMENSIONS = frozenset({"emotion_understanding", "emotion_alignment"})


@dataclass(frozen=True)
class Check:
    """One checklist line; ``checkable`` when it has patterns."""

    text: str
    any: tuple[str, ...] = ()
    none: tuple[str, ...] = ()

    @property
    def checkable(self) -> bool:
        return bool(self.any or self.none)

    def passes(self, answer: str) -> bool | None:
        """Whether ``answer`` has the property (None: not checkable from text)."""
        if not self.checkable:
            return None
        a = " ".join(answer.lower().split())
        if self.any and not any(p in a for p in self.any):
            return False
        return not any(p in a for p in self.none)


@dataclass(frozen=True)
class StsItem:
    id: str
    scenario: str
    scenario_type: Literal["natural", "scripted"]
    dimension: str
    say: str
    style: str
    stressors: tuple[str, ...]
    checklist: tuple[Check, ...]
    question: str
    core_issue: str | None = None
    earlier: tuple[str, ...] = ()

    def labels(self) -> dict[str, Any]:
        """What a record carries about its item (never given to the system)."""
        return {
            "scenario": self.scenario,
            "scenario_type": self.scenario_type,
            "dimension": self.dimension,
            "style": self.style,
            "stressors": list(self.stressors),
            "core_issue": self.core_issue,
        }


@dataclass(frozen=True)
class StsScenario:
    id: str
    type: Literal["natural", "scripted"]
    earlier: tuple[str, ...]
    items: tuple[StsItem, ...]


def _problem(where: str, message: str) -> InputError:
    return InputError(f"{where}: {message}")


def _check(raw: Any, where: str) -> Check:
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
        raise _problem(where, "a checklist line needs text")
    extra = set(raw) - {"text", "any", "none"}
    if extra:
        raise _problem(where, f"unknown checklist keys {sorted(extra)}")
    pats = {k: tuple(str(p).lower() for p in raw.get(k) or ()) for k in ("any", "none")}
    return Check(raw["text"], pats["any"], pats["none"])


def parse_items(doc: Any, source: str = "items.yaml") -> list[StsScenario]:
    """Typed scenarios from a parsed item file (``InputError`` naming the first problem)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("scenarios"), list):
        raise _problem(source, "needs dimensions and scenarios")
    dims = doc.get("dimensions") or {}
    if set(dims) != set(DIMENSIONS):
        raise _problem(source, f"dimensions must be exactly {', '.join(DIMENSIONS)}")
    seen: set[str] = set()
    out: list[StsScenario] = []
    for s in doc["scenarios"]:
        sid, stype = str(s.get("id")), s.get("type")
        if stype not in ("natural", "scripted"):
            raise _problem(f"{source}: {sid}", "type is natural or scripted")
        earlier = tuple(str(t) for t in s.get("earlier") or ())
        if (stype == "scripted") != bool(earlier):
            raise _problem(f"{source}: {sid}", "a scripted scenario (only) has earlier turns")
        items = []
        for raw in s.get("items") or ():
            iid = str(raw.get("id"))
            where = f"{source}: {iid}"
            if iid in seen:
                raise _problem(where, "duplicate item id")
            seen.add(iid)
            dim = raw.get("dimension")
            if dim not in DIMENSIONS:
                raise _problem(where, f"unknown dimension {dim!r}")
            if raw.get("style") not in STYLES:
                raise _problem(where, f"style is one of {', '.join(STYLES)}")
            stressors = tuple(raw.get("stressors") or ())
            unknown = [x for x in stressors if x not in STRESSORS]
            if unknown:
                raise _problem(where, f"unknown stressors {unknown}")
            core = raw.get("core_issue")
            if dim == "issue_redirection" and not core:
                raise _problem(where, "a redirection item names its core_issue")
            checks = tuple(_check(c, where) for c in raw.get("checklist") or ())
            if not checks:
                raise _problem(where, "a rubric needs at least one checklist line")
            items.append(
                StsItem(
                    id=iid,
                    scenario=sid,
                    scenario_type=stype,
                    dimension=dim,
                    say=str(raw.get("say") or ""),
                    style=str(raw["style"]),
                    stressors=stressors,
                    checklist=checks,
                    question=str(dims[dim]["question"]),
                    core_issue=str(core) if core else None,
                    earlier=earlier,
                )
            )
        out.append(StsScenario(sid, stype, earlier, tuple(items)))
    return out


@cache
def load_items(path: str | None = None) -> tuple[StsScenario, ...]:
    """The shipped item set (or the file at ``path``)."""
    p = Path(path) if path else DATA
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{p}: cannot read the item set: {exc}") from exc
    return tuple(parse_items(doc, p.name))


def item_set_version(path: str | None = None) -> str:
    """``sts-items-<version>-<sha12>`` of the item file (in run.json and the fingerprint)."""
    p = Path(path) if path else DATA
    raw = p.read_bytes()
    version = (yaml.safe_load(raw) or {}).get("version", 0)
    return f"sts-items-{version}-{hashlib.sha256(raw).hexdigest()[:12]}"


def select_items(
    scenarios: tuple[StsScenario, ...], only: tuple[str, ...] = ()
) -> list[StsScenario]:
    """Scenarios with the items whose id, scenario, dimension or scenario type matches one of
    the ``only`` globs (all when none); a scripted scenario keeps its earlier turns."""
    if not only:
        return list(scenarios)
    out = []
    for s in scenarios:
        keep = tuple(
            it
            for it in s.items
            if any(
                fnmatch.fnmatch(v, g)
                for g in only
                for v in (it.id, it.scenario, it.dimension, it.scenario_type)
            )
        )
        if keep:
            out.append(StsScenario(s.id, s.type, s.earlier, keep))
    if not out:
        raise InputError(f"--only {' '.join(only)}: no item matches")
    return out
