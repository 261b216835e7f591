"""A PostgreSQL schema that is not awty's own is refused (issue 28, item 9).

``database_schema = "information_schema"`` (or ``pg_catalog``, ``pg_toast``, any ``pg_*``)
put awty's tables among the server's own, or failed half-way through ``init``; ``public``,
where an application's tables usually live, is taken only when ``database_public_schema``
says so. Real ``awty`` subprocesses on the real server: ``init`` and an open (``list``) exit 2
with one line and create nothing; ``public`` with the setting works, in a database of its own."""

from __future__ import annotations

import uuid

import pytest

from helpers import T0, pg_url
from relkit import cli_env, run_cli

pytestmark = pytest.mark.reliability


def _tables(dburl: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(dburl, autocommit=True) as c:
        return [r[0] for r in c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name IN ('schema_version', 'future_job', 'job_history')", (schema,))]


@pytest.mark.parametrize("schema, says", [
    ("information_schema", "system schema"), ("pg_catalog", "system schema"),
    ("pg_toast", "system schema"), ("PG_Temp_1", "system schema"),
    ("public", "database_public_schema = true"),
])
def test_a_schema_not_awty_s_own_is_refused(home, pg_database, schema, says):
    env = {**cli_env(home, T0), "AWTY_DATABASE_URL": pg_url(pg_database.url),
           "AWTY_DATABASE_SCHEMA": schema}
    for args in (["init"], ["list"]):
        res = run_cli(args, env)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "AWTY_DATABASE_SCHEMA" in lines[0], lines
        assert "Traceback" not in res.stderr
    assert _tables(pg_database.url, schema.lower()) == []


@pytest.mark.slow
def test_public_when_the_setting_says_so(home, pg_database):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"awty_public_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database.admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    dburl = make_conninfo(**{**conninfo_to_dict(pg_database.admin), "dbname": name})
    try:
        env = {**cli_env(home, T0), "AWTY_DATABASE_URL": pg_url(dburl),
               "AWTY_DATABASE_SCHEMA": "public", "AWTY_DATABASE_PUBLIC_SCHEMA": "true"}
        assert run_cli(["init"], env).returncode == 0
        add = run_cli(["add", "https://example.com/hook", "--in", "1h"], env)
        assert add.returncode == 0, add.stderr
        assert sorted(_tables(dburl, "public")) == ["future_job", "job_history",
                                                    "schema_version"]
    finally:
        with psycopg.connect(pg_database.admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
