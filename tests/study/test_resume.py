"""Resume: a half-done session continues at the same place after a reload, in a new browser
(the invite link again) and after a server restart; earlier answers can be revised."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.study.helpers import (
    Served,
    answer_for,
    pass_gates,
    read_invites,
    write_items,
    write_questions,
)
from voxassay.study.create import create_study
from voxassay.study.store import StudyStore

pytestmark = pytest.mark.live


def tasks_of(study_dir: Path, rater: str) -> list[str]:
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        return [a for a, r, *_ in store.assignments() if r == rater]
    finally:
        store.close()


def current_task(html: str) -> str:
    m = re.search(r'name="task" value="(t[0-9a-f]+)"', html)
    assert m, html[:500]
    return m.group(1)


def test_resume_after_reload_new_browser_and_restart(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=3, systems=("ref", "lyra_6"))
    q = write_questions(tmp_path / "q.yaml", gold={"traps": 1})
    sdir = create_study([items], q, tmp_path / "out", raters=3).path
    tok = read_invites(sdir)["r02"]
    server = Served(sdir)
    try:
        browser = httpx.Client(base_url=server.url, timeout=10)
        assert browser.get(f"/i/{tok}").status_code == 303
        pass_gates(
            httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tok}"}), sdir
        )
        page = browser.get("/rate").text
        total = int(re.search(r"of (\d+)", page).group(1))  # type: ignore[union-attr]
        answered = []
        for _ in range(total // 2):
            state = browser.get("/api/state").json()
            task = state["task"]
            form = {f"e.{k}": str(v) for k, v in answer_for(task).items()}
            r = browser.post(
                "/rate/answer", data={"task": task["id"], "response_ms": "2500", **form}
            )
            assert r.status_code == 303
            answered.append(task["id"])
        here = current_task(browser.get("/rate").text)
        assert here not in answered
        assert current_task(browser.get("/rate").text) == here  # reload: same item
        # a new browser (no cookie) through the invite link lands on the same item
        other = httpx.Client(base_url=server.url, timeout=10)
        other.get(f"/i/{tok}")
        assert current_task(other.get("/rate").text) == here
        assert f"Item {len(answered) + 1} of {total}" in other.get("/rate").text
        # the previous item can be revised; the current one stays the same
        prev = browser.get(f"/rate/task/{answered[-1]}").text
        assert 'name="revise" value="1"' in prev and " checked" in prev
        assert f"/rate/task/{answered[-2]}" in prev  # and the one before it
        earlier = browser.get(f"/api/task/{answered[-1]}").json()
        assert earlier["answered"] and earlier["id"] == answered[-1]
        r = browser.post(
            "/api/answer",
            json={"task": answered[-1], "answers": answer_for(earlier, 1), "revise": True},
        )
        assert r.status_code == 200 and r.json()["revision"] == 1
        assert browser.get(f"/api/task/{answered[-1]}").json()["answered"] == answer_for(earlier, 1)
        assert current_task(browser.get("/rate").text) == here
        # a task further ahead cannot be opened out of order; unknown ones do not exist
        ahead = next(t for t in tasks_of(sdir, "r02") if t not in answered and t != here)
        assert browser.get(f"/api/task/{ahead}").status_code == 409
        assert browser.get(f"/rate/task/{ahead}").status_code == 303
        assert browser.get("/rate/task/t" + "0" * 16).status_code == 404
    finally:
        server.stop()
    # restart: the store brings everything back
    server = Served(sdir)
    try:
        c = server.client(tok)
        state = c.get("/api/state").json()
        assert state["stage"] == "rating" and state["task"]["id"] == here
        assert state["progress"]["done"] == len(answered)
        while state["stage"] == "rating":
            r = c.post(
                "/api/answer",
                json={"task": state["task"]["id"], "answers": answer_for(state["task"])},
            )
            assert r.status_code == 200
            state = c.get("/api/state").json()
        assert state["stage"] == "done" and state["progress"]["done"] == total
    finally:
        server.stop()
    store = StudyStore.for_study(sdir, readonly=True)
    try:
        mine = [r for r in store.ratings() if r["rater"] == "r02"]
        assert {r["revision"] for r in mine} == {0, 1}
        assert store.history_count() == len(mine) + sum(r["revision"] for r in mine)
        assert any(r["response_ms"] == 2500 for r in mine)
    finally:
        store.close()
