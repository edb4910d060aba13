"""How the reference desk says values back: dates, times, phone numbers, lists and fields."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


__all__ = ["say_date", "say_phone", "say_time"]


def _ordinal_suffix(n: int) -> str:
    if 11 <= n % 100 <= 13:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }".replace(" ", "")


def say_date(iso: str) -> str:
    """``2026-08-10`` -> ``Monday, August 10th``."""
    d = dt.date.fromisoformat(iso)
    return f"{d.strftime('%A')}, {d.strftime('%B')} {_ordinal_suffix(d.day)}"


def say_time(hhmm: str) -> str:
    """``14:30`` -> ``2:30 p.m.``; ``10:00`` -> ``10 a.m.``; ``12:00`` -> ``noon``."""
    h, m = (int(x) for x in hhmm.split(":"))
    if (h, m) == (12, 0):
        return "noon"
    suffix = "a.m." if h < 12 else "p.m."
    h12 = h % 12 or 12
    return f"{h12} {suffix}" if m == 0 else f"{h12}:{m:02d} {suffix}"


def say_phone(phone: str) -> str:
    """``555 0100`` -> ``5 5 5, 0 1 0 0`` (read digit by digit)."""
    return ", ".join(" ".join(group) for group in phone.split())


def say_list(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def say_field(key: str, value: Any) -> str:
    if value is None:
        return "nothing"
    if key == "date":
        return say_date(str(value))
    if key == "time":
        return say_time(str(value))
    if key == "contact":
        return say_phone(str(value))
    return str(value)
