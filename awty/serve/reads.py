"""``/v1/history``, ``/v1/slots``, ``/v1/stats``: what ``awty history``, ``slots`` and ``stats``
show, as their ``--json`` prints it."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..documents import history_dict
from .auth import authorize
from .jobs import query_int
from .problems import Problem

if TYPE_CHECKING:
    from ..api import Awty

OUTCOMES = ("done", "gone", "cancelled", "failed", "expired")
HISTORY_LIMIT, HISTORY_MAX = 100, 1000


def history_rows(a: Awty, q: dict[str, str]) -> list[dict[str, Any]]:
    """The rows ``awty history`` shows for these filters (outcome, entity, key, since, limit);
    shared by the API and the console's search."""
    outcome = q.get("outcome") or None
    if outcome not in (None, *OUTCOMES):
        raise Problem(400, f"outcome must be {', '.join(OUTCOMES[:-1])} or {OUTCOMES[-1]}",
                      field="outcome")
    limit = query_int(q.get("limit") or None, HISTORY_LIMIT, HISTORY_MAX)
    since = a.parse_time(q["since"]) if q.get("since") else None
    return [history_dict(h) for h in a.history(
        outcome=outcome, entity=q.get("entity") or None, key=q.get("key") or None, since=since,
        limit=limit)]


async def history(request: Request) -> Response:
    await authorize(request, "jobs:read")
    q = dict(request.query_params)
    return JSONResponse({"history": await request.app.state.backend.run(history_rows, q)})


def _slots(a: Awty) -> list[dict[str, Any]]:
    from ..slots import iso, slot_id

    return [{"slot": slot_id(s), "at": iso(s), "jobs": n} for s, n in a.slots()]


async def slots(request: Request) -> Response:
    await authorize(request, "jobs:read")
    return JSONResponse({"slots": await request.app.state.backend.run(_slots)})


def _stats(a: Awty, window: str) -> dict[str, Any]:
    from ..slots import parse_duration
    from ..stats import compute

    try:
        seconds = parse_duration(window)
    except ValueError as e:
        raise Problem(400, f"window: {e}", field="window") from None
    if seconds <= 0:
        raise Problem(400, "window: must be more than zero", field="window")
    return compute(a, window=timedelta(seconds=seconds))


async def stats(request: Request) -> Response:
    await authorize(request, "jobs:read")
    window = request.query_params.get("window", "1d")
    return JSONResponse(await request.app.state.backend.run(_stats, window))


ROUTES = [
    Route("/v1/history", history, methods=["GET"]),
    Route("/v1/slots", slots, methods=["GET"]),
    Route("/v1/stats", stats, methods=["GET"]),
]
