"""The report document model and its interpreters: the same content in Markdown and HTML,
the summary first, contents that link, verdicts as JUnit, and audio within the page budget
(real recordings from ../shared/data)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import soundfile as sf

from tests.conftest import shared_data
from voxassay.report.clips import AudioPolicy, encode
from voxassay.report.document import (
    Chart,
    Clip,
    Document,
    Players,
    Sentences,
    Summary,
    Table,
    Text,
    Verdict,
    VerdictCheck,
)
from voxassay.report.render import to_html, to_html_body, to_junit, to_markdown


def _doc(clips: list[Clip] | None = None, private: str = "") -> Document:
    doc = Document(
        title="A report",
        summary=Summary(
            sentences=["System b leads on WER.", "No clear leader on speed."],
            table=Table(["system", "wer"], [["a", 0.1], ["b", 0.05]]),
            verdicts=[
                Verdict(
                    "agent",
                    "keep_in_shadow",
                    ["stop-p95 failed"],
                    ["stop-p95: flush playback on any user speech"],
                    [
                        VerdictCheck("stop-p95", "fail", "p95 929 ms > 400 ms", kind="fail"),
                        VerdictCheck("first-audio", "pass"),
                        VerdictCheck("bc-rate", "error", "insufficient_n", kind="insufficient_n"),
                    ],
                    suite="matrix-1",
                )
            ],
        ),
        meta="run r1",
    )
    sec = doc.section("Per condition", Table(["condition", "wer", "n"], [["clean", 0.1, 20]]))
    sec.sub("Confusion", Table(["expected", "yield", "continue"], [["yield", 3, 1]]))
    doc.section(
        "Picture", Chart("<svg xmlns='http://www.w3.org/2000/svg'></svg>", "bars", "a beats b")
    )
    doc.section("Findings", Sentences(["one", "two"]), Text("careful", "note"))
    if clips:
        doc.section("Audio", Players(clips, caption="clips", private=private))
    return doc


def test_markdown_and_html_hold_the_same_sections_and_tables() -> None:
    doc = _doc()
    md, html = to_markdown(doc), to_html(doc)
    for title in ("Summary", "Per condition", "Confusion", "Picture", "Findings"):
        assert f"## {title}" in md or f"### {title}" in md
        assert f">{title}</h" in html
    for header in ("condition", "expected", "system"):
        assert f"| {header} |" in md and f">{header}</th>" in html
    # the summary comes first in both, its verdict and sentences included
    assert md.index("## Summary") < md.index("## Per condition")
    assert html.index("id='summary'") < html.index("id='per-condition'")
    assert "Recommendation for agent: keep in shadow" in md and "keep in shadow" in html
    assert "mitigation: stop-p95: flush playback" in md
    assert "a beats b" in md  # the chart's text stands in where Markdown has no picture


def test_contents_link_to_every_section() -> None:
    html = to_html(_doc())
    nav = re.search(r"<nav class='toc'>(.*?)</nav>", html, re.S)
    assert nav is not None
    targets = re.findall(r"href='#([^']+)'", nav.group(1))
    ids = set(re.findall(r"id='([^']+)'", html))
    assert targets and all(t in ids for t in targets)
    assert "per-condition-confusion" in targets  # nested sections are listed too


def test_verdicts_render_as_junit() -> None:
    root = ET.fromstring(to_junit(_doc(), "ci").split("\n", 1)[1])
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "matrix-1"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["stop-p95"].find("failure") is not None
    assert cases["bc-rate"].find("error").get("type") == "insufficient_n"
    assert cases["first-audio"].find("failure") is None
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["recommendation"] == "keep_in_shadow" and root.get("tests") == "3"


def _speech_clips(n: int) -> list[Clip]:
    data = shared_data()
    files = sorted((data / "read_speech" / "ljspeech").glob("*.wav"))[:n]
    assert len(files) == n

    def loader(path: Path):  # type: ignore[no-untyped-def]
        return lambda: sf.read(str(path), dtype="float32")

    return [
        Clip(label=f.stem, key=f"clip-{i}", load=loader(f), priority=0 if i == n - 1 else 1)
        for i, f in enumerate(files)
    ]


def test_opus_clips_are_small_and_keep_their_duration() -> None:
    data = shared_data()
    path = sorted((data / "read_speech" / "ljspeech").glob("*.wav"))[0]
    x, sr = sf.read(str(path), dtype="float32")
    opus, dur = encode(x, sr, "opus")
    assert abs(dur - len(x) / sr) < 0.01
    kbps = len(opus) * 8 / dur / 1000
    assert 12 < kbps < 40, kbps  # about 24 kbit/s
    flac, _ = encode(x, sr, "flac")
    assert len(flac) > 3 * len(opus)
    back, back_sr = sf.read(__import__("io").BytesIO(opus), dtype="float32")
    assert abs(len(back) / back_sr - dur) < 0.1  # decodes to the same length


def test_inline_audio_stays_within_the_page_budget_and_links_the_rest(tmp_path: Path) -> None:
    clips = _speech_clips(8)
    budget = 200_000  # a small page: the eight clips cannot all be embedded
    policy = AudioPolicy(mode="inline", page_budget=budget, out_dir=tmp_path)
    body, plan = to_html_body(_doc(clips), policy)
    assert len(body.encode()) <= budget
    assert plan.inline and plan.linked and not plan.left_out
    assert "clip-7" in plan.inline  # the most important clip is embedded first
    for rel in plan.linked.values():
        assert (tmp_path / rel).is_file() and rel.endswith(".opus.ogg")
        assert f"src='{rel}'" in body
    assert plan.summary() in body  # the page says what it embedded and linked
    none_body, none_plan = to_html_body(_doc(clips), AudioPolicy(mode="none"))
    assert "<audio" not in none_body and len(none_plan.left_out) == 8
    assert "audio left out (--audio none)" in none_body


def test_private_clips_are_left_out_unless_asked_for(tmp_path: Path) -> None:
    clips = _speech_clips(2)
    body, plan = to_html_body(_doc(clips, private="a recording (privacy)"), AudioPolicy())
    assert "<audio" not in body and set(plan.left_out.values()) == {"a recording (privacy)"}
    asked = AudioPolicy(mode="link", explicit=True, out_dir=tmp_path)
    body, plan = to_html_body(_doc(clips, private="a recording (privacy)"), asked)
    assert body.count("<audio") == 2 and len(plan.linked) == 2
    md = to_markdown(_doc(clips), plan)
    assert all(f"]({rel})" in md for rel in plan.linked.values())


def test_a_silent_clip_still_encodes() -> None:
    data, dur = encode(np.zeros(16000, dtype=np.float32), 16000)
    assert data[:4] == b"OggS" and abs(dur - 1.0) < 1e-6


def test_a_new_rendering_removes_the_clips_an_earlier_one_linked(tmp_path: Path) -> None:
    from voxassay.report.render import write_document

    clips = _speech_clips(2)
    write_document(_doc(clips), tmp_path, AudioPolicy(mode="link", out_dir=tmp_path))
    assert len(list((tmp_path / "report_audio").iterdir())) == 2
    paths = write_document(_doc(clips), tmp_path, AudioPolicy(mode="none", out_dir=tmp_path))
    assert not list((tmp_path / "report_audio").iterdir())
    assert "<audio" not in paths["html"].read_text()
