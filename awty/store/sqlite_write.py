"""The SQLite store's multi-row writes, each run inside the caller's ``BEGIN IMMEDIATE``:
adding with idempotency keys, ending jobs into history, re-arming an ended job (what each
decides is ``rules``'; here only how SQLite reads and writes it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from ..errors import JobNotFound
from ..model import Added, End, Execution, Job
from ..slots import from_iso, iso
from . import rules
from .jobdict import job_from_json, job_to_json, payload_only_json, whole_job
from .sqlite_rows import (
    FINGERPRINT, FOLDED_COLUMNS, FOLDED_HEAD, HISTORY_COLUMNS, INSERT_JOB, SELECT_JOB, Isos,
    insert_job_rows, insert_many, job_to_row, opt_iso, row_to_job,
)

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any


def add_jobs(c: sqlite3.Connection, jobs: Sequence[Job],
             fingerprints: Sequence[str | None]) -> list[Added]:
    """Insert all or none (see ``Store.add``; the keys' rule is ``rules.admit``)."""
    known: dict[str, tuple[Job, str | None]] = {}
    for key in dict.fromkeys(j.idempotency_key for j in jobs if j.idempotency_key):
        found = _by_idempotency_key(c, key)
        if found is not None:
            known[key] = found
    out, rows = rules.admit(jobs, fingerprints, known)
    # A batch's rows go in in the order runs take them (``admit`` sorts them): a slot's rows
    # then sit together in the table, in the order a run claims and deletes them. A batch
    # interleaves due times, and ids given or made elsewhere follow no order: in the order
    # given, a claim of a big slot dirtied one table page per job where a few hold its rows
    # (figures: BENCHMARKS.md, "Performance history").
    isos = Isos()
    _insert_jobs(c, [job_to_row(j, f, isos) for j, f in rows])
    return out


def add_chunks(c: sqlite3.Connection,
               chunks: Iterable[tuple[Sequence[Job], Sequence[str | None]]]) -> list[Added]:
    """Insert the jobs of each chunk as ``chunks`` gives them, a chunk on a writer thread
    while the next is made (see ``Store.add_chunks``)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    out: list[Added] = []
    isos = Isos()
    total = 0
    # A chunk is one statement where SQLite allows it (its own steps, without the GIL, are
    # then one long stretch on the other core: statements of 76 rows each waited for the GIL
    # behind the validation, up to the 5 ms switch interval, once every ~0.2 ms of SQLite's).
    limit = c.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    with _cache_for(c) as widen, ThreadPoolExecutor(1, "awty-add") as writer:
        pending: Future[None] | None = None
        for jobs, fps in chunks:
            added, pairs = rules.admit_chunk(jobs, fps)
            rows = [job_to_row(j, f, isos) for j, f in pairs]
            total += len(rows)
            if pending is not None:
                pending.result()  # one chunk at a time: the connection is the writer's
            widen(total)
            pending = writer.submit(insert_job_rows, c, rows, limit)
            out += added
        if pending is not None:
            pending.result()
    return out


# Rows a batch may add before the page cache is widened for it (see _cache_for).
BIG_BATCH = 5000


def _insert_jobs(c: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    # Rows go in as multi-row VALUES without the columns None in every row (a one-off job
    # leaves ~16 of 29 empty): each None bound was an adapter call, each row a step of
    # executemany's (10,000 jobs, callgrind: store.add 108k -> 83k instructions a job;
    # issue 34).
    with _cache_for(c) as widen:
        widen(len(rows))
        insert_job_rows(c, rows)


@contextmanager
def _cache_for(c: sqlite3.Connection) -> Iterator[Callable[[int], None]]:
    """A page cache as wide as the rows given to the callable need, taken back at the end.
    A big batch's pages would overflow the store's page cache and spill to the WAL
    mid-transaction: it gets a cache to fit (~0.5 KiB a row), taken back before the commit
    (dirty pages stay until written; only clean ones go)."""
    before: list[int] = []

    def widen(rows: int) -> None:
        if rows < BIG_BATCH:
            return
        if not before:
            before.append(c.execute("PRAGMA cache_size").fetchone()[0])
        want = rows // 2 + 2048  # KiB
        if before[0] >= 0 or -before[0] < want:
            c.execute(f"PRAGMA cache_size = {-want}")

    try:
        yield widen
    finally:
        if before:
            c.execute(f"PRAGMA cache_size = {int(before[0])}")


def _by_idempotency_key(c: sqlite3.Connection, key: str) -> tuple[Job, str | None] | None:
    r = c.execute(SELECT_JOB + " WHERE idempotency_key = ?", (key,)).fetchone()
    if r is not None:
        return row_to_job(r), r[FINGERPRINT]
    h = c.execute("SELECT job, fingerprint FROM job_history WHERE idempotency_key = ? "
                  "ORDER BY seq DESC LIMIT 1", (key,)).fetchone()
    if h is not None:
        return job_from_json(h[0]), h[1]
    return None


# The lease rows (and start marks) of the jobs given as a JSON list: a lease goes with its job,
# and when the job is pending again (given back, moved, reslotted), so that a job is in flight
# exactly while it has one (migration 12).
DROP_LEASES = "DELETE FROM job_lease WHERE job_id IN (SELECT value FROM json_each(?))"


def end_rows(c: sqlite3.Connection, ends: Sequence[End], now: datetime,
             owner: str | None = None, last: dict[str, Execution] | None = None,
             ) -> dict[str, Execution]:
    """Move ended jobs from future_job to one history row each (``rules.ended``); ``owner``:
    the runner that ended them, None for a cancel. ``last``: each job's last execution
    recorded with its end; those the history row holds (``rules.folds``) are returned, by job
    id, and are not to be written as execution rows."""
    if not ends:
        return {}
    stamp = iso(now)
    rows = []
    folded: dict[str, Execution] = {}
    for e in ends:
        j = e.job
        reason, checks, attempts, ms, late, status, error, output, keep, host, pid = rules.ended(
            j, e.outcome, e.reason, e.result, e.lateness, owner)
        x = last.get(j.id) if last else None
        if x is not None and rules.folds(x, now, (ms, late, status, error, host, pid)):
            folded[j.id] = x
            run: tuple[Any, ...] = (iso(x.at), x.slot, x.check, x.attempt, x.answer.value)
        else:
            run = (None, None, None, None, None)
        rows.append((
            j.id, j.kind.value, j.target, j.entity_name, j.entity_key, e.outcome.value,
            reason, checks, attempts, iso(j.first_check_at), stamp, opt_iso(j.created_at),
            ms, late, status, error, output, j.idempotency_key, None,
            job_to_json(j) if keep else payload_only_json(j), host, pid, j.schedule, *run,
        ))
    insert_many(c, FOLDED_HEAD, len(HISTORY_COLUMNS) + len(FOLDED_COLUMNS), rows)
    # Fingerprints follow the job into history, for idempotency after it ended.
    c.executemany(
        "UPDATE job_history SET fingerprint = (SELECT fingerprint FROM future_job "
        "WHERE future_job.id = job_history.id) WHERE seq = (SELECT max(seq) FROM "
        "job_history WHERE id = ?) AND idempotency_key IS NOT NULL",
        [(e.job.id,) for e in ends if e.job.idempotency_key])
    ids = json.dumps([e.job.id for e in ends])
    c.execute("DELETE FROM future_job WHERE id IN (SELECT value FROM json_each(?))", (ids,))
    c.execute(DROP_LEASES, (ids,))
    return folded


def drop_leases(c: sqlite3.Connection, ids: list[str]) -> None:
    """These jobs are pending again: their leases (and start marks) go."""
    if ids:
        c.execute(DROP_LEASES, (json.dumps(ids),))


def retry_job(c: sqlite3.Connection, job_id: str, next_check_at: datetime,
              now: datetime) -> Job:
    """Re-arm an ended job as pending (see ``Store.retry``; the rule is ``rules.rearm``)."""
    if c.execute("SELECT 1 FROM future_job WHERE id = ?", (job_id,)).fetchone():
        raise rules.still_pending(job_id)
    h = c.execute("SELECT job, fingerprint, outcome, reason FROM job_history WHERE id = ? "
                  "ORDER BY seq DESC LIMIT 1", (job_id,)).fetchone()
    if h is None:
        raise JobNotFound(job_id)
    kept = whole_job(h[0])
    old = job_from_json(kept) if kept is not None else None
    key = old.idempotency_key if old is not None else None
    held = old is not None and old.occurrence is not None and c.execute(
        "SELECT id FROM future_job WHERE schedule = ? AND occurrence = ?",
        (old.schedule, iso(old.occurrence))).fetchone()
    at = old is not None and old.occurrence is not None and c.execute(
        "SELECT next_at FROM schedule WHERE name = ?", (old.schedule,)).fetchone()
    job = rules.rearm(job_id, old, h[2], next_check_at=next_check_at, now=now, key_free=not (
        key and c.execute("SELECT 1 FROM future_job WHERE idempotency_key = ?",
                          (key,)).fetchone()), held_by=held[0] if held else None,
        schedule_at=from_iso(at[0]) if at else None, reason=h[3])
    c.execute(INSERT_JOB, job_to_row(job, h[1]))
    return job
