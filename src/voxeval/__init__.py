"""voxeval: evaluate voice AI the way it is used in the real world.

The Python API (``docs/api.md``): :func:`wer`, :func:`run`, :func:`load_run`,
:func:`score_call`, loaded on first
use so that ``import voxeval`` and the CLI's ``--help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voxeval.core.version import __version__

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
    from voxeval.api import Run, WerResult, load_run, run, score_call, wer
    from voxeval.core.items import Item
    from voxeval.core.manifests import read_items

_LAZY = {
    "wer": "voxeval.api",
    "run": "voxeval.api",
    "score_call": "voxeval.api",
    "load_run": "voxeval.api",
    "Run": "voxeval.api",
    "WerResult": "voxeval.api",
    "Item": "voxeval.core.items",
    "read_items": "voxeval.core.manifests",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'voxeval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
