"""The rating app under load: 50 concurrent simulated raters against a real server process.

A study (300 items of 3 systems, 5 raters per item, traps, a headphone check, generated
audio) is served by `voxassay study serve` on an ephemeral loopback port. Fifty raters, each
with its own connection, open their invite link, pass the headphone check and then loop:
fetch the state, download the item's audio, wait a short think time, submit the answer.
Measured per submit: the time from sending the POST to its acknowledgement (the server
answers only after the rating is committed with a full sync). After every rater is done the
server is stopped normally and the store is read: the number of stored ratings must equal
the acknowledged ones, and each acknowledged rating must be there.

Targets: submit latency P95 < 100 ms; zero lost ratings. Exit 1 when a target fails.

Run: python benchmarks/bench_study_server.py [--raters 50] [--think-ms 0:40] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
TARGET_P95_MS = 100.0


def make_study(tmp: Path, n_groups: int, raters: int, per_item: int) -> Path:
    from voxassay.study.create import create_study

    rng = np.random.default_rng(0)
    lines = []
    for g in range(n_groups):
        for s, f0 in enumerate((140.0, 180.0, 220.0)):
            path = tmp / "audio" / f"g{g}-s{s}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            t = np.arange(int(0.4 * 16000)) / 16000
            x = 0.1 * np.sin(2 * np.pi * f0 * t) + 0.01 * rng.standard_normal(t.size)
            sf.write(path, x.astype(np.float32), 16000)
            lines.append(
                {"id": f"g{g}-s{s}", "system": f"sys{s}", "audio": str(path), "group": f"g{g}"}
            )
    items = tmp / "items.jsonl"
    items.write_text("".join(json.dumps(x) + "\n" for x in lines))
    q = tmp / "q.yaml"
    q.write_text(
        "title: load test\n"
        "evals:\n"
        "  - {id: quality, dimension: quality, kind: likert, question: 'Quality?',"
        " scale: {min: 1, max: 5}}\n"
        "  - {id: clarity, dimension: clarity, kind: likert, question: 'Clarity?',"
        " scale: {min: 1, max: 5}}\n"
        "gold: {traps: 2}\n"
        "headphone_check: {n_trials: 3, pass_min: 3}\n"
        "profile: false\n"
    )
    return create_study([items], q, tmp / "studies", raters=raters, raters_per_item=per_item).path


def start_server(study_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voxassay.cli.main",
            "study",
            "serve",
            str(study_dir),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"server did not start: {url!r}")
    return proc, url


class Conn:
    """A minimal keep-alive HTTP/1.1 client (one connection per rater): the load generator
    must cost far less CPU than the server, or it measures itself."""

    def __init__(self, url: str, token: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.auth = f"Authorization: Bearer {token}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.auth}"
            f"Content-Length: {len(body)}\r\n"
            + ("Content-Type: application/json\r\n" if body else "")
            + "\r\n"
        )
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            if line[:15].lower() == "content-length:":
                length = int(line[15:])
        data = await self.reader.readexactly(length) if length else b""
        return status, data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def rater(
    url: str,
    token: str,
    trials: dict[str, int],
    think: tuple[float, float],
    seed: int,
    latencies: list[float],
    acked: list[tuple[str, str, int]],
    errors: list[str],
) -> None:
    rng = random.Random(seed)
    c = Conn(url, token)
    try:
        status, _ = await c.request("GET", f"/i/{token}")
        if status != 303:
            errors.append(f"invite {status}")
            return
        status, _ = await c.request(
            "POST", "/api/headphones", json.dumps({"answers": trials}).encode()
        )
        if status != 200:
            errors.append(f"headphones {status}")
            return
        while True:
            status, data = await c.request("GET", "/api/state")
            state = json.loads(data)
            if state["stage"] != "rating":
                return
            task = state["task"]
            for a in task["audio"]:
                await c.request("GET", a["url"])
            await asyncio.sleep(rng.uniform(*think))
            answers = {e["id"]: rng.choice(e["answers"]) for e in task["evals"]}
            body = {"task": task["id"], "answers": answers, "response_ms": rng.randint(800, 9000)}
            payload = json.dumps(body).encode()
            t0 = time.perf_counter()
            status, data = await c.request("POST", "/api/answer", payload)
            dt = time.perf_counter() - t0
            if status != 200:
                errors.append(f"answer {status}: {data[:100]!r}")
                return
            latencies.append(dt * 1000)
            acked.append((task["id"], ",".join(sorted(answers)), len(answers)))
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        await c.close()


async def run_raters(
    url: str, tokens: dict[str, str], trials: dict[str, int], think: tuple[float, float]
) -> tuple[list[float], list[tuple[str, str, int]], list[str], float]:
    latencies: list[float] = []
    acked: list[tuple[str, str, int]] = []
    errors: list[str] = []
    t0 = time.perf_counter()
    await asyncio.gather(
        *(
            rater(url, tok, trials, think, n, latencies, acked, errors)
            for n, tok in enumerate(tokens.values())
        )
    )
    return latencies, acked, errors, time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, round(q / 100 * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raters", type=int, default=50)
    ap.add_argument("--think-ms", default="0:40", help="uniform think time range MIN:MAX (ms)")
    ap.add_argument("--quick", action="store_true", help="fewer items (a smoke run)")
    args = ap.parse_args()
    lo, hi = (float(x) / 1000 for x in args.think_ms.split(":"))
    n_groups = 40 if args.quick else 100
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        study_dir = make_study(tmp, n_groups, args.raters, per_item=5)
        study = json.loads((study_dir / "study.json").read_text())
        trials = {t["id"]: t["answer"] for t in study["headphone_check"]["trials"]}
        tokens: dict[str, Any] = {}
        for line in (study_dir / "invites.txt").read_text().splitlines():
            if line.startswith("r"):
                name, link = line.split()
                tokens[name] = link.rsplit("/", 1)[1]
        proc, url = start_server(study_dir)
        try:
            latencies, acked, errors, wall = asyncio.run(run_raters(url, tokens, trials, (lo, hi)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        with sqlite3.connect(study_dir / "study.db") as conn:
            stored = conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0]
            stored_items = {
                row[0]
                for row in conn.execute(
                    "SELECT a.id FROM assignments a JOIN ratings r "
                    "ON r.rater = a.rater AND r.item = a.item"
                )
            }
            n_tasks = conn.execute("SELECT COUNT(*) FROM assignments").fetchone()[0]
    acked_ratings = sum(n for _, _, n in acked)
    missing = sum(1 for task, _, _ in acked if task not in stored_items)
    lost = acked_ratings - stored + missing
    print(f"raters: {len(tokens)} concurrent, think time {args.think_ms} ms, loopback")
    print(
        f"submits acknowledged: {len(acked)} of {n_tasks} tasks ({acked_ratings} ratings) "
        f"in {wall:.1f} s ({len(acked) / wall:.0f} submits/s)"
    )
    if latencies:
        print(
            f"submit latency ms: P50 {statistics.median(latencies):.1f}  "
            f"P95 {pct(latencies, 95):.1f}  P99 {pct(latencies, 99):.1f}  "
            f"max {max(latencies):.1f}  (target P95 < {TARGET_P95_MS:.0f})"
        )
    print(
        f"ratings in the store after shutdown: {stored}; acknowledged: {acked_ratings}; "
        f"lost: {lost}"
    )
    if errors:
        print(f"errors: {len(errors)} (first: {errors[:3]})")
    ok = (
        bool(latencies)
        and pct(latencies, 95) < TARGET_P95_MS
        and lost == 0
        and not errors
        and len(acked) == n_tasks
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
