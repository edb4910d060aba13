"""Summary sentences are computed from the numbers: the leader follows the data (swap two
systems' figures and the named leader swaps), overlapping 95 % intervals give "no clear
leader", and a suite's summary (ASR, duplex) is built from its report alone."""

from __future__ import annotations

import copy
from typing import Any

from voxassay.report.summary import Estimate, display_names, leader, leader_sentence, short_name
from voxassay.suites.asr.render import summary as asr_summary


def test_the_leader_follows_the_numbers_and_overlap_means_no_clear_leader() -> None:
    a = Estimate("alpha", 0.10, 0.08, 0.12)
    b = Estimate("beta", 0.20, 0.17, 0.23)
    assert leader([a, b], lower_is_better=True)[0] == a
    assert leader([a, b], lower_is_better=False)[0] == b
    s = leader_sentence("WER", [a, b], lower_is_better=True)
    assert s.startswith("On WER, alpha leads: 0.100 [0.080, 0.120] vs beta 0.200")
    swapped = [Estimate("alpha", 0.20, 0.17, 0.23), Estimate("beta", 0.10, 0.08, 0.12)]
    assert leader_sentence("WER", swapped, lower_is_better=True).startswith("On WER, beta leads")
    near = [a, Estimate("beta", 0.11, 0.09, 0.13)]
    assert "no clear leader: alpha" in leader_sentence("WER", near, lower_is_better=True)
    # without an interval nothing separates two systems
    bare = [Estimate("alpha", 0.1), Estimate("beta", 0.5)]
    assert leader(bare, lower_is_better=True)[0] is None
    assert leader_sentence("WER", [a], lower_is_better=True).startswith("On WER, only alpha")
    assert leader_sentence("WER", [], lower_is_better=True) == "On WER, nothing was measured."


def _asr_report(wer_a: float, wer_b: float, half: float) -> dict[str, Any]:
    def block(w: float) -> dict[str, Any]:
        return {"wer": w, "ci_lo": w - half, "ci_hi": w + half, "cer": w / 2, "n": 40}

    return {
        "conditions": ["clean", "noisy"],
        "systems": [
            {
                "system": spec,
                "overall": block(w),
                "status_counts": {"ok": 40},
                "groups": [
                    {"group": "condition", "name": "clean", **block(w / 2)},
                    {"group": "condition", "name": "noisy", **block(w * 1.5)},
                ],
            }
            for spec, w in (("faster-whisper:tiny", wer_a), ("pocketsphinx", wer_b))
        ],
        "rank_stability": {
            "status": "ok",
            "conditions": [
                {"condition": "noisy", "rank_shift": {"pocketsphinx": 0, "faster-whisper:tiny": 0}}
            ],
        },
        "audits": {
            "consensus": {"status": "ok", "systems": [{"system": "pocketsphinx", "flagged": True}]}
        },
    }


def test_asr_summary_names_the_leader_from_its_report() -> None:
    rep = _asr_report(0.10, 0.30, 0.02)
    s = asr_summary(rep)
    assert s.sentences[0].startswith("On overall WER, faster-whisper:tiny leads")
    assert (
        "Best per condition (95 % CIs apart): clean: faster-whisper:tiny; noisy: faster-whisper:tiny."
        in s.sentences
    )
    assert "Audits flagged consensus dissent: pocketsphinx." in s.sentences
    assert "No system changes rank under any condition." in s.sentences
    # the same report with the two systems' numbers swapped names the other leader
    swapped = copy.deepcopy(rep)
    a, b = swapped["systems"]
    a["overall"], b["overall"] = b["overall"], a["overall"]
    a["groups"], b["groups"] = b["groups"], a["groups"]
    assert asr_summary(swapped).sentences[0].startswith("On overall WER, pocketsphinx leads")
    # wide intervals: no clear leader, overall and per condition
    wide = asr_summary(_asr_report(0.10, 0.30, 0.15))
    assert "no clear leader" in wide.sentences[0]
    assert "clean: no clear leader" in wide.sentences[1]

    # a rank change is claimed with the share of bootstrap draws that show it, and only from 95 %
    moved = copy.deepcopy(rep)
    cond = moved["rank_stability"]["conditions"][0]
    cond["rank_shift"] = {"pocketsphinx": -1, "faster-whisper:tiny": 1}
    cond["rank_shift_share"] = {"pocketsphinx": 0.62, "faster-whisper:tiny": 0.62}
    assert any(
        x.startswith("No rank change is clear: the largest, ")
        and "moves 1 place(s)" in x
        and x.endswith("under noisy (against clean), is seen in only 62% of bootstrap draws.")
        for x in asr_summary(moved).sentences
    )
    cond["rank_shift_share"] = {"pocketsphinx": 0.97, "faster-whisper:tiny": 0.97}
    assert any(
        x.startswith("Largest rank change: ") and x.endswith("in 97% of bootstrap draws.")
        for x in asr_summary(moved).sentences
    )


def test_display_names_are_short_and_unique() -> None:
    assert short_name("fast=faster-whisper:tiny") == "fast"
    assert short_name("piper?noise_scale=0") == "piper"
    assert (
        short_name("openai-compat:http://127.0.0.1:8000/v1?model=tts-1&voice=a")
        == "openai-compat:tts-1"
    )
    assert (
        short_name("faster-whisper:/models/whisper-large-v3-turbo-ct2-int8-x", 24).count("…") == 1
    )
    names = display_names(["piper?noise_scale=0", "piper?noise_scale=1"])
    assert len(set(names.values())) == 2
