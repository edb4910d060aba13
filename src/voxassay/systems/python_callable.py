"""Your own system in-process: ``python:module:factory[?k=v...]``.

``module`` is imported and ``factory(**options)`` is called once (option values are strings).

``transcribe``: the factory may return

- an object with ``.transcribe(audio)``; its ``load()``, ``describe()`` and ``sample_rate``
  are used when present, or
- a plain callable ``f(audio, sample_rate)``.

Either may answer with a :class:`Transcript`, a ``str``, or a dict with ``text`` (or
``pred_text``) and optional ``words`` (dicts with ``word``, ``start``, ``end``, ``prob``) and
``language``. Anything else is a :class:`SystemOutputError` for that item.

``synthesize``: an object with ``.synthesize(text, voice, instructions)`` (``load()``,
``describe()``, ``sample_rate`` used when present) or a callable
``f(text, voice=None, instructions=None)``, answering a :class:`~voxassay.core.audio.Audio`,
a ``(samples, sample_rate)`` tuple or a dict ``{samples|audio, sample_rate}`` (a bare array
when the object declares ``sample_rate``); checked by
:func:`voxassay.systems.audio_output.coerce_audio` (empty/NaN audio -> ``EmptyAudioError``).

``understand``: an object with ``.understand(audio_parts, prompt)`` or a callable
``f(audio_parts, prompt)`` answering a ``str`` (anything else: ``SystemOutputError``).

``converse``: an object with ``.converse(turn, history, mode)`` or a callable
``f(turn, history, mode)`` (``systems.converse``), answering a ``Reply``, a ``str`` or a dict.

``duplex``: see :func:`voxassay.systems.duplex.local.build_python_agent`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.core.errors import InputError, SpecError, SystemOutputError, VoxassayError
from voxassay.core.specs import SystemSpec
from voxassay.core.user_code import import_attr
from voxassay.systems.audio_output import coerce_audio
from voxassay.systems.base import Transcript, coerce_transcript

__all__ = [
    "CallableSynthesizer",
    "CallableTranscriber",
    "CallableUnderstander",
    "build",
    "coerce_transcript",
]

_CAPABILITIES = ("transcribe", "synthesize", "understand", "converse", "duplex")


def build(spec: SystemSpec, capability: str) -> Any:
    """Registry factory: import ``module``, call ``factory(**options)`` and wrap the result."""
    if capability == "duplex":
        from voxassay.systems.duplex.local import build_python_agent

        return build_python_agent(spec, capability)
    if capability not in _CAPABILITIES:
        raise SpecError(
            f"the python backend provides {', '.join(_CAPABILITIES)}, not {capability!r}"
        )
    module_name, _, attr = (spec.target or "").partition(":")
    if not module_name or not attr:
        raise SpecError(f"python backend needs 'python:module:factory', got {spec.raw!r}")
    factory = import_attr(module_name, attr)
    if not callable(factory):
        raise InputError(
            f"{module_name}:{attr} is a {type(factory).__name__}, not a callable factory"
        )
    try:
        obj = factory(**spec.backend_options)
    except VoxassayError:
        raise
    except Exception as exc:
        raise InputError(
            f"{module_name}:{attr}(**{spec.backend_options!r}) raised {type(exc).__name__}: {exc}"
        ) from exc
    return wrap(obj, capability, target=f"{module_name}:{attr}", spec=spec)


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
        info = _describe(self.obj, self.kind, self.spec, self.target, self.options)
        info["sample_rate"] = self.sample_rate
        return info


def wrap(obj: Any, capability: str, *, target: str, spec: SystemSpec) -> Any:
    """``obj`` (an object or a callable) as a system of ``capability``."""
    from voxassay.systems.converse import CallableConversant

    wrapper = {
        "converse": CallableConversant,
        "transcribe": CallableTranscriber,
        "synthesize": CallableSynthesizer,
        "understand": CallableUnderstander,
    }.get(capability)
    if wrapper is None:
        raise SpecError(
            f"a Python object can transcribe, synthesize, understand or converse, not {capability}"
        )
    return wrapper(obj, target=target, options=spec.backend_options, spec=spec.raw)


def _describe(
    obj: Any, kind: str, spec: str, target: str, options: dict[str, str]
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "backend": "python",
        "spec": spec,
        "target": target,
        "options": options,
        "kind": kind,
    }
    module = inspect.getmodule(obj if kind == "callable" else type(obj))
    if module is not None:
        info["module"] = module.__name__
        info["module_file"] = getattr(module, "__file__", None)
        version = getattr(module, "__version__", None)
        if isinstance(version, str):
            info["module_version"] = version
    own = getattr(obj, "describe", None) if kind == "object" else None
    if callable(own):
        described = own()
        info["system"] = described if isinstance(described, dict) else repr(described)
    return info


def _wrap(obj: Any, method: str, target: str) -> tuple[Callable[..., Any], str]:
    bound = getattr(obj, method, None)
    if callable(bound):
        return bound, "object"
    if callable(obj):
        return obj, "callable"
    raise InputError(
        f"{target or 'factory'} returned {type(obj).__name__}, which has no {method}() "
        "method and is not callable"
    )


def _load(obj: Any, kind: str) -> None:
    loader = getattr(obj, "load", None) if kind == "object" else None
    if callable(loader):
        loader()


class CallableSynthesizer:
    """Wraps a user object or callable so it behaves as a :class:`Synthesizer`.

    ``sample_rate`` is the object's declared ``sample_rate`` when it has one, else the rate
    of the last audio returned (0 before the first call).
    """

    def __init__(
        self,
        obj: Any,
        target: str = "",
        options: dict[str, str] | None = None,
        spec: str = "",
    ) -> None:
        self._call, self.kind = _wrap(obj, "synthesize", target)
        self.obj = obj
        self.target = target
        self.options = dict(options or {})
        self.spec = spec
        rate = getattr(obj, "sample_rate", None) if self.kind == "object" else None
        valid = isinstance(rate, int) and not isinstance(rate, bool) and rate > 0
        self.declared_rate: int | None = int(rate) if valid else None  # type: ignore[arg-type]
        self.sample_rate = self.declared_rate or 0

    def load(self) -> None:
        """Call the object's ``load()`` when it has one."""
        _load(self.obj, self.kind)

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        """Call the user code and check its audio (``SystemOutputError``/``EmptyAudioError``);
        empty text is refused (``InputError``) before the user code runs."""
        where = self.target or "python system"
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: nothing to say (empty text)")
        if self.kind == "object":
            value = self._call(text, voice, instructions)
        else:
            value = self._call(text, voice=voice, instructions=instructions)
        audio = coerce_audio(value, where=where, default_rate=self.declared_rate)
        if self.declared_rate and audio.sr != self.declared_rate:
            raise SystemOutputError(
                f"{where} declares sample_rate {self.declared_rate} but returned {audio.sr} Hz"
            )
        self.sample_rate = audio.sr
        return audio

    def describe(self) -> dict[str, Any]:
        """Target, options, declared rate and the object's own ``describe()``."""
        info = _describe(self.obj, self.kind, self.spec, self.target, self.options)
        info["capability"] = "synthesize"
        info["sample_rate"] = self.sample_rate or None
        info["instructions"] = "passed to the user code, which may use or ignore them"
        return info


class CallableUnderstander:
    """Wraps a user object or callable so it behaves as an :class:`Understander`."""

    def __init__(
        self,
        obj: Any,
        target: str = "",
        options: dict[str, str] | None = None,
        spec: str = "",
    ) -> None:
        self._call, self.kind = _wrap(obj, "understand", target)
        self.obj = obj
        self.target = target
        self.options = dict(options or {})
        self.spec = spec

    def load(self) -> None:
        """Call the object's ``load()`` when it has one."""
        _load(self.obj, self.kind)

    def understand(self, audio_parts: list[Audio], prompt: str) -> str:
        """Call the user code with the clips and prompt; the answer must be a ``str``."""
        answer = self._call(list(audio_parts), prompt)
        if not isinstance(answer, str):
            text = repr(answer)
            short = text if len(text) <= 80 else text[:77] + "..."
            raise SystemOutputError(
                f"{self.target or 'python system'} answered {type(answer).__name__} ({short}); "
                "understand() must return the answer as a str"
            )
        return answer

    def describe(self) -> dict[str, Any]:
        """Target, options and the object's own ``describe()``."""
        info = _describe(self.obj, self.kind, self.spec, self.target, self.options)
        info["capability"] = "understand"
        return info
