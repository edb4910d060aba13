"""``voxassay study serve``: the rating web app (Starlette on uvicorn, SQLite store).

Raters open their personal link ``/i/<token>``: it sets an HttpOnly cookie and leads to
``/rate``, which shows the rater's current stage (profile, headphone check, the next item,
done). Answers are posted to ``/rate/answer`` (form or JSON); ``/api/state`` gives the
same state as JSON. Audio is served by opaque task id and slot (``/audio/<task>/x|a|b``)
and only for the rater's own tasks. The admin link ``/a/<token>`` opens ``/admin``
(completion, QC, export). Tokens also work as ``Authorization: Bearer <token>``.

Every write goes through one writer thread that commits batches of requests in one
transaction (group commit); a request is answered only after its batch committed.
Access logs are off (links carry tokens); nothing secret is logged.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route
from starlette.types import ASGIApp

from voxassay.study import pages
from voxassay.study.format import PREFER_NOT
from voxassay.study.server_state import (
    ADMIN_COOKIE,
    MAX_RESPONSE_MS,
    RATER_COOKIE,
    Deny,
    SecurityHeaders,
    StudyState,
    check_origin,
    read_fields,
    wants_json,
)
from voxassay.study.store import (
    RatingConflict,
    RatingMissing,
    utc_now,
)


class StudyServer(StudyState):
    """The app's state: the study, tasks per rater, what each rater has done."""

    # --- lifecycle -------------------------------------------------------------------

    # --- auth ------------------------------------------------------------------------

    # --- rater flow ------------------------------------------------------------------

    # --- handlers --------------------------------------------------------------------

    async def landing(self, request: Request) -> Response:
        return HTMLResponse(
            pages.message_page(
                "Listening study",
                "Listening study",
                "Please open the personal link you were sent.",
            )
        )

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)

    async def invite(self, request: Request) -> Response:
        token = request.path_params["token"]
        rid = self.rater_of(token)
        if rid is None:
            raise Deny(401, "this link is not valid")
        ua = request.headers.get("user-agent")
        now = utc_now()
        await self.write(lambda s: s.add_session(rid, ua, now))
        resp = RedirectResponse("/rate", status_code=303)
        resp.set_cookie(
            RATER_COOKIE,
            token,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
            max_age=90 * 24 * 3600,
        )
        return resp

    async def admin_login(self, request: Request) -> Response:
        token = request.path_params["token"]
        if not self.is_admin(token):
            raise Deny(401, "this admin link is not valid")
        resp = RedirectResponse("/admin", status_code=303)
        resp.set_cookie(
            ADMIN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            max_age=30 * 24 * 3600,
        )
        return resp

    async def rate(self, request: Request) -> Response:
        rid = self.require_rater(request)
        return self.render_stage(rid)

    async def rate_task(self, request: Request) -> Response:
        rid = self.require_rater(request)
        task = self.tasks.get(request.path_params["task"])
        if task is None or task.rater != rid:
            raise Deny(404, "no such item for you")
        if self.stage(rid) not in ("rating", "done"):
            return RedirectResponse("/rate", status_code=303)
        st = self.raters[rid]
        if task.item not in st.done:
            nxt = self.next_task(rid)
            if nxt is not None and nxt.id == task.id:
                return self.render_task(task, revise=False)
            return RedirectResponse("/rate", status_code=303)
        return self.render_task(task, revise=True)

    async def task_api(self, request: Request) -> Response:
        """One of the rater's tasks that is done or current (to revise an answer)."""
        rid = self.require_rater(request)
        task = self.tasks.get(request.path_params["task"])
        if task is None or task.rater != rid:
            raise Deny(404, "no such item for you")
        nxt = self.next_task(rid)
        if task.item not in self.raters[rid].done and (nxt is None or nxt.id != task.id):
            raise Deny(409, "items are answered in order")
        return JSONResponse(self.task_json(task))

    async def state(self, request: Request) -> Response:
        rid = self.require_rater(request)
        return JSONResponse(self.state_json(rid))

    async def answer(self, request: Request) -> Response:
        check_origin(request)
        rid = self.require_rater(request)
        fields, is_json = await read_fields(request)
        as_json = is_json or wants_json(request)
        task = self.tasks.get(str(fields.get("task", "")))
        if task is None or task.rater != rid:
            raise Deny(404, "no such item for you")
        stage = self.stage(rid)
        if stage not in ("rating", "done"):
            raise Deny(409, f"finish the {stage} step first")
        if is_json:
            raw = fields.get("answers")
            if not isinstance(raw, dict):
                raise Deny(400, "'answers' must be an object of question id -> answer")
            revise = fields.get("revise", False) is True
        else:
            raw = {k[2:]: v for k, v in fields.items() if k.startswith("e.")}
            revise = str(fields.get("revise", "0")) == "1"
        ms_raw = fields.get("response_ms")
        response_ms: int | None = None
        if ms_raw not in (None, ""):
            try:
                response_ms = int(str(ms_raw))
            except ValueError:
                raise Deny(400, "response_ms must be a whole number of milliseconds") from None
            if not 0 <= response_ms <= MAX_RESPONSE_MS:
                raise Deny(400, "response_ms out of range")
        st = self.raters[rid]
        try:
            writes = self.parse_answers(task, raw)
            if revise and task.item not in st.done:
                raise Deny(409, "this item has no answer to change yet")
            if not revise and task.item in st.done:
                raise Deny(409, "this item is already rated (send a revision to change it)")
        except Deny as exc:
            if as_json:
                raise
            return self.render_task(
                task, revise=task.item in st.done, error=exc.message, status=exc.status
            )
        now = utc_now()
        try:
            revision = await self.write(
                lambda s: s.write_ratings(
                    rid, task.item, writes, now=now, response_ms=response_ms, revise=revise
                )
            )
        except (RatingConflict, RatingMissing) as exc:
            raise Deny(409, str(exc)) from None
        except sqlite3.Error:
            raise Deny(503, "the rating could not be saved; please try again") from None
        st.done.add(task.item)
        self.answers[(rid, task.item)] = {w.eval: w.score for w in writes}
        if as_json:
            return JSONResponse(
                {"ok": True, "saved_at": now, "revision": revision, **self.progress(rid)}
            )
        return RedirectResponse("/rate", status_code=303)

    async def profile(self, request: Request) -> Response:
        check_origin(request)
        rid = self.require_rater(request)
        fields, is_json = await read_fields(request)
        if self.stage(rid) != "profile":
            raise Deny(409, "the profile is already done")
        prof = self.study.profile
        values = (
            fields.get("profile", {})
            if is_json
            else {k[2:]: v for k, v in fields.items() if k.startswith("f.")}
        )
        skip = str(fields.get("skip", "")) in ("1", "true", "True")
        if not isinstance(values, dict):
            raise Deny(400, "'profile' must be an object")
        problems: list[str] = []
        answers: dict[str, str] = {}
        if not skip:
            for f in prof.fields:
                v = values.get(f.id)
                if v in (None, ""):
                    if prof.required:
                        problems.append(f"please answer {f.label!r}")
                    continue
                if v not in [*f.options, PREFER_NOT]:
                    problems.append(f"{f.id}: {str(v)[:40]!r} is not one of the options")
                    continue
                answers[f.id] = str(v)
            unknown = set(values) - {f.id for f in prof.fields}
            if unknown:
                problems.append(f"unknown field(s): {', '.join(sorted(unknown))[:200]}")
        elif prof.required:
            problems.append("the profile is required")
        if problems:
            if is_json:
                raise Deny(400, "; ".join(problems))
            return self.render_stage(rid, error="; ".join(problems), status=400)
        now = utc_now()
        await self.write(lambda s: s.set_profile(rid, answers, now))
        self.raters[rid].profile_done = True
        if is_json:
            return JSONResponse({"ok": True, "stage": self.stage(rid)})
        return RedirectResponse("/rate", status_code=303)

    async def headphones(self, request: Request) -> Response:
        check_origin(request)
        rid = self.require_rater(request)
        fields, is_json = await read_fields(request)
        if self.stage(rid) != "headphones":
            raise Deny(409, "no headphone check is due")
        hc = self.study.headphone_check
        raw = (
            fields.get("answers", {})
            if is_json
            else {k[2:]: v for k, v in fields.items() if k.startswith("h.")}
        )
        if not isinstance(raw, dict):
            raise Deny(400, "'answers' must be an object of trial id -> 1, 2 or 3")
        problems = []
        correct = 0
        for trial in hc.trials:
            v = raw.get(trial.id)
            if str(v) not in ("1", "2", "3"):
                problems.append("please answer every sound")
                break
            correct += int(str(v)) == trial.answer
        if set(raw) - {t.id for t in hc.trials}:
            problems.append("unknown sound ids")
        if problems:
            if is_json:
                raise Deny(400, "; ".join(problems))
            return self.render_stage(rid, error="; ".join(problems), status=400)
        st = self.raters[rid]
        total = len(hc.trials)
        passed = correct >= hc.pass_min
        attempt = st.hp_attempts + 1
        now = utc_now()
        await self.write(lambda s: s.add_headphone_check(rid, attempt, correct, total, passed, now))
        st.hp_attempts, st.hp_last = attempt, (correct, total)
        st.hp_passed = st.hp_passed or passed
        if is_json:
            return JSONResponse(
                {
                    "ok": True,
                    "passed": passed,
                    "correct": correct,
                    "total": total,
                    "stage": self.stage(rid),
                }
            )
        return RedirectResponse("/rate", status_code=303)

    async def audio(self, request: Request) -> Response:
        rid = self.require_rater(request)
        task = self.tasks.get(request.path_params["task"])
        slot = request.path_params["slot"]
        if task is None or task.rater != rid:
            raise Deny(404, "no such audio for you")
        item = self.items[task.item]
        if item.kind == "single" and slot == "x":
            stim = item.stimuli[0]
        elif item.kind == "pair" and slot in ("a", "b"):
            stim = item.stimuli[task.flip if slot == "a" else 1 - task.flip]
        else:
            raise Deny(404, "no such audio for you")
        return await self._file(stim.audio, request)

    async def hp_audio(self, request: Request) -> Response:
        rid = self.require_rater(request)
        hc = self.study.headphone_check
        trial = request.path_params["trial"]
        del rid
        if trial == "cal" and hc.calibration_audio:
            return await self._file(hc.calibration_audio, request)
        for t in hc.trials:
            if t.id == trial:
                return await self._file(t.audio, request)
        raise Deny(404, "no such sound")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == "app.js":
            return Response(pages.SCRIPT, media_type="text/javascript")
        if name == "style.css":
            return Response(pages.STYLE, media_type="text/css")
        raise Deny(404, "not found")

    # --- admin -----------------------------------------------------------------------

    async def admin(self, request: Request) -> Response:
        self.require_admin(request)
        status = await run_in_threadpool(self.admin_status)
        return HTMLResponse(pages.admin_page(self.study.title, status))

    async def admin_json(self, request: Request) -> Response:
        self.require_admin(request)
        return JSONResponse(await run_in_threadpool(self.admin_status))

    async def export(self, request: Request) -> Response:
        self.require_admin(request)
        text = await run_in_threadpool(self._export_text)
        return Response(
            text,
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="{self.study.study_id}-ratings.csv"'
            },
        )

    async def subjective(self, request: Request) -> Response:
        self.require_admin(request)
        from voxassay.study.store import subjective_preferences

        return JSONResponse(await run_in_threadpool(subjective_preferences, self.dir))

    # --- app -------------------------------------------------------------------------

    def app(self) -> ASGIApp:
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            self.start()
            try:
                yield
            finally:
                self.stop()

        routes = [
            Route("/", self.landing),
            Route("/healthz", self.health),
            Route("/favicon.ico", self.favicon),
            Route("/i/{token}", self.invite),
            Route("/a/{token}", self.admin_login),
            Route("/rate", self.rate),
            Route("/rate/task/{task}", self.rate_task),
            Route("/rate/answer", self.answer, methods=["POST"]),
            Route("/rate/profile", self.profile, methods=["POST"]),
            Route("/rate/headphones", self.headphones, methods=["POST"]),
            Route("/api/state", self.state),
            Route("/api/task/{task}", self.task_api),
            Route("/api/answer", self.answer, methods=["POST"]),
            Route("/api/profile", self.profile, methods=["POST"]),
            Route("/api/headphones", self.headphones, methods=["POST"]),
            Route("/audio/{task}/{slot}", self.audio),
            Route("/hp/{trial}", self.hp_audio),
            Route("/static/{name}", self.static),
            Route("/admin", self.admin),
            Route("/admin/export.csv", self.export),
            Route("/admin/subjective.json", self.subjective),
            Route("/api/admin/status", self.admin_json),
        ]
        from starlette.exceptions import HTTPException

        app = Starlette(
            routes=routes,
            lifespan=lifespan,
            exception_handlers={Deny: self._deny, HTTPException: self._deny},
        )
        return SecurityHeaders(app)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def serve(
    study_dir: Path,
    host: str = "127.0.0.1",
    port: int = 8766,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the study until interrupted; ``announce`` gets the base URL once listening."""
    import uvicorn

    server = StudyServer(study_dir)
    sock = bind_socket(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{actual}"
    if announce is not None:
        announce(url)
    config = uvicorn.Config(
        server.app(),
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        server.stop()
