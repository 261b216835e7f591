"""SQLiteStore: the embedded default store (WAL, busy timeout, BEGIN IMMEDIATE writes).

The hot paths (add, claim, finish) use the stdlib connection directly with ``executemany``;
sqlite-utils runs the migrations. Writes open with ``BEGIN IMMEDIATE`` so that a reader never
has to upgrade its lock mid-transaction ("database is locked" with no retry).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..errors import Busy, Conflict, JobNotFound, StoreError
from ..model import HistoryRow, Job, Kind, Outcome, Status
from ..policy import shard_of
from ..slots import from_iso, iso
from . import migrations
from .base import Added, Decision, End, Reslot

_JOB_COLUMNS = (
    "id", "entity_name", "entity_key", "kind", "target", "payload", "headers",
    "first_check_at", "next_check_at", "check_count", "attempt", "status", "max_checks",
    "horizon", "timeout", "max_attempts", "misfire_grace", "idempotency_key", "fingerprint",
    "cwd", "lease_owner", "lease_until", "created_at", "updated_at", "last_error",
)
_SELECT_JOB = "SELECT " + ", ".join(_JOB_COLUMNS) + " FROM future_job"
_INSERT_JOB = (f"INSERT INTO future_job ({', '.join(_JOB_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(_JOB_COLUMNS))})")
_HISTORY_COLUMNS = (
    "id", "kind", "target", "entity_name", "entity_key", "outcome", "reason", "checks",
    "attempts", "first_check_at", "ended_at", "created_at", "duration_ms", "lateness_ms",
    "last_status", "error", "output", "idempotency_key", "fingerprint", "job",
)
_INSERT_HISTORY = (f"INSERT INTO job_history ({', '.join(_HISTORY_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(_HISTORY_COLUMNS))})")
_ERROR_CHARS = 2000
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_REARMABLE = (Outcome.FAILED, Outcome.EXPIRED, Outcome.CANCELLED)


def _opt_time(text: str | None) -> datetime | None:
    return from_iso(text) if text else None


_KINDS = {k.value: k for k in Kind}  # a dict lookup, not an Enum call: claims build many jobs
_STATUSES = {s.value: s for s in Status}


def _row_to_job(r: tuple) -> Job:
    return Job(
        id=r[0], entity_name=r[1], entity_key=r[2], kind=_KINDS[r[3]], target=r[4],
        payload_json=r[5], headers=json.loads(r[6]) if r[6] else {},
        first_check_at=from_iso(r[7]), next_check_at=from_iso(r[8]), check_count=r[9],
        attempt=r[10], status=_STATUSES[r[11]], max_checks=r[12], horizon=r[13], timeout=r[14],
        max_attempts=r[15], misfire_grace=r[16], idempotency_key=r[17], cwd=r[19],
        lease_owner=r[20], lease_until=_opt_time(r[21]), created_at=_opt_time(r[22]),
        updated_at=_opt_time(r[23]), last_error=r[24],
    )


def _job_to_row(j: Job, fingerprint: str | None) -> tuple:
    return (
        j.id, j.entity_name, j.entity_key, j.kind.value, j.target, j.payload_json,
        json.dumps(j.headers, separators=(",", ":")) if j.headers else None,
        iso(j.first_check_at), iso(j.next_check_at), j.check_count, j.attempt, j.status.value,
        j.max_checks, j.horizon, j.timeout, j.max_attempts, j.misfire_grace, j.idempotency_key,
        fingerprint, j.cwd, j.lease_owner, iso(j.lease_until) if j.lease_until else None,
        iso(j.created_at) if j.created_at else None, iso(j.updated_at) if j.updated_at else None,
        j.last_error,
    )


def job_to_dict(j: Job) -> dict:
    """The job as plain JSON-able data (history keeps it so ``retry`` can re-arm the job)."""
    return {
        "id": j.id, "kind": j.kind.value, "target": j.target, "payload": j.payload_json,
        "headers": j.headers or None, "entity": j.entity_name, "key": j.entity_key,
        "first_check_at": iso(j.first_check_at), "max_checks": j.max_checks,
        "horizon": j.horizon, "timeout": j.timeout, "max_attempts": j.max_attempts,
        "misfire_grace": j.misfire_grace, "idempotency_key": j.idempotency_key, "cwd": j.cwd,
        "created_at": iso(j.created_at) if j.created_at else None,
    }


def _row_to_history(r: sqlite3.Row) -> HistoryRow:
    job = json.loads(r["job"]) if r["job"] else {}
    return HistoryRow(
        id=r["id"], kind=Kind(r["kind"]), target=r["target"], entity_name=r["entity_name"],
        entity_key=r["entity_key"], outcome=Outcome(r["outcome"]), reason=r["reason"],
        checks=r["checks"], attempts=r["attempts"], first_check_at=from_iso(r["first_check_at"]),
        ended_at=from_iso(r["ended_at"]), created_at=_opt_time(r["created_at"]),
        duration_ms=r["duration_ms"], last_status=r["last_status"], error=r["error"],
        output=r["output"], payload_json=_history_payload(job),
    )


def _history_payload(job: dict) -> str | None:
    """The payload as JSON text. A full job (``job_to_dict``) holds the text; the compact form
    a plain done job keeps embeds the payload itself, parsed with the rest."""
    if "payload" not in job:
        return None
    return job["payload"] if "id" in job else json.dumps(job["payload"], ensure_ascii=False)


def open_db_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does, whatever the umask."""
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    if (path.stat().st_mode & 0o777) != 0o600:
        try:
            os.chmod(path, 0o600)
        except OSError:
            pass


class SQLiteStore:
    def __init__(self, path: Path, *, busy_timeout: float = 5.0, create: bool = True):
        self.path = Path(path)
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
            self.conn.create_function("awty_shard", 2, shard_of, deterministic=True)
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise _translate(e, f"cannot open {self.path}") from None

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version == migrations.SCHEMA_VERSION:
            return
        if version > migrations.SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {version} is newer than this awty "
                             f"understands ({migrations.SCHEMA_VERSION}); upgrade awty")
        migrations.apply(self.conn)

    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def _write(self):
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise _translate(e, "cannot write") from None
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
            raise _translate(e, "cannot commit") from None

    def close(self) -> None:
        self.conn.close()

    # -- adding ---------------------------------------------------------------------------
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None]) -> list[Added]:
        out: list[Added] = []
        keyed = [(j, f) for j, f in zip(jobs, fingerprints, strict=True) if j.idempotency_key]
        try:
            with self._write() as c:
                existing: dict[str, Job] = {}
                seen: dict[str, str | None] = {}
                for j, f in keyed:
                    key = j.idempotency_key
                    if key in seen:
                        if seen[key] != f:
                            raise Conflict(f"idempotency key {key!r} is used twice in this batch "
                                           "for different jobs")
                        continue
                    seen[key] = f
                    found = self._by_idempotency_key(c, key)
                    if found is not None:
                        job, fp = found
                        if fp != f:
                            raise Conflict(f"idempotency key {key!r} already names job {job.id}, "
                                           "which is a different job")
                        existing[key] = job
                rows, firsts = [], {}
                for j, f in zip(jobs, fingerprints, strict=True):
                    key = j.idempotency_key
                    if key and key in existing:
                        out.append(Added(existing[key], False))
                    elif key and key in firsts:
                        out.append(Added(firsts[key], False))
                    else:
                        rows.append(_job_to_row(j, f))
                        out.append(Added(j, True))
                        if key:
                            firsts[key] = j
                c.executemany(_INSERT_JOB, rows)
        except sqlite3.IntegrityError as e:
            raise Conflict(f"job already exists ({e})") from None
        except sqlite3.OperationalError as e:
            raise _translate(e, "cannot add") from None
        return out

    def _by_idempotency_key(self, c, key: str) -> tuple[Job, str | None] | None:
        r = c.execute(_SELECT_JOB + " WHERE idempotency_key = ?", (key,)).fetchone()
        if r is not None:
            return _row_to_job(r), r[18]
        h = c.execute("SELECT job, fingerprint FROM job_history WHERE idempotency_key = ? "
                      "ORDER BY seq DESC LIMIT 1", (key,)).fetchone()
        if h is not None:
            return _job_from_history_json(h[0]), h[1]
        return None

    # -- reading --------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        r = self.conn.execute(_SELECT_JOB + " WHERE id = ?", (job_id,)).fetchone()
        return _row_to_job(r) if r else None

    def get_history(self, job_id: str) -> list[HistoryRow]:
        return [_row_to_history(r) for r in self._rows(
            "SELECT * FROM job_history WHERE id = ? ORDER BY seq", (job_id,))]

    def events(self, job_id: str) -> list[dict]:
        return [dict(r) for r in self._rows(
            "SELECT at, slot, check_no, attempt, answer, status, duration_ms, lateness_ms, error "
            "FROM job_event WHERE job_id = ? ORDER BY seq", (job_id,))]

    def _rows(self, sql: str, params: Sequence = ()) -> list[sqlite3.Row]:
        cur = self.conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, params).fetchall()

    def find(self, ids: Iterable[str]) -> dict[str, datetime | None]:
        ids = list(ids)
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

    def list(self, *, status=None, slot=None, entity=None, key=None, kind=None,
             limit=None, until=None) -> Iterator[Job]:
        where, params = _where([("status = ?", status or None), ("next_check_at = ?", slot),
                                ("next_check_at <= ?", until), ("entity_name = ?", entity),
                                ("entity_key = ?", key), ("kind = ?", kind)])
        sql = _SELECT_JOB + where + " ORDER BY next_check_at, id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        for r in self.conn.execute(sql, params):
            yield _row_to_job(r)

    def count_pending(self) -> int:
        return self.conn.execute("SELECT count(*) FROM future_job").fetchone()[0]

    # -- cancelling and moving ------------------------------------------------------------
    def cancel(self, ids: Sequence[str], now: datetime, reason: str = "cancelled") -> list[Job]:
        with self._write() as c:
            jobs = []
            for i in range(0, len(ids), 500):
                chunk = list(ids[i:i + 500])
                marks = ",".join("?" * len(chunk))
                jobs += [_row_to_job(r) for r in c.execute(
                    _SELECT_JOB + f" WHERE id IN ({marks})", chunk)]
            self._end_rows(c, [End(j, Outcome.CANCELLED, reason, None) for j in jobs], now)
        return jobs

    def cancel_entity(self, entity: str, key: str | None, now: datetime) -> list[Job]:
        with self._write() as c:
            if key is None:
                rows = c.execute(_SELECT_JOB + " WHERE entity_name = ?", (entity,))
            else:
                rows = c.execute(_SELECT_JOB + " WHERE entity_name = ? AND entity_key = ?",
                                 (entity, key))
            jobs = [_row_to_job(r) for r in rows]
            self._end_rows(c, [End(j, Outcome.CANCELLED, "cancelled", None) for j in jobs], now)
        return jobs

    def reschedule(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        with self._write() as c:
            r = c.execute(_SELECT_JOB + " WHERE id = ?", (job_id,)).fetchone()
            if r is None:
                raise JobNotFound(job_id)
            job = _row_to_job(r)
            if job.status == Status.IN_FLIGHT and job.lease_until and job.lease_until > now:
                raise Conflict(f"job {job_id} is running now; try again after its slot")
            c.execute("UPDATE future_job SET next_check_at = ?, status = 'pending', "
                      "lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?",
                      (iso(next_check_at), iso(now), job_id))
        return self.get(job_id)  # type: ignore[return-value]

    def retry(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        with self._write() as c:
            if c.execute("SELECT 1 FROM future_job WHERE id = ?", (job_id,)).fetchone():
                raise Conflict(f"job {job_id} is still pending; nothing to retry")
            h = c.execute("SELECT job, fingerprint, outcome FROM job_history WHERE id = ? "
                          "ORDER BY seq DESC LIMIT 1", (job_id,)).fetchone()
            if h is None:
                raise JobNotFound(job_id)
            if h[2] not in _REARMABLE and '"target"' not in h[0]:
                raise Conflict(f"job {job_id} ended {h[2]}; only failed, expired or cancelled "
                               "jobs can be re-armed")
            old = _job_from_history_json(h[0])
            key = old.idempotency_key
            if key and c.execute("SELECT 1 FROM future_job WHERE idempotency_key = ?",
                                 (key,)).fetchone():
                key = None  # another live job took the key since; keep the retry keyless
            job = Job(**{**{f: getattr(old, f) for f in old.__slots__},
                         "next_check_at": next_check_at, "check_count": 0, "attempt": 0,
                         "status": Status.PENDING, "idempotency_key": key,
                         "updated_at": now, "lease_owner": None, "lease_until": None,
                         "last_error": None})
            c.execute(_INSERT_JOB, _job_to_row(job, h[1]))
        return job

    # -- running --------------------------------------------------------------------------
    def claim(self, slot, *, now, owner, lease_until, limit, shard=None) -> list[Job]:
        # An expired lease is taken back from another owner, never from ``owner`` itself: its
        # jobs are still in its hands when the clock jumped forward past their lease.
        where = ("next_check_at = ? AND (status = 'pending' OR ((lease_until IS NULL "
                 "OR lease_until <= ?) AND lease_owner IS NOT ?))")
        params: list = [iso(slot), iso(now), owner]
        if shard is not None:
            where += " AND awty_shard(id, ?) = ?"
            params += [shard[1], shard[0]]
        sql = (f"UPDATE future_job SET status = 'in_flight', lease_owner = ?, lease_until = ?, "
               f"updated_at = ? WHERE id IN (SELECT id FROM future_job WHERE {where} "
               f"ORDER BY next_check_at, id LIMIT ?) RETURNING " + ", ".join(_JOB_COLUMNS))
        with self._write() as c:
            rows = c.execute(sql, [owner, iso(lease_until), iso(now), *params, limit]).fetchall()
        jobs = [_row_to_job(r) for r in rows]
        jobs.sort(key=lambda j: j.id)
        return jobs

    def finish(self, decisions: Sequence[Decision], *, owner: str, now: datetime,
               events: Sequence[tuple] = ()) -> list[Decision]:
        if not decisions:
            return []
        with self._write() as c:
            owned = {r[0] for r in c.execute(
                "SELECT id FROM future_job WHERE id IN (SELECT value FROM json_each(?)) "
                "AND lease_owner = ?", (json.dumps([d.job.id for d in decisions]), owner))}
            applied = [d for d in decisions if d.job.id in owned]
            ends = [d for d in applied if isinstance(d, End)]
            moves = [d for d in applied if isinstance(d, Reslot)]
            self._end_rows(c, ends, now)
            stamp = iso(now)
            c.executemany(
                "UPDATE future_job SET next_check_at = ?, check_count = ?, attempt = ?, "
                "status = 'pending', lease_owner = NULL, lease_until = NULL, updated_at = ?, "
                "last_error = ?, last_status = ? WHERE id = ?",
                [(iso(m.next_check_at), m.check_count, m.attempt, stamp,
                  (m.error or (m.result.error if m.result else None) or "")[:_ERROR_CHARS] or None,
                  m.result.status if m.result else None, m.job.id) for m in moves])
            if events:
                kept = [e for e in events if e[0] in owned]
                c.executemany(
                    "INSERT INTO job_event (job_id, at, slot, check_no, attempt, answer, status, "
                    "duration_ms, lateness_ms, error) VALUES (?,?,?,?,?,?,?,?,?,?)", kept)
        return applied

    def _end_rows(self, c, ends: Sequence[End], now: datetime) -> None:
        if not ends:
            return
        stamp = iso(now)
        rows = []
        for e in ends:
            j, r = e.job, e.result
            attempts = j.attempt + (1 if r is not None else 0)
            rows.append((
                j.id, j.kind.value, j.target, j.entity_name, j.entity_key, e.outcome.value,
                e.reason, j.check_count + (1 if r is not None else 0), attempts,
                iso(j.first_check_at), stamp, iso(j.created_at) if j.created_at else None,
                round(r.duration * 1000, 3) if r else None,
                round(e.lateness * 1000, 3) if e.lateness is not None else None,
                r.status if r else None,
                (r.error or None)[:_ERROR_CHARS] if r and r.error else None,
                (r.output or None)[:_ERROR_CHARS] if r and r.output else None,
                j.idempotency_key, None,
                # What `retry` and idempotency need to rebuild the job; a plain done job
                # keeps only its payload (json encoding every row costs ~10% of a slot run).
                _COMPACT(job_to_dict(j)) if e.outcome in _REARMABLE or j.idempotency_key
                else '{"payload":' + j.payload_json + "}",
            ))
        c.executemany(_INSERT_HISTORY, rows)
        # Fingerprints follow the job into history, for idempotency after it ended.
        c.executemany(
            "UPDATE job_history SET fingerprint = (SELECT fingerprint FROM future_job "
            "WHERE future_job.id = job_history.id) WHERE seq = (SELECT max(seq) FROM "
            "job_history WHERE id = ?) AND idempotency_key IS NOT NULL",
            [(e.job.id,) for e in ends if e.job.idempotency_key])
        ids = [(e.job.id,) for e in ends]
        c.executemany("DELETE FROM future_job WHERE id = ?", ids)

    def release(self, ids: Sequence[str], *, owner: str, now: datetime) -> int:
        with self._write() as c:
            cur = c.executemany(
                "UPDATE future_job SET status = 'pending', lease_owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE id = ? AND lease_owner = ?",
                [(iso(now), i, owner) for i in ids])
            return cur.rowcount

    def slot_ids(self, slot: datetime) -> set[str]:
        return {r[0] for r in self.conn.execute(
            "SELECT id FROM future_job WHERE next_check_at = ?", (iso(slot),))}

    def slots_with_work(self, *, until=None, since=None) -> list[tuple[datetime, int]]:
        where, params = _where([("next_check_at >= ?", since), ("next_check_at <= ?", until)])
        sql = ("SELECT next_check_at, count(*) FROM future_job" + where
               + " GROUP BY next_check_at ORDER BY next_check_at")
        return [(from_iso(s), n) for s, n in self.conn.execute(sql, params)]

    def history(self, *, outcome=None, entity=None, since=None, limit=None) -> list[HistoryRow]:
        where, params = _where([("outcome = ?", outcome or None),
                                ("entity_name = ?", entity or None), ("ended_at >= ?", since)])
        sql = "SELECT * FROM job_history" + where + " ORDER BY seq DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_row_to_history(r) for r in self._rows(sql, params)]

    def prune_history(self, before: datetime) -> int:
        with self._write() as c:
            n = c.execute("DELETE FROM job_history WHERE ended_at < ?", (iso(before),)).rowcount
            c.execute("DELETE FROM job_event WHERE at < ?", (iso(before),))
        return n

    def query(self, sql: str, params: Sequence = ()) -> list[sqlite3.Row]:
        """Read-only aggregate queries for stats and doctor."""
        return self._rows(sql, params)

    def integrity_check(self) -> str:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0]


def _where(conditions: list[tuple[str, object]]) -> tuple[str, list]:
    """`` WHERE a = ? AND b >= ?`` and its parameters, from the (clause, value) pairs whose value
    is given; datetimes become stored instants."""
    used = [(c, iso(v) if isinstance(v, datetime) else v) for c, v in conditions
            if v is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(c for c, _ in used), [v for _, v in used]


def _job_from_history_json(text: str) -> Job:
    d = json.loads(text)
    first = from_iso(d["first_check_at"])
    return Job(
        id=d["id"], kind=Kind(d["kind"]), target=d["target"], payload_json=d["payload"],
        headers=d.get("headers") or {}, entity_name=d.get("entity"), entity_key=d.get("key"),
        first_check_at=first, next_check_at=first, max_checks=d.get("max_checks"),
        horizon=d.get("horizon"), timeout=d.get("timeout"), max_attempts=d.get("max_attempts"),
        misfire_grace=d.get("misfire_grace"), idempotency_key=d.get("idempotency_key"),
        cwd=d.get("cwd"), created_at=_opt_time(d.get("created_at")),
    )


def _translate(e: sqlite3.Error, what: str) -> Exception:
    msg = str(e)
    if "locked" in msg or "busy" in msg:
        return Busy(f"database is busy ({what}): another process holds a write lock; "
                    "nothing was changed, try again")
    if isinstance(e, sqlite3.OperationalError) and ("disk" in msg or "readonly" in msg
                                                    or "read-only" in msg):
        return StoreError(f"{what}: {msg}")
    return StoreError(f"{what}: {msg}")
