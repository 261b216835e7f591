"""Numbered migrations of the PostgreSQL schema. Each runs once, in order, in one transaction,
recorded in ``<schema>.schema_version``; ``awty init`` applies the missing ones.

Text uses ``{s}`` for the quoted schema name. Times are ``timestamptz`` truncated to whole
seconds by the store; ids are ``COLLATE "C"`` so that text order is ULID (time) order;
``shard_key`` is crc32(id) so that ``shard_key % n`` is exactly
``ids.shard_of(id, n)``; ``lease_key`` is the owner's advisory-lock key (see postgres.py).

``future_job`` leaves room in its pages (fillfactor 40 since migration 6; 70 before) and has
no index on status or lease columns: a claim and a start then update rows in place (HOT),
without new index entries, so a slot's run costs the same whatever else the table holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .pg_rows import one

if TYPE_CHECKING:
    from psycopg import Connection, Cursor
    from psycopg.rows import TupleRow

MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE {s}.future_job (
    id              text COLLATE "C" PRIMARY KEY,
    shard_key       bigint NOT NULL,
    kind            text NOT NULL,
    target          text NOT NULL,
    payload         text NOT NULL,
    headers         text,
    env             text,
    entity_name     text,
    entity_key      text,
    first_check_at  timestamptz NOT NULL,
    next_check_at   timestamptz NOT NULL,
    check_count     integer NOT NULL DEFAULT 0,
    attempt         integer NOT NULL DEFAULT 0,
    status          text NOT NULL DEFAULT 'pending',
    max_checks      integer,
    horizon         double precision,
    timeout         double precision,
    max_attempts    integer,
    misfire_grace   double precision,
    idempotency_key text,
    fingerprint     text,
    cwd             text,
    created_at      timestamptz,
    updated_at      timestamptz,
    last_error      text,
    lease_owner     text,
    lease_key       bigint,
    lease_until     timestamptz,
    started_at      timestamptz
) WITH (fillfactor = 70);
CREATE INDEX future_job_slot ON {s}.future_job (next_check_at, id);
CREATE UNIQUE INDEX future_job_idempotency ON {s}.future_job (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX future_job_entity ON {s}.future_job (entity_name, entity_key)
    WHERE entity_name IS NOT NULL;

CREATE TABLE {s}.job_history (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text COLLATE "C" NOT NULL,
    kind            text NOT NULL,
    target          text NOT NULL,
    entity_name     text,
    entity_key      text,
    outcome         text NOT NULL,
    reason          text NOT NULL,
    checks          integer NOT NULL,
    attempts        integer NOT NULL,
    first_check_at  timestamptz NOT NULL,
    ended_at        timestamptz NOT NULL,
    created_at      timestamptz,
    duration_ms     double precision,
    lateness_ms     double precision,
    last_status     integer,
    error           text,
    output          text,
    idempotency_key text,
    fingerprint     text,
    payload         text NOT NULL,
    job             text
);
CREATE INDEX job_history_id ON {s}.job_history (id);
CREATE INDEX job_history_ended ON {s}.job_history (ended_at);
CREATE INDEX job_history_idempotency ON {s}.job_history (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX job_history_entity ON {s}.job_history (entity_name, entity_key)
    WHERE entity_name IS NOT NULL;

CREATE TABLE {s}.job_execution (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       text NOT NULL,
    at           timestamptz NOT NULL,
    slot         text NOT NULL,
    check_no     integer NOT NULL,
    attempt      integer NOT NULL,
    answer       text NOT NULL,
    status       integer,
    duration_ms  double precision,
    lateness_ms  double precision,
    error        text
);
CREATE INDEX job_execution_job ON {s}.job_execution (job_id);
CREATE INDEX job_execution_at ON {s}.job_execution (at);
""",
    # What the store keeps about itself (``Store.meta``): the settings every host of the
    # cluster reads (written by `awty init`, changed by `awty config --cluster`), a move.
    2: """
CREATE TABLE {s}.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
""",
    # Who fired what: the runner's host and process on each execution and on the history row
    # it wrote; the kinds each runner host claims and when it last ran (doctor).
    3: """
ALTER TABLE {s}.job_execution ADD COLUMN host text, ADD COLUMN pid integer;
ALTER TABLE {s}.job_history ADD COLUMN host text, ADD COLUMN pid integer;
CREATE TABLE {s}.runner_host (
    host    text PRIMARY KEY,
    kinds   text NOT NULL,
    pid     integer,
    seen_at timestamptz NOT NULL
);
""",
    # Recurring schedules (as SQLite's migration 9): one row each; an occurrence's job names its
    # schedule and nominal time, unique among pending jobs (a claim changes neither, so its
    # updates stay HOT); history rows name the schedule.
    4: """
CREATE TABLE {s}.schedule (
    name          text COLLATE "C" PRIMARY KEY,
    cron          text,
    every         integer,
    start         timestamptz,
    zone          text NOT NULL,
    missed        text NOT NULL,
    missed_window double precision NOT NULL,
    resolution    integer NOT NULL,
    template      text NOT NULL,
    next_at       timestamptz NOT NULL,
    paused_at     timestamptz,
    created_at    timestamptz NOT NULL
);
ALTER TABLE {s}.future_job ADD COLUMN schedule text, ADD COLUMN occurrence timestamptz;
CREATE UNIQUE INDEX future_job_occurrence ON {s}.future_job (schedule, occurrence)
    WHERE schedule IS NOT NULL;
ALTER TABLE {s}.job_history ADD COLUMN schedule text;
CREATE INDEX job_history_schedule ON {s}.job_history (schedule, seq)
    WHERE schedule IS NOT NULL;
""",
    # `awty serve`'s tokens (`awty token new`): the SHA-256 of each, never the token; options
    # holds what the token may schedule (allow_callbacks, exec_dir, exec_env).
    5: """
CREATE TABLE {s}.api_token (
    name         text PRIMARY KEY,
    hash         text NOT NULL UNIQUE,
    scopes       text NOT NULL,
    options      text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz
);
""",
    # Room on each page for a new version of every row: a claim and a start rewrite each
    # claimed row, a page's rows together; at fillfactor 70 about half found no room on their
    # page (not HOT: a new entry in every index, ~2x the server's CPU of a claim). Pages
    # written from now on (ALTER TABLE ... SET changes no existing page).
    6: """
ALTER TABLE {s}.future_job SET (fillfactor = 40);
""",
    # The execution that ended a job, when it says what the history row says, is kept on that
    # row (exec_*; SQLite's migration 11, ``rules.folds``) rather than as a job_execution row:
    # one COPY'd row and three index entries fewer a finished job. exec_at is NULL elsewhere.
    7: """
ALTER TABLE {s}.job_history ADD COLUMN exec_at timestamptz, ADD COLUMN exec_slot text,
    ADD COLUMN exec_check integer, ADD COLUMN exec_attempt integer, ADD COLUMN exec_answer text;
""",
}

LATEST = max(MIGRATIONS)
# Serialises concurrent `awty init` runs on one database (pg_advisory_xact_lock key).
MIGRATION_LOCK = 0x61777479  # "awty"


def current_version(cur: Cursor[TupleRow], schema: str) -> int:
    """The schema's version; 0 when the schema or its version table does not exist."""
    cur.execute("SELECT to_regclass(%s)", (f'"{schema}".schema_version',))
    if one(cur.fetchone())[0] is None:
        return 0
    cur.execute(f'SELECT coalesce(max(version), 0) FROM "{schema}".schema_version')
    return int(one(cur.fetchone())[0])


def migrate(conn: Connection[TupleRow], schema: str) -> int:
    """Create the schema if needed and apply the missing migrations; returns the version."""
    s = f'"{schema}"'
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {s}.schema_version ("
                    "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        version = current_version(cur, schema)
        for n in sorted(MIGRATIONS):
            if n > version:
                cur.execute(MIGRATIONS[n].format(s=s))
                cur.execute(f"INSERT INTO {s}.schema_version (version) VALUES (%s)", (n,))
                version = n
    return version
