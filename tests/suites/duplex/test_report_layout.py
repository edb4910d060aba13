"""The bundle report's HTML never scrolls the page sideways: every table sits in a scroll box
(``div.tw``, ``overflow-x: auto``), checked in the markup and, when a headless Chromium is
installed, by measuring the rendered page at 1280 px."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.suites.duplex.test_bundle import L3, build_bundle, invoke, kit

pytestmark = pytest.mark.browser

LONG_ID = "d02-bargein-" + "x" * 180
"""A session id too long to wrap: the sessions table gets wider than any page."""


class _TableCheck(HTMLParser):
    """Every ``<table>`` and whether a ``div.tw`` encloses it."""

    VOID = frozenset(("meta", "br", "img", "input", "hr", "link", "source", "col", "wbr", "area"))

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.tables: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        cls = dict(attrs).get("class") or ""
        if tag == "table":
            self.tables.append(any(t == "div" and "tw" in c.split() for t, c in self.stack))
        self.stack.append((tag, cls))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kit()
    root = tmp_path_factory.mktemp("layout")
    build_bundle(
        root / "in" / "d02",
        "d02_bargein_cut_200",
        session_id=LONG_ID,
        provenance=L3,
        decisions={"u2": "interrupt"},
        final_state={"ticket": "closed"},  # a task failure: slices and their tables
    )
    build_bundle(
        root / "in" / "d06", "d06_backchannel_agent_wrongly_stops", decisions={"bc1": "interrupt"}
    )
    path, _, _ = invoke(["duplex", "score", str(root / "in"), "--out", str(root / "runs")])
    assert path is not None
    return path / "report.html"


def test_every_table_is_in_a_scroll_box(report_html: Path) -> None:
    text = report_html.read_text(encoding="utf-8")
    check = _TableCheck()
    check.feed(text)
    assert len(check.tables) >= 8
    assert all(check.tables), f"{check.tables.count(False)} table(s) outside div.tw"
    css = re.search(r"<style>(.*?)</style>", text, re.S)
    assert css and ".tw{overflow-x:auto" in css.group(1)
    assert "<link" not in text and "<script" not in text  # self-contained


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


_MEASURE = """<script>window.addEventListener('load', function () {
  var d = document.documentElement, wide = 0;
  document.querySelectorAll('table').forEach(function (t) {
    if (t.getBoundingClientRect().width > d.clientWidth) { wide += 1; }
  });
  var p = document.createElement('pre');
  p.id = 'measure';
  p.textContent = 'MEASURE ' + d.scrollWidth + ' ' + d.clientWidth + ' ' + wide;
  document.body.appendChild(p);
});</script>"""


def test_page_does_not_scroll_sideways_at_1280px(report_html: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless chromium installed (the markup test still runs)")
    probe = tmp_path / "probe.html"
    text = report_html.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    cmd = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,900",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probe.as_uri(),
    ]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("chromium did not finish within 120 s")
    m = re.search(r"MEASURE (\d+) (\d+) (\d+)", res.stdout)
    if m is None:
        pytest.skip(f"chromium rendered nothing measurable: {res.stderr[-300:]}")
    scroll, client, wide = (int(x) for x in m.groups())
    assert client == 1280
    assert wide >= 1, "no table is wider than the page: the check would prove nothing"
    assert scroll <= client, f"the page scrolls sideways: scrollWidth {scroll} > {client}"
