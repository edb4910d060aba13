"""British->American spelling tables.

The base table is Whisper's ``english.json`` (1,739 pairs), which we do not copy: it is read at
run time from the installed ``whisper_normalizer`` package, the same file Whisper ships. The
leaderboard's copy of it differs in a few entries; those edits live in ``_tables.py``.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from functools import lru_cache
from importlib.resources import files
from types import MappingProxyType
from typing import Final

from voxassay.suites.asr.normalize._tables import OAL_SPELLING_DROP, OAL_SPELLING_SET

#: Where the table lives inside the ``whisper_normalizer`` distribution.
WHISPER_TABLE_PACKAGE: Final = "whisper_normalizer"
WHISPER_TABLE_PATH: Final = "normalizers/english.json"

#: SHA-256 of the table this module was checked against (whisper_normalizer 0.1.15).
WHISPER_TABLE_SHA256: Final = "6607f948be9824d2e1b2fa2223cd94c06c45afa4e05ea0e3d5e1f2bdffde2465"


def _read_table_bytes() -> bytes:
    try:
        resource = files(WHISPER_TABLE_PACKAGE).joinpath(WHISPER_TABLE_PATH)
        return resource.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover - install error
        raise RuntimeError(
            "the English normalizers need Whisper's spelling table from the "
            "'whisper-normalizer' package (pip install whisper-normalizer)"
        ) from exc


@lru_cache(maxsize=1)
def whisper_spellings() -> MappingProxyType[str, str]:
    """Whisper's British->American table, exactly as shipped."""
    raw = _read_table_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != WHISPER_TABLE_SHA256:
        warnings.warn(
            f"whisper_normalizer's english.json has sha256 {digest}, not the checked "
            f"{WHISPER_TABLE_SHA256}; WER parity with the leaderboard is not guaranteed",
            RuntimeWarning,
            stacklevel=2,
        )
    table = json.loads(raw.decode("utf-8"))
    return MappingProxyType({str(k): str(v) for k, v in table.items()})


@lru_cache(maxsize=1)
def oal_spellings() -> MappingProxyType[str, str]:
    """The leaderboard's table: Whisper's, minus a few entries, plus its own corrections."""
    table = dict(whisper_spellings())
    for key in OAL_SPELLING_DROP:
        table.pop(key, None)
    table.update(OAL_SPELLING_SET)
    return MappingProxyType(table)


def table_sha256() -> str:
    """SHA-256 of the installed Whisper table (for provenance in reports and tests)."""
    return hashlib.sha256(_read_table_bytes()).hexdigest()
