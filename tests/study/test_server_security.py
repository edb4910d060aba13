"""The rating app's security against a real server process on loopback: tokens, cross-rater
access, path traversal, input validation, admin-only pages, and no system names leaked."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.study.helpers import (
    LIKERT,
    PAIRWISE,
    Served,
    answer_for,
    pass_gates,
    read_invites,
    study_json,
    write_items,
    write_questions,
)
from voxassay.study.create import create_study

pytestmark = pytest.mark.live

SYSTEM_WORDS = ("lyra", "audiodec", "_trap", "stim_0", ".flac", "neural_codec")


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sec")
    items = write_items(tmp / "items.jsonl", n_signals=3, systems=("ref", "lyra_6"))
    q = write_questions(
        tmp / "q.yaml",
        evals=[LIKERT, PAIRWISE],
        gold={"traps": 1},
        headphone_check={"n_trials": 3, "pass_min": 3, "attempts": 2},
    )
    return create_study([items], q, tmp / "out", raters=4, seed=3).path


@pytest.fixture(scope="module")
def server(study_dir: Path) -> Iterator[Served]:
    s = Served(study_dir)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tokens(study_dir: Path) -> dict[str, str]:
    return read_invites(study_dir)


def tasks_of(study_dir: Path, rater: str) -> list[str]:
    import sqlite3

    with sqlite3.connect(study_dir / "study.db") as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT id FROM assignments WHERE rater = ? ORDER BY position", (rater,)
            )
        ]


def no_system_names(text: str) -> None:
    low = text.lower()
    for word in SYSTEM_WORDS:
        assert word not in low, f"{word!r} leaked: {text[:300]}"


def test_missing_and_wrong_tokens(server: Served, study_dir: Path) -> None:
    task = tasks_of(study_dir, "r01")[0]
    paths = ["/rate", "/api/state", f"/audio/{task}/x", f"/rate/task/{task}", "/hp/cal"]
    anon = httpx.Client(base_url=server.url, timeout=10)
    for p in paths:
        assert anon.get(p).status_code == 401, p
    for p in ("/admin", "/admin/export.csv", "/api/admin/status", "/admin/subjective.json"):
        assert anon.get(p).status_code == 401, p
    assert anon.post("/api/answer", json={"task": task, "answers": {}}).status_code == 401
    bad_tokens = [
        "r01.wrongsecret",
        "r01",
        "r01.",
        ".abc",
        "r99.abc",
        "admin.abc",
        "a.b.c",
        "x" * 5000,
        "r01.\u00e9\u00e9",
    ]
    for tok in bad_tokens:
        auth = f"Bearer {tok}".encode()
        c = httpx.Client(base_url=server.url, timeout=10, headers={"Authorization": auth})
        for p in paths:
            assert c.get(p).status_code == 401, (tok[:20], p)
        assert c.get("/admin").status_code == 401
    for tok in bad_tokens[:5]:
        assert anon.get(f"/i/{tok}").status_code == 401
        assert anon.get(f"/a/{tok}").status_code == 401
    # a cookie with a wrong token is refused the same way
    c = httpx.Client(base_url=server.url, timeout=10, cookies={"vx_rater": "r01.nope"})
    assert c.get("/rate").status_code == 401


def test_rater_token_cannot_reach_admin_or_exports(server: Served, tokens: dict[str, str]) -> None:
    with server.client(tokens["r01"]) as c:
        for p in ("/admin", "/admin/export.csv", "/api/admin/status", "/admin/subjective.json"):
            r = c.get(p)
            assert r.status_code == 403, p
            no_system_names(r.text)
    # the same through the cookie set by the invite link
    c = httpx.Client(base_url=server.url, timeout=10)
    r = c.get(f"/i/{tokens['r01']}")
    assert r.status_code == 303 and r.headers["location"] == "/rate"
    assert "httponly" in r.headers["set-cookie"].lower()
    assert c.get("/rate").status_code == 200
    assert c.get("/admin").status_code == 403
    # the admin token is not a rater token
    with server.client(tokens["admin"]) as a:
        assert a.get("/api/state").status_code == 401
        assert a.get("/api/admin/status").status_code == 200


def test_cross_rater_access_is_refused(
    server: Served, study_dir: Path, tokens: dict[str, str]
) -> None:
    mine = set(tasks_of(study_dir, "r02"))
    other = next(t for t in tasks_of(study_dir, "r01") if t not in mine)
    with server.client(tokens["r02"]) as c:
        pass_gates(c, study_dir)
        for slot in ("x", "a", "b"):
            assert c.get(f"/audio/{other}/{slot}").status_code == 404
        assert c.get(f"/rate/task/{other}").status_code == 404
        r = c.post("/api/answer", json={"task": other, "answers": {"quality": 3}})
        assert r.status_code == 404
        state = c.get("/api/state").json()
        assert other not in str(state)


def test_path_traversal_and_unknown_slots(
    server: Served, study_dir: Path, tokens: dict[str, str]
) -> None:
    task = tasks_of(study_dir, "r03")[0]
    attempts = [
        "/audio/..%2F..%2Fstudy.json/x",
        f"/audio/{task}/..%2F..%2Fstudy.json",
        f"/audio/{task}/../../study.json",
        "/audio/%2e%2e/%2e%2e/study.json",
        f"/audio/{task}/x%00",
        f"/audio/{task}/audio%2F..%2F..%2Fstudy.db",
        "/hp/..%2Fstudy.json",
        "/hp/../invites.txt",
        "/static/..%2F..%2Fstudy.json",
        "/static/%2e%2e%2fserver.py",
        "/study.json",
        "/invites.txt",
        "/audio",
    ]
    with server.client(tokens["r03"]) as c:
        pass_gates(c, study_dir)
        for p in attempts:
            r = c.get(p)
            assert r.status_code in (400, 404, 405), (p, r.status_code)
            assert "admin." not in r.text and '"items"' not in r.text
    # raw request line, no client-side normalisation
    host, port = server.url.removeprefix("http://").split(":")
    for raw in (f"/audio/{task}/../../../study.json", "/../invites.txt", "/hp/../../study.db"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                f"GET {raw} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {tokens['r03']}\r\nConnection: close\r\n\r\n".encode()
            )
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        status = data.split(b"\r\n", 1)[0]
        assert b" 200 " not in status, (raw, status)
        assert b"admin." not in data and b"token_hash" not in data


def test_answers_are_validated(server: Served, study_dir: Path, tokens: dict[str, str]) -> None:
    with server.client(tokens["r04"]) as c:
        # before the gates are passed, nothing can be rated
        first = tasks_of(study_dir, "r04")[0]
        r = c.post("/api/answer", json={"task": first, "answers": {"quality": 3}})
        assert r.status_code == 409
        pass_gates(c, study_dir)
        task = c.get("/api/state").json()["task"]
        kinds = {e["id"]: e["kind"] for e in task["evals"]}
        good = answer_for(task)
        ev = next(iter(kinds))
        bad_values: list[Any] = (
            [0, 6, 2.5, "abc", True, None, "", 10**30, [], {}, "1e400", "NaN", -1]
            if kinds[ev] == "likert"
            else ["c", 2, -1, 0.25, True, None, "", [], "A B"]
        )
        for value in bad_values:
            r = c.post("/api/answer", json={"task": task["id"], "answers": {**good, ev: value}})
            assert r.status_code == 400, (value, r.status_code, r.text)
        cases: list[tuple[Any, int]] = [
            ({"task": task["id"], "answers": {}}, 400),
            ({"task": task["id"], "answers": {**good, "other": 1}}, 400),
            ({"task": task["id"], "answers": good, "response_ms": -5}, 400),
            ({"task": task["id"], "answers": good, "response_ms": "fast"}, 400),
            ({"task": task["id"], "answers": "all good"}, 400),
            ({"task": "t0000000000000000", "answers": good}, 404),
            ({"task": None, "answers": good}, 404),
            ({"answers": good}, 404),
            ({"task": task["id"], "answers": good, "revise": True}, 409),
        ]
        for body, want in cases:
            r = c.post("/api/answer", json=body)
            assert r.status_code == want, (body, r.text)
        for raw, want in [
            (b"{not json", 400),
            (b"[1, 2]", 400),
            (b"\xff\xfe", 400),
            (b"x" * 70_000, 413),
        ]:
            r = c.post("/api/answer", content=raw, headers={"content-type": "application/json"})
            assert r.status_code == want, (raw[:10], r.status_code)
        # a valid answer is stored once; a second submit needs the revise flag
        r = c.post("/api/answer", json={"task": task["id"], "answers": good, "response_ms": 4000})
        assert r.status_code == 200, r.text
        r = c.post("/api/answer", json={"task": task["id"], "answers": good})
        assert r.status_code == 409
        r = c.post("/api/answer", json={"task": task["id"], "answers": good, "revise": True})
        assert r.status_code == 200 and r.json()["revision"] == 1
        # a form post from another site is refused
        r = c.post(
            "/rate/answer",
            data={"task": task["id"], "e.quality": "3"},
            headers={"Origin": "http://evil.example"},
        )
        assert r.status_code == 403
        assert c.get("/healthz").status_code == 200  # still serving after all of that


def test_form_errors_render_the_page(
    server: Served, study_dir: Path, tokens: dict[str, str]
) -> None:
    with server.client(tokens["r03"]) as c:
        pass_gates(c, study_dir)
        task = c.get("/api/state").json()["task"]
        r = c.post("/rate/answer", data={"task": task["id"], "e.quality": "9", "e.preference": "q"})
        assert r.status_code == 400 and 'class="error"' in r.text
        assert task["id"] in r.text
        no_system_names(r.text)


def test_rater_pages_never_name_systems(
    server: Served, study_dir: Path, tokens: dict[str, str]
) -> None:
    c = httpx.Client(base_url=server.url, timeout=10)
    c.get(f"/i/{tokens['r01']}")
    pass_gates(
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['r01']}"}),
        study_dir,
    )
    seen = 0
    for _ in range(40):
        page = c.get("/rate")
        assert page.status_code == 200
        no_system_names(page.text)
        state = c.get("/api/state").json()
        no_system_names(str(state))
        if state["stage"] != "rating":
            break
        task = state["task"]
        for a in task["audio"]:
            r = c.get(a["url"])
            assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
            assert "filename" not in r.headers.get("content-disposition", "")
            no_system_names(r.content[:44].decode("latin-1"))
            seen += 1
        r = c.post(
            "/rate/answer",
            data={"task": task["id"], **{f"e.{k}": str(v) for k, v in answer_for(task).items()}},
        )
        assert r.status_code == 303
    assert seen >= 5
    assert c.get("/api/state").json()["stage"] == "done"
    for h in ("content-security-policy", "x-content-type-options", "referrer-policy"):
        assert h in c.get("/rate").headers


def test_admin_sees_completion_qc_and_exports(
    server: Served, study_dir: Path, tokens: dict[str, str]
) -> None:
    a = httpx.Client(base_url=server.url, timeout=10)
    r = a.get(f"/a/{tokens['admin']}")
    assert r.status_code == 303 and r.headers["location"] == "/admin"
    page = a.get("/admin")
    assert page.status_code == 200 and "Raters" in page.text and "r01" in page.text
    status = a.get("/api/admin/status").json()
    rows = {r["id"]: r for r in status["raters"]}
    assert rows["r01"]["completion"] == 1.0 and rows["r01"]["headphones"] == "passed"
    assert rows["r01"]["gold_n"] >= 1
    export = a.get("/admin/export.csv")
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    lines = export.text.splitlines()
    assert lines[0] == (
        "rater,item,system,eval,score,timestamp,response_ms,gold_expected,dimension,kind,system_b"
    )
    assert any(",lyra_6," in x for x in lines[1:])
    assert any(",_trap" in x for x in lines[1:])
    sub = a.get("/admin/subjective.json").json()
    assert sub["study"] == study_json(study_dir)["study_id"]


def test_failed_headphone_check_blocks(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", n_signals=1, systems=("ref", "lyra_6"))
    q = write_questions(
        tmp_path / "q.yaml",
        headphone_check={"n_trials": 2, "pass_min": 2, "attempts": 2},
        profile=False,
        gold=False,
    )
    sdir = create_study([items], q, tmp_path / "out", raters=3).path
    trials = study_json(sdir)["headphone_check"]["trials"]
    wrong = {t["id"]: (t["answer"] % 3) + 1 for t in trials}
    tok = read_invites(sdir)["r01"]
    s = Served(sdir)
    try:
        with s.client(tok) as c:
            assert c.get("/api/state").json()["stage"] == "headphones"
            r = c.post("/api/headphones", json={"answers": {trials[0]["id"]: 1}})
            assert r.status_code == 400  # every sound needs an answer
            r = c.post("/api/headphones", json={"answers": {**wrong, "zzz": 1}})
            assert r.status_code == 400
            for _ in range(2):
                r = c.post("/api/headphones", json={"answers": wrong})
                assert r.status_code == 200 and r.json()["passed"] is False
            assert c.get("/api/state").json()["stage"] == "blocked"
            assert c.post("/api/headphones", json={"answers": wrong}).status_code == 409
            task = tasks_of(sdir, "r01")[0]
            assert (
                c.post("/api/answer", json={"task": task, "answers": {"quality": 3}}).status_code
                == 409
            )
            assert "headphone" in c.get("/rate").text
    finally:
        s.stop()
