"""The document of an STS report: what was heard (constructed renders or recordings), the
AO - TO ablation per source with its tests, "k of n systems score higher with audio", the
profile per system and dimension, and counts of empty, refused and text-only answers."""

from __future__ import annotations

from typing import Any

from voxassay.core.runstore import RunStore
from voxassay.report.document import (
    Chart,
    Clip,
    Document,
    Players,
    Section,
    Summary,
    Table,
    Text,
)
from voxassay.report.html import ci_text, fmt
from voxassay.report.render import to_html, to_markdown
from voxassay.report.summary import ProfileEntry, short_name
from voxassay.suites.sts.items import DIMENSIONS

__all__ = ["document", "profile", "render_html", "render_markdown"]


def _ci(d: dict[str, Any]) -> str:
    return ci_text(d.get("ci_low"), d.get("ci_high"))


def _row(label: str, d: dict[str, Any]) -> list[Any]:
    return [label, d.get("mean"), _ci(d), d.get("n"), d.get("p"), d.get("p_holm")]


def summary(report: dict[str, Any]) -> Summary:
    sentences = []
    k = report["k_of_n"].get("checklist", {})
    for scope in ("natural", "scripted"):
        row = k.get(scope)
        if row and row["n"]:
            sentences.append(
                f"{scope.capitalize()} scenarios: {row['k_point']} of {row['n']} systems score "
                f"higher with audio on the checklist proxy ({row['k_ci']} with a CI above 0)."
            )
    for s in report["systems"]:
        d = (s["ao_minus_to"].get("checklist") or {}).get("overall")
        if d and d.get("mean") is not None:
            sentences.append(
                f"{short_name(s['system'])}: AO - TO {fmt(d['mean'])} {_ci(d)} over {d['n']} "
                "items (checklist proxy)."
            )
    return Summary(sentences=sentences)


def document(report: dict[str, Any], store: RunStore | None = None) -> Document:
    doc = Document(
        title=f"Speech-to-speech · {report['run_id']}",
        summary=summary(report),
        meta=f"Items {report['item_set']}",
    )
    heard = report.get("renders") or ""
    if report.get("neutral_render"):
        heard += " This run used the neutral re-render (every turn in the neutral style)."
    doc.section(
        "What the systems heard",
        Text(heard),
        Text(
            "People rated the answers (the human source: rater-controlled, blind to system "
            "and mode); the other sources are automatic proxies, each reported on its own."
            if "human" in report["sources"]
            else "Scores here are automatic proxies (labelled as such), not ratings of the "
            "dimensions: this run has no human or judge scores.",
            "note",
        ),
    )
    for source, meta in report["sources"].items():
        sec = doc.section(f"Audio vs transcript: {meta['label']}")
        for s in report["systems"]:
            ab = s["ao_minus_to"].get(source)
            if not ab:
                continue
            rows = [_row("all items", ab["overall"])]
            for group in ("dimension", "scenario_type", "stressor"):
                rows += [_row(f"{group}: {k}", d) for k, d in ab[group].items()]
            sec.sub(
                f"{s['system']} · AO - TO",
                Table(["scope", "mean", "95% CI", "n", "Wilcoxon p", "Holm p"], rows),
            )
        k = report["k_of_n"].get(source, {})
        sec.blocks.append(
            Table(
                ["scenarios", "systems", "higher with audio (point)", "higher (CI above 0)"],
                [[scope, r["n"], r["k_point"], r["k_ci"]] for scope, r in k.items()],
                caption="k of n systems score higher with audio",
            )
        )
    agree = [
        [s["system"], dim, a.get("spearman"), a.get("n")]
        for s in report["systems"]
        for dim, a in (s.get("judge_vs_human") or {}).items()
    ]
    if agree:
        doc.section(
            "Judge vs people",
            Table(["system", "dimension", "Spearman", "answers"], agree, left=2),
            Text(
                "Spearman of the judge's scores with people's rater-controlled scores "
                "(not estimable when either side is constant).",
                "note",
            ),
        )
    worst = doc.section("Worst items (fewest checklist lines met)")
    for s in report["systems"]:
        for w in s.get("worst") or []:
            worst.sub(
                f"{s['system']} · {w['item']} ({w['dimension']})",
                Text(f"Caller: \u201c{w['said']}\u201d"),
                Table(
                    ["mode", "checklist", "answer"],
                    [[m.upper(), w[m]["checklist"], w[m]["text"]] for m in ("ao", "to")],
                ),
                _players(w, s["system"], store),
            )
    prof = doc.section("Profile (checklist proxy, mean per item)", _picture(report))
    for s in report["systems"]:
        p = s["profile"].get("checklist", {})
        rows = [
            [
                dim,
                *(
                    f"{fmt((p.get(m) or {}).get(dim, {}).get('mean'))} {_ci((p.get(m) or {}).get(dim, {}))}"
                    for m in ("ao", "to")
                ),
            ]
            for dim in DIMENSIONS
        ]
        prof.sub(s["system"], Table(["dimension", "AO", "TO"], rows))
    doc.sections.append(
        Section(
            "Counts",
            [
                Table(
                    ["system", "records by status", "empty", "refusals", "text only"],
                    [
                        [
                            s["system"],
                            ", ".join(f"{k} {v}" for k, v in s["status"].items()),
                            s["empty"],
                            s["refusals"],
                            s["text_only"],
                        ]
                        for s in report["systems"]
                    ],
                )
            ],
        )
    )
    return doc


def _picture(report: dict[str, Any]) -> Chart | None:
    """AO and TO side by side per dimension (checklist proxy, 95% CI whiskers)."""
    from voxassay.report.html import bar_chart

    dims = [
        d
        for d in DIMENSIONS
        if any(
            ((s["profile"].get("checklist") or {}).get("ao") or {}).get(d, {}).get("n")
            for s in report["systems"]
        )
    ]
    if not dims:
        return None
    series = []
    for s in report["systems"]:
        p = s["profile"].get("checklist") or {}
        for m in ("ao", "to"):
            pts = [((p.get(m) or {}).get(d) or {}) for d in dims]
            series.append(
                (
                    f"{short_name(s['system'])} {m.upper()}",
                    [(x.get("mean"), x.get("ci_low"), x.get("ci_high")) for x in pts],
                )
            )
    svg = bar_chart(dims, series, title="AO vs TO", x_label="checklist lines met (share)")
    return Chart(svg, caption="Answers from the audio (AO) and from the transcript (TO).")


def _players(w: dict[str, Any], system: str, store: RunStore | None) -> Players | None:
    """The caller and both answers, playable (files of the run folder)."""
    if store is None:
        return None
    from voxassay.core.audio import load_audio

    def loader(rel: str) -> Any:
        def load() -> tuple[Any, int]:
            a = load_audio(store.path / rel)
            return a.samples, a.sr

        return load

    clips = [Clip("caller", f"{w['item']}-caller", loader(w["input"]), priority=0)]
    for m in ("ao", "to"):
        if w[m].get("audio"):
            clips.append(
                Clip(
                    f"answer ({m.upper()})",
                    f"{w['item']}-{m}-{system}",
                    loader(w[m]["audio"]),
                    priority=0,
                )
            )
    return Players(clips)


def render_markdown(report: dict[str, Any]) -> str:
    return to_markdown(document(report))


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    return to_html(document(report, store))


def profile(report: dict[str, Any]) -> list[ProfileEntry]:
    """STS cells of the capability profile: AO checklist proxy per dimension."""
    out = []
    for s in report["systems"]:
        p = (s["profile"].get("checklist") or {}).get("ao") or {}
        for dim in DIMENSIONS:
            d = p.get(dim) or {}
            if not d.get("n"):
                continue  # no item of this dimension in the run
            out.append(
                ProfileEntry(
                    "STS",
                    short_name(s["system"]),
                    f"{dim} (AO, checklist)",
                    d.get("mean"),
                    d.get("ci_low"),
                    d.get("ci_high"),
                    d.get("n"),
                )
            )
    return out
