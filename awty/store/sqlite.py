"""SQLiteStore: the embedded default store (WAL, busy timeout, BEGIN IMMEDIATE writes).

The hot paths (add, claim, start, finish) use the stdlib connection directly with
``executemany``; sqlite-utils runs the migrations. Writes open with ``BEGIN IMMEDIATE`` so that
a reader never has to upgrade its lock mid-transaction ("database is locked" with no retry).
Owner liveness and slot locks are flocks (``filelocks``); rows and reports live beside this.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from ..errors import JobNotFound, StoreError, Unstorable
from ..ids import shard_of
from ..model import (
    Added, ApiToken, CancelResult, Decision, Durations, End, Execution, HistoryRow, Job,
    LeaseGroup, Outcome, Reslot, Schedule, StoreHealth, StoreStats,
)
from ..slots import from_iso, is_boundary, iso, slot_for
from . import migrations, rules, sqlite_portable, sqlite_reports, sqlite_schedules
from .filelocks import FlockSlotLock, OwnerSessions
from .spec import StoreSpec
from .sqlite_rows import (
    CLAIM_COLUMNS, CLAIM_JSON, EXECUTION_HEAD, EXECUTION_COLUMNS, IN_FLIGHT, INSERT_HISTORY,
    JOB_EXECUTIONS, SELECT_JOB, claimed_job, entity_filters, execution_to_row, insert_many,
    job_filters, row_to_execution, row_to_history, row_to_job, translate, where,
)
from .sqlite_write import DROP_LEASES, add_chunks, add_jobs, drop_leases, end_rows, retry_job

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

# A claim's candidates (future_job with its lease row joined, if any): pending (no lease), or
# in flight under another owner's expired lease (the owners still alive are excluded by the
# caller: see ``_live_expired_owners``).
_CLAIMABLE = ("(job_id IS NULL OR ((until IS NULL OR until <= ?) AND owner IS NOT ? "
              "AND coalesce(owner, '') NOT IN (SELECT value FROM json_each(?))))")
# A claim reads its rows as one JSON document (one step of SQLite's, one hand-over of the
# GIL, where a row at a time took one each while the event loop sends), then leases them: a
# row each in job_lease, the job's own row untouched (migration 12). A lease taken over
# replaces the old owner's row, its start mark with it.
_CLAIM_READ = ("SELECT json_group_array(json_array(" + CLAIM_JSON + ")), json_group_array(id) "
               "FROM (SELECT * FROM future_job LEFT JOIN job_lease ON job_id = id WHERE {} "
               "ORDER BY next_check_at, id LIMIT ?)")
_CLAIM_LEASE = ("INSERT OR REPLACE INTO job_lease (job_id, owner, until, claimed_at) "
                "SELECT value, ?, ?, ? FROM json_each(?)")
# The ids given (a JSON list) that ``owner`` holds: one row, one step of SQLite's (a row per id
# would hand the GIL back and forth once per job while the event loop sends).
_OWNED = ("SELECT json_group_array(job_id) FROM job_lease WHERE job_id IN "
          "(SELECT value FROM json_each(?)) AND owner = ?")
_SCHEDULE = CLAIM_COLUMNS.index("schedule")


def open_db_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does, whatever the umask."""
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        os.close(fd)
    if (path.stat().st_mode & 0o777) != 0o600:
        try:
            os.chmod(path, 0o600)
        except OSError:
            pass


def left_behind(path: Path) -> tuple[int, dict[str, str] | None]:
    """What the database at ``path`` still holds, read without changing it (a home that now
    names PostgreSQL is asked whether it left jobs here): its pending jobs, and where it moved
    (``Store.meta``'s ``"moved"``) if ``export --move`` marked it. (0, None) when it has no
    jobs table or cannot be read."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5.0)
        try:
            n = int(conn.execute("SELECT count(*) FROM future_job").fetchone()[0])
            try:
                row = conn.execute("SELECT value FROM awty_meta WHERE key = 'moved'").fetchone()
            except sqlite3.OperationalError:  # a schema before 7
                row = None
            return n, json.loads(row[0]) if row else None
        finally:
            conn.close()
    except sqlite3.Error:
        return 0, None


_TOKEN_NOTE = timedelta(minutes=1)  # a token's last use is written at most this often


def _tokens_live(c: sqlite3.Connection, tokens: Collection[str], now: datetime) -> None:
    """``add``'s check of serve's tokens, in its write transaction: ``Revoked`` for those not
    kept; the last use of the others noted as ``token_for`` notes it."""
    hashes = list(tokens)
    marks = ",".join("?" * len(hashes))
    found = c.execute(f"SELECT hash, last_used_at FROM api_token WHERE hash IN ({marks})",
                      hashes).fetchall()
    rules.tokens_gone(hashes, (h for h, _ in found))
    stale = [(iso(now), h) for h, used in found
             if used is None or from_iso(used) < now - _TOKEN_NOTE]
    if stale:
        c.executemany("UPDATE api_token SET last_used_at = ? WHERE hash = ?", stale)


def _token(row: tuple[Any, ...]) -> ApiToken:
    name, scopes, created, used, options = row
    return ApiToken.stored(name, json.loads(scopes), from_iso(created),
                           from_iso(used) if used else None, json.loads(options))


def _ids_json(ids: Iterable[str]) -> str:
    return json.dumps(list(ids))


def _to_pending(c: sqlite3.Connection, held: str, now: datetime) -> int:
    """Give back the leases of the jobs ``held`` (a JSON list of ids): pending again, changed
    now. How many."""
    c.execute("UPDATE future_job SET updated_at = ? WHERE id IN (SELECT value FROM json_each(?))",
              (iso(now), held))
    return c.execute(DROP_LEASES, (held,)).rowcount


class SQLiteStore:
    # SQLite's work in a run holds the GIL (~60 µs a job, beside the event loop's ~30): a
    # process of its own takes it to the other core (BENCHMARKS.md, ratio_bare)
    offload = True

    def __init__(self, path: Path, *, busy_timeout: float = 5.0, create: bool = True,
                 migrate: bool = True, locks: Path | None = None):
        self.path = Path(path)
        self.locks = Path(locks) if locks is not None else self.path.parent / "locks"
        self.sessions = OwnerSessions(self.locks)
        self.busy_timeout = busy_timeout
        # A run uses the store from two threads (its store thread, and reconciling beside it):
        # each write is a transaction of its own connection's, one at a time.
        self.lock = threading.RLock()
        if create:
            open_db_file(self.path)
        elif not self.path.exists():
            raise StoreError(f"no database at {self.path}")
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=busy_timeout,
                                        isolation_level=None, check_same_thread=False)
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                self.conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: durable across process crashes (what at-least-once needs);
            # a power cut may lose the last transactions, never corrupt the file.
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA wal_autocheckpoint = 8000")
            # 32 MB of pages (as they are used): with SQLite's 2 MB, a 100,000-job run read
            # pages back from the OS a dozen times per job
            self.conn.execute("PRAGMA cache_size = -32768")
            self.conn.create_function("awty_shard", 2, shard_of, deterministic=True)
            if migrate:
                self._migrate()
            self._meta = self._read_meta()
        except sqlite3.DatabaseError as e:
            raise translate(e, f"cannot open {self.path}") from None

    def _read_meta(self) -> dict[str, Any]:
        try:
            rows = self.conn.execute("SELECT key, value FROM awty_meta").fetchall()
        except sqlite3.OperationalError:  # a schema before 7, opened as it is (doctor)
            return {}
        return {k: json.loads(v) for k, v in rows}

    def _migrate(self) -> None:
        version = self.schema_version()
        if version == migrations.SCHEMA_VERSION:
            return
        if version > migrations.SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {version} is newer than this awty "
                             f"understands ({migrations.SCHEMA_VERSION}); upgrade awty")
        migrations.apply(self.conn)

    # -- lifecycle ------------------------------------------------------------------------
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def check(self) -> StoreHealth:
        try:
            version = self.schema_version()
        except sqlite3.Error as e:
            return StoreHealth(False, 0, f"cannot read {self.path}: {e}", (str(e),),
                               migrations.SCHEMA_VERSION)
        return sqlite_reports.check(self.conn, version, migrations.SCHEMA_VERSION)

    def close(self) -> None:
        self.conn.close()

    def spec(self) -> StoreSpec:
        return StoreSpec("sqlite", str(self.path), busy_timeout=self.busy_timeout,
                         locks=str(self.locks))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise translate(e, "cannot write") from None
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            try:
                self.conn.execute("COMMIT")
            except sqlite3.OperationalError as e:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise translate(e, "cannot commit") from None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        cur = self.conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, params).fetchall()

    # -- what the store keeps about itself -------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def _set_meta(self, c: sqlite3.Connection, key: str, value: Any) -> None:
        c.execute("INSERT INTO awty_meta (key, value) VALUES (?, ?) "
                  "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                  (key, json.dumps(value)))

    def set_cluster(self, values: dict[str, Any], *, now: datetime,
                    reslot: int | None = None) -> int:
        with self._write() as c:
            self._set_meta(c, "settings", values)
            moved = []
            if reslot is not None:
                for job_id, at in c.execute(
                        f"SELECT id, next_check_at FROM future_job WHERE NOT {IN_FLIGHT}"):
                    slot = from_iso(at)
                    if not is_boundary(slot, reslot):
                        moved.append((iso(slot_for(slot, reslot)), iso(now), job_id))
                c.executemany("UPDATE future_job SET next_check_at = ?, updated_at = ? "
                              "WHERE id = ?", moved)
                c.execute("UPDATE schedule SET resolution = ?", (reslot,))
        self._meta["settings"] = values
        return len(moved)

    def mark_moved(self, to: str, *, now: datetime) -> None:
        value = {"to": to, "at": iso(now)}
        with self._write() as c:
            self._set_meta(c, "moved", value)
        self._meta["moved"] = value

    # -- adding ---------------------------------------------------------------------------
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None], *,
            tokens: Collection[str] = (), now: datetime | None = None) -> list[Added]:
        try:
            with self._write() as c:
                if tokens:
                    assert now is not None
                    _tokens_live(c, tokens, now)
                return add_jobs(c, jobs, fingerprints)
        except sqlite3.IntegrityError as e:
            if "future_job.occurrence" in str(e):  # the (schedule, occurrence) key
                raise rules.occurrence_taken(jobs, self._occurrence_id) from None
            raise rules.id_taken() from None
        except sqlite3.OperationalError as e:
            raise translate(e, "cannot add") from None

    def add_chunks(self, chunks: Iterable[tuple[Sequence[Job], Sequence[str | None]]]
                   ) -> list[Added]:
        """Each chunk is inserted on a thread of its own while ``chunks`` makes the next:
        SQLite inserts without the GIL, on the other core (``sqlite_write.add_chunks``)."""
        try:
            with self._write() as c:
                return add_chunks(c, chunks)
        except sqlite3.IntegrityError:
            raise rules.id_taken() from None
        except sqlite3.OperationalError as e:
            raise translate(e, "cannot add") from None

    def _occurrence_id(self, name: str, at: datetime) -> str | None:
        r = self.conn.execute("SELECT id FROM future_job WHERE schedule = ? AND occurrence = ?",
                              (name, iso(at))).fetchone()
        return r[0] if r else None

    # -- reading --------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        r = self.conn.execute(SELECT_JOB + " WHERE id = ?", (job_id,)).fetchone()
        return row_to_job(r) if r else None

    def get_history(self, job_id: str) -> list[HistoryRow]:
        return [row_to_history(r) for r in self._rows(
            "SELECT * FROM job_history WHERE id = ? ORDER BY seq", (job_id,))]

    def executions(self, job_id: str) -> list[Execution]:
        return rules.recorded_executions(self.conn.execute(JOB_EXECUTIONS, (job_id,)),
                                         row_to_execution)

    def find(self, ids: Iterable[str]) -> dict[str, datetime | None]:
        with self.lock:
            return self._find(list(ids))

    def _find(self, ids: list[str]) -> dict[str, datetime | None]:
        out: dict[str, datetime | None] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for hid, in self.conn.execute(
                    f"SELECT DISTINCT id FROM job_history WHERE id IN ({marks})", chunk):
                out[hid] = None
            for jid, slot in self.conn.execute(
                    f"SELECT id, next_check_at FROM future_job WHERE id IN ({marks})", chunk):
                out[jid] = from_iso(slot)
        return out

    def match_ids(self, prefix: str, limit: int) -> list[str]:
        hi = prefix + "Z" * max(0, 26 - len(prefix))  # Z is the last id character
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM future_job WHERE id >= ? AND id <= ? UNION "
            "SELECT id FROM job_history WHERE id >= ? AND id <= ? ORDER BY id LIMIT ?",
            (prefix, hi, prefix, hi, int(limit)))]

    def list(self, *, status: str | None = None, slot: datetime | None = None,
             until: datetime | None = None, entity: str | None = None, key: str | None = None,
             kind: str | None = None, limit: int | None = None,
             after: tuple[datetime, str] | None = None) -> Iterator[Job]:
        cond, params = job_filters(status, slot, until, entity, key, kind)
        if after is not None:
            cond += (" AND " if cond else " WHERE ") + "(next_check_at, id) > (?, ?)"
            params = [*params, iso(after[0]), after[1]]
        sql = SELECT_JOB + cond + " ORDER BY next_check_at, id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        for r in self.conn.execute(sql, params):
            yield row_to_job(r)

    def count(self, *, status: str | None = None, slot: datetime | None = None,
              until: datetime | None = None, entity: str | None = None,
              key: str | None = None, kind: str | None = None) -> int:
        cond, params = job_filters(status, slot, until, entity, key, kind)
        return int(self.conn.execute("SELECT count(*) FROM future_job" + cond,
                                     params).fetchone()[0])

    def slot_ids(self, slot: datetime) -> set[str]:
        # One JSON document, one step of SQLite's with the GIL released: a row at a time, the
        # reconciling thread took the GIL back from the sending loop once per job of the slot.
        with self.lock:
            (found,) = self.conn.execute(
                "SELECT json_group_array(id) FROM future_job WHERE next_check_at = ?",
                (iso(slot),)).fetchone()
        return set(json.loads(found))

    def slots_with_work(self, *, since: datetime | None = None,
                        until: datetime | None = None) -> builtins.list[tuple[datetime, int]]:
        cond, params = where([("next_check_at >= ?", since), ("next_check_at <= ?", until)])
        sql = ("SELECT next_check_at, count(*) FROM future_job" + cond
               + " GROUP BY next_check_at ORDER BY next_check_at")
        return [(from_iso(s), n) for s, n in self.conn.execute(sql, params)]

    def history(self, *, outcome: str | None = None, entity: str | None = None,
                key: str | None = None, since: datetime | None = None,
                limit: int | None = None) -> Iterator[HistoryRow]:
        cond, params = where([("outcome = ?", outcome or None), ("entity_name = ?", entity or None),
                              ("entity_key = ?", key), ("ended_at >= ?", since)])
        sql = "SELECT * FROM job_history" + cond + " ORDER BY seq DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        cur = self.conn.cursor()
        cur.row_factory = sqlite3.Row
        for r in cur.execute(sql, params):
            yield row_to_history(r)

    def stats(self, *, now: datetime, since: datetime, current: datetime,
              next_slots: int) -> StoreStats:
        return sqlite_reports.stats(self.conn, self.sessions.alive, now=now, since=since,
                                    current=current, next_slots=next_slots)

    def leases(self, now: datetime) -> builtins.list[LeaseGroup]:
        return sqlite_reports.leases(self.conn, now, self.sessions.alive)

    def last_fired(self) -> tuple[datetime, datetime] | None:
        return sqlite_reports.last_fired(self.conn)

    def durations(self, since: datetime, executions_ms: Sequence[float],
                  runs_ms: Sequence[float]) -> tuple[Durations, Durations]:
        return sqlite_reports.durations(self.conn, since, executions_ms, runs_ms)

    def stats_and_durations(self, *, now: datetime, since: datetime, current: datetime,
                            next_slots: int, executions_ms: Sequence[float],
                            runs_ms: Sequence[float]
                            ) -> tuple[StoreStats, Durations, Durations]:
        return sqlite_reports.stats_and_durations(
            self.conn, self.sessions.alive, now=now, since=since, current=current,
            next_slots=next_slots, executions_ms=executions_ms, runs_ms=runs_ms)

    # -- changing -------------------------------------------------------------------------
    def _running(self, job: Job, now: datetime) -> bool:
        """``rules.running``, the owner's liveness read from its session's flock."""
        alive = self.sessions.alive(job.lease_owner) if job.started_at is not None else None
        return rules.running(job, alive, now)

    def _select(self, c: sqlite3.Connection, ids: Sequence[str]) -> builtins.list[Job]:
        return [row_to_job(r) for r in c.execute(
            SELECT_JOB + " WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (_ids_json(ids),))]

    def cancel(self, ids: Sequence[str], now: datetime,
               reason: str = "cancelled") -> CancelResult:
        ids = list(dict.fromkeys(ids))
        with self._write() as c:
            jobs = self._select(c, ids)
            result = self._cancel_jobs(c, jobs, now, reason)
        found = {j.id for j in jobs}
        return result.replace(missing=[i for i in ids if i not in found])

    def cancel_entity(self, entity: str, key: str | None, now: datetime) -> CancelResult:
        cond, params = entity_filters(entity, key)
        with self._write() as c:
            jobs = [row_to_job(r) for r in c.execute(SELECT_JOB + cond + " ORDER BY id", params)]
            return self._cancel_jobs(c, jobs, now, "cancelled")

    def _cancel_jobs(self, c: sqlite3.Connection, jobs: builtins.list[Job], now: datetime,
                     reason: str | Callable[[Job], str]) -> CancelResult:
        """``reason``: the history rows' reason, or the function giving each job's."""
        running = [j for j in jobs if self._running(j, now)]
        busy = {j.id for j in running}
        cancelled = [j for j in jobs if j.id not in busy]
        end_rows(c, [End(j, Outcome.CANCELLED, reason if isinstance(reason, str) else
                         reason(j), None) for j in cancelled], now)
        return CancelResult.of(cancelled, running)

    def reschedule(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        with self._write() as c:
            r = c.execute(SELECT_JOB + " WHERE id = ?", (job_id,)).fetchone()
            if r is None:
                raise JobNotFound(job_id)
            job = row_to_job(r)
            if self._running(job, now):
                raise rules.being_delivered(job)
            c.execute("UPDATE future_job SET next_check_at = ?, updated_at = ? WHERE id = ?",
                      (iso(next_check_at), iso(now), job_id))
            drop_leases(c, [job_id])
        return self.get(job_id)  # type: ignore[return-value]  # just moved: there

    def retry(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        with self._write() as c:
            return retry_job(c, job_id, next_check_at, now)

    def prune(self, before: datetime, *, dry_run: bool = False) -> int:
        if dry_run:
            return int(self.conn.execute("SELECT count(*) FROM job_history WHERE ended_at < ?",
                                         (iso(before),)).fetchone()[0])
        with self._write() as c:
            n = c.execute("DELETE FROM job_history WHERE ended_at < ?", (iso(before),)).rowcount
            c.execute("DELETE FROM job_event WHERE at < ?", (iso(before),))
        return n

    # -- running --------------------------------------------------------------------------
    def owner_session(self, owner: str) -> AbstractContextManager[None]:
        return self.sessions.session(owner)

    def slot_lock(self, slot: datetime, shard: tuple[int, int] | None = None) -> FlockSlotLock:
        return FlockSlotLock(self.locks, slot, shard)

    def _live_expired_owners(self, c: sqlite3.Connection, cond: str, params: builtins.list[Any],
                             now: datetime,
                             owner: str) -> str:
        """The owners whose expired leases in the claim's range must not be taken over: their
        session is open (a live process, whatever the clocks say). A JSON list."""
        # The lease table first (CROSS JOIN keeps that order): the expired leases are few,
        # where a claim's range may hold 100,000 pending jobs.
        owners = [r[0] for r in c.execute(
            "SELECT DISTINCT owner FROM job_lease CROSS JOIN future_job ON id = job_id "
            f"WHERE (until IS NULL OR until <= ?) AND owner IS NOT ? AND {cond}",
            [iso(now), owner, *params])]
        return _ids_json(o for o in owners if o and self.sessions.alive(o) is True)

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None,
              kinds: Sequence[str] | None = None) -> builtins.list[Job]:
        cond = "next_check_at = ?"
        params: builtins.list[Any] = [iso(slot)]
        if shard is not None:
            cond += " AND awty_shard(id, ?) = ?"
            params += [shard[1], shard[0]]
        if kinds is not None:
            cond += " AND kind IN (SELECT value FROM json_each(?))"
            params.append(_ids_json(kinds))
        return self._claim(cond, params, now, owner, lease_until, limit)

    def claim_ids(self, ids: Sequence[str], *, now: datetime, owner: str,
                  lease_until: datetime) -> builtins.list[Job]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        return self._claim("id IN (SELECT value FROM json_each(?))", [_ids_json(ids)], now,
                           owner, lease_until, len(ids))

    def _claim(self, cond: str, params: builtins.list[Any], now: datetime, owner: str,
               lease_until: datetime, limit: int) -> builtins.list[Job]:
        times: dict[str, datetime] = {}
        with self._write() as c:
            live = self._live_expired_owners(c, cond, params, now, owner)
            found, ids = c.execute(_CLAIM_READ.format(f"{cond} AND {_CLAIMABLE}"),
                                   [*params, iso(now), owner, live, limit]).fetchone()
            c.execute(_CLAIM_LEASE, (owner, iso(lease_until), iso(now), ids))
            rows = json.loads(found)
            if any(r[_SCHEDULE] for r in rows):
                # A schedule's next occurrence is made in the claim's own transaction.
                jobs = [claimed_job(r, times, owner, lease_until, now) for r in rows]
                dropped = sqlite_schedules.rearm(c, jobs, now, owner)
                return [j for j in jobs if j.id not in dropped]
        return [claimed_job(r, times, owner, lease_until, now) for r in rows]

    def start(self, ids: Sequence[str], *, owner: str, now: datetime) -> builtins.list[str]:
        if not ids:
            return []
        given = _ids_json(ids)
        with self._write() as c:
            marked = c.execute("UPDATE job_lease SET started = ? WHERE job_id IN "
                               "(SELECT value FROM json_each(?)) AND owner = ?",
                               (iso(now), given, owner)).rowcount
            if marked == len(ids):  # all still held, the usual answer: no read to say which
                return list(ids)
            (kept_json,) = c.execute(_OWNED, (given, owner)).fetchone()
        kept = set(json.loads(kept_json))
        return [i for i in ids if i in kept]

    def finish(self, decisions: Sequence[Decision], *, owner: str, now: datetime,
               executions: Sequence[Execution] = ()) -> builtins.list[Decision]:
        if not decisions and not executions:
            return []
        try:
            with self._write() as c:
                (owned_json,) = c.execute(_OWNED, (
                    _ids_json({d.job.id for d in decisions} | {e.job_id for e in executions}),
                    owner)).fetchone()
                owned = set(json.loads(owned_json))
                applied = [d for d in decisions if d.job.id in owned]
                mine = [e for e in executions if e.job_id in owned]
                folded = end_rows(c, [d for d in applied if isinstance(d, End)], now, owner,
                                  {e.job_id: e for e in mine})
                drop_leases(c, [d.job.id for d in applied if isinstance(d, Reslot)])
                stamp = iso(now)
                c.executemany(
                    "UPDATE future_job SET next_check_at = ?, check_count = ?, attempt = ?, "
                    "updated_at = ?, last_error = ?, last_status = ? WHERE id = ?",
                    [(iso(m.next_check_at), m.check_count, m.attempt, stamp,
                      rules.last_error(m.error, m.result),
                      m.result.status if m.result else None, m.job.id)
                     for m in applied if isinstance(m, Reslot)])
                insert_many(c, EXECUTION_HEAD, len(EXECUTION_COLUMNS),
                            [execution_to_row(e) for e in mine if folded.get(e.job_id) is not e])
        except (sqlite3.IntegrityError, sqlite3.DataError, UnicodeEncodeError) as e:
            # a value in one row (a trigger, a lone surrogate): the others may still go in
            raise Unstorable(f"cannot record results: {e}") from None
        return applied

    def release(self, ids: Sequence[str], *, owner: str, now: datetime) -> int:
        if not ids:
            return 0
        with self._write() as c:
            (held,) = c.execute(_OWNED, (_ids_json(ids), owner)).fetchone()
            return _to_pending(c, held, now)

    def release_stale(self, owner: str | None, now: datetime) -> int:
        if self.sessions.alive(owner) is True:
            return 0
        with self._write() as c:
            (held,) = c.execute(
                "SELECT json_group_array(job_id) FROM job_lease WHERE "
                "(until IS NULL OR until <= ?) AND owner IS ?", (iso(now), owner)).fetchone()
            return _to_pending(c, held, now)


    def note_runner(self, host: str, pid: int, kinds: Sequence[str], now: datetime) -> None:
        with self._write() as c:
            c.execute("INSERT INTO runner_host (host, kinds, pid, seen_at) VALUES (?, ?, ?, ?) "
                      "ON CONFLICT (host) DO UPDATE SET kinds = excluded.kinds, "
                      "pid = excluded.pid, seen_at = excluded.seen_at",
                      (host, _ids_json(kinds), pid, iso(now)))

    def runners(self) -> builtins.list[tuple[str, tuple[str, ...], int | None, datetime]]:
        return [(h, tuple(json.loads(k)), p, from_iso(at)) for h, k, p, at in self.conn.execute(
            "SELECT host, kinds, pid, seen_at FROM runner_host ORDER BY seen_at DESC, host")]

    # -- recurring schedules --------------------------------------------------------------
    def add_schedule(self, schedule: Schedule, now: datetime) -> Job:
        with self._write() as c:
            return sqlite_schedules.add(c, schedule, now)

    def get_schedule(self, name: str) -> Schedule | None:
        return sqlite_schedules.get(self.conn, name)

    def schedules(self) -> builtins.list[Schedule]:
        return sqlite_schedules.every(self.conn)

    def schedule_jobs(self, name: str) -> builtins.list[Job]:
        return sqlite_schedules.pending_of(self.conn, name)

    def schedule_outcomes(self) -> dict[str, tuple[str, datetime]]:
        return sqlite_schedules.outcomes(self.conn)

    def schedule_counts(self) -> tuple[int, int]:
        total, paused = self.conn.execute(
            "SELECT count(*), count(paused_at) FROM schedule").fetchone()
        return total, paused

    def unarmed_schedules(self) -> builtins.list[str]:
        return sqlite_schedules.unarmed(self.conn)

    def pause_schedule(self, name: str, now: datetime) -> Schedule:
        with self._write() as c:
            s = sqlite_schedules.set_paused(c, name, now)
            self._cancel_jobs(c, sqlite_schedules.pending_of(c, name), now,
                              partial(rules.paused_reason, s))
            return s

    def resume_schedule(self, name: str, now: datetime) -> Schedule:
        with self._write() as c:
            s = sqlite_schedules.set_paused(c, name, None)
            return s.replace(next_at=sqlite_schedules.arm(c, s, now).occurrence)

    def remove_schedule(self, name: str, now: datetime) -> CancelResult:
        with self._write() as c:
            sqlite_schedules.set_paused(c, name, now)  # raises ScheduleNotFound
            result = self._cancel_jobs(c, sqlite_schedules.pending_of(c, name), now,
                                       f"schedule {name} removed")
            sqlite_schedules.delete(c, name)
            return result
    # -- serve's tokens ---------------------------------------------------------------------
    def add_token(self, token: ApiToken, token_hash: str) -> None:
        with self._write() as c:
            added = c.execute(
                "INSERT INTO api_token (name, hash, scopes, options, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (token.name, token_hash, json.dumps(list(token.scopes)),
                 json.dumps(token.options()), iso(token.created_at))).rowcount
        if not added:
            raise rules.token_taken(token.name)

    def tokens(self) -> builtins.list[ApiToken]:
        return [_token(r) for r in self.conn.execute(
            "SELECT name, scopes, created_at, last_used_at, options FROM api_token "
            "ORDER BY name")]

    def token_for(self, token_hash: str, now: datetime) -> ApiToken | None:
        row = self.conn.execute("SELECT name, scopes, created_at, last_used_at, options "
                                "FROM api_token WHERE hash = ?", (token_hash,)).fetchone()
        if row is None:
            return None
        if row[3] is None or from_iso(row[3]) < now - _TOKEN_NOTE:
            with self._write() as c:
                c.execute("UPDATE api_token SET last_used_at = ? WHERE hash = ?",
                          (iso(now), token_hash))
        return _token(row)

    def token_named(self, name: str) -> ApiToken | None:
        with self.lock:  # the run's threads share the connection
            row = self.conn.execute("SELECT name, scopes, created_at, last_used_at, options "
                                    "FROM api_token WHERE name = ?", (name,)).fetchone()
        return _token(row) if row else None

    def set_token_env(self, name: str, exec_env: dict[str, str]) -> ApiToken | None:
        with self._write() as c:
            row = c.execute("SELECT name, scopes, created_at, last_used_at, options "
                            "FROM api_token WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            token = _token(row).replace(exec_env=dict(exec_env))
            c.execute("UPDATE api_token SET options = ? WHERE name = ?",
                      (json.dumps(token.options()), name))
        return token

    def revoke_token(self, name: str) -> bool:
        with self._write() as c:
            return c.execute("DELETE FROM api_token WHERE name = ?", (name,)).rowcount > 0

    # -- moving a home (export / import) --------------------------------------------------
    def export_schedules(self) -> Iterator[Schedule]:
        return sqlite_schedules.streamed(self.conn)

    def export_pending(self) -> Iterator[tuple[Job, str | None]]:
        return sqlite_portable.export_pending(self.conn)

    def export_history(self) -> Iterator[dict[str, Any]]:
        return sqlite_portable.export_history(self.conn)

    def import_home(self, jobs: Sequence[Job], fingerprints: Sequence[str | None],
                    rows: Iterable[dict[str, Any]], schedules: Sequence[Schedule] = ()
                    ) -> tuple[builtins.list[Added], int]:
        try:
            with self._write() as c:
                sqlite_schedules.insert(c, schedules)
                added = add_jobs(c, jobs, fingerprints) if jobs else []
                before = c.total_changes
                c.executemany(INSERT_HISTORY, sqlite_portable.history_values(rows))
                return added, c.total_changes - before
        except sqlite3.IntegrityError as e:
            if "future_job.occurrence" in str(e):  # the (schedule, occurrence) key
                raise rules.occurrence_taken(jobs, self._occurrence_id) from None
            if "schedule.name" in str(e):
                taken = rules.schedule_taken(
                    schedules, lambda name: sqlite_schedules.get(self.conn, name) is not None)
                if taken is not None:
                    raise taken from None
            if "UNIQUE" in str(e):
                raise rules.id_taken() from None
            raise Unstorable(f"cannot import: {e}") from None
        except sqlite3.OperationalError as e:
            raise translate(e, "cannot import") from None
