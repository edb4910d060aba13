"""Markdown and HTML views of an ASR report dict (numbers come only from the dict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxeval.core.audio import load_audio, wav_data_uri
from voxeval.core.errors import AudioError
from voxeval.core.runstore import RunStore
from voxeval.report.html import Raw, audio_player, bar_chart, esc, fmt, page, table
from voxeval.report.markdown import md_table

GROUP_HEADERS = [
    "group",
    "name",
    "WER",
    "95% CI",
    "CI unit",
    "S",
    "D",
    "I",
    "ref words",
    "n",
    "failed",
    "CER",
]


def _ci(g: dict[str, Any]) -> str:
    return f"[{fmt(g.get('ci_lo'))}, {fmt(g.get('ci_hi'))}]"


def _group_row(g: dict[str, Any]) -> list[Any]:
    return [
        g.get("group", "overall"),
        g.get("name", "all"),
        g.get("wer"),
        _ci(g),
        g.get("ci_unit"),
        g.get("sub"),
        g.get("del"),
        g.get("ins"),
        g.get("ref_words"),
        g.get("n"),
        g.get("n_failed"),
        g.get("cer"),
    ]


def _systems_summary_rows(report: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for s in report["systems"]:
        o = s["overall"]
        sc = s.get("status_counts", {})
        bad = sum(v for k, v in sc.items() if k not in ("ok", "unscored"))
        rows.append(
            [s["system"], o.get("wer"), _ci(o), o.get("cer"), o.get("n"), bad, o.get("rtfx")]
        )
    return rows


SUMMARY_HEADERS = ["system", "WER", "95% CI", "CER", "n scored", "failed", "RTFx"]


def _conditions_table(report: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    conds = report.get("conditions", [])
    headers = ["system", *conds]
    rows = []
    for s in report["systems"]:
        by = {g["name"]: g for g in s["groups"] if g["group"] == "condition"}
        rows.append([s["system"], *[by.get(c, {}).get("wer") for c in conds]])
    return headers, rows


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: summary, per-condition matrix, groups, rank stability, audits."""
    out = [f"# ASR robustness report `{report['run_id']}`\n"]
    norm = report["normalizer"]
    out.append(
        f"Normalizer `{norm['name']}` ({norm['version']}), metrics `{report['metrics_version']}`, "
        f"{report['n_items']} items. WER is corpus-level (errors / reference words) per group; "
        "CIs are 95 % bootstrap over speakers (utterances without a speaker are their own "
        "cluster; one-speaker groups resample utterances, see CI unit).\n"
    )
    for note in report.get("notes", []):
        out.append(f"> {note}\n")
    out.append("## Systems\n")
    out.append(md_table(SUMMARY_HEADERS, _systems_summary_rows(report)))
    headers, rows = _conditions_table(report)
    out.append("\n## WER per condition\n")
    out.append(md_table(headers, rows))
    for s in report["systems"]:
        out.append(f"\n## {s['system']}\n")
        out.append(
            md_table(
                GROUP_HEADERS,
                [_group_row({"group": "overall", "name": "all", **s["overall"]})]
                + [_group_row(g) for g in s["groups"]],
            )
        )
        fails = s.get("failures", {}).get("by_kind", {})
        if fails:
            out.append(
                "\nNot scored: " + ", ".join(f"{k}: {v}" for k, v in sorted(fails.items())) + "\n"
            )
    out.append("\n## Rank stability\n")
    out.append(_rank_md(report.get("rank_stability", {})))
    out.append("\n## Audits\n")
    for title, text, headers, rows in audit_tables(report.get("audits") or {}):
        out.append(f"\n### {title}\n")
        if text:
            out.append(text + "\n")
        if rows:
            out.append(md_table(headers, rows))
    if report.get("malformed_record_lines"):
        out.append(
            f"\n{len(report['malformed_record_lines'])} malformed record line(s) were skipped.\n"
        )
    return "\n".join(out)


RANK_HEADERS = ["condition", "Kendall tau", "Spearman rho", "systems", "rank shift vs clean"]


def _rank_rows(rs: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            c["condition"],
            c["kendall_tau"],
            c["spearman_rho"],
            c["n_systems"],
            ", ".join(f"{k}: {v:+d}" for k, v in c["rank_shift"].items()),
        ]
        for c in rs["conditions"]
    ]


def _rank_md(rs: dict[str, Any]) -> str:
    if rs.get("status") != "ok":
        return f"Not computed: {rs.get('reason', 'no data')}\n"
    return md_table(RANK_HEADERS, _rank_rows(rs))


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    """Self-contained HTML page: charts as SVG, worst items with alignment and inline audio."""
    return page(f"ASR robustness · {report['run_id']}", render_html_body(report, store))


def render_html_body(report: dict[str, Any], store: RunStore | None = None) -> str:
    """The page body (also used as the ASR section of the combined demo report)."""
    norm = report["normalizer"]
    body = [
        f"<p class='muted'>Run <code>{esc(report['run_id'])}</code> · normalizer <code>{esc(norm['name'])}</code> "
        f"({esc(norm['version'])}) · metrics <code>{esc(report['metrics_version'])}</code> · "
        f"{report['n_items']} items · generated {esc(report.get('generated_at'))}</p>",
        "<p>WER is corpus-level per group (sum of errors / sum of reference words after normalization); "
        "95 % CIs are bootstrap over speakers (an utterance without a speaker counts as its own cluster; "
        "a group with one speaker resamples that speaker's utterances, see the CI unit column). "
        "Failed items are counted and kept out of the denominators, never scored as zero.</p>",
    ]
    body += [f"<div class='note'>{esc(n)}</div>" for n in report.get("notes", [])]
    body.append("<h2>Systems</h2>" + table(SUMMARY_HEADERS, _systems_summary_rows(report)))
    conds = report.get("conditions", [])
    series = []
    for s in report["systems"]:
        by = {g["name"]: g for g in s["groups"] if g["group"] == "condition"}
        series.append(
            (
                s["system"],
                [
                    (
                        by.get(c, {}).get("wer"),
                        by.get(c, {}).get("ci_lo"),
                        by.get(c, {}).get("ci_hi"),
                    )
                    for c in conds
                ],
            )
        )
    body.append("<h2>WER per condition</h2>")
    body.append(bar_chart(conds, series, x_label="WER (95 % CI)"))
    headers, rows = _conditions_table(report)
    body.append(table(headers, rows))
    for key in report.get("group_keys", []):
        if key == "condition":
            continue
        names: list[str] = []
        for s in report["systems"]:
            for g in s["groups"]:
                if g["group"] == key and g["name"] not in names:
                    names.append(g["name"])
        if len(names) < 2:
            continue
        ser = []
        for s in report["systems"]:
            by = {g["name"]: g for g in s["groups"] if g["group"] == key}
            ser.append(
                (
                    s["system"],
                    [
                        (
                            by.get(n, {}).get("wer"),
                            by.get(n, {}).get("ci_lo"),
                            by.get(n, {}).get("ci_hi"),
                        )
                        for n in names
                    ],
                )
            )
        body.append(f"<h3>WER by {esc(key)}</h3>" + bar_chart(names, ser, x_label="WER (95 % CI)"))
    body.append("<h2>Rank stability</h2>" + _rank_html(report.get("rank_stability", {})))
    body.append("<h2>Audits</h2>" + _audits_html(report.get("audits") or {}))
    for s in report["systems"]:
        body.append(f"<h2>{esc(s['system'])}</h2>")
        load = s.get("load") or {}
        if load:
            body.append(
                f"<p class='muted'>load {fmt(load.get('load_s'))} s · warm-up {fmt(load.get('warmup_s'))} s · "
                f"RTFx {fmt(s['overall'].get('rtfx'), 1)} (audio s / compute s, model load excluded)</p>"
            )
        rows = [_group_row({"group": "overall", "name": "all", **s["overall"]})] + [
            _group_row(g) for g in s["groups"]
        ]
        body.append(table(GROUP_HEADERS, rows, left=2))
        fails = s.get("failures", {})
        if fails.get("by_kind"):
            body.append("<h3>Not scored</h3>")
            body.append(
                table(
                    ["id", "status", "kind", "message"],
                    [
                        [e.get("id"), e.get("status"), e.get("kind"), e.get("message")]
                        for e in fails.get("examples", [])
                    ],
                    left=4,
                )
            )
        if s.get("worst_items"):
            body.append("<h3>Worst items</h3>")
            rows2 = []
            for w in s["worst_items"]:
                rows2.append(
                    [
                        w["id"],
                        w["condition"],
                        w["errors"],
                        w["ref_words"],
                        Raw(_alignment_html(w["alignment"])),
                        Raw(_player(w.get("audio_filepath"), store)),
                    ]
                )
            body.append(
                table(
                    ["id", "condition", "errors", "ref words", "alignment (ref → hyp)", "audio"],
                    rows2,
                    left=2,
                )
            )
    return "".join(body)


def _player(path: str | None, store: RunStore | None) -> str:
    if not path:
        return ""
    p = Path(path)
    if not p.is_absolute() and store is not None:
        p = store.path / p
    try:
        return audio_player(wav_data_uri(load_audio(p, sr=None), max_seconds=20))
    except AudioError as exc:
        return f"<span class='muted'>{esc(exc)}</span>"


def _alignment_html(alignment: list[Any]) -> str:
    parts = []
    for op, ref, hyp in alignment:
        if op == "ok":
            parts.append(esc(ref))
        elif op == "sub":
            parts.append(f"<span class='sub' title='substitution'>{esc(ref)}→{esc(hyp)}</span>")
        elif op == "del":
            parts.append(f"<span class='del' title='deletion'>{esc(ref)}</span>")
        elif op == "ins":
            parts.append(f"<span class='ins' title='insertion'>+{esc(hyp)}</span>")
        else:
            parts.append(
                f"<span class='merge' title='compound, no cost'>{esc(ref)}≈{esc(hyp)}</span>"
            )
    return "<span class='align'>" + " ".join(parts) + "</span>"


def _rank_html(rs: dict[str, Any]) -> str:
    if rs.get("status") != "ok":
        return f"<p class='muted'>Not computed: {esc(rs.get('reason', 'no data'))}</p>"
    return f"<p>{esc(rs.get('note', ''))}</p>" + table(RANK_HEADERS, _rank_rows(rs), left=1)


def _audits_html(audits: dict[str, Any]) -> str:
    out = []
    for title, text, headers, rows in audit_tables(audits):
        out.append(f"<h3>{esc(title)}</h3>")
        if text:
            out.append(f"<p>{esc(text)}</p>")
        if rows:
            out.append(table(headers, rows))
    return "".join(out) or "<p class='muted'>No audits.</p>"


AUDIT_TITLES = {
    "consensus": "Consensus dissent",
    "masking": "Audio masking",
    "orthographic": "Orthographic switch",
    "synthetic": "Synthetic speech gap",
}
AUDIT_COLUMNS = {
    "consensus": [
        "system",
        "items",
        "dissent_points",
        "reproduced",
        "rate",
        "ci_lo",
        "ci_hi",
        "followed_consensus",
        "agreement_elsewhere",
        "flagged",
    ],
    "masking": ["system", "n", "heard", "rate", "ci_lo", "ci_hi", "n_skipped"],
    "synthetic": ["system", "n", "wer_real", "wer_synth", "gap", "ci_lo", "ci_hi", "p_value"],
}


def audit_tables(audits: dict[str, Any]) -> list[tuple[str, str, list[str], list[list[Any]]]]:
    """(title, text, headers, rows) per audit, shared by the Markdown and HTML views."""
    out: list[tuple[str, str, list[str], list[list[Any]]]] = []
    for name, title in AUDIT_TITLES.items():
        audit = audits.get(name)
        if not isinstance(audit, dict):
            continue
        if audit.get("status") != "ok":
            out.append((title, f"Not run: {audit.get('reason', audit.get('status'))}", [], []))
            continue
        text = str(audit.get("formula") or "")
        if audit.get("rule"):
            text += f" Rule: {audit['rule']}."
        systems = audit.get("systems") or []
        if name == "orthographic":
            headers = [
                "system",
                "convention",
                "reference arm",
                "n",
                "followed",
                "rate",
                "ci_lo",
                "ci_hi",
                "switch index",
            ]
            rows = []
            for srow in systems:
                for conv, c in (srow.get("conventions") or {}).items():
                    for arm, a in (c.get("arms") or {}).items():
                        if a.get("n"):
                            rows.append(
                                [
                                    srow["system"],
                                    conv,
                                    arm,
                                    a["n"],
                                    a["followed"],
                                    a["rate"],
                                    a["ci_lo"],
                                    a["ci_hi"],
                                    c.get("switch_index"),
                                ]
                            )
            out.append((title, text, headers, rows))
            continue
        cols = AUDIT_COLUMNS[name]
        out.append((title, text, cols, [[srow.get(c) for c in cols] for srow in systems]))
    return out
