"""The ablation's calibration on the real offline cascade (faster-whisper, rules, piper) over
the natural emotion items (18, rendered with constructed prosody):

- ``prosody_aware`` (its responder gets cues measured on the user's voice in AO) scores higher
  from the audio than from the transcript: AO - TO on the checklist proxy has a CI above 0;
- without it AO and TO differ only by what the ASR misheard: the CI includes 0;
- on the neutral re-render of the same items, ``prosody_aware`` finds nothing to answer to: the
  CI includes 0 (the words alone do not carry the effect);
- nothing but the heard or read text, the history and the measured cues reached the responder:
  no item label, stressor name or rubric text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reference.test_fault_injection import _needs_speech_stack
from tests.suites.sts import fakes
from voxassay.suites.sts.items import load_items, select_items
from voxassay.suites.sts.runner import run_sts

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sts")]

AWARE = "python:tests.suites.sts.fakes:reference?prosody_aware=1"
PLAIN = "python:tests.suites.sts.fakes:reference?prosody_aware=0"
NATURAL_EMOTION = tuple(
    it.id
    for s in select_items(load_items(), ("natural",))
    for it in s.items
    if it.dimension in ("emotion_understanding", "emotion_alignment")
)


def _ablation(store: object, spec: str) -> dict:
    report = json.loads((store.path / "report.json").read_text())  # type: ignore[attr-defined]
    (block,) = [s for s in report["systems"] if s["system"] == spec]
    assert block["status"] == {"ok": 2 * len(NATURAL_EMOTION)}
    return block["ao_minus_to"]["checklist"]["overall"]


def test_prosody_awareness_is_found_and_its_absence_is_not(tmp_path: Path) -> None:
    _needs_speech_stack()
    assert len(NATURAL_EMOTION) == 18
    fakes.MADE.clear()
    cache = tmp_path / "cache"
    store = run_sts([AWARE, PLAIN], tmp_path / "run", only=NATURAL_EMOTION, cache_dir=cache)
    aware, plain = _ablation(store, AWARE), _ablation(store, PLAIN)
    assert aware["n"] == 18 and aware["ci_low"] > 0 and aware["p"] < 0.01, aware
    assert plain["ci_low"] <= 0 <= plain["ci_high"], plain
    neutral = run_sts(
        [AWARE], tmp_path / "neutral", only=NATURAL_EMOTION, neutral=True, cache_dir=cache
    )
    control = _ablation(neutral, AWARE)
    assert control["ci_low"] <= 0 <= control["ci_high"], control
    # what reached the responder: text, history, cues; never a label or rubric line
    logs = [entry for c in fakes.MADE for entry in c.responder_log]
    assert all(set(entry) == {"text", "history", "cues"} for entry in logs)
    assert all(e["cues"] is None or type(e["cues"]).__name__ == "Cues" for e in logs)
    given = json.dumps([[e["text"], e["history"]] for e in logs]).lower()
    items = [it for s in load_items() for it in s.items if it.id in NATURAL_EMOTION]
    secrets = {c.text.lower() for it in items for c in it.checklist}
    secrets |= {it.question.lower() for it in items} | {it.style for it in items}
    secrets |= {x for it in items for x in it.stressors} | {it.id for it in items}
    assert not [s for s in secrets if s in given]
    assert all(
        set(entry) == {"text", "history", "cues"} for c in fakes.MADE for entry in c.responder_log
    )
