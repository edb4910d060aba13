"""Text normalizers applied to references and hypotheses before WER is computed.

``get_normalizer(name)`` returns a callable ``str -> str``; words are the whitespace split of
its output. Registered names:

* ``oal-en`` (default; alias ``open-asr-leaderboard``): the Open ASR Leaderboard's English
  normalizer (``huggingface/open_asr_leaderboard`` at d1e99b2). Scored with
  :func:`voxassay.suites.asr.align.count_errors` (``merge_compounds=True``) it reproduces the
  leaderboard's corpus WER exactly.
* ``whisper-en``: OpenAI Whisper's English normalizer, i.e. ``oal-en`` without the
  leaderboard's extensions (fillers, pronoun-only ``'s``, compounds, names, letter runs and
  spelling-table corrections).
* ``raw``: no change at all.

For large batches :func:`normalize_many` spreads the work over processes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from typing import Final, Protocol, runtime_checkable

from voxassay.suites.asr.normalize._english import EnglishNormalizer, EnglishRules
from voxassay.suites.asr.normalize._spelling import oal_spellings, whisper_spellings
from voxassay.suites.asr.normalize._tables import (
    OAL_COMPOUNDS,
    OAL_FILLERS,
    OAL_NAMES,
    OAL_S_PRONOUNS,
    WHISPER_FILLERS,
    WHISPER_S_CLITIC,
)

__all__ = [
    "ALIASES",
    "DEFAULT_NORMALIZER",
    "NORMALIZERS",
    "Normalizer",
    "available_cores",
    "get_normalizer",
    "normalize_many",
    "pool_workers",
]

DEFAULT_NORMALIZER: Final = "oal-en"
OAL_COMMIT: Final = "d1e99b25524814332d6868a5645e568670834cfb"


@runtime_checkable
class Normalizer(Protocol):
    """A text normalizer: ``name``, a ``version`` string for provenance, and the call."""

    name: str
    version: str

    def __call__(self, text: str) -> str: ...


class _Raw:
    """Leaves the text as it is; words are its whitespace split."""

    def __init__(self) -> None:
        self.name = "raw"
        self.version = "raw/1"

    def __call__(self, text: str) -> str:
        return text

    def __repr__(self) -> str:
        return "RawNormalizer()"


def _oal_en() -> Normalizer:
    rules = EnglishRules(
        fillers=OAL_FILLERS,
        s_clitic=(r"\b(" + "|".join(OAL_S_PRONOUNS) + r")'s\b", r"\1 is", "'s"),
        spellings=oal_spellings(),
        names=OAL_NAMES,
        compounds=OAL_COMPOUNDS,
        collapse_letter_runs=True,
    )
    return EnglishNormalizer("oal-en", f"oal-en/1 (open_asr_leaderboard@{OAL_COMMIT[:7]})", rules)


def _whisper_en() -> Normalizer:
    rules = EnglishRules(
        fillers=WHISPER_FILLERS,
        s_clitic=WHISPER_S_CLITIC,
        spellings=whisper_spellings(),
        names={},
    )
    return EnglishNormalizer("whisper-en", "whisper-en/1 (openai/whisper English)", rules)


_FACTORIES: Final[dict[str, Callable[[], Normalizer]]] = {
    "oal-en": _oal_en,
    "whisper-en": _whisper_en,
    "raw": _Raw,
}

#: Registered normalizer names.
NORMALIZERS: Final = tuple(_FACTORIES)
#: Other names accepted by :func:`get_normalizer`.
ALIASES: Final = {"open-asr-leaderboard": "oal-en"}


@cache
def _build(name: str) -> Normalizer:
    return _FACTORIES[name]()


def get_normalizer(name: str = DEFAULT_NORMALIZER) -> Normalizer:
    """The normalizer registered as ``name`` (built once, then shared).

    Raises ``KeyError`` for an unknown name; the message lists the known ones.
    """
    canonical = ALIASES.get(name, name)
    if canonical not in _FACTORIES:
        known = ", ".join([*NORMALIZERS, *ALIASES])
        raise KeyError(f"unknown normalizer {name!r}; known normalizers: {known}")
    return _build(canonical)


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------

#: Below this many texts per worker, a process pool costs more than it saves.
MIN_TEXTS_PER_WORKER: Final = 4000

_SHARED_TEXTS: list[str] = []  # handed to forked workers without pickling


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def pool_workers(n_texts: int, workers: int | None = None) -> int:
    """How many processes :func:`normalize_many` uses for ``n_texts`` texts."""
    if workers is not None:
        return max(1, min(workers, n_texts))
    return max(1, min(available_cores(), n_texts // MIN_TEXTS_PER_WORKER))


def _normalize_range(name: str, start: int, stop: int) -> list[str]:
    norm = get_normalizer(name)
    return [norm(t) for t in _SHARED_TEXTS[start:stop]]


def _normalize_chunk(name: str, chunk: list[str]) -> list[str]:
    norm = get_normalizer(name)
    return [norm(t) for t in chunk]


def normalize_many(
    texts: Iterable[str], workers: int | None = None, name: str = DEFAULT_NORMALIZER
) -> list[str]:
    """Normalize ``texts`` with the normalizer registered as ``name``, in order.

    ``workers=None`` picks a process count from the batch size and the available cores
    (one process, i.e. no pool, for small batches); ``workers=1`` never starts a pool.
    The result is identical to ``[get_normalizer(name)(t) for t in texts]``.
    """
    items = list(texts)
    norm = get_normalizer(name)
    n_workers = pool_workers(len(items), workers)
    if n_workers <= 1:
        return [norm(t) for t in items]

    n_chunks = n_workers * 4
    step = -(-len(items) // n_chunks)
    bounds = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
    name = norm.name  # canonical, for the workers' registry lookup
    global _SHARED_TEXTS
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        # Forked workers see the list as it is when they start: no pickling on the way in.
        # (Forking is only safe while this process runs a single thread.)
        _SHARED_TEXTS = items
        try:
            fork_ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(n_workers, mp_context=fork_ctx) as pool:
                futures = [pool.submit(_normalize_range, name, a, b) for a, b in bounds]
                parts = [f.result() for f in futures]
        finally:
            _SHARED_TEXTS = []
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
        ctx = multiprocessing.get_context(method)
        with ProcessPoolExecutor(n_workers, mp_context=ctx) as pool:
            futures = [pool.submit(_normalize_chunk, name, items[a:b]) for a, b in bounds]
            parts = [f.result() for f in futures]
    return [text for part in parts for text in part]
