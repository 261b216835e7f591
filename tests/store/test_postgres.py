"""PostgreSQL-only behaviour: connection trouble as one-line errors, a server restart mid-claim,
several processes sharing one slot, a runner SIGKILLed mid-slot, concurrent adders."""

from __future__ import annotations

import subprocess
import sys
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pgserver
import pytest

from awty.config import load
from awty.errors import InvalidInput, StoreError
from awty.model import Answer, End, Job, Kind, Outcome, Result

WORKER = Path(__file__).with_name("worker.py")
SLOT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = SLOT + timedelta(seconds=5)
MINUTE = timedelta(minutes=1)
JOBS = 5000


def jobs(n: int, prefix: str = "01J") -> list[Job]:
    return [Job(id=f"{prefix}{i:08d}", kind=Kind.HTTP, target="http://127.0.0.1:9/cb",
                payload_json="{}", headers={}, entity_name=None, entity_key=None,
                first_check_at=SLOT, next_check_at=SLOT) for i in range(n)]


@pytest.fixture
def pg(pg_database, pg_schema):
    """A fresh schema in the session database, dropped after the test."""
    from awty.store.postgres import PostgresStore

    # leases in the time these tests give (as the contract tests): test_the_databases_clock…
    # checks the database's own, what runners use
    store = PostgresStore(pg_database.url, schema=pg_schema, create=True, lease_clock="caller")
    yield store
    store.close()


@pytest.fixture(scope="module")
def cluster():
    """A cluster of our own: restarting it never disturbs the shared local server."""
    yield from pgserver.own_cluster()


def one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text and "Traceback" not in text
    return text


def worker(store, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), args[0], store.url, store.schema,
                             *args[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finished(p: subprocess.Popen, timeout: float = 120) -> list[str]:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-2000:]
    return out.split("\n")


def ended_once(store, n: int) -> None:
    """Every job of the slot ended, each exactly once."""
    assert store.count() == 0
    rows = list(store.history(limit=n + 10))
    assert len(rows) == n and len({r.id for r in rows}) == n


# -- connection trouble -------------------------------------------------------------------
def test_missing_schema_says_run_init(pg_database):
    from awty.store.postgres import PostgresStore

    with pytest.raises(StoreError) as e:
        PostgresStore(pg_database.url, schema="no_such_schema")
    assert "awty init" in one_line(e.value)


def test_bad_schema_name_and_url_are_bad_input(pg_database):
    from awty.store.postgres import PostgresStore

    with pytest.raises(InvalidInput):
        PostgresStore(pg_database.url, schema='x"; DROP TABLE y; --')
    with pytest.raises(InvalidInput):
        PostgresStore("not a url ===")


@pytest.mark.slow
def test_server_down_wrong_password_restart_mid_claim(cluster):
    import psycopg

    from awty.store.postgres import PostgresStore

    with psycopg.connect(cluster.url, autocommit=True) as c:
        c.execute("CREATE ROLE pwuser LOGIN PASSWORD 'right'")
    hba = cluster.data / "pg_hba.conf"
    hba.write_text("local all pwuser scram-sha-256\n" + hba.read_text())
    cluster.restart()
    wrong = f"postgresql://pwuser:wrong@/postgres?host={cluster.socket}"
    with pytest.raises(StoreError) as e:
        PostgresStore(wrong)
    assert "password" in one_line(e.value)

    store = PostgresStore(cluster.url, schema="restart", create=True, lease_clock="caller")
    try:
        store.add(jobs(300), [None] * 300)
        with store.owner_session("host-a:1:x"):
            got = store.claim(SLOT, now=NOW, owner="host-a:1:x", lease_until=NOW + timedelta(
                seconds=30), limit=100)
            assert len(got) == 100
            cluster.restart()
            with pytest.raises(StoreError) as e:
                store.claim(SLOT, now=NOW, owner="host-a:1:x",
                            lease_until=NOW + timedelta(seconds=30), limit=100)
            one_line(e.value)
            with pytest.raises(StoreError) as e:  # the session marking it alive is gone
                store.start([j.id for j in got], owner="host-a:1:x", now=NOW)
            assert "session" in one_line(e.value)
        # Recovery: the same store reconnects; the lost claims wait for their lease.
        later = NOW + timedelta(seconds=30)
        lease = {"owner": "host-b:2:y", "lease_until": later + MINUTE, "limit": 1000}
        assert len(store.claim(SLOT, now=NOW, **lease)) == 200
        assert len(store.claim(SLOT, now=later, **lease)) == 100
        cluster.stop()
        try:
            with pytest.raises(StoreError) as e:
                PostgresStore(cluster.url, schema="restart")
            one_line(e.value)
            with pytest.raises(StoreError) as e:
                store.count()
            one_line(e.value)
            assert not store.check().ok
        finally:
            cluster.start()
        assert store.count() == 300 and store.check().ok
    finally:
        store.close()


# -- several processes --------------------------------------------------------------------
@pytest.mark.slow
def test_four_processes_share_one_slot_each_job_once(pg):
    pg.add(jobs(JOBS), [None] * JOBS)
    procs = [worker(pg, "claim", f"host-{i}:{i}:n", NOW.isoformat(), "60", SLOT.isoformat())
             for i in range(4)]
    batches = [sum(int(line.split()[1]) for line in finished(p) if line.startswith("claimed"))
               for p in procs]
    assert sum(batches) == JOBS
    assert sum(1 for b in batches if b) >= 2  # the slot's work really was shared
    ended_once(pg, JOBS)


def test_a_runs_ids_reach_the_server_as_they_are(pg):
    # A batch of ULIDs goes as one array literal, made by a join (postgres._ids); ids that
    # literal would have to quote (or read as NULL) go as psycopg's list: each way a claim by
    # id, a start, a finish and a release touch exactly the ids given.
    owner = "host-a:1:a"
    for ids in ([f"01M7YRRT81227ZKA7Y{i:08d}" for i in range(3)],
                ["a,b", 'q"u\\o te', "NULL", "{x}", "01m7yrrt81227zka7y00000000"]):
        pg.add([j.replace(id=i) for j, i in zip(jobs(len(ids)), ids)], [None] * len(ids))
        with pg.owner_session(owner):
            got = pg.claim_ids(ids[:-1], now=NOW, owner=owner, lease_until=NOW + MINUTE)
            assert sorted(j.id for j in got) == sorted(ids[:-1])
            assert pg.release(ids[-2:], owner=owner, now=NOW) == 1
            got = [j for j in got if j.id != ids[-2]] + pg.claim_ids(
                ids[-2:], now=NOW, owner=owner, lease_until=NOW + MINUTE)
            assert sorted(pg.start(ids, owner=owner, now=NOW)) == sorted(ids)
            ends = [End(j, Outcome.DONE, "ok", Result(Answer.DONE, status=204), None)
                    for j in got]
            assert sorted(d.job.id for d in pg.finish(ends, owner=owner, now=NOW)) == \
                sorted(ids)
        assert pg.find(ids) == dict.fromkeys(ids)  # each only in history now


@pytest.mark.slow
def test_sigkilled_runner_leases_are_taken_over_after_expiry(pg):
    pg.add(jobs(JOBS), [None] * JOBS)
    victim = worker(pg, "hang", "host-v:9:v", NOW.isoformat(), "60", SLOT.isoformat())
    assert victim.stdout.readline().strip() == "claimed 100"
    victim.kill()
    victim.wait(10)
    survivors = [worker(pg, "claim", f"host-{i}:{i}:s", NOW.isoformat(), "60", SLOT.isoformat())
                 for i in range(3)]
    for p in survivors:
        finished(p)
    assert pg.count() == 100  # the dead runner's leases are still live: left alone
    [group] = pg.leases(NOW)
    assert (group.owner, group.jobs, group.alive) == ("host-v:9:v", 100, False)
    after = (NOW + timedelta(seconds=60)).isoformat()
    finished(worker(pg, "claim", "host-0:0:t", after, "60", SLOT.isoformat()))
    ended_once(pg, JOBS)


def test_the_databases_clock_decides_leases(pg, pg_database):
    """Runners on several hosts keep lease times in the database's clock (issue 28 #2): a
    runner whose clock runs an hour ahead leases for the lease's length from the server's
    now, so once it is gone its claims wait for the lease, not the lease and the hour; a
    claimer whose clock runs ahead takes no lease early. Before, every lease time was the
    caller's. (A started job of a runner gone is no longer being delivered, lease or not:
    cancel takes it, as base.py says.)"""
    from awty.store.postgres import PostgresStore

    import psycopg

    def server_now() -> datetime:
        with psycopg.connect(pg_database.url) as c:
            return c.execute("SELECT now()").fetchone()[0]

    store = PostgresStore(pg_database.url, schema=pg.schema)  # the server's clock, as runners
    victim, ahead, behind = "host-v:9:v", NOW + timedelta(hours=1), NOW - timedelta(days=30)
    try:
        a, b, c = jobs(3)
        store.add([a, b, c], [None] * 3)
        with store.owner_session(victim):
            got = store.claim(SLOT, now=ahead, owner=victim, lease_until=ahead + MINUTE, limit=2)
            assert store.start([a.id], owner=victim, now=ahead) == [a.id]
        assert [j.id for j in got] == [a.id, b.id]
        assert abs((got[0].lease_until - server_now()) - MINUTE) < timedelta(seconds=5)
        # its session ended: gone; its leases still run on the server's clock
        far = NOW + timedelta(hours=5)
        taken = store.claim(SLOT, now=far, owner="host-b:2:b", lease_until=far + MINUTE, limit=9)
        assert [j.id for j in taken] == [c.id]
        [group] = [g for g in store.leases(far) if g.owner == victim]
        assert (group.jobs, group.expired, group.alive) == (2, 0, False)
        assert group.ends == got[0].lease_until
        assert store.cancel([a.id], far).cancelled == [a.id]
        with psycopg.connect(pg_database.url, autocommit=True) as conn:  # a minute passes
            conn.execute(f'UPDATE "{pg.schema}".future_job SET lease_until = lease_until - '
                         "interval '1 minute' WHERE lease_owner = %s", (victim,))
        assert [(g.expired, g.alive) for g in store.leases(behind) if g.owner == victim] == [
            (1, False)]
        late = store.claim(SLOT, now=behind, owner="host-c:3:c", lease_until=behind + MINUTE,
                           limit=9)
        assert [j.id for j in late] == [b.id]
    finally:
        store.close()


@pytest.mark.slow
def test_eight_concurrent_adders(pg):
    procs = [worker(pg, "add", f"A{i}", "1000", SLOT.isoformat()) for i in range(8)]
    created = [sum(int(line.split()[1]) for line in finished(p) if line.startswith("added"))
               for p in procs]
    assert pg.count() == 8 * 1000 + 50  # each shared idempotency key made one job
    assert sum(created) == 8 * 1000 + 50
    keyed = [j for j in pg.list() if j.idempotency_key]
    assert sorted(j.idempotency_key for j in keyed) == sorted(f"shared-{k}" for k in range(50))


# -- settings -----------------------------------------------------------------------------
def test_database_settings_from_env_and_toml(tmp_path):
    (tmp_path / "awty.toml").write_text('database_schema = "jobs"\n')
    s = load(tmp_path, env={"AWTY_DATABASE_URL": "postgresql://awty@db/awty"})
    assert (s.database_url, s.database_schema) == ("postgresql://awty@db/awty", "jobs")
    assert load(tmp_path, env={}).database_url is None
    with pytest.raises(InvalidInput, match="database_url"):
        load(tmp_path, env={"AWTY_DATABASE_URL": "mysql://db"})
    with pytest.raises(InvalidInput, match="database_schema"):
        load(tmp_path, env={"AWTY_DATABASE_SCHEMA": "a-b"})


@pytest.mark.slow
def test_sqlite_path_never_imports_psycopg(tmp_path):
    # `awty add` on SQLite must stay fast: psycopg (~40 ms) loads only for a database URL.
    code = ("import sys, awty.api, awty.cli, awty.config, awty.store.sqlite, awty.run.runner; "
            "sys.exit(1 if [m for m in sys.modules if m.startswith('psycopg')] else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=tmp_path).returncode == 0


def test_a_job_row_reads_back_as_the_job_it_was_every_field_in_its_place():
    """A claimed row becomes its Job by position (``row_to_job``): every field set, each to a
    value no other field of its type holds, so a column read into the wrong field fails."""
    from awty.model import Status
    from awty.store.pg_rows import job_to_row, row_to_job

    at = [SLOT + timedelta(seconds=i) for i in range(7)]
    job = Job("01JROWROWROWROWROWROWROW01", Kind.EXEC, "/bin/true", '{"a":1}', {"h": "1"},
              "order", "42", at[0], at[1], 3, 2, Status.IN_FLIGHT, 7, 11.5, 12.5, 5, 13.5,
              "key-1", "/tmp", at[2], at[3], "boom", "host:1:abc", at[4], at[5],
              {"PATH": "/bin"}, "nightly", at[6])
    row = job_to_row(job, "fp")
    assert row[-2:] == ("fp", zlib.crc32(job.id.encode()))
    assert row_to_job(row[:-2]) == job


@pytest.mark.parametrize("duration, lateness", [(0, 0), (2, 3), (0.0021, 3.0004)])
def test_a_history_rows_milliseconds_are_floats_rounded_to_the_microsecond(duration, lateness):
    """What ``rules.ended`` gives the float8 columns a binary COPY fills: floats (an int
    fails it), round(x * 1000, 3) of the result's duration and the lateness."""
    from awty.store import rules

    job = jobs(1)[0]
    got = rules.ended(job, Outcome.DONE, "ok", Result(Answer.DONE, status=204,
                                                       duration=duration), lateness, "h:1:x")
    ms, late = got[3], got[4]
    assert (ms, late) == (round(duration * 1000.0, 3), round(lateness * 1000.0, 3))
    assert type(ms) is float and type(late) is float
    assert got[9:] == ("h", 1)
