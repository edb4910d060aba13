"""Markdown and HTML views of duplex reports (numbers only from the dict): recordings runs
and evidence-bundle runs (``report["mode"] == "bundles"``)."""

from __future__ import annotations

from typing import Any

from voxeval.core.runstore import RunStore
from voxeval.report.html import audio_player, esc, fmt, page, table, timeline_svg
from voxeval.report.markdown import md_table
from voxeval.suites.duplex.views_bundle import render_bundle_html_body, render_bundle_markdown
from voxeval.suites.duplex.views_parts import (
    LAT_HEADERS,
    RATE_HEADERS,
    _detector_line,
    _latency_rows,
    _rate_rows,
)


def render_markdown(report: dict[str, Any]) -> str:
    if _is_bundles(report):
        return render_bundle_markdown(report)
    out = [
        f"# Full-duplex turn-taking report `{report['run_id']}`\n",
        _detector_line(report) + "\n",
        f"> {report['evidence']['note']}\n",
    ]
    for s in report["systems"]:
        o = s["overall"]
        out.append(f"\n## {s['system']} ({o.get('n_calls', 0)} calls)\n")
        out.append(md_table(LAT_HEADERS, _latency_rows(o)))
        out.append("\n" + md_table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", []))))
        if s["failures"]:
            out.append(
                "\nNot scored: "
                + ", ".join(
                    f"{f['id']} ({f.get('kind')}: {f.get('message')})" for f in s["failures"]
                )
                + "\n"
            )
    out.append("\n## Calls\n")
    rows = []
    for c in report["sessions"]:
        lat = [
            t["response_latency_ms"] for t in c["turns"] if t.get("response_latency_ms") is not None
        ]
        outcomes = ", ".join(f"{e['id']}: {e['kind']} → {e['outcome']}" for e in c["events"]) or "–"
        rows.append([c["id"], len(c["turns"]), ", ".join(f"{v:.0f}" for v in lat) or "–", outcomes])
    out.append(md_table(["call", "turns", "response latencies (ms)", "overlaps → outcome"], rows))
    return "\n".join(out)


def render_html(report: dict[str, Any], store: RunStore | None = None) -> str:
    if _is_bundles(report):
        return page(f"Full-duplex bundles · {report['run_id']}", render_html_body(report, store))
    return page(f"Full-duplex turn-taking · {report['run_id']}", render_html_body(report, store))


def render_html_body(report: dict[str, Any], store: RunStore | None = None) -> str:
    if _is_bundles(report):
        return render_bundle_html_body(report, store)
    body = [
        f"<p class='muted'>Run <code>{esc(report['run_id'])}</code> · metrics "
        f"<code>{esc(report['metrics_version'])}</code> · generated {esc(report.get('generated_at'))}</p>",
        f"<p>{esc(_detector_line(report))}</p>",
        f"<div class='note'>{esc(report['evidence']['note'])}</div>",
    ]
    for s in report["systems"]:
        o = s["overall"]
        body.append(f"<h2>{esc(s['system'])} · {o.get('n_calls', 0)} calls</h2>")
        body.append("<h3>Speed</h3>" + table(LAT_HEADERS, _latency_rows(o)))
        body.append(
            "<h3>Behaviour</h3>" + table(RATE_HEADERS, _rate_rows(o, report.get("rate_order", [])))
        )
        if s["failures"]:
            body.append(
                "<h3>Not scored</h3>"
                + table(
                    ["id", "status", "kind", "message"],
                    [
                        [f["id"], f["status"], f.get("kind"), f.get("message")]
                        for f in s["failures"]
                    ],
                    left=4,
                )
            )
    body.append("<h2>Calls</h2>")
    for c in report["sessions"]:
        body.append(_call_html(c, store))
    return "".join(body)


def _call_html(c: dict[str, Any], store: RunStore | None) -> str:
    segs = c.get("segments") or {}
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
    for e in c["events"]:
        good = e["outcome"] in ("correct_yield", "correct_continue")
        colour = "#0a7d28" if good else "#b00020"
        markers.append((e["onset_s"], f"{e['kind']} onset → {e['outcome']}", colour))
    for t in c["turns"]:
        if t.get("response_onset_s") is not None:
            markers.append(
                (
                    t["response_onset_s"],
                    f"{t['id']} answered after {fmt(t['response_latency_ms'], 0)} ms",
                    "#555",
                )
            )
    svg = timeline_svg(lanes, markers, duration_s=c.get("duration_s"), title=c["id"])
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
        for e in c["events"]
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
        for t in c["turns"]
    ]
    player = _stereo_player(c.get("audio"), store)
    return (
        f"<h3>{esc(c['id'])}</h3>{player}{svg}"
        + table(["turn", "onset s", "end s", "latency ms", "", "premature takeover"], turn_rows)
        + (
            table(
                ["overlap", "kind", "onset s", "stop ms", "observed", "expected", "outcome"], rows
            )
            if rows
            else ""
        )
    )


def _stereo_player(audio: list[str] | None, store: RunStore | None) -> str:
    """An inline player of the call (stereo kept: user left, agent right), first 60 s."""
    if not audio:
        return ""
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


# =========================================================================== bundle runs


def _is_bundles(report: dict[str, Any]) -> bool:
    return report.get("mode") == "bundles"
