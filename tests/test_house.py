"""House rules that CI enforces: a fast CLI (no heavy imports for --help), ruff and mypy clean."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.live

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


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from voxeval.cli.main import cli\n"
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


@pytest.mark.parametrize(
    "cmd",
    [
        ["ruff", "check", "src", "tests", "benchmarks"],
        ["ruff", "format", "--check", "src", "tests", "benchmarks"],
        ["mypy", "src/voxeval"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_lint_and_types(cmd: list[str]) -> None:
    tool = shutil.which(cmd[0], path=str(REPO / ".venv" / "bin")) or shutil.which(cmd[0])
    if tool is None:
        pytest.skip(f"{cmd[0]} is not installed (pip install -e '.[dev]')")
    out = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
