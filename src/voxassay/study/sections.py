"""The study report as a document (Markdown and HTML come from it): per eval the ranking with
intervals, rater quality, agreement and the dot plot, from the analysis result alone."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["document", "dot_plot", "render_html", "render_markdown", "summary"]


CHART_MAX_SYSTEMS = 60


def _ci(block: Mapping[str, Any] | None, digits: int = 3) -> str:
    from voxassay.report.html import fmt

    if not block:
        return "–"
    from voxassay.report.html import ci_text

    interval = ci_text(block.get("ci_lo"), block.get("ci_hi"), digits)
    return f"{fmt(block.get('mean'), digits)} {interval}"


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, int | float) else "?"


def _diff(block: Mapping[str, Any] | None) -> str:
    from voxassay.report.html import fmt

    if not block:
        return "–"
    return f"{fmt(block['diff'])} [{fmt(block['ci_lo'])}, {fmt(block['ci_hi'])}] vs {block['next']}"


def _sections(report: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Report content as (heading, [(kind, payload)]) where kind is ``p`` (text), ``table``
    ((headers, rows)) or ``chart`` (an SVG builder, HTML only)."""
    from voxassay.report.html import fmt

    out: list[tuple[str, list[tuple[str, Any]]]] = []
    src = report.get("source", {})
    c = report.get("counts", {})
    parts: list[tuple[str, Any]] = [
        (
            "p",
            f"{c.get('n_ratings')} ratings by {c.get('n_raters')} raters of {c.get('n_items')} "
            f"items from {c.get('n_systems')} systems, {c.get('n_evals')} eval(s). Source "
            f"{src.get('path')} ({src.get('kind')}): {src.get('rows_read')} data rows, "
            f"{src.get('malformed_count')} malformed, {src.get('revisions_replaced')} "
            f"revision(s) replaced.",
        )
    ]
    if src.get("malformed"):
        parts.append(
            (
                "table",
                (
                    ["line", "reason"],
                    [[m["line"], m["reason"]] for m in src["malformed"][:50]],
                ),
            )
        )
    for note in report.get("notes", []):
        parts.append(("p", note))
    out.append(("Data", parts))

    for ev in report.get("evals", []):
        parts = []
        if "systems" not in ev:
            parts.append(("p", f"{ev.get('n_ratings')} ratings: too few to analyze."))
            out.append((f"Eval {ev['id']}", parts))
            continue
        sc = ev.get("scale", {})
        parts.append(
            (
                "p",
                f"Dimension {ev.get('dimension')}; scale {_num(sc.get('min'))}..{_num(sc.get('max'))}"
                f"{' (inferred)' if ev.get('scale_inferred') else ''}; {ev['n_ratings']} ratings, "
                f"{ev['n_raters']} raters, {ev['n_items']} items. "
                + (f"Question: {ev['question']}" if ev.get("question") else ""),
            )
        )
        rows = [
            [
                r["system"],
                r["n"],
                _ci(r["mos"]),
                _ci(r.get("rater_controlled")),
                _ci(r.get("rater_controlled_z")),
                r.get("rank_mos"),
                r.get("rank_model"),
                r.get("rank_model_z"),
                _diff(r.get("diff_to_next")),
            ]
            for r in ev["systems"]
        ]
        parts.append(
            (
                "table",
                (
                    [
                        "system",
                        "n",
                        "MOS [95% t CI]",
                        "rater-controlled [95% CI]",
                        "rater-controlled z [95% CI]",
                        "rank MOS",
                        "rank model",
                        "rank model z",
                        "minus next in model order [95% CI]",
                    ],
                    rows,
                ),
            )
        )
        parts.append(("chart", ("eval", ev)))
        m, mz = ev.get("model") or {}, ev.get("model_z") or {}
        vc, vcz = m.get("variance_components", {}), mz.get("variance_components", {})
        parts.append(
            (
                "table",
                (
                    [
                        "model",
                        "var rater",
                        "var item",
                        "var residual",
                        "iterations",
                        "converged",
                        "seconds",
                    ],
                    [
                        [
                            "raw",
                            vc.get("rater"),
                            vc.get("item"),
                            vc.get("residual"),
                            m.get("iterations"),
                            m.get("converged"),
                            m.get("seconds"),
                        ],
                        [
                            "z",
                            vcz.get("rater"),
                            vcz.get("item"),
                            vcz.get("residual"),
                            mz.get("iterations"),
                            mz.get("converged"),
                            mz.get("seconds"),
                        ],
                    ],
                ),
            )
        )
        if m.get("variance_note"):
            parts.append(("p", f"Variance components: {m['variance_note']}."))
        mv = ev.get("mos_vs_model", {})
        parts.append(
            (
                "p",
                f"MOS vs rater-controlled order: Spearman {fmt(mv.get('spearman'))}, Kendall "
                f"{fmt(mv.get('kendall'))} (descriptive: no interval is computed for these, so "
                f"they claim no rank change; the differences to the next system below carry "
                f"the uncertainty). Model: {m.get('model')}. Its CIs are Wald (normal) "
                f"intervals that include rater and item sampling (they generalize to new "
                f"raters and items, so they are wider than the MOS t intervals, which treat "
                f"ratings as independent); the difference to the next system cancels the "
                f"shared rater and item effects and is the one to read for ranking.",
            )
        )
        if ev.get("z_excluded_raters"):
            parts.append(
                (
                    "p",
                    "Not z-scorable (left out of the z model): "
                    + ", ".join(
                        f"{x['rater']} ({x['reason']})" for x in ev["z_excluded_raters"][:30]
                    ),
                )
            )
        rel = ev.get("reliability", {})
        icc_ = rel.get("icc", {})
        ai, ao = rel.get("alpha_interval", {}), rel.get("alpha_ordinal", {})
        parts.append(
            (
                "table",
                (
                    ["reliability (unit = item x system)", "value", "95% CI"],
                    [
                        [
                            "Krippendorff alpha, interval",
                            ai.get("alpha"),
                            f"[{fmt(ai.get('ci_lo'))}, {fmt(ai.get('ci_hi'))}]",
                        ],
                        [
                            "Krippendorff alpha, ordinal",
                            ao.get("alpha"),
                            f"[{fmt(ao.get('ci_lo'))}, {fmt(ao.get('ci_hi'))}]",
                        ],
                        ["ICC(1) one-way", icc_.get("icc1"), "–"],
                        ["ICC(2,1) absolute, single", icc_.get("icc2_1"), "–"],
                        [
                            f"ICC(2,k) mean of k={fmt(icc_.get('k_harmonic'), 2)}",
                            icc_.get("icc2_k"),
                            "–",
                        ],
                        ["ICC(3,1) consistency, single", icc_.get("icc3_1"), "–"],
                    ],
                ),
            )
        )
        if icc_.get("note"):
            parts.append(("p", f"ICC: {icc_['note']}."))
        out.append((f"Eval {ev['id']}", parts))

    dims = report.get("dimensions") or {}
    if dims:
        parts = [
            (
                "p",
                "Dimension score = equal-weight mean of its evals' z-scale rater-controlled "
                "means. Membership: Spearman between each eval's and its dimension's system "
                "order, passed at >= 0.30 (leave-one-out: the dimension without that eval).",
            )
        ]
        rows = []
        for dim, d in sorted(dims.items()):
            for mem in d["membership"]:
                rows.append(
                    [
                        dim,
                        mem["eval"],
                        mem["spearman"],
                        mem["spearman_leave_one_out"],
                        "pass" if mem["passed"] else "FAIL",
                    ]
                )
        parts.append(("table", (["dimension", "eval", "Spearman", "Spearman LOO", "check"], rows)))
        names = sorted({s for d in dims.values() for s in d["scores"]})
        parts.append(
            (
                "table",
                (
                    ["system", *sorted(dims)],
                    [[s, *[dims[d]["scores"].get(s) for d in sorted(dims)]] for s in names],
                ),
            )
        )
        parts.append(("chart", ("dims", dims)))
        out.append(("Dimensions", parts))

    for pw in report.get("pairwise", []):
        parts = [
            (
                "p",
                f"{pw['n_ratings']} preferences by {pw['n_raters']} raters over "
                f"{pw['n_items']} items. Rate = (wins + ties/2) / n for the first system, "
                f"Wilson 95% CI.",
            )
        ]
        parts.append(
            (
                "table",
                (
                    [
                        "first",
                        "second",
                        "n",
                        "wins first",
                        "wins second",
                        "ties",
                        "rate first",
                        "95% CI",
                    ],
                    [
                        [
                            p["first"],
                            p["second"],
                            p["n"],
                            p["wins_first"],
                            p["wins_second"],
                            p["ties"],
                            p["rate_first"],
                            f"[{fmt(p['ci_lo'])}, {fmt(p['ci_hi'])}]",
                        ]
                        for p in pw["preferences"]
                    ],
                ),
            )
        )
        bt = pw["bradley_terry"]
        parts.append(("p", f"Bradley-Terry: {bt['model']}; converged {bt['converged']}."))
        parts.append(
            (
                "table",
                (
                    ["system", "log-strength", "SE", "95% CI", "P(beats average)"],
                    [
                        [
                            s["system"],
                            s["log_strength"],
                            s["se"],
                            f"[{fmt(s['ci_lo'])}, {fmt(s['ci_hi'])}]",
                            s["win_prob_vs_avg"],
                        ]
                        for s in bt["strengths"]
                    ],
                ),
            )
        )
        out.append((f"Pairwise {pw['id']}", parts))

    qc = report.get("rater_qc", {})
    if qc:
        th = qc.get("thresholds", {})
        parts = [
            (
                "p",
                f"{qc.get('n_flagged')} of {len(qc.get('raters', []))} raters flagged. Scores "
                f"mapped to 0..1 per eval scale. Rules: gold accuracy < "
                f"{fmt(th.get('gold_min_accuracy'), 2)}; Spearman with leave-one-out consensus < "
                f"{fmt(th.get('consensus_min_rho'), 2)} (>= {th.get('consensus_min_n')} rated "
                f"units); one score in >= {fmt(th.get('straight_mode_share'), 2)} of >= "
                f"{th.get('straight_min_n')} ratings; > {fmt(th.get('fast_max_share'), 2)} of "
                f"ratings under {th.get('fast_ms')} ms.",
            )
        ]
        raters = sorted(qc.get("raters", []), key=lambda q: (not q["flags"], str(q["rater"])))
        parts.append(
            (
                "table",
                (
                    [
                        "rater",
                        "n",
                        "gold",
                        "consensus rho",
                        "consensus r",
                        "mode share",
                        "fast share",
                        "flags",
                    ],
                    [
                        [
                            q["rater"],
                            q["n"],
                            f"{q['gold_correct']}/{q['gold_n']}" if q["gold_n"] else "–",
                            q["consensus_spearman"],
                            q["consensus_pearson"],
                            q["mode_share"],
                            q["fast_share"],
                            "; ".join(q["flags"]) or "",
                        ]
                        for q in raters
                    ],
                ),
            )
        )
        out.append(("Rater QC", parts))

    ex = report.get("exclusion", {})
    if ex.get("effect"):
        parts = [
            (
                "p",
                "What leaving out the flagged raters changes"
                + (
                    " (applied to every table above)."
                    if ex.get("applied")
                    else " (not applied; use --exclude-flagged)."
                ),
            )
        ]
        for ev, e in sorted(ex["effect"].items()):
            rc = e["rater_controlled"]
            parts.append(
                (
                    "p",
                    f"{ev}: {e['ratings_removed']} ratings removed; rater-controlled order "
                    f"Spearman before/after {fmt(rc['spearman'])}, largest rank move "
                    f"{rc['max_rank_change']}, largest change {fmt(rc['max_abs_change'])}; MOS "
                    f"order Spearman {fmt(e['mos']['spearman'])}.",
                )
            )
            parts.append(
                (
                    "table",
                    (
                        ["system", "before", "after", "change", "rank before", "rank after"],
                        [
                            [
                                r["system"],
                                r["before"],
                                r["after"],
                                r["change"],
                                r["rank_before"],
                                r["rank_after"],
                            ]
                            for r in rc["systems"]
                        ],
                    ),
                )
            )
        out.append(("Exclusion effect", parts))

    jd = report.get("judges")
    if jd:
        rows = []
        for t in jd.get("targets", []):
            il, sl, wr = t.get("item_level"), t.get("system_level"), t.get("win_rate_agreement")
            rows.append(
                [
                    t["target"],
                    t["level"],
                    f"{fmt(il['spearman'])} [{fmt(il['ci_lo'])}, {fmt(il['ci_hi'])}] n={il['n']}"
                    if il
                    else "–",
                    f"{fmt(sl['spearman'])} [{fmt(sl['ci_lo'])}, {fmt(sl['ci_hi'])}] n={sl['n']}"
                    if sl
                    else "–",
                    f"{fmt(wr['agreement'])} [{fmt(wr['ci_lo'])}, {fmt(wr['ci_hi'])}] n={wr['n']}"
                    if wr
                    else "–",
                ]
            )
        parts = [
            (
                "p",
                "Spearman between judge and human scores with 95% bootstrap CIs. Human item "
                "score: mean within-rater z-score; system score: z-scale rater-controlled mean "
                "(eval) or dimension score. Win-rate agreement: share of pairwise comparisons "
                "where the judge prefers the side the humans preferred (Wilson CI).",
            ),
            (
                "table",
                (
                    ["target", "level", "item-level rho", "system-level rho", "win-rate agreement"],
                    rows,
                ),
            ),
        ]
        if jd.get("unmatched_targets"):
            parts.append(
                (
                    "p",
                    "Judge targets with no human eval or dimension: "
                    + ", ".join(jd["unmatched_targets"]),
                )
            )
        if jd.get("malformed"):
            parts.append(("p", f"{len(jd['malformed'])} malformed judge row(s) skipped."))
        out.append(("Judges vs humans", parts))

    demo = report.get("demographics")
    if demo:
        rows = [[k, v, n] for k, counts in demo["fields"].items() for v, n in counts.items()]
        out.append(
            (
                "Raters",
                [
                    (
                        "p",
                        f"{demo['raters_with_profile']} of {demo['raters']} raters answered the profile.",
                    ),
                    ("table", (["field", "answer", "raters"], rows)),
                ],
            )
        )
    return out


def summary(report: Mapping[str, Any]) -> Any:
    """Per eval who leads on the rater-controlled mean (no clear leader when the 95 %
    intervals overlap); the data counts."""
    from voxassay.report.document import Summary, Table
    from voxassay.report.summary import Estimate, leader_sentence

    sentences = []
    rows = []
    for ev in report.get("evals", []):
        if "systems" not in ev:
            continue
        ests = []
        for r in ev["systems"]:
            b = r.get("rater_controlled") or r.get("mos") or {}
            ests.append(Estimate(str(r["system"]), b.get("mean"), b.get("ci_lo"), b.get("ci_hi")))
            rows.append([ev["id"], r["system"], r["n"], _ci(b)])
        sentences.append(
            leader_sentence(f"eval {ev['id']} (rater-controlled mean)", ests, lower_is_better=False)
        )
    c = report.get("counts", {})
    sentences.append(
        f"{c.get('n_ratings')} ratings by {c.get('n_raters')} raters of {c.get('n_items')} items."
    )
    table = (
        Table(["eval", "system", "n", "rater-controlled [95% CI]"], rows, left=2) if rows else None
    )
    return Summary(sentences[:5], table)


def document(report: Mapping[str, Any], store: Any = None) -> Any:
    """The study analysis as a ``report.document.Document``."""
    from voxassay.report.document import Chart, Document, Table, Text

    doc = Document(
        title=f"Rating study analysis {report.get('run_id', '')}".strip(), summary=summary(report)
    )
    for heading, parts in _sections(report):
        sec = doc.section(heading)
        for kind, payload in parts:
            if kind == "p":
                sec.add(Text(str(payload)))
            elif kind == "table":
                sec.add(Table(*payload))
            elif kind == "chart":
                sec.add(Chart(_chart(*payload), text="a dot plot in report.html"))
    return doc


def render_markdown(report: Mapping[str, Any]) -> str:
    from voxassay.report.render import to_markdown

    return to_markdown(document(report))


def render_html(report: Mapping[str, Any], store: Any = None) -> str:
    from voxassay.report.render import to_html

    return to_html(document(report, store))


def _chart(what: str, data: Mapping[str, Any]) -> str:
    from voxassay.report.html import bar_chart

    if what == "eval":
        systems = data["systems"][:CHART_MAX_SYSTEMS]
        note = (
            f"<p class='muted'>Chart: the first {CHART_MAX_SYSTEMS} of {len(data['systems'])} "
            f"systems (model order).</p>"
            if len(data["systems"]) > CHART_MAX_SYSTEMS
            else ""
        )
        sc = data.get("scale") or {}
        svg = ""
        if sc.get("min") is not None and sc["min"] >= 0:

            def tri(b: Mapping[str, Any] | None) -> tuple[float | None, float | None, float | None]:
                return (b["mean"], b["ci_lo"], b["ci_hi"]) if b else (None, None, None)

            svg = bar_chart(
                [r["system"] for r in systems],
                [
                    ("MOS", [tri(r["mos"]) for r in systems]),
                    ("rater-controlled", [tri(r.get("rater_controlled")) for r in systems]),
                ],
                title=f"{data['id']}: MOS vs rater-controlled mean (95% CI)",
                x_label="score",
            )
        zrows = [
            (r["system"], r["rater_controlled_z"]) for r in systems if r.get("rater_controlled_z")
        ]
        svg += dot_plot(
            [s for s, _ in zrows],
            [(b["mean"], b["ci_lo"], b["ci_hi"]) for _, b in zrows],
            title=f"{data['id']}: rater-controlled mean on the within-rater z scale (95% CI)",
        )
        return note + svg
    if what == "dims":
        names = sorted({s for d in data.values() for s in d["scores"]})[:CHART_MAX_SYSTEMS]
        parts = []
        for dim, d in sorted(data.items()):
            pts = [(d["scores"].get(s), None, None) for s in names]
            parts.append(dot_plot(names, pts, title=f"dimension {dim} (z scale)"))
        return "".join(parts)
    return ""


def dot_plot(
    categories: Sequence[str],
    points: Sequence[tuple[float | None, float | None, float | None]],
    *,
    title: str = "",
    width: int = 760,
) -> str:
    """Horizontal dots with CI whiskers on a signed axis (inline SVG; zero marked)."""
    from voxassay.report.html import esc

    row_h, left, right, top = 16, 170, 30, 26 if title else 8
    height = top + row_h * len(categories) + 30
    vals = [
        v
        for p in points
        for v in p
        if v is not None and isinstance(v, float | int) and math.isfinite(v)
    ]
    lo = min([*vals, 0.0]) if vals else -1.0
    hi = max([*vals, 0.0]) if vals else 1.0
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * (v - lo) / (hi - lo)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-size='11'>"
    ]
    if title:
        parts.append(f"<text x='{left}' y='16' font-weight='bold'>{esc(title)}</text>")
    axis_y = top + row_h * len(categories)
    parts.append(
        f"<line x1='{x(0):.1f}' x2='{x(0):.1f}' y1='{top}' y2='{axis_y}' stroke='#bbb' stroke-dasharray='3,3'/>"
    )
    for i, (cat, (v, a, b)) in enumerate(zip(categories, points, strict=True)):
        yc = top + i * row_h + row_h / 2
        parts.append(f"<text x='{left - 6}' y='{yc + 4:.1f}' text-anchor='end'>{esc(cat)}</text>")
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
            parts.append(
                f"<line x1='{x(a):.1f}' x2='{x(b):.1f}' y1='{yc:.1f}' y2='{yc:.1f}' stroke='#222'/>"
            )
        if v is not None and math.isfinite(v):
            parts.append(
                f"<circle cx='{x(v):.1f}' cy='{yc:.1f}' r='3.5' fill='#3366cc'><title>{esc(cat)}: {v:.4f}</title></circle>"
            )
    parts.append(
        f"<line x1='{left}' x2='{left + plot_w}' y1='{axis_y}' y2='{axis_y}' stroke='#999'/>"
    )
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        parts.append(
            f"<text x='{x(v):.1f}' y='{axis_y + 14}' text-anchor='middle' fill='#555'>{v:.2f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
