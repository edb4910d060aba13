"""What gating leaves in the run (``GATE_FILES``): gate.json, the table as text and Markdown, JUnit XML for CI, and the GateReport embedded in report.json."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from voxeval.contracts.duplex.scorecard import (
    Scorecard,
)
from voxeval.suites.duplex.gate_types import (
    PRECEDENCE,
    GateReport,
    GateResult,
    GateStatus,
)
from voxeval.suites.duplex.gates import (
    fmt_value,
)

__all__ = ["GATE_FILES", "render_markdown", "render_text", "write_gate_files", "write_junit"]


def _row_cells(r: GateResult) -> list[str]:
    g = r.gate
    need_level = g.min_evidence
    name = r.source.removeprefix("derived: ").split(".")[-1] if r.source else None
    return [
        g.id,
        g.metric if name in (None, g.metric) else f"{g.metric} = {name}",
        str(g.statistic),
        fmt_value(r.value, g.unit),
        f"{g.comparator} {fmt_value(g.threshold, g.unit)}",
        f"{'–' if r.n is None else r.n}/{g.required_n}",
        f"{r.level or 'none'}/{need_level}",
        str(r.status),
        r.label_text,
    ]


_HEADERS = [
    "gate",
    "metric",
    "stat",
    "measured",
    "threshold",
    "n/need",
    "level/need",
    "status",
    "row",
]


def render_text(report: GateReport) -> str:
    """The terminal view: a table of gates, then the one recommendation and its reasons."""
    rows = [_HEADERS] + [_row_cells(r) for r in report.gates]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines = [
        f"matrix {report.matrix_id} on run {report.run_id} (system {report.system})"
        + (f", baseline {report.baseline_run_id}" if report.baseline_run_id else "")
    ]
    for i, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if report.baseline_run_id:
        lines.append("")
        lines.append("vs baseline (current - baseline):")
        for r in report.gates:
            b = r.baseline
            if b is None:
                continue
            flag = " REGRESSION" if b.regression else " improved" if b.improved else ""
            ci = (
                f" [{fmt_value(b.ci_low)}, {fmt_value(b.ci_high)}]"
                if b.ci_low is not None or b.ci_high is not None
                else ""
            )
            lines.append(
                f"  {r.gate.id}: {fmt_value(b.diff, r.gate.unit)}{ci} {b.direction}{flag}"
                + (f" ({b.note})" if b.note else "")
            )
    lines.append("")
    lines.append(f"recommendation: {report.recommendation}")
    lines += [f"  - {x}" for x in report.reasons]
    return "\n".join(lines)


def render_markdown(report: GateReport) -> str:
    """``gate.md``: the gate table, the recommendation, and each gate's checks."""
    from voxeval.report.markdown import md_table

    out = [
        f"# Acceptance gates: {report.matrix_id}\n",
        f"Run `{report.run_id}`, system `{report.system}`"
        + (f", baseline `{report.baseline_run_id}`" if report.baseline_run_id else "")
        + f". Generated {report.generated_at}.\n",
        f"**Recommendation: `{report.recommendation}`** (precedence "
        + " > ".join(str(p) for p in PRECEDENCE)
        + "; exit code "
        + str(report.exit_code)
        + ")\n",
    ]
    out += [f"- {x}" for x in report.reasons]
    out.append("")
    out.append(md_table(_HEADERS, [_row_cells(r) for r in report.gates]))
    if report.baseline_run_id:
        rows = []
        for r in report.gates:
            b = r.baseline
            if b is None:
                continue
            rows.append(
                [
                    r.gate.id,
                    fmt_value(b.current, r.gate.unit),
                    fmt_value(b.baseline, r.gate.unit),
                    fmt_value(b.diff, r.gate.unit),
                    f"[{fmt_value(b.ci_low)}, {fmt_value(b.ci_high)}]",
                    b.direction,
                    "yes" if b.regression else "no" if b.regression is False else "–",
                    b.method + (f"; {b.note}" if b.note else ""),
                ]
            )
        out.append("\n## Against the baseline (current - baseline)\n")
        out.append(
            md_table(
                [
                    "gate",
                    "current",
                    "baseline",
                    "diff",
                    "95% CI",
                    "direction",
                    "regression",
                    "method",
                ],
                rows,
            )
        )
    out.append("\n## Gates\n")
    for r in report.gates:
        out.append(f"### {r.gate.id}: {r.status}\n")
        if r.gate.description:
            out.append(r.gate.description + "\n")
        for c in [*r.preconditions, *([r.evidence] if r.evidence else [])]:
            mark = "ok" if c.ok else "not checked" if c.ok is None else "NOT MET"
            out.append(f"- {c.name}: {mark}: {c.detail}")
        for reason in r.reasons:
            out.append(f"- reason: {reason}")
        out.append("")
    return "\n".join(out)


GATE_FILES = ("gate.json", "gate.md", "gate.txt", "gate.junit.xml")
"""What gating a run leaves in it, whichever command gated it (``duplex gate``, ``duplex run
--matrix``): the GateReport, its table for people, its text, and JUnit XML for CI."""


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_gate_files(report: GateReport, run_dir: str | Path) -> Path:
    """Write ``GATE_FILES`` into the gated run's folder and embed the GateReport under
    ``gate`` in its report.json (the Scorecard); returns the folder."""
    run = Path(run_dir)
    record = report.to_record()
    body = record.dump()
    _atomic_write(run / "gate.json", json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    _atomic_write(run / "gate.md", render_markdown(report))
    _atomic_write(run / "gate.txt", render_text(report) + "\n")
    write_junit(report, run / "gate.junit.xml")
    path = run / "report.json"
    if path.is_file():
        card = Scorecard.model_validate_json(path.read_bytes())
        card.gate = record
        _atomic_write(path, json.dumps(card.dump(), indent=1, ensure_ascii=False) + "\n")
    return run


def write_junit(report: GateReport, path: str | Path) -> Path:
    """JUnit XML for CI (Jenkins, GitLab): ``<testsuites>`` holding one ``<testsuite>`` named
    after the matrix, one ``<testcase>`` per gate. A failed gate (or a decisive regression) is
    a ``<failure>``; insufficient_n, insufficient_evidence and unknown are ``<error>`` (CI goes
    red: nothing was shown to pass), or ``<skipped>`` when the matrix allows incomplete gates;
    the reason is the message; passes are empty testcases. The recommendation is a suite property
    and the suite's ``system-out``."""
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    suite_name = report.matrix_id
    cases = []
    for r in report.gates:
        case = ET.Element(
            "testcase",
            {"name": r.gate.id, "classname": f"voxeval.duplex.gate.{suite_name}", "time": "0"},
        )
        summary = "; ".join(r.reasons) or str(r.status)
        if r.status == GateStatus.FAIL or r.decisive_regression:
            counts["failures"] += 1
            kind = "fail" if r.status == GateStatus.FAIL else "regression"
            failure = ET.SubElement(case, "failure", {"message": summary, "type": kind})
            failure.text = "\n".join(
                [f"on_fail: {r.gate.on_fail}", *(f"{c.name}: {c.detail}" for c in r.preconditions)]
            )
        elif r.status != GateStatus.PASS:
            kind = "skipped" if report.allow_incomplete else "error"
            counts["skipped" if kind == "skipped" else "errors"] += 1
            attrs = {"message": f"{r.status}: {summary}"}
            if kind == "error":
                attrs["type"] = str(r.status)
            ET.SubElement(case, kind, attrs)
        out = ET.SubElement(case, "system-out")
        out.text = f"{r.gate.metric} ({r.label_text}); " + "; ".join(
            f"{c.name}={'ok' if c.ok else 'not checked' if c.ok is None else 'NOT MET'}"
            for c in [*r.preconditions, *([r.evidence] if r.evidence else [])]
        )
        cases.append(case)
    attrs = {
        "tests": str(len(cases)),
        "failures": str(counts["failures"]),
        "errors": str(counts["errors"]),
        "skipped": str(counts["skipped"]),
        "time": "0",
    }
    root = ET.Element("testsuites", {"name": "voxeval duplex gate", **attrs})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": suite_name, "timestamp": report.generated_at.rstrip("Z"), **attrs},
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("recommendation", str(report.recommendation)),
        ("run_id", report.run_id or ""),
        ("system", report.system or ""),
        ("baseline_run_id", report.baseline_run_id or ""),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    suite.extend(cases)
    sysout = ET.SubElement(suite, "system-out")
    sysout.text = "\n".join([f"recommendation: {report.recommendation}", *report.reasons])
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    ET.ElementTree(root).write(target, encoding="utf-8", xml_declaration=True)
    return target
