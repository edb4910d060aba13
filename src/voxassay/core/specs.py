"""System spec strings: ``backend[:target][?key=value&...]``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from voxassay.core.errors import SpecError

_BACKEND = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_NAMED = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)=(?=[A-Za-z])")
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")

HARNESS_OPTIONS = ("name", "num_cpus", "num_gpus", "route", "turn")
"""Spec keys the harness owns for every backend (a display name, a worker's resources, the
network route, a TURN server); so do all keys ending in ``_env`` (the name of an environment
variable holding a secret). A backend accepts them without declaring them and never gives
them another meaning."""


def is_harness_option(key: str) -> bool:
    """True for ``HARNESS_OPTIONS`` and any ``*_env`` key."""
    return key in HARNESS_OPTIONS or key.endswith("_env")


@dataclass(frozen=True)
class OptionInfo:
    """One option a backend reads from its spec: ``kind`` is ``str``, ``int``, ``float`` or
    ``bool``; ``default`` as text (``""``: none); ``capabilities``: where it applies (empty:
    every capability of the backend)."""

    name: str
    kind: str
    default: str
    help: str
    capabilities: tuple[str, ...] = ()


@dataclass(frozen=True)
class SystemSpec:
    """A parsed spec. ``raw`` is the string as given (it names the system in records)."""

    backend: str
    target: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def option(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key, default)

    @property
    def backend_options(self) -> dict[str, str]:
        """The options without the harness's keys (:func:`is_harness_option`): what a
        backend that forwards its options (a PocketSphinx config, a Python factory's keyword
        arguments) hands on."""
        return {k: v for k, v in self.options.items() if not is_harness_option(k)}

    def check_options(self, known: Iterable[str | OptionInfo], what: str | None = None) -> None:
        """Refuse options neither the backend (``known``) nor the harness
        (:func:`is_harness_option`) knows: a typo must not be silently ignored. The harness's
        numeric keys (``num_cpus``, ``num_gpus``) must be numbers >= 0."""
        names = {k.name if isinstance(k, OptionInfo) else k for k in known}
        unknown = sorted(k for k in self.options if k not in names and not is_harness_option(k))
        if unknown:
            raise SpecError(
                f"unknown {what or self.backend} option(s) {', '.join(unknown)} in {self.raw!r}; "
                f"known: {', '.join(sorted(names)) or '(none)'} (and the harness's "
                f"{', '.join(HARNESS_OPTIONS)}, *_env)"
            )
        for key in ("num_cpus", "num_gpus"):
            self.float_option(key, 0.0, lo=0.0)

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

    @property
    def label(self) -> str:
        """The system's name in reports: its ``name`` option, else the spec as given."""
        return self.options.get("name") or self.raw

    def __str__(self) -> str:
        return self.raw


def system_key(spec: str) -> str:
    """What names the system in records and reports: ``NAME`` of ``NAME=SPEC`` (or of a
    ``name=`` option), else the spec as given."""
    try:
        return parse_spec(spec).label
    except SpecError:
        return spec


def check_unique_keys(specs: Iterable[str]) -> None:
    """Two systems of one run may not share a name (``SpecError``)."""
    seen: dict[str, str] = {}
    for spec in specs:
        key = system_key(spec)
        if key in seen:
            raise SpecError(f"{seen[key]!r} and {spec!r} are both named {key!r} in this run")
        seen[key] = spec


def parse_spec(spec: str) -> SystemSpec:
    """Split ``spec`` into backend, target and options.

    The options are the query after the last ``?``; the target is everything between the
    first ``:`` and that ``?`` (so URLs and ``module:factory`` targets keep their colons).
    A bare ``ws://`` or ``wss://`` URL means the ``realtime`` backend. A URL with
    credentials in it (``user:pass@``) is refused: secrets come from the environment.
    ``NAME=SPEC`` names the system (the harness's ``name`` option); ``raw`` keeps the whole
    string, which identifies the system in records.
    """
    raw = spec.strip()
    if not raw:
        raise SpecError("empty system spec")
    named = _NAMED.match(raw)
    if named and "?" not in named.group(1):
        inner = parse_spec(raw[named.end() :])
        if "name" in inner.options and inner.options["name"] != named.group(1):
            raise SpecError(f"{raw!r} names the system twice")
        options = {**inner.options, "name": named.group(1)}
        return SystemSpec(inner.backend, inner.target, options, raw)
    if _USERINFO.search(raw):
        # the message must not repeat the secret
        raise SpecError(
            "a system spec has credentials in a URL (user:password@host); voxassay takes "
            "secrets only from the environment: name the variable with a *_env option "
            "(for example key_env=OPENAI_API_KEY)"
        )
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


def spec_resources(spec: str) -> dict[str, float]:
    """What one worker of ``spec`` needs where an executor places workers: the harness
    options ``num_cpus`` (default 1) and ``num_gpus`` (default 0), e.g.
    ``faster-whisper?num_gpus=1&num_cpus=2``."""
    parsed = parse_spec(spec)
    return {
        "num_cpus": parsed.float_option("num_cpus", 1.0, lo=0.0),
        "num_gpus": parsed.float_option("num_gpus", 0.0, lo=0.0),
    }
