"""``/healthz`` (the store answers), ``/readyz`` (and the last slot fired on time), and
``/metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .metrics import CONTENT_TYPE, store_families

if TYPE_CHECKING:
    from ..api import Awty
    from .backend import Backend


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


class Scrapes:
    """The store's figures for ``/metrics``, read on a connection and in a thread of their own
    (``Backend.apart``): a day's histograms and counts never hold the store's thread, behind
    which every add waits; and one read at a time: the scrapes that arrive while one is under
    way get its figures. Not cached past it: a scrape after a run sees that run."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.under_way: asyncio.Future[list[Metric]] | None = None

    async def families(self) -> list[Metric]:
        if self.under_way is None:
            self.under_way = asyncio.ensure_future(self.backend.apart(store_families))
            self.under_way.add_done_callback(self._done)
        return await asyncio.shield(self.under_way)

    def _done(self, _: object) -> None:
        self.under_way = None


async def metrics(request: Request) -> Response:
    state = request.app.state
    families = await state.scrapes.families()
    return Response(state.metrics.text(families), media_type=CONTENT_TYPE)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
