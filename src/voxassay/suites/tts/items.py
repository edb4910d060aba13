"""TTS item sets: seven dimensions of evals, each eval a list of texts to synthesize.

The shipped items live in ``data/items/<dimension>.yaml``: a ``dimension`` key, its ``evals``
(id, title, the question a human rater is asked, scale, the automatic scores that judge it,
the primary score for the profile, description) and its ``items``. ``data/sets/*.txt`` name
subsets: one item id, ``eval:<id>`` or ``dimension:<id>`` per line, ``#`` comments.

Structural problems (unreadable YAML, a duplicate id, an unknown eval, a field of the wrong
type) refuse the whole set with ``file:line`` (:class:`~voxassay.core.errors.ManifestError`);
content problems of one item (a critical token that is not a substring of its text, a contrast
reference that is missing or not neutral, an identity group without exactly one anchor) are
kept on the item as ``problem`` and become an error record for that item.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

import yaml

from voxassay.core import yamlload
from voxassay.core.errors import InputError, ManifestError
from voxassay.core.items import Item

__all__ = [
    "CONTRAST_FEATURES",
    "DIMENSIONS",
    "SCORES",
    "TTS_ITEMS_VERSION",
    "TTSEval",
    "TTSItem",
    "dependencies",
    "eval_table",
    "items_fingerprint",
    "load_item_set",
    "set_names",
    "shipped_evals",
    "to_item",
]

#: Bumps whenever any shipped text, instruction, critical token or contrast changes.
TTS_ITEMS_VERSION: Final = "1.1"
#: ``items_fingerprint()`` of the shipped items for each released version (tests pin it).
FINGERPRINTS: Final = {
    "1.0": "26dfff609d3a6285d80c643876bbc2fbb4ce4f0c38941813a02d5befab41ac1a",
    # 1.1: long-00, a short three-paragraph passage for the quick demo
    "1.1": "bfe19e2ce8efc858cabdae9dda5f1db9bd695652dd1af5c5908b1955c47dbf1b",
}

DIMENSIONS: Final = (
    "performance",
    "expressiveness",
    "identity_stress",
    "linguistic",
    "critical_content",
    "long_form",
    "audio_quality",
)
#: Per-item scores an eval may name as automatic/primary (see the TTS contract's Profile).
SCORES: Final = (
    "critical_accuracy",
    "intelligibility",
    "prosody_following",
    "identity",
    "longform_stability",
    "quality",
)
#: Features a contrast may expect to go "up" or "down".
CONTRAST_FEATURES: Final = ("f0_median", "f0_range", "energy", "rate", "pause_ratio")

DATA_DIR: Final = Path(__file__).parent / "data"
ITEMS_DIR: Final = DATA_DIR / "items"
SETS_DIR: Final = DATA_DIR / "sets"

_ITEM_KEYS: Final = frozenset(
    {"id", "eval", "dimension", "text", "instructions", "critical_tokens", "labels", "contrast"}
    | {"segments"}
)


@dataclass(frozen=True)
class TTSEval:
    """One eval: what is measured, the human question and the automatic scores that judge it.

    ``automatic`` empty means humans only (``primary`` is then None).
    """

    id: str
    dimension: str
    title: str
    question: str
    scale: dict[str, int]
    automatic: list[str]
    primary: str | None
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dimension": self.dimension,
            "title": self.title,
            "question": self.question,
            "scale": dict(self.scale),
            "automatic": list(self.automatic),
            "primary": self.primary,
            "description": self.description,
        }


@dataclass
class TTSItem:
    """One text to synthesize (fields as in the TTS contract).

    ``problem`` says why the item cannot be scored though it loaded; ``source`` is
    ``file:line`` of its definition.
    """

    id: str
    dimension: str
    eval: str
    text: str
    instructions: str | None = None
    critical_tokens: list[str] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)
    contrast: dict[str, Any] | None = None
    segments: list[str] | None = None
    problem: str | None = field(default=None, compare=False)
    source: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "dimension": self.dimension,
            "eval": self.eval,
            "text": self.text,
            "instructions": self.instructions,
            "critical_tokens": list(self.critical_tokens),
            "labels": dict(self.labels),
            "contrast": self.contrast,
            "segments": self.segments,
        }
        return {k: v for k, v in d.items() if v not in (None, [], {})}


def to_item(it: TTSItem) -> Item:
    """The core :class:`Item` for records and ``items.jsonl``: ``text``, ``labels`` =
    ``{dimension, eval, **labels}``, ``meta`` = ``{instructions, critical_tokens, contrast,
    segments}``; the item's ``problem`` carries over."""
    meta = {
        "instructions": it.instructions,
        "critical_tokens": list(it.critical_tokens),
        "contrast": it.contrast,
        "segments": it.segments,
    }
    return Item(
        id=it.id,
        text=it.text,
        labels={"dimension": it.dimension, "eval": it.eval, **it.labels},
        meta=meta,
        problem=it.problem,
    )


# --------------------------------------------------------------------------------------------
# Reading YAML with line numbers
# --------------------------------------------------------------------------------------------


def _line_map(node: yaml.Node) -> dict[int, int]:
    """Index of each entry of the top-level ``items`` list -> its 1-based line."""
    lines: dict[int, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if (
                isinstance(key, yaml.ScalarNode)
                and key.value == "items"
                and isinstance(value, yaml.SequenceNode)
            ):
                for i, child in enumerate(value.value):
                    lines[i] = child.start_mark.line + 1
    return lines


def _read_yaml(path: Path) -> tuple[Any, dict[int, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read item file {path}: {exc}") from exc
    try:
        node = yamlload.compose(text)
        data = yamlload.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise ManifestError(str(path), [(line, f"not valid YAML: {exc}")]) from exc
    return data, (_line_map(node) if node is not None else {})


def _parse_eval(raw: Any, dimension: str, where: str) -> TTSEval:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: an eval must be a mapping")
    missing = [k for k in ("id", "title", "question") if not raw.get(k)]
    if missing:
        raise ValueError(f"{where}: eval lacks {', '.join(missing)}")
    automatic = raw.get("automatic") or []
    if not isinstance(automatic, list) or any(a not in SCORES for a in automatic):
        raise ValueError(f"{where}: eval {raw['id']!r}: automatic must list scores of {SCORES}")
    primary = raw.get("primary")
    if primary is not None and primary not in automatic:
        raise ValueError(f"{where}: eval {raw['id']!r}: primary {primary!r} not in automatic")
    if automatic and primary is None:
        raise ValueError(f"{where}: eval {raw['id']!r}: automatic scores but no primary")
    scale = raw.get("scale") or {"min": 1, "max": 5}
    if not (isinstance(scale, dict) and {"min", "max"} <= set(scale)):
        raise ValueError(f"{where}: eval {raw['id']!r}: scale needs min and max")
    return TTSEval(
        id=str(raw["id"]),
        dimension=dimension,
        title=str(raw["title"]),
        question=str(raw["question"]),
        scale={"min": int(scale["min"]), "max": int(scale["max"])},
        automatic=[str(a) for a in automatic],
        primary=primary,
        description=str(raw.get("description") or ""),
    )


def _parse_item(raw: Any, evals: dict[str, TTSEval], default_dim: str | None) -> TTSItem:
    """One item from a mapping; raises ``ValueError`` with the reason."""
    if not isinstance(raw, dict):
        raise ValueError("an item must be a mapping")
    if "labels" in raw and isinstance(raw.get("labels"), dict) and "eval" not in raw:
        # a to_item() snapshot line: dimension/eval in labels, the rest in meta
        labels = dict(raw["labels"])
        meta = dict(raw.get("meta") or {})
        raw = {
            "id": raw.get("id"),
            "text": raw.get("text"),
            "dimension": labels.pop("dimension", None),
            "eval": labels.pop("eval", None),
            "labels": labels,
            **{k: v for k, v in meta.items() if k in _ITEM_KEYS},
        }
    unknown = sorted(set(raw) - _ITEM_KEYS)
    if unknown:
        raise ValueError(f"unknown item field(s): {', '.join(unknown)}")
    item_id = raw.get("id")
    if not isinstance(item_id, str) or not item_id.strip():
        raise ValueError("item has no 'id'")
    eval_id = raw.get("eval")
    if eval_id not in evals:
        near = difflib.get_close_matches(str(eval_id), list(evals), n=2)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise ValueError(f"item {item_id!r}: unknown eval {eval_id!r}{hint}")
    ev = evals[eval_id]
    dimension = raw.get("dimension") or default_dim or ev.dimension
    if dimension != ev.dimension:
        raise ValueError(f"item {item_id!r}: eval {eval_id!r} belongs to {ev.dimension!r}")
    segments = raw.get("segments")
    if segments is not None and (
        not isinstance(segments, list) or not all(isinstance(s, str) for s in segments)
    ):
        raise ValueError(f"item {item_id!r}: segments must be a list of strings")
    text = raw.get("text")
    if text is None and segments:
        text = "\n\n".join(s.strip() for s in segments)
    if not isinstance(text, str):
        raise ValueError(f"item {item_id!r}: no text")
    crit = raw.get("critical_tokens") or []
    if not isinstance(crit, list) or not all(isinstance(c, str) for c in crit):
        raise ValueError(f"item {item_id!r}: critical_tokens must be a list of strings")
    labels = raw.get("labels") or {}
    if not isinstance(labels, dict):
        raise ValueError(f"item {item_id!r}: labels must be a mapping")
    contrast = raw.get("contrast")
    if contrast is not None and not isinstance(contrast, dict):
        raise ValueError(f"item {item_id!r}: contrast must be a mapping")
    instructions = raw.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ValueError(f"item {item_id!r}: instructions must be a string")
    return TTSItem(
        id=item_id,
        dimension=str(dimension),
        eval=str(eval_id),
        text=text,
        instructions=instructions or None,
        critical_tokens=list(crit),
        labels=dict(labels),
        contrast=dict(contrast) if contrast else None,
        segments=[s.strip() for s in segments] if segments else None,
    )


def _load_yaml_file(
    path: Path, evals: dict[str, TTSEval] | None = None
) -> tuple[dict[str, TTSEval], list[TTSItem]]:
    """Evals and items of one YAML file. Evals defined in the file are added to ``evals``."""
    data, lines = _read_yaml(path)
    problems: list[tuple[int, str]] = []
    if not isinstance(data, dict):
        raise ManifestError(str(path), [(1, "expected a mapping with 'evals' and/or 'items'")])
    dimension = data.get("dimension")
    if dimension is not None and dimension not in DIMENSIONS:
        problems.append((1, f"unknown dimension {dimension!r}; known: {', '.join(DIMENSIONS)}"))
    known = dict(evals or {})
    own: dict[str, TTSEval] = {}
    for i, raw in enumerate(data.get("evals") or []):
        try:
            ev = _parse_eval(raw, str(dimension), f"evals[{i}]")
        except ValueError as exc:
            problems.append((1, str(exc)))
            continue
        own[ev.id] = ev
    known.update(own)
    items: list[TTSItem] = []
    for i, raw in enumerate(data.get("items") or []):
        line = lines.get(i, 0)
        try:
            it = _parse_item(raw, known, dimension)
        except ValueError as exc:
            problems.append((line, str(exc)))
            continue
        it.source = f"{path}:{line}"
        items.append(it)
    if problems:
        raise ManifestError(str(path), problems)
    return own, items


@cache
def _shipped() -> tuple[tuple[TTSEval, ...], tuple[TTSItem, ...]]:
    evals: dict[str, TTSEval] = {}
    items: list[TTSItem] = []
    for dim in DIMENSIONS:
        path = ITEMS_DIR / f"{dim}.yaml"
        if not path.is_file():
            raise InputError(f"shipped item file missing: {path}")
        own, its = _load_yaml_file(path, evals)
        evals.update(own)
        items.extend(its)
    return tuple(evals.values()), tuple(items)


def shipped_evals() -> dict[str, TTSEval]:
    """Every shipped eval by id, in dimension order."""
    return {ev.id: ev for ev in _shipped()[0]}


def _all_shipped_items() -> list[TTSItem]:
    import copy

    return [copy.deepcopy(it) for it in _shipped()[1]]


# --------------------------------------------------------------------------------------------
# Checks across items
# --------------------------------------------------------------------------------------------


def _refuse_duplicates(items: Sequence[TTSItem]) -> None:
    seen: dict[str, TTSItem] = {}
    dups: list[str] = []
    for it in items:
        if it.id in seen:
            dups.append(
                f"item id {it.id!r} at {it.source} was already defined at {seen[it.id].source}"
            )
        else:
            seen[it.id] = it
    if dups:
        raise InputError("duplicate item ids:\n  " + "\n  ".join(dups))


def _is_neutral(it: TTSItem) -> bool:
    return it.labels.get("emotion") == "neutral" or it.labels.get("role") == "neutral"


def _check_items(items: Sequence[TTSItem]) -> None:
    """Set ``problem`` on items whose content cannot be scored (module docstring)."""
    by_id = {it.id: it for it in items}
    groups: dict[str, list[TTSItem]] = {}
    for it in items:
        reasons: list[str] = []
        if not it.text.strip():
            reasons.append("empty text")
        for tok in it.critical_tokens:
            if not tok or tok not in it.text:
                reasons.append(f"critical token {tok!r} is not a substring of the text")
        if it.contrast is not None:
            ref = it.contrast.get("reference")
            expect = it.contrast.get("expect")
            if ref not in by_id:
                reasons.append(f"contrast reference {ref!r} is not in the set")
            elif not _is_neutral(by_id[ref]):
                reasons.append(f"contrast reference {ref!r} is not labelled neutral")
            if not isinstance(expect, dict) or not expect:
                reasons.append("contrast.expect must name at least one feature")
            else:
                for feat, direction in expect.items():
                    if feat not in CONTRAST_FEATURES or direction not in ("up", "down"):
                        reasons.append(
                            f"contrast.expect {feat}: {direction} is not "
                            f"one of {CONTRAST_FEATURES} x up/down"
                        )
        if it.segments is not None and it.text != "\n\n".join(it.segments):
            reasons.append("text is not the join of its segments")
        if it.dimension == "identity_stress":
            group = it.labels.get("group")
            if not group or not it.labels.get("condition"):
                reasons.append("identity item without labels.group and labels.condition")
            else:
                groups.setdefault(str(group), []).append(it)
        if reasons:
            it.problem = "; ".join(reasons)
    for group, members in groups.items():
        anchors = [m for m in members if m.labels.get("condition") == "neutral"]
        if len(anchors) != 1:
            for m in members:
                why = f"identity group {group!r} has {len(anchors)} neutral anchors (needs 1)"
                m.problem = f"{m.problem}; {why}" if m.problem else why


def dependencies(it: TTSItem, by_id: dict[str, TTSItem]) -> list[str]:
    """Ids an item needs to be scored: its contrast reference and its identity anchor."""
    deps: list[str] = []
    if it.contrast and it.contrast.get("reference") in by_id:
        deps.append(str(it.contrast["reference"]))
    group = it.labels.get("group")
    if it.dimension == "identity_stress" and group and it.labels.get("condition") != "neutral":
        deps.extend(
            o.id
            for o in by_id.values()
            if o.labels.get("group") == group and o.labels.get("condition") == "neutral"
        )
    return deps


# --------------------------------------------------------------------------------------------
# Sets and selection
# --------------------------------------------------------------------------------------------


def set_names() -> list[str]:
    """Names of the shipped sets (``default``, ``demo``, ...)."""
    return sorted(p.stem for p in SETS_DIR.glob("*.txt"))


def _from_set_file(path: Path) -> list[TTSItem]:
    pool = _all_shipped_items()
    by_id = {it.id: it for it in pool}
    evals = shipped_evals()
    chosen: dict[str, TTSItem] = {}
    problems: list[tuple[int, str]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read set file {path}: {exc}") from exc
    for n, raw in enumerate(lines, 1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        if entry.startswith("eval:"):
            name = entry[5:].strip()
            if name not in evals:
                problems.append((n, f"unknown eval {name!r}"))
            chosen.update({it.id: it for it in pool if it.eval == name})
        elif entry.startswith("dimension:"):
            name = entry[10:].strip()
            if name not in DIMENSIONS:
                problems.append((n, f"unknown dimension {name!r}"))
            chosen.update({it.id: it for it in pool if it.dimension == name})
        elif entry in by_id:
            chosen[entry] = by_id[entry]
        else:
            near = difflib.get_close_matches(entry, list(by_id), n=2)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            problems.append((n, f"unknown item id {entry!r}{hint}"))
    if problems:
        raise ManifestError(str(path), problems)
    return list(chosen.values())


def _from_jsonl(path: Path) -> tuple[dict[str, TTSEval], list[TTSItem]]:
    evals = shipped_evals()
    items: list[TTSItem] = []
    problems: list[tuple[int, str]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read item manifest {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            it = _parse_item(json.loads(line), evals, None)
        except (ValueError, json.JSONDecodeError) as exc:
            problems.append((n, str(exc)))
            continue
        it.source = f"{path}:{n}"
        items.append(it)
    if problems:
        raise ManifestError(str(path), problems)
    return evals, items


def _select(items: list[TTSItem], only: Sequence[str], evals: dict[str, TTSEval]) -> list[TTSItem]:
    """Items matching any ``only`` entry (dimension, eval id or item-id glob), plus the items
    they depend on (contrast references, identity anchors) so they can still be scored."""
    if not only:
        return items
    by_id = {it.id: it for it in items}
    keep: dict[str, TTSItem] = {}
    for sel in only:
        hits = [
            it
            for it in items
            if it.dimension == sel or it.eval == sel or fnmatch.fnmatchcase(it.id, sel)
        ]
        if not hits:
            known = [*DIMENSIONS, *evals]
            near = difflib.get_close_matches(sel, [*known, *by_id], n=3)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise InputError(
                f"--only {sel!r} matches no dimension, eval or item id.{hint} "
                f"Dimensions: {', '.join(DIMENSIONS)}. Evals: {', '.join(evals)}."
            )
        keep.update({it.id: it for it in hits})
    for it in list(keep.values()):
        for dep in dependencies(it, by_id):
            keep.setdefault(dep, by_id[dep])
    return [it for it in items if it.id in keep]


def load_item_set(
    name_or_path: str = "default", only: Sequence[str] = ()
) -> tuple[dict[str, TTSEval], list[TTSItem]]:
    """Evals and items of a set.

    ``name_or_path``: a shipped set name (``default``, ``demo``), a set file (``.txt``), a YAML
    item file (its own ``evals`` plus the shipped ones) or a JSONL manifest of items (one
    :meth:`TTSItem.to_dict` or :func:`to_item` object per line). ``only`` keeps items whose
    dimension, eval id or id (glob) matches any entry, plus their dependencies. Returns the
    evals the items use (in dimension order) and the items in file order. Unknown names raise
    :class:`InputError` listing what exists; duplicate ids are refused with ``file:line``.
    """
    path = Path(name_or_path).expanduser()
    evals = shipped_evals()
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in (".yaml", ".yml"):
            own, items = _load_yaml_file(path, evals)
            evals = {**evals, **own}
        elif suffix in (".jsonl", ".json"):
            evals, items = _from_jsonl(path)
        else:
            items = _from_set_file(path)
    elif "/" not in name_or_path and (SETS_DIR / f"{name_or_path}.txt").is_file():
        items = _from_set_file(SETS_DIR / f"{name_or_path}.txt")
    else:
        names = set_names()
        near = difflib.get_close_matches(name_or_path, names, n=2, cutoff=0.5)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise InputError(
            f"{name_or_path!r} is neither a shipped item set nor an item file "
            f"(.yaml, .jsonl or a .txt set file).{hint} Shipped sets: {', '.join(names)}."
        )
    _refuse_duplicates(items)
    _check_items(items)
    items = _select(items, only, evals)
    used = {it.eval for it in items}
    return {k: v for k, v in evals.items() if k in used}, items


# --------------------------------------------------------------------------------------------
# Tables and provenance
# --------------------------------------------------------------------------------------------


def eval_table(name_or_path: str = "default") -> list[dict[str, Any]]:
    """One row per eval of a set, for the study export and the report: the eval's fields
    (:meth:`TTSEval.to_dict`) plus ``n_items`` and ``n_scored`` (items the primary score can
    judge: with a contrast for prosody following, non-anchors for identity, all others)."""
    evals, items = load_item_set(name_or_path)
    rows = []
    for ev in evals.values():
        its = [it for it in items if it.eval == ev.id]
        if ev.primary == "prosody_following":
            scored = [it for it in its if it.contrast]
        elif ev.primary == "identity":
            scored = [it for it in its if it.labels.get("condition") != "neutral"]
        elif ev.primary is None:
            scored = []
        else:
            scored = its
        rows.append({**ev.to_dict(), "n_items": len(its), "n_scored": len(scored)})
    return rows


def items_fingerprint(items: Sequence[TTSItem] | None = None) -> str:
    """SHA-256 over every item's scored content (id, eval, text, instructions, critical
    tokens, labels, contrast), in order; shipped items when ``items`` is None."""
    its = list(_shipped()[1]) if items is None else list(items)
    h = hashlib.sha256()
    for it in its:
        d = it.to_dict()
        h.update(json.dumps(d, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
