"""End to end in a real browser: headless Debian Chromium (Playwright, its executable path)
goes through a whole rater session: invite link, profile, headphone check, every item
(likert and pairwise), a reload in the middle (resume), the end; then the store is checked."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.study.helpers import (
    LIKERT,
    PAIRWISE,
    Served,
    read_invites,
    study_json,
    write_items,
    write_questions,
)
from voxassay.study.create import create_study

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PLAY_ALL = """() => Promise.all(
  Array.from(document.querySelectorAll('audio[data-required]')).map(a => {
    a.playbackRate = 16;
    return a.play();
  }))"""


def launch(pw: Any, user_data: str) -> Any:
    return pw.chromium.launch_persistent_context(
        user_data,
        executable_path=str(CHROMIUM),
        headless=True,
        args=ARGS,
    )


def test_whole_rater_session_in_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(f"Debian chromium not installed at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    items = write_items(tmp_path / "items.jsonl", n_signals=2, systems=("ref", "lyra_6"))
    q = write_questions(
        tmp_path / "q.yaml",
        evals=[LIKERT, PAIRWISE],
        gold={"traps": 1},
        headphone_check={"n_trials": 3, "pass_min": 3},
    )
    sdir = create_study([items], q, tmp_path / "out", raters=3).path
    trials = {t["id"]: t["answer"] for t in study_json(sdir)["headphone_check"]["trials"]}
    token = read_invites(sdir)["r01"]
    server = Served(sdir)
    user_data = tempfile.mkdtemp(prefix="vx-chromium-")
    user_data2 = tempfile.mkdtemp(prefix="vx-chromium-")
    seen_tasks: list[str] = []
    reloaded = False
    try:
        with sync_api.sync_playwright() as pw:
            ctx = launch(pw, user_data)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on(
                "response",
                lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None,
            )
            page.goto(f"{server.url}/i/{token}")
            assert page.url.endswith("/rate")
            # profile
            page.select_option('select[name="f.age_band"]', "25-34")
            page.select_option('select[name="f.hearing"]', "no known hearing problems")
            page.click('#profile button[type=submit]:not([name="skip"])')
            # headphone check: the button waits until every sound was played to the end
            page.wait_for_selector("#headphones")
            # the page's script (at the end of the body) has run once the document is parsed
            page.wait_for_load_state("domcontentloaded")
            assert page.is_disabled("#headphones button[type=submit]")
            page.evaluate(PLAY_ALL)
            page.wait_for_function(
                "() => !document.querySelector('#headphones button[type=submit]').disabled",
                timeout=30_000,
            )
            for tid, answer in trials.items():
                page.check(f'input[name="h.{tid}"][value="{answer}"]')
            page.click("#headphones button[type=submit]")
            # the items
            total = None
            while True:
                page.wait_for_selector("#answer, #finished")
                page.wait_for_load_state("domcontentloaded")  # its script has run
                if page.query_selector("#finished"):
                    break
                task = page.get_attribute('input[name="task"]', "value")
                assert task is not None
                if total is None:
                    text = page.inner_text("#progress-text")
                    total = int(text.split(" of ")[1].split()[0])
                assert page.is_disabled("#submit")
                if len(seen_tasks) == 2 and not reloaded:
                    # half-way: answer one question, then reload: same item, nothing saved
                    page.check("fieldset >> nth=0 >> input >> nth=0")
                    page.reload()
                    page.wait_for_selector("#answer")
                    assert page.get_attribute('input[name="task"]', "value") == task
                    reloaded = True
                assert task not in seen_tasks
                seen_tasks.append(task)
                page.evaluate(PLAY_ALL)
                page.wait_for_function(
                    "() => !document.getElementById('submit').disabled", timeout=30_000
                )
                for fs in page.query_selector_all("#answer fieldset"):
                    choices = fs.query_selector_all("input[type=radio]")
                    choices[len(seen_tasks) % len(choices)].check()
                page.click("#submit")
            assert reloaded and total == len(seen_tasks)
            assert "Thank you" in page.inner_text("h2#finished")
            # a fresh browser profile through the same link: still done, nothing to redo
            ctx.close()
            ctx2 = launch(pw, user_data2)
            page2 = ctx2.new_page()
            page2.goto(f"{server.url}/i/{token}")
            page2.wait_for_selector("#finished")
            ctx2.close()
            assert not errors, errors
    finally:
        server.stop()
        shutil.rmtree(user_data, ignore_errors=True)
        shutil.rmtree(user_data2, ignore_errors=True)
    study = study_json(sdir)
    n_evals = {"single": 1, "pair": 1}
    kinds = {i["id"]: i["kind"] for i in study["items"]}
    with sqlite3.connect(sdir / "study.db") as conn:
        assigned = conn.execute(
            "SELECT id, item FROM assignments WHERE rater = 'r01' ORDER BY position"
        ).fetchall()
        rows = conn.execute(
            "SELECT item, eval, score, response_ms, revision FROM ratings WHERE rater = 'r01'"
        ).fetchall()
        profile = conn.execute("SELECT profile FROM raters WHERE id = 'r01'").fetchone()[0]
        hp = conn.execute("SELECT passed FROM headphone_checks WHERE rater = 'r01'").fetchall()
    assert [a for a, _ in assigned] == seen_tasks  # presented in the assigned order
    assert len(rows) == sum(n_evals[kinds[i]] for _, i in assigned)
    assert all(r[3] is not None and r[3] > 0 for r in rows)  # response times were measured
    assert all(r[4] == 0 for r in rows)  # one submit per item: the reload saved nothing
    assert '"age_band": "25-34"' in profile and hp == [(1,)]
