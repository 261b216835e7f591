"""What each console page shows, read in the store's thread: the same documents the API
answers with (``documents``, ``stats.compute``, ``reads.history_rows``), so the console never
shows a figure the API or the CLI would not."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..documents import job_dict, schedule_dict, show_document
from ..slots import current_slot
from .chart import next_day
from .reads import OUTCOMES, history_rows

if TYPE_CHECKING:
    from ..api import Awty

FAILURES = 8
UPCOMING = 8
PAGE = 100
__all__ = ["OUTCOMES", "history", "job", "jobs", "overview", "schedules"]


def overview(a: Awty) -> dict[str, Any]:
    from ..stats import compute

    now = a.clock.now()
    return {
        "stats": compute(a, window=timedelta(days=1)),
        "chart": next_day(a.slots(), current_slot(now, a.settings.resolution),
                          a.settings.resolution, a.tz),
        "failures": history_rows(a, {"outcome": "failed", "limit": str(FAILURES)}),
        "upcoming": [job_dict(j) for j in a.list(limit=UPCOMING)],
        "schedules": schedules(a),
        "resolution": a.settings.resolution,
    }


def jobs(a: Awty, q: dict[str, str]) -> dict[str, Any]:
    from .jobs import job_page

    wanted = {k: v for k, v in q.items() if v and k in ("entity", "key", "kind", "status")}
    page = job_page(a, wanted, PAGE, q.get("after") or None)
    nxt = page["next"]
    return {"jobs": page["jobs"], "next": nxt.replace("/v1/jobs?", "/jobs?") if nxt else None,
            "total": a.count(entity=wanted.get("entity"), key=wanted.get("key"),
                             kind=wanted.get("kind"), status=wanted.get("status"))}


def job(a: Awty, job_id: str) -> dict[str, Any]:
    return show_document(a.get(job_id), a.executions(job_id))


def history(a: Awty, q: dict[str, str]) -> list[dict[str, Any]]:
    wanted = {k: v for k, v in q.items() if v and k in ("entity", "key", "outcome", "since")}
    return history_rows(a, {**wanted, "limit": str(PAGE)})


def schedules(a: Awty) -> list[dict[str, Any]]:
    return [schedule_dict(i) for i in a.schedules()]
