"""Equality of results computed in different processes, executors or nodes.

Exact where the computation is identical (text, integers, booleans, statuses, answers and
every decision); floats equal within a relative ``REL`` (1e-6), because a model's kernels may
sum in another order in another process (a Ray actor's torch gave a cosine 2.6e-9 away from
this process's: 0.9306163666639575 against 0.9306163642073261). A number printed inside a text
(``"cosine 0.9306 vs threshold 0.7286"``) may differ by one unit of its last printed digit;
the words around it must be equal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

REL = 1e-6
ABS = 1e-9
"""Floats at 0: a difference below this is equal (an exact zero against 1e-17)."""
_DECIMAL = re.compile(r"-?\d+\.(\d+)")


def _texts_differ(a: str, b: str) -> bool:
    if a == b:
        return False
    if _DECIMAL.split(a)[::2] != _DECIMAL.split(b)[::2]:  # the words around the numbers
        return True
    na, nb = list(_DECIMAL.finditer(a)), list(_DECIMAL.finditer(b))
    if len(na) != len(nb):
        return True
    for x, y in zip(na, nb, strict=True):
        places = max(len(x.group(1)), len(y.group(1)))
        if abs(float(x.group(0)) - float(y.group(0))) > 1.000001 * 10.0**-places:
            return True
    return False


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ beyond the rules above ([] when the same)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return [] if a is b or a == b else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, int | float) and isinstance(b, int | float)):
            return [f"{where}: {a!r} != {b!r}"]
        if math.isnan(a) and math.isnan(b):
            return []
        ok = math.isclose(a, b, rel_tol=REL, abs_tol=ABS)
        return [] if ok else [f"{where}: {a!r} != {b!r} (relative {REL})"]
    if isinstance(a, str) and isinstance(b, str):
        return [f"{where}: {a!r} != {b!r}"] if _texts_differ(a, b) else []
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))} in one only"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, Sequence) and isinstance(b, Sequence) and not isinstance(a, str | bytes):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def assert_same(a: Any, b: Any, what: str = "") -> None:
    """Fail with every difference listed (see the module docstring for what is equal)."""
    found = differences(a, b, what)
    assert not found, "\n".join(found[:20])
