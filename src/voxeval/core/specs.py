"""System spec strings: ``backend[:target][?key=value&...]``."""

from __future__ import annotations

import re
from collections.abc import Iterable
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

    def check_options(self, known: Iterable[str], what: str | None = None) -> None:
        """Refuse options the backend does not know (a typo must not be silently ignored)."""
        known = set(known)
        unknown = sorted(set(self.options) - known)
        if unknown:
            raise SpecError(
                f"unknown {what or self.backend} option(s) {', '.join(unknown)} in {self.raw!r}; "
                f"known: {', '.join(sorted(known)) or '(none)'}"
            )

    def int_option(
        self, key: str, default: int, lo: int | None = None, hi: int | None = None
    ) -> int:
        """Option ``key`` as an integer in ``[lo, hi]``; ``default`` when absent or empty."""
        return int(self._number(key, default, lo, hi, int))

    def float_option(
        self, key: str, default: float, lo: float | None = None, hi: float | None = None
    ) -> float:
        """Option ``key`` as a float in ``[lo, hi]``; ``default`` when absent or empty."""
        return float(self._number(key, default, lo, hi, float))

    def bool_option(self, key: str, default: bool) -> bool:
        """Option ``key`` as a boolean (1/0, true/false, yes/no, on/off)."""
        raw = self.options.get(key)
        if raw is None or raw == "":
            return default
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise SpecError(f"option {key}={raw!r} in {self.raw!r} is not a boolean (true/false)")

    def _number(
        self, key: str, default: float, lo: float | None, hi: float | None, kind: type
    ) -> float:
        raw = self.options.get(key)
        if raw is None or raw == "":
            return default
        try:
            value = kind(raw)
        except ValueError:
            name = "an integer" if kind is int else "a number"
            raise SpecError(f"option {key}={raw!r} in {self.raw!r} is not {name}") from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if hi is None:
                rule = f"must be >= {lo}"
            elif lo is None:
                rule = f"must be <= {hi}"
            else:
                rule = f"is outside {lo}..{hi}"
            raise SpecError(f"option {key}={value} in {self.raw!r} {rule}")
        return float(value)

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
