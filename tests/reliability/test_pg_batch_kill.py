"""A large ``add --batch`` on PostgreSQL is COPY'd while it is validated
(``PostgresStore.add_chunks``): a process SIGKILLed with its COPY under way (seen in
pg_stat_activity) stores none of its batch, and the same file then adds whole."""

from __future__ import annotations

import os
import signal

import psycopg
import pytest

from awty import api
from awty.api import Awty
from awty.clock import FixedClock
from helpers import T0
from relkit import cli_env, run_cli, spawn, wait_until, write_batch


@pytest.mark.slow  # four awty processes: ~2 s
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_batch_killed_mid_copy_stores_nothing(home, backend, pg_database, pg_schema,
                                                  tmp_path):
    n = 4 * api._CHUNK
    path = tmp_path / "batch.jsonl"
    write_batch(path, ({"target": "http://127.0.0.1:9/cb", "in": f"{1 + i % 90}m",
                        "payload": {"i": i}, "entity": "order", "key": str(i)}
                       for i in range(n)))
    env = {**cli_env(home, T0), **backend.env}
    copying = (f'SELECT count(*) FROM pg_stat_activity WHERE state = \'active\' '
               f'AND query LIKE \'COPY "{pg_schema}".future_job%%\'')

    def held() -> int:
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            return a.count()

    with psycopg.connect(pg_database.url, autocommit=True) as watch:
        for _ in range(3):
            proc = spawn(["add", "--batch", str(path)], env)
            hit = wait_until(lambda: watch.execute(copying).fetchone()[0] > 0, 60, 0.001)
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
            assert hit, "the COPY was never seen under way"
            # the server ends the transaction once it reads the closed socket
            assert wait_until(lambda: watch.execute(copying).fetchone()[0] == 0, 30, 0.01)
            assert held() == 0
    p = run_cli(["add", "--batch", str(path)], env)
    assert p.returncode == 0, p.stderr
    assert held() == n
