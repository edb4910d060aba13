"""voxassay: evaluate voice AI the way it is used in the real world.

The Python API (``docs/api.md``): :func:`wer`, :func:`run`, :func:`load_run`,
:func:`score_call`, loaded on first
use so that ``import voxassay`` and the CLI's ``--help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voxassay.core.version import __version__

__all__ = [
    "Item",
    "Run",
    "WerResult",
    "__version__",
    "load_run",
    "read_items",
    "run",
    "score_call",
    "wer",
]

if TYPE_CHECKING:
    from voxassay.api import Run, WerResult, load_run, run, score_call, wer
    from voxassay.core.items import Item
    from voxassay.core.manifests import read_items

_LAZY = {
    "wer": "voxassay.api",
    "run": "voxassay.api",
    "score_call": "voxassay.api",
    "load_run": "voxassay.api",
    "Run": "voxassay.api",
    "WerResult": "voxassay.api",
    "Item": "voxassay.core.items",
    "read_items": "voxassay.core.manifests",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'voxassay' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
