"""YAML reading with libyaml's parser when PyYAML was built with it (10x the pure-Python
parser's speed on the scenario and item libraries), else PyYAML's own; same documents,
same node marks for line numbers, same errors (``yaml.YAMLError``).

Aliases are bounded: a document whose node tree, with every alias expanded, would exceed
``MAX_EXPANDED_NODES`` is refused (``AliasBombError``) before anything walks it; a "billion
laughs" file of 500 bytes would otherwise keep a validator busy for minutes. The count is
linear in the distinct nodes (each node's expanded size is computed once)."""

from __future__ import annotations

from typing import Any

import yaml

MAX_EXPANDED_NODES = 200_000
"""The shipped scenario and item libraries are far below this (the largest file: a few
thousand nodes)."""


class AliasBombError(yaml.YAMLError):
    """A document whose aliases expand beyond ``MAX_EXPANDED_NODES``."""


SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The fastest safe loader available; subclass it for a loader with its own resolvers."""


def expanded_size(node: yaml.Node, limit: int = MAX_EXPANDED_NODES) -> int:
    """Nodes in the tree under ``node`` with every alias expanded (a shared node counts each
    time it is reached); ``AliasBombError`` as soon as it exceeds ``limit``."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        cur, done = stack.pop()
        if id(cur) in sizes:
            continue
        if isinstance(cur, yaml.MappingNode):
            kids = [n for kv in cur.value for n in kv]
        elif isinstance(cur, yaml.SequenceNode):
            kids = list(cur.value)
        else:
            sizes[id(cur)] = 1
            continue
        if not done:
            stack.append((cur, True))
            stack.extend((k, False) for k in kids if id(k) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(k), 1) for k in kids)
        if total > limit:
            line = cur.start_mark.line + 1 if cur.start_mark else "?"
            raise AliasBombError(
                f"YAML aliases expand beyond {limit} nodes (at line {line}); refused"
            )
        sizes[id(cur)] = total
    return sizes[id(node)]


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on the fastest safe loader, with aliases bounded."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def compose(text: str) -> yaml.Node | None:
    """``yaml.compose`` (the node tree, with marks) on the fastest safe loader, with aliases
    bounded."""
    node = yaml.compose(text, Loader=SafeLoader)
    if node is not None:
        expanded_size(node)
    return node
