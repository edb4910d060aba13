"""System spec strings: ``backend[:target][?key=value&...]``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from voxeval.core.errors import SpecError

_BACKEND = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class SystemSpec:
    """A parsed spec. ``raw`` is the string as given (it names the system in records)."""

    backend: str
    target: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def option(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key, default)

    def __str__(self) -> str:
        return self.raw


def parse_spec(spec: str) -> SystemSpec:
    """Split ``spec`` into backend, target and options.

    The options are the query after the last ``?``; the target is everything between the
    first ``:`` and that ``?`` (so URLs and ``module:factory`` targets keep their colons).
    A bare ``ws://`` or ``wss://`` URL means the ``realtime`` backend.
    """
    raw = spec.strip()
    if not raw:
        raise SpecError("empty system spec")
    if raw.startswith(("ws://", "wss://")):
        return SystemSpec("realtime", raw, {}, raw)
    body, options = raw, {}
    if "?" in raw:
        body, query = raw.rsplit("?", 1)
        try:
            options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True))
        except ValueError:
            raise SpecError(
                f"cannot parse options {query!r} in spec {raw!r} (use key=value&key2=value2)"
            ) from None
    backend, _, target = body.partition(":")
    if not _BACKEND.match(backend):
        raise SpecError(f"bad backend name {backend!r} in spec {raw!r}")
    return SystemSpec(backend, target or None, options, raw)
