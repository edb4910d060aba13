"""What gating leaves in the run (``GATE_FILES``): gate.json, the table as text and Markdown, JUnit XML for CI, and the GateReport embedded in report.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from voxassay.contracts.duplex.scorecard import (
    Scorecard,
)
from voxassay.report.document import Document, Summary, Verdict, VerdictCheck
from voxassay.report.render import to_junit
from voxassay.suites.duplex.gate_types import (
    PRECEDENCE,
    GateReport,
    GateResult,
    GateStatus,
)
from voxassay.suites.duplex.gates import (
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
    from voxassay.report.markdown import md_table

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


def gate_document(report: GateReport) -> Document:
    """The GateReport as a one-verdict document (what ``write_junit`` renders)."""
    checks = []
    for r in report.gates:
        summary = "; ".join(r.reasons) or str(r.status)
        output = f"{r.gate.metric} ({r.label_text}); " + "; ".join(
            f"{c.name}={'ok' if c.ok else 'not checked' if c.ok is None else 'NOT MET'}"
            for c in [*r.preconditions, *([r.evidence] if r.evidence else [])]
        )
        if r.status == GateStatus.FAIL or r.decisive_regression:
            checks.append(
                VerdictCheck(
                    r.gate.id,
                    "fail",
                    summary,
                    "\n".join(
                        [f"on_fail: {r.gate.on_fail}"]
                        + ([f"mitigation: {r.gate.mitigation}"] if r.gate.mitigation else [])
                        + [f"{c.name}: {c.detail}" for c in r.preconditions]
                    ),
                    "fail" if r.status == GateStatus.FAIL else "regression",
                    output,
                )
            )
        elif r.status != GateStatus.PASS:
            checks.append(
                VerdictCheck(
                    r.gate.id,
                    "skipped" if report.allow_incomplete else "error",
                    f"{r.status}: {summary}",
                    "",
                    str(r.status),
                    output,
                )
            )
        else:
            checks.append(VerdictCheck(r.gate.id, "pass", output=output))
    verdict = Verdict(
        subject=report.system or "",
        recommendation=str(report.recommendation),
        reasons=list(report.reasons),
        checks=checks,
        suite=report.matrix_id,
        properties={
            "run_id": report.run_id or "",
            "system": report.system or "",
            "baseline_run_id": report.baseline_run_id or "",
        },
        timestamp=report.generated_at.rstrip("Z"),
        classname=f"voxassay.duplex.gate.{report.matrix_id}",
    )
    return Document(
        title="voxassay duplex gate",
        summary=Summary(sentences=[], verdicts=[verdict]),
    )


def write_junit(report: GateReport, path: str | Path) -> Path:
    """JUnit XML for CI (Jenkins, GitLab) of ``gate_document``: one ``<testsuite>`` named
    after the matrix, one ``<testcase>`` per gate. A failed gate (or a decisive regression) is
    a ``<failure>``; insufficient_n, insufficient_evidence and unknown are ``<error>`` (CI goes
    red: nothing was shown to pass), or ``<skipped>`` when the matrix allows incomplete gates;
    the reason is the message; passes are empty testcases. The recommendation is a suite
    property and the suite's ``system-out``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(to_junit(gate_document(report), "voxassay duplex gate"), encoding="utf-8")
    return target
