"""The report document model: a report is a title, a summary and sections of typed blocks.

Every suite's views build a ``Document``; ``report.render`` turns it into Markdown, HTML or
JUnit, so the formats show the same content and cannot drift. Blocks: ``Text`` (a paragraph,
a note or a muted line), ``Sentences`` (findings as a list), ``Table``, ``Chart`` and
``Timeline`` (inline SVG, with a text equivalent for Markdown), ``Players`` (audio clips,
embedded, linked or left out by the audio policy), ``Verdict`` (a recommendation with its
checks; JUnit renders these), ``Code`` (preformatted text).

A ``Document`` cannot be built without its ``Summary``: what the report found, in a headline
table and a few sentences computed from the numbers, is always its first section.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "Block",
    "Chart",
    "Clip",
    "Code",
    "Document",
    "Link",
    "Players",
    "Rich",
    "Section",
    "Sentences",
    "Summary",
    "Table",
    "Text",
    "Timeline",
    "Verdict",
    "VerdictCheck",
    "slug",
]


@dataclass(frozen=True)
class Link:
    """A table cell or sentence part that links somewhere (a file beside the report, an anchor)."""

    text: str
    href: str


@dataclass(frozen=True)
class Rich:
    """A table cell with markup: ``html`` (already escaped) for the page, ``text`` elsewhere."""

    text: str
    html: str


@dataclass
class Text:
    text: str
    style: Literal["p", "note", "muted"] = "p"


@dataclass
class Sentences:
    """Findings stated as sentences (a bulleted list)."""

    items: list[str]


@dataclass
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    left: int = 1
    """How many leading columns are text (left-aligned)."""
    caption: str = ""
    shade: Sequence[Sequence[float | None]] | None = None
    """Per cell a score in [0, 1] the HTML colours from red (0) to green (1); None: plain."""


@dataclass
class Chart:
    """An inline SVG picture; ``text`` says what it shows where no picture can be drawn."""

    svg: str
    caption: str = ""
    text: str = ""


@dataclass
class Timeline(Chart):
    """A timeline of one session or call (lanes of speech, markers of events)."""


@dataclass
class Clip:
    """One audio clip: ``load`` returns (samples, sample rate), samples shaped (n,) or
    (n, channels); ``priority`` orders clips for the inline budget (0: a failing or worst
    item, embedded first); ``key`` names its file when linked."""

    label: str
    key: str
    load: Callable[[], tuple[np.ndarray, int]]
    priority: int = 1
    note: str = ""


@dataclass
class Players:
    clips: list[Clip]
    caption: str = ""
    private: str = ""
    """Why these clips must not be embedded or linked (recordings, production shadow or
    redacted sessions); empty: the report's audio policy decides."""


@dataclass
class VerdictCheck:
    """One check behind a verdict: a JUnit testcase."""

    name: str
    status: Literal["pass", "fail", "error", "skipped"]
    message: str = ""
    detail: str = ""
    """The body of a failure (JUnit ``<failure>`` text)."""
    kind: str = ""
    """The failure or error ``type`` (e.g. fail, regression, insufficient_n)."""
    output: str = ""
    """What the check looked at (JUnit ``system-out`` of the testcase)."""


@dataclass
class Verdict:
    """A decision and why: ``subject`` (a system) gets ``recommendation``; ``checks`` are the
    gates (JUnit testcases), ``mitigations`` what to do meanwhile."""

    subject: str
    recommendation: str
    reasons: list[str] = field(default_factory=list)
    mitigations: list[str] = field(default_factory=list)
    checks: list[VerdictCheck] = field(default_factory=list)
    suite: str = ""
    """The JUnit testsuite name (the matrix id)."""
    properties: dict[str, str] = field(default_factory=dict)
    timestamp: str = ""
    classname: str = ""
    """JUnit testcase class name (default ``voxassay.<suite>``)."""


@dataclass
class Code:
    text: str


Block = Text | Sentences | Table | Chart | Players | Verdict | Code


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    anchor: str = ""

    def add(self, *blocks: Block | None) -> Section:
        """Append the blocks that are not None; returns the section."""
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def sub(self, title: str, *blocks: Block | None) -> Section:
        """A child section (h3 under this h2) with these blocks; returns the child."""
        child = Section(title).add(*blocks)
        self.children.append(child)
        return child


@dataclass
class Summary:
    """What the report found: 3-5 sentences computed from the numbers and the headline table."""

    sentences: list[str]
    table: Table | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    chart: Chart | None = None
    """A picture of the headline table (the demo's capability profile)."""


@dataclass
class Document:
    title: str
    summary: Summary
    sections: list[Section] = field(default_factory=list)
    meta: str = ""
    """One muted line under the title: run id, metrics version, when."""

    def section(self, title: str, *blocks: Block | None) -> Section:
        """A new top-level section with these blocks; returns it."""
        s = Section(title).add(*blocks)
        self.sections.append(s)
        return s

    def as_section(self, title: str, *lead: Block) -> Section:
        """This document as one section of another (the combined demo report): ``lead``
        blocks, then the summary (verdicts, sentences, table), then the sections as children."""
        s = self.summary
        sec = Section(title).add(*lead, *s.verdicts)
        sec.add(Sentences(list(s.sentences)) if s.sentences else None, s.table, s.chart)
        sec.children.extend(self.sections)
        return sec

    def anchored(self) -> list[Section]:
        """Every section with a unique anchor (set in place), in reading order."""
        seen: set[str] = {"summary"}
        out: list[Section] = []

        def visit(s: Section, prefix: str) -> None:
            base = s.anchor or slug(f"{prefix}{s.title}")
            anchor, k = base, 2
            while anchor in seen:
                anchor, k = f"{base}-{k}", k + 1
            s.anchor = anchor
            seen.add(anchor)
            out.append(s)
            for c in s.children:
                visit(c, f"{anchor}-")

        for s in self.sections:
            visit(s, "")
        return out


def slug(text: str) -> str:
    """An HTML anchor from a title: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "section"
