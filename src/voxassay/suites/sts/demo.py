"""The STS suite's embedded demo: both reference variants on a few natural emotion items.

``reference-sts`` and ``reference-sts:prosody_aware`` answer five natural items (three
"yes" said hesitantly or fearfully, two emotionally ambiguous messages) from the audio and
from the transcript: the report's AO - TO rows show the calibration (the prosody-aware
variant gains from hearing the user; the plain one does not). ``full``: every natural
emotion item (18).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxassay.core.runstore import RunStore

QUICK = ("parcel-ea", "appt-ea", "card-ea", "card-eu", "net-eu")
SYSTEMS = ("reference-sts", "reference-sts:prosody_aware")


def run_demo(out: str | Path, *, progress: Any = None, full: bool = False) -> RunStore:
    from voxassay.core.progress import system_progress
    from voxassay.suites.sts.runner import run_sts

    only: tuple[str, ...] = QUICK
    if full:
        from voxassay.suites.sts.items import load_items, select_items

        only = tuple(
            it.id
            for s in select_items(load_items(), ("natural",))
            for it in s.items
            if it.dimension in ("emotion_understanding", "emotion_alignment")
        )
    on_start, on_record = system_progress(progress, label_prefix="sts ", status="not ok")
    return run_sts(
        list(SYSTEMS),
        Path(out),
        only=only,
        cache_dir=Path(out).parent / ".sts-render-cache",  # kept across demos
        on_start=on_start,
        on_record=on_record,
    )
