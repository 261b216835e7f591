"""SQLite rows <-> records: the column lists, the conversions, and error translation."""

from __future__ import annotations

import json
import sqlite3
from itertools import chain
from operator import countOf, itemgetter
from datetime import datetime

from ..errors import Busy, StoreError
from ..model import Answer, Execution, HistoryRow, Job, Kind, Outcome, Status
from ..slots import from_iso, iso
from .jobdict import payload_of
from .rules import kept

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any


# A parameter that is not exactly an int, float or str is "adapted" by the sqlite3 module:
# without an adapter registered for its type, each None (and each StrEnum or bool) looked up
# __adapt__ and __conform__, building and dropping two AttributeErrors with formatted
# messages, ~2 µs a value. A job's row holds ~16 Nones: this was a third of what a claim
# re-arming schedules did beyond a one-off claim (callgrind; issue 32). The adapters give
# what the module bound before: NULL, the enum's text, 0 or 1. None's adapter is a C call
# that answers None (an empty dict's get): a Python function was a frame per None, 16 a
# job's row, ~0.3-0.4 µs of an add_many's job (issue 34).
sqlite3.register_adapter(type(None), {}.get)  # type: ignore[arg-type]  # get(None) is None
for _enum in (Kind, Status, Outcome, Answer):
    sqlite3.register_adapter(_enum, str.__str__)
sqlite3.register_adapter(bool, int)

JOB_COLUMNS = (
    "id", "entity_name", "entity_key", "kind", "target", "payload", "headers",
    "first_check_at", "next_check_at", "check_count", "attempt", "status", "max_checks",
    "horizon", "timeout", "max_attempts", "misfire_grace", "idempotency_key", "fingerprint",
    "cwd", "lease_owner", "lease_until", "created_at", "updated_at", "last_error",
    "started_at", "env", "schedule", "occurrence",
)
FINGERPRINT = JOB_COLUMNS.index("fingerprint")
# A job's lease is its row in job_lease (migration 12): in flight while it has one. Its
# columns' names are not future_job's, so that a condition on future_job's columns reads the
# same with the lease joined.
IN_FLIGHT = "EXISTS (SELECT 1 FROM job_lease l WHERE l.job_id = future_job.id)"
_LEASED = {"status": "CASE WHEN job_id IS NULL THEN 'pending' ELSE 'in_flight' END",
           "lease_owner": "owner", "lease_until": "until", "started_at": "started",
           "updated_at": "coalesce(claimed_at, updated_at)"}
SELECT_JOB = ("SELECT " + ", ".join(_LEASED.get(c, c) for c in JOB_COLUMNS)
              + " FROM future_job LEFT JOIN job_lease ON job_id = id")
JOB_HEAD = f"INSERT INTO future_job ({', '.join(JOB_COLUMNS)})"
INSERT_JOB = f"{JOB_HEAD} VALUES ({', '.join('?' * len(JOB_COLUMNS))})"
HISTORY_COLUMNS = (
    "id", "kind", "target", "entity_name", "entity_key", "outcome", "reason", "checks",
    "attempts", "first_check_at", "ended_at", "created_at", "duration_ms", "lateness_ms",
    "last_status", "error", "output", "idempotency_key", "fingerprint", "job", "host", "pid",
    "schedule",
)
HISTORY_HEAD = f"INSERT INTO job_history ({', '.join(HISTORY_COLUMNS)})"
INSERT_HISTORY = f"{HISTORY_HEAD} VALUES ({', '.join('?' * len(HISTORY_COLUMNS))})"
EXECUTION_COLUMNS = ("job_id", "at", "slot", "check_no", "attempt", "answer", "status",
                     "duration_ms", "lateness_ms", "error", "host", "pid")
EXECUTION_HEAD = f"INSERT INTO job_event ({', '.join(EXECUTION_COLUMNS)})"
INSERT_EXECUTION = f"{EXECUTION_HEAD} VALUES ({', '.join('?' * len(EXECUTION_COLUMNS))})"

# An execution folded into its job's history row (migration 11; ``rules.folds``), as the
# columns of an execution row, and the history's columns that hold it.
FOLDED_COLUMNS = ("exec_at", "exec_slot", "exec_check", "exec_attempt", "exec_answer")
FOLDED_HEAD = f"INSERT INTO job_history ({', '.join(HISTORY_COLUMNS + FOLDED_COLUMNS)})"
_AS_EXECUTION = ("id, exec_at, exec_slot, exec_check, exec_attempt, exec_answer, last_status, "
                 "duration_ms, lateness_ms, error, host, pid")
# One job's (``?1``) execution rows, then its history rows (checks, attempts, an execution
# folded into it or NULLs), each in the order written: ``rules.in_recorded_order`` takes them.
JOB_EXECUTIONS = (
    f"SELECT {', '.join(EXECUTION_COLUMNS)}, 0 AS src, seq, NULL, NULL FROM job_event "
    f"WHERE job_id = ?1 UNION ALL SELECT {_AS_EXECUTION}, 1, seq, checks, attempts "
    "FROM job_history WHERE id = ?1 ORDER BY src, seq")
# Every execution that began at or after ``?1``, as a table (EXECUTION_COLUMNS): a folded one
# began no later than its row ended (``rules.folds``), so the history's ended_at index bounds
# the search.
EXECUTIONS_SINCE = (
    f"(SELECT {', '.join(EXECUTION_COLUMNS)} FROM job_event WHERE at >= ?1 UNION ALL "
    f"SELECT {_AS_EXECUTION} FROM job_history WHERE ended_at >= ?1 AND exec_at >= ?1)")

_KINDS = {k.value: k for k in Kind}  # a dict lookup, not an Enum call: claims build many jobs
_STATUSES = {s.value: s for s in Status}
_ANSWERS = {a.value: a for a in Answer}


def opt_time(text: str | None) -> datetime | None:
    return from_iso(text) if text else None


def opt_iso(at: datetime | None) -> str | None:
    return iso(at) if at else None


def row_to_job(r: tuple[Any, ...]) -> Job:
    # Positional, in Job's order: keywords cost a Job four times as much to build.
    return Job(
        r[0], _KINDS[r[3]], r[4], r[5], json.loads(r[6]) if r[6] else {}, r[1], r[2],
        from_iso(r[7]), from_iso(r[8]), r[9], r[10], _STATUSES[r[11]], r[12], r[13], r[14],
        r[15], r[16], r[17], r[19], opt_time(r[22]), opt_time(r[23]), r[24], r[20],
        opt_time(r[21]), opt_time(r[25]), json.loads(r[26]) if r[26] is not None else None,
        r[27], opt_time(r[28]),
    )


# What a claim reads of each row: what it does not already know (status, lease, updated_at:
# it sets them; started_at: NULL) and what a Job holds (not the fingerprint). Every column read
# costs the store thread ~0.2 µs a row, with the GIL held.
CLAIM_COLUMNS = ("id", "kind", "target", "payload", "headers", "entity_name", "entity_key",
                 "first_check_at", "next_check_at", "check_count", "attempt", "max_checks",
                 "horizon", "timeout", "max_attempts", "misfire_grace", "idempotency_key", "cwd",
                 "created_at", "last_error", "env", "schedule", "occurrence")
# As JSON values: REAL columns as exact text (JSON numbers keep only 15 digits).
_REAL = ("horizon", "timeout", "misfire_grace")
CLAIM_JSON = ", ".join(f"CASE WHEN {c} IS NULL THEN NULL ELSE printf('%!.17g', {c}) END"
                      if c in _REAL else c for c in CLAIM_COLUMNS)


def claimed_job(r: tuple[Any, ...], times: dict[str, datetime], owner: str, lease_until: datetime,
                now: datetime) -> Job:
    """A claimed row (``CLAIM_COLUMNS``) as the Job the claim made of it. ``times``: instants
    already read in this claim (its rows share a slot and a few add times)."""
    first, slot, created = r[7], r[8], r[18]
    return Job(
        r[0], _KINDS[r[1]], r[2], r[3], json.loads(r[4]) if r[4] else {}, r[5], r[6],
        times.get(first) or times.setdefault(first, from_iso(first)),
        times.get(slot) or times.setdefault(slot, from_iso(slot)), r[9], r[10],
        Status.IN_FLIGHT, r[11], _real(r[12]), _real(r[13]), r[14], _real(r[15]), r[16], r[17],
        (times.get(created) or times.setdefault(created, from_iso(created))) if created
        else None, now, r[19], owner, lease_until, None,
        json.loads(r[20]) if r[20] is not None else None, r[21], opt_time(r[22]),
    )


def _real(text: str | None) -> float | None:
    return None if text is None else float(text)


def insert_many(c: sqlite3.Connection, head: str, ncols: int, rows: list[tuple[Any, ...]],
                limit: int = 999) -> None:
    """``head`` (``INSERT INTO t (a, b, …)``) for every row, as multi-row VALUES statements of
    up to ``limit`` parameters (999: SQLite's oldest limit): a statement is one step of
    SQLite's, with the GIL released, where ``executemany`` takes one step, and one GIL
    hand-over, per row."""
    if not rows:
        return
    one = "(" + ",".join("?" * ncols) + ")"
    per = max(1, limit // ncols)
    full = head + " VALUES " + ",".join([one] * per)
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        c.execute(full if len(chunk) == per else head + " VALUES " + ",".join([one] * len(chunk)),
                  list(chain.from_iterable(chunk)))


def insert_job_rows(c: sqlite3.Connection, rows: list[tuple[Any, ...]],
                    limit: int = 999) -> None:
    """Job rows (``job_to_row``'s) as ``insert_many`` inserts them, without the columns that
    are None in every row: a job's nullable columns default to NULL, and each None bound
    still costs the sqlite3 module an adapter call (~1,400 instructions). A claim's next
    occurrences, made from one template, leave ~16 of the 29 columns empty (issue 32)."""
    if not rows:
        return
    n = len(rows)
    # Only a column None in the first row can be None in all; each is counted in C (a
    # generator over 100,000 rows was ~1 µs a job of add_many's, issue 34).
    keep = [i for i, v in enumerate(rows[0])
            if v is not None or countOf(map(itemgetter(i), rows), None) != n]
    pick = itemgetter(*keep)  # keep holds the NOT NULL columns: never a single index
    insert_many(c, f"INSERT INTO future_job ({', '.join(JOB_COLUMNS[i] for i in keep)})",
                len(keep), list(map(pick, rows)), limit)


def insert_alike(c: sqlite3.Connection, row: tuple[Any, ...],
                 others: list[tuple[str, str]]) -> None:
    """Jobs like ``row`` (``job_to_row``'s) but for their id and schedule (``others``: the
    (id, schedule) of each), in the order given: one statement that binds the row's values
    once and the pairs as one JSON document, where a row each bound its 29 values (a claim's
    next occurrences of one template and time; issue 32)."""
    if not others:
        return
    at_id, at_name = JOB_COLUMNS.index("id"), JOB_COLUMNS.index("schedule")
    keep = [i for i, v in enumerate(row) if v is not None and i not in (at_id, at_name)]
    c.execute(f"INSERT INTO future_job (id, schedule, {', '.join(JOB_COLUMNS[i] for i in keep)}) "
              "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
              f"{', '.join('?' * len(keep))} FROM json_each(?)",
              [*(row[i] for i in keep), json.dumps(others)])


class Isos(dict[datetime | None, str | None]):
    """Stored instants by datetime, each spelled once (``iso``'s strftime is ~0.3 µs): the
    jobs of a batch share a few (their slots, the moment they were added). None is None."""

    def __init__(self) -> None:
        super().__init__({None: None})

    def __missing__(self, at: datetime) -> str:
        text = self[at] = iso(at)
        return text


def job_to_row(j: Job, fingerprint: str | None, isos: Isos | None = None) -> tuple[Any, ...]:
    """``isos``: instants already spelled, shared by a batch's rows."""
    t = iso if isos is None else isos.__getitem__
    o = opt_iso if isos is None else isos.__getitem__
    return (
        j.id, j.entity_name, j.entity_key, j.kind, j.target, j.payload_json,
        json.dumps(j.headers, separators=(",", ":")) if j.headers else None,
        t(j.first_check_at), t(j.next_check_at), j.check_count, j.attempt, j.status,
        j.max_checks, j.horizon, j.timeout, j.max_attempts, j.misfire_grace, j.idempotency_key,
        fingerprint, j.cwd, j.lease_owner, o(j.lease_until), o(j.created_at),
        o(j.updated_at), j.last_error, o(j.started_at),
        json.dumps(j.env, separators=(",", ":")) if j.env is not None else None,
        j.schedule, o(j.occurrence),
    )


def row_to_history(r: sqlite3.Row) -> HistoryRow:
    return HistoryRow(
        id=r["id"], kind=_KINDS[r["kind"]], target=r["target"], entity_name=r["entity_name"],
        entity_key=r["entity_key"], outcome=Outcome(r["outcome"]), reason=r["reason"],
        checks=r["checks"], attempts=r["attempts"], first_check_at=from_iso(r["first_check_at"]),
        ended_at=from_iso(r["ended_at"]), created_at=opt_time(r["created_at"]),
        duration_ms=r["duration_ms"], last_status=r["last_status"], error=r["error"],
        output=r["output"], payload_json=payload_of(r["job"]), host=r["host"], pid=r["pid"],
        schedule=r["schedule"],
    )


def execution_to_row(e: Execution) -> tuple[Any, ...]:
    return (e.job_id, iso(e.at), e.slot, e.check, e.attempt, e.answer.value, e.status,
            e.duration_ms, e.lateness_ms, kept(e.error), e.host,
            e.pid)


def row_to_execution(r: tuple[Any, ...]) -> Execution:
    return Execution(job_id=r[0], at=from_iso(r[1]), slot=r[2], check=r[3], attempt=r[4],
                     answer=_ANSWERS[r[5]], status=r[6], duration_ms=r[7], lateness_ms=r[8],
                     error=r[9], host=r[10], pid=r[11])


def where(conditions: list[tuple[str, object]]) -> tuple[str, list[Any]]:
    """`` WHERE a = ? AND b >= ?`` and its parameters, from the (clause, value) pairs whose value
    is given; datetimes become stored instants."""
    used = [(c, iso(v) if isinstance(v, datetime) else v) for c, v in conditions
            if v is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(c for c, _ in used), [v for _, v in used]


# The slots that hold pending jobs, one seek of the slot index each. The entity index is keyed
# slot first (so that a run's deletions stay together: migration 5), and an entity lookup is one
# seek of it per slot listed here rather than a scan of every pending job.
_PENDING_SLOTS = (
    "next_check_at IN (WITH RECURSIVE s(at) AS (SELECT min(next_check_at) FROM future_job "
    "UNION ALL SELECT (SELECT min(next_check_at) FROM future_job WHERE next_check_at > s.at) "
    "FROM s WHERE s.at IS NOT NULL) SELECT at FROM s)")


def entity_filters(entity: str, key: str | None) -> tuple[str, list[Any]]:
    """`` WHERE`` for one entity's jobs (and key, when given), through the slot-entity index."""
    cond, params = where([("entity_name = ?", entity), ("entity_key = ?", key)])
    return cond + " AND " + _PENDING_SLOTS, params


def job_filters(status: str | None, slot: datetime | None, until: datetime | None,
                entity: str | None, key: str | None, kind: str | None) -> tuple[str, list[Any]]:
    cond, params = where([("next_check_at = ?", slot), ("next_check_at <= ?", until),
                          ("entity_name = ?", entity), ("entity_key = ?", key),
                          ("kind = ?", kind or None)])
    if status:  # a job's status is whether it holds a lease (migration 12)
        cond += (" AND " if cond else " WHERE ") + {
            "in_flight": IN_FLIGHT, "pending": "NOT " + IN_FLIGHT}.get(status, "0")
    if entity is not None and slot is None:
        cond += " AND " + _PENDING_SLOTS
    return cond, params


def translate(e: sqlite3.Error, what: str) -> Exception:
    msg = str(e)
    if "locked" in msg or "busy" in msg:
        return Busy(f"database is busy ({what}): another process holds a write lock; "
                    "nothing was changed, try again")
    return StoreError(f"{what}: {msg}")
