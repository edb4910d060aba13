"""The acceptance matrix contract: gates with statistic, threshold, minimum n and evidence, on_fail."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Literal, Self

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from voxassay.contracts.duplex.common import (
    MATRIX_SCHEMA_VERSION,
    Loc,
    Strict,
    _raise,
    defer,
    version_check,
)
from voxassay.contracts.duplex.evidence import (
    EvidenceLevel,
)
from voxassay.contracts.duplex.provenance import EvidenceBasis

# --------------------------------------------------------------------------- acceptance matrix


class Statistic(StrEnum):
    P50 = "p50"
    P95 = "p95"
    P99 = "p99"
    RATE = "rate"
    COUNT = "count"
    VALUE = "value"


class OnFail(StrEnum):
    ROLL_BACK = "roll_back"
    KEEP_IN_SHADOW = "keep_in_shadow"
    COLLECT_MORE_DATA = "collect_more_data"
    BLOCK = "block"
    """Read as keep_in_shadow (matrix v1's word; v2 recommends one of four actions)."""


class SplitKey(StrEnum):
    ROUTE = "route"
    CATEGORY = "category"
    DEVICE = "device"
    LANGUAGE = "language"
    SYSTEM_VERSION = "system_version"
    SCENARIO = "scenario"


Comparator = Literal["<=", "<", ">=", ">", "=="]
DecideOn = Literal["interval", "point"]


def _quantile_min_n(q: float, confidence: float = 0.95) -> int:
    """Smallest n for which the sample maximum is a distribution-free upper bound of quantile q."""
    return math.ceil(math.log(1 - confidence) / math.log(q))


DEFAULT_MIN_N: dict[Statistic, int] = {
    Statistic.P50: _quantile_min_n(0.50),  # 5
    Statistic.P95: _quantile_min_n(0.95),  # 59
    Statistic.P99: _quantile_min_n(0.99),  # 299
    Statistic.RATE: 30,
    Statistic.COUNT: 1,
    Statistic.VALUE: 1,
}
"""Percentiles: n such that 1 - q**n >= 0.95; rates: 30 (rule of thumb); counts/values: 1."""


class Gate(Strict):
    """One acceptance gate: a metric statistic against a threshold at a minimum evidence level."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    metric: str = Field(min_length=1)
    statistic: Statistic
    comparator: Comparator
    threshold: float
    unit: str = ""
    min_evidence: EvidenceLevel
    min_n: int | None = Field(default=None, ge=1)
    on_fail: OnFail
    split_by: list[SplitKey] = Field(default_factory=list)
    description: str = ""
    mitigation: str = ""
    """What to do while the gate fails (e.g. "fall back to the conservative policy", "keep
    human confirmation"); printed with the failure."""
    evidence: EvidenceBasis | None = None
    """Whether recordings' declared provenance counts toward ``min_evidence`` for this gate
    (None: the matrix's ``evidence``)."""
    decide_on: DecideOn = "interval"
    """A rate gate passes only when its 95 % Wilson interval lies wholly on the passing side
    of the threshold (``interval``), or when the point estimate meets it (``point``: asked
    for explicitly). Other statistics, and zero-tolerance gates (any event fails), read the
    point estimate either way."""

    @property
    def required_n(self) -> int:
        return self.min_n if self.min_n is not None else DEFAULT_MIN_N[self.statistic]

    def passes(self, value: float) -> bool:
        """The threshold comparison alone (evidence and n are checked by the gate engine)."""
        t = self.threshold
        return {
            "<=": value <= t,
            "<": value < t,
            ">=": value >= t,
            ">": value > t,
            "==": value == t,
        }[self.comparator]


class AcceptanceMatrix(Strict):
    """A named list of gates."""

    schema_version: int = Field(default=MATRIX_SCHEMA_VERSION, ge=1)
    id: str = Field(min_length=1)
    description: str = ""
    allow_incomplete: bool = False
    """Gates that cannot be decided (too few samples, too weak evidence, nothing measured)
    are JUnit ``<skipped>`` and do not make the exit code 1; by default they are ``<error>``
    and do."""
    evidence: EvidenceBasis = "derived"
    """derived: only evidence voxassay derived counts (a recording without voxassay's capture
    is L2); declared: a recording's ``provenance.json`` counts, labelled declared."""
    gates: list[Gate] = Field(min_length=1)

    def basis(self, gate: Gate) -> EvidenceBasis:
        """The evidence basis a gate counts (its own, else the matrix's)."""
        return gate.evidence or self.evidence

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        return version_check(value, MATRIX_SCHEMA_VERSION, "matrix")

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Self:
        if not defer(info):
            _raise(matrix_cross_checks(self))
        return self


def matrix_cross_checks(m: AcceptanceMatrix) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    seen: set[str] = set()
    for i, gate in enumerate(m.gates):
        if gate.id in seen:
            out.append((("gates", i, "id"), f"duplicate gate id {gate.id!r}"))
        seen.add(gate.id)
        if len(set(gate.split_by)) != len(gate.split_by):
            out.append((("gates", i, "split_by"), "split_by repeats a key"))
    return out


# --------------------------------------------------------------------------- JSON Schemas

SchemaKind = Literal["scenario", "event", "manifest", "provenance", "matrix", "scorecard", "gate"]
