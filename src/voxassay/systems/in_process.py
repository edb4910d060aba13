"""Python objects handed to the API (``voxassay.run(..., systems=[my_engine])``): ``object:NAME``.

The object is kept in this process's table under ``NAME`` and wrapped exactly as the
``python:`` backend wraps what a factory returns (an object with ``transcribe`` /
``synthesize`` / ``understand``, or a plain callable). It lives in this process only, so runs
with such systems use thread workers.
"""

from __future__ import annotations

from typing import Any

from voxassay.core.errors import SpecError
from voxassay.core.specs import SystemSpec

_OBJECTS: dict[str, Any] = {}


def register(obj: Any, name: str) -> str:
    """Keep ``obj`` under ``name`` and return its spec, ``object:NAME``."""
    if not name or any(c in name for c in ":?&="):
        raise SpecError(f"an object system needs a plain name, not {name!r}")
    _OBJECTS[name] = obj
    return f"object:{name}"


def build(spec: SystemSpec, capability: str) -> Any:
    from voxassay.systems.python_callable import wrap

    name = spec.target or ""
    if name not in _OBJECTS:
        raise SpecError(
            f"no object registered as {name!r} in this process (object: systems come from "
            "voxassay.run's systems=[...] argument)"
        )
    return wrap(_OBJECTS[name], capability, target=f"object:{name}", spec=spec)
