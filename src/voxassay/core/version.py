"""The version of voxassay (one place; ``voxassay.__version__`` reads it)."""

__version__ = "0.1.0"
