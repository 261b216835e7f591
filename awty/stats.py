"""``awty stats`` and ``awty prune``: read-only aggregates over the store, and history pruning.
The store computes the aggregates (``Store.stats``); this shapes them for the CLI's JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from .api import Awty
from .errors import InvalidInput
from .model import Durations, StoreStats
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
    since = now - window
    st = a.store.stats(now=now, since=since, current=current_slot(now, a.settings.resolution),
                       next_slots=next_slots)
    return _shaped(a, st, now, since)


def compute_with_durations(a: Awty, executions_ms: Sequence[float], runs_ms: Sequence[float],
                           *, window: timedelta = timedelta(days=1)
                           ) -> tuple[dict[str, Any], Durations, Durations]:
    """``compute`` and the store's ``durations`` over the same window, the window's executions
    read once for both (what a metrics scrape shows)."""
    now = a.clock.now()
    since = now - window
    st, executed, ran = a.store.stats_and_durations(
        now=now, since=since, current=current_slot(now, a.settings.resolution),
        next_slots=NEXT_SLOTS, executions_ms=executions_ms, runs_ms=runs_ms)
    return _shaped(a, st, now, since), executed, ran


def _shaped(a: Awty, st: StoreStats, now: datetime, since: datetime) -> dict[str, Any]:
    schedules, paused = a.store.schedule_counts()
    return {
        "now": iso(now),
        "window": {"since": iso(since), "seconds": (now - since).total_seconds()},
        "pending": {
            "total": st.pending + st.in_flight,
            "in_flight": st.in_flight,
            "stale_leases": st.stale_leases,
            "by_kind": st.by_kind,
            "next_slots": [{"slot": slot_id(s), "at": iso(s), "jobs": n}
                           for s, n in st.next_slots],
            "past_slots": {"slots": st.past_slots, "jobs": st.past_jobs},
        },
        "outcomes": st.outcomes,
        "executions": {
            "total": st.executions,
            "by_answer": st.by_answer,
            "retries": st.retries,  # executions that were a second or later attempt
            "failures": st.failures,  # executions that answered retry or fail
        },
        "lateness_ms": {"count": st.lateness_count, "median": st.lateness_median_ms,
                        "p99": st.lateness_p99_ms, "max": st.lateness_max_ms},
        # "skipped": the history rows of occurrences the missed policy did not fire in the
        # window (each row's reason counts the occurrences it stands for)
        "schedules": {"total": schedules, "paused": paused,
                      "skipped": st.outcomes.get("skipped", 0)},
    }


def prune(a: Awty, older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete history rows that ended more than ``older_than`` ago (and execution events as
    old). Returns the number of history rows deleted (or that would be, with ``dry_run``).
    Pruned jobs are forgotten: ``retry`` and idempotency keys no longer find them."""
    if older_than <= timedelta(0):
        raise InvalidInput("--older-than must be more than zero")
    return a.store.prune(a.clock.now() - older_than, dry_run=dry_run)
