"""Interpreters of the report document model (``report.document``): Markdown, HTML, JUnit.

Each block type has one rendering per format; a report's formats differ only where a format
cannot show a thing (Markdown has no SVG: a chart's text equivalent stands in; audio is
linked or counted).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from voxassay.report.clips import CLIP_DIR, AudioPolicy, ClipPlan, plan_clips
from voxassay.report.document import (
    Block,
    Chart,
    Code,
    Document,
    Link,
    Players,
    Rich,
    Section,
    Sentences,
    Summary,
    Table,
    Text,
    Verdict,
)
from voxassay.report.html import esc, fmt, page, table
from voxassay.report.markdown import md_table

__all__ = ["to_html", "to_html_body", "to_junit", "to_markdown"]

RECOMMENDATION_WORDS = {
    "ship": "ship",
    "keep_in_shadow": "keep in shadow",
    "roll_back": "roll back",
    "collect_more_data": "collect more data",
}

# --------------------------------------------------------------------------- Markdown


def _md_cell(v: Any) -> Any:
    if isinstance(v, Rich):
        return v.text
    return f"[{v.text}]({v.href})" if isinstance(v, Link) else v


def _md_block(b: Block, plan: ClipPlan | None) -> list[str]:
    if isinstance(b, Text):
        return [
            f"> {b.text}" if b.style == "note" else f"_{b.text}_" if b.style == "muted" else b.text,
            "",
        ]
    if isinstance(b, Sentences):
        return [*(f"- {s}" for s in b.items), ""]
    if isinstance(b, Table):
        out = [f"_{b.caption}_", ""] if b.caption else []
        return [*out, md_table(list(b.headers), [[_md_cell(c) for c in r] for r in b.rows])]
    if isinstance(b, Chart):
        text = b.text or "(a picture in report.html)"
        return [f"_{b.caption}_: {text}" if b.caption else text, ""]
    if isinstance(b, Players):
        linked = [(c.label, plan.linked[c.key]) for c in b.clips if plan and c.key in plan.linked]
        if linked:
            return [" · ".join(f"[{label}]({href})" for label, href in linked), ""]
        return [f"_{len(b.clips)} audio clip(s): see report.html_", ""] if b.clips else []
    if isinstance(b, Verdict):
        return _md_verdict(b)
    if isinstance(b, Code):
        return ["```", b.text.rstrip("\n"), "```", ""]
    raise TypeError(f"unknown block {type(b).__name__}")


def _md_verdict(v: Verdict) -> list[str]:
    word = RECOMMENDATION_WORDS.get(v.recommendation, v.recommendation)
    out = [f"**Recommendation for {v.subject}: {word}**", ""]
    out += [f"- {r}" for r in v.reasons]
    out += [f"- mitigation: {m}" for m in v.mitigations]
    return [*out, ""]


def _md_summary(s: Summary) -> list[str]:
    out = ["## Summary", ""]
    for v in s.verdicts:
        out += _md_verdict(v)
    out += [*(f"- {x}" for x in s.sentences), ""]
    if s.table is not None:
        out += _md_block(s.table, None)
    if s.chart is not None:
        out += _md_block(s.chart, None)
    return out


def to_markdown(doc: Document, plan: ClipPlan | None = None) -> str:
    """The document as GitHub-flavoured Markdown: title, summary, then every section."""
    out = [f"# {doc.title}", ""]
    if doc.meta:
        out += [f"_{doc.meta}_", ""]
    out += _md_summary(doc.summary)

    def visit(s: Section, level: int) -> None:
        out.extend([f"{'#' * level} {s.title}", ""])
        for b in s.blocks:
            out.extend(_md_block(b, plan))
        for c in s.children:
            visit(c, min(level + 1, 6))

    for s in doc.sections:
        visit(s, 2)
    return "\n".join(out).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- HTML


def _html_cell(v: Any) -> Any:
    from voxassay.report.html import Raw

    if isinstance(v, Link):
        return Raw(f"<a href='{esc(v.href)}'>{esc(v.text)}</a>")
    if isinstance(v, Rich):
        return Raw(v.html)
    return v


def _html_block(b: Block, plan: ClipPlan) -> str:
    if isinstance(b, Text):
        cls = {"note": " class='note'", "muted": " class='muted'"}.get(b.style, "")
        tag = "div" if b.style == "note" else "p"
        return f"<{tag}{cls}>{esc(b.text)}</{tag}>"
    if isinstance(b, Sentences):
        return "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in b.items) + "</ul>"
    if isinstance(b, Table):
        cap = f"<p class='muted'>{esc(b.caption)}</p>" if b.caption else ""
        rows = [[_html_cell(c) for c in r] for r in b.rows]
        return cap + table(list(b.headers), rows, left=b.left, shade=b.shade)
    if isinstance(b, Chart):
        cap = f"<p class='muted'>{esc(b.caption)}</p>" if b.caption else ""
        return cap + (b.svg or f"<p class='muted'>{esc(b.text)}</p>")
    if isinstance(b, Players):
        return _html_players(b, plan)
    if isinstance(b, Verdict):
        return _html_verdict(b)
    if isinstance(b, Code):
        return f"<pre>{esc(b.text)}</pre>"
    raise TypeError(f"unknown block {type(b).__name__}")


def _html_players(b: Players, plan: ClipPlan) -> str:
    parts = []
    for c in b.clips:
        note = f" <span class='muted'>{esc(c.note)}</span>" if c.note else ""
        if c.key in plan.inline:
            src = plan.inline[c.key]
        elif c.key in plan.linked:
            src = plan.linked[c.key]
        else:
            why = plan.left_out.get(c.key, "not rendered")
            parts.append(f"<span class='muted'>{esc(c.label)}: audio left out ({esc(why)})</span>")
            continue
        dur = plan.durations.get(c.key)
        parts.append(
            f"{esc(c.label)} <audio controls preload='metadata' src='{esc(src)}'"
            + (f" data-duration='{dur:.3f}'" if dur is not None else "")
            + f"></audio>{note}"
        )
    cap = f" <span class='muted'>{esc(b.caption)}</span>" if b.caption else ""
    return f"<p>{' '.join(parts)}{cap}</p>" if parts else ""


def _html_verdict(v: Verdict) -> str:
    word = RECOMMENDATION_WORDS.get(v.recommendation, v.recommendation)
    items = [f"<li>{esc(r)}</li>" for r in v.reasons]
    items += [f"<li><b>mitigation</b>: {esc(m)}</li>" for m in v.mitigations]
    return (
        f"<div class='verdict {esc(v.recommendation)}'><b>Recommendation for {esc(v.subject)}: "
        f"{esc(word)}</b>" + (f"<ul>{''.join(items)}</ul>" if items else "") + "</div>"
    )


def _toc(doc: Document) -> str:
    def item(s: Section) -> str:
        kids = "".join(item(c) for c in s.children)
        return (
            f"<li><a href='#{s.anchor}'>{esc(s.title)}</a>"
            + (f"<ul>{kids}</ul>" if kids else "")
            + "</li>"
        )

    lis = "<li><a href='#summary'>Summary</a></li>" + "".join(item(s) for s in doc.sections)
    return f"<nav class='toc'><b>Contents</b><ul>{lis}</ul></nav>"


def _players(doc: Document) -> Iterator[Players]:
    def visit(s: Section) -> Iterator[Players]:
        for b in s.blocks:
            if isinstance(b, Players):
                yield b
        for c in s.children:
            yield from visit(c)

    for s in doc.sections:
        yield from visit(s)


def to_html_body(doc: Document, policy: AudioPolicy | None = None) -> tuple[str, ClipPlan]:
    """The document's HTML body (summary, contents, sections; no page wrapper) and what
    happened to its audio. Clips are embedded while the page stays within the policy's
    budget, most important first, the rest linked or left out (the page says which)."""
    doc.anchored()
    policy = policy or AudioPolicy()
    clips = [(c, p.private) for p in _players(doc) for c in p.clips]

    def body(plan: ClipPlan) -> str:
        s = doc.summary
        parts = [f"<p class='muted'>{esc(doc.meta)}</p>" if doc.meta else ""]
        parts.append("<section class='summary' id='summary'><h2>Summary</h2>")
        parts += [_html_verdict(v) for v in s.verdicts]
        if s.sentences:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in s.sentences) + "</ul>")
        if s.table is not None:
            parts.append(_html_block(s.table, plan))
        if s.chart is not None:
            parts.append(_html_block(s.chart, plan))
        if clips:
            parts.append(f"<p class='muted'>{esc(plan.summary())}</p>")
        parts.append("</section>")
        parts.append(_toc(doc))

        def visit(sec: Section, level: int) -> None:
            h = min(level, 6)
            parts.append(f"<h{h} id='{esc(sec.anchor)}'>{esc(sec.title)}</h{h}>")
            parts.extend(_html_block(b, plan) for b in sec.blocks)
            for c in sec.children:
                visit(c, level + 1)

        for sec in doc.sections:
            visit(sec, 2)
        return "".join(parts)

    without_audio = len(body(ClipPlan(left_out={c.key: "pending" for c, _ in clips})).encode())
    plan = plan_clips(clips, policy, without_audio + 4_000)
    return body(plan), plan


def to_html(doc: Document, policy: AudioPolicy | None = None) -> str:
    """A self-contained HTML page of the document (styles inline, charts as SVG)."""
    text, _ = to_html_body(doc, policy)
    return page(doc.title, text)


# --------------------------------------------------------------------------- JUnit


def verdicts(doc: Document) -> list[Verdict]:
    """Every verdict of the document: the summary's, then the sections' in order."""
    found = list(doc.summary.verdicts)

    def visit(s: Section) -> None:
        found.extend(b for b in s.blocks if isinstance(b, Verdict) and b not in found)
        for c in s.children:
            visit(c)

    for s in doc.sections:
        visit(s)
    return found


def to_junit(doc: Document, name: str | None = None) -> str:
    """JUnit XML (Jenkins, GitLab): one ``<testsuite>`` per verdict (named after its suite:
    properties with the recommendation, one ``<testcase>`` per check, ``system-out`` with the
    recommendation and its reasons); fail is ``<failure>``, error ``<error>``, skipped
    ``<skipped>``; the root sums the counts."""
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    suites = []
    for v in verdicts(doc):
        counts = {
            "tests": len(v.checks),
            "failures": sum(1 for c in v.checks if c.status == "fail"),
            "errors": sum(1 for c in v.checks if c.status == "error"),
            "skipped": sum(1 for c in v.checks if c.status == "skipped"),
        }
        attrs = {k: str(n) for k, n in counts.items()} | {"time": "0"}
        suite = ET.Element(
            "testsuite",
            {
                "name": v.suite or v.subject,
                **({"timestamp": v.timestamp} if v.timestamp else {}),
                **attrs,
            },
        )
        props = ET.SubElement(suite, "properties")
        for key, value in {"recommendation": v.recommendation, **v.properties}.items():
            ET.SubElement(props, "property", {"name": key, "value": value})
        for c in v.checks:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "name": c.name,
                    "classname": v.classname or f"voxassay.{v.suite or 'verdict'}",
                    "time": "0",
                },
            )
            tag = {"fail": "failure", "error": "error", "skipped": "skipped"}.get(c.status)
            if tag:
                el_attrs = {"message": c.message}
                if c.kind and tag != "skipped":
                    el_attrs["type"] = c.kind
                el = ET.SubElement(case, tag, el_attrs)
                if c.detail:
                    el.text = c.detail
            if c.output:
                ET.SubElement(case, "system-out").text = c.output
        out = ET.SubElement(suite, "system-out")
        out.text = "\n".join([f"recommendation: {v.recommendation}", *v.reasons])
        suites.append(suite)
        for k in total:
            total[k] += counts[k]
    root = ET.Element(
        "testsuites",
        {"name": name or doc.title, **{k: str(n) for k, n in total.items()}, "time": "0"},
    )
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_document(
    doc: Document, out_dir: Path, policy: AudioPolicy | None = None
) -> dict[str, Path]:
    """report.md and report.html of ``doc`` in ``out_dir`` (linked clips beside them)."""
    policy = policy or AudioPolicy(out_dir=out_dir)
    stale = out_dir / CLIP_DIR
    if stale.is_dir():  # clips of an earlier rendering: this one writes its own
        for old in stale.iterdir():
            if old.is_file():
                old.unlink()
    text, plan = to_html_body(doc, policy)
    paths = {"md": out_dir / "report.md", "html": out_dir / "report.html"}
    paths["html"].write_text(page(doc.title, text), encoding="utf-8")
    paths["md"].write_text(to_markdown(doc, plan), encoding="utf-8")
    return paths


__all__ += ["fmt", "verdicts", "write_document"]
