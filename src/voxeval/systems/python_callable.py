"""Your own transcriber in-process: ``python:module:factory[?k=v...]``.

``module`` is imported and ``factory(**options)`` is called once (option values are strings).
The factory may return

- an object with ``.transcribe(audio)``; its ``load()``, ``describe()`` and ``sample_rate``
  are used when present, or
- a plain callable ``f(audio, sample_rate)``.

Either may answer with a :class:`Transcript`, a ``str``, or a dict with ``text`` (or
``pred_text``) and optional ``words`` (dicts with ``word``, ``start``, ``end``, ``prob``) and
``language``. Anything else is a :class:`SystemOutputError` for that item.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from voxeval.core.errors import InputError, SpecError, VoxevalError
from voxeval.core.specs import SystemSpec
from voxeval.systems.base import Transcript, coerce_transcript

__all__ = ["CallableTranscriber", "build", "coerce_transcript"]


def build(spec: SystemSpec, capability: str) -> CallableTranscriber:
    """Registry factory: import ``module``, call ``factory(**options)`` and wrap the result."""
    if capability == "duplex":
        from voxeval.systems.duplex.local import build_python_agent

        return build_python_agent(spec, capability)  # type: ignore[return-value]
    if capability != "transcribe":
        raise SpecError(f"the python backend provides transcribe and duplex, not {capability!r}")
    module_name, _, attr = (spec.target or "").partition(":")
    if not module_name or not attr:
        raise SpecError(f"python backend needs 'python:module:factory', got {spec.raw!r}")
    factory = _import_attr(module_name, attr)
    if not callable(factory):
        raise InputError(
            f"{module_name}:{attr} is a {type(factory).__name__}, not a callable factory"
        )
    try:
        obj = factory(**spec.options)
    except VoxevalError:
        raise
    except Exception as exc:
        raise InputError(
            f"{module_name}:{attr}(**{spec.options!r}) raised {type(exc).__name__}: {exc}"
        ) from exc
    return CallableTranscriber(
        obj, target=f"{module_name}:{attr}", options=dict(spec.options), spec=spec.raw
    )


def _import_attr(module_name: str, attr: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise InputError(
                f"cannot import module {module_name!r}: not found on sys.path "
                "(install it, or run from the directory that contains it)"
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


class CallableTranscriber:
    """Wraps a user object or callable so it behaves as a :class:`Transcriber`."""

    def __init__(
        self,
        obj: Any,
        target: str = "",
        options: dict[str, str] | None = None,
        spec: str = "",
    ) -> None:
        method = getattr(obj, "transcribe", None)
        if callable(method):
            self._call: Callable[[np.ndarray], Any] = method
            self.kind = "object"
        elif callable(obj):
            self._call = lambda audio: obj(audio, self.sample_rate)
            self.kind = "callable"
        else:
            raise InputError(
                f"{target or 'factory'} returned {type(obj).__name__}, which has no transcribe() "
                "method and is not callable"
            )
        self.obj = obj
        self.target = target
        self.options = dict(options or {})
        self.spec = spec
        rate = getattr(obj, "sample_rate", 16_000) if self.kind == "object" else 16_000
        self.sample_rate = int(rate) if isinstance(rate, int) and rate > 0 else 16_000

    def load(self) -> None:
        """Call the object's ``load()`` when it has one."""
        loader = getattr(self.obj, "load", None) if self.kind == "object" else None
        if callable(loader):
            loader()

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Call the user code and normalise its answer (``SystemOutputError`` if unusable)."""
        return coerce_transcript(self._call(audio), where=self.target or "python system")

    def describe(self) -> dict[str, Any]:
        """Target, options and the wrapped object's own ``describe()`` when it has one."""
        info: dict[str, Any] = {
            "backend": "python",
            "spec": self.spec,
            "target": self.target,
            "options": self.options,
            "kind": self.kind,
            "sample_rate": self.sample_rate,
        }
        module = inspect.getmodule(self.obj if self.kind == "callable" else type(self.obj))
        if module is not None:
            info["module"] = module.__name__
            info["module_file"] = getattr(module, "__file__", None)
            version = getattr(module, "__version__", None)
            if isinstance(version, str):
                info["module_version"] = version
        own = getattr(self.obj, "describe", None) if self.kind == "object" else None
        if callable(own):
            described = own()
            info["system"] = described if isinstance(described, dict) else repr(described)
        return info
