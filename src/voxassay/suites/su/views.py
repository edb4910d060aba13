"""The document of a speech-understanding report: per task the accuracy of every system with
its Wilson interval, AUC/EER where scores exist, the confusion matrices, the paired
segmented-vs-merged comparison; the summary names the leader per task and how each model
stands against the specialist line."""

from __future__ import annotations

from typing import Any

from voxassay.core.runstore import RunStore
from voxassay.report.document import Document, Section, Summary, Table, Text
from voxassay.report.html import ci_text, fmt
from voxassay.report.render import to_html, to_markdown
from voxassay.report.summary import (
    Estimate,
    ProfileEntry,
    display_names,
    leader_sentence,
    short_name,
)

__all__ = ["document", "profile", "render_html", "render_markdown", "summary"]

TASK_HEADERS = ["system", "kind", "accuracy", "95% CI", "n", "unparseable", "failed", "AUC", "EER"]


def _ci(lo: Any, hi: Any) -> str:
    return ci_text(lo, hi)


def summary(report: dict[str, Any]) -> Summary:
    """Per task: who leads on accuracy (no clear leader when the intervals overlap) and the
    specialist line: each other system's accuracy minus the best specialist's."""
    names = display_names([s["system"] for s in report["systems"]])
    sentences = []
    rows = []
    unmeasured: list[str] = []
    for t in report["tasks"]:
        blocks = [(s, s["tasks"].get(t["task"])) for s in report["systems"]]
        blocks = [(s, b) for s, b in blocks if b]
        ests = [
            Estimate(names[s["system"]], b.get("accuracy"), b.get("ci_lo"), b.get("ci_hi"))
            for s, b in blocks
        ]
        if not any(e.usable for e in ests):
            unmeasured.append(t["title"])
            continue
        sentences.append(leader_sentence(f"{t['title']} accuracy", ests, lower_is_better=False))
        specs = [
            (s, b) for s, b in blocks if s["kind"] == "specialist" and b.get("accuracy") is not None
        ]
        others = [
            (s, b) for s, b in blocks if s["kind"] != "specialist" and b.get("accuracy") is not None
        ]
        if specs and others:
            line_s, line_b = max(specs, key=lambda sb: float(sb[1]["accuracy"]))
            gaps = ", ".join(
                f"{names[s['system']]} {100 * (float(b['accuracy']) - float(line_b['accuracy'])):+.1f} points"
                for s, b in others
            )
            sentences.append(
                f"Against the specialist line on {t['title']} ({names[line_s['system']]} "
                f"{fmt(line_b['accuracy'])}): {gaps}."
            )
        elif blocks and not specs:
            sentences.append(f"{t['title']}: no specialist ran, so there is no specialist line.")
        for s, b in blocks:
            rows.append(
                [
                    t["title"],
                    names[s["system"]],
                    s["kind"],
                    b.get("accuracy"),
                    _ci(b.get("ci_lo"), b.get("ci_hi")),
                    b.get("n"),
                ]
            )
    if unmeasured:
        sentences.append(f"Nothing measured on: {', '.join(unmeasured)}.")
    return Summary(
        sentences[:5],
        Table(["task", "system", "kind", "accuracy", "95% CI", "n"], rows, left=3),
    )


def document(report: dict[str, Any], store: RunStore | None = None) -> Document:
    doc = Document(
        title=f"Speech understanding · {report['run_id']}",
        summary=summary(report),
        meta=f"Prompts {report['prompts_version']}, parser {report['parser_version']}, metrics "
        f"{report['metrics_version']}",
    )
    doc.section("Method", Text(f"{report['method']}."))
    for t in report["tasks"]:
        sec = doc.section(
            f"{t['title']} ({t['task']})",
            Text(f"{t['n_test_items']} test items, {t['n_calibration_items']} calibration."),
            *(Text(n, "note") for n in t["notes"]),
        )
        rows = []
        for s in report["systems"]:
            b = s["tasks"].get(t["task"])
            if not b:
                continue
            rows.append(
                [
                    s["system"],
                    s["kind"],
                    b.get("accuracy"),
                    _ci(b.get("ci_lo"), b.get("ci_hi")),
                    b.get("n"),
                    b.get("n_unparseable"),
                    b.get("n_failed"),
                    b.get("auc"),
                    b.get("eer"),
                ]
            )
            conf = b.get("confusion")
            if conf and len(conf["labels"]) <= 12:
                sec.sub(
                    f"Confusion · {s['system']}",
                    Table(
                        ["truth \\ answer", *conf["labels"]],
                        [
                            [lab, *row]
                            for lab, row in zip(conf["labels"], conf["matrix"], strict=True)
                        ],
                    ),
                )
        if rows:
            sec.blocks.append(Table(TASK_HEADERS, rows, left=2))
    if report["paired_variants"]:
        doc.section(
            "Segmented vs merged (paired, same pairs)",
            Table(
                ["system", "family", "segmented", "merged", "diff", "95% CI", "n"],
                [
                    [
                        p["system"],
                        p["family"],
                        p["a"],
                        p["b"],
                        p["diff"],
                        _ci(p["ci_lo"], p["ci_hi"]),
                        p["n"],
                    ]
                    for p in report["paired_variants"]
                ],
                left=2,
            ),
        )
    notes = []
    for s in report["systems"]:
        if s.get("score_meaning"):
            notes.append(f"{s['system']} score: {s['score_meaning']}.")
        notes += [
            f"unparseable {s['system']} {ex['id']}: {ex['reason']}"
            for ex in s["unparseable_examples"]
        ]
    if notes:
        from voxassay.report.document import Sentences

        doc.sections.append(Section("Notes", [Sentences(notes)]))
    return doc


def render_markdown(report: dict[str, Any]) -> str:
    return to_markdown(document(report))


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    return to_html(document(report, store))


def profile(report: dict[str, Any]) -> list[ProfileEntry]:
    """SU's cells of the capability profile: accuracy per task (Wilson intervals)."""
    return [
        ProfileEntry(
            "SU",
            short_name(s["system"]),
            f"{t['title']} accuracy",
            b.get("accuracy"),
            b.get("ci_lo"),
            b.get("ci_hi"),
            b.get("n"),
        )
        for t in report["tasks"]
        for s in report["systems"]
        if (b := s["tasks"].get(t["task"]))
    ]
