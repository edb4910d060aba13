"""Reading numbers that come from JSON, records and user files."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite"]


def finite(x: Any) -> float | None:
    """``x`` as a finite float; None for None, booleans, text that is not a number, NaN and
    infinities (a number that cannot be used is said to be missing, never guessed)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
