"""English number and calendar words, one table for every text normaliser (the TTS
intelligibility normaliser in ``suites/tts/spoken.py`` and the duplex task checks' value
matching in ``suites/duplex/scoring/values.py``)."""

from __future__ import annotations

from typing import Final

MONTHS: Final = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
"""Month names in calendar order (index + 1 = month number)."""

SMALL_CARDINALS: Final = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
TENS_CARDINALS: Final = (
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
)
"""Twenty to ninety (index + 2 = the tens digit)."""
SMALL_ORDINALS: Final = (
    "zeroth",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
)
"""Ordinal words of 0-19 (index = the number)."""
TENS_ORDINALS: Final = {
    "twentieth": "twenty",
    "thirtieth": "thirty",
    "fortieth": "forty",
    "fiftieth": "fifty",
    "sixtieth": "sixty",
    "seventieth": "seventy",
    "eightieth": "eighty",
    "ninetieth": "ninety",
    "hundredth": "hundred",
    "thousandth": "thousand",
}
"""Ordinal word -> its cardinal word, for the round numbers above nineteen."""
