"""The import graph of a package, read from its source (no module is imported).

Every way one module can reach another counts as an edge: ``import`` and ``from ... import``
at any depth (module level, inside functions, under ``if TYPE_CHECKING:``), relative imports,
and ``importlib.import_module("...")`` / ``__import__("...")`` with a literal name. Names held
in data (the registry's ``"module:attr"`` tables, the CLI's command table) are not edges: those
are the two sanctioned late bindings.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

STRING_IMPORTERS = frozenset({"import_module", "__import__"})


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}"


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root / package``."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(node: ast.AST, package_of: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package_of.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        yield base
        for alias in node.names:
            yield f"{base}.{alias.name}"
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in STRING_IMPORTERS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value


def import_edges(modules: dict[str, Path], package: str) -> list[Edge]:
    """Edges between modules of ``package`` (a name that is an attribute of a module, as in
    ``from voxassay.core.errors import InputError``, resolves to that module)."""
    edges: set[Edge] = set()
    for name, path in modules.items():
        package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, package_of):
                if target != package and not target.startswith(package + "."):
                    continue
                resolved = target if target in modules else target.rpartition(".")[0]
                if (
                    resolved in modules
                    and resolved != name
                    and (resolved != package or target == package)
                ):
                    edges.add(Edge(name, resolved, getattr(node, "lineno", 0)))
    return sorted(edges, key=lambda e: (e.source, e.target, e.line))


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
