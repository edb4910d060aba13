"""YAML reading with libyaml's parser when PyYAML was built with it (10x the pure-Python
parser's speed on the scenario and item libraries), else PyYAML's own; same documents,
same node marks for line numbers, same errors (``yaml.YAMLError``)."""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The fastest safe loader available; subclass it for a loader with its own resolvers."""


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on the fastest safe loader."""
    return yaml.load(text, Loader=SafeLoader)


def compose(text: str) -> yaml.Node | None:
    """``yaml.compose`` (the node tree, with marks) on the fastest safe loader."""
    return yaml.compose(text, Loader=SafeLoader)
