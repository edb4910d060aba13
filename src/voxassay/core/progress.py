"""Per-system progress callbacks for suite runs and demos (a rich Progress, or none).

In ``core`` so that suites, demos and the CLI share them without a suite importing ``cli``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any


def system_progress(
    progress: Any,
    label_prefix: str = "",
    status: str | None = None,
) -> tuple[Callable[[str, int], None], Callable[[Any], None]]:
    """``on_start(spec, n)`` / ``on_record(rec)`` callbacks for a suite run: one bar of
    ``progress`` (a rich Progress, or None for no bars) per system, labelled
    ``label_prefix + spec`` and advanced once per record.

    With ``status`` (e.g. ``"failed"``) a bar's status shows ``"<status> N"`` once N of that
    system's records are not ok.
    A record of a system that got no bar is ignored.
    """
    bars: dict[str, Any] = {}
    counts: Counter[tuple[str, str]] = Counter()

    def on_start(spec: str, n: int) -> None:
        if progress is not None:
            from rich.markup import escape

            bars[spec] = progress.add_task(escape(f"{label_prefix}{spec}"), total=n, status="")

    def on_record(rec: Any) -> None:
        bar = bars.get(rec.system)
        if bar is None:
            return
        if status is None:
            progress.advance(bar)
            return
        counts[(rec.system, rec.status)] += 1
        bad = sum(v for (system, st), v in counts.items() if st != "ok" and system == rec.system)
        progress.update(bar, advance=1, status=f"{status} {bad}" if bad else "")

    return on_start, on_record
