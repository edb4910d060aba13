"""House rules that CI enforces: layers without import cycles, a fast CLI (no heavy imports for
--help), ruff and mypy clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers.imports import Edge, cycles, import_edges, modules_of

HEAVY = (
    "numpy",
    "scipy",
    "faster_whisper",
    "ctranslate2",
    "pocketsphinx",
    "httpx",
    "soundfile",
    "torch",
    "onnxruntime",
    "piper",
    "matplotlib",
    "kaldialign",
    "rich.progress",
    "starlette",
    "uvicorn",
    "scipy.sparse",
)


@pytest.mark.live
def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from voxassay.cli.main import cli\n"
        "for args in (['--help'], ['asr', '--help'], ['asr', 'run', '--help'], ['report', '--help'],\n"
        "             ['study', '--help'], ['study', 'serve', '--help'], ['duplex', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", f"--help imported heavy modules: {out.stdout.strip()}"


@pytest.mark.live
@pytest.mark.parametrize(
    "cmd",
    [
        ["ruff", "check", "src", "tests", "benchmarks"],
        ["ruff", "format", "--check", "src", "tests", "benchmarks"],
        ["mypy", "src/voxassay"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_lint_and_types(cmd: list[str]) -> None:
    tool = shutil.which(cmd[0], path=str(REPO / ".venv" / "bin")) or shutil.which(cmd[0])
    if tool is None:
        pytest.skip(f"{cmd[0]} is not installed (pip install -e '.[dev]')")
    out = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


# --------------------------------------------------------------------------- layers

LAYERS: dict[str, int] = {
    "stats": 0,
    "core": 1,
    "contracts": 2,
    "measures": 3,
    "report": 3,
    "systems": 4,
    "suites": 5,
    "study": 5,
    "reference": 5,
    "cli": 6,
    "api": 6,
    "demo": 6,
}
"""stats < core < contracts < measures, report < systems < suites, study, reference < cli, api,
demo (the package root, ``voxassay/__init__``, is the top too). A module imports from its own
layer or below; within a layer, only without cycles."""


def layer_of(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else max(LAYERS.values())


def _graph() -> tuple[dict[str, Path], list[Edge]]:
    modules = modules_of(REPO / "src", "voxassay")
    return modules, import_edges(modules, "voxassay")


def test_every_package_has_a_layer() -> None:
    modules, _ = _graph()
    unplaced = sorted({m.split(".")[1] for m in modules if "." in m} - set(LAYERS))
    assert not unplaced, f"packages with no layer in tests/test_house.py LAYERS: {unplaced}"


def test_the_import_graph_has_no_cycles() -> None:
    _, edges = _graph()
    found = cycles(edges)
    assert not found, (
        "import cycles (function-level and TYPE_CHECKING imports count):\n"
        + "\n".join(" <-> ".join(c) for c in found)
    )


def test_imports_follow_the_layer_order() -> None:
    _, edges = _graph()
    upward = [str(e) for e in edges if layer_of(e.target) > layer_of(e.source)]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_agents_and_backends_build_on_contracts_not_on_suites() -> None:
    """The reference agent and the systems (agents, models under test) import the duplex
    contracts, never a suite: a suite's internals can change without touching an agent."""
    _, edges = _graph()
    bad = [
        str(e)
        for e in edges
        if e.source.split(".")[1:2] in (["reference"], ["systems"], ["contracts"])
        and e.target.startswith("voxassay.suites.")
    ]
    assert not bad, "agents or backends importing a suite:\n" + "\n".join(bad)


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The rules above are only as good as the reader: a cycle through a function-level
    import, an import under TYPE_CHECKING, a relative import or importlib with a literal name
    must each be an edge; a name in data (a registry table) must not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\ng = 1\n"
    )
    (pkg / "sub" / "c.py").write_text("from ..a import f\nfrom . import d\n")
    (pkg / "sub" / "d.py").write_text(
        "import importlib\nTABLE = {'x': 'pkg.e:build'}\n"
        "def h():\n    return importlib.import_module('pkg.e')\n"
    )
    (pkg / "e.py").write_text("__import__('pkg.sub.d')\n")
    modules = modules_of(tmp_path, "pkg")
    edges = {(e.source, e.target) for e in import_edges(modules, "pkg")}
    assert edges == {
        ("pkg.a", "pkg.b"),
        ("pkg.b", "pkg.a"),
        ("pkg.b", "pkg"),  # `from pkg import a` runs pkg/__init__ too
        ("pkg.sub.c", "pkg.a"),
        ("pkg.sub.c", "pkg.sub"),
        ("pkg.sub.c", "pkg.sub.d"),
        ("pkg.sub.d", "pkg.e"),
        ("pkg.e", "pkg.sub.d"),
    }
    assert cycles(import_edges(modules, "pkg")) == [["pkg.a", "pkg.b"], ["pkg.e", "pkg.sub.d"]]


def test_every_late_binding_names_a_real_attribute() -> None:
    """The registry's ``"module:attr"`` tables, the CLI's command table and the suites'
    ``lazy_renderers("module")`` are the sanctioned imports by name; each must resolve."""
    import ast
    import importlib
    import re

    pattern = re.compile(r"^voxassay(\.\w+)+:\w+$")
    found: list[tuple[str, str]] = []
    for path in sorted((REPO / "src" / "voxassay").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and pattern.match(node.value)
            ):
                module, _, attr = node.value.partition(":")
                found.append((module, attr))
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "lazy_renderers"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.append((str(node.args[0].value), "render_markdown"))
    assert len(found) > 20
    missing = [f"{m}:{a}" for m, a in found if not hasattr(importlib.import_module(m), a)]
    assert not missing, f"names that do not resolve: {missing}"


SMALL_PACKAGES = (
    "suites/duplex",
    "suites/asr",
    "suites/tts",
    "suites/su",
    "reference",
    "study",
    "contracts",
    "report",
    "stats",
    "core",
    "cli",
    "measures",
)
MAX_MODULE_LINES = 850
"""About 800 lines: a module one reads in a sitting (every package but ``systems``, whose
Realtime client the transports issue splits, is held to it)."""


def test_modules_of_the_duplex_wing_stay_small() -> None:
    root = REPO / "src" / "voxassay"
    big = [
        f"{path.relative_to(root)}: {n} lines"
        for package in SMALL_PACKAGES
        for path in sorted((root / package).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not big, "modules over about 800 lines (split them by concern):\n" + "\n".join(big)
