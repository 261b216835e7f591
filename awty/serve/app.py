"""The Starlette app of ``awty serve`` and the process that runs it (uvicorn)."""

from __future__ import annotations

import asyncio
import contextlib
from time import perf_counter
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import AwtyError, Busy, InvalidInput, StoreError
from . import health, jobs, reads, schedules
from .adds import Adds
from .backend import Backend
from .limits import Limiter
from .metrics import ServeMetrics, Timed
from .openapi import document
from .options import ServeOptions
from .problems import Problem, from_error

if TYPE_CHECKING:
    from ..api import Awty


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return exc.response()


async def _awty_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AwtyError)
    if isinstance(exc, (StoreError, Busy)):
        request.app.state.metrics.store_error()
    return from_error(exc, batch=request.url.path.endswith("/batch")).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = {404: f"no such endpoint: {request.url.path}",
              405: f"{request.method} is not allowed on {request.url.path}"}.get(
                  exc.status_code, str(exc.detail))
    return Problem(exc.status_code, detail, headers=dict(exc.headers or {})).response()


async def _unexpected(request: Request, exc: Exception) -> Response:
    # never a traceback to the client: one line, and the log has the rest
    request.app.state.backend.awty.logger().exception(f"serve: {request.method} "
                                                      f"{request.url.path}")
    return Problem(500, f"internal error ({type(exc).__name__}); see awty.log").response()


async def openapi(request: Request) -> Response:
    return JSONResponse(document())


class _App(Starlette):
    """``POST /v1/jobs``, the request whose throughput is a target (issue 33), goes straight
    to its endpoint: past Starlette's layers (its two exception middlewares and the router's
    match over every route), with the same handlers for its errors and its duration observed
    as ``Timed`` observes every other request's. Any other request takes the whole app."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/jobs" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        start = perf_counter()
        scope["app"] = self
        request = Request(scope, receive)
        try:
            try:
                response = await jobs.add_job(request)
            except Problem as p:
                response = p.response()
            except AwtyError as e:
                response = await _awty_error(request, e)
            except Exception as e:  # noqa: BLE001 - as ServerErrorMiddleware: a 500, logged
                response = await _unexpected(request, e)
            await response(scope, receive, send)
        finally:
            self.state.metrics.requests.observe(perf_counter() - start)


def build_app(awty: Awty, options: ServeOptions) -> Starlette:
    backend = Backend(awty)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop, firing = asyncio.Event(), None
        if options.run_slots:
            from .firing import fire_slots

            firing = asyncio.create_task(fire_slots(awty, stop))
        yield
        stop.set()
        if firing is not None:
            await firing  # a run under way finishes what it sent (its leases, its history)
        backend.close()

    from . import console

    metrics = ServeMetrics()
    app = _App(
        routes=[*jobs.ROUTES, *schedules.ROUTES, *reads.ROUTES, *health.ROUTES,
                Route("/v1/openapi.json", openapi, methods=["GET"]), *console.ROUTES],
        exception_handlers={Problem: _problem, AwtyError: _awty_error,
                            HTTPException: _http_error, Exception: _unexpected},
        middleware=[Middleware(Timed, metrics=metrics)], lifespan=lifespan)
    app.state.backend = backend
    app.state.options = options
    app.state.metrics = metrics
    app.state.limiter = Limiter()
    app.state.tokens = {}
    app.state.adds = Adds(backend, app.state.tokens)
    app.state.scrapes = health.Scrapes(backend)
    return app


def check_tokens(awty: Awty, options: ServeOptions) -> None:
    """Without any token, serve starts only with --no-auth on a loopback address."""
    options.check()
    if not options.no_auth and not awty.tokens():
        raise InvalidInput("no token exists: create one (`awty token new NAME --scope "
                           "jobs:read,jobs:write`), or give --no-auth to listen on a "
                           "loopback address without tokens")


def serve(awty: Awty, options: ServeOptions) -> None:
    """Listen until SIGINT or SIGTERM (uvicorn finishes the requests under way); the caller
    has run ``check_tokens``."""
    import uvicorn

    from .deadline import protocol

    app = build_app(awty, options)
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning",
                http=protocol(options.read_timeout),
                ssl_certfile=options.certfile, ssl_keyfile=options.keyfile,
                server_header=False, access_log=False,
                # X-Forwarded-Proto (https: the login cookie is Secure) and -For, believed
                # only from the proxies given; none given, from nobody
                proxy_headers=bool(options.forwarded_allow_ips),
                forwarded_allow_ips=list(options.forwarded_allow_ips) or None,
                timeout_keep_alive=5, timeout_graceful_shutdown=10)
