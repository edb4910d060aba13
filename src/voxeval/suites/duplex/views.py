"""Markdown and HTML views of a duplex run's Scorecard (numbers only from it): recordings runs
here, evidence-bundle runs (``mode == "bundles"``) in ``views_bundle.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voxeval.contracts.duplex.scorecard import Scorecard, SessionCard
from voxeval.core.runstore import RunStore
from voxeval.report.html import audio_player, esc, fmt, page, table, timeline_svg
from voxeval.report.markdown import md_table
from voxeval.suites.duplex.views_bundle import render_bundle_html_body, render_bundle_markdown
from voxeval.suites.duplex.views_parts import (
    LAT_HEADERS,
    RATE_HEADERS,
    as_scorecard,
    detector_line,
    given,
    latency_rows,
    rate_rows,
)


def render_markdown(report: Scorecard | Mapping[str, Any]) -> str:
    card = as_scorecard(report)
    if card.mode == "bundles":
        return render_bundle_markdown(card)
    out = [
        f"# Full-duplex turn-taking report `{card.run_id}`\n",
        detector_line(card) + "\n",
        f"> {card.evidence.note}\n",
    ]
    order = given(card, "rate_order", [])
    for s in card.systems:
        o = s.overall
        out.append(f"\n## {s.system} ({given(o, 'n_calls', 0)} calls)\n")
        out.append(md_table(LAT_HEADERS, latency_rows(o)))
        out.append("\n" + md_table(RATE_HEADERS, rate_rows(o, order)))
        if s.failures:
            out.append(
                "\nNot scored: "
                + ", ".join(f"{f['id']} ({f.get('kind')}: {f.get('message')})" for f in s.failures)
                + "\n"
            )
    out.append("\n## Calls\n")
    rows = []
    for c in card.sessions:
        turns, events = given(c, "turns", []), given(c, "events", [])
        lat = [t["response_latency_ms"] for t in turns if t.get("response_latency_ms") is not None]
        outcomes = ", ".join(f"{e['id']}: {e['kind']} → {e['outcome']}" for e in events) or "–"
        rows.append([c.id, len(turns), ", ".join(f"{v:.0f}" for v in lat) or "–", outcomes])
    out.append(md_table(["call", "turns", "response latencies (ms)", "overlaps → outcome"], rows))
    return "\n".join(out)


def render_html(report: Scorecard | Mapping[str, Any], store: RunStore | None = None) -> str:
    card = as_scorecard(report)
    title = "Full-duplex bundles" if card.mode == "bundles" else "Full-duplex turn-taking"
    return page(f"{title} · {card.run_id}", render_html_body(card, store))


def render_html_body(report: Scorecard | Mapping[str, Any], store: RunStore | None = None) -> str:
    card = as_scorecard(report)
    if card.mode == "bundles":
        return render_bundle_html_body(card, store)
    body = [
        f"<p class='muted'>Run <code>{esc(card.run_id)}</code> · metrics "
        f"<code>{esc(card.metrics_version)}</code> · generated "
        f"{esc(given(card, 'generated_at'))}</p>",
        f"<p>{esc(detector_line(card))}</p>",
        f"<div class='note'>{esc(card.evidence.note)}</div>",
    ]
    order = given(card, "rate_order", [])
    for s in card.systems:
        o = s.overall
        body.append(f"<h2>{esc(s.system)} · {given(o, 'n_calls', 0)} calls</h2>")
        body.append("<h3>Speed</h3>" + table(LAT_HEADERS, latency_rows(o)))
        body.append("<h3>Behaviour</h3>" + table(RATE_HEADERS, rate_rows(o, order)))
        if s.failures:
            body.append(
                "<h3>Not scored</h3>"
                + table(
                    ["id", "status", "kind", "message"],
                    [[f["id"], f["status"], f.get("kind"), f.get("message")] for f in s.failures],
                    left=4,
                )
            )
    body.append("<h2>Calls</h2>")
    for c in card.sessions:
        body.append(_call_html(c, store))
    return "".join(body)


def _call_html(call: SessionCard, store: RunStore | None) -> str:
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
            e.get("stop_ms"),
            e.get("observed_action"),
            ", ".join(e.get("expected_actions") or []),
            e["outcome"],
        ]
        for e in events
    ]
    turn_rows = [
        [
            t["id"],
            t["onset_s"],
            t["end_s"],
            t.get("response_latency_ms"),
            "censored" if t.get("censored") else "",
            "yes" if t.get("premature_takeover") else "",
        ]
        for t in turns
    ]
    player = _stereo_player(call.audio, store)
    return (
        f"<h3>{esc(call.id)}</h3>{player}{svg}"
        + table(["turn", "onset s", "end s", "latency ms", "", "premature takeover"], turn_rows)
        + (
            table(
                ["overlap", "kind", "onset s", "stop ms", "observed", "expected", "outcome"], rows
            )
            if rows
            else ""
        )
    )


def _stereo_player(audio: str | list[str] | None, store: RunStore | None) -> str:
    """An inline player of the call (stereo kept: user left, agent right), first 60 s."""
    if not audio:
        return ""
    if isinstance(audio, str):
        audio = [audio]
    import base64
    import io

    import numpy as np
    import soundfile as sf

    from voxeval.core.audio import Audio, resample
    from voxeval.core.errors import AudioError

    try:
        if len(audio) == 1:
            data, sr = sf.read(audio[0], dtype="float32", always_2d=True)
            chans = [Audio(data[:, i].copy(), sr) for i in range(min(2, data.shape[1]))]
        else:
            from voxeval.core.audio import load_audio

            chans = [load_audio(p, sr=None) for p in audio[:2]]
        rs = [resample(ch, 16000).samples[: 60 * 16000] for ch in chans]
        n = max(len(r) for r in rs)
        stereo = np.stack([np.pad(r, (0, n - len(r))) for r in rs], axis=1)
        buf = io.BytesIO()
        sf.write(buf, np.clip(stereo, -1, 1), 16000, format="WAV", subtype="PCM_16")
        uri = "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        return f"<p>{audio_player(uri)} <span class='muted'>user left, agent right</span></p>"
    except (OSError, RuntimeError, AudioError) as exc:
        return f"<p class='muted'>audio unavailable: {esc(exc)}</p>"
