"""Rows of the PostgreSQL store: jobs, history and executions to and from the tuples psycopg
reads and COPYs. Times are whole seconds in both stores (``sec``)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from ..model import End, Execution, HistoryRow, Job, Kind, Outcome, Result, Status
from . import rules
from .jobdict import job_to_json

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import TupleRow

KINDS = {k.value: k for k in Kind}
STATUSES = {s.value: s for s in Status}
COMPACT = json.JSONEncoder(separators=(",", ":")).encode


def one(row: TupleRow | None) -> TupleRow:
    """The row of a statement that always gives one (an aggregate, a function's value, a row
    locked before)."""
    assert row is not None
    return row


def copy_rows(cur: Cursor[TupleRow], sql: str, types: Sequence[str],
              rows: Iterable[Sequence[Any]]) -> None:
    """``rows`` into a table by ``COPY ... FROM STDIN`` (``sql``), typed ``types`` (binary)."""
    with cur.copy(sql) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def lock_key(text: str) -> int:
    """A 31-bit advisory-lock key (pg_advisory_lock(int4, int4) takes signed int4)."""
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


def shard_key(job_id: str) -> int:
    """A job row's ``shard_key`` column (``shard_key % n`` is ``ids.shard_of``)."""
    return zlib.crc32(job_id.encode())


@overload
def sec(at: datetime) -> datetime: ...
@overload
def sec(at: datetime | None) -> datetime | None: ...
def sec(at: datetime | None) -> datetime | None:
    # Stored times are whole seconds in both stores; comparisons use the same truncation.
    return at.replace(microsecond=0) if at is not None and at.microsecond else at


def as_float(x: float | None) -> float | None:
    # Binary COPY of a float8 column takes floats only (an int from a config file would fail).
    return float(x) if x is not None else None


def row_to_job(r: Sequence[Any]) -> Job:
    # By position (a claim makes one a job): keywords cost ~0.6 µs of a ~2 µs job.
    return Job(
        r[0], KINDS[r[1]], r[2], r[3], json.loads(r[4]) if r[4] else {}, r[6], r[7], r[8],
        r[9], r[10], r[11], STATUSES[r[12]], r[13], r[14], r[15], r[16], r[17], r[18], r[19],
        r[20], r[21], r[22], r[23], r[24], r[25], json.loads(r[5]) if r[5] else None, r[26],
        r[27],
    )


def job_to_row(j: Job, fingerprint: str | None) -> tuple[Any, ...]:
    # Once a job of every batch COPY'd: ``sec`` and ``as_float`` inlined, an enum's text by
    # ``_value_`` (``.value`` is a Python-level property): 0.91-0.95 -> 0.60 µs a bench job.
    first, due, lease, started, occurrence = (j.first_check_at, j.next_check_at, j.lease_until,
                                              j.started_at, j.occurrence)
    horizon, timeout, grace = j.horizon, j.timeout, j.misfire_grace
    job_id = j.id
    return (
        job_id, j.kind._value_, j.target, j.payload_json,
        COMPACT(j.headers) if j.headers else None,
        COMPACT(j.env) if j.env is not None else None, j.entity_name, j.entity_key,
        first.replace(microsecond=0) if first.microsecond else first,
        due.replace(microsecond=0) if due.microsecond else due, j.check_count, j.attempt,
        j.status._value_, j.max_checks, None if horizon is None else float(horizon),
        None if timeout is None else float(timeout), j.max_attempts,
        None if grace is None else float(grace),
        j.idempotency_key, j.cwd, sec(j.created_at), sec(j.updated_at), j.last_error,
        j.lease_owner, lease and sec(lease), started and sec(started), j.schedule,
        occurrence and sec(occurrence), fingerprint, zlib.crc32(job_id.encode()),  # shard_key
    )


def row_to_history(r: Sequence[Any]) -> HistoryRow:
    return HistoryRow(
        id=r[0], kind=KINDS[r[1]], target=r[2], entity_name=r[3], entity_key=r[4],
        outcome=Outcome(r[5]), reason=r[6], checks=r[7], attempts=r[8], first_check_at=r[9],
        ended_at=r[10], created_at=r[11], duration_ms=r[12], last_status=r[13], error=r[14],
        output=r[15], payload_json=r[16], host=r[17], pid=r[18], schedule=r[19],
    )


def history_row(j: Job, outcome: Outcome, reason: str, now: datetime, fingerprint: str | None,
                result: Result | None = None, lateness: float | None = None,
                owner: str | None = None) -> tuple[Any, ...]:
    """A history row (``HISTORY_COLUMNS``) of ``j`` ending as ``rules.ended`` says."""
    reason, checks, attempts, ms, late, status, error, output, keep, host, pid = rules.ended(
        j, outcome, reason, result, lateness, owner)
    return (
        j.id, j.kind._value_, j.target, j.entity_name, j.entity_key, outcome._value_, reason,
        checks, attempts, sec(j.first_check_at), now, sec(j.created_at), ms, late, status,
        error, output, j.idempotency_key, fingerprint, j.payload_json,
        # What `retry` and idempotency need to rebuild the job; a plain done job keeps none.
        job_to_json(j) if keep else None, host, pid, j.schedule,
    )


def finished_row(e: End, now: datetime, fingerprint: str | None, owner: str,
                 x: Execution | None) -> tuple[tuple[Any, ...], Execution | None]:
    """The history row of a job a run ended (``FOLDED_COLUMNS`` after ``HISTORY_COLUMNS``),
    with ``x``, its last execution, folded in when ``rules.folds`` allows (then ``x`` too)."""
    row = history_row(e.job, e.outcome, e.reason, now, fingerprint, e.result, e.lateness, owner)
    if x is not None and rules.folds(x, now, (row[12], row[13], row[14], row[15], row[21],
                                              row[22])):
        return (*row, sec(x.at), x.slot, x.check, x.attempt, x.answer._value_), x
    return (*row, None, None, None, None, None), None


def execution_row(x: Execution) -> tuple[Any, ...]:
    return (x.job_id, sec(x.at), x.slot, x.check, x.attempt, x.answer.value, x.status,
            as_float(x.duration_ms), as_float(x.lateness_ms),
            rules.kept(x.error), x.host, x.pid)
