"""The document of an ASR report dict (numbers come only from the dict): Markdown and HTML
come from it (``report.render``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxassay.core.audio import load_audio
from voxassay.core.runstore import RunStore
from voxassay.report.document import (
    Chart,
    Clip,
    Document,
    Players,
    Rich,
    Section,
    Summary,
    Table,
    Text,
)
from voxassay.report.html import bar_chart, ci_text, esc, fmt
from voxassay.report.leaders import leader_text
from voxassay.report.render import to_html, to_markdown
from voxassay.report.summary import (
    Estimate,
    ProfileEntry,
    display_names,
    leader,
    leader_sentence,
    short_name,
)

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
    return ci_text(g.get("ci_lo"), g.get("ci_hi"))


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


def _group_table(
    report: dict[str, Any], key: str, names: list[str]
) -> tuple[list[str], list[list[Any]]]:
    """Per system, the WER of each ``key`` group (a condition, an age band...) with its 95 %
    interval and n: the table the chart above it draws."""
    headers = ["system", *names]
    rows = []
    for s in report["systems"]:
        by = {g["name"]: g for g in s["groups"] if g["group"] == key}
        cells = []
        for n in names:
            g = by.get(n)
            cells.append(
                "–"
                if not g or g.get("wer") is None
                else f"{fmt(g['wer'])} {ci_text(g.get('ci_lo'), g.get('ci_hi'))} n={g.get('n')}"
            )
        rows.append([s["system"], *cells])
    return headers, rows


RANK_HEADERS = [
    "condition",
    "Kendall tau [95 % CI]",
    "systems",
    "units",
    "rank shift vs clean (share of draws with a change)",
]


def _shift_text(c: dict[str, Any]) -> str:
    shares = c.get("rank_shift_share") or {}
    return ", ".join(
        f"{k}: {v:+d}" + (f" ({shares[k]:.0%})" if k in shares else " (share not estimable)")
        for k, v in (c.get("rank_shift") or {}).items()
    )


def _rank_rows(rs: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            c["condition"],
            f"{fmt(c['kendall_tau'])} {ci_text(c.get('ci_lo'), c.get('ci_hi'))}",
            c["n_systems"],
            c.get("units", "–"),
            _shift_text(c),
        ]
        for c in rs["conditions"]
    ]


def _paired_sentences(
    report: dict[str, Any], leaders: dict[str, Any], names: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The overall sentence and the per-condition leaders from the report's paired leaders."""
    overall = {s["system"]: s["overall"].get("wer") for s in report["systems"]}
    sentences = [leader_text("overall WER", leaders["overall"], names, overall)]
    per_cond = []
    for c in report.get("conditions", []):
        res = (leaders.get("conditions") or {}).get(c)
        if not res or not res.get("vs"):
            continue
        lead = res.get("leader")
        per_cond.append(f"{c}: {names.get(lead, lead)}" if lead else f"{c}: no clear leader")
    return sentences, per_cond


def _overlap_sentences(report: dict[str, Any], est: Any) -> tuple[list[str], list[str]]:
    sentences = [
        leader_sentence(
            "overall WER", [est(s, s["overall"]) for s in report["systems"]], lower_is_better=True
        )
    ]
    per_cond = []
    for c in report.get("conditions", []):
        ests = [
            est(s, g)
            for s in report["systems"]
            for g in s["groups"]
            if g["group"] == "condition" and g["name"] == c
        ]
        best, tied = leader(ests, lower_is_better=True)
        if best is not None:
            per_cond.append(f"{c}: {best.system}")
        elif len(tied) > 1:
            per_cond.append(f"{c}: no clear leader")
    return sentences, per_cond


def summary(report: dict[str, Any]) -> Summary:
    """Who leads overall and per condition (a paired comparison on shared items:
    ``report.leaders``; without a clear paired difference, no clear leader), the largest
    rank change under a condition, the audits that flagged a system; the systems table."""
    names = display_names([s["system"] for s in report["systems"]])

    def est(s: dict[str, Any], g: dict[str, Any]) -> Estimate:
        return Estimate(names[s["system"]], g.get("wer"), g.get("ci_lo"), g.get("ci_hi"))

    leaders = report.get("leaders")
    if leaders is not None:  # decided by paired comparisons on shared items
        sentences, per_cond = _paired_sentences(report, leaders, names)
        rule = "paired 95 % CIs on shared items"
    else:  # a report written before paired leaders: the overlap rule
        sentences, per_cond = _overlap_sentences(report, est)
        rule = "95 % CIs apart"
    if per_cond and len(report["systems"]) > 1:
        sentences.append(f"Best per condition ({rule}): " + "; ".join(per_cond) + ".")
    rs = report.get("rank_stability") or {}
    sentences += _rank_sentences(rs, names)
    flagged = []
    for key, title in AUDIT_TITLES.items():
        audit = (report.get("audits") or {}).get(key) or {}
        bad = [
            names.get(r["system"], r["system"])
            for r in audit.get("systems") or []
            if r.get("flagged")
        ]
        if bad:
            flagged.append(f"{title.lower()}: {', '.join(bad)}")
    if flagged:
        sentences.append("Audits flagged " + "; ".join(flagged) + ".")
    elif report.get("audits"):
        sentences.append("No audit flagged a system.")
    return Summary(sentences[:5], Table(SUMMARY_HEADERS, _systems_summary_rows(report)))


def _rank_sentences(rs: dict[str, Any], names: dict[str, str]) -> list[str]:
    """The largest rank change, claimed only where at least 95 % of bootstrap draws show a
    change of rank (else said to be unclear, with its share)."""
    shifts = [
        (abs(int(v)), c["condition"], name, int(v), (c.get("rank_shift_share") or {}).get(name))
        for c in rs.get("conditions") or []
        for name, v in (c.get("rank_shift") or {}).items()
    ]
    if not shifts:
        return []
    _, cond, name, v, share = max(shifts, key=lambda x: (x[0], x[4] or 0.0))
    if not v:
        return ["No system changes rank under any condition."]
    move = (
        f"{names.get(name, name)} moves {abs(v)} place(s) {'down' if v > 0 else 'up'} under "
        f"{cond} (against clean)"
    )
    if share is not None and share >= 0.95:
        return [f"Largest rank change: {move}, in {share:.0%} of bootstrap draws."]
    seen = "not estimable" if share is None else f"seen in only {share:.0%} of bootstrap draws"
    return [f"No rank change is clear: the largest, {move}, is {seen}."]


def _rank_blocks(rs: dict[str, Any]) -> list[Any]:
    if rs.get("status") != "ok":
        return [Text(f"Not computed: {rs.get('reason', 'no data')}", "muted")]
    return [Text(str(rs.get("note", ""))), Table(RANK_HEADERS, _rank_rows(rs))]


def _chart(report: dict[str, Any], key: str, names: list[str], label: str) -> Chart:
    series = []
    for s in report["systems"]:
        by = {g["name"]: g for g in s["groups"] if g["group"] == key}
        series.append(
            (
                short_name(s["system"]),
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
    return Chart(bar_chart(names, series, x_label=label), text=f"WER by {key}: the table below")


def document(report: dict[str, Any], store: RunStore | None = None) -> Document:
    """The ASR report: summary, WER per condition (chart and table), per other group, rank
    stability, audits, then per system its groups, failures and worst items with players."""
    norm = report["normalizer"]
    doc = Document(
        title=f"ASR robustness · {report['run_id']}",
        summary=summary(report),
        meta=f"Run {report['run_id']} · normalizer {norm['name']} ({norm['version']}) · "
        f"metrics {report['metrics_version']} · {report['n_items']} items · generated "
        f"{report.get('generated_at')}",
    )
    doc.section(
        "Method",
        Text(
            "WER is corpus-level per group (sum of errors / sum of reference words after "
            "normalization); 95 % CIs are bootstrap over speakers (an utterance without a "
            "speaker counts as its own cluster; a group with one speaker resamples that "
            "speaker's utterances, see the CI unit column). Failed items are counted and kept "
            "out of the denominators, never scored as zero."
        ),
        *(Text(n, "note") for n in report.get("notes", [])),
    )
    conds = report.get("conditions", [])
    headers, rows = _group_table(report, "condition", conds)
    doc.section(
        "WER per condition",
        _chart(report, "condition", conds, "WER (95 % CI)"),
        Table(headers, rows),
    )
    for key in report.get("group_keys", []):
        if key == "condition":
            continue
        names: list[str] = []
        for s in report["systems"]:
            for g in s["groups"]:
                if g["group"] == key and g["name"] not in names:
                    names.append(g["name"])
        if len(names) >= 2:
            doc.section(
                f"WER by {key}",
                _chart(report, key, names, "WER (95 % CI)"),
                Table(*_group_table(report, key, names)),
            )
    doc.section("Rank stability", *_rank_blocks(report.get("rank_stability", {})))
    audits = doc.section("Audits")
    for title, text, headers, rows in audit_tables(report.get("audits") or {}):
        audits.sub(title, Text(text) if text else None, Table(headers, rows) if rows else None)
    if not audits.children:
        audits.add(Text("No audits.", "muted"))
    for s in report["systems"]:
        doc.sections.append(_system_section(s, store))
    if report.get("malformed_record_lines"):
        doc.section(
            "Malformed records",
            Text(f"{len(report['malformed_record_lines'])} malformed record line(s) were skipped."),
        )
    return doc


def _system_section(s: dict[str, Any], store: RunStore | None) -> Section:
    sec = Section(s["system"])
    load = s.get("load") or {}
    if load:
        sec.add(
            Text(
                f"load {fmt(load.get('load_s'))} s · warm-up {fmt(load.get('warmup_s'))} s · RTFx "
                f"{fmt(s['overall'].get('rtfx'), 1)} (audio s / compute s, model load excluded)",
                "muted",
            )
        )
    rows = [_group_row({"group": "overall", "name": "all", **s["overall"]})] + [
        _group_row(g) for g in s["groups"]
    ]
    sec.add(Table(GROUP_HEADERS, rows, left=2))
    fails = s.get("failures", {})
    if fails.get("by_kind"):
        sec.sub(
            "Not scored",
            Text(", ".join(f"{k}: {v}" for k, v in sorted(fails["by_kind"].items()))),
            Table(
                ["id", "status", "kind", "message"],
                [
                    [e.get("id"), e.get("status"), e.get("kind"), e.get("message")]
                    for e in fails.get("examples", [])
                ],
                left=4,
            ),
        )
    if s.get("worst_items"):
        worst = s["worst_items"]
        sec.sub(
            "Worst items",
            Table(
                ["id", "condition", "errors", "ref words", "alignment (ref → hyp)"],
                [
                    [
                        w["id"],
                        w["condition"],
                        w["errors"],
                        w["ref_words"],
                        Rich(_alignment_text(w["alignment"]), _alignment_html(w["alignment"])),
                    ]
                    for w in worst
                ],
                left=2,
            ),
            Players(
                [
                    c
                    for c in (_clip(s["system"], w, store, i) for i, w in enumerate(worst))
                    if c is not None
                ]
            ),
        )
    return sec


def _clip(system: str, w: dict[str, Any], store: RunStore | None, rank: int) -> Clip | None:
    path = w.get("audio_filepath")
    if not path:
        return None
    p = Path(path)
    if not p.is_absolute() and store is not None:
        p = store.path / p

    def load(p: Path = p) -> tuple[Any, int]:
        a = load_audio(p, sr=None)
        return a.samples[: 20 * a.sr], a.sr

    return Clip(
        label=str(w["id"]), key=f"asr-{system}-{w['id']}", load=load, priority=0 if rank < 3 else 1
    )


def _alignment_text(alignment: list[Any]) -> str:
    out = []
    for op, ref, hyp in alignment:
        out.append(
            ref
            if op == "ok"
            else f"[{ref}→{hyp}]"
            if op == "sub"
            else f"[-{ref}]"
            if op == "del"
            else f"[+{hyp}]"
            if op == "ins"
            else f"[{ref}≈{hyp}]"
        )
    return " ".join(str(x) for x in out)


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


def render_markdown(report: dict[str, Any]) -> str:
    return to_markdown(document(report))


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    return to_html(document(report, store))


def profile(report: dict[str, Any]) -> list[ProfileEntry]:
    """ASR's cells of the capability profile: WER overall and per condition (lower is better)."""
    out = []
    for s in report["systems"]:
        name = short_name(s["system"])
        o = s["overall"]
        out.append(
            ProfileEntry(
                "ASR",
                name,
                "WER",
                o.get("wer"),
                o.get("ci_lo"),
                o.get("ci_hi"),
                o.get("n"),
                higher_is_better=False,
            )
        )
        for g in s["groups"]:
            if g["group"] == "condition":
                out.append(
                    ProfileEntry(
                        "ASR",
                        name,
                        f"WER {g['name']}",
                        g.get("wer"),
                        g.get("ci_lo"),
                        g.get("ci_hi"),
                        g.get("n"),
                        higher_is_better=False,
                    )
                )
    return out
