"""``awty stats`` and ``awty prune``: read-only aggregates over the store, and history pruning.

Everything is computed in SQL (counts, GROUP BY, one ORDER BY … LIMIT 1 OFFSET k per
percentile), so the cost does not depend on holding the rows in memory.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from .api import Awty
from .errors import InvalidInput
from .slots import current_slot, iso, slot_id

NEXT_SLOTS = 5


def compute(a: Awty, *, window: timedelta = timedelta(days=1),
            next_slots: int = NEXT_SLOTS) -> dict[str, Any]:
    """Pending work now, and what happened over the last ``window`` (by ``ended_at`` for
    outcomes, by execution time for executions). Lateness is an execution's start minus its
    slot boundary, in milliseconds."""
    if window <= timedelta(0):
        raise InvalidInput("--window must be more than zero")
    now = a.clock.now()
    since = iso(now - window)
    return {
        "now": iso(now),
        "window": {"since": since, "seconds": window.total_seconds()},
        "pending": _pending(a, now, next_slots),
        "outcomes": _counts(a, "SELECT outcome, count(*) FROM job_history WHERE ended_at >= ? "
                               "GROUP BY outcome ORDER BY outcome", since),
        "executions": _executions(a, since),
        "lateness_ms": _lateness(a, since),
    }


def _pending(a: Awty, now: datetime, next_slots: int) -> dict[str, Any]:
    q = a.store.query
    current = current_slot(now, a.settings.resolution)
    upcoming = q("SELECT next_check_at, count(*) FROM future_job WHERE next_check_at >= ? "
                 "GROUP BY next_check_at ORDER BY next_check_at LIMIT ?",
                 (iso(current), next_slots))
    past = q("SELECT count(*), count(DISTINCT next_check_at) FROM future_job "
             "WHERE next_check_at < ?", (iso(current),))[0]
    return {
        "total": q("SELECT count(*) FROM future_job")[0][0],
        "in_flight": q("SELECT count(*) FROM future_job WHERE status = 'in_flight'")[0][0],
        "stale_leases": q("SELECT count(*) FROM future_job WHERE status = 'in_flight' AND "
                          "(lease_until IS NULL OR lease_until <= ?)", (iso(now),))[0][0],
        "by_kind": _counts(a, "SELECT kind, count(*) FROM future_job GROUP BY kind "
                              "ORDER BY kind"),
        "next_slots": [{"slot": slot_id(datetime.fromisoformat(s)), "at": s, "jobs": n}
                       for s, n in upcoming],
        "past_slots": {"slots": past[1], "jobs": past[0]},
    }


def _executions(a: Awty, since: str) -> dict[str, Any]:
    q = a.store.query
    total, retries, failures = q(
        "SELECT count(*), coalesce(sum(attempt > 1), 0), "
        "coalesce(sum(answer IN ('retry', 'fail')), 0) FROM job_event WHERE at >= ?",
        (since,))[0]
    return {
        "total": total,
        "by_answer": _counts(a, "SELECT answer, count(*) FROM job_event WHERE at >= ? "
                                "GROUP BY answer ORDER BY answer", since),
        "retries": retries,  # executions that were a second or later attempt
        "failures": failures,  # executions that answered retry or fail
    }


def _lateness(a: Awty, since: str) -> dict[str, Any]:
    where = "FROM job_event WHERE at >= ? AND lateness_ms IS NOT NULL"
    n, top = a.store.query(f"SELECT count(*), max(lateness_ms) {where}", (since,))[0]
    if not n:
        return {"count": 0, "median": None, "p99": None, "max": None}

    def rank(k: int) -> float:  # the k-th smallest, 0-based
        return a.store.query(f"SELECT lateness_ms {where} ORDER BY lateness_ms LIMIT 1 "
                             f"OFFSET ?", (since, k))[0][0]

    median = rank(n // 2) if n % 2 else (rank(n // 2 - 1) + rank(n // 2)) / 2
    return {"count": n, "median": median, "p99": rank(math.ceil(0.99 * n) - 1), "max": top}


def _counts(a: Awty, sql: str, *params: Any) -> dict[str, int]:
    return {k: n for k, n in a.store.query(sql, params)}


def prune(a: Awty, older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete history rows that ended more than ``older_than`` ago (and execution events as
    old). Returns the number of history rows deleted (or that would be, with ``dry_run``).
    Pruned jobs are forgotten: ``retry`` and idempotency keys no longer find them."""
    if older_than <= timedelta(0):
        raise InvalidInput("--older-than must be more than zero")
    before = a.clock.now() - older_than
    if dry_run:
        return a.store.query("SELECT count(*) FROM job_history WHERE ended_at < ?",
                             (iso(before),))[0][0]
    return a.store.prune_history(before)
