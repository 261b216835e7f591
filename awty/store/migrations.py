"""Numbered schema migrations, applied with sqlite-utils' ``Migrations`` and mirrored in
``PRAGMA user_version`` so that opening an up-to-date database costs one pragma read (the
sqlite-utils import is ~70 ms, too much for every ``awty add``)."""

from __future__ import annotations

import sqlite3

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from sqlite_utils import Database

SCHEMA_VERSION = 12


def _m001_initial(db: Database) -> None:
    db.execute("""
        CREATE TABLE future_job (
            id TEXT PRIMARY KEY,
            entity_name TEXT,
            entity_key TEXT,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            headers TEXT,
            first_check_at TEXT NOT NULL,
            next_check_at TEXT NOT NULL,
            check_count INTEGER NOT NULL DEFAULT 0,
            attempt INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'pending',
            max_checks INTEGER,
            horizon REAL,
            timeout REAL,
            max_attempts INTEGER,
            misfire_grace REAL,
            idempotency_key TEXT,
            fingerprint TEXT,
            cwd TEXT,
            lease_owner TEXT,
            lease_until TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            last_error TEXT,
            last_status INTEGER
        )""")
    # The runner's only query path: one slot, in id order.
    db.execute("CREATE INDEX future_job_slot ON future_job (next_check_at, id)")
    db.execute("CREATE UNIQUE INDEX future_job_idem ON future_job (idempotency_key) "
               "WHERE idempotency_key IS NOT NULL")
    db.execute("CREATE INDEX future_job_entity ON future_job (entity_name, entity_key)")
    db.execute("""
        CREATE TABLE job_history (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            entity_name TEXT,
            entity_key TEXT,
            outcome TEXT NOT NULL,
            reason TEXT NOT NULL,
            checks INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            first_check_at TEXT NOT NULL,
            ended_at TEXT NOT NULL,
            created_at TEXT,
            duration_ms REAL,
            lateness_ms REAL,
            last_status INTEGER,
            error TEXT,
            output TEXT,
            idempotency_key TEXT,
            fingerprint TEXT,
            job TEXT NOT NULL
        )""")
    db.execute("CREATE INDEX job_history_id ON job_history (id)")
    db.execute("CREATE INDEX job_history_ended ON job_history (ended_at)")
    db.execute("CREATE INDEX job_history_entity ON job_history (entity_name, entity_key)")
    db.execute("CREATE INDEX job_history_idem ON job_history (idempotency_key) "
               "WHERE idempotency_key IS NOT NULL")


def _m002_events(db: Database) -> None:
    # One row per execution: what each attempt answered, for `show` and `stats`.
    db.execute("""
        CREATE TABLE job_event (
            seq INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            at TEXT NOT NULL,
            slot TEXT NOT NULL,
            check_no INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            answer TEXT NOT NULL,
            status INTEGER,
            duration_ms REAL,
            lateness_ms REAL,
            error TEXT
        )""")
    db.execute("CREATE INDEX job_event_job ON job_event (job_id)")
    db.execute("CREATE INDEX job_event_at ON job_event (at)")


def _m003_started_env(db: Database) -> None:
    # started_at: the runner began executing its claim (cancel then reports the job as being
    # delivered). env: an exec job's environment recorded at add.
    db.execute("ALTER TABLE future_job ADD COLUMN started_at TEXT")
    db.execute("ALTER TABLE future_job ADD COLUMN env TEXT")


def _m004_in_flight_index(db: Database) -> None:
    # Every claim asks which owners hold expired leases in its slot (status = 'in_flight'):
    # through the slot index that read every row of the slot, ~45 ms per claim at 100,000 due
    # and so quadratic in the slot's size. Only claimed rows are in this one.
    db.execute("CREATE INDEX future_job_in_flight ON future_job "
               "(next_check_at, lease_owner, lease_until) WHERE status = 'in_flight'")


def _m005_slot_entity_index(db: Database) -> None:
    # A run deletes its slot's rows. Keyed by entity first, those deletions touched one leaf page
    # per job scattered over the whole index, and the checkpoint when the store closed wrote them
    # all back: 1.5x a slot's run time at 1,000,000 pending. Slot first, a slot's entries sit
    # together; entity lookups seek once per pending slot (ENTITY_SLOTS in sqlite_rows).
    db.execute("DROP INDEX IF EXISTS future_job_entity")
    db.execute("CREATE INDEX future_job_slot_entity ON future_job "
               "(next_check_at, entity_name, entity_key) WHERE entity_name IS NOT NULL")


def _m006_started_marks(db: Database) -> None:
    # ``Store.start`` marks a chunk of claims as started just before they are sent. As a column
    # of future_job, that rewrote each started job's whole row (payload and all) and its commit
    # wrote those pages to the WAL once more: ~9 µs a callback, a fifth of the store's work.
    # A mark here is ~40 bytes in a small table; it counts only while its owner still holds the
    # job's lease (a stale one, of a claim given back or taken over, is ignored, and removed
    # when the job ends).
    db.execute("CREATE TABLE job_started (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
               "at TEXT NOT NULL) WITHOUT ROWID")


def _m007_meta(db: Database) -> None:
    # What the store keeps about itself (``Store.meta``): a home's move (``export --move``),
    # the settings a cluster shares (used on PostgreSQL; the table is the same in both stores).
    db.execute("CREATE TABLE awty_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) "
               "WITHOUT ROWID")


def _m008_runners(db: Database) -> None:
    # Who fired what: each execution, and each history row a runner wrote, name the runner's
    # host and process. runner_host: the kinds each runner host claims (``runner_kinds``) and
    # when it last ran, for doctor's "a job no live runner may claim".
    for table in ("job_event", "job_history"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN host TEXT")
        db.execute(f"ALTER TABLE {table} ADD COLUMN pid INTEGER")
    db.execute("CREATE TABLE runner_host (host TEXT PRIMARY KEY, kinds TEXT NOT NULL, "
               "pid INTEGER, seen_at TEXT NOT NULL) WITHOUT ROWID")


def _m009_schedules(db: Database) -> None:
    # Recurring schedules: one row each (its rule, policy, job template, and ``next_at``, the
    # nominal time of its one pending occurrence). An occurrence's job names its schedule and
    # nominal time, unique among pending jobs: no occurrence has two jobs. History rows name
    # the schedule (its last outcome is one seek of the last index).
    db.execute("""
        CREATE TABLE schedule (
            name TEXT PRIMARY KEY,
            cron TEXT,
            every INTEGER,
            start TEXT,
            zone TEXT NOT NULL,
            missed TEXT NOT NULL,
            missed_window REAL NOT NULL,
            resolution INTEGER NOT NULL,
            template TEXT NOT NULL,
            next_at TEXT NOT NULL,
            paused_at TEXT,
            created_at TEXT NOT NULL
        ) WITHOUT ROWID""")
    db.execute("ALTER TABLE future_job ADD COLUMN schedule TEXT")
    db.execute("ALTER TABLE future_job ADD COLUMN occurrence TEXT")
    db.execute("CREATE UNIQUE INDEX future_job_occurrence ON future_job (schedule, occurrence) "
               "WHERE schedule IS NOT NULL")
    db.execute("ALTER TABLE job_history ADD COLUMN schedule TEXT")
    db.execute("CREATE INDEX job_history_schedule ON job_history (schedule, seq) "
               "WHERE schedule IS NOT NULL")


def _m010_api_tokens(db: Database) -> None:
    # `awty serve`'s tokens (`awty token new`): the SHA-256 of each, never the token; options
    # holds what the token may schedule (allow_callbacks, exec_dir, exec_env) as JSON.
    db.execute("CREATE TABLE api_token (name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, "
               "scopes TEXT NOT NULL, options TEXT NOT NULL, created_at TEXT NOT NULL, "
               "last_used_at TEXT)")


def _m011_folded_executions(db: Database) -> None:
    # The execution that ended a job, when its status, duration, lateness, error, host and pid
    # are the history row's own, is kept on that row (exec_*) rather than as a job_event row:
    # each finished job wrote a history row and an event row, and the event row with its two
    # index entries was ~10% of a slot's store work (BENCHMARKS.md, `ratio_bare`). Reads of
    # executions take both (sqlite_rows.EXECUTIONS); exec_at is NULL on other rows.
    for column, kind in (("exec_at", "TEXT"), ("exec_slot", "TEXT"), ("exec_check", "INTEGER"),
                         ("exec_attempt", "INTEGER"), ("exec_answer", "TEXT")):
        db.execute(f"ALTER TABLE job_history ADD COLUMN {column} {kind}")


def _m012_leases(db: Database) -> None:
    # A claim's lease (and, once started, its start mark) is a row here rather than columns of
    # future_job: a claim rewrote each claimed job's whole row (payload and all) and an entry
    # of the in-flight index, and its UPDATE with the claimed rows' decoding was ~40% of the
    # store's work in a run (BENCHMARKS.md, `ratio_bare`). A job is in flight while it has a
    # row here (its owner's, whether or not the lease has expired), pending otherwise; the row
    # goes with the job, or when the claim is given back or taken over. future_job's status,
    # lease and started_at columns stay, unused, at 'pending' and NULL. Leases held now (and
    # the start marks of their owners) are carried over.
    db.execute("CREATE TABLE job_lease (job_id TEXT PRIMARY KEY, owner TEXT, until TEXT, "
               "claimed_at TEXT NOT NULL, started TEXT) WITHOUT ROWID")
    db.execute("INSERT INTO job_lease (job_id, owner, until, claimed_at, started) "
               "SELECT f.id, f.lease_owner, f.lease_until, f.updated_at, "
               "coalesce(f.started_at, (SELECT s.at FROM job_started s WHERE s.id = f.id AND "
               "s.owner = f.lease_owner)) FROM future_job f WHERE f.status = 'in_flight'")
    db.execute("UPDATE future_job SET status = 'pending', lease_owner = NULL, lease_until = NULL, "
               "started_at = NULL WHERE status = 'in_flight' OR lease_owner IS NOT NULL "
               "OR lease_until IS NOT NULL OR started_at IS NOT NULL")
    db.execute("DROP INDEX IF EXISTS future_job_in_flight")
    db.execute("DROP TABLE job_started")


MIGRATIONS = [_m001_initial, _m002_events, _m003_started_env, _m004_in_flight_index,
              _m005_slot_entity_index, _m006_started_marks, _m007_meta, _m008_runners,
              _m009_schedules, _m010_api_tokens, _m011_folded_executions, _m012_leases]
assert len(MIGRATIONS) == SCHEMA_VERSION


def apply(conn: sqlite3.Connection) -> int:
    """Bring the schema to SCHEMA_VERSION; returns the version found before."""
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    migrations = Migrations("awty")
    for i, fn in enumerate(MIGRATIONS, 1):
        migrations(name=f"{i:04d}_{fn.__name__.split('_', 2)[-1]}")(fn)
    db = Database(conn, execute_plugins=False, recursive_triggers=False)
    migrations.apply(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return found
