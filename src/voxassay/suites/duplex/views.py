"""The document of a duplex run's Scorecard (numbers only from it): recordings runs here,
evidence-bundle runs (``mode == "bundles"``) in ``views_bundle.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from voxassay.contracts.duplex.scorecard import Scorecard, SessionCard
from voxassay.core.runstore import RunStore
from voxassay.report.document import (
    Clip,
    Document,
    Players,
    Section,
    Sentences,
    Table,
    Text,
    Timeline,
)
from voxassay.report.html import fmt, timeline_svg
from voxassay.report.render import to_html, to_markdown
from voxassay.report.summary import ProfileEntry, short_name
from voxassay.suites.duplex.views_bundle import bundle_document
from voxassay.suites.duplex.views_parts import (
    LAT_HEADERS,
    RATE_HEADERS,
    as_scorecard,
    detector_line,
    given,
    latency_rows,
    ms,
    problem_text,
    rate_rows,
)


def document(report: Scorecard | Mapping[str, Any], store: RunStore | None = None) -> Document:
    """The report of a duplex run as a ``Document``: bundles (``views_bundle``) or recordings."""
    card = as_scorecard(report)
    if card.mode == "bundles":
        return bundle_document(card, store)
    return recordings_document(card, store)


def render_markdown(report: Scorecard | Mapping[str, Any]) -> str:
    return to_markdown(document(report))


def render_html(report: Scorecard | Mapping[str, Any], store: RunStore | None = None) -> str:
    return to_html(document(report, store))


def recordings_document(card: Scorecard, store: RunStore | None = None) -> Document:
    """Recordings: summary, evidence and detector, per system speed and behaviour, per call
    its timeline, turn table, overlaps and (when asked for) a stereo player, then each
    system's recommendation. Per-hour rates are withheld below 10 minutes of audio."""
    from voxassay.suites.duplex.views_summary import duplex_summary, recommendation_section

    doc = Document(
        title=f"Full-duplex turn-taking · {card.run_id}",
        summary=duplex_summary(card),
        meta=f"Run {card.run_id} · metrics {card.metrics_version} · generated "
        f"{given(card, 'generated_at')}",
    )
    doc.section(
        "Run and evidence",
        Text(f"Evidence level: {card.evidence.level or 'none'}. {card.evidence.note}", "note"),
        Text(detector_line(card)),
    )
    order = given(card, "rate_order", [])
    for s in card.systems:
        o = s.overall
        sec = doc.section(f"{s.system} · {given(o, 'n_calls', 0)} calls")
        sec.sub("Speed", Table(LAT_HEADERS, latency_rows(o)))
        sec.sub("Behaviour", Table(RATE_HEADERS, rate_rows(o, order)))
        if s.failures:
            sec.sub(
                "Not scored",
                Table(
                    ["id", "status", "kind", "message"],
                    [[f["id"], f["status"], f.get("kind"), f.get("message")] for f in s.failures],
                    left=4,
                ),
            )
    calls = doc.section("Calls")
    for c in card.sessions:
        calls.children.append(_call_section(c, store))
    doc.sections.append(recommendation_section(card))
    return doc


def _call_section(call: SessionCard, store: RunStore | None) -> Section:
    segs = given(call, "segments") or {}
    events, turns = given(call, "events", []), given(call, "turns", [])
    lanes = [
        (
            "user",
            [
                (s["start_s"], s["end_s"], f"{s.get('kind', 'speech')} {s['level_dbfs']:.0f} dBFS")
                for s in segs.get("user", [])
            ],
        ),
        (
            "agent",
            [
                (s["start_s"], s["end_s"], f"{s.get('kind', 'speech')} {s['level_dbfs']:.0f} dBFS")
                for s in segs.get("agent", [])
            ],
        ),
    ]
    markers = []
    for e in events:
        good = e["outcome"] in ("correct_yield", "correct_continue")
        colour = "#0a7d28" if good else "#b00020"
        markers.append((e["onset_s"], f"{e['kind']} onset → {e['outcome']}", colour))
    for t in turns:
        if t.get("response_onset_s") is not None:
            markers.append(
                (
                    t["response_onset_s"],
                    f"{t['id']} answered after {fmt(t['response_latency_ms'], 0)} ms",
                    "#555",
                )
            )
    svg = timeline_svg(lanes, markers, duration_s=call.duration_s, title=call.id)
    rows = [
        [
            e["id"],
            e["kind"],
            e["onset_s"],
            ms(e.get("stop_ms")),
            e.get("observed_action"),
            ", ".join(e.get("expected_actions") or []),
            e["outcome"],
        ]
        for e in events
    ]
    context = {x["id"]: x.get("context") for x in given(call, "takeovers", []) or []}

    def took_over(t: dict[str, Any], where: str) -> str:
        return "yes" if any(context.get(x) == where for x in t.get("takeovers") or []) else ""

    # the same split as the rates: a takeover in a pause is premature (premature_takeover_rate),
    # one while the user was speaking is talk-over (talk_over_rate)
    turn_rows = [
        [
            t["id"],
            t["onset_s"],
            t["end_s"],
            ms(t.get("response_latency_ms")),
            "censored" if t.get("censored") else "",
            took_over(t, "pause"),
            took_over(t, "speech"),
        ]
        for t in turns
    ]
    sec = Section(call.id)
    sec.add(
        _stereo_player(call),
        Timeline(svg, text=f"timeline of {call.id}"),
        Table(
            [
                "turn",
                "onset s",
                "end s",
                "latency ms",
                "",
                "premature takeover (in a pause)",
                "talk-over (user speaking)",
            ],
            turn_rows,
        ),
        Table(["overlap", "kind", "onset s", "stop ms", "observed", "expected", "outcome"], rows)
        if rows
        else None,
        *_acoustic_blocks(call),
    )
    return sec


CHANNEL_HEADERS = [
    "side",
    "noise floor dBFS (p5 / p50 / p95)",
    "digital silence",
    "detector speech s",
    "edges placed s",
    "detector edges",
    "other side's sound",
    "hears the other side",
]


def _acoustic_blocks(call: SessionCard) -> list[Any]:
    """What the acoustic front end saw on each side, and the problems it raised."""
    acoustic = given(call, "acoustic") or {}
    rows = []
    for side in ("user", "agent"):
        r = acoustic.get(side)
        if not r:
            continue
        leaks = "; ".join(
            f"{lk['gain_db']:.0f} dB at {lk['lag_ms']:.0f} ms" for lk in r.get("leaks") or []
        )
        rows.append(
            [
                side,
                " / ".join(f"{v:.0f}" for v in r.get("noise_dbfs") or []),
                f"{100 * float(r.get('zero_share') or 0):.0f} %",
                r.get("detector_s"),
                r.get("kept_s"),
                r.get("detector_edges"),
                r.get("crosstalk"),
                leaks or "no",
            ]
        )
    problems = [problem_text(p) for p in given(call, "problems") or []]
    return [
        Table(CHANNEL_HEADERS, rows, left=1) if rows else None,
        Sentences(problems) if problems else None,
    ]


def _stereo_player(call: SessionCard) -> Players | None:
    """The call (user left, agent right, first 60 s) as a clip: a recording is left out of the
    report unless ``--audio`` asked for it (privacy)."""
    audio = call.audio
    if not audio:
        return None
    paths = [audio] if isinstance(audio, str) else list(audio)

    def load() -> tuple[np.ndarray, int]:
        import soundfile as sf

        from voxassay.core.audio import Audio, load_audio, resample

        if len(paths) == 1:
            data, sr = sf.read(paths[0], dtype="float32", always_2d=True, frames=60 * 48000)
            chans = [Audio(data[:, i].copy(), sr) for i in range(min(2, data.shape[1]))]
        else:
            chans = [load_audio(p, sr=None) for p in paths[:2]]
        rs = [resample(ch, 16000).samples[: 60 * 16000] for ch in chans]
        n = max(len(r) for r in rs)
        return np.stack([np.pad(r, (0, n - len(r))) for r in rs], axis=1), 16000

    return Players(
        [Clip(label="call", key=f"call-{call.id}", load=load, note="user left, agent right")],
        private="a recording (privacy): --audio inline or link includes it",
    )


def profile(report: Scorecard | Mapping[str, Any]) -> list[ProfileEntry]:
    """The duplex cells of the capability profile: turn decisions right (behaviour
    accuracy), goal completion and the headline response latency P50, with intervals."""
    from voxassay.suites.duplex.views_summary import headline_latency

    card = as_scorecard(report)
    out = []
    for s in card.systems:
        name = short_name(s.system)
        o = s.overall
        acc = o.rates.get("behaviour_accuracy")
        if acc is not None:
            out.append(
                ProfileEntry(
                    "Duplex",
                    name,
                    "turn decisions right",
                    acc.value,
                    acc.ci_low,
                    acc.ci_high,
                    acc.n,
                )
            )
        goal = o.task.checks.get("goal_completion") if o.task is not None else None
        if goal is not None:
            out.append(
                ProfileEntry(
                    "Duplex", name, "goal completed", goal.rate, goal.ci_low, goal.ci_high, goal.n
                )
            )
        lat = o.latencies.get(headline_latency(card))
        if lat is not None:
            ci = lat.p50_ci or [None, None]
            out.append(
                ProfileEntry(
                    "Duplex",
                    name,
                    "response P50",
                    lat.p50,
                    ci[0],
                    ci[1],
                    given(lat, "n"),
                    unit="ms",
                    higher_is_better=False,
                )
            )
    return out
