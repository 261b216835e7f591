"""PostgresStore: the store for several hosts (many adders, many runners on one database).

Only imported when a database URL is configured: nothing on the SQLite path imports psycopg.
Claims are one ``UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED) RETURNING``, so runners on any
number of hosts share a slot's work without waiting on each other. An owner is *alive* while
its session advisory lock is held (``owner_session`` keeps a dedicated connection for it);
``pg_locks`` answers whatever any host's clock says, and a host that dies drops its lock with
its connection. The server can also end that session under a live runner: a start is made
only while the lock is held, checked in the start's own statement (``SessionLost`` otherwise),
so a runner others now take for gone sends nothing more, whichever of its processes starts.
Every psycopg error leaves as a one-line ``StoreError``.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from datetime import datetime, timedelta

import psycopg
from psycopg import errors as pg_errors
from psycopg.adapt import Dumper
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from ..config import SCHEMA_NAME, SYSTEM_SCHEMA, system_schema, url_passwords
from ..slots import iso, parse_slot_id
from ..errors import (
    Conflict, InvalidInput, JobNotFound, SessionLost, StoreError, Unreachable, Unstorable,
)
from ..model import (
    Added, ApiToken, Answer, CancelResult, Decision, Durations, End, Execution, HistoryRow,
    Job, LeaseGroup, Outcome, Reslot, Schedule, StoreHealth, StoreStats, run_order,
)
from . import pg_migrations, pg_portable, pg_schedules, rules
from .jobdict import job_from_json
from .pg_locks import PgSlotLock
from .pg_watch import TICK, Watch
from .pg_rows import (
    copy_rows, execution_row, finished_row, history_row, job_to_row, lock_key, one,
    row_to_history, row_to_job, sec,
)
from .pg_sql import (
    ANSWERS, EXECUTION_COPY_TYPES, FOLDED_COPY_TYPES, HISTORY_COPY_TYPES, JOB_COPY_TYPES, Sql,
    histogram,
)
from .spec import StoreSpec

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from psycopg import Connection, Cursor
    from psycopg.rows import TupleRow
    from psycopg_pool import ConnectionPool

# psycopg_pool logs reconnects as warnings; with no logging set up they would reach stderr
# through logging's last resort, around the command's own one-line error. An application that
# configures logging still gets them.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

_SECOND = timedelta(seconds=1)
_KEEPALIVES = " -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
_CLIENT_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                      "keepalives_count": 3}


class _IdArray(str):
    """A text[] parameter already written as its array literal (``_ids``)."""

    __slots__ = ()


class _IdArrayDumper(Dumper):
    oid = psycopg.adapters.types["text"].array_oid

    def dump(self, obj: _IdArray) -> bytes:
        return ("{" + obj + "}").encode()


# Only for our own type: nothing else a process sends through psycopg changes.
psycopg.adapters.register_dumper(_IdArray, _IdArrayDumper)
# ids the array literal takes as they are: no quoting, and none of them NULL
_PLAIN_IDS = re.compile(r"(?:[0-9A-Z]{26},)*[0-9A-Z]{26}")


def _ids(ids: Iterable[str]) -> list[str] | _IdArray:
    """A run's ids as a text[] parameter. psycopg's list dumper is Python, ~0.65 µs an id,
    and a start and a finish each send a batch's ids: when every id is a ULID (what awty
    makes and checks) the literal is one join and one match, ~0.08 µs an id (the server
    reads the same array); any other id, the list as psycopg dumps it."""
    ids = list(ids)
    text = ",".join(ids)
    return _IdArray(text) if _PLAIN_IDS.fullmatch(text) else ids


def _one_line(e: BaseException, hide: Sequence[str] = ()) -> str:
    text = str(e).strip() or type(e).__name__
    line = text.splitlines()[0].strip()
    for secret in hide:  # a message quoting the URL (a parse error) shows no password
        line = line.replace(secret, "***")
    return line


class _OccurrenceTaken(Exception):
    """``add`` hit the (schedule, occurrence) key: it names the occurrence, in a transaction
    of its own."""


class _OneConnection:
    """What a store without a pool uses in its place: one connection (autocommit, so each
    ``transaction()`` is a BEGIN/COMMIT of its own), reopened when it broke. A call made while
    it is taken (a stream being read) gets a connection of its own for its time. Only the
    pool's verbs the store uses."""

    def __init__(self, conn: Connection[TupleRow],
                 connect: Callable[..., Connection[TupleRow]]):
        self.conn = conn
        self._connect = connect
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Connection[TupleRow]]:
        if not self._lock.acquire(blocking=False):
            with self._connect(autocommit=True) as extra:
                yield extra
            return
        try:
            if self.conn.closed or self.conn.broken:
                self.conn = self._connect(autocommit=True)
            yield self.conn
        finally:
            self._lock.release()

    def check(self) -> None:
        if self.conn.broken:
            self.conn.close()

    def close(self, timeout: float = 0) -> None:
        self.conn.close()


class PostgresStore:
    # A run's store process does not pay here (``storeproc.pays``: "auto" leaves it off). The
    # store's work in the run's own process is psycopg's encoding and decoding, ~13-20 µs a
    # job, the GIL let go while the server works; a store process takes that off but adds
    # its start (psycopg's import and its connections: ~0.1-0.2 s of CPU) and the wire's
    # pickling on both sides. A 10,000-job run, interleaved: ~0.25 s less CPU in all and
    # ~20 % more callbacks/s without it (BENCHMARKS.md, pg_slot_ratio). SQLite's work holds
    # the GIL (~60 µs a job): there a process of its own pays.
    offload = False

    def __init__(self, url: str, *, schema: str = "awty", create: bool = False,
                 pool_size: int = 4, connect_timeout: float = 5.0, lease_clock: str = "server",
                 pool: bool = True):
        """``lease_clock``: "server", lease times in the database's clock (one for every host:
        see pg_sql.CLOCK); "caller", in the ``now`` each call is given (tests that move time
        by hand; runners on hosts whose clocks differ must not). ``pool=False``: a one-shot
        command's store (one ``awty add``): the connection that opened it serves every call,
        one at a time, and psycopg_pool is never imported (~a third of psycopg's import here,
        and a worker thread that opened a second connection)."""
        if not SCHEMA_NAME.fullmatch(schema):
            raise InvalidInput(f"database_schema {schema!r} is not a plain SQL name "
                               "(letters, digits, _)")
        if system_schema(schema):
            raise InvalidInput(f"database_schema {schema!r} is {SYSTEM_SCHEMA}")
        self.url, self.schema = url, schema
        if lease_clock not in ("server", "caller"):
            raise InvalidInput(f"lease_clock {lease_clock!r}: server or caller")
        self.lease_clock = lease_clock
        self.pool_size, self.connect_timeout = pool_size, connect_timeout
        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            raise InvalidInput("database_url is not a PostgreSQL URL: "
                               f"{_one_line(e, url_passwords(url))}") from None
        host = info.get("host") or info.get("hostaddr") or "local socket"
        self.where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
        # Times come back as UTC datetimes; the URL's own options (search_path…) are kept.
        options = f"{info.get('options') or ''} -c TimeZone=UTC".strip()
        # connect()'s keyword arguments (ConnectionPool takes them as a dict)
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(1, round(connect_timeout)), "options": options,
            "application_name": info.get("application_name") or "awty"}
        self.sql = Sql(schema)
        self._owner_class = lock_key(f"awty-owner:{schema}")
        self._slot_class = lock_key(f"awty-slot:{schema}")
        self._idempotency_class = lock_key(f"awty-idempotency:{schema}")
        self._sessions: dict[str, Connection[TupleRow]] = {}
        self._session_checked = False  # a pooler in transaction mode refused (once)
        self._down_since: tuple[float, float, str] | None = None  # see _unreachable
        self._probing = threading.Lock()  # one probe at a time: the others take its answer
        self._watch = Watch(self._unreachable, connect_timeout)
        self._pool: ConnectionPool | _OneConnection | None = None
        try:
            conn = self._connect(autocommit=True)
            try:
                if create:
                    pg_migrations.migrate(conn, schema)
                self._meta = self._opening(conn)
            except BaseException:
                conn.close()
                raise
        except psycopg.Error as e:  # this connection was the probe: no second one
            raise self._error(e, "cannot open the store", probe=False) from None
        if not pool:
            self._pool = _OneConnection(conn, self._connect)
            return
        conn.close()
        from psycopg_pool import ConnectionPool

        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, kwargs=self._kwargs,
                                    timeout=max(connect_timeout * 2, 5.0), open=True,
                                    name=f"awty-{schema}")

    def _connect(self, autocommit: bool = False) -> Connection[TupleRow]:
        return psycopg.connect(self.url, autocommit=autocommit, **self._kwargs)

    def _opening(self, conn: Connection[TupleRow]) -> dict[str, Any]:
        """The schema's version and the store's meta, in one round trip (what every command
        pays before its own work); a schema too old or missing gets ``_check_version``'s
        message."""
        try:
            version, meta = one(conn.execute(self.sql.opening).fetchone())
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            version = None
        if version != pg_migrations.LATEST:
            self._check_version(conn)
        return meta or {}

    def _check_version(self, conn: Connection[TupleRow]) -> int:
        with conn.cursor() as cur:
            v = pg_migrations.current_version(cur, self.schema)
        if v == 0:
            raise StoreError(f'no awty schema "{self.schema}" at {self.where}: run `awty init`')
        if v > pg_migrations.LATEST:
            raise StoreError(f'schema "{self.schema}" at {self.where} is version {v}, newer '
                             f"than this awty ({pg_migrations.LATEST}): upgrade awty")
        if v < pg_migrations.LATEST:
            raise StoreError(f'schema "{self.schema}" at {self.where} is version {v}, this '
                             f"awty needs {pg_migrations.LATEST}: run `awty init`")
        return v

    def _error(self, e: BaseException, what: str, probe: bool = True) -> Exception:
        if isinstance(e, pg_errors.UniqueViolation):
            return rules.id_taken() if what == "cannot add" else Conflict(
                f"{what}: {_one_line(e)}")
        if isinstance(e, (psycopg.DataError, psycopg.IntegrityError)):
            return Unstorable(f"PostgreSQL at {self.where}: {what}: {_one_line(e)}")
        if isinstance(e, (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName)):
            return StoreError(f'no awty schema "{self.schema}" at {self.where}: '
                              "run `awty init`")
        if isinstance(e, psycopg.OperationalError):
            down = self._unreachable() if probe else None
            if down:  # the pool's check would wait on every idle connection to a silent server
                return Unreachable(f"PostgreSQL at {self.where}: {what}: {down}")
            self._check_pool()
            return StoreError(f"PostgreSQL at {self.where}: {what}: {_one_line(e)}")
        return StoreError(f"PostgreSQL at {self.where}: {what}: {_one_line(e)}")

    @contextmanager
    def _tx(self, what: str) -> Iterator[Cursor[TupleRow]]:
        """One transaction on a pooled connection; psycopg errors become one-line errors."""
        if self._pool is None:
            raise StoreError("the store is closed")
        if self._down_since is not None:  # see _unreachable
            down = self._unreachable()
            if down:
                raise Unreachable(f"PostgreSQL at {self.where}: {what}: {down}")
            self._check_pool()
        try:
            with self._connection() as conn, self._watch.statement(conn), \
                    conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.Error as e:
            raise self._error(e, what) from None

    def _connection(self) -> AbstractContextManager[Connection[TupleRow]]:
        pool = self._pool
        assert pool is not None
        if pool.__class__ is _OneConnection:
            return pool.connection()
        return self._pooled(pool)  # type: ignore[arg-type]

    @contextmanager
    def _pooled(self, pool: ConnectionPool) -> Iterator[Connection[TupleRow]]:
        """A connection of the pool's. When none is free at once, the wait is watched as a
        statement is (``Watch.waiting``), in turns of a ``TICK``, and ends as soon as the
        server is known to be out of reach (the watch's probe, or another call's) rather than
        at the pool's timeout: the pool may be opening a connection to a silent server, and
        calls under way on several threads at once (a run's claims and results, serve's
        requests) would each wait it out, a connect timeout and more after the run gave up."""
        from psycopg_pool import PoolTimeout

        try:
            conn = pool.getconn(TICK)
        except PoolTimeout:
            deadline = time.monotonic() + pool.timeout
            with self._watch.statement(None):
                while True:
                    down = self._known_down()
                    if down:
                        raise PoolTimeout(down) from None
                    try:
                        conn = pool.getconn(TICK)
                        break
                    except PoolTimeout:
                        if time.monotonic() >= deadline:
                            raise
        try:
            with conn:
                yield conn
        finally:
            pool.putconn(conn)

    def _unreachable(self) -> str | None:
        """After a connection error: can a new connection be opened (within
        ``connect_timeout``)? If not, the server is down or out of reach; then, for as long as
        finding that out took, every call fails at once saying so (``_known_down``) rather
        than waiting for the pool in turn: an outage run gives up in about one connect
        timeout, not one per statement it still has to make (results, releases: 30 s and
        more). A server that refuses at once is asked again at once: it may be back. One probe
        at a time: a call that asks while another's probe is under way (the watch's, another
        thread's) waits for it and takes its answer, rather than open a connection of its own
        and wait out the connect timeout once more."""
        with self._probing:
            down = self._known_down()
            if down:
                return down
            t0 = time.monotonic()
            try:
                with self._connect(autocommit=True) as conn:
                    conn.execute("SELECT 1")
            except psycopg.Error as e:
                now = time.monotonic()
                self._down_since = (now, now - t0, f"unreachable ({_one_line(e)})")
                return self._down_since[2]
            self._down_since = None
            return None

    def told_unreachable(self, why: str) -> None:
        """Another process's store on the same server (a run's store process) found it out of
        reach: this one takes that as its own probe's answer, for a connect timeout. The run's
        end then neither unlocks its session nor probes again on a silent server."""
        if self._down_since is None:  # not under ``_probing``: the caller is a run's loop
            # its words without the other store's "PostgreSQL at …: cannot …: "
            at = why.rfind(": unreachable")
            self._down_since = (time.monotonic(), self.connect_timeout,
                                why[at + 2:] if at >= 0 else why)

    def _check_pool(self) -> None:
        if self._pool is not None:
            try:  # drop the pool's broken connections: the next call reconnects
                self._pool.check()
            except Exception:  # noqa: BLE001 - the server may still be down
                pass

    def _known_down(self) -> str | None:
        if self._down_since is None:
            return None
        since, took, why = self._down_since
        return why if time.monotonic() - since < took else None

    # -- lifecycle ------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._tx("schema version") as cur:
            return pg_migrations.current_version(cur, self.schema)

    def check(self) -> StoreHealth:
        try:
            with self._connect(autocommit=True) as conn:
                version, db, at = one(conn.execute(self.sql.server).fetchone())
                with conn.cursor() as cur:
                    v = pg_migrations.current_version(cur, self.schema)
        except psycopg.Error as e:
            return StoreHealth(False, 0, f"PostgreSQL at {self.where}: unreachable",
                               (_one_line(e),), pg_migrations.LATEST)
        detail = f"PostgreSQL {version} at {at}, database {db}, schema {self.schema}"
        problems: tuple[str, ...] = ()
        if v == 0:
            problems = (f'no awty schema "{self.schema}": run `awty init`',)
        elif v != pg_migrations.LATEST:
            problems = (f"schema version {v}, this awty needs {pg_migrations.LATEST}",)
        return StoreHealth(not problems, v, detail, problems, pg_migrations.LATEST)

    def spec(self) -> StoreSpec:
        return StoreSpec("postgres", self.url, self.schema, pool_size=self.pool_size,
                         connect_timeout=self.connect_timeout, lease_clock=self.lease_clock)

    def _clock(self, now: datetime) -> datetime | None:
        """The ``%(clock)s`` of lease times: None (the database's own) unless told otherwise."""
        return sec(now) if self.lease_clock == "caller" else None

    def close(self) -> None:
        self._watch.close()
        for conn in self._sessions.values():
            conn.close()
        self._sessions.clear()
        if self._pool is not None:
            # the pool's workers may be waiting out a connect timeout: not when it is down
            self._pool.close(timeout=0.1 if self._down_since else 5.0)
            self._pool = None

    # -- what the store keeps about itself -------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def set_cluster(self, values: dict[str, Any], *, now: datetime,
                    reslot: int | None = None) -> int:
        moved = 0
        with self._tx("cannot change the cluster's settings") as cur:
            cur.execute(self.sql.set_meta, ("settings", Jsonb(values)))
            if reslot is not None:
                moved = cur.execute(self.sql.reslot_pending, {
                    "secs": reslot * 60, "now": sec(now)}).rowcount
                cur.execute(self.sql.schedule_reslot, (reslot,))
        self._meta["settings"] = values
        return moved

    def mark_moved(self, to: str, *, now: datetime) -> None:
        value = {"to": to, "at": iso(sec(now))}
        with self._tx("cannot mark the home moved") as cur:
            cur.execute(self.sql.set_meta, ("moved", Jsonb(value)))
        self._meta["moved"] = value

    # -- adding ---------------------------------------------------------------------------
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None], *,
            tokens: Collection[str] = (), now: datetime | None = None) -> list[Added]:
        try:
            with self._tx("cannot add") as cur:
                if tokens:
                    assert now is not None
                    found = cur.execute(self.sql.tokens_live, {
                        "now": sec(now), "hashes": list(tokens)}).fetchall()
                    rules.tokens_gone(tokens, (r[0] for r in found))
                return self._add(cur, jobs, fingerprints)
        except _OccurrenceTaken:
            raise self._occurrence_taken(jobs) from None

    def add_chunks(self, chunks: Iterable[tuple[Sequence[Job], Sequence[str | None]]]
                   ) -> list[Added]:
        """Each chunk's rows go into one COPY from a writer thread while ``chunks`` makes the
        next, so the server inserts them on the other core meanwhile, where ``add`` would get
        them only once the whole batch was made (the caller keeps the interpreter's switch
        interval short meanwhile, ``gcpause.quick_switches``, for that thread to get the
        GIL). An exception from ``chunks`` ends the COPY with the transaction."""
        from psycopg.copy import QueuedLibpqWriter

        out: list[Added] = []
        with self._tx("cannot add") as cur:
            # flush_threshold 0: each block is sent (the thread waiting, without the GIL)
            # as soon as it is queued, not left in libpq's buffer until the next write; a
            # psycopg without the setting flushes each block anyway
            try:
                writer = QueuedLibpqWriter(cur, flush_threshold=0)
            except TypeError:
                writer = QueuedLibpqWriter(cur)
            with cur.copy(self.sql.copy_jobs, writer=writer) as copy:
                copy.set_types(JOB_COPY_TYPES)
                write = copy.write_row
                for jobs, fps in chunks:
                    added, rows = rules.admit_chunk(jobs, fps)
                    for j, fp in rows:
                        write(job_to_row(j, fp))
                    out += added
        return out

    def _occurrence_taken(self, jobs: Sequence[Job]) -> Conflict:
        """The (schedule, occurrence) key an add hit, named: read in a transaction of its own
        (the failed one can read nothing more)."""
        with self._tx("cannot add") as cur:
            def held(name: str, at: datetime) -> str | None:
                r = cur.execute(self.sql.schedule_occurrence_id, (name, sec(at))).fetchone()
                return r[0] if r else None

            return rules.occurrence_taken(jobs, held)

    def _add(self, cur: Cursor[TupleRow], jobs: Sequence[Job], fingerprints: Sequence[str | None]
             ) -> list[Added]:
        keys = sorted({j.idempotency_key for j in jobs if j.idempotency_key})
        known: dict[str, tuple[Job, str | None]] = {}
        if keys:
            # Two adders of one new key wait for each other here, not on the unique index.
            cur.execute(self.sql.key_lock,
                        (self._idempotency_class, [lock_key(k) for k in keys]))
            cur.execute(self.sql.by_keys, (keys,))
            known = {r[0]: (row_to_job(r[2:]), r[1]) for r in cur.fetchall()}
            missing = [k for k in keys if k not in known]
            if missing:
                cur.execute(self.sql.history_by_keys, (missing,))
                for key, fp, text in cur.fetchall():
                    known[key] = (job_from_json(text), fp)
        out, rows = rules.admit(jobs, fingerprints, known)
        if rows:
            try:
                copy_rows(cur, self.sql.copy_jobs, JOB_COPY_TYPES,
                           [job_to_row(j, fp) for j, fp in rows])
            except pg_errors.UniqueViolation as e:
                if e.diag.constraint_name == "future_job_occurrence":
                    raise _OccurrenceTaken from None
                raise
        return out

    # -- reading --------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        with self._tx("cannot read") as cur:
            r = cur.execute(self.sql.get, (job_id,)).fetchone()
        return row_to_job(r) if r else None

    def get_history(self, job_id: str) -> list[HistoryRow]:
        with self._tx("cannot read history") as cur:
            return [row_to_history(r) for r in cur.execute(self.sql.get_history, (job_id,))]

    def executions(self, job_id: str) -> list[Execution]:
        with self._tx("cannot read executions") as cur:
            rows = cur.execute(self.sql.executions, {"id": job_id}).fetchall()
        return rules.recorded_executions(rows, lambda r: Execution(
            r[0], r[1], r[2], r[3], r[4], Answer(r[5]), r[6], r[7], r[8], r[9], r[10], r[11]))

    def find(self, ids: Iterable[str]) -> dict[str, datetime | None]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        with self._tx("cannot read") as cur:
            found: dict[str, datetime | None] = dict(
                cur.execute(self.sql.find_pending, (wanted,)).fetchall())
            rest = [i for i in wanted if i not in found]
            if rest:
                for (i,) in cur.execute(self.sql.find_history, (rest,)):
                    found[i] = None
        return found

    def match_ids(self, prefix: str, limit: int) -> list[str]:
        pattern = re.sub(r"([\\%_])", r"\\\1", prefix) + "%"
        with self._tx("cannot read") as cur:
            cur.execute(self.sql.match_ids, {"p": pattern, "limit": limit})
            return [r[0] for r in cur.fetchall()]

    @staticmethod
    def _job_filters(status: str | None, slot: datetime | None, until: datetime | None,
                     entity: str | None, key: str | None, kind: str | None
                     ) -> tuple[str, list[Any]]:
        # A slot as a one-second range, as in claim: the slot index gives the order.
        slot = sec(slot)
        used: list[tuple[str, Any]] = [(c, v) for c, v in (
            ("status = %s", str(status) if status is not None else None),
            ("next_check_at >= %s", slot), ("next_check_at < %s", slot and slot + _SECOND),
            ("next_check_at <= %s", sec(until)), ("entity_name = %s", entity),
            ("entity_key = %s", key), ("kind = %s", str(kind) if kind is not None else None),
        ) if v is not None]
        if not used:
            return "", []
        return " WHERE " + " AND ".join(c for c, _ in used), [v for _, v in used]

    def list(self, *, status: str | None = None, slot: datetime | None = None,
             until: datetime | None = None, entity: str | None = None, key: str | None = None,
             kind: str | None = None, limit: int | None = None,
             after: tuple[datetime, str] | None = None) -> Iterator[Job]:
        where, params = self._job_filters(status, slot, until, entity, key, kind)
        if after is not None:
            where += (" AND " if where else " WHERE ") + "(next_check_at, id) > (%s, %s)"
            params = [*params, sec(after[0]), after[1]]
        sql = self.sql.list + where + " ORDER BY next_check_at, id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        return self._rows_streamed(sql, "cannot list", params, row_to_job)

    def count(self, *, status: str | None = None, slot: datetime | None = None,
              until: datetime | None = None, entity: str | None = None,
              key: str | None = None, kind: str | None = None) -> int:
        where, params = self._job_filters(status, slot, until, entity, key, kind)
        with self._tx("cannot count") as cur:
            return int(one(cur.execute(self.sql.count + where, params).fetchone())[0])

    def slot_ids(self, slot: datetime) -> set[str]:
        with self._tx("cannot read") as cur:
            return {r[0] for r in cur.execute(self.sql.slot_ids, (sec(slot),))}

    def slots_with_work(self, *, since: datetime | None = None,
                        until: datetime | None = None) -> builtins.list[tuple[datetime, int]]:
        used = [(c, v) for c, v in (("next_check_at >= %s", sec(since)),
                                    ("next_check_at <= %s", sec(until))) if v is not None]
        where = (" WHERE " + " AND ".join(c for c, _ in used)) if used else ""
        sql = self.sql.slots_with_work + where + " GROUP BY next_check_at ORDER BY next_check_at"
        with self._tx("cannot read") as cur:
            return [(r[0], r[1]) for r in cur.execute(sql, [v for _, v in used])]

    def history(self, *, outcome: str | None = None, entity: str | None = None,
                key: str | None = None, since: datetime | None = None,
                limit: int | None = None) -> Iterator[HistoryRow]:
        used = [(c, v) for c, v in (
            ("outcome = %s", str(outcome) if outcome is not None else None),
            ("entity_name = %s", entity), ("entity_key = %s", key),
            ("ended_at >= %s", sec(since)),
        ) if v is not None]
        sql = self.sql.history
        if used:
            sql += " WHERE " + " AND ".join(c for c, _ in used)
        sql += " ORDER BY ended_at DESC, seq DESC"
        params: list[Any] = [v for _, v in used]
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        return self._rows_streamed(sql, "cannot read history", params, row_to_history)

    def stats(self, *, now: datetime, since: datetime, current: datetime,
              next_slots: int) -> StoreStats:
        return self._stats(now, since, current, next_slots, None)[0]

    def stats_and_durations(self, *, now: datetime, since: datetime, current: datetime,
                            next_slots: int, executions_ms: Sequence[float],
                            runs_ms: Sequence[float]
                            ) -> tuple[StoreStats, Durations, Durations]:
        st, rest = self._stats(now, since, current, next_slots, (executions_ms, runs_ms))
        return (st, *rules.histograms(rest, executions_ms))

    def _stats(self, now: datetime, since: datetime, current: datetime, next_slots: int,
               bounds: tuple[Sequence[float], Sequence[float]] | None
               ) -> tuple[StoreStats, Sequence[Any]]:
        """``stats``, and the histograms of ``bounds`` (``durations``') from the same one read
        of the window's executions."""
        p = {"clock": self._clock(now), "current": sec(current),
             "owner_class": self._owner_class}
        since = sec(since)
        executions = self.sql.stats_executions
        if bounds:
            executions = self._over_window(self.sql.stats_durations_window,
                                           f"{self.sql.stats_figures}, ", *bounds)
        with self._tx("cannot compute stats") as cur:
            jobs = cur.execute(self.sql.stats_jobs, p).fetchall()
            past_slots = one(cur.execute(self.sql.stats_past_slots,
                                         (sec(current),)).fetchone())[0]
            nexts = [(r[0], r[1]) for r in cur.execute(
                self.sql.stats_next, (sec(current), next_slots))]
            outcomes = dict(cur.execute(self.sql.stats_outcomes, (since,)).fetchall())
            total, retries, *rest = one(cur.execute(executions, (since,)).fetchone())
            answered, (late_n, late_p, late_max) = rest[:len(ANSWERS)], rest[len(ANSWERS):][:3]
            by_answer = {a: n for a, n in zip(ANSWERS, answered, strict=True) if n}
            if sum(answered) != total:  # an answer this version does not know: count them all
                by_answer = dict(cur.execute(self.sql.stats_answers, (since,)).fetchall())
        pending, in_flight, stale, past_jobs = (sum(r[i] for r in jobs) for i in range(2, 6))
        by_answer = dict(sorted(by_answer.items()))
        return StoreStats(
            pending=pending, in_flight=in_flight, stale_leases=stale,
            by_kind={kind: n for kind, n, *_ in jobs},
            next_slots=nexts, past_slots=past_slots, past_jobs=past_jobs, outcomes=outcomes,
            executions=total, by_answer=by_answer, retries=retries,
            failures=by_answer.get("retry", 0) + by_answer.get("fail", 0),
            lateness_count=late_n, lateness_median_ms=late_p[0] if late_p else None,
            lateness_p99_ms=late_p[1] if late_p else None, lateness_max_ms=late_max,
        ), rest[len(ANSWERS) + 3:]

    def leases(self, now: datetime) -> builtins.list[LeaseGroup]:
        with self._tx("cannot read leases") as cur:
            rows = cur.execute(self.sql.leases, {"clock": self._clock(now),
                                                 "owner_class": self._owner_class}).fetchall()
        return [LeaseGroup(owner, jobs, expired, bool(alive) if owner is not None else None, ends)
                for owner, jobs, expired, alive, ends in rows]

    def last_fired(self) -> tuple[datetime, datetime] | None:
        with self._tx("cannot read executions") as cur:
            row = cur.execute(self.sql.last_fired).fetchone()
        return (parse_slot_id(row[0]), row[1]) if row and row[0] else None

    def durations(self, since: datetime, executions_ms: Sequence[float],
                  runs_ms: Sequence[float]) -> tuple[Durations, Durations]:
        sql = self._over_window(self.sql.durations_window, "", executions_ms, runs_ms)
        with self._tx("cannot read executions") as cur:
            row = one(cur.execute(sql, (sec(since),)).fetchone())
        return rules.histograms(row, executions_ms)

    def _over_window(self, window: str, figures: str, executions_ms: Sequence[float],
                     runs_ms: Sequence[float]) -> str:
        """One statement, so the window (``window``, as ``w``) is read once for all: one row of
        ``figures``' columns and the executions' histogram, then the runs' histogram."""
        return (f"{window}SELECT * FROM (SELECT {figures}{histogram('duration_ms', executions_ms)}"
                f" FROM w) AS a, (SELECT {histogram('d', runs_ms)} "
                f"FROM ({self.sql.durations_runs}) AS x) AS b")

    # -- changing -------------------------------------------------------------------------
    def _cancel(self, cur: Cursor[TupleRow], where: str, params: dict[str, Any], now: datetime,
                reason: str | Callable[[Job], str]
                ) -> tuple[builtins.list[Job], builtins.list[Job]]:
        """``reason``: the history rows' reason, or the function giving each job's."""
        params = {**params, "clock": self._clock(now), "owner_class": self._owner_class}
        rows = cur.execute(self.sql.cancel_select.replace("{where}", where), params).fetchall()
        cancelled, running, history = [], [], []
        for r in rows:
            job = row_to_job(r)
            if rules.running(job, r[-2], r[-1]):
                running.append(job)
            else:
                cancelled.append(job)
                history.append(history_row(job, Outcome.CANCELLED, reason if isinstance(
                    reason, str) else reason(job), now, r[-3]))
        if cancelled:
            copy_rows(cur, self.sql.copy_history, HISTORY_COPY_TYPES, history)
            cur.execute(self.sql.delete_jobs, ([j.id for j in cancelled],))
        return cancelled, running

    def cancel(self, ids: Sequence[str], now: datetime,
               reason: str = "cancelled") -> CancelResult:
        wanted = list(dict.fromkeys(ids))
        with self._tx("cannot cancel") as cur:
            cancelled, running = self._cancel(cur, "f.id = ANY(%(ids)s)", {"ids": wanted},
                                              sec(now), reason)
        known = {j.id for j in cancelled} | {j.id for j in running}
        return CancelResult.of(cancelled, running, [i for i in wanted if i not in known])

    def cancel_entity(self, entity: str, key: str | None, now: datetime) -> CancelResult:
        where = "f.entity_name = %(entity)s"
        if key is not None:
            where += " AND f.entity_key = %(key)s"
        with self._tx("cannot cancel") as cur:
            cancelled, running = self._cancel(cur, where, {"entity": entity, "key": key},
                                              sec(now), "cancelled")
        return CancelResult.of(cancelled, running)

    def reschedule(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        now = sec(now)
        with self._tx("cannot reschedule") as cur:
            r = cur.execute(self.sql.get_for_update, {
                "id": job_id, "clock": self._clock(now),
                "owner_class": self._owner_class}).fetchone()
            if r is None:
                raise JobNotFound(job_id)
            job = row_to_job(r)
            if rules.running(job, r[-2], r[-1]):
                raise rules.being_delivered(job)
            # the row is locked (get_for_update): the update returns it
            r = one(cur.execute(self.sql.reschedule, (sec(next_check_at), now, job_id)).fetchone())
        return row_to_job(r)

    def retry(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        now = sec(now)
        with self._tx("cannot retry") as cur:
            if cur.execute(self.sql.in_future, (job_id,)).fetchone():
                raise rules.still_pending(job_id)
            h = cur.execute(self.sql.last_history, (job_id,)).fetchone()
            if h is None:
                raise JobNotFound(job_id)
            text, fp, outcome, reason = h
            old = job_from_json(text) if text is not None else None
            key = old.idempotency_key if old is not None else None
            held = old is not None and old.occurrence is not None and cur.execute(
                self.sql.schedule_occurrence_id, (old.schedule, sec(old.occurrence))).fetchone()
            at = old is not None and old.occurrence is not None and cur.execute(
                self.sql.schedule_next_at, (old.schedule,)).fetchone()
            job = rules.rearm(job_id, old, outcome, next_check_at=sec(next_check_at), now=now,
                              key_free=not (key and cur.execute(self.sql.key_in_future,
                                                                (key,)).fetchone()),
                              held_by=held[0] if held else None,
                              schedule_at=at[0] if at else None, reason=reason)
            copy_rows(cur, self.sql.copy_jobs, JOB_COPY_TYPES, [job_to_row(job, fp)])
        return job

    def prune(self, before: datetime, *, dry_run: bool = False) -> int:
        before = sec(before)
        with self._tx("cannot prune") as cur:
            n = int(one(cur.execute(self.sql.prune_count, (before,)).fetchone())[0])
            if not dry_run and n:
                cur.execute(self.sql.prune_executions, (before, before))
                cur.execute(self.sql.prune, (before,))
        return n

    # -- running --------------------------------------------------------------------------
    @contextmanager
    def owner_session(self, owner: str) -> Iterator[None]:
        try:
            # The session is idle for the whole run, and its loss makes the owner gone for
            # every other runner (each start checks it: see ``start``), so it is kept alive:
            # keepalives both ways (a middlebox drops no idle connection; a host that dies
            # without closing it is dropped by the server within ~30 s, not the kernel's 2
            # hours; ignored on unix sockets, where death is seen at once), and no
            # ``idle_session_timeout`` an administrator set for idle clients.
            conn = psycopg.connect(self.url, autocommit=True, **{
                **self._kwargs, **_CLIENT_KEEPALIVES,
                "options": self._kwargs["options"] + _KEEPALIVES})
            if conn.info.server_version >= 140000:
                conn.execute("SET idle_session_timeout = 0")
            conn.execute(self.sql.session_lock, (self._owner_class, lock_key(owner)))
            if not self._session_checked:
                self._session_holds(conn, lock_key(owner))
                self._session_checked = True
        except psycopg.Error as e:
            raise self._error(e, "cannot open the runner's session") from None
        self._sessions[owner] = conn
        try:
            yield
        finally:
            self._sessions.pop(owner, None)
            try:  # unlock first: a closed connection's backend lets go a moment later
                # Not while the last word on the server is "unreachable", even once that word
                # is old enough to be asked again: the unlock would wait a whole probe (up to
                # the connect timeout) at the end of a run that is giving up.
                if self._down_since is None:
                    with self._watch.statement(conn):
                        conn.execute(self.sql.session_unlock,
                                     (self._owner_class, lock_key(owner)))
            except psycopg.Error:
                pass
            conn.close()

    def _session_holds(self, conn: Connection[TupleRow], key: int) -> None:
        """Refuse a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``): it
        hands each transaction to any server connection, so the session lock just taken stays
        on a backend this connection no longer owns, and every liveness answer built on it
        would be wrong. A second connection holds a transaction open (in such a pooler it gets
        the server the lock went to: pools hand back the last one used, and a pool of one has
        no other); this one must then still be on a backend holding the lock, and answer
        within the connect timeout. A second connection that gets no server in that time
        tells nothing (a busy pool in session mode): the run goes on. Once per store."""
        pinned, release, failed = threading.Event(), threading.Event(), []

        def hold() -> None:
            try:
                with psycopg.connect(self.url, **self._kwargs) as probe:
                    probe.execute("SELECT 1")  # a transaction left open: its server pinned
                    pinned.set()
                    release.wait()
                    probe.rollback()
            except psycopg.Error:
                failed.append(True)
                pinned.set()

        held: list[bool] = []

        def ask() -> None:
            try:
                held.append(one(conn.execute(self.sql.session_holds,
                                             (self._owner_class, key)).fetchone())[0])
            except psycopg.Error:
                held.append(False)

        threading.Thread(target=hold, daemon=True, name="awty-pool-probe").start()
        if not pinned.wait(self.connect_timeout) or failed:
            release.set()
            return
        asking = threading.Thread(target=ask, daemon=True, name="awty-pool-ask")
        asking.start()
        asking.join(self.connect_timeout)
        release.set()
        asking.join()
        if not (held and held[0]):
            raise StoreError(f"PostgreSQL at {self.where}: a session lock does not hold "
                             "between transactions here (a pooler such as PgBouncer in "
                             "transaction mode?): point database_url at the server, or at a "
                             "pool in session mode")

    def slot_lock(self, slot: datetime, shard: tuple[int, int] | None = None) -> PgSlotLock:
        name = f"{sec(slot).isoformat()}/{shard[0]}:{shard[1]}" if shard else \
            sec(slot).isoformat()
        return PgSlotLock(self, lock_key(name))

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None,
              kinds: Sequence[str] | None = None) -> builtins.list[Job]:
        params: dict[str, Any] = {"slot": sec(slot), "slot_end": sec(slot) + _SECOND,
                                  "limit": limit,
                  **self._lease(now, owner, lease_until)}
        sql = self.sql.claim
        if shard is not None:
            sql = sql.replace("{shard}", "AND f.shard_key %% %(n)s = %(i)s")
            params["i"], params["n"] = shard
        else:
            sql = sql.replace("{shard}", "")
        if kinds is not None:
            sql = sql.replace("{kinds}", "AND f.kind = ANY(%(kinds)s)")
            params["kinds"] = list(kinds)
        else:
            sql = sql.replace("{kinds}", "")
        with self._tx("cannot claim") as cur:
            return self._claimed(cur, cur.execute(sql, params).fetchall(), now, owner)

    def claim_ids(self, ids: Sequence[str], *, now: datetime, owner: str,
                  lease_until: datetime) -> builtins.list[Job]:
        params = {"ids": _ids(ids), **self._lease(now, owner, lease_until)}
        with self._tx("cannot claim") as cur:
            return self._claimed(cur, cur.execute(self.sql.claim_ids, params).fetchall(), now,
                                 owner)

    def _claimed(self, cur: Cursor[TupleRow], rows: builtins.list[TupleRow], now: datetime,
                 owner: str) -> builtins.list[Job]:
        jobs = sorted(map(row_to_job, rows), key=run_order)
        if any(j.schedule for j in jobs):
            # A schedule's next occurrence is made in the claim's own transaction.
            dropped = pg_schedules.rearm(cur, self.sql, jobs, sec(now), owner)
            return [j for j in jobs if j.id not in dropped]
        return jobs

    def _lease(self, now: datetime, owner: str, lease_until: datetime) -> dict[str, Any]:
        """A claim's lease parameters: its length is the caller's (``lease_until - now``), its
        times the lease clock's."""
        return {"clock": self._clock(now), "lease": (sec(lease_until) - sec(now)).total_seconds(),
                "owner": owner, "owner_key": lock_key(owner), "owner_class": self._owner_class}

    def start(self, ids: Sequence[str], *, owner: str, now: datetime) -> builtins.list[str]:
        if not ids:
            return []
        key = {"owner_class": self._owner_class, "owner_key": lock_key(owner)}
        with self._tx("cannot start") as cur:
            got = {r[0] for r in cur.execute(self.sql.start, {
                "now": sec(now), "ids": _ids(ids), "owner": owner, **key})}
            if not got and not one(cur.execute(self.sql.owner_alive, key).fetchone())[0]:
                raise SessionLost(f"PostgreSQL at {self.where}: this runner's session ended "
                                  "(closed by the server, or its connection was lost); "
                                  "it starts nothing more")
        return [i for i in ids if i in got]

    def finish(self, decisions: Sequence[Decision], *, owner: str, now: datetime,
               executions: Sequence[Execution] = ()) -> builtins.list[Decision]:
        now = sec(now)
        ends = [d for d in decisions if isinstance(d, End)]
        reslots = [d for d in decisions if isinstance(d, Reslot)]
        applied: set[str] = set()
        try:  # psycopg encodes text before it sends it: no psycopg.Error for that
            with self._tx("cannot record results") as cur:
                if reslots:
                    cur.execute(self.sql.reslot, (
                        now, [d.job.id for d in reslots], [sec(d.next_check_at) for d in reslots],
                        [d.check_count for d in reslots], [d.attempt for d in reslots],
                        # the decision's error, else the result's (as SQLite keeps it)
                        [rules.last_error(d.error, d.result) for d in reslots], owner))
                    applied.update(r[0] for r in cur.fetchall())
                folded: dict[str, Execution] = {}
                if ends:
                    owned = dict(cur.execute(self.sql.end_owned,
                                             (_ids(e.job.id for e in ends), owner)).fetchall())
                    last, rows = {x.job_id: x for x in executions}, []
                    for e in ends:
                        if e.job.id in owned:
                            row, x = finished_row(e, now, owned[e.job.id], owner,
                                                  last.get(e.job.id))
                            rows.append(row)
                            if x is not None:
                                folded[x.job_id] = x
                    copy_rows(cur, self.sql.copy_finished, FOLDED_COPY_TYPES, rows)
                    applied.update(owned)
                rest = [x for x in executions if folded.get(x.job_id) is not x]
                if rest:
                    copy_rows(cur, self.sql.copy_executions, EXECUTION_COPY_TYPES,
                               map(execution_row, rest))
        except UnicodeEncodeError as e:
            raise Unstorable(f"PostgreSQL at {self.where}: cannot record results: {e}"
                             ) from None
        return [d for d in decisions if d.job.id in applied]

    def release(self, ids: Sequence[str], *, owner: str, now: datetime) -> int:
        with self._tx("cannot release") as cur:
            return cur.execute(self.sql.release, (_ids(ids), owner)).rowcount

    def release_stale(self, owner: str | None, now: datetime) -> int:
        with self._tx("cannot release stale leases") as cur:
            return cur.execute(self.sql.release_stale, {
                "owner": owner, "clock": self._clock(now),
                "owner_class": self._owner_class}).rowcount

    def note_runner(self, host: str, pid: int, kinds: Sequence[str], now: datetime) -> None:
        with self._tx("cannot note the runner") as cur:
            cur.execute(self.sql.note_runner, (host, Jsonb(list(kinds)), pid, sec(now)))

    def runners(self) -> builtins.list[tuple[str, tuple[str, ...], int | None, datetime]]:
        with self._tx("cannot read the runners") as cur:
            return [(h, tuple(k), p, at) for h, k, p, at in cur.execute(self.sql.runners)]

    # -- recurring schedules --------------------------------------------------------------
    def add_schedule(self, schedule: Schedule, now: datetime) -> Job:
        try:
            with self._tx("cannot add the schedule") as cur:
                cur.execute(self.sql.schedule_insert, pg_schedules.schedule_to_row(schedule))
                return pg_schedules.arm(cur, self.sql, schedule, sec(now))
        except Conflict:  # the name's primary key (``_error``)
            raise Conflict(f"schedule {schedule.name!r} already exists") from None

    def get_schedule(self, name: str) -> Schedule | None:
        with self._tx("cannot read schedules") as cur:
            r = cur.execute(self.sql.schedule_get, (name,)).fetchone()
        return pg_schedules.row_to_schedule(r) if r else None

    def schedules(self) -> builtins.list[Schedule]:
        with self._tx("cannot read schedules") as cur:
            return [pg_schedules.row_to_schedule(r) for r in cur.execute(self.sql.schedules)]

    def schedule_jobs(self, name: str) -> builtins.list[Job]:
        with self._tx("cannot read schedules") as cur:
            return [row_to_job(r) for r in cur.execute(self.sql.schedule_jobs, (name,))]

    def schedule_outcomes(self) -> dict[str, tuple[str, datetime]]:
        with self._tx("cannot read schedules") as cur:
            return {n: (o, at) for n, o, at in cur.execute(self.sql.schedule_outcomes)}

    def schedule_counts(self) -> tuple[int, int]:
        with self._tx("cannot read schedules") as cur:
            total, paused = one(cur.execute(self.sql.schedule_counts).fetchone())
        return total, paused

    def unarmed_schedules(self) -> builtins.list[str]:
        with self._tx("cannot read schedules") as cur:
            return [name for name, in cur.execute(self.sql.schedules_unarmed)]

    def pause_schedule(self, name: str, now: datetime) -> Schedule:
        now = sec(now)
        with self._tx("cannot pause the schedule") as cur:
            s = pg_schedules.must(cur, self.sql, name)
            cur.execute(self.sql.schedule_pause, (now, name))
            self._cancel(cur, "f.schedule = %(name)s", {"name": name}, now,
                         partial(rules.paused_reason, s))
        return s.replace(paused_at=now)

    def resume_schedule(self, name: str, now: datetime) -> Schedule:
        now = sec(now)
        with self._tx("cannot resume the schedule") as cur:
            s = pg_schedules.must(cur, self.sql, name).replace(paused_at=None)
            cur.execute(self.sql.schedule_pause, (None, name))
            job = pg_schedules.arm(cur, self.sql, s, now)
        return s.replace(next_at=job.occurrence)

    def remove_schedule(self, name: str, now: datetime) -> CancelResult:
        now = sec(now)
        with self._tx("cannot remove the schedule") as cur:
            pg_schedules.must(cur, self.sql, name)
            cancelled, running = self._cancel(cur, "f.schedule = %(name)s", {"name": name},
                                              now, f"schedule {name} removed")
            cur.execute(self.sql.schedule_delete, (name,))
        return CancelResult.of(cancelled, running)
    # -- serve's tokens ---------------------------------------------------------------------
    def add_token(self, token: ApiToken, token_hash: str) -> None:
        with self._tx("cannot add the token") as cur:
            cur.execute(self.sql.add_token, (token.name, token_hash, json.dumps(
                list(token.scopes)), json.dumps(token.options()), sec(token.created_at)))
            if not cur.rowcount:
                raise rules.token_taken(token.name)

    def tokens(self) -> builtins.list[ApiToken]:
        with self._tx("cannot read the tokens") as cur:
            return [_token(r) for r in cur.execute(self.sql.tokens)]

    def token_for(self, token_hash: str, now: datetime) -> ApiToken | None:
        with self._tx("cannot read the token") as cur:
            cur.execute(self.sql.token_for, {"now": sec(now), "hash": token_hash})
            row = cur.execute(self.sql.token_row, (token_hash,)).fetchone()
        return _token(row) if row else None

    def token_named(self, name: str) -> ApiToken | None:
        with self._tx("cannot read the token") as cur:
            row = cur.execute(self.sql.token_named, (name,)).fetchone()
        return _token(row) if row else None

    def set_token_env(self, name: str, exec_env: dict[str, str]) -> ApiToken | None:
        with self._tx("cannot change the token") as cur:
            row = cur.execute(self.sql.token_named + " FOR UPDATE", (name,)).fetchone()
            if row is None:
                return None
            token = _token(row).replace(exec_env=dict(exec_env))
            cur.execute(self.sql.token_options, (json.dumps(token.options()), name))
        return token

    def revoke_token(self, name: str) -> bool:
        with self._tx("cannot revoke the token") as cur:
            return cur.execute(self.sql.revoke_token, (name,)).rowcount > 0

    # -- moving a home (export / import: pg_portable) -------------------------------------
    def export_schedules(self) -> Iterator[Schedule]:
        for r in self._rows_streamed(self.sql.schedules, "cannot export"):
            yield pg_schedules.row_to_schedule(r)

    def export_pending(self) -> Iterator[tuple[Job, str | None]]:
        for r in self._rows_streamed(pg_portable.selects(self.schema)[0], "cannot export"):
            yield row_to_job(r), r[-1]

    def export_history(self) -> Iterator[dict[str, Any]]:
        for r in self._rows_streamed(pg_portable.selects(self.schema)[1], "cannot export"):
            yield pg_portable.history_record(r)

    def import_home(self, jobs: Sequence[Job], fingerprints: Sequence[str | None],
                    rows: Iterable[dict[str, Any]], schedules: Sequence[Schedule] = ()
                    ) -> tuple[builtins.list[Added], int]:
        counted = [0]

        def values() -> Iterator[tuple[Any, ...]]:
            for v in pg_portable.history_values(rows):
                counted[0] += 1
                yield v
        # "cannot add": a job id already stored is the Conflict ``add`` raises (``_error``)
        try:  # psycopg encodes text before it sends it: no psycopg.Error for that
            with self._tx("cannot add") as cur:
                if schedules:
                    cur.executemany(self.sql.schedule_insert,
                                    [pg_schedules.schedule_to_row(s) for s in schedules])
                added = self._add(cur, jobs, fingerprints) if jobs else []
                copy_rows(cur, self.sql.copy_history, HISTORY_COPY_TYPES, values())
        except UnicodeEncodeError as e:
            raise Unstorable(f"PostgreSQL at {self.where}: cannot import: {e}") from None
        except _OccurrenceTaken:
            raise self._occurrence_taken(jobs) from None
        except Conflict:  # ``_error``: a key hit (a job id, or a schedule's name)
            taken = rules.schedule_taken(schedules, lambda name: self.get_schedule(name)
                                         is not None) if schedules else None
            if taken is not None:
                raise taken from None
            raise
        return added, counted[0]

    def _rows_streamed(self, sql: str, what: str, params: Sequence[Any] = (),
                       convert: Callable[[TupleRow], Any] = tuple) -> Iterator[Any]:
        """A read of any size, each row through ``convert``: a server-side cursor, rows
        arriving a batch at a time (memory stays flat), its connection held until the rows
        are read or the iterator closed (or dropped)."""
        if self._pool is None:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn, conn.transaction(), \
                    conn.cursor(name="awty_rows") as cur:
                cur.itersize = 2000
                cur.execute(sql, params)
                yield from map(convert, cur)  # (a tuple row stays itself through tuple)
        except psycopg.Error as e:
            raise self._error(e, what) from None


def _token(row: TupleRow) -> ApiToken:
    name, scopes, created, used, options = row
    return ApiToken.stored(name, json.loads(scopes), created, used, json.loads(options))
