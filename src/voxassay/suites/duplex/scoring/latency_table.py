"""Latency pairs as data and as summaries: a session's split fields (``SessionMeta``), one measured pair (``LatencyPair``, censored when its end never came), and the table that summarises pairs per metric and per split (``LatencyTable``)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from voxassay.contracts.duplex.manifest import BundleManifest
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.stats.percentiles import LatencyValue, summarize_values
from voxassay.suites.duplex.scoring.latency_pairs import (
    DEFAULT_PAIRS,
    UNKNOWN,
    PairDef,
)

__all__ = [
    "ALL_SPLIT_FIELDS",
    "METRICS_VERSION",
    "SPLIT_FIELDS",
    "LatencyPair",
    "LatencyTable",
    "SessionMeta",
    "SplitSpec",
]


METRICS_VERSION = "2"
"""2: respondable points and user resumptions exclude non-user segment roles."""


SPLIT_FIELDS = ("route", "category", "device", "language", "system_version")
"""Default splits of every summary (DESIGN.md); ``scenario`` may be asked for as well."""


ALL_SPLIT_FIELDS = (*SPLIT_FIELDS, "scenario")


SplitSpec = str | tuple[str, ...]


@dataclass(frozen=True)
class SessionMeta:
    """What a session's pairs are split by, and the scenario truth its events may omit.

    ``segments``: segment or utterance id -> extra ``data`` (``intents``,
    ``expected_actions``, ``segment_role``) merged into ``user.*`` and aligned ``acoustic.*``
    events that lack it.
    """

    route: str | None = None
    category: str | None = None
    device: str | None = None
    language: str | None = None
    system_version: str | None = None
    scenario: str | None = None
    segments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_manifest(
        cls, manifest: BundleManifest, scenario: Scenario | None = None
    ) -> SessionMeta:
        """From a bundle's ``manifest.json`` and, when available, its ``scenario.yaml``."""
        system = manifest.system
        version = None
        if system is not None:
            version = f"{system.name}@{system.version}" if system.version else system.name
        segments: dict[str, dict[str, Any]] = {}
        if scenario is not None:
            for seg in scenario.segments:
                segments[seg.id] = {
                    "intents": [str(i) for i in seg.intents],
                    "expected_actions": [str(a) for a in seg.expected_actions],
                    "segment_role": str(seg.role),
                }
        return cls(
            route=str(manifest.route) if manifest.route else None,
            category=str(scenario.category) if scenario is not None else None,
            device=manifest.device,
            language=manifest.language or (scenario.language if scenario else None),
            system_version=version,
            scenario=manifest.scenario.id if manifest.scenario else None,
            segments=segments,
        )


NO_META = SessionMeta()


@dataclass(frozen=True, slots=True)
class LatencyPair:
    """One start with its end (``end_ns``) or none (censored). Times are session-clock ns."""

    metric: str
    session_id: str
    key: str
    start_ns: int
    end_ns: int | None
    censored_after_ms: float | None
    route: str | None
    meta: SessionMeta
    start_event_id: str
    end_event_id: str | None = None
    source: Literal["primary", "fallback"] = "primary"

    @property
    def censored(self) -> bool:
        return self.end_ns is None

    @property
    def value_ms(self) -> float | None:
        return None if self.end_ns is None else (self.end_ns - self.start_ns) / 1e6

    @property
    def ref(self) -> str:
        return f"{self.session_id}/{self.start_event_id}"

    def split_value(self, name: str) -> str | None:
        """The pair's value of a split field (route from the session, else from its events)."""
        if name == "route":
            return self.meta.route or self.route
        value = getattr(self.meta, name)
        return None if value is None else str(value)

    def to_latency_value(self) -> LatencyValue:
        return LatencyValue(self.ref, self.value_ms, self.censored, self.censored_after_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "session_id": self.session_id,
            "key": self.key,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "value_ms": self.value_ms,
            "censored": self.censored,
            "censored_after_ms": self.censored_after_ms,
            "start_event_id": self.start_event_id,
            "end_event_id": self.end_event_id,
            "source": self.source,
            **{f: self.split_value(f) for f in ALL_SPLIT_FIELDS},
        }


class LatencyTable:
    """The part of each pair the summaries need: per metric one float (``inf`` = censored), a
    session code and one code per split field; plus a few censored refs per metric."""

    def __init__(self, defs: Sequence[PairDef] = DEFAULT_PAIRS, *, max_examples: int = 10) -> None:
        self.defs = {d.name: d for d in defs}
        self.max_examples = max_examples
        self._values: dict[str, array[float]] = {}
        self._sessions: dict[str, array[int]] = {}
        self._splits: dict[str, dict[str, array[int]]] = {}
        self._session_codes: dict[str, int] = {}
        self._labels: dict[str, dict[str | None, int]] = {f: {} for f in ALL_SPLIT_FIELDS}
        self._examples: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._values.values())

    @property
    def nbytes(self) -> int:
        """Bytes held for the pair values and codes (the part that grows with the stream)."""
        total = sum(len(v) * v.itemsize for v in self._values.values())
        total += sum(len(c) * c.itemsize for c in self._sessions.values())
        return total + sum(len(c) * c.itemsize for by in self._splits.values() for c in by.values())

    def add(self, pair: LatencyPair) -> None:
        m = pair.metric
        vals = self._values.get(m)
        if vals is None:
            vals = self._values[m] = array("d")
            self._sessions[m] = array("q")
            self._splits[m] = {f: array("q") for f in ALL_SPLIT_FIELDS}
            self._examples[m] = []
        v = pair.value_ms
        vals.append(math.inf if v is None else v)
        codes = self._session_codes
        self._sessions[m].append(codes.setdefault(pair.session_id, len(codes)))
        for f, arr in self._splits[m].items():
            labels = self._labels[f]
            arr.append(labels.setdefault(pair.split_value(f), len(labels)))
        if v is None and len(self._examples[m]) < self.max_examples:
            self._examples[m].append(pair.ref)

    def extend(self, pairs: Iterable[LatencyPair]) -> LatencyTable:
        for p in pairs:
            self.add(p)
        return self

    def summary(
        self,
        split_by: Sequence[SplitSpec] = SPLIT_FIELDS,
        *,
        n_boot: int = 1000,
        seed: int = 0,
    ) -> dict[str, Any]:
        """Per metric: the summary over all pairs (``all``) and per value of each split
        (``by[split][value]``). A summary is ``stats.percentiles.summarize_values`` over the
        group's pairs: ``n`` (every accepted start), ``n_censored`` (failures), P50/P95/P99
        with reasons in ``withheld``, and 95 % bootstrap intervals over sessions."""
        specs = [(s,) if isinstance(s, str) else tuple(s) for s in split_by]
        for spec in specs:
            for f in spec:
                if f not in ALL_SPLIT_FIELDS:
                    raise ValueError(f"unknown split field {f!r} (one of {ALL_SPLIT_FIELDS})")
        names = {f: {c: lab for lab, c in labels.items()} for f, labels in self._labels.items()}
        metrics: dict[str, Any] = {}
        order = [n for n in self.defs if n in self._values] + [
            n for n in self._values if n not in self.defs
        ]
        for m in order:
            vals = np.frombuffer(self._values[m], dtype=np.float64)
            sess = np.frombuffer(self._sessions[m], dtype=np.int64)
            entry: dict[str, Any] = {}
            d = self.defs.get(m)
            if d is not None:
                entry.update(d.describe())
            entry["all"] = summarize_values(vals, sess, n_boot=n_boot, seed=seed, unit="sessions")
            by: dict[str, Any] = {}
            for spec in specs:
                cols = [np.frombuffer(self._splits[m][f], dtype=np.int64) for f in spec]
                combo = np.stack(cols, axis=1)
                uniq, inverse = np.unique(combo, axis=0, return_inverse=True)
                inverse = inverse.reshape(-1)
                groups: dict[str, Any] = {}
                for g, row in enumerate(uniq):
                    label = "|".join(
                        _label(names[f][int(c)]) for f, c in zip(spec, row, strict=True)
                    )
                    mask = inverse == g
                    groups[label] = summarize_values(
                        vals[mask], sess[mask], n_boot=n_boot, seed=seed, unit="sessions"
                    )
                by["+".join(spec)] = dict(sorted(groups.items()))
            entry["by"] = by
            entry["censored_examples"] = list(self._examples[m])
            metrics[m] = entry
        groups_of: dict[str, list[str]] = {}
        for d in self.defs.values():
            for group in d.groups:
                groups_of.setdefault(group, []).append(d.name)
        return {
            "version": METRICS_VERSION,
            "split_by": ["+".join(s) for s in specs],
            "cluster": "session",
            "n_pairs": len(self),
            "groups": groups_of,
            "metrics": metrics,
        }


def _label(value: str | None) -> str:
    return UNKNOWN if value is None else value
