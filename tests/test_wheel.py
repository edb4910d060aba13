"""The package works outside the checkout: an sdist is built from the tracked sources, a wheel
from the unpacked sdist (as ``python -m build`` does), and the wheel is installed into a new
virtual environment that sees this environment's dependencies through a ``.pth`` file (a path
in a ``.pth`` file is added to ``sys.path`` without processing the ``.pth`` files inside it, so
the editable install of this checkout stays inactive). From a folder with no ``../shared``
beside it and no PYTHONPATH, the installed command answers ``--help``, ``--version`` and
``ls``, scores a small pairs file and validates a scenario shipped inside the wheel.

Asserted: the sdist and the wheel hold every tracked file under ``src/voxassay`` (schemas,
scenario sets, item sets, study examples, ``py.typed``) and nothing else of the checkout;
``voxassay`` is imported from the new environment; the version is one figure everywhere; the
WER of the pairs file is the hand-counted one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
TOP_FILES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in")


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    venv: Path
    site: Path
    cwd: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``args`` with the new environment's bin first on PATH, no PYTHONPATH, from ``cwd``."""
        env = _outside_env()
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            args, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=300
        )


def _outside_env() -> dict[str, str]:
    """This environment without PYTHONPATH and VIRTUAL_ENV (nothing points at the checkout)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _package_sources() -> list[str]:
    """The checkout's files under src/voxassay as the repository tracks them (git), else as
    the folder holds them (an export without .git), caches left out."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "src/voxassay"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
        return sorted(p for p in out.split("\0") if p and (REPO / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        root = REPO / "src" / "voxassay"
        return sorted(
            str(p.relative_to(REPO))
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    tree = root / "tree"
    for rel in [*TOP_FILES, *_package_sources()]:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tree / rel)
    dist = root / "dist"
    dist.mkdir()
    build_sdist = "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", build_sdist, str(dist)], cwd=tree, check=True, capture_output=True
    )
    (sdist,) = dist.glob("voxassay-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(root / "unpacked", filter="data")
    (unpacked,) = (root / "unpacked").iterdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheel_cmd = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist)]
    subprocess.run([*wheel_cmd, str(unpacked)], check=True, capture_output=True)
    (wheel,) = dist.glob("voxassay-*.whl")

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*install, "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        check=True,
        capture_output=True,
        env=_outside_env(),
    )
    cwd = root / "elsewhere" / "work"
    cwd.mkdir(parents=True)
    return Installed(sdist=sdist, wheel=wheel, venv=venv, site=site, cwd=cwd)


def test_sdist_and_wheel_hold_every_package_file(installed: Installed) -> None:
    sources = _package_sources()
    in_package = {p.removeprefix("src/") for p in sources}
    assert any(p.endswith(".json") for p in in_package)  # schemas
    assert any(p.endswith(".yaml") for p in in_package)  # scenarios, item sets
    assert "voxassay/py.typed" in in_package
    with zipfile.ZipFile(installed.wheel) as zf:
        names = set(zf.namelist())
    packaged = {n for n in names if n.startswith("voxassay/")}
    assert packaged == in_package, (sorted(in_package - packaged), sorted(packaged - in_package))
    meta = [n for n in names if n.endswith(".dist-info/METADATA")]
    assert len(meta) == 1
    with zipfile.ZipFile(installed.wheel) as zf:
        metadata = zf.read(meta[0]).decode()
    assert "Name: voxassay" in metadata and "License-Expression: Apache-2.0" in metadata
    with tarfile.open(installed.sdist) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert set(sources) <= members, sorted(set(sources) - members)
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"} <= members


def test_the_installed_package_is_the_wheels(installed: Installed) -> None:
    py = str(installed.venv / "bin" / "python")
    code = (
        "import json, voxassay, importlib.metadata as m; "
        "print(json.dumps([voxassay.__file__, voxassay.__version__, m.version('voxassay')]))"
    )
    res = installed.run(py, "-c", code)
    assert res.returncode == 0, res.stderr
    where, version, dist_version = json.loads(res.stdout)
    assert Path(where).is_relative_to(installed.site), where
    assert not Path(where).is_relative_to(REPO)
    assert version == dist_version
    assert not (installed.cwd.parent / "shared").exists()
    res = installed.run("voxassay", "--version")
    assert res.returncode == 0 and res.stdout.split() == ["voxassay,", "version", version]


def test_help_and_ls_from_the_wheel(installed: Installed) -> None:
    res = installed.run("voxassay", "--help")
    assert res.returncode == 0, res.stderr
    assert "Commands" in res.stdout and "duplex" in res.stdout
    res = installed.run("voxassay", "ls")
    assert res.returncode == 0, res.stderr
    assert "faster-whisper" in res.stdout


def test_asr_score_from_the_wheel(installed: Installed) -> None:
    """Five reference words scored right and three with one substitution: WER 1/8."""
    pairs = installed.cwd / "mine.jsonl"
    rows = [
        {"id": "a", "text": "turn left on baker street", "pred_text": "turn left on baker street"},
        {"id": "b", "text": "call me tomorrow", "pred_text": "call me today"},
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = installed.run("voxassay", "asr", "score", "mine.jsonl", "-o", "out", "--no-progress")
    assert res.returncode == 0, res.stderr
    run_dir = installed.cwd / res.stdout.strip().splitlines()[-1].split()[-1]
    report = json.loads((run_dir / "report.json").read_text())
    overall = report["systems"][0]["overall"]
    assert (overall["errors"], overall["ref_words"], overall["n"]) == (1, 8, 2)
    assert overall["wer"] == pytest.approx(1 / 8, abs=1e-12)
    assert json.loads((run_dir / "run.json").read_text())["voxassay_version"]


def test_duplex_validate_a_shipped_scenario(installed: Installed) -> None:
    scenarios = installed.site / "voxassay" / "suites" / "duplex" / "data" / "scenarios"
    shipped = sorted(scenarios.glob("*.yaml"))
    assert len(shipped) >= 40
    res = installed.run("voxassay", "duplex", "validate", "--errors-only", str(shipped[0]))
    assert res.returncode == 0, res.stdout + res.stderr
