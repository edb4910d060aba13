"""The fast YAML loader reads every shipped YAML file exactly as PyYAML's own safe loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from voxassay.core import yamlload

SRC = Path(__file__).resolve().parents[2] / "src" / "voxassay"


def test_libyaml_is_used_when_pyyaml_has_it() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert yamlload.SafeLoader is expected


def test_shipped_yaml_files_load_the_same_with_the_same_line_marks() -> None:
    by_folder: dict[Path, list[Path]] = {}
    for path in sorted(SRC.rglob("*.yaml")):  # the first two of each folder: every kind
        by_folder.setdefault(path.parent, []).append(path)
    files = [p for paths in by_folder.values() for p in paths[:2]]
    assert len(files) >= 6, files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yamlload.safe_load(text) == yaml.safe_load(text), path
        fast, slow = yamlload.compose(text), yaml.compose(text, Loader=yaml.SafeLoader)
        assert fast is not None and slow is not None
        assert (fast.start_mark.line, fast.end_mark.line) == (
            slow.start_mark.line,
            slow.end_mark.line,
        ), path


def test_a_syntax_error_is_a_yaml_error_with_its_line() -> None:
    with pytest.raises(yaml.MarkedYAMLError) as err:
        yamlload.safe_load("a: 1\nb: [2, 3\nc: 4\n")
    assert err.value.problem_mark is not None and err.value.problem_mark.line >= 1


def _bomb(levels: int = 9) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [" + ",".join([f"*l{k - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_anything_walks_it(tmp_path: Path) -> None:
    from voxassay.cli.main import main
    from voxassay.core.yamlload import AliasBombError, compose, expanded_size, safe_load

    text = _bomb()
    assert len(text) < 600
    with pytest.raises(AliasBombError, match="expand beyond 200000 nodes"):
        safe_load(text)
    with pytest.raises(AliasBombError):
        compose(text)
    # ordinary aliases still load, and their expanded size is counted exactly
    ok = "base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: *b\n"
    assert safe_load(ok) == {
        "base": {"x": 1, "y": [1, 2]},
        "one": {"x": 1, "y": [1, 2]},
        "two": {"x": 1, "y": [1, 2]},
    }
    node = compose(ok)
    # root + 3 keys + 3 x (mapping + 2 keys + 1 + sequence of 2)
    assert node is not None and expanded_size(node) == 1 + 3 + 3 * 7
    scenario = tmp_path / "bomb.yaml"
    scenario.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(["duplex", "validate", str(scenario)])
    assert exc.value.code == 1
