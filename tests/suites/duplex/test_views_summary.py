"""The duplex summary is computed from the Scorecard: the trade-off sentence between two
agents follows their numbers (swap them and it swaps), the headline table never pools routes,
and each gated system's verdict leads with its failing gates and their mitigations. Data:
the careful and naive goldens (real runs of the reference agent)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex.scorecard import Scorecard
from voxassay.report.render import to_html, to_markdown
from voxassay.suites.duplex.views import document
from voxassay.suites.duplex.views_summary import duplex_summary

GOLDEN = Path(__file__).parents[2] / "golden" / "duplex"


def _golden(name: str) -> dict[str, Any]:
    with gzip.open(GOLDEN / f"{name}.report.json.gz", "rt", encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def _two_agents() -> dict[str, Any]:
    careful, naive = _golden("careful"), _golden("naive")
    both = copy.deepcopy(careful)
    both["systems"] = careful["systems"] + naive["systems"]
    both["sessions"] = careful["sessions"] + naive["sessions"]
    return both


def test_the_trade_off_sentence_follows_the_numbers() -> None:
    doc = _two_agents()
    card = Scorecard.model_validate(doc)
    careful, naive = card.systems
    p50 = {s.system: s.overall.latencies["response_first_audio_ms"].p50 for s in card.systems}
    acc = {s.system: s.overall.rates["behaviour_accuracy"] for s in card.systems}
    faster = min(p50, key=lambda k: float(p50[k] or 0))
    sentence = duplex_summary(card).sentences[0]
    assert sentence.startswith(
        f"{faster} answers {abs(p50[careful.system] - p50[naive.system]):.0f} ms sooner"
    )
    wrong = {k: v.n - v.k for k, v in acc.items()}
    assert f"{wrong[faster]} of {acc[faster].n} turn decisions wrong" in sentence
    # swap the two agents' latencies: the other one is now the faster
    swapped = copy.deepcopy(doc)
    a, b = swapped["systems"]
    la, lb = a["overall"]["latencies"], b["overall"]["latencies"]
    la["response_first_audio_ms"], lb["response_first_audio_ms"] = (
        lb["response_first_audio_ms"],
        la["response_first_audio_ms"],
    )
    other = duplex_summary(Scorecard.model_validate(swapped)).sentences[0]
    slower = naive.system if faster == careful.system else careful.system
    assert other.startswith(f"{slower} answers")
    # overlapping medians: no clear leader on speed
    same = copy.deepcopy(doc)
    same["systems"][1]["overall"]["latencies"]["response_first_audio_ms"] = copy.deepcopy(
        same["systems"][0]["overall"]["latencies"]["response_first_audio_ms"]
    )
    assert "no clear leader" in duplex_summary(Scorecard.model_validate(same)).sentences[0]


def test_the_report_leads_with_the_summary_and_ends_in_the_recommendation() -> None:
    card = Scorecard.model_validate(_two_agents())
    md = to_markdown(document(card))
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Summary" and headings[-1] == "## Recommendation"
    for group in ("Latency", "Behaviour", "Task", "Side effects", "Subjective"):
        assert f"### {group}" in md
    for part in (
        "## What changed against the baseline",
        "## Scenario distribution",
        "## Key failures",
    ):
        assert part in md
    assert "Metric evidence (VERIFIED / IMPLEMENTED / UNKNOWN)" in md
    html = to_html(document(card))
    assert (
        html.index("id='summary'")
        < html.index("<nav class='toc'>")
        < html.index("id='run-and-evidence'")
    )
