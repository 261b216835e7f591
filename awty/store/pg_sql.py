"""SQL text of the PostgreSQL store. ``{s}`` is the quoted schema name, filled in once per store
(``render``); parameters are psycopg placeholders (``%s``, ``%(name)s``; ``%%`` is a literal %).
"""

from __future__ import annotations

from ..model import Answer

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

# Column order of every job row read or copied (rows.py-style decoding is in postgres.py).
JOB_COLUMNS = (
    "id", "kind", "target", "payload", "headers", "env", "entity_name", "entity_key",
    "first_check_at", "next_check_at", "check_count", "attempt", "status", "max_checks",
    "horizon", "timeout", "max_attempts", "misfire_grace", "idempotency_key", "cwd",
    "created_at", "updated_at", "last_error", "lease_owner", "lease_until", "started_at",
    "schedule", "occurrence",
)
_JOB = ", ".join(JOB_COLUMNS)
# Binary COPY (several times faster than text for timestamps) needs each column's type.
JOB_COPY_TYPES = (
    "text", "text", "text", "text", "text", "text", "text", "text", "timestamptz",
    "timestamptz", "int4", "int4", "text", "int4", "float8", "float8", "int4", "float8", "text",
    "text", "timestamptz", "timestamptz", "text", "text", "timestamptz", "timestamptz",
    "text", "timestamptz",  # schedule, occurrence
    "text", "int8",  # fingerprint, shard_key
)
_FJOB = ", ".join("f." + c for c in JOB_COLUMNS)
HISTORY_COLUMNS = (
    "id", "kind", "target", "entity_name", "entity_key", "outcome", "reason", "checks",
    "attempts", "first_check_at", "ended_at", "created_at", "duration_ms", "lateness_ms",
    "last_status", "error", "output", "idempotency_key", "fingerprint", "payload", "job",
    "host", "pid", "schedule",
)
HISTORY_COPY_TYPES = (
    "text", "text", "text", "text", "text", "text", "text", "int4", "int4", "timestamptz",
    "timestamptz", "timestamptz", "float8", "float8", "int4", "text", "text", "text", "text",
    "text", "text", "text", "int4", "text",
)
_HISTORY_READ = ("id, kind, target, entity_name, entity_key, outcome, reason, checks, attempts, "
                 "first_check_at, ended_at, created_at, duration_ms, last_status, error, output, "
                 "payload, host, pid, schedule")
# An execution folded into its job's history row (migration 7; ``rules.folds``): the columns
# a finished job's history row adds for it, and the history row read as an execution row.
FOLDED_COLUMNS = ("exec_at", "exec_slot", "exec_check", "exec_attempt", "exec_answer")
FOLDED_COPY_TYPES = HISTORY_COPY_TYPES + ("timestamptz", "text", "int4", "int4", "text")
_AS_EXECUTION = ("id, exec_at, exec_slot, exec_check, exec_attempt, exec_answer, last_status, "
                 "duration_ms, lateness_ms, error, host, pid")
EXECUTION_COLUMNS = ("job_id", "at", "slot", "check_no", "attempt", "answer", "status",
                     "duration_ms", "lateness_ms", "error", "host", "pid")
EXECUTION_COPY_TYPES = ("text", "timestamptz", "text", "int4", "int4", "text", "int4", "float8",
                        "float8", "text", "text", "int4")

_EXECUTION = ", ".join(EXECUTION_COLUMNS)
# Every answer an execution gives, counted each in ``stats``
ANSWERS = tuple(a.value for a in Answer)
# Every execution that began at or after the one parameter, as a table ``e``: a folded one
# began no later than its row ended (``rules.folds``), so the ended_at index bounds the search.
_SINCE = ("(WITH since AS (SELECT %s::timestamptz AS t) "
          f"SELECT {_EXECUTION} FROM {{s}}.job_execution WHERE at >= (SELECT t FROM since) "
          f"UNION ALL SELECT {_AS_EXECUTION} FROM {{s}}.job_history "
          "WHERE ended_at >= (SELECT t FROM since) AND exec_at >= (SELECT t FROM since)) e")
# stats' figures over the window's executions ``e`` (see ``stats_executions``)
_STATS_FIGURES = ("count(*), count(*) FILTER (WHERE attempt >= 2), "
                  + "".join(f"count(*) FILTER (WHERE answer = '{a}'), " for a in ANSWERS)
                  + "count(lateness_ms), percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP "
                  "(ORDER BY lateness_ms), max(lateness_ms)")

# The window's executions read once into ``w`` (``durations``, ``stats_and_durations``): each
# start's milliseconds once, as a float8 (date_part: what extract's numeric cast to float8
# gives, not its cost); the columns stats' figures need more follow it there
_WINDOW = ("WITH w AS MATERIALIZED (SELECT slot, host, pid, date_part('epoch', at) * 1000 AS t, "
           "duration_ms")


def histogram(d: str, bounds: Sequence[float]) -> str:
    """A histogram's columns over the values ``d`` (NULLs left out): a count at or under each
    bound, the count, the sum."""
    return ("".join(f"count(*) FILTER (WHERE {d} <= {float(b)!r}), " for b in bounds)
            + f"count({d}), coalesce(sum({d}), 0)")


# Seconds a statement may wait for its answer before the store asks whether the server is
# still there (pg_watch, pg_light): awty's statements take milliseconds; past this, ask.
PROBE_AFTER = 1.0

SCHEDULE_COLUMNS = ("name, cron, every, start, zone, missed, missed_window, resolution, "
                    "template, next_at, paused_at, created_at")

# The advisory-lock keys (classid) of the owners' sessions and of slot locks; objid is the
# owner's / slot's 31-bit key. pg_locks shows who holds them: that is "alive".
ALIVE = """SELECT objid::bigint FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = %(owner_class)s
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""

# Lease times are the database's (now()): one clock for every host, where a runner's own may
# be hours off (a killed runner whose clock ran an hour ahead stranded its claims for an hour
# more). ``%(clock)s`` is NULL but in a store told to keep them in its callers' time
# (``lease_clock="caller"``: the contract tests, which move time by hand).
CLOCK = "coalesce(%(clock)s::timestamptz, now())"
# A claim's lease: ``%(lease)s`` seconds from now, in whole seconds as every stored time.
LEASE_UNTIL = "date_trunc('second', " + CLOCK + ") + %(lease)s * interval '1 second'"
# Claimable: pending, or leased with the lease expired (boundary included) and the owner's
# session not held. The alive set is a hashed subplan, computed once per statement.
CLAIMABLE = ("(f.status = 'pending' OR (f.lease_until <= " + CLOCK + " AND (f.lease_key IS NULL "
             "OR f.lease_key NOT IN (" + ALIVE + "))))")
# A claimer never takes back its own expired leases: those jobs are still in its hands (its
# clock jumped past their lease), and claiming them again would run them twice.
NOT_MINE = "f.lease_owner IS DISTINCT FROM %(owner)s"
# What ``rules.running`` needs of a row besides the job: is its owner's session held, and the
# lease clock's now (an owner's liveness is always known here: a session lock, held or not).
LIVENESS = "f.lease_key IN (" + ALIVE + "), " + CLOCK

TEXTS = {
    "copy_jobs": f"COPY {{s}}.future_job ({_JOB}, fingerprint, shard_key) FROM STDIN "
                 "(FORMAT BINARY)",
    # the one statement of a light one-job add (pg_light: libpq's own $n parameters, as text)
    "insert_job": f"INSERT INTO {{s}}.future_job ({_JOB}, fingerprint, shard_key) VALUES ("
                  + ", ".join(f"${i}" for i in range(1, len(JOB_COLUMNS) + 3)) + ")",
    "copy_history": f"COPY {{s}}.job_history ({', '.join(HISTORY_COLUMNS)}) FROM STDIN "
                    "(FORMAT BINARY)",
    "copy_finished": f"COPY {{s}}.job_history ({', '.join(HISTORY_COLUMNS + FOLDED_COLUMNS)}) "
                     "FROM STDIN (FORMAT BINARY)",
    "copy_executions": f"COPY {{s}}.job_execution ({', '.join(EXECUTION_COLUMNS)}) "
                       "FROM STDIN (FORMAT BINARY)",
    "key_lock": "SELECT pg_advisory_xact_lock(%s, k) FROM unnest(%s::int[]) AS k ORDER BY k",
    "by_keys": f"SELECT idempotency_key, fingerprint, {_JOB} FROM {{s}}.future_job "
               "WHERE idempotency_key = ANY(%s)",
    "history_by_keys": "SELECT DISTINCT ON (idempotency_key) idempotency_key, fingerprint, job "
                       "FROM {s}.job_history WHERE idempotency_key = ANY(%s) "
                       "ORDER BY idempotency_key, seq DESC",
    "get": f"SELECT {_JOB} FROM {{s}}.future_job WHERE id = %s",
    "get_for_update": f"SELECT {_JOB}, {LIVENESS} FROM {{s}}.future_job f WHERE id = %(id)s "
                      "FOR UPDATE",
    "get_history": f"SELECT {_HISTORY_READ} FROM {{s}}.job_history WHERE id = %s ORDER BY seq",
    # a job's execution rows, then its history rows (checks, attempts, an execution folded
    # into it or NULLs), each in the order written: ``rules.in_recorded_order`` takes them
    "executions": f"SELECT {_EXECUTION}, 0 AS src, seq, NULL::int, NULL::int "
                  f"FROM {{s}}.job_execution WHERE job_id = %(id)s UNION ALL "
                  f"SELECT {_AS_EXECUTION}, 1, seq, checks, attempts FROM {{s}}.job_history "
                  "WHERE id = %(id)s ORDER BY src, seq",
    # the newest slot in the execution log and its first start, over the newest rows only
    "last_fired": "SELECT slot, min(at) FROM ((SELECT slot, at FROM {s}.job_execution ORDER BY "
                  "seq DESC LIMIT 10000) UNION ALL (SELECT exec_slot, exec_at FROM "
                  "{s}.job_history ORDER BY seq DESC LIMIT 10000)) e WHERE at IS NOT NULL "
                  "GROUP BY slot ORDER BY slot DESC LIMIT 1",
    "find_pending": "SELECT id, next_check_at FROM {s}.future_job WHERE id = ANY(%s)",
    "find_history": "SELECT DISTINCT id FROM {s}.job_history WHERE id = ANY(%s)",
    "match_ids": "SELECT id FROM (SELECT id FROM {s}.future_job WHERE id LIKE %(p)s "
                 "UNION SELECT id FROM {s}.job_history WHERE id LIKE %(p)s) u "
                 "ORDER BY id LIMIT %(limit)s",
    "list": f"SELECT {_JOB} FROM {{s}}.future_job",
    "count": "SELECT count(*) FROM {s}.future_job",
    "slot_ids": "SELECT id FROM {s}.future_job WHERE next_check_at = %s",
    "slots_with_work": "SELECT next_check_at, count(*) FROM {s}.future_job",
    "history": f"SELECT {_HISTORY_READ} FROM {{s}}.job_history",
    # ARRAY(…) rather than a join: the UPDATE then finds its rows through the primary key,
    # whatever the table holds (a hash join would scan it all). The slot is written as a
    # one-second range so that only the (next_check_at, id) index gives the order: with
    # ``=`` the planner may walk the primary key instead, past every row of other slots.
    "claim": f"""UPDATE {{s}}.future_job f SET status = 'in_flight', lease_owner = %(owner)s,
        lease_key = %(owner_key)s, lease_until = {LEASE_UNTIL}, started_at = NULL
    WHERE f.id = ANY(ARRAY(
        SELECT f.id FROM {{s}}.future_job f
        WHERE f.next_check_at >= %(slot)s AND f.next_check_at < %(slot_end)s
          AND {CLAIMABLE} AND {NOT_MINE} {{shard}} {{kinds}}
        ORDER BY f.next_check_at, f.id LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED))
    RETURNING {_FJOB}""",
    "claim_ids": f"""UPDATE {{s}}.future_job f SET status = 'in_flight', lease_owner = %(owner)s,
        lease_key = %(owner_key)s, lease_until = {LEASE_UNTIL}, started_at = NULL
    WHERE f.id = ANY(ARRAY(
        SELECT f.id FROM {{s}}.future_job f
        WHERE f.id = ANY(%(ids)s) AND {CLAIMABLE} AND {NOT_MINE}
        ORDER BY f.next_check_at, f.id
        FOR UPDATE SKIP LOCKED))
    RETURNING {_FJOB}""",
    # Only while the owner's session is held, checked by the server in the same statement:
    # once it is gone others may take the owner's claims, so it may start nothing more,
    # whichever process (the runner or its store process) asks.
    "start": "UPDATE {s}.future_job SET started_at = %(now)s WHERE id = ANY(%(ids)s) "
             "AND lease_owner = %(owner)s AND status = 'in_flight' "
             "AND %(owner_key)s IN (" + ALIVE + ") RETURNING id",
    # finish: only jobs still leased by the finishing owner change; RETURNING says which.
    "end_owned": "DELETE FROM {s}.future_job WHERE id = ANY(%s) AND lease_owner = %s "
                 "AND status = 'in_flight' RETURNING id, fingerprint",
    "reslot": """UPDATE {s}.future_job f SET next_check_at = v.n, check_count = v.c,
        attempt = v.a, last_error = v.e, status = 'pending', lease_owner = NULL,
        lease_key = NULL, lease_until = NULL, started_at = NULL, updated_at = %s
    FROM unnest(%s::text[], %s::timestamptz[], %s::int[], %s::int[], %s::text[])
        AS v(id, n, c, a, e)
    WHERE f.id = v.id AND f.lease_owner = %s AND f.status = 'in_flight' RETURNING f.id""",
    "delete_jobs": "DELETE FROM {s}.future_job WHERE id = ANY(%s)",
    "release": "UPDATE {s}.future_job SET status = 'pending', lease_owner = NULL, "
               "lease_key = NULL, lease_until = NULL, started_at = NULL "
               "WHERE id = ANY(%s) AND lease_owner = %s AND status = 'in_flight'",
    "release_stale": f"""UPDATE {{s}}.future_job f SET status = 'pending', lease_owner = NULL,
        lease_key = NULL, lease_until = NULL, started_at = NULL
    WHERE f.status = 'in_flight' AND f.lease_owner IS NOT DISTINCT FROM %(owner)s
      AND {CLAIMABLE}""",
    "cancel_select": f"SELECT {_JOB}, fingerprint, {LIVENESS} FROM {{s}}.future_job f "
                     "WHERE {where} ORDER BY next_check_at, id FOR UPDATE",
    "reschedule": f"""UPDATE {{s}}.future_job SET next_check_at = %s, status = 'pending',
        lease_owner = NULL, lease_key = NULL, lease_until = NULL, started_at = NULL,
        updated_at = %s WHERE id = %s RETURNING {_JOB}""",
    "in_future": "SELECT 1 FROM {s}.future_job WHERE id = %s",
    "last_history": "SELECT job, fingerprint, outcome, reason FROM {s}.job_history WHERE id = %s "
                    "ORDER BY seq DESC LIMIT 1",
    "key_in_future": "SELECT 1 FROM {s}.future_job WHERE idempotency_key = %s",
    "prune_count": "SELECT count(*) FROM {s}.job_history WHERE ended_at < %s",
    "prune_executions": """DELETE FROM {s}.job_execution e USING {s}.job_history h
        WHERE h.ended_at < %s AND e.job_id = h.id AND e.at < %s""",
    "prune": "DELETE FROM {s}.job_history WHERE ended_at < %s",
    "leases": f"""SELECT lease_owner, count(*), count(*) FILTER (WHERE lease_until <= {CLOCK}),
        bool_or(lease_key IN ({ALIVE})), max(lease_until)
    FROM {{s}}.future_job WHERE status = 'in_flight' GROUP BY lease_owner ORDER BY lease_owner""",
    # one scan of the jobs for every count, by kind (the sums are the totals); the past slots
    # from the slot index's range
    "stats_jobs": f"""SELECT kind, count(*),
        count(*) FILTER (WHERE status = 'pending'),
        count(*) FILTER (WHERE status = 'in_flight'),
        count(*) FILTER (WHERE status = 'in_flight' AND lease_until <= {CLOCK}
            AND (lease_key IS NULL OR lease_key NOT IN ({ALIVE}))),
        count(*) FILTER (WHERE next_check_at < %(current)s)
    FROM {{s}}.future_job GROUP BY kind ORDER BY kind""",
    "stats_past_slots": "SELECT count(DISTINCT next_check_at) FROM {s}.future_job "
                        "WHERE next_check_at < %s",
    "stats_next": "SELECT next_check_at, count(*) FROM {s}.future_job "
                  "WHERE next_check_at >= %s GROUP BY next_check_at "
                  "ORDER BY next_check_at LIMIT %s",
    "stats_outcomes": "SELECT outcome, count(*) FROM {s}.job_history WHERE ended_at >= %s "
                      "GROUP BY outcome",
    # The window's executions read once (index ranges and a heap fetch each, from two tables:
    # most of a scrape's cost) for every figure: a count per answer this version knows (others
    # are told by the total, and ``stats_answers`` then counts them all) and the two lateness
    # percentiles from one sort (two percentile_cont calls sort twice).
    "stats_executions": f"SELECT {_STATS_FIGURES} FROM {_SINCE}",
    "stats_answers": "SELECT answer, count(*) FROM " + _SINCE + " GROUP BY answer",
    # Both histograms over one read of the window (``durations``; ``_WINDOW``)
    "durations_window": f"{_WINDOW} FROM {_SINCE}) ",
    # a run: one runner process's executions of one slot
    "durations_runs": "SELECT max(t + coalesce(duration_ms, 0)) - min(t) AS d "
                      "FROM w GROUP BY slot, host, pid",
    # ``stats_and_durations`` (a metrics scrape): the window read once for stats' figures and
    # both histograms, the columns of both in ``w``
    "stats_durations_window": f"{_WINDOW}, lateness_ms, answer, attempt FROM {_SINCE}) ",
    # stats' figures' columns over ``w``, the executions' histogram's after them
    "stats_figures": _STATS_FIGURES,
    "owner_alive": "SELECT %(owner_key)s IN (" + ALIVE + ")",
    "session_lock": "SELECT pg_advisory_lock_shared(%s, %s)",
    # the session lock is held by the backend this statement runs on (not so behind a pooler
    # in transaction mode)
    "session_holds": "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() "
                     "AND locktype = 'advisory' AND granted AND objsubid = 2 "
                     "AND classid = %s AND objid::bigint = %s)",
    "session_unlock": "SELECT pg_advisory_unlock_shared(%s, %s)",
    "slot_lock": "SELECT pg_try_advisory_lock_shared(%s, %s)",
    "slot_holders": """SELECT a.pid, coalesce(host(a.client_addr), 'local socket'),
        a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = %s
      AND l.objid::bigint = %s ORDER BY a.pid""",
    # what opening a store reads: the schema's version and the store's meta, one round trip
    "opening": "SELECT (SELECT max(version) FROM {s}.schema_version), "
               "(SELECT json_object_agg(key, value::json) FROM {s}.meta)",
    "set_meta": "INSERT INTO {s}.meta (key, value) VALUES (%s, %s::text) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    # a resolution change: slots.slot_for (the next boundary at or after) of every pending
    # job off the new boundaries, on the epoch seconds the slots are
    "reslot_pending": """UPDATE {s}.future_job SET updated_at = %(now)s,
        next_check_at = to_timestamp(ceil(extract(epoch FROM next_check_at) / %(secs)s)
                                     * %(secs)s)
    WHERE status = 'pending'
      AND mod(extract(epoch FROM next_check_at)::numeric, %(secs)s) <> 0""",
    "note_runner": "INSERT INTO {s}.runner_host (host, kinds, pid, seen_at) "
                   "VALUES (%s, %s::text, %s, %s) ON CONFLICT (host) DO UPDATE SET "
                   "kinds = excluded.kinds, pid = excluded.pid, seen_at = excluded.seen_at",
    "runners": "SELECT host, kinds::json, pid, seen_at FROM {s}.runner_host "
               "ORDER BY seen_at DESC, host",
    # recurring schedules (postgres_schedules.py)
    "schedule_insert": "INSERT INTO {s}.schedule (" + SCHEDULE_COLUMNS + ") VALUES ("
                       + ", ".join(["%s"] * 12) + ")",
    "schedule_get": "SELECT " + SCHEDULE_COLUMNS + " FROM {s}.schedule WHERE name = %s",
    "schedule_lock": "SELECT " + SCHEDULE_COLUMNS + " FROM {s}.schedule WHERE name = %s "
                     "FOR UPDATE",
    "schedules_lock": "SELECT " + SCHEDULE_COLUMNS + " FROM {s}.schedule "
                      "WHERE name = ANY(%s) ORDER BY name FOR UPDATE",
    "schedules": "SELECT " + SCHEDULE_COLUMNS + " FROM {s}.schedule ORDER BY name",
    "schedule_jobs": f"SELECT {_JOB} FROM {{s}}.future_job WHERE schedule = %s "
                     "ORDER BY next_check_at, id",
    "schedule_jobs_for_update": f"SELECT {_JOB}, fingerprint, {LIVENESS} FROM {{s}}.future_job f "
                                "WHERE schedule = %(name)s ORDER BY next_check_at, id FOR UPDATE",
    "schedule_pause": "UPDATE {s}.schedule SET paused_at = %s WHERE name = %s",
    "schedules_move": "UPDATE {s}.schedule SET next_at = %s WHERE next_at = %s "
                      "AND name = ANY(%s)",
    "schedule_delete": "DELETE FROM {s}.schedule WHERE name = %s",
    "schedule_armed": "SELECT status FROM {s}.future_job WHERE schedule = %s "
                      "AND occurrence = %s",
    "schedule_occurrence_job": f"SELECT {_JOB} FROM {{s}}.future_job WHERE schedule = %s "
                               "AND occurrence = %s",
    "schedule_occurrence_id": "SELECT id FROM {s}.future_job WHERE schedule = %s "
                              "AND occurrence = %s",
    "schedule_next_at": "SELECT next_at FROM {s}.schedule WHERE name = %s",
    "schedule_set_next": "UPDATE {s}.schedule SET next_at = %s WHERE name = %s",
    "schedule_counts": "SELECT count(*), count(paused_at) FROM {s}.schedule",
    "schedules_unarmed": "SELECT name FROM {s}.schedule s WHERE paused_at IS NULL AND NOT "
                         "EXISTS (SELECT 1 FROM {s}.future_job f WHERE f.schedule = s.name "
                         "AND f.occurrence = s.next_at) ORDER BY name",
    "schedule_outcomes": "SELECT s.name, h.outcome, h.ended_at FROM {s}.schedule s "
                         "CROSS JOIN LATERAL (SELECT outcome, ended_at FROM {s}.job_history "
                         "WHERE schedule = s.name ORDER BY seq DESC LIMIT 1) h",
    "schedule_reslot": "UPDATE {s}.schedule SET resolution = %s",
    "add_token": "INSERT INTO {s}.api_token (name, hash, scopes, options, created_at) "
                 "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
    "tokens": "SELECT name, scopes, created_at, last_used_at, options FROM {s}.api_token "
              "ORDER BY name",
    # last_used_at moves at most once a minute: a token's every request is no write
    "token_for": "UPDATE {s}.api_token SET last_used_at = %(now)s WHERE hash = %(hash)s "
                 "AND (last_used_at IS NULL OR last_used_at < %(now)s - interval '1 minute') ",
    # store.add's check of serve's tokens: the last use noted as token_for's, the tokens
    # found read in the same statement (the UPDATE's rows are there whether it moved them)
    "tokens_live": "WITH noted AS (UPDATE {s}.api_token SET last_used_at = %(now)s "
                   "WHERE hash = ANY(%(hashes)s) AND (last_used_at IS NULL "
                   "OR last_used_at < %(now)s - interval '1 minute')) "
                   "SELECT hash FROM {s}.api_token WHERE hash = ANY(%(hashes)s)",
    "token_row": "SELECT name, scopes, created_at, last_used_at, options FROM {s}.api_token "
                 "WHERE hash = %s",
    "token_named": "SELECT name, scopes, created_at, last_used_at, options "
                   "FROM {s}.api_token WHERE name = %s",
    "token_options": "UPDATE {s}.api_token SET options = %s WHERE name = %s",
    "revoke_token": "DELETE FROM {s}.api_token WHERE name = %s",
    "server": "SELECT current_setting('server_version'), current_database(), "
              "coalesce(inet_server_addr()::text, current_setting('unix_socket_directories'))",
}


class Sql:
    """Every statement of TEXTS with the schema filled in, as attributes."""

    def __init__(self, schema: str):
        quoted = '"' + schema.replace('"', '""') + '"'
        for name, text in TEXTS.items():
            setattr(self, name, text.replace("{s}", quoted))

    if TYPE_CHECKING:
        # For mypy: each TEXTS key is a str attribute (set above, TEXTS staying the one list).
        def __getattr__(self, name: str) -> str: ...
