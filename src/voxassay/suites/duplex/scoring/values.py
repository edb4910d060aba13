"""Business values compared the way people say them: numbers, dates and times normalised before equality (``normalize_value``, ``values_equal``), and whether a text mentions a value in any of its spoken forms (``text_mentions``)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from voxassay.core.english import MONTHS, SMALL_ORDINALS

__all__ = [
    "ISO_DATE",
    "canonical_value",
    "normalize_value",
    "same_field",
    "text_mentions",
    "values_equal",
]


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _number_text(d: Decimal) -> str:
    if d.is_finite() and d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def normalize_value(value: Any) -> Any:
    """A canonical form for comparing business values.

    Numbers (and numeric strings) become their shortest decimal text (``10``, ``10.0`` and
    ``"10"`` are equal; ``"10.50"`` equals ``10.5``); dates and datetimes (objects or ISO
    text) become ISO text, aware datetimes in UTC; other strings are stripped and casefolded;
    booleans become ``"true"``/``"false"``; mappings and lists are normalized item by item.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        try:
            return _number_text(Decimal(str(value)))
        except InvalidOperation:
            return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text):
            try:
                return _number_text(Decimal(text))
            except InvalidOperation:
                pass
        if ISO_DATE.match(text):
            return text
        if _ISO_DATETIME.match(text):
            try:
                return normalize_value(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
            except ValueError:
                pass
        return text.casefold()
    if isinstance(value, Mapping):
        return {str(k): normalize_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    return str(value)


def values_equal(a: Any, b: Any) -> bool:
    """``normalize_value(a) == normalize_value(b)``."""
    return bool(normalize_value(a) == normalize_value(b))


def canonical_value(value: Any) -> str:
    return json.dumps(normalize_value(value), sort_keys=True, ensure_ascii=False)


def same_field(a: str, b: str) -> bool:
    """Field names that denote the same parameter: equal, or one is the other with a prefix
    ending in ``_`` (``final_date`` ~ ``date``, ``new_date`` ~ ``date``)."""
    a, b = a.casefold(), b.casefold()
    return a == b or a.endswith("_" + b) or b.endswith("_" + a)


_SMALL_ORDINALS = SMALL_ORDINALS


_MONTHS = MONTHS


def _ordinal_word(n: int) -> str:
    if n < 20:
        return _SMALL_ORDINALS[n]
    tens, unit = divmod(n, 10)
    tens_word = {2: "twenty", 3: "thirty"}[tens]
    if unit == 0:
        return tens_word[:-1] + "ieth"
    return f"{tens_word} {_SMALL_ORDINALS[unit]}"


def _ordinal_digits(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _words(text: str) -> str:
    return " " + re.sub(r"[^0-9a-z]+", " ", text.casefold()).strip() + " "


def _mention_forms(value: Any) -> list[str]:
    norm = normalize_value(value)
    if not isinstance(norm, str):
        return [canonical_value(norm)]
    forms = [norm]
    if ISO_DATE.match(norm[:10]):
        month, day = int(norm[5:7]), int(norm[8:10])
        if 1 <= month <= 12 and 1 <= day <= 31:
            name = _MONTHS[month - 1]
            forms += [_ordinal_digits(day), _ordinal_word(day), f"{name} {day}", f"{day} {name}"]
    return forms


def text_mentions(text: str, value: Any) -> bool:
    """Whether ``text`` says ``value``: its normalized text as whole words, or for a date its
    day as an ordinal (``10th``, ``tenth``) or with the month name (``august 10``)."""
    haystack = _words(text)
    return any(_words(form) in haystack for form in _mention_forms(value) if _words(form).strip())
