from __future__ import annotations

import sys

import pytest

from voxassay.core.errors import BackendUnavailable, SpecError
from voxassay.core.registry import BackendInfo, Registry, lazy_renderers
from voxassay.core.specs import parse_spec


def test_parse_spec_forms() -> None:
    s = parse_spec("openai-compat:http://127.0.0.1:8000/v1?model=whisper-1&key_env=MY_KEY")
    assert (s.backend, s.target, s.options) == (
        "openai-compat",
        "http://127.0.0.1:8000/v1",
        {"model": "whisper-1", "key_env": "MY_KEY"},
    )
    assert parse_spec("faster-whisper").target is None
    assert parse_spec("python:pkg.mod:factory").target == "pkg.mod:factory"
    assert parse_spec("ws://127.0.0.1:9/x").backend == "realtime"
    assert str(parse_spec(" pocketsphinx ")) == "pocketsphinx"
    with pytest.raises(SpecError):
        parse_spec("")
    with pytest.raises(SpecError):
        parse_spec("9bad:x")


def test_lookup_miss_lists_known_and_nearest() -> None:
    reg = Registry()
    with pytest.raises(SpecError) as exc:
        reg.backend("transcribe", "faster-wisper")
    msg = str(exc.value)
    assert "Did you mean faster-whisper" in msg and "pocketsphinx" in msg


def test_unavailable_backend_names_install_hint() -> None:
    reg = Registry()
    reg.register_backend(
        BackendInfo(
            "ghost",
            ("transcribe",),
            "nowhere:build",
            requires=("no_such_module_xyz",),
            extra="ghost",
        )
    )
    assert reg.backend("transcribe", "ghost").missing() == ["no_such_module_xyz"]
    with pytest.raises(BackendUnavailable, match=r"voxassay\[ghost\]"):
        reg.build("transcribe", "ghost")


def test_suites_registered() -> None:
    reg = Registry()
    assert "asr" in {s.name for s in reg.suites()}
    with pytest.raises(SpecError, match="Known"):
        reg.suite("asx")


def test_typed_options() -> None:
    s = parse_spec("x?n=3&f=0.5&b=yes&e=")
    assert s.int_option("n", 1, lo=1) == 3 and s.float_option("f", 0.0) == 0.5
    assert s.bool_option("b", False) is True and s.int_option("e", 7) == 7
    assert s.int_option("missing", 9) == 9
    with pytest.raises(SpecError, match="must be >= 5"):
        s.int_option("n", 1, lo=5)
    with pytest.raises(SpecError, match=r"outside 0\.\.1"):
        parse_spec("x?f=2").float_option("f", 0.0, lo=0, hi=1)
    with pytest.raises(SpecError, match="not an integer"):
        s.int_option("f", 1)
    with pytest.raises(SpecError, match="not a boolean"):
        parse_spec("x?b=maybe").bool_option("b", True)
    with pytest.raises(SpecError, match="unknown x option"):
        s.check_options({"n", "f"})


def test_lazy_renderers_import_the_module_on_first_call() -> None:
    sys.modules.pop("colorsys", None)
    entries = lazy_renderers("colorsys", ("rgb_to_hsv", "hsv_to_rgb"))
    assert list(entries) == ["rgb_to_hsv", "hsv_to_rgb"]
    assert "colorsys" not in sys.modules
    assert entries["hsv_to_rgb"](0.0, 0.0, 1.0) == (1.0, 1.0, 1.0)
    assert "colorsys" in sys.modules
    assert entries["rgb_to_hsv"].__name__ == "rgb_to_hsv"
