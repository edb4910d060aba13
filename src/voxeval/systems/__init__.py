"""System adapters by capability; each backend lives in its own module."""

from __future__ import annotations

from voxeval.systems.base import Transcriber, Transcript, Word

__all__ = ["Transcriber", "Transcript", "Word"]
