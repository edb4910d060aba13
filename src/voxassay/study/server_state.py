"""A rating study's server state: its store, raters and admin tokens, each rater's stage and next task, and how tasks and stages are shown and answered (the routes are in server.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import json
import queue
import random
import sqlite3
import statistics
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    Response,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxassay.core import jsonio
from voxassay.study import pages
from voxassay.study.format import PREFER_NOT, Eval, Item, Study, load_study
from voxassay.study.store import (
    RatingWrite,
    StudyStore,
    hash_secret,
    split_token,
    token_matches,
    write_export_to,
)

RATER_COOKIE = "vx_rater"
ADMIN_COOKIE = "vx_admin"
MAX_BODY = 64 * 1024
MAX_RESPONSE_MS = 24 * 3600 * 1000
_DUMMY_HASH = hash_secret("not-a-token")
AUDIO_CACHE_BYTES = 512 * 1024 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; media-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class Deny(Exception):
    """A refused request: HTTP status and a message safe to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Task:
    id: str
    rater: str
    item: str
    position: int
    flip: int


@dataclass
class RaterState:
    tasks: list[Task] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    profile_done: bool = False
    hp_attempts: int = 0
    hp_passed: bool = False
    hp_last: tuple[int, int] | None = None
    hp_order: list[str] = field(default_factory=list)


class Writer:
    """One thread owns the write connection; jobs run in batches, one commit per batch."""

    def __init__(self, db_path: Path, max_batch: int = 256) -> None:
        self.db_path = db_path
        self.max_batch = max_batch
        self.jobs: queue.Queue[
            tuple[Callable[[StudyStore], Any], concurrent.futures.Future[Any]] | None
        ] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="study-writer", daemon=True)
        self.commits = 0
        self.thread.start()

    def submit(self, fn: Callable[[StudyStore], Any]) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((fn, fut))
        return fut

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=30)

    def _run(self) -> None:
        store = StudyStore(self.db_path)
        stop = False
        try:
            while not stop:
                first = self.jobs.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < self.max_batch:
                    try:
                        nxt = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    batch.append(nxt)
                self._commit(store, batch)
        finally:
            store.close()

    def _commit(
        self,
        store: StudyStore,
        batch: list[tuple[Callable[[StudyStore], Any], concurrent.futures.Future[Any]]],
    ) -> None:
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        conn = store.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, fut in batch:
                conn.execute("SAVEPOINT job")
                try:
                    result = fn(store)
                except Exception as exc:
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((fut, None, exc))
                else:
                    conn.execute("RELEASE job")
                    outcomes.append((fut, result, None))
            conn.execute("COMMIT")
            self.commits += 1
        except Exception as exc:  # the batch did not commit: nobody is acknowledged
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            for _, fut in batch:
                fut.set_exception(exc)
            return
        for fut, result, error in outcomes:
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)


class SecurityHeaders:
    """Adds CSP, no-sniff, no-referrer, no-framing and no-store to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", CSP)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def wants_json(request: Request) -> bool:
    if request.url.path.startswith("/api/"):
        return True
    ctype = request.headers.get("content-type", "")
    accept = request.headers.get("accept", "")
    return "application/json" in ctype or (
        "application/json" in accept and "text/html" not in accept
    )


async def _read_body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
        raise Deny(413, "request body too large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise Deny(413, "request body too large")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_fields(request: Request) -> tuple[dict[str, Any], bool]:
    """The posted fields (JSON object or urlencoded form) and whether it was JSON."""
    body = await _read_body(request)
    ctype = request.headers.get("content-type", "")
    if "application/json" in ctype:
        try:
            data = jsonio.loads(body.decode("utf-8") or "{}")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise Deny(400, "body is not valid JSON") from None
        if not isinstance(data, dict):
            raise Deny(400, "body must be a JSON object")
        return data, True
    try:
        text = body.decode("utf-8")
        parsed = urllib.parse.parse_qs(text, keep_blank_values=True, max_num_fields=200)
    except (UnicodeDecodeError, ValueError):
        raise Deny(400, "body is not a valid form") from None
    return {k: v[0] for k, v in parsed.items()}, False


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=a-b`` -> (a, b) inclusive; None for no or an unusable header (the
    whole file is sent); (-1, -1) when the range lies outside the file."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if first == "":
            n = int(last)
            start, end = max(0, size - n), size - 1
        else:
            start = int(first)
            end = int(last) if last else size - 1
    except ValueError:
        return None
    if start < 0 or start >= size or end < start:
        return (-1, -1)
    return start, min(end, size - 1)


def check_origin(request: Request) -> None:
    """POSTs from another site are refused (cookies are SameSite=Lax as well)."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = urllib.parse.urlsplit(origin).netloc
        if host != request.headers.get("host"):
            raise Deny(403, "cross-site request refused")


class StudyState:
    """The study behind the routes: who is asking (rater, admin), where they are (stage, next task), and the pages and JSON a route returns."""

    def __init__(self, study_dir: Path) -> None:
        self.dir = Path(study_dir).resolve()
        self.study: Study = load_study(self.dir)
        self.items: dict[str, Item] = self.study.item_by_id()
        self.audio_root = (self.dir / "audio").resolve()
        self.db_path = self.dir / "study.db"
        store = StudyStore(self.db_path)
        try:
            self.admin_hash = store.meta("admin_token_hash")
            self.rater_hash = store.rater_hashes()
            self.tasks: dict[str, Task] = {}
            self.raters: dict[str, RaterState] = {r: RaterState() for r in self.rater_hash}
            for aid, rater, item_id, pos, flip in store.assignments():
                if item_id not in self.items:
                    continue
                task = Task(aid, rater, item_id, pos, flip)
                self.tasks[aid] = task
                self.raters.setdefault(rater, RaterState()).tasks.append(task)
            self.answers: dict[tuple[str, str], dict[str, float]] = {}
            for r in store.ratings():
                self.answers.setdefault((r["rater"], r["item"]), {})[r["eval"]] = r["score"]
            for (rater, item_id), got in self.answers.items():
                st = self.raters.get(rater)
                item = self.items.get(item_id)
                if st and item and {e.id for e in self.study.evals_for(item)} <= set(got):
                    st.done.add(item_id)
            profiles = {r["id"]: r for r in store.raters()}
            attempts = store.headphone_attempts()
        finally:
            store.close()
        trial_ids = [t.id for t in self.study.headphone_check.trials]
        for rid, st in self.raters.items():
            info = profiles.get(rid) or {}
            st.profile_done = info.get("profile") is not None
            tries = attempts.get(rid, [])
            st.hp_attempts = len(tries)
            st.hp_passed = any(t["passed"] for t in tries)
            if tries:
                st.hp_last = (tries[-1]["correct"], tries[-1]["total"])
            st.hp_order = random.Random(f"{self.study.study_id}/{rid}").sample(
                trial_ids, len(trial_ids)
            )
        self.writer: Writer | None = None
        self.audio_cache: dict[str, bytes] = {}
        self.cache_bytes = 0

    def start(self) -> None:
        if self.writer is None:
            self.writer = Writer(self.db_path)

    def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def write(self, fn: Callable[[StudyStore], Any]) -> Any:
        """Run ``fn`` in the writer's next transaction; returns once it is committed."""
        self.start()
        assert self.writer is not None
        return await asyncio.wrap_future(self.writer.submit(fn))

    @staticmethod
    def _token(request: Request, cookie: str) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip()
        return request.cookies.get(cookie)

    def rater_of(self, token: str | None) -> str | None:
        parts = split_token(token) if token else None
        if parts is None:
            return None
        rid, secret = parts
        stored = self.rater_hash.get(rid)
        ok = token_matches(secret, stored or _DUMMY_HASH)
        return rid if ok and stored is not None else None

    def is_admin(self, token: str | None) -> bool:
        parts = split_token(token) if token else None
        if parts is None or parts[0] != "admin":
            return False
        return token_matches(parts[1], self.admin_hash)

    def require_rater(self, request: Request) -> str:
        token = self._token(request, RATER_COOKIE)
        if not token:
            raise Deny(401, "open your personal invite link to take part")
        rid = self.rater_of(token)
        if rid is None:
            raise Deny(401, "this link or session is not valid")
        return rid

    def require_admin(self, request: Request) -> None:
        token = self._token(request, ADMIN_COOKIE)
        if token and self.is_admin(token):
            return
        rater_token = token or request.cookies.get(RATER_COOKIE)
        if rater_token and self.rater_of(rater_token):
            raise Deny(403, "admin pages need the admin link")
        if not token:
            raise Deny(401, "admin pages need the admin link")
        raise Deny(401, "this admin link is not valid")

    def stage(self, rid: str) -> str:
        st = self.raters[rid]
        prof, hc = self.study.profile, self.study.headphone_check
        if prof.enabled and not st.profile_done:
            return "profile"
        if hc.enabled and hc.trials and not st.hp_passed:
            if st.hp_attempts < hc.attempts:
                return "headphones"
            if hc.required:
                return "blocked"
        return "rating" if self.next_task(rid) else "done"

    def next_task(self, rid: str) -> Task | None:
        st = self.raters[rid]
        return next((t for t in st.tasks if t.item not in st.done), None)

    def progress(self, rid: str) -> dict[str, int]:
        st = self.raters[rid]
        return {"done": len(st.done & {t.item for t in st.tasks}), "total": len(st.tasks)}

    def eval_views(self, item: Item) -> list[pages.EvalView]:
        return [
            pages.EvalView(
                id=e.id,
                kind=e.kind,
                question=e.question,
                min=e.scale.min,
                max=e.scale.max,
                labels=e.scale.labels,
                ties=e.ties,
            )
            for e in self.study.evals_for(item)
        ]

    @staticmethod
    def slots(item: Item) -> list[str]:
        return ["x"] if item.kind == "single" else ["a", "b"]

    def display_answers(self, task: Task) -> dict[str, Any]:
        """The stored answers of ``task`` in the rater's terms (pairwise: displayed sides)."""
        got = self.answers.get((task.rater, task.item), {})
        item = self.items[task.item]
        out: dict[str, Any] = {}
        for ev in self.study.evals_for(item):
            if ev.id not in got:
                continue
            score = got[ev.id]
            if ev.kind == "pairwise":
                shown = score if task.flip == 0 else 1.0 - score
                out[ev.id] = {1.0: "a", 0.0: "b"}.get(shown, "tie")
            else:
                out[ev.id] = int(score)
        return out

    def task_json(self, task: Task) -> dict[str, Any]:
        item = self.items[task.item]
        return {
            "id": task.id,
            "position": task.position,
            "context": item.context,
            "audio": [{"slot": s, "url": f"/audio/{task.id}/{s}"} for s in self.slots(item)],
            "evals": [
                {
                    "id": v.id,
                    "kind": v.kind,
                    "question": v.question,
                    "scale": {"min": v.min, "max": v.max},
                    "labels": {str(k): t for k, t in v.labels.items()},
                    "answers": (["a", "tie", "b"] if v.ties else ["a", "b"])
                    if v.kind == "pairwise"
                    else list(range(v.min, v.max + 1)),
                }
                for v in self.eval_views(item)
            ],
            "answered": self.display_answers(task),
        }

    def state_json(self, rid: str) -> dict[str, Any]:
        stage = self.stage(rid)
        out: dict[str, Any] = {"stage": stage, "progress": self.progress(rid)}
        if stage == "rating":
            task = self.next_task(rid)
            assert task is not None
            out["task"] = self.task_json(task)
        elif stage == "headphones":
            st = self.raters[rid]
            out["headphones"] = {
                "trials": [{"id": t, "url": f"/hp/{t}"} for t in st.hp_order],
                "attempts_left": self.study.headphone_check.attempts - st.hp_attempts,
            }
        elif stage == "profile":
            out["profile"] = {
                "required": self.study.profile.required,
                "fields": [f.model_dump() for f in self.study.profile.fields],
            }
        return out

    def render_stage(self, rid: str, error: str | None = None, status: int = 200) -> Response:
        title = self.study.title
        stage = self.stage(rid)
        st = self.raters[rid]
        if stage == "profile":
            prof = self.study.profile
            html = pages.profile_page(title, prof.fields, prof.required, PREFER_NOT, error)
        elif stage == "headphones":
            hc = self.study.headphone_check
            msg = error
            if msg is None and st.hp_last is not None and not st.hp_passed:
                msg = (
                    f"Not passed: {st.hp_last[0]} of {st.hp_last[1]} right. Please make sure "
                    "you are wearing headphones (both sides), then try again."
                )
            html = pages.headphone_page(
                title,
                self.study.instructions,
                st.hp_order,
                hc.calibration_audio is not None,
                hc.attempts - st.hp_attempts,
                msg,
            )
        elif stage == "blocked":
            html = pages.message_page(
                title,
                "Thank you",
                "This study needs headphones, and the headphone check was not passed. "
                "Thank you for your time.",
            )
        elif stage == "done":
            last = st.tasks[-1].id if st.tasks else None
            html = pages.done_page(title, len(st.tasks), last)
        else:
            task = self.next_task(rid)
            assert task is not None
            return self.render_task(task, revise=False, error=error, status=status)
        return HTMLResponse(html, status_code=status)

    def render_task(
        self, task: Task, *, revise: bool, error: str | None = None, status: int = 200
    ) -> Response:
        st = self.raters[task.rater]
        item = self.items[task.item]
        prev = st.tasks[task.position - 1] if task.position > 0 else None
        html = pages.task_page(
            self.study.title,
            task_id=task.id,
            position=task.position,
            total=len(st.tasks),
            done=self.progress(task.rater)["done"],
            context=item.context,
            slots=self.slots(item),
            evals=self.eval_views(item),
            current=self.display_answers(task),
            revise=revise,
            require_listen=self.study.require_full_listen,
            previous=prev.id if prev is not None and prev.item in st.done else None,
            instructions=self.study.instructions,
            error=error,
        )
        return HTMLResponse(html, status_code=status)

    def parse_answers(self, task: Task, raw: dict[str, Any]) -> list[RatingWrite]:
        """Validate one submit's answers; ``Deny(400)`` names every problem."""
        item = self.items[task.item]
        evals: list[Eval] = self.study.evals_for(item)
        problems: list[str] = []
        writes: list[RatingWrite] = []
        known = {e.id for e in evals}
        extra = sorted(set(raw) - known)
        if extra:
            problems.append(f"unknown question(s): {', '.join(extra)[:200]}")
        for ev in evals:
            value = raw.get(ev.id)
            if value is None or value == "":
                problems.append(f"no answer to {ev.id!r}")
                continue
            if ev.kind == "pairwise":
                shown = {"a": 1.0, "b": 0.0, "tie": 0.5}.get(str(value).lower())
                if shown is None and isinstance(value, int | float) and not isinstance(value, bool):
                    shown = float(value) if float(value) in (0.0, 0.5, 1.0) else None
                if shown is None or (shown == 0.5 and not ev.ties):
                    problems.append(
                        f"{ev.id!r}: answer must be a, b" + (" or tie" if ev.ties else "")
                    )
                    continue
                score = shown if task.flip == 0 else 1.0 - shown
            else:
                try:
                    score = float(value) if not isinstance(value, bool) else float("nan")
                except (TypeError, ValueError):
                    score = float("nan")
                if not ev.valid_score(score):
                    problems.append(
                        f"{ev.id!r}: {str(value)[:20]!r} is not a point of the scale "
                        f"{ev.scale.min}-{ev.scale.max}"
                    )
                    continue
            writes.append(RatingWrite(ev.id, score))
        if problems:
            raise Deny(400, "; ".join(problems))
        return writes

    async def _file(self, rel: str, request: Request) -> Response:
        """A stimulus from ``audio/`` (names come from study.json, never from the client),
        cached in memory up to a budget; single byte ranges are honoured."""
        data = self.audio_cache.get(rel)
        if data is None:
            path = (self.dir / rel).resolve()
            if not path.is_relative_to(self.audio_root) or not path.is_file():
                raise Deny(404, "audio missing")
            data = await run_in_threadpool(path.read_bytes)
            if self.cache_bytes + len(data) <= AUDIO_CACHE_BYTES:
                self.audio_cache[rel] = data
                self.cache_bytes += len(data)
        headers = {"Cache-Control": "private, no-store", "Accept-Ranges": "bytes"}
        wanted = _byte_range(request.headers.get("range"), len(data))
        if wanted is None:
            return Response(data, media_type="audio/wav", headers=headers)
        if wanted == (-1, -1):
            return Response(
                status_code=416, headers={**headers, "Content-Range": f"bytes */{len(data)}"}
            )
        start, end = wanted
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return Response(
            data[start : end + 1], status_code=206, media_type="audio/wav", headers=headers
        )

    def admin_status(self) -> dict[str, Any]:
        """Completion per rater and item, gold accuracy, response times, QC flags."""
        store = StudyStore(self.db_path, readonly=True)
        try:
            ratings = store.ratings()
            raters = store.raters()
            hp = store.headphone_attempts()
        finally:
            store.close()
        evals = self.study.eval_by_id()
        per_rater: dict[str, list[dict[str, Any]]] = {}
        rated_evals: dict[tuple[str, str], set[str]] = {}
        for r in ratings:
            per_rater.setdefault(r["rater"], []).append(r)
            rated_evals.setdefault((r["rater"], r["item"]), set()).add(r["eval"])
        done_pairs = {
            key
            for key, got in rated_evals.items()
            if key[1] in self.items
            and {e.id for e in self.study.evals_for(self.items[key[1]])} <= got
        }
        rater_rows: list[dict[str, Any]] = []
        for info in raters:
            rid = info["id"]
            st = self.raters.get(rid, RaterState())
            rs = per_rater.get(rid, [])
            done = sum(1 for t in st.tasks if (rid, t.item) in done_pairs)
            gold_hits = []
            for r in rs:
                item, ev = self.items.get(r["item"]), evals.get(r["eval"])
                if item is None or ev is None or not item.gold or ev.id not in item.gold:
                    continue
                gold_hits.append(abs(r["score"] - item.gold[ev.id]) <= self.study.tolerance(ev))
            per_item_ms: dict[str, int] = {}
            for r in rs:
                if r["response_ms"] is not None:
                    per_item_ms.setdefault(r["item"], r["response_ms"])
            median_ms = statistics.median(per_item_ms.values()) if per_item_ms else None
            durations = [
                sum(s.duration_s for s in self.items[i].stimuli) * 1000
                for i in per_item_ms
                if i in self.items
            ]
            likert = [
                r["score"] for r in rs if evals.get(r["eval"]) and evals[r["eval"]].kind == "likert"
            ]
            flags = []
            tries = hp.get(rid, [])
            if tries and not any(t["passed"] for t in tries):
                flags.append("headphone check failed")
            gold_acc = sum(gold_hits) / len(gold_hits) if gold_hits else None
            if gold_acc is not None and len(gold_hits) >= 2 and gold_acc < 0.7:
                flags.append("gold accuracy < 70%")
            if (
                median_ms is not None
                and durations
                and median_ms < 0.5 * statistics.median(durations)
            ):
                flags.append("faster than the audio")
            if len(likert) >= 10:
                top = max(likert.count(v) for v in set(likert))
                if top / len(likert) >= 0.9:
                    flags.append("straight-lining")
            rater_rows.append(
                {
                    "id": rid,
                    "source": info["source"],
                    "assigned": len(st.tasks),
                    "done": done,
                    "completion": round(done / len(st.tasks), 3) if st.tasks else None,
                    "ratings": len(rs),
                    "gold_n": len(gold_hits),
                    "gold_accuracy": None if gold_acc is None else round(gold_acc, 3),
                    "median_response_ms": median_ms,
                    "headphones": "passed"
                    if any(t["passed"] for t in tries)
                    else (f"failed x{len(tries)}" if tries else "-"),
                    "profile": info["profile"],
                    "started_at": info["started_at"],
                    "last_seen": info["last_seen"],
                    "flags": flags,
                }
            )
        assigned_count: dict[str, int] = {}
        for t in self.tasks.values():
            assigned_count[t.item] = assigned_count.get(t.item, 0) + 1
        done_count: dict[str, int] = {}
        for _, item_id in done_pairs:
            done_count[item_id] = done_count.get(item_id, 0) + 1
        item_rows: list[dict[str, Any]] = [
            {
                "item": it.id,
                "kind": it.kind,
                "system": it.system,
                "system_b": it.system_b,
                "gold": bool(it.gold),
                "raters_assigned": assigned_count.get(it.id, 0),
                "raters_done": done_count.get(it.id, 0),
            }
            for it in self.study.items
        ]
        regular = [i for i in item_rows if not i["gold"]]
        summary = {
            "study_id": self.study.study_id,
            "raters": len(rater_rows),
            "raters_started": sum(1 for r in rater_rows if r["started_at"] or r["ratings"]),
            "raters_finished": sum(
                1 for r in rater_rows if r["assigned"] and r["done"] == r["assigned"]
            ),
            "ratings": len(ratings),
            "items": len(regular),
            "items_complete": sum(
                1
                for i in regular
                if i["raters_done"] >= min(self.study.raters_per_item, i["raters_assigned"] or 1)
            ),
            "pairs": any(i["kind"] == "pair" for i in item_rows),
        }
        return {"summary": summary, "raters": rater_rows, "items": item_rows}

    def _export_text(self) -> str:
        store = StudyStore(self.db_path, readonly=True)
        try:
            ratings = store.ratings()
        finally:
            store.close()
        buf = io.StringIO(newline="")
        write_export_to(self.study, ratings, buf)
        return buf.getvalue()

    async def _deny(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, Deny):
            status, message = exc.status, exc.message
        else:
            status = int(getattr(exc, "status_code", 500))
            message = str(getattr(exc, "detail", "error"))
        if wants_json(request) or request.url.path.startswith(("/audio/", "/hp/")):
            return JSONResponse({"error": message}, status_code=status)
        title = {401: "Not signed in", 403: "Not allowed", 404: "Not found"}.get(
            status, "Request refused"
        )
        return HTMLResponse(pages.message_page(title, title, message), status_code=status)
