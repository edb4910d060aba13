"""voxeval: evaluate voice AI the way it is used in the real world."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
