"""Scenario sets: the shipped ``default`` and ``demo`` sets, a folder, a YAML file, a set file.

A set file (``.txt``) lists one scenario per line: a scenario id, or a path to a YAML file
(relative to the set file). Blank lines and ``#`` comments are skipped. Ids are looked up in
the set file's folder, in a ``scenarios/`` folder beside it, then in the shipped scenarios.
The shipped sets live in ``data/sets/<name>.txt``; ``default`` is the full acceptance set,
``demo`` a fast subset with every category.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from voxassay.contracts.duplex.scenario import Scenario
from voxassay.core.errors import InputError

__all__ = [
    "SETS_DIR",
    "ScenarioSet",
    "load_scenario_set",
    "read_set_file",
    "scenario_files",
    "set_names",
]

DATA_DIR = Path(__file__).parents[1] / "data"
"""The suite's shipped data: scenarios, scenario sets, the example acceptance matrix."""
SCENARIOS_DIR = DATA_DIR / "scenarios"
EXAMPLE_MATRIX = DATA_DIR / "example_matrix.yaml"
SETS_DIR = DATA_DIR / "sets"
ScenarioSet = list[tuple[Scenario, Path]]


def set_names() -> list[str]:
    """Names of the shipped sets (``default``, ``demo``, ...)."""
    return sorted(p.stem for p in SETS_DIR.glob("*.txt"))


def _is_scenario_yaml(path: Path) -> bool:
    """A YAML mapping with ``segments`` (matrices and other YAML are not scenarios)."""
    import yaml

    from voxassay.core.yamlload import safe_load

    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return True  # let the loader report it with its line
    return isinstance(data, dict) and "segments" in data


def scenario_files(folder: Path) -> list[Path]:
    """Scenario YAML files under ``folder`` (recursive, sorted; hidden folders skipped)."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).parts
        if any(part.startswith((".", "__")) for part in rel):
            continue
        if path.is_file() and path.suffix.lower() in (".yaml", ".yml") and _is_scenario_yaml(path):
            out.append(path)
    return out


def _load(path: Path) -> Scenario:
    from voxassay.suites.duplex.evidence.validate import load_scenario

    return load_scenario(path)


def read_set_file(path: Path) -> list[tuple[int, str]]:
    """``(line number, entry)`` for every scenario named in a set file."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append((number, entry))
    return out


class _Index:
    """Scenario id -> file over a list of folders, built on first use (first folder wins)."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = [f for f in dict.fromkeys(f.resolve() for f in folders) if f.is_dir()]
        self._by_id: dict[str, tuple[Scenario, Path]] | None = None

    def get(self) -> dict[str, tuple[Scenario, Path]]:
        if self._by_id is None:
            self._by_id = {}
            for folder in self.folders:
                seen: dict[str, Path] = {}
                for path in scenario_files(folder):
                    sc = _load(path)
                    if sc.id in seen:
                        raise InputError(
                            f"scenario id {sc.id!r} is used by both {seen[sc.id]} and {path}"
                        )
                    seen[sc.id] = path
                    self._by_id.setdefault(sc.id, (sc, path))
        return self._by_id


def _from_set_file(path: Path) -> ScenarioSet:
    entries = read_set_file(path)
    if not entries:
        raise InputError(f"scenario set {path} lists no scenarios")
    index = _Index([path.parent, path.parent / "scenarios", path.parent.parent / "scenarios"])
    index.folders.append(SCENARIOS_DIR.resolve())
    out: ScenarioSet = []
    first: dict[str, int] = {}
    problems = []
    for number, entry in entries:
        if entry.lower().endswith((".yaml", ".yml")):
            target = Path(entry) if Path(entry).is_absolute() else path.parent / entry
            if not target.is_file():
                problems.append(f"{path}:{number}: no such scenario file {target}")
                continue
            item = (_load(target), target)
        else:
            known = index.get()
            if entry not in known:
                near = difflib.get_close_matches(entry, sorted(known), n=3, cutoff=0.6)
                hint = f" (did you mean {', '.join(near)}?)" if near else ""
                problems.append(f"{path}:{number}: unknown scenario id {entry!r}{hint}")
                continue
            item = known[entry]
        sid = item[0].id
        if sid in first:
            problems.append(
                f"{path}:{number}: scenario {sid!r} is listed twice (line {first[sid]})"
            )
            continue
        first[sid] = number
        out.append(item)
    if problems:
        raise InputError("\n".join(problems))
    return out


def load_scenario_set(spec: str | Path) -> ScenarioSet:
    """``(Scenario, path)`` pairs for a set name, a folder, a scenario YAML or a set file.

    ``default`` / ``demo`` (or any ``data/sets/<name>.txt``) name shipped sets; an existing
    folder gives every scenario under it (sorted by path); a ``.yaml``/``.yml`` file gives
    that scenario; a ``.txt`` file is a set file (module docstring). Scenarios are validated
    (``DuplexInputError`` with lines); unknown names raise ``InputError`` with the choices.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        files = scenario_files(path)
        if not files:
            raise InputError(f"no scenario YAML files under {path}")
        items = [(_load(p), p) for p in files]
        ids: dict[str, Path] = {}
        for sc, p in items:
            if sc.id in ids:
                raise InputError(f"scenario id {sc.id!r} is used by both {ids[sc.id]} and {p}")
            ids[sc.id] = p
        return items
    if path.is_file():
        if path.suffix.lower() in (".yaml", ".yml"):
            return [(_load(path), path)]
        return _from_set_file(path)
    name = str(spec)
    shipped = SETS_DIR / f"{name}.txt"
    if "/" not in name and shipped.is_file():
        return _from_set_file(shipped)
    names = set_names()
    near = difflib.get_close_matches(name, names, n=2, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    raise InputError(
        f"{name!r} is neither a scenario folder, a scenario or set file, nor a shipped set.{hint} "
        f"Shipped sets: {', '.join(names) or '(none)'}."
    )
