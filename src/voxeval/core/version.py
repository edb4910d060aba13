"""The version of voxeval (one place; ``voxeval.__version__`` reads it)."""

__version__ = "0.1.0"
