"""The web console at ``/``: server-rendered pages (Jinja2 templates in ``templates/``, no
script at all) over the same reads as the API: the next 24 hours, the last failures, pending
jobs, one job with its executions, history search, the schedules. Reading needs a token with
``jobs:read`` (the login form sets the cookie, ``session``); the buttons (cancel, run now,
retry) need ``jobs:write`` and carry a CSRF token."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import AwtyError
from . import pages
from .auth import allows
from .problems import Problem, from_error
from .session import Session, local_path, log_in, log_out, read_form, session

_ENV: Any = None
DONE = {"cancel": "Cancelled.", "retry": "Re-armed into the next slot.",
        "run": "Ran now: its outcome is below."}


def _templates() -> Any:
    global _ENV
    if _ENV is None:
        import jinja2

        _ENV = jinja2.Environment(loader=jinja2.PackageLoader("awty.serve", "templates"),
                                  autoescape=True, trim_blocks=True, lstrip_blocks=True)
        _ENV.filters.update(when=_when, ago=_ago, num=lambda n: f"{n or 0:,}",
                            line=lambda t: (t or "").strip().splitlines()[0] if t else "")
    return _ENV


def _parse(at: str | None) -> datetime | None:
    return datetime.fromisoformat(at) if at else None


def _when(at: str | None, tz: Any = None) -> str:
    t = _parse(at)
    return t.astimezone(tz).strftime("%a %d %b %H:%M") if t else "—"


def _ago(at: str | None, now: datetime) -> str:
    t = _parse(at)
    if t is None:
        return ""
    secs = int((t - now).total_seconds())
    n = abs(secs)
    if n < 5:
        return "just now"
    if n < 3600:
        size = f"{n}s" if n < 60 else f"{n // 60}m"
    else:
        big, small = (n // 3600, n % 3600 // 60) if n < 86400 else (n // 86400, n % 86400 // 3600)
        unit, sub = ("h", "m") if n < 86400 else ("d", "h")
        size = f"{big}{unit}" + (f" {small}{sub}" if small else "")
    return f"in {size}" if secs >= 0 else f"{size} ago"


def render(request: Request, name: str, sess: Session | None, status: int = 200,
           **ctx: Any) -> Response:
    awty = request.app.state.backend.awty
    nonce = secrets.token_urlsafe(16)
    html = _templates().get_template(name).render(
        request=request, sess=sess, nonce=nonce, now=awty.clock.now(), tz=awty.tz,
        zone=awty.clock.now().astimezone(awty.tz).tzname() or "UTC",
        can_write=bool(sess and sess.token and allows(sess.token, "jobs:write")),
        no_auth=request.app.state.options.no_auth, **ctx)
    return HTMLResponse(html, status, headers={
        # no script runs here; the one style sheet is inline and carries the nonce
        "Content-Security-Policy": f"default-src 'none'; style-src 'nonce-{nonce}'; "
                                   "img-src data:; form-action 'self'; base-uri 'none'; "
                                   "frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store"})


def _to_login(request: Request) -> Response:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(here, safe='')}", 303)


Page = Callable[[Request, Session], Awaitable[Response]]


def reader(page: Page) -> Callable[[Request], Awaitable[Response]]:
    """A page for a token with jobs:read; errors of the library shown in the page's place."""
    async def endpoint(request: Request) -> Response:
        sess = await session(request)
        if sess.token is None:
            return _to_login(request)
        if not allows(sess.token, "jobs:read"):
            return render(request, "login.html", None, 403, next=request.url.path,
                          error=f"token {sess.token.name!r} lacks the jobs:read scope")
        try:
            return await page(request, sess)
        except AwtyError as e:
            return _failed(request, sess, from_error(e))
        except Problem as p:
            return _failed(request, sess, p)
    return endpoint


def _failed(request: Request, sess: Session, p: Problem) -> Response:
    return render(request, "error.html", sess, p.status, error=p.detail, code=p.status)


async def overview(request: Request, sess: Session) -> Response:
    data = await request.app.state.backend.run(pages.overview)
    return render(request, "overview.html", sess, nav="overview", **data)


async def job_list(request: Request, sess: Session) -> Response:
    q = dict(request.query_params)
    data = await request.app.state.backend.run(pages.jobs, q)
    return render(request, "jobs.html", sess, nav="jobs", q=q, **data)


async def job(request: Request, sess: Session) -> Response:
    doc = await request.app.state.backend.run(pages.job, request.path_params["id"])
    done = DONE.get(request.query_params.get("done", ""))
    return render(request, "job.html", sess, nav="jobs", job=doc, done=done)


async def history(request: Request, sess: Session) -> Response:
    q = dict(request.query_params)
    try:
        rows, error = await request.app.state.backend.run(pages.history, q), None
    except (Problem, AwtyError) as e:
        p = e if isinstance(e, Problem) else from_error(e)
        rows, error = [], p.detail
    return render(request, "history.html", sess, 400 if error else 200, nav="history", q=q,
                  rows=rows, error=error, outcomes=pages.OUTCOMES)


async def schedule_list(request: Request, sess: Session) -> Response:
    rows = await request.app.state.backend.run(pages.schedules)
    return render(request, "schedules.html", sess, nav="schedules", rows=rows)


async def act(request: Request) -> Response:
    """A button on a job's page: cancel, run or retry (jobs:write, CSRF token)."""
    sess = await session(request)
    job_id, action = request.path_params["id"], request.path_params["action"]
    if sess.token is None:
        return RedirectResponse(f"/login?next={quote('/jobs/' + job_id, safe='')}", 303)
    form = await read_form(request)
    if not sess.csrf_ok(form.get("csrf")):
        return _failed(request, sess, Problem(403, "this form is stale or came from another "
                                                   "site (CSRF check); reload the page"))
    if not allows(sess.token, "jobs:write"):
        return _failed(request, sess, Problem(403, f"token {sess.token.name!r} lacks the "
                                                   "jobs:write scope"))
    backend = request.app.state.backend
    try:
        if action == "cancel":
            from .jobs import cancel_one

            await backend.run(cancel_one, job_id)
        elif action == "retry":
            await backend.run(lambda a: a.retry(job_id))
        elif action == "run":
            await backend.apart(lambda a: a.run_now(job_id))  # the callback: not on the store
        else:
            return _failed(request, sess, Problem(404, f"no such action: {action}"))
    except (Problem, AwtyError) as e:
        p = e if isinstance(e, Problem) else from_error(e)
        return _failed(request, sess, p)
    return RedirectResponse(f"/jobs/{quote(job_id)}?done={action}", 303)


async def login_page(request: Request) -> Response:
    target = local_path(request.query_params.get("next"))
    sess = await session(request)
    if sess.token is not None and allows(sess.token, "jobs:read"):
        return RedirectResponse(target, 303)
    return render(request, "login.html", None, next=target, error=None)


async def login(request: Request) -> Response:
    form = await read_form(request)
    target, secret = local_path(form.get("next")), form.get("token", "").strip()
    token = await request.app.state.backend.run(lambda a: a.token_for(secret)) if secret \
        else None
    if token is None:
        return render(request, "login.html", None, 401, next=target,
                      error="unknown or revoked token" if secret else "paste a token")
    if not allows(token, "jobs:read"):
        return render(request, "login.html", None, 403, next=target,
                      error=f"token {token.name!r} lacks the jobs:read scope")
    # 303: the browser follows with a GET, sending the cookie just set (same site, so
    # SameSite=Strict does not hold it back)
    response = RedirectResponse(target, 303)
    log_in(response, request, secret)
    return response


async def logout(request: Request) -> Response:
    sess = await session(request)
    form = await read_form(request)
    if sess.token is not None and not sess.csrf_ok(form.get("csrf")):
        return _failed(request, sess, Problem(403, "this form is stale (CSRF check); reload"))
    response = RedirectResponse("/login", 303)
    log_out(response, request)
    return response


ROUTES: list[BaseRoute] = [
    Route("/", reader(overview), methods=["GET"]),
    Route("/jobs", reader(job_list), methods=["GET"]),
    Route("/jobs/{id}", reader(job), methods=["GET"]),
    Route("/jobs/{id}/{action}", act, methods=["POST"]),
    Route("/history", reader(history), methods=["GET"]),
    Route("/schedules", reader(schedule_list), methods=["GET"]),
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
