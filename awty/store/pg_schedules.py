"""The PostgreSQL store's schedule rows (as ``sqlite_schedules``): each function runs inside
the caller's transaction, on its cursor; what each decides is ``schedrules``'."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from psycopg import errors as pg_errors

from ..errors import ScheduleNotFound
from ..model import Job, Outcome, Schedule
from .jobdict import job_from_json, job_to_json
from .pg_rows import (
    copy_rows, history_row, job_to_row, one, row_to_job, sec, shard_key,
)
from .pg_sql import HISTORY_COPY_TYPES, JOB_COLUMNS, JOB_COPY_TYPES, Sql

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import TupleRow

    from .schedrules import ClaimPlan


def schedule_to_row(s: Schedule) -> tuple[Any, ...]:
    return (s.name, s.cron, s.every, sec(s.start), s.zone, s.missed, float(s.window),
            s.resolution, job_to_json(s.template), sec(s.next_at), sec(s.paused_at),
            sec(s.created_at))


def row_to_schedule(r: Sequence[Any], templates: dict[str, Job] | None = None) -> Schedule:
    """``templates``: the templates already read (``sqlite_schedules.row_to_schedule``)."""
    template = templates.get(r[8]) if templates is not None else None
    if template is None:
        template = job_from_json(r[8])
        if templates is not None:
            templates[r[8]] = template
    return Schedule(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], template, r[9], r[10],
                    r[11])


def must(cur: Cursor[TupleRow], sql: Sql, name: str) -> Schedule:
    r = cur.execute(sql.schedule_lock, (name,)).fetchone()
    if r is None:
        raise ScheduleNotFound(name)
    return row_to_schedule(r)


def arm(cur: Cursor[TupleRow], sql: Sql, s: Schedule, now: datetime) -> Job:
    """Make ``s``'s pending occurrence (``next_at``) unless a job of it exists
    (``schedrules.first_free``); returns its job."""
    from .schedrules import first_free, occurrence_job

    at, make = first_free(s, s.next_at, partial(_taken, cur, sql))
    if at != s.next_at:
        cur.execute(sql.schedule_set_next, (sec(at), s.name))
    if not make:
        return row_to_job(one(cur.execute(sql.schedule_occurrence_job,
                                          (s.name, sec(at))).fetchone()))
    job = occurrence_job(s, at, now)
    copy_rows(cur, sql.copy_jobs, JOB_COPY_TYPES, [job_to_row(job, None)])
    return job


def _rows(p: ClaimPlan) -> list[tuple[Any, ...]]:
    return p.rows(job_to_row, (*JOB_COLUMNS, "fingerprint", "shard_key"), _with_shard_key)


def _with_shard_key(values: list[Any]) -> tuple[Any, ...]:
    """A job row (``job_to_row``) given its other columns: its shard key follows its id."""
    values[-1] = shard_key(values[0])
    return tuple(values)


def _taken(cur: Cursor[TupleRow], sql: Sql, name: str, at: datetime) -> str | None:
    r = cur.execute(sql.schedule_armed, (name, sec(at))).fetchone()
    return r[0] if r else None


def rearm(cur: Cursor[TupleRow], sql: Sql, claimed: list[Job], now: datetime,
          owner: str) -> set[str]:
    """A claim's re-arming (``sqlite_schedules.rearm``); the schedule rows are locked in name
    order, so that runners claiming occurrences of the same schedules wait for each other."""
    from .schedrules import group_moves, plan, settle

    names = sorted({j.schedule for j in claimed if j.schedule})
    templates: dict[str, Job] = {}
    found = {s.name: s for s in (row_to_schedule(r, templates) for r in cur.execute(
        sql.schedules_lock, (names,)).fetchall())}
    p = plan(found, claimed, now)
    if p.jobs or p.alike:
        try:
            with cur.connection.transaction():  # a savepoint
                copy_rows(cur, sql.copy_jobs, JOB_COPY_TYPES, _rows(p))
        except pg_errors.UniqueViolation:
            # An occurrence to make has its job already (the (schedule, occurrence) key):
            # that job is the occurrence's; the claim goes on (``sqlite_schedules.rearm``).
            settle(p, found, now, partial(_taken, cur, sql))
            copy_rows(cur, sql.copy_jobs, JOB_COPY_TYPES, _rows(p))
    history = [history_row(j, Outcome.SKIPPED, reason, now, None, owner=owner)
               for j, reason in p.skipped]
    # Schedules of one rule move alike: one statement for each (from, to).
    for (new, old), moved in group_moves(p.moves).items():
        cur.execute(sql.schedules_move, (sec(new), sec(old), moved))
    if history:
        copy_rows(cur, sql.copy_history, HISTORY_COPY_TYPES, history)
    if p.dropped:
        cur.execute(sql.delete_jobs, (list(p.dropped),))
    return p.dropped
