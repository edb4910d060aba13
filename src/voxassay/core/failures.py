"""How much of each system's run failed, and whether that fails the command.

One rule for every suite (asr, tts, su, duplex run/score, study):

- ``attempted`` = records of the system; ``failed`` = those with status ``error``,
  ``timeout`` or ``unparseable``; ``unscored`` (the item could not be scored, not the
  system's fault) never counts, as failed or as attempted.
- failure rate = failed / attempted.
- a system fails the command (exit 1) when every attempted record failed, or when
  ``max_failures`` is given and its failure rate exceeds it (inspect's ``fail_on_error``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from voxassay.core.records import Record

FAILED_STATUSES = ("error", "timeout", "unparseable")
TOP_REASONS = 3


@dataclass
class SystemFailures:
    """One system's tally. ``reasons`` counts ``kind: first line of message``."""

    system: str
    attempted: int = 0
    failed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float | None:
        """failed / attempted; None when nothing was attempted."""
        return self.failed / self.attempted if self.attempted else None

    def fails(self, max_failures: float | None) -> bool:
        """True when every attempt failed, or the rate exceeds ``max_failures``."""
        if not self.attempted:
            return False
        if self.failed == self.attempted:
            return True
        rate = self.rate
        return max_failures is not None and rate is not None and rate > max_failures

    def line(self) -> str:
        """``name: 3/4 failed: system_load: ... (3), timeout: ... (1)``."""
        head = f"{self.system}: {self.failed}/{self.attempted} failed"
        if not self.reasons:
            return head
        top = ", ".join(f"{why} ({n})" for why, n in self.reasons.most_common(TOP_REASONS))
        more = len(self.reasons) - TOP_REASONS
        return f"{head}: {top}" + (f" and {more} other reason(s)" if more > 0 else "")


def _reason(rec: Record) -> str:
    err = rec.error or {}
    kind = str(err.get("kind") or rec.status)
    message = str(err.get("message") or "").strip().splitlines()
    text = message[0][:160] if message else ""
    return f"{kind}: {text}" if text else kind


def tally(records: Iterable[Record]) -> list[SystemFailures]:
    """Per-system tallies, in order of first appearance."""
    out: dict[str, SystemFailures] = {}
    for rec in records:
        s = out.setdefault(rec.system, SystemFailures(rec.system))
        if rec.status == "unscored":
            continue
        s.attempted += 1
        if rec.status in FAILED_STATUSES:
            s.failed += 1
            s.reasons[_reason(rec)] += 1
    return list(out.values())


def check_max_failures(value: float | None) -> float | None:
    """``--max-failures`` must be a fraction in [0, 1]; ValueError otherwise."""
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"--max-failures must be a fraction between 0 and 1, not {value}")
    return value
