"""Self-contained HTML building blocks: page, tables, inline SVG charts (audio: ``clips.py``).

Nothing here references the network: styles are inline, charts are SVG.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

PALETTE = ["#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#222;padding:0 1rem;line-height:1.45;overflow-wrap:break-word}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.05rem}table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.88rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.l,th.l{text-align:left}.muted{color:#777;font-size:.85rem}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4rem .7rem;margin:.5rem 0}
.bad{color:#b00020}.ok{color:#0a7d28}code{background:#f6f6f6;padding:0 .2rem}
.align span{padding:0 .15rem;border-radius:3px}.sub{background:#ffe0b2}.del{background:#ffcdd2;text-decoration:line-through}
.ins{background:#c8e6c9}.merge{background:#e1f5fe}audio{height:2rem;vertical-align:middle}
.tw{overflow-x:auto;max-width:100%}pre{overflow-x:auto;max-width:100%}svg{max-width:100%;height:auto}
nav.toc{background:#fafafa;border:1px solid #e5e5e5;padding:.4rem 1rem;margin:1rem 0;font-size:.9rem}nav.toc ul{margin:.2rem 0;padding-left:1.2rem}.verdict{border:2px solid #555;border-radius:4px;padding:.5rem .9rem;margin:.8rem 0}.verdict.ship{border-color:#0a7d28}.verdict.roll_back{border-color:#b00020}.verdict.keep_in_shadow,.verdict.collect_more_data{border-color:#f0b400}.summary{background:#f7f9ff;border:1px solid #dfe6f7;padding:.3rem 1rem;margin:1rem 0}
"""
"""``.tw`` wraps every table: a table wider than the page scrolls inside it, the page never
scrolls sideways (so do ``pre`` blocks; SVG charts scale down; long words break)."""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def fmt(value: Any, digits: int = 3) -> str:
    """Numbers with fixed digits; None/NaN as an en dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return f"{value:.{digits}f}"
    return str(value)


NOT_ESTIMABLE = "not estimable"


def ci_text(lo: Any, hi: Any, digits: int = 3) -> str:
    """A 95 % interval as ``[lo, hi]``; ``not estimable`` when a bound is missing or NaN (a
    resampling interval from fewer than 2 units, a zero denominator): the one rule for every
    view, so a point estimate is never printed as an interval."""

    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and not math.isfinite(v))

    if missing(lo) or missing(hi):
        return NOT_ESTIMABLE
    return f"[{fmt(lo, digits)}, {fmt(hi, digits)}]"


def page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>{body}</body></html>"
    )


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    left: int = 1,
    shade: Sequence[Sequence[float | None]] | None = None,
) -> str:
    """An HTML table inside a horizontal scroll box (``div.tw``: a wide table scrolls there,
    not the page); the first ``left`` columns are left-aligned. Cells are escaped unless they
    are :class:`Raw`. ``shade``: per cell a score in [0, 1] coloured red (0) to green (1)."""
    head = "".join(
        f"<th class='{'l' if i < left else ''}'>{esc(h)}</th>" for i, h in enumerate(headers)
    )
    body = []
    for r, row in enumerate(rows):
        cells = []
        for i, c in enumerate(row):
            text = c.html if isinstance(c, Raw) else esc(fmt(c))
            score = shade[r][i] if shade and r < len(shade) and i < len(shade[r]) else None
            style = f" style='background:{heat_colour(score)}'" if score is not None else ""
            cells.append(f"<td class='{'l' if i < left else ''}'{style}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<div class='tw'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def heat_colour(score: float) -> str:
    """Red (0) through yellow to green (1) as an HSL background."""
    return f"hsl({min(1.0, max(0.0, score)) * 120:.0f},65%,78%)"


class Raw:
    """Pre-rendered HTML for a table cell."""

    def __init__(self, html_text: str) -> None:
        self.html = html_text


def bar_chart(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[tuple[float | None, float | None, float | None]]]],
    *,
    title: str = "",
    x_label: str = "",
    width: int = 760,
) -> str:
    """Horizontal grouped bars with CI whiskers as inline SVG.

    ``series`` is ``[(name, [(value, lo, hi) per category])]``; missing values are skipped.
    """
    n_cat, n_ser = len(categories), max(1, len(series))
    bar_h, gap, left, right, top = 12, 10, 170, 30, 28 if title else 8
    group_h = n_ser * bar_h + gap
    plot_w = width - left - right
    longest = max((len(name) for name, _ in series), default=1)
    per_row = max(1, min(3, int(plot_w // (longest * 6.5 + 24))))
    legend_h = 18 * math.ceil(n_ser / per_row)
    height = top + n_cat * group_h + 30 + legend_h
    vals = [v for _, pts in series for p in pts for v in p if v is not None and math.isfinite(v)]
    ticks = nice_ticks(max(vals) if vals else 1.0)
    vmax = ticks[-1]

    def x(v: float) -> float:
        return left + plot_w * max(0.0, v) / vmax

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-size='11'>"
    ]
    if title:
        parts.append(f"<text x='{left}' y='16' font-weight='bold'>{esc(title)}</text>")
    for i, cat in enumerate(categories):
        y0 = top + i * group_h
        label = cat if len(cat) <= 26 else cat[:25] + "…"
        parts.append(
            f"<text x='{left - 6}' y='{y0 + n_ser * bar_h / 2 + 4}' text-anchor='end'>"
            f"<title>{esc(cat)}</title>{esc(label)}</text>"
        )
        for j, (_, pts) in enumerate(series):
            value, lo, hi = pts[i] if i < len(pts) else (None, None, None)
            if value is None or not math.isfinite(value):
                continue
            y = y0 + j * bar_h
            color = PALETTE[j % len(PALETTE)]
            parts.append(
                f"<rect x='{left}' y='{y + 1}' width='{x(value) - left:.1f}' height='{bar_h - 2}' fill='{color}' opacity='.8'>"
                f"<title>{esc(cat)}: {value:.4f}</title></rect>"
            )
            if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
                yc = y + bar_h / 2
                parts.append(
                    f"<line x1='{x(lo):.1f}' x2='{x(hi):.1f}' y1='{yc}' y2='{yc}' stroke='#222'/>"
                    f"<line x1='{x(lo):.1f}' x2='{x(lo):.1f}' y1='{yc - 3}' y2='{yc + 3}' stroke='#222'/>"
                    f"<line x1='{x(hi):.1f}' x2='{x(hi):.1f}' y1='{yc - 3}' y2='{yc + 3}' stroke='#222'/>"
                )
    axis_y = top + n_cat * group_h
    parts.append(
        f"<line x1='{left}' x2='{left + plot_w}' y1='{axis_y}' y2='{axis_y}' stroke='#999'/>"
    )
    for v in ticks:
        parts.append(
            f"<text x='{x(v):.1f}' y='{axis_y + 14}' text-anchor='middle' fill='#555'>"
            f"{tick_label(v, ticks)}</text>"
        )
    if x_label:
        parts.append(
            f"<text x='{left + plot_w / 2}' y='{axis_y + 27}' text-anchor='middle'>{esc(x_label)}</text>"
        )
    for j, (name, _) in enumerate(series):
        lx = left + (j % per_row) * (plot_w / per_row)
        ly = axis_y + 34 + 18 * (j // per_row)
        parts.append(
            f"<rect x='{lx:.1f}' y='{ly}' width='10' height='10' fill='{PALETTE[j % len(PALETTE)]}'/>"
            f"<text x='{lx + 14:.1f}' y='{ly + 9}'>{esc(name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def nice_ticks(vmax: float, target: int = 5) -> list[float]:
    """Axis ticks at round numbers from 0: a step of 1, 2, 2.5 or 5 times a power of ten,
    about ``target`` steps, the last tick at or above ``vmax``."""
    if not math.isfinite(vmax) or vmax <= 0:
        return [0.0, 1.0]
    raw = vmax / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(vmax / step - 1e-9)
    return [round(k * step, 12) for k in range(n + 1)]


def tick_label(v: float, ticks: Sequence[float]) -> str:
    """A tick's text with just the decimals its step needs."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (
        1 if round(step / 10 ** math.floor(math.log10(step)), 6) == 2.5 else 0
    )
    return f"{v:.{decimals}f}"


def timeline_svg(
    lanes: Sequence[tuple[str, Sequence[tuple[float, float, str]]]],
    markers: Sequence[tuple[float, str, str]] = (),
    *,
    duration_s: float | None = None,
    width: int = 1000,
    title: str = "",
) -> str:
    """A two-or-more-lane timeline as inline SVG.

    ``lanes``: ``[(name, [(start_s, end_s, label), ...])]``, one row each (e.g. user and agent
    speech). ``markers``: ``[(t_s, label, colour)]`` vertical lines across all lanes (events
    such as a barge-in onset or ``playback.stopped``); hover shows the label.
    """
    left, right, lane_h, gap = 90, 20, 26, 8
    top = 24 if title else 6
    ends = [e for _, segs in lanes for _, e, _ in segs] + [t for t, _, _ in markers]
    span = duration_s or (max(ends) if ends else 1.0) or 1.0
    plot_w = width - left - right
    height = top + len(lanes) * (lane_h + gap) + 28

    def x(t: float) -> float:
        return left + plot_w * max(0.0, min(t, span)) / span

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-size='11'>"
    ]
    if title:
        parts.append(f"<text x='{left}' y='15' font-weight='bold'>{esc(title)}</text>")
    for i, (name, segs) in enumerate(lanes):
        y = top + i * (lane_h + gap)
        color = PALETTE[i % len(PALETTE)]
        parts.append(
            f"<rect x='{left}' y='{y}' width='{plot_w}' height='{lane_h}' fill='#f6f6f6'/>"
            f"<text x='{left - 6}' y='{y + lane_h / 2 + 4}' text-anchor='end'>{esc(name)}</text>"
        )
        for start, end, label in segs:
            w = max(1.0, x(end) - x(start))
            parts.append(
                f"<rect x='{x(start):.1f}' y='{y + 3}' width='{w:.1f}' height='{lane_h - 6}' "
                f"fill='{color}' opacity='.75'><title>{esc(label)} {start:.3f}-{end:.3f} s"
                "</title></rect>"
            )
    bottom = top + len(lanes) * (lane_h + gap)
    for t, label, colour in markers:
        parts.append(
            f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='{top}' y2='{bottom - gap}' "
            f"stroke='{colour}' stroke-width='1.5'><title>{esc(label)} at {t:.3f} s</title></line>"
        )
    ticks = [t for t in nice_ticks(span, 10) if t <= span + 1e-9]
    for t in ticks:
        parts.append(
            f"<text x='{x(t):.1f}' y='{bottom + 12}' text-anchor='middle' fill='#555'>"
            f"{tick_label(t, ticks)}</text>"
        )
    parts.append(f"<text x='{left + plot_w / 2}' y='{bottom + 25}' text-anchor='middle'>s</text>")
    parts.append("</svg>")
    return "".join(parts)
