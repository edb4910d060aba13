"""Shared pieces of the duplex contracts: schema versions, validator problems, the strict base model."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationInfo,
)

SCENARIO_SCHEMA_VERSION = 1
EVENT_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1
MATRIX_SCHEMA_VERSION = 2

DEFER_CROSS_CHECKS = "defer_cross_checks"
"""Validation context key: skip cross-field checks (the validator runs them to get lines)."""

Loc = tuple[str | int, ...]


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    """One finding of the validator: where (file, 1-based line and column) and what.

    ``line`` is None for whole-file findings (a missing file, audio too short).
    """

    file: str
    line: int | None
    column: int | None
    severity: Literal["error", "warning"]
    message: str

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.severity}: {self.message}"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def defer(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(DEFER_CROSS_CHECKS))


def _raise(problems: list[tuple[Loc, str]]) -> None:
    if problems:
        raise ValueError("; ".join(f"{_dotted(loc)}: {msg}" for loc, msg in problems))


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def iso_dates(value: Any) -> Any:
    """Dates that YAML turned into objects become ISO strings again (final-state.json is JSON)."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: iso_dates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [iso_dates(v) for v in value]
    return value


def version_check(value: int, current: int, what: str) -> int:
    if value > current:
        raise ValueError(
            f"{what} schema_version {value} is newer than this voxassay reads ({current})"
        )
    return value
