"""``/v1/schedules``: add, list, show (with the next occurrences), pause, resume, run now,
remove. Each route reads its input, checks the token as ``/v1/jobs`` does (a schedule's
occurrences are jobs the token adds), calls the ``Awty`` method the ``awty schedule`` command
calls, and answers with the document its ``--json`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import tokens
from ..documents import schedule_dict, schedule_document
from .auth import authorize
from .body import read_json
from .jobs import LIST_LIMIT, LIST_MAX, admit, query_int
from .problems import Problem

if TYPE_CHECKING:
    from ..api import Awty
    from ..model import ApiToken

# `awty schedule add`'s own options; the rest of a body is an `add --batch` line's job fields
# but the time and idempotency key (each occurrence's are its rule's) and cwd (the token's)
TEXT = ("name", "target", "cron", "start", "tz", "missed")
DURATIONS = ("every", "missed_window")
JOB_FIELDS = ("kind", "payload", "payload_json", "headers", "entity", "key", "max_checks",
              "horizon", "timeout", "max_attempts", "misfire_grace")
FIELDS = frozenset((*TEXT, *DURATIONS, *JOB_FIELDS))
SHOWN_NEXT, NEXT_MAX = 3, 1000


def _fields(body: Any) -> dict[str, Any]:
    """The body's fields, of the types the command line would give (text; a duration as text
    or seconds); the values themselves are ``Awty.schedule``'s to check."""
    if not isinstance(body, dict):
        raise Problem(400, "the body must be a JSON object (a schedule: name, target, cron or "
                      "every, and the job fields of an `add --batch` line)")
    unknown = set(body) - FIELDS
    if unknown:
        first = min(unknown)
        why = {"at": "a schedule's times are its rule (cron or every)",
               "in": "a schedule's times are its rule (cron or every)",
               "idempotency_key": "each occurrence is unique by its schedule and time",
               "cwd": "over HTTP an exec job runs in its token's --exec-dir"}.get(first)
        raise Problem(400, f"{first}: {why}" if why else
                      f"unknown field(s): {', '.join(map(repr, sorted(unknown)))}",
                      field=first if why else None)
    for name in ("name", "target"):
        if body.get(name) is None:
            raise Problem(400, f"{name}: missing", field=name)
    for name in TEXT:
        if body.get(name) is not None and not isinstance(body[name], str):
            raise Problem(400, f"{name}: must be text", field=name)
    for name in DURATIONS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
            raise Problem(400, f"{name}: must be a duration (15m, 2h) or seconds", field=name)
    return {k: v for k, v in body.items() if v is not None}


def _added(a: Awty, token: ApiToken, spec: dict[str, Any]) -> dict[str, Any]:
    admit(token, spec)
    where, env = tokens.exec_environment(token, str(a.home))
    spec = dict(spec)
    name, target = spec.pop("name"), spec.pop("target")
    s = a.schedule(name, target, cwd=where, _environ=env, **spec)
    return _shown(a, s.name, SHOWN_NEXT)


def _shown(a: Awty, name: str, n: int) -> dict[str, Any]:
    return schedule_document(a.schedule_info(name), a.next_occurrences(name, n))


async def add_schedule(request: Request) -> Response:
    token = await authorize(request, "jobs:write")
    spec = _fields(await read_json(request))
    doc = await request.app.state.backend.run(_added, token, spec)
    return JSONResponse(doc, 201, headers={"Location": f"/v1/schedules/{doc['name']}"})


def _page(a: Awty, after: str | None, limit: int) -> dict[str, Any]:
    infos = a.schedules(after=after, limit=limit + 1)
    nxt = None
    if len(infos) > limit:
        infos = infos[:limit]
        nxt = "/v1/schedules?" + urlencode({"after": infos[-1].schedule.name,
                                            "limit": str(limit)})
    return {"schedules": [schedule_dict(i) for i in infos], "next": nxt}


async def list_schedules(request: Request) -> Response:
    await authorize(request, "jobs:read")
    q = request.query_params
    limit = query_int(q.get("limit"), LIST_LIMIT, LIST_MAX)
    return JSONResponse(await request.app.state.backend.run(_page, q.get("after"), limit))


async def show_schedule(request: Request) -> Response:
    await authorize(request, "jobs:read")
    n = query_int(request.query_params.get("n"), SHOWN_NEXT, NEXT_MAX, "n")
    return JSONResponse(await request.app.state.backend.run(
        _shown, request.path_params["name"], n))


def _paused(a: Awty, name: str, pause: bool) -> dict[str, Any]:
    s = a.pause(name) if pause else a.resume(name)
    return _shown(a, s.name, SHOWN_NEXT)


async def pause_schedule(request: Request) -> Response:
    await authorize(request, "jobs:write")
    return JSONResponse(await request.app.state.backend.run(
        _paused, request.path_params["name"], True))


async def resume_schedule(request: Request) -> Response:
    await authorize(request, "jobs:write")
    return JSONResponse(await request.app.state.backend.run(
        _paused, request.path_params["name"], False))


async def run_schedule(request: Request) -> Response:
    await authorize(request, "jobs:write")
    # the callback may take its whole timeout: not on the store's thread (as a job's run)
    summary = await request.app.state.backend.apart(
        lambda a: a.run_schedule(request.path_params["name"]))
    return JSONResponse(summary.to_dict())


def _removed(a: Awty, name: str) -> dict[str, Any]:
    res = a.remove_schedule(name)
    return {"removed": name, "cancelled": list(res.cancelled)}


async def remove_schedule(request: Request) -> Response:
    await authorize(request, "jobs:write")
    return JSONResponse(await request.app.state.backend.run(
        _removed, request.path_params["name"]))


ROUTES = [
    Route("/v1/schedules", add_schedule, methods=["POST"]),
    Route("/v1/schedules", list_schedules, methods=["GET"]),
    Route("/v1/schedules/{name}", show_schedule, methods=["GET"]),
    Route("/v1/schedules/{name}", remove_schedule, methods=["DELETE"]),
    Route("/v1/schedules/{name}/pause", pause_schedule, methods=["POST"]),
    Route("/v1/schedules/{name}/resume", resume_schedule, methods=["POST"]),
    Route("/v1/schedules/{name}/run", run_schedule, methods=["POST"]),
]
