"""The SQLite store's schedule rows: adding, reading, pausing, resuming, removing, and the
re-arming a claim does, each inside the caller's transaction (what each decides is
``schedrules``'; here only how SQLite reads and writes it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from functools import partial

from ..errors import Conflict, ScheduleNotFound
from ..model import End, Job, Outcome, Schedule
from ..slots import from_iso, iso
from .jobdict import job_from_json, job_to_json
from .sqlite_rows import (
    IN_FLIGHT, INSERT_JOB, SELECT_JOB, insert_alike, insert_job_rows, job_to_row, opt_iso,
    opt_time, row_to_job,
)
from .sqlite_write import end_rows

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from .schedrules import ClaimPlan

SCHEDULE_COLUMNS = ("name", "cron", "every", "start", "zone", "missed", "missed_window",
                    "resolution", "template", "next_at", "paused_at", "created_at")
SELECT_SCHEDULE = f"SELECT {', '.join(SCHEDULE_COLUMNS)} FROM schedule"
_INSERT = (f"INSERT INTO schedule ({', '.join(SCHEDULE_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(SCHEDULE_COLUMNS))})")


def schedule_to_row(s: Schedule) -> tuple[Any, ...]:
    return (s.name, s.cron, s.every, opt_iso(s.start), s.zone, s.missed, s.window,
            s.resolution, job_to_json(s.template), iso(s.next_at), opt_iso(s.paused_at),
            iso(s.created_at))


def row_to_schedule(r: Sequence[Any], templates: dict[str, Job] | None = None,
                    times: dict[str, datetime] | None = None) -> Schedule:
    """``templates``, ``times``: the templates and times already read (a claim reads many
    schedules, often made from one template, due at one time, made at one time): read once
    each."""
    if templates is None or times is None:
        return Schedule(r[0], r[1], r[2], opt_time(r[3]), r[4], r[5], r[6], r[7],
                        job_from_json(r[8]), from_iso(r[9]), opt_time(r[10]), opt_time(r[11]))
    template = templates.get(r[8])
    if template is None:
        template = templates[r[8]] = job_from_json(r[8])
    # Spelled out, not a loop over the four: a claim reads a row per occurrence it takes.
    start, next_at, paused, created = r[3], r[9], r[10], r[11]
    if start is not None:
        start = times.get(start) or times.setdefault(start, from_iso(start))
    next_at = times.get(next_at) or times.setdefault(next_at, from_iso(next_at))
    if paused is not None:
        paused = times.get(paused) or times.setdefault(paused, from_iso(paused))
    if created is not None:
        created = times.get(created) or times.setdefault(created, from_iso(created))
    return Schedule(r[0], r[1], r[2], start, r[4], r[5], r[6], r[7], template, next_at,
                    paused, created)


def get(c: sqlite3.Connection, name: str) -> Schedule | None:
    r = c.execute(SELECT_SCHEDULE + " WHERE name = ?", (name,)).fetchone()
    return row_to_schedule(r) if r else None


def _must(c: sqlite3.Connection, name: str) -> Schedule:
    s = get(c, name)
    if s is None:
        raise ScheduleNotFound(name)
    return s


def every(c: sqlite3.Connection) -> list[Schedule]:
    return list(streamed(c))


def streamed(c: sqlite3.Connection) -> Iterator[Schedule]:
    for r in c.execute(SELECT_SCHEDULE + " ORDER BY name"):
        yield row_to_schedule(r)


def insert(c: sqlite3.Connection, schedules: Sequence[Schedule]) -> None:
    """Schedules as they are (an import: their occurrences come with the jobs)."""
    c.executemany(_INSERT, map(schedule_to_row, schedules))


def add(c: sqlite3.Connection, s: Schedule, now: datetime) -> Job:
    if get(c, s.name) is not None:
        raise Conflict(f"schedule {s.name!r} already exists")
    c.execute(_INSERT, schedule_to_row(s))
    return arm(c, s, now)


def pending_of(c: sqlite3.Connection, name: str) -> list[Job]:
    """The schedule's jobs in future_job (its pending occurrence, and any a catch-up or a
    ``schedule run`` made, pending or in flight)."""
    return [row_to_job(r) for r in c.execute(
        SELECT_JOB + " WHERE schedule = ? ORDER BY next_check_at, id", (name,))]


def outcomes(c: sqlite3.Connection) -> dict[str, tuple[str, datetime]]:
    # One seek of the (schedule, seq) index per schedule.
    return {name: (outcome, from_iso(at)) for name, outcome, at in c.execute(
        "SELECT s.name, h.outcome, h.ended_at FROM schedule s JOIN job_history h ON h.seq = "
        "(SELECT max(seq) FROM job_history WHERE schedule = s.name)")}


def unarmed(c: sqlite3.Connection) -> list[str]:
    # One seek of the (schedule, occurrence) key per live schedule.
    return [name for name, in c.execute(
        "SELECT name FROM schedule s WHERE paused_at IS NULL AND NOT EXISTS (SELECT 1 FROM "
        "future_job f WHERE f.schedule = s.name AND f.occurrence = s.next_at) ORDER BY name")]


def set_paused(c: sqlite3.Connection, name: str, paused_at: datetime | None) -> Schedule:
    _must(c, name)
    c.execute("UPDATE schedule SET paused_at = ? WHERE name = ?", (opt_iso(paused_at), name))
    return _must(c, name)


def arm(c: sqlite3.Connection, s: Schedule, now: datetime) -> Job:
    """Make ``s``'s pending occurrence (``next_at``) unless a job of it exists
    (``schedrules.first_free``); returns its job."""
    from .schedrules import first_free, occurrence_job

    at, make = first_free(s, s.next_at, partial(_taken, c))
    if at != s.next_at:
        c.execute("UPDATE schedule SET next_at = ? WHERE name = ?", (iso(at), s.name))
    if not make:
        return row_to_job(c.execute(SELECT_JOB + " WHERE schedule = ? AND occurrence = ?",
                                    (s.name, iso(at))).fetchone())
    job = occurrence_job(s, at, now)
    c.execute(INSERT_JOB, job_to_row(job, None))
    return job


def delete(c: sqlite3.Connection, name: str) -> None:
    c.execute("DELETE FROM schedule WHERE name = ?", (name,))


def rearm(c: sqlite3.Connection, claimed: list[Job], now: datetime, owner: str) -> set[str]:
    """A claim's re-arming of the schedules whose pending occurrence it took
    (``schedrules.at_claim``); returns the ids of claimed jobs that must not fire (ended as
    ``skipped``, already out of future_job)."""
    from .schedrules import group_moves, plan, settle

    names = json.dumps(sorted({j.schedule for j in claimed if j.schedule}))
    templates: dict[str, Job] = {}
    times: dict[str, datetime] = {}
    found = {r[0]: row_to_schedule(r, templates, times) for r in c.execute(
        SELECT_SCHEDULE + " WHERE name IN (SELECT value FROM json_each(?))", (names,))}
    p = plan(found, claimed, now)
    c.execute("SAVEPOINT occurrences")
    try:
        _insert(c, p)
    except sqlite3.IntegrityError:
        # An occurrence to make has its job already (the (schedule, occurrence) key): that
        # job is the occurrence's; the claim goes on with the others (rare, hence a retry).
        c.execute("ROLLBACK TO occurrences")
        settle(p, found, now, partial(_taken, c))
        _insert(c, p)
    c.execute("RELEASE occurrences")
    # The compare and set: next_at moves only from the occurrence claimed. Schedules of one
    # rule move alike: one statement for each (from, to).
    for (new, old), moved in group_moves(p.moves).items():
        c.execute("UPDATE schedule SET next_at = ? WHERE next_at = ? AND name IN "
                  "(SELECT value FROM json_each(?))", (iso(new), iso(old), json.dumps(moved)))
    end_rows(c, [End(j, Outcome.SKIPPED, reason, None) for j, reason in p.skipped], now, owner)
    return p.dropped


def _insert(c: sqlite3.Connection, p: ClaimPlan) -> None:
    """A plan's jobs to insert, in its order: those made alike, a statement per kind."""
    insert_job_rows(c, [job_to_row(j, None) for j in p.jobs])
    for job, others in p.alike:
        row = job_to_row(job, None)
        insert_job_rows(c, [row])
        insert_alike(c, row, others)


def _taken(c: sqlite3.Connection, name: str, at: datetime) -> str | None:
    r = c.execute(f"SELECT CASE WHEN {IN_FLIGHT} THEN 'in_flight' ELSE 'pending' END "
                  "FROM future_job WHERE schedule = ? AND occurrence = ?",
                  (name, iso(at))).fetchone()
    return r[0] if r else None
