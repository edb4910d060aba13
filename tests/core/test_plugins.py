"""Outside packages add systems and suites through entry points; `voxassay ls` shows them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

PLUGIN = """
from voxassay.core.registry import BackendInfo, SuiteInfo


class Echo:
    sample_rate = 16000

    def load(self):
        pass

    def transcribe(self, audio):
        return "plugin says hi"

    def describe(self):
        return {"plugin": True}


def build(spec, capability):
    return Echo()


BACKENDS = [
    BackendInfo("plug-echo", ("transcribe",), build, description="from a plugin"),
    BackendInfo("plug-broken", ("transcribe",), build, requires=("no_such_module_for_voxassay",),
                extra="broken", description="needs a package that is not installed"),
]
SUITE = SuiteInfo(name="plugsuite", description="a suite from a plugin")
"""


@pytest.fixture
def plugin_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "voxassay_testplug.py").write_text(PLUGIN)
    dist = tmp_path / "voxassay_testplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: voxassay-testplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[voxassay.systems]\ntestplug = voxassay_testplug:BACKENDS\n\n"
        "[voxassay.suites]\nplugsuite = voxassay_testplug:SUITE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("voxassay_testplug", None)


def test_entry_points_register_backends_and_suites(plugin_on_path: Path) -> None:
    import numpy as np

    from voxassay.core.registry import Registry

    reg = Registry()
    assert "plugsuite" in {s.name for s in reg.suites()}
    system = reg.build("transcribe", "plug-echo")
    assert system.transcribe(np.zeros(10, np.float32)) == "plugin says hi"
    assert reg.backend("transcribe", "plug-broken").missing() == ["no_such_module_for_voxassay"]


def test_ls_says_what_is_usable_and_why_not(
    plugin_on_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxassay.cli import ls as ls_mod
    from voxassay.core import registry

    monkeypatch.setattr(registry, "REGISTRY", registry.Registry())
    res = CliRunner().invoke(ls_mod.ls, [], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    lines = {
        line.split("│")[1].strip(): line for line in res.output.splitlines() if line.count("│") >= 4
    }
    assert "yes" in lines["plug-echo"]
    assert (
        "no_such_module_for_voxassay" in lines["plug-broken"]
        and "voxassay[broken]" in lines["plug-broken"]
    )
    assert "yes" in lines["faster-whisper"] and "plugsuite" in res.output
