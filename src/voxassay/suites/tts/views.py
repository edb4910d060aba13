"""The document of a TTS report (numbers only from the report dict): the capability profile
(systems x dimensions, shaded), humans-only evals, instruction following, paired comparisons,
leadership, the judge, per system its evals, artifacts, identity, long form and worst items
with players, and the quality-metric validation; the summary names the leaders per dimension
("no system leads everywhere" or who does) and instruction following."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voxassay.core.numbers import finite as _f
from voxassay.core.runstore import RunStore
from voxassay.report.document import (
    Chart,
    Clip,
    Code,
    Document,
    Players,
    Section,
    Sentences,
    Summary,
    Table,
    Text,
)
from voxassay.report.html import bar_chart, ci_text, fmt
from voxassay.report.render import to_html, to_markdown
from voxassay.report.summary import ProfileEntry, short_name
from voxassay.suites.tts.report_scorer import ARTIFACT_RULES


def _ci(lo: Any, hi: Any) -> str:
    return ci_text(lo, hi)


def _cell(v: Mapping[str, Any] | None) -> str:
    if not v or _f(v.get("score")) is None:
        return "–"
    return f"{fmt(v['score'])} {_ci(v.get('ci_lo'), v.get('ci_hi'))} n={v.get('n')}"


def _sections(report: Mapping[str, Any]) -> list[tuple[str, str, list[str], list[list[Any]]]]:
    """(heading, text, headers, rows) shared by the Markdown and HTML views (profile aside)."""
    out: list[tuple[str, str, list[str], list[list[Any]]]] = []
    systems = report["systems"]
    out.append(
        (
            "Systems",
            "Counts only: there is no overall score. Errors are counted, never scored as zero.",
            [
                "system",
                "items",
                "records",
                "ok",
                "errors",
                "errors by kind",
                "unscored",
                "unavailable measures",
            ],
            [
                [
                    s["system"],
                    s["overall"]["n_items"],
                    s["overall"]["n_records"],
                    s["overall"]["n_ok"],
                    s["overall"]["n_error"],
                    ", ".join(
                        f"{k}: {v}" for k, v in sorted(s["overall"]["errors_by_kind"].items())
                    )
                    or "–",
                    s["overall"]["n_unscored"],
                    "; ".join(s["overall"]["unavailable_statements"]) or "none",
                ]
                for s in systems
            ],
        )
    )
    return out


def _profile_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    dims = report["profile"]["dimensions"]
    rows = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        rows.append([s["system"], *[_cell(m.get(d)) for d in dims]])
    return ["system", *dims], rows


def _eval_rows(s: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for g in s["groups"]:
        if g["group"] != "eval":
            continue
        raw = g["raw"]
        score = "humans only" if g["humans_only"] else g["score"]
        rows.append(
            [
                g["dimension"],
                g["name"],
                g.get("primary") or "–",
                score,
                _ci(g["ci_lo"], g["ci_hi"]) if not g["humans_only"] else "",
                g["n"],
                g["n_error"],
                g["n_unscored"],
                _rawcell(raw["wer"]),
                _rawcell(raw["cer"]),
                _rawcell(raw["critical_accuracy"]),
                _rawcell(raw["dnsmos_ovrl"]),
                _rawcell(raw["rate_ok"]),
            ]
        )
    return rows


EVAL_HEADERS = [
    "dimension",
    "eval",
    "primary",
    "score",
    "95% CI",
    "n",
    "errors",
    "unscored",
    "WER",
    "CER",
    "critical acc.",
    "DNSMOS ovrl",
    "rate ok",
]


def _rawcell(v: Mapping[str, Any]) -> str:
    if not v or not v.get("n") or v.get("value") is None:
        return "–"
    return f"{fmt(v['value'])} {_ci(v.get('ci_lo'), v.get('ci_hi'))}"


def _identity_rows(conditions: list[dict[str, Any]]) -> list[list[Any]]:
    """Identity-under-stress table rows: condition, cosine to the anchor, CI, n."""
    return [[r["condition"], r["cosine"], _ci(r["ci_lo"], r["ci_hi"]), r["n"]] for r in conditions]


def _artifact_rows(s: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for g in s["groups"]:
        if g["group"] != "eval":
            continue
        a = g["raw"]["artifacts"]
        if not any(v["n"] for v in a.values()):
            continue
        rows.append([g["name"], *[_rawcell(a[k]) for k in ARTIFACT_RULES]])
    return rows


def _instruction_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for s in report["systems"]:
        ins = s["instructions"]
        feats = "; ".join(
            f"{f}: {v['met']}/{v['n']} met, mean |change| {v['mean_abs_change']:.3g} (band {v['dead_band']:g})"
            for f, v in ins["features"].items()
        )
        rows.append(
            [
                s["system"],
                {True: "yes", False: "no", None: "unknown"}[ins["accepts_instructions"]],
                ins["n_contrasts"],
                f"{ins['met']}/{ins['expected']}",
                ins["share"],
                _ci(ins["ci_lo"], ins["ci_hi"]),
                feats or "–",
            ]
        )
    return rows


INSTR_HEADERS = [
    "system",
    "accepts instructions",
    "contrasts",
    "met / expected",
    "share",
    "95% CI",
    "by feature",
]


def _paired_rows(report: Mapping[str, Any], group: str) -> list[list[Any]]:
    return [
        [
            f"{p['a']} − {p['b']}",
            p["name"],
            p.get("a_score"),
            p.get("b_score"),
            p["diff"],
            _ci(p["ci_lo"], p["ci_hi"]),
            p["p_value"],
            p["n"],
        ]
        for p in report["paired"]
        if p["group"] == group
    ]


PAIRED_HEADERS = ["a − b", "name", "a", "b", "difference", "95% CI", "p", "n items"]


def _corr_table(report: Mapping[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    c = report["leadership"]["correlation"]
    if c["status"] != "ok":
        return f"Not read: {c['reason']}.", [], []
    dims = c["dimensions"]
    rows = [[da, *[cell["rho"] for cell in row]] for da, row in zip(dims, c["matrix"], strict=True)]
    return (
        f"Spearman's rho between dimension scores across {c['n_systems']} systems.",
        ["", *dims],
        rows,
    )


def _top_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    L = report["leadership"]
    return [
        [d, ", ".join(t["top"]), ", ".join(t["leaders"]), ", ".join(t["ranked"])]
        for d, t in L["top_k"].items()
    ]


def _judge_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for s in report["systems"]:
        for e in s["judge"]["evals"]:
            rows.append(
                [
                    s["system"],
                    e["eval"],
                    e["mean"],
                    _ci(e["ci_lo"], e["ci_hi"]),
                    e["n"],
                    e["unparseable"],
                    e["error"],
                ]
            )
    return rows


def _human_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for h in report["profile"]["humans_only"]:
        hum = h.get("human") or {}
        systems = hum.get("systems") or {}
        scores = (
            "; ".join(
                f"{s}: {_num(v.get('mean'))} {_ci(v.get('ci_lo'), v.get('ci_hi'))}"
                for s, v in systems.items()
            )
            or "no human results yet"
        )
        ja = hum.get("judge_agreement") or {}
        rows.append(
            [
                h["dimension"],
                h["eval"],
                h.get("question") or "",
                h["n_items"],
                scores,
                _num(ja.get("spearman")) if ja else "–",
            ]
        )
    return rows


def _human_all_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    """Every eval and dimension in human.json: system, rater-controlled mean, CI, n, judge rho."""
    hum = report.get("human") or {}
    rows = []
    for level, block in (
        ("eval", hum.get("evals") or {}),
        ("dimension", hum.get("dimensions") or {}),
    ):
        for name, e in block.items():
            ja = e.get("judge_agreement") or {}
            for spec, v in (e.get("systems") or {}).items():
                rows.append(
                    [
                        level,
                        name,
                        spec,
                        _num(v.get("mean")),
                        _ci(v.get("ci_lo"), v.get("ci_hi")),
                        v.get("n"),
                        _num(ja.get("spearman")) if ja else "–",
                    ]
                )
    return rows


HUMAN_HEADERS = ["level", "name", "system", "human mean", "95% CI", "n", "judge vs human rho"]


def _num(v: Any) -> str:
    return fmt(_f(v))


def _validation_blocks(report: Mapping[str, Any]) -> list[Any]:
    val = report.get("validation")
    if not val:
        return [
            Text(
                "No validation of the quality metrics in this run (RUN/validation.json absent).",
                "muted",
            )
        ]
    try:
        from voxassay.suites.tts.validation import render_validation_markdown

        text = str(render_validation_markdown(val))
    except Exception as exc:  # renderer absent or incompatible: show the numbers raw
        text = f"(validation renderer failed: {exc})\n\n" + json.dumps(val, indent=1)[:6000]
    lines = text.split("\n")
    if lines and lines[0].startswith("#"):
        lines = lines[1:]
    return [Code("\n".join(lines).strip())]


def _profile_shade(report: Mapping[str, Any]) -> list[list[float | None]]:
    dims = report["profile"]["dimensions"]
    out = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        out.append([None, *[_f((m.get(d) or {}).get("score")) for d in dims]])
    return out


def _profile_chart(report: Mapping[str, Any]) -> Chart | None:
    dims = report["profile"]["dimensions"]
    if not dims:
        return None
    series = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        series.append(
            (
                short_name(s["system"]),
                [
                    (
                        _f((m.get(d) or {}).get("score")),
                        _f((m.get(d) or {}).get("ci_lo")),
                        _f((m.get(d) or {}).get("ci_hi")),
                    )
                    for d in dims
                ],
            )
        )
    return Chart(
        bar_chart(dims, series, x_label="dimension score (95 % CI)"),
        text="scores in the table above",
    )


def summary(report: Mapping[str, Any]) -> Summary:
    """Leaders per dimension (ties by CI overlap) or the one system leading everywhere,
    instruction following, and the profile table."""
    sentences = [str(report["leadership"]["statement"])]
    ignores = [s["system"] for s in report["systems"] if s["instructions"]["ignores_instructions"]]
    follows = [
        f"{s['system']} {s['instructions']['met']}/{s['instructions']['expected']}"
        for s in report["systems"]
        if s["instructions"]["expected"]
    ]
    if follows:
        sentences.append(
            "Instruction following (contrasts met / expected): " + ", ".join(follows) + "."
        )
    if ignores:
        sentences.append(f"Ignores style instructions: {', '.join(ignores)}.")
    errors = [
        f"{s['system']} {s['overall']['n_error']}"
        for s in report["systems"]
        if s["overall"]["n_error"]
    ]
    if errors:
        sentences.append(
            "Items that failed (counted, never scored as zero): " + ", ".join(errors) + "."
        )
    headers, rows = _profile_rows(report)
    table = (
        Table(headers, rows, shade=_profile_shade(report))
        if report["profile"]["dimensions"]
        else None
    )
    return Summary(sentences[:5], table)


def _clip(
    key: str, label: str, path: Any, store: RunStore | None, priority: int = 0
) -> Clip | None:
    if not path:
        return None
    p = Path(str(path))
    if not p.is_absolute() and store is not None:
        p = store.path / p

    def load(p: Path = p) -> tuple[Any, int]:
        from voxassay.core.audio import load_audio

        a = load_audio(p, sr=None)
        return a.samples[: 20 * a.sr], a.sr

    return Clip(label=label, key=key, load=load, priority=priority)


def _system_section(s: Mapping[str, Any], store: RunStore | None) -> Section:
    sec = Section(str(s["system"]))
    sec.add(*(Text(st, "note") for st in s["overall"]["unavailable_statements"]))
    sec.add(Table(EVAL_HEADERS, _eval_rows(s), left=3))
    ar = _artifact_rows(s)
    if ar:
        rules = "; ".join(f"{k}: {k2} {op} {t:g}" for k, (k2, op, t) in ARTIFACT_RULES.items())
        sec.sub(
            "Artifact rates",
            Text(f"Share of items, Wilson CI. {rules}", "muted"),
            Table(["eval", *ARTIFACT_RULES], ar),
        )
    idr = s["identity"]["conditions"]
    if idr:
        sec.sub(
            "Identity under stress",
            Text("Cosine to the group's neutral anchor.", "muted"),
            Table(["condition", "cosine to anchor", "95% CI", "n"], _identity_rows(idr)),
        )
    lf = s["long_form"]
    if lf["items"]:
        sec.sub(
            "Long form",
            Text("Window similarity to the first window; drifts last vs first third.", "muted"),
            Table(
                ["id", "sim min", "sim mean", "rate drift", "loudness drift dB"],
                [
                    [
                        x["id"],
                        x["longform_sim_min"],
                        x["longform_sim_mean"],
                        x["longform_rate_drift"],
                        x["longform_loudness_drift_db"],
                    ]
                    for x in lf["items"]
                ],
            ),
        )
    if s["worst_items"]:
        rows = []
        clips = []
        for w in s["worst_items"]:
            if w["kind"] == "critical":
                det = ", ".join(
                    f"{d['token']} {'✓' if d['ok'] else '✗ heard ' + repr(d.get('heard'))}"
                    for d in w["details"]
                )
            else:
                det = ", ".join(
                    f"{d['feature']} {d['expect']} ({d['change']:+.3g}) {'✓' if d['met'] else '✗'}"
                    for d in w["details"]
                )
            rows.append(
                [w["kind"], w["id"], w["eval"], w["score"], w["text"], w.get("asr_text"), det]
            )
            clips.append(
                _clip(f"tts-{s['system']}-{w['id']}", str(w["id"]), w.get("audio_path"), store)
            )
            if w["kind"] != "critical":
                clips.append(
                    _clip(
                        f"tts-{s['system']}-{w['id']}-neutral",
                        f"{w['id']} (neutral)",
                        w.get("reference_audio_path"),
                        store,
                        1,
                    )
                )
        sec.sub(
            "Worst items",
            Table(
                ["kind", "id", "eval", "score", "text", "ASR round trip", "details"], rows, left=3
            ),
            Players([c for c in clips if c is not None]),
        )
    return sec


def document(report: Mapping[str, Any], store: RunStore | None = None) -> Document:
    doc = Document(
        title=f"TTS · {report['run_id']}",
        summary=summary(report),
        meta=f"Run {report['run_id']} · metrics {report['metrics_version']} · "
        f"{report['items']['n']} items · eval definitions: {report['eval_source']} · generated "
        f"{report.get('generated_at')}",
    )
    doc.section(
        "Method",
        Text(f"{report['profile']['rule']}. No single overall score is computed."),
        *(Text(n, "note") for n in report["notes"]),
    )
    for title, text, headers, rows in _sections(report):
        doc.section(title, Text(text), Table(headers, rows))
    headers, rows = _profile_rows(report)
    profile = doc.section(
        "Capability profile (systems × dimensions)",
        Table(headers, rows, shade=_profile_shade(report))
        if report["profile"]["dimensions"]
        else Text("No automatic dimension was scored.", "muted"),
        Text(
            "Colour: score 0 (red) to 1 (green); 95 % bootstrap CI and scored items beside each "
            "score. Each dimension stands alone: there is no overall score.",
            "muted",
        ),
        _profile_chart(report),
    )
    human_rows = _human_rows(report)
    profile.sub(
        "Humans only",
        Table(
            [
                "dimension",
                "eval",
                "question",
                "items",
                "human score (rater-controlled)",
                "judge vs human rho",
            ],
            human_rows,
            left=3,
        )
        if human_rows
        else Text("No humans-only eval in this run's item set.", "muted"),
    )
    if report.get("human"):
        profile.sub(
            f"Human ratings (from {report['human'].get('source')})",
            Table(HUMAN_HEADERS, _human_all_rows(report), left=3),
        )
    doc.section(
        "Instruction and emotion following",
        Sentences([str(s["instructions"]["statement"]) for s in report["systems"]]),
        Table(INSTR_HEADERS, _instruction_rows(report), left=2),
    )
    paired = doc.section("Paired comparisons (same items)")
    if report["paired"]:
        paired.sub("Dimensions", Table(PAIRED_HEADERS, _paired_rows(report, "dimension"), left=2))
        paired.sub("Evals", Table(PAIRED_HEADERS, _paired_rows(report, "eval"), left=2))
    else:
        paired.add(Text("One system: nothing to pair.", "muted"))
    text, h, r = _corr_table(report)
    doc.section(
        "No system leads everywhere?",
        Text(str(report["leadership"]["statement"])),
        Text(text),
        Table(h, r) if r else None,
        Table(
            ["dimension", f"top {report['leadership']['k']}", "leaders (tied first)", "ranked"],
            _top_rows(report),
            left=4,
            caption="Ties by CI overlap",
        ),
    )
    jr = _judge_rows(report)
    doc.section(
        "Judge",
        Sentences([f"{s['system']}: {s['judge']['statement']}" for s in report["systems"]]),
        Table(["system", "eval", "mean", "95% CI", "n", "unparseable", "errors"], jr, left=2)
        if jr
        else Text("No judge was available for this run.", "muted"),
    )
    for s in report["systems"]:
        doc.sections.append(_system_section(s, store))
    doc.section("Quality metrics vs human MUSHRA scores", *_validation_blocks(report))
    return doc


def render_markdown(report: dict[str, Any]) -> str:
    return to_markdown(document(report))


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    return to_html(document(report, store))


def profile(report: Mapping[str, Any]) -> list[ProfileEntry]:
    """TTS's cells of the capability profile: every automatic dimension's score."""
    out = []
    for s in report["systems"]:
        m = report["profile"]["matrix"].get(s["system"], {})
        for d in report["profile"]["dimensions"]:
            v = m.get(d) or {}
            out.append(
                ProfileEntry(
                    "TTS",
                    short_name(s["system"]),
                    d,
                    _f(v.get("score")),
                    _f(v.get("ci_lo")),
                    _f(v.get("ci_hi")),
                    v.get("n"),
                )
            )
    return out
