"""System adapters by capability; each backend lives in its own module."""

from __future__ import annotations

from voxassay.systems.base import Synthesizer, Transcriber, Transcript, Word, coerce_transcript

__all__ = ["Synthesizer", "Transcriber", "Transcript", "Word", "coerce_transcript"]
