"""Overfitting audits for ASR benchmarks: does a system hear the audio or recall the references?

Four audits, each a pure scoring function plus (where audio must be constructed) an item-set
builder. None of them proves contamination on its own; each gives a rate with its
denominator and a confidence interval that a report can put beside WER.

1. **Consensus dissent** (:func:`consensus_dissent`): where a supermajority of *other*
   systems agree on a word that differs from the reference, does this system reproduce the
   reference instead? Honest systems mostly side with the panel there; a system that keeps
   reproducing the reference's idiosyncrasies probably saw the references.
2. **Audio masking** (:func:`build_masked_items`, :func:`masking_rates`): one content word is
   replaced by -60 dBFS noise; a system that still outputs the word fills it in from
   language-model priors or memory, not from the audio.
3. **Orthographic switch** (:func:`orthographic_switch`): arbitrary written conventions
   (colour/color, 20/twenty, %/percent, OK/okay, Mr./Mister, &/and). A system has a house
   style; following the reference's arm on both sides of a convention means it knows the
   references' text.
4. **Synthetic speech gap** (:func:`build_synthetic_items`, :func:`synthetic_gap`): WER on
   TTS renderings of the same transcripts minus WER on the real recordings, paired by item.

:func:`run_audits` computes every audit the items and records support and says why the
others were not run; its result is JSON-serialisable and goes into ``report.json`` under
``audits``.
"""

from __future__ import annotations

from voxassay.suites.asr.audits._common import AUDITS_VERSION, DITHER_DBFS, FUNCTION_WORDS
from voxassay.suites.asr.audits.consensus import consensus_dissent
from voxassay.suites.asr.audits.masking import build_masked_items, masking_rates
from voxassay.suites.asr.audits.orthographic import (
    CONVENTIONS_VERSION,
    DEFAULT_CONVENTIONS,
    Convention,
    orthographic_switch,
)
from voxassay.suites.asr.audits.run import run_audits
from voxassay.suites.asr.audits.synthetic import build_synthetic_items, synthetic_gap

__all__ = [
    "AUDITS_VERSION",
    "CONVENTIONS_VERSION",
    "DEFAULT_CONVENTIONS",
    "DITHER_DBFS",
    "FUNCTION_WORDS",
    "Convention",
    "build_masked_items",
    "build_synthetic_items",
    "consensus_dissent",
    "masking_rates",
    "orthographic_switch",
    "run_audits",
    "synthetic_gap",
]
