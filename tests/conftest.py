"""Shared fixtures: the real recordings in ../shared/data and manifests built from them."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

# Idle OpenMP (CTranslate2) and OpenBLAS threads sleep instead of spinning, as in the voxassay
# command: with two xdist workers on two cores, a spinning pool steals the other's core.
from voxassay.core.threads import quiet_thread_pools

quiet_thread_pools()


def _run_first_use_probes() -> None:
    """Probes libraries run once per process on first use, here at collection so that the
    live-tier check below blames no test for them: ``platform.processor()`` runs ``uname
    -p``, importing urllib3 (requests, speechmos) binds ``::1`` to test for IPv6, and on a
    fresh machine matplotlib (imported by sureal) builds its font cache with ``fc-list``."""
    import contextlib
    import platform

    platform.processor()
    with contextlib.suppress(ImportError):
        import urllib3  # noqa: F401
    with contextlib.suppress(ImportError):
        from matplotlib import get_cachedir

        if not any(Path(get_cachedir()).glob("fontlist-*.json")):
            import matplotlib.font_manager  # noqa: F401


_run_first_use_probes()

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"


def shared_data() -> Path:
    """The shared data folder, or skip the test with the reason."""
    if not (DATA / "read_speech" / "manifest.csv").exists():
        pytest.skip(f"real recordings not found at {DATA} (../shared/data beside the repo)")
    return DATA


def csv_rows(folder: str) -> list[dict[str, str]]:
    with open(shared_data() / folder / "manifest.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def accent_of(notes: str) -> str:
    """Accent from the shared manifest's notes (VCTK region, or "Indian" for CMU axb)."""
    if "Indian" in notes:
        return "Indian"
    if "accent/region:" in notes:
        parts = [p.strip() for p in notes.split(":", 1)[1].split("(")[0].split(",")]
        return parts[-1]
    return "unknown"


def make_manifest(
    path: Path, folders: tuple[str, ...] = ("read_speech",), limit: int | None = None
) -> Path:
    """Write a voxassay manifest (absolute audio paths) from shared folders with transcripts."""
    lines = []
    for folder in folders:
        for row in csv_rows(folder):
            if not row["path"].endswith((".wav", ".flac")) or not row["transcript_or_label"]:
                continue
            labels = {"condition": "clean" if folder == "read_speech" else "accent"}
            if folder == "accented":
                labels["accent"] = accent_of(row["notes"])
            lines.append(
                {
                    "id": f"{folder}/{Path(row['path']).stem}",
                    "audio_filepath": str(DATA / folder / row["path"]),
                    "duration": float(row["duration_s"]),
                    "text": row["transcript_or_label"],
                    "speaker": row["speaker"],
                    "labels": labels,
                }
            )
    if limit:
        lines = lines[:limit]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def data_dir() -> Path:
    return shared_data()


# --------------------------------------------------------------------------- tiers
TIERS = ("slow", "live", "browser", "ray")
UNMARKED_LIMIT_S = 3.0
"""A test in no tier that takes longer than this is listed at the end of the run: the fast
tier (``make test-fast``) must stay within 3 minutes, so such a test belongs in a tier."""
_unmarked_slow: list[tuple[str, float]] = []
_live_unmarked: dict[str, set[str]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == "uses_live" and report.when == "teardown":
            _live_unmarked[report.nodeid] = set(str(value).split(","))
    if report.when != "call" or report.duration <= UNMARKED_LIMIT_S:
        return
    if not any(t in report.keywords for t in TIERS):
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _live_unmarked:
        terminalreporter.section("tests in no live tier that opened sockets or started processes")
        for nodeid, used in sorted(_live_unmarked.items()):
            terminalreporter.write_line(f"{nodeid}  ({', '.join(sorted(used))}: mark it live)")
    if _unmarked_slow:
        terminalreporter.section("tests in no tier that took longer than 3 s")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda x: -x[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}  (mark it slow or live)")


# --------------------------------------------------------------------------- xdist groups
REAL_CLOCK_GROUP = "realclock"
"""The long modules that mostly wait (the real-clock sound loop, Pipecat and transports, and
the Ray cluster's tests, whose daemons and timeouts keep them at about a third of a core): one
after another on one worker, started first, so that their waiting overlaps the other worker's
computing instead of each other's (measured on a fresh machine: 306 s and 253 s of wall time
for 199 and 76 CPU-s; on two workers at once they idled a core)."""
FIRST_SLOW_GROUPS = {"tests/cli/test_demo.py"}
"""Slow groups taken before the others: the demo runs its sections on two lanes (both cores
for about two minutes), so it goes beside the real-clock group, whose modules mostly wait,
and takes the core they leave idle. (It used to go last, because beside the sound loop it
pushed the loop's latency past a 20 ms bound; the tests no longer bound the machine's
latency, see docs/testing.md.)"""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n 2 --dist loadgroup`` (``make test``) every module runs whole on one
    worker, so module-scoped fixtures (a loaded model, a run several tests read) are built
    once; a module or test marked ``xdist_group(NAME)`` shares its worker, and so its
    session-scoped fixtures, with the others of that group. The real-clock group comes first,
    then the demo, then the other groups holding a ``slow`` test, so the long ones start first
    and the short ones fill in."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))

    def group(item: pytest.Item) -> str:
        return "_".join(sorted(str(m.args[0]) for m in item.iter_markers("xdist_group")))

    slow_groups = {group(it) for it in items if it.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        g = group(item)
        if g == REAL_CLOCK_GROUP:
            return 0
        if g in FIRST_SLOW_GROUPS:
            return 1
        return 2 if g in slow_groups else 3

    items.sort(key=rank)  # stable: order kept within


# --------------------------------------------------------------------------- live tier check


TOOL_PROCESSES = {"espeak-ng", "espeak", "fluidsynth"}
"""Programs that synthesizers and renderers run as a step of their work (a real model, not a
live peer): starting them does not make a test ``live``."""


@pytest.fixture(autouse=True)
def _watch_live_use(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Outside the ``live``/``browser``/``ray`` tiers, note a test that binds or connects a
    real socket or starts a process (it is listed at the end of the run: it belongs in
    ``live``, which ``make test`` runs alone and ``make test-fast`` leaves out)."""
    if any(request.node.get_closest_marker(t) for t in ("live", "browser", "ray")):
        yield
        return
    import socket
    import subprocess

    used: set[str] = set()
    real_bind, real_connect, real_popen = (
        socket.socket.bind,
        socket.socket.connect,
        subprocess.Popen.__init__,
    )

    def bind(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            used.add("socket")
        return real_bind(self, address)

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            used.add("socket")
        return real_connect(self, address)

    def popen(self: Any, *args: Any, **kwargs: Any) -> Any:
        argv = args[0] if args else kwargs.get("args")
        first = argv if isinstance(argv, str) else (next(iter(argv)) if argv else "")
        if Path(str(first).split()[0] if first else "").name not in TOOL_PROCESSES:
            used.add("process")
        return real_popen(self, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "bind", bind)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    yield
    if used:  # a user property travels to the xdist controller with the test's report
        request.node.user_properties.append(("uses_live", ",".join(sorted(used))))
