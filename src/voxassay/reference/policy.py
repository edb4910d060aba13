"""Behaviour policies of the reference agent: ``careful``, ``naive`` and one switch per failure.

The reference agent is a calibration instrument: every failure mode the duplex metrics are
meant to catch can be switched on alone (``careful+<switch>``), so a test can show that the
metric named for that failure moves and the others do not. ``SWITCHES`` says, per switch,
which layer reads it and which metric is expected to catch it.

Spec strings (``Policy.parse``)::

    careful                                   no failure switch on
    naive                                     every failure switch on except
                                              ignores_interruptions (naive stops on any
                                              sound, the opposite failure)
    careful+answers_backchannels,writes_after_stop
    careful+slow_stop_ms=600                  an integer switch needs a value
    careful+confirms_irreversible=false       booleans take true/false/yes/no/on/off/1/0
    naive+confirms_irreversible=true          a base with some switches turned back
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from voxassay.core.errors import SpecError

__all__ = ["BASES", "SWITCHES", "Policy", "PolicyError", "SwitchInfo"]


class PolicyError(SpecError):
    """A policy spec that does not parse (unknown base or switch, bad value)."""

    kind = "policy"


@dataclass(frozen=True)
class SwitchInfo:
    """What a switch does, who reads it, and the metric expected to catch it."""

    description: str
    layer: Literal["turn", "history", "task"]
    metric: str
    """The metric (or task check) that must move when this switch alone is on."""
    naive: bool | int
    """The switch's value in the ``naive`` policy."""


SWITCHES: dict[str, SwitchInfo] = {
    "answers_backchannels": SwitchInfo(
        "treats a backchannel (uh-huh, mm-hmm) during its own speech as a turn: stops and answers",
        "turn",
        "backchannel false cancel / false interruption rate",
        True,
    ),
    "ignores_interruptions": SwitchInfo(
        "keeps talking over a real barge-in",
        "turn",
        "missed interruption rate",
        False,  # naive stops on any sound (answers_backchannels); this is its opposite
    ),
    "jumps_into_pauses": SwitchInfo(
        "short endpointing without a completeness check: answers into mid-sentence pauses",
        "turn",
        "false takeover rate (premature takeover)",
        True,
    ),
    "answers_bystanders": SwitchInfo(
        "no level or addressee gate: answers bystander speech and media",
        "turn",
        "bystander false response rate",
        True,
    ),
    "slow_stop_ms": SwitchInfo(
        "extra delay (ms) before playback stops after an accepted interruption",
        "turn",
        "interrupt stop latency",
        400,
    ),
    "keeps_unheard_text": SwitchInfo(
        "keeps the full response in its history after a cut, including words never played",
        "history",
        "history consistency",
        True,
    ),
    "delivers_stale_results": SwitchInfo(
        "announces a tool result whose task version was superseded by a correction",
        "task",
        "stale_result_interception",
        True,
    ),
    "repeats_side_effects": SwitchInfo(
        "retries a write whose result was lost with a new idempotency key",
        "task",
        "duplicate_side_effects",
        True,
    ),
    "writes_after_stop": SwitchInfo(
        "lets a pending write commit after the user said stop (it is compensated afterwards)",
        "task",
        "write_after_stop",
        True,
    ),
    "confirms_irreversible": SwitchInfo(
        "asks for a yes before cancelling an appointment (off: cancels on the first request)",
        "task",
        "cancellation / goal_completion when the user would have said no",
        False,
    ),
}
"""Every switch of ``Policy`` (name -> description, layer, metric, naive value)."""

BASES = ("careful", "naive")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass(frozen=True)
class Policy:
    """How the reference agent behaves; ``name`` is the canonical spec it was parsed from."""

    name: str  # "careful" | "naive" | "careful+<switch>,..."
    answers_backchannels: bool = False  # turn layer: treats "uh-huh" during its speech as a turn
    ignores_interruptions: bool = False  # turn layer: keeps talking over real barge-ins
    jumps_into_pauses: bool = False  # turn layer: short endpointing, no completeness check
    answers_bystanders: bool = False  # turn layer: no level/addressee gate
    slow_stop_ms: int = 0  # turn layer: extra delay before playback stops
    keeps_unheard_text: bool = False  # history: keeps the full response after a cut
    delivers_stale_results: bool = False  # task: announces results whose task version is outdated
    repeats_side_effects: bool = False  # task: a retry gets a new idempotency key
    writes_after_stop: bool = False  # task: commits a pending write after the user said stop
    confirms_irreversible: bool = True  # task: asks before cancelling an appointment

    @classmethod
    def careful(cls) -> Policy:
        return cls(name="careful")

    @classmethod
    def naive(cls) -> Policy:
        values: dict[str, Any] = {k: info.naive for k, info in SWITCHES.items()}
        return cls(name="naive", **values)

    @classmethod
    def parse(cls, spec: str | Policy) -> Policy:
        """``careful``, ``naive``, or a base plus switches (``careful+a,b=1``); see module doc."""
        if isinstance(spec, Policy):
            return spec
        text = str(spec).strip().casefold()
        base_name, plus, rest = text.partition("+")
        base_name = base_name.strip()
        if base_name not in BASES:
            raise PolicyError(
                f"unknown policy {base_name or spec!r}: expected one of {', '.join(BASES)}, "
                f"optionally followed by +switch[,switch=value...]; switches: {_switch_list()}"
            )
        base = cls.careful() if base_name == "careful" else cls.naive()
        if not plus:
            return base
        parts = [p.strip() for p in rest.split(",")]
        if not any(parts):
            raise PolicyError(f"policy {spec!r}: '+' must be followed by at least one switch")
        changes: dict[str, Any] = {}
        canon: list[str] = []
        for part in parts:
            if not part:
                raise PolicyError(f"policy {spec!r}: empty switch between commas")
            key, eq, raw = (x.strip() for x in part.partition("="))
            if key not in SWITCHES:
                raise PolicyError(
                    f"policy {spec!r}: unknown switch {key!r}; switches: {_switch_list()}"
                )
            default = SWITCHES[key].naive
            if isinstance(default, bool):
                if not eq:
                    value: bool | int = True
                elif raw in _TRUE:
                    value = True
                elif raw in _FALSE:
                    value = False
                else:
                    raise PolicyError(
                        f"policy {spec!r}: switch {key!r} is a yes/no switch; "
                        f"got {raw!r} (use true or false)"
                    )
            else:
                if not eq:
                    raise PolicyError(
                        f"policy {spec!r}: switch {key!r} needs a value in ms, e.g. {key}={default}"
                    )
                try:
                    value = int(raw)
                except ValueError:
                    raise PolicyError(
                        f"policy {spec!r}: switch {key!r} needs an integer (ms), got {raw!r}"
                    ) from None
                if value < 0:
                    raise PolicyError(f"policy {spec!r}: switch {key!r} must be >= 0")
            changes[key] = value
            canon.append(key if value is True else f"{key}={str(value).lower()}")
        return replace(base, name=f"{base_name}+{','.join(canon)}", **changes)

    def switches(self) -> dict[str, bool | int]:
        """Every switch with its value."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}

    def failures_on(self) -> list[str]:
        """Switches whose value differs from ``careful`` (the failure modes turned on)."""
        careful = Policy.careful().switches()
        return [k for k, v in self.switches().items() if v != careful[k]]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.switches()}


def _switch_list() -> str:
    return ", ".join(
        f"{k}=<ms>" if not isinstance(v.naive, bool) else k for k, v in SWITCHES.items()
    )
