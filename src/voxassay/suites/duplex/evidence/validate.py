"""Check scenarios, matrices, ledgers, manifests and bundles; report problems with file and line.

``validate_path`` works out what a path is: a scenario or matrix YAML, a directory of them,
an ``events.jsonl`` ledger, a ``manifest.json``, a bundle directory (it holds
``manifest.json`` or ``events.jsonl``), or a folder of bundles (a run's ``bundles/``).
YAML errors are mapped back to lines through the composed node tree; ledger errors carry
their JSONL line.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ValidationError

from voxassay.contracts.duplex import catalogue
from voxassay.contracts.duplex.common import DEFER_CROSS_CHECKS, Loc, Problem
from voxassay.contracts.duplex.evidence import (
    SELF_DECLARED_LEVEL_KEYS,
    assess_evidence,
    check_redaction,
    read_features,
)
from voxassay.contracts.duplex.manifest import (
    EXPECTED_CHANNELS,
    OPTIONAL_BUNDLE_FILES,
    REQUIRED_BUNDLE_FILES,
    BundleManifest,
    sha256_file,
)
from voxassay.contracts.duplex.matrix import (
    DEFAULT_MIN_N,
    AcceptanceMatrix,
    Statistic,
    matrix_cross_checks,
)
from voxassay.contracts.duplex.scenario import (
    Scenario,
    Segment,
    scenario_cross_checks,
    segment_cross_checks,
)
from voxassay.contracts.duplex.vocabulary import (
    Category,
    Intent,
    Role,
    TurnAction,
    is_known_event_type,
    unknown_event_hint,
)
from voxassay.core import yamlload
from voxassay.core.errors import InputError
from voxassay.suites.duplex.evidence.validate_events import (
    LedgerSummary,
    validate_events,
)

__all__ = [
    "AUDIO_SPAN_TOLERANCE_MS",
    "DuplexInputError",
    "Problem",
    "load_manifest",
    "load_matrix",
    "load_scenario",
    "load_scenarios",
    "validate_bundle",
    "validate_manifest",
    "validate_path",
    "validate_yaml",
]

AUDIO_SPAN_TOLERANCE_MS = 50
"""Audio may be this much shorter than the ledger's time span before it is an error."""


class DuplexInputError(InputError):
    """A scenario, matrix or manifest that does not validate; ``problems`` has the details."""

    kind = "duplex-input"

    def __init__(self, path: Path, problems: list[Problem]) -> None:
        self.problems = problems
        errors = [p for p in problems if p.severity == "error"]
        text = "\n".join("  " + p.format() for p in errors[:30])
        more = f"\n  ... and {len(errors) - 30} more" if len(errors) > 30 else ""
        super().__init__(f"{len(errors)} error(s) in {path}:\n{text}{more}")


# --------------------------------------------------------------------------- entry points


def validate_path(path: str | Path) -> list[Problem]:
    """Every problem found under ``path`` (see the module docstring for what is recognised).

    Problems come grouped by file (in the order files were checked), by line within a file.
    """
    problems = _validate_any(Path(path))
    order: dict[str, int] = {}
    for p in problems:
        order.setdefault(p.file, len(order))
    return sorted(problems, key=lambda p: (order[p.file], p.line or 0, p.column or 0))


def _validate_any(path: Path) -> list[Problem]:
    if not path.exists():
        return [Problem(str(path), None, None, "error", "no such file or directory")]
    if path.is_dir():
        if _is_bundle(path):
            return validate_bundle(path)
        problems, found = _walk(path)
        if not found:
            msg = "no scenarios, matrices, ledgers or bundles found here"
            problems.append(Problem(str(path), None, None, "error", msg))
        return problems
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return validate_yaml(path)
    if suffix == ".jsonl":
        return validate_events(path).problems
    if path.name == "manifest.json":
        return validate_manifest(path)[1]
    msg = "cannot tell what this is (expected .yaml, .jsonl, manifest.json or a bundle folder)"
    return [Problem(str(path), None, None, "error", msg)]


def _is_bundle(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "events.jsonl").is_file()


def _walk(folder: Path) -> tuple[list[Problem], bool]:
    problems: list[Problem] = []
    found = False
    for child in sorted(folder.iterdir()):
        if child.name.startswith((".", "__")):
            continue
        if child.is_dir():
            if _is_bundle(child):
                problems += validate_bundle(child)
                found = True
            else:
                sub, sub_found = _walk(child)
                problems += sub
                found = found or sub_found
        elif child.suffix.lower() in (".yaml", ".yml"):
            probs = validate_yaml(child, explicit=False)
            found = found or not (probs and probs[0].message.startswith(_SKIPPED))
            problems += probs
    return problems, found


_SKIPPED = "skipped:"


# --------------------------------------------------------------------------- YAML with lines


class _Loader(yamlload.SafeLoader):  # type: ignore[misc,valid-type]
    """Safe loader that keeps dates as written (``2026-08-10`` stays a string)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class _Doc:
    """A parsed YAML/JSON document: its node tree (for lines) and its data."""

    file: str
    node: yaml.Node | None = None
    data: Any = None
    problems: list[Problem] = field(default_factory=list)

    def problem(
        self, loc: Loc, message: str, severity: Literal["error", "warning"] = "error"
    ) -> Problem:
        line, col = _line_of(self.node, loc)
        return Problem(self.file, line, col, severity, message)


def _parse_yaml(path: Path, name: str | None = None) -> _Doc:
    doc = _Doc(name or str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        doc.problems.append(Problem(doc.file, None, None, "error", f"not UTF-8 text: {exc}"))
        return doc
    loader = _Loader(text)
    try:
        doc.node = loader.get_single_node()
        if doc.node is None:
            doc.problems.append(Problem(doc.file, 1, None, "error", "empty document"))
            return doc
        yamlload.expanded_size(doc.node)  # before anything walks an alias bomb
        doc.problems += _duplicate_keys(doc.node, doc.file)
        doc.data = loader.construct_document(doc.node)
    except yamlload.AliasBombError as exc:
        doc.problems.append(Problem(doc.file, None, None, "error", str(exc)))
        doc.node = doc.data = None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        what = " ".join(x for x in (exc.context, exc.problem) if x) or str(exc)
        doc.problems.append(Problem(doc.file, line, col, "error", f"YAML syntax: {what}"))
        doc.node = doc.data = None
    finally:
        loader.dispose()
    return doc


def _duplicate_keys(node: yaml.Node, file: str) -> list[Problem]:
    """PyYAML keeps the last of two equal keys silently; we refuse them."""
    out: list[Problem] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in cur.value:
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if key.value in seen:
                        msg = f"duplicate key {key.value!r} (first on line {seen[key.value]})"
                        out.append(Problem(file, line, key.start_mark.column + 1, "error", msg))
                    else:
                        seen[key.value] = line
                stack.append(value)
        elif isinstance(cur, yaml.SequenceNode):
            stack.extend(cur.value)
    return out


def _line_of(root: yaml.Node | None, loc: Loc) -> tuple[int | None, int | None]:
    """1-based line and column of the deepest node that ``loc`` reaches (keys at their key)."""
    if root is None:
        return None, None
    node: yaml.Node = root
    mark = root.start_mark
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            hit = next((kv for kv in node.value if getattr(kv[0], "value", None) == part), None)
            if hit is None:
                break
            mark, node = hit[0].start_mark, hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            mark = node.start_mark
        else:
            continue  # union member names in pydantic locs ("str", "int") are skipped
    return mark.line + 1, mark.column + 1


def _field_names(*models: type[BaseModel]) -> set[str]:
    names: set[str] = set()
    todo = list(models)
    seen: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            names.add(name)
            for arg in _model_args(info.annotation):
                todo.append(arg)
    return names


def _model_args(annotation: Any) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in getattr(annotation, "__args__", ()):
        out += _model_args(arg)
    return out


def _pydantic_problems(doc: _Doc, exc: ValidationError, known: set[str]) -> list[Problem]:
    out = []
    for err in exc.errors(include_url=False):
        loc: Loc = tuple(err["loc"])
        kind = err["type"]
        where = _dotted(loc)
        if kind == "missing":
            msg = f"{_dotted(loc[:-1])}: missing required field {loc[-1]!r}"
            out.append(doc.problem(loc[:-1], msg.removeprefix("(top): ")))
            continue
        if kind == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}"
            close = difflib.get_close_matches(str(loc[-1]), sorted(known), n=1, cutoff=0.75)
            if close:
                msg += f" (did you mean {close[0]!r}?)"
            out.append(doc.problem(loc, f"{where}: {msg}"))
            continue
        if kind == "value_error":
            message = str((err.get("ctx") or {}).get("error", err["msg"]))
        else:
            message = err["msg"] + _got(err)
        out.append(doc.problem(loc, f"{where}: {message}"))
    return out


def _got(err: Any) -> str:
    value = err.get("input")
    if err["type"] != "missing" and (isinstance(value, str | int | float | bool) or value is None):
        return f" (got {repr(value)[:60]})"
    return ""


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("str", "int", "float", "bool") or not out:
            out += f".{part}" if out else str(part)
    return out or "(top)"


_SCENARIO_FIELDS = _field_names(Scenario)
_MATRIX_FIELDS = _field_names(AcceptanceMatrix)
_MANIFEST_FIELDS = _field_names(BundleManifest)


# --------------------------------------------------------------------------- scenarios, matrices


def validate_yaml(path: Path, explicit: bool = True, name: str | None = None) -> list[Problem]:
    """A scenario or an acceptance matrix, told apart by its ``segments`` / ``gates`` key."""
    doc = _parse_yaml(path, name)
    if doc.problems and doc.data is None:
        return doc.problems
    if isinstance(doc.data, dict) and "gates" in doc.data:
        return doc.problems + _check_matrix(doc)[1]
    if isinstance(doc.data, dict) and "segments" in doc.data:
        return doc.problems + _check_scenario(doc, path.parent)[1]
    if explicit:
        msg = "neither a scenario (no 'segments') nor an acceptance matrix (no 'gates')"
        return [*doc.problems, doc.problem((), msg)]
    msg = f"{_SKIPPED} not a scenario or acceptance matrix"
    return [Problem(doc.file, None, None, "warning", msg)]


def _check_scenario(doc: _Doc, base: Path) -> tuple[Scenario | None, list[Problem]]:
    """Schema, cross checks and advice; in a bundle (``manifest.json`` beside it) segment audio
    that is not there is a warning: the bundle's ``input.wav`` holds what was played."""
    if not isinstance(doc.data, dict):
        return None, [doc.problem((), "a scenario must be a mapping")]
    try:
        sc = Scenario.model_validate(doc.data, context={DEFER_CROSS_CHECKS: True})
    except ValidationError as exc:
        return None, _pydantic_problems(doc, exc, _SCENARIO_FIELDS) + _segment_fallback(doc)
    out = [doc.problem(loc, f"{_dotted(loc)}: {msg}") for loc, msg in scenario_cross_checks(sc)]
    in_bundle = (base / "manifest.json").is_file()
    out += [doc.problem(loc, msg, sev) for loc, msg, sev in _scenario_advice(sc, base, in_bundle)]
    return (sc if not any(p.severity == "error" for p in out) else None), out


def _segment_fallback(doc: _Doc) -> list[Problem]:
    """Cross-field rules of the segments that parse on their own (the scenario did not)."""
    segments = doc.data.get("segments") if isinstance(doc.data, dict) else None
    if not isinstance(segments, list):
        return []
    out: list[Problem] = []
    first: dict[str, int] = {}
    for i, raw in enumerate(segments):
        try:
            seg = Segment.model_validate(raw, context={DEFER_CROSS_CHECKS: True})
        except ValidationError:
            continue
        for loc, msg in segment_cross_checks(seg, ("segments", i)):
            out.append(doc.problem(loc, f"{_dotted(loc)}: {msg}"))
        if seg.id in first:
            msg = f"duplicate segment id {seg.id!r} (also segment {first[seg.id]})"
            out.append(doc.problem(("segments", i, "id"), f"segments[{i}].id: {msg}"))
        first.setdefault(seg.id, i)
    return out


def _scenario_advice(
    sc: Scenario, base: Path, in_bundle: bool = False
) -> list[tuple[Loc, str, Literal["error", "warning"]]]:
    """Checks beyond the schema: audio exists, triggers known, labels that scoring needs."""
    out: list[tuple[Loc, str, Literal["error", "warning"]]] = []
    for i, seg in enumerate(sc.segments):
        loc: Loc = ("segments", i)
        if seg.audio is not None:
            audio = Path(seg.audio) if Path(seg.audio).is_absolute() else base / seg.audio
            if not audio.is_file():
                if in_bundle:
                    msg = f"segment audio not in the bundle: {audio} (input.wav holds what was played)"
                    out.append(((*loc, "audio"), msg, "warning"))
                else:
                    out.append(((*loc, "audio"), f"audio file not found: {audio}", "error"))
        if seg.after is not None and not is_known_event_type(seg.after.event):
            msg = f"after.event: {unknown_event_hint(seg.after.event)}; the trigger may never fire"
            out.append(((*loc, "after", "event"), msg, "warning"))
        if not seg.expected_actions:
            msg = f"segment {seg.id!r} has no expected_actions: behaviour scoring skips it"
            out.append((loc, msg, "warning"))
    intents = {x for s in sc.segments for x in s.intents}
    actions = {x for s in sc.segments for x in s.expected_actions}
    roles = {s.role for s in sc.segments}
    wanted: dict[Category, tuple[bool, str]] = {
        Category.INTERRUPTION: (
            Intent.INTERRUPT in intents or TurnAction.INTERRUPT in actions,
            "no segment is labelled interrupt",
        ),
        Category.BACKCHANNEL: (Intent.BACKCHANNEL in intents, "no segment has intent backchannel"),
        Category.BYSTANDER_AMBIENT: (
            bool(roles - {Role.USER}),
            "no bystander, media, echo or noise segment",
        ),
        Category.CORRECTION_ENTITY: (
            Intent.CORRECTION in intents,
            "no segment has intent correction",
        ),
        Category.TOOLS_BACKGROUND: (bool(sc.tools), "no tools declared"),
        Category.NETWORK_MEDIA: (bool(sc.faults), "no faults declared"),
    }
    ok, why = wanted.get(sc.category, (True, ""))
    if not ok:
        out.append((("category",), f"category {sc.category}: {why}", "warning"))
    return out


def _check_matrix(doc: _Doc) -> tuple[AcceptanceMatrix | None, list[Problem]]:
    if not isinstance(doc.data, dict):
        return None, [doc.problem((), "an acceptance matrix must be a mapping")]
    try:
        m = AcceptanceMatrix.model_validate(doc.data, context={DEFER_CROSS_CHECKS: True})
    except ValidationError as exc:
        return None, _pydantic_problems(doc, exc, _MATRIX_FIELDS)
    out = [doc.problem(loc, f"{_dotted(loc)}: {msg}") for loc, msg in matrix_cross_checks(m)]
    for i, gate in enumerate(m.gates):
        if not math.isfinite(gate.threshold):
            msg = f"gate {gate.id!r}: threshold must be a finite number, not {gate.threshold}"
            out.append(doc.problem(("gates", i, "threshold"), msg))
        unknown = _unknown_metric(gate.metric)
        if unknown:
            out.append(doc.problem(("gates", i, "metric"), f"gate {gate.id!r}: {unknown}"))
        floor = DEFAULT_MIN_N[gate.statistic]
        if (
            gate.min_n is not None
            and gate.min_n < floor
            and gate.statistic
            in (
                Statistic.P50,
                Statistic.P95,
                Statistic.P99,
            )
        ):
            msg = (
                f"gate {gate.id!r}: min_n {gate.min_n} is below {floor}, the smallest n whose "
                f"sample maximum bounds the {gate.statistic} at 95% confidence"
            )
            out.append(doc.problem(("gates", i, "min_n"), msg, "warning"))
    return (m if not any(p.severity == "error" for p in out) else None), out


def _unknown_metric(name: str) -> str | None:
    """Why ``name`` names no metric of the duplex catalogue (with the nearest names), None if
    it names one: a misspelt gate is found before any session runs."""
    if catalogue.get(name) is not None:
        return None
    known = [*catalogue.names(), *(a for m in catalogue.CATALOGUE for a in m.aliases)]
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
    return f"unknown metric {name!r} (`voxassay duplex metrics` lists them){hint}"


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario YAML; raise ``DuplexInputError`` (with lines) if it has errors."""
    path = Path(path)
    doc = _parse_yaml(path)
    problems = list(doc.problems)
    sc = None
    if doc.data is not None:
        sc, more = _check_scenario(doc, path.parent)
        problems += more
    if sc is None or any(p.severity == "error" for p in problems):
        raise DuplexInputError(path, problems)
    return sc


def load_scenarios(folder: str | Path) -> list[Scenario]:
    """Every ``*.yaml`` scenario under ``folder`` (sorted by path)."""
    paths = sorted(p for p in Path(folder).rglob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    return [load_scenario(p) for p in paths]


def load_matrix(path: str | Path) -> AcceptanceMatrix:
    """Read an acceptance matrix YAML; raise ``DuplexInputError`` (with lines) on errors."""
    path = Path(path)
    doc = _parse_yaml(path)
    problems = list(doc.problems)
    m = None
    if doc.data is not None:
        m, more = _check_matrix(doc)
        problems += more
    if m is None or any(p.severity == "error" for p in problems):
        raise DuplexInputError(path, problems)
    return m


# --------------------------------------------------------------------------- manifest


def _parse_json(path: Path, name: str | None = None) -> _Doc:
    """JSON data, with a YAML node tree of the same text for line numbers when it composes."""
    doc = _Doc(name or str(path))
    try:
        text = path.read_text(encoding="utf-8")
        doc.data = json.loads(text)
    except UnicodeDecodeError as exc:
        doc.problems.append(Problem(doc.file, None, None, "error", f"not UTF-8 text: {exc}"))
        return doc
    except json.JSONDecodeError as exc:
        msg = f"malformed JSON: {exc.msg}"
        doc.problems.append(Problem(doc.file, exc.lineno, exc.colno, "error", msg))
        return doc
    try:
        doc.node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        doc.node = None
    return doc


def validate_manifest(
    path: Path, name: str | None = None
) -> tuple[BundleManifest | None, list[Problem]]:
    """``manifest.json`` alone: schema, unknown fields, self-declared levels, contradictions."""
    manifest, _, problems = _manifest(path, name)
    return manifest, problems


def _manifest(path: Path, name: str | None) -> tuple[BundleManifest | None, _Doc, list[Problem]]:
    doc = _parse_json(path, name)
    manifest, problems = _check_manifest(doc, path.parent)
    return manifest, doc, problems


def _check_manifest(
    doc: _Doc, folder: Path | None = None
) -> tuple[BundleManifest | None, list[Problem]]:
    """Schema, unknown fields, self-declared levels, then the evidence assessment: its
    contradictions and notes (a redacted bundle: ``schema.REDACTED_REASON``) as warnings.
    ``folder``: where the manifest lies, for a redacted bundle's ``features.json``."""
    if doc.problems:
        return None, doc.problems
    if not isinstance(doc.data, dict):
        return None, [doc.problem((), "a manifest must be a JSON object")]
    try:
        manifest = BundleManifest.model_validate(doc.data)
    except ValidationError as exc:
        return None, _pydantic_problems(doc, exc, _MANIFEST_FIELDS)
    out: list[Problem] = []
    for key in manifest.model_extra or {}:
        if key in SELF_DECLARED_LEVEL_KEYS:
            msg = f"{key!r} is ignored: evidence levels are derived from provenance, not declared"
        else:
            msg = f"unknown field {key!r} (kept, not used)"
        out.append(doc.problem((key,), msg, "warning"))
    features = read_features(folder) if folder is not None and manifest.privacy.redacted else None
    assessment = assess_evidence(manifest, features=features)
    for loc, msg in assessment.contradictions:
        out.append(doc.problem(loc, f"provenance contradiction: {msg}", "warning"))
    for loc, msg in assessment.notes:
        out.append(doc.problem(loc, msg, "warning"))
    return manifest, out


def load_manifest(path: str | Path) -> BundleManifest:
    """Read ``manifest.json``; raise ``DuplexInputError`` (with lines) on errors."""
    path = Path(path)
    manifest, problems = validate_manifest(path)
    if manifest is None:
        raise DuplexInputError(path, problems)
    return manifest


# --------------------------------------------------------------------------- ledger


# --------------------------------------------------------------------------- bundle


def _redacted_consistently(folder: Path) -> bool:
    """True when the bundle declares ``privacy.redacted`` and ``features.json`` holds a
    consistent record of voxassay's redaction (``schema.check_redaction``); unreadable or
    invalid manifests: False."""
    try:
        doc = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        manifest = BundleManifest.model_validate(doc)
    except (OSError, ValueError, ValidationError):
        return False
    if not manifest.privacy.redacted:
        return False
    return check_redaction(manifest, read_features(folder)).consistent


def validate_bundle(folder: Path) -> list[Problem]:
    """A bundle directory: files present, hashes, audio, ledger, ids, scenario copy."""
    problems: list[Problem] = []

    def name(rel: str) -> str:
        return str(folder / rel)

    # A redacted bundle (``--redact``) keeps derived features instead of the raw audio; the
    # audio is excused only when the redaction record accounts for it.
    redacted = (folder / "features.json").is_file() and _redacted_consistently(folder)
    for rel in REQUIRED_BUNDLE_FILES:
        if not (folder / rel).is_file():
            if redacted and rel.endswith(".wav"):
                continue
            problems.append(Problem(name(rel), None, None, "error", "required bundle file missing"))
    manifest: BundleManifest | None = None
    mdoc: _Doc | None = None
    if (folder / "manifest.json").is_file():
        manifest, mdoc, mprobs = _manifest(folder / "manifest.json", name("manifest.json"))
        problems += mprobs
    if manifest is not None and mdoc is not None:
        problems += _check_hashes(folder, manifest, mdoc)
    ledger: LedgerSummary | None = None
    if (folder / "events.jsonl").is_file():
        sid = manifest.session_id if manifest else None
        ledger = validate_events(folder / "events.jsonl", sid, name("events.jsonl"))
        problems += ledger.problems
    problems += _check_audio(folder, manifest, ledger)
    for rel in ("tool-audit.json", "final-state.json"):
        if (folder / rel).is_file():
            problems += _parse_json(folder / rel, name(rel)).problems
    if (folder / "scenario.yaml").is_file():
        doc = _parse_yaml(folder / "scenario.yaml", name("scenario.yaml"))
        problems += doc.problems
        if doc.data is not None:
            sc, sprobs = _check_scenario(doc, folder)
            problems += sprobs
            if sc is not None and manifest is not None and manifest.scenario is not None:
                ref = manifest.scenario
                if (ref.id, ref.version) != (sc.id, sc.version):
                    msg = (
                        f"scenario.yaml is {sc.id} v{sc.version} but the manifest names "
                        f"{ref.id} v{ref.version}"
                    )
                    problems.append(Problem(name("scenario.yaml"), 1, None, "error", msg))
    return problems


def _check_hashes(folder: Path, manifest: BundleManifest, mdoc: _Doc) -> list[Problem]:
    out: list[Problem] = []
    listed = set()
    root = folder.resolve()
    for i, entry in enumerate(manifest.files):
        loc: Loc = ("files", i, "path")
        listed.add(entry.path)
        target = (folder / entry.path).resolve()
        if not target.is_relative_to(root):
            out.append(mdoc.problem(loc, f"{entry.path} points outside the bundle"))
            continue
        if not target.is_file():
            out.append(mdoc.problem(loc, f"{entry.path} is listed but missing"))
            continue
        size = target.stat().st_size
        if size != entry.bytes:
            msg = f"{entry.path} has {size} bytes, the manifest says {entry.bytes}"
            out.append(mdoc.problem(("files", i, "bytes"), msg))
        elif sha256_file(target) != entry.sha256:
            out.append(mdoc.problem(("files", i, "sha256"), f"{entry.path}: sha256 does not match"))
    for rel in (*REQUIRED_BUNDLE_FILES, *OPTIONAL_BUNDLE_FILES):
        if rel != "manifest.json" and rel not in listed and (folder / rel).is_file():
            msg = f"{rel} is not listed in manifest.files (no hash protects it)"
            out.append(mdoc.problem(("files",), msg, "warning"))
    return out


def _check_audio(
    folder: Path, manifest: BundleManifest | None, ledger: LedgerSummary | None
) -> list[Problem]:
    import soundfile as sf

    out: list[Problem] = []
    origin = manifest.clock.audio_origin_ns if manifest else None
    span = ledger.span_ns(origin) if ledger else None
    durations: dict[str, float] = {}
    for rel in ("input.wav", "output.wav", "mixed.wav"):
        path = folder / rel
        if not path.is_file():
            continue
        try:
            info = sf.info(str(path))
            frames, rate, channels = int(info.frames), int(info.samplerate), int(info.channels)
        except Exception as exc:
            out.append(Problem(str(path), None, None, "error", f"audio not readable: {exc}"))
            continue
        if frames <= 0 or rate <= 0:
            out.append(Problem(str(path), None, None, "error", "audio has no samples"))
            continue
        durations[rel] = frames / rate
        entry = manifest.file(rel) if manifest else None
        expected = entry.channels if entry and entry.channels else EXPECTED_CHANNELS.get(rel)
        if expected is not None and channels != expected:
            if channels == 1 and expected == 2:
                msg = "mono where stereo is expected (left: input, right: output)"
            else:
                msg = f"{channels} channel(s) where {expected} are expected"
            out.append(Problem(str(path), None, None, "error", msg))
        if span is not None and frames / rate * 1e9 + AUDIO_SPAN_TOLERANCE_MS * 1e6 < span:
            msg = (
                f"audio lasts {frames / rate:.3f} s but the ledger spans {span / 1e9:.3f} s "
                "of session time: the audio does not cover the events"
            )
            out.append(Problem(str(path), None, None, "error", msg))
    if "input.wav" in durations and "output.wav" in durations:
        gap = abs(durations["input.wav"] - durations["output.wav"])
        if gap * 1000 > AUDIO_SPAN_TOLERANCE_MS:
            msg = (
                f"input.wav ({durations['input.wav']:.3f} s) and output.wav "
                f"({durations['output.wav']:.3f} s) differ in length; both should cover the "
                "same timeline"
            )
            out.append(Problem(str(folder / "output.wav"), None, None, "warning", msg))
    return out
