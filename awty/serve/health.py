"""``/healthz`` (the store answers), ``/readyz`` (and the last slot fired on time), and
``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .metrics import CONTENT_TYPE, store_families

if TYPE_CHECKING:
    from ..api import Awty


def _health(a: Awty) -> dict[str, Any]:
    h = a.store.check()
    return {"ok": h.ok, "store": a.where if h.ok else h.detail}


async def healthz(request: Request) -> Response:
    try:
        doc = await request.app.state.backend.run(_health)
    except Exception as e:  # noqa: BLE001 - any failure to reach the store is a 503
        doc = {"ok": False, "store": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return JSONResponse(doc, 200 if doc["ok"] else 503)


def _ready(a: Awty) -> dict[str, Any]:
    """Ready: the store answers, and no slot before the current one still holds work (the
    runner, cron's or ``serve --run-slots``, fired the last slot on time)."""
    doc = _health(a)
    if doc["ok"]:
        current = a.current_slot()
        late = [(s, n) for s, n in a.slots() if s < current]
        doc["missed_jobs"] = sum(n for _, n in late)
        if late:
            doc["ok"] = False
            from ..slots import slot_id

            doc["detail"] = (f"{doc['missed_jobs']} job(s) in past slots since "
                             f"{slot_id(late[0][0])}: no runner fired them (`awty catchup`)")
    return doc


async def readyz(request: Request) -> Response:
    try:
        doc = await request.app.state.backend.run(_ready)
    except Exception as e:  # noqa: BLE001 - any failure to reach the store is a 503
        doc = {"ok": False, "store": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return JSONResponse(doc, 200 if doc["ok"] else 503)


async def metrics(request: Request) -> Response:
    state = request.app.state
    families = await state.backend.run(store_families)
    return Response(state.metrics.text(families), media_type=CONTENT_TYPE)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
