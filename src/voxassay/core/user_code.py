"""Import user code named by a spec (``python:module:factory``, ``object:NAME``)."""

from __future__ import annotations

import importlib
from typing import Any

from voxassay.core.errors import InputError


def import_attr(module_name: str, attr: str) -> Any:
    """``module:attr`` of a ``python:`` spec. The current directory is searched too (after
    everything else on ``sys.path``), as ``python -m`` and pytest do; when the module is
    still not found, the error lists where it was looked for."""
    import os
    import sys

    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            where = [p or "." for p in sys.path]
            shown = ", ".join(where[:8]) + (f" and {len(where) - 8} more" if len(where) > 8 else "")
            raise InputError(
                f"cannot import module {module_name!r}: not found in the current directory "
                f"({cwd}) or on the module search path ({shown}); install it, run from the "
                "directory that contains it, or add that directory to PYTHONPATH"
            ) from None
        raise InputError(f"module {module_name!r} failed to import: {exc}") from exc
    except Exception as exc:
        raise InputError(
            f"module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(
                n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
            )
            raise InputError(
                f"module {module_name!r} has no attribute {attr!r}; its public callables: "
                f"{', '.join(names) or '(none)'}"
            )
        obj = getattr(obj, part)
    return obj
