"""Error types. Every error that reaches a record carries a short machine ``kind``."""

from __future__ import annotations


class VoxassayError(Exception):
    """Base class; ``kind`` is stored in records (``error.kind``)."""

    kind = "error"


class InputError(VoxassayError):
    """Bad user input (file, manifest, option): the CLI exits with code 2."""

    kind = "input"


class ManifestError(InputError):
    """A manifest with problems; ``problems`` lists ``(line_number, message)``."""

    kind = "manifest"

    def __init__(self, path: str, problems: list[tuple[int, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  {path}:{ln}: {msg}" for ln, msg in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{len(problems)} problem(s) in manifest {path}:\n{lines}{more}")


class AudioError(VoxassayError):
    """Audio that cannot be used; ``kind`` says why (missing, unreadable, empty)."""

    def __init__(self, message: str, kind: str = "audio") -> None:
        super().__init__(message)
        self.kind = kind


class SpecError(InputError):
    """A system spec string that does not parse or names an unknown backend."""

    kind = "spec"


class BackendUnavailable(VoxassayError):
    """A backend whose packages are missing; the message says what to install."""

    kind = "unavailable"


class Unreachable(VoxassayError):
    """A system or cluster that cannot be reached before any work starts: the CLI exits 1
    (a system failed wholly), with the reason, and leaves no run folder."""

    kind = "unreachable"


class SystemOutputError(VoxassayError):
    """A system returned something that is not a valid answer."""

    kind = "unparseable"
