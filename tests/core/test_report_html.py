"""HTML building blocks render self-contained, escaped markup."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from voxassay.report.html import Raw, bar_chart, fmt, page, table, timeline_svg


def test_timeline_svg_places_segments_and_markers() -> None:
    svg = timeline_svg(
        [("user", [(0.5, 2.0, "u1 <hi>")]), ("agent", [(2.6, 5.7, "a1")])],
        [(5.5, "barge-in & stop", "#c00")],
        duration_s=10.0,
        width=1090,
    )
    root = ET.fromstring(svg)  # well-formed XML, labels escaped
    ns = "{http://www.w3.org/2000/svg}"
    rects = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    assert len(rects) == 2
    # plot is 1090 - 90 - 20 = 980 px wide for 10 s: the user segment starts at 90 + 49 px
    assert math.isclose(float(rects[0].get("x")), 139.0, abs_tol=0.1)
    assert math.isclose(float(rects[1].get("width")), 98 * 3.1, abs_tol=0.2)
    (line,) = [ln for ln in root.iter(f"{ns}line") if ln.find(f"{ns}title") is not None]
    assert math.isclose(float(line.get("x1")), 90 + 539.0, abs_tol=0.1)
    assert "barge-in & stop" in line.find(f"{ns}title").text


def test_bar_chart_and_table_escape_and_format() -> None:
    svg = bar_chart(["a<b"], [("sys&1", [(0.2, 0.1, 0.3)])])
    ET.fromstring(svg)
    html = table(["h"], [["<script>"], [Raw("<b>ok</b>")], [float("nan")]])
    assert "&lt;script&gt;" in html and "<b>ok</b>" in html and "–" in html
    # a wide table scrolls inside its box, never the page
    assert html.startswith("<div class='tw'><table>") and html.endswith("</table></div>")
    assert ".tw{overflow-x:auto" in page("t", html)
    assert fmt(0.12345) == "0.123" and fmt(None) == "–"
    assert page("t", "<p>x</p>").startswith("<!DOCTYPE html>") and "http" not in page("t", "")
