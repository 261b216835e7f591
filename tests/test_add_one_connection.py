"""One ``awty add`` on a PostgreSQL home opens one plain connection, no pool (issue 34 #5): a
one-shot command makes a few calls and exits, and importing psycopg_pool (and its worker
thread opening a second connection) was a third of what the add paid beyond SQLite's. One
job does not import psycopg at all (tests/test_pg_light.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import T0

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import iso


def _env(home, backend) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    return {**env, **backend.env, "AWTY_HOME": str(home), "AWTY_NOW": iso(T0)}


@pytest.mark.slow
def test_one_add_imports_no_pool(backend, home):
    """Both stores: the add is stored; on PostgreSQL psycopg's pool is never imported, nor
    psycopg itself for one job."""
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        a.init()
    for args in (["add", "https://example.com/one", "--in", "1h", "--json"],
                 ["add", "--batch", "-", "--json"]):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "awty", *args],
                           input='{"target": "https://example.com/b", "in": "2h"}\n'
                                 '{"target": "https://example.com/c", "in": "2h"}\n',
                           capture_output=True, text=True, env=_env(home, backend), timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "psycopg_pool" not in imported
        # one job goes through libpq alone (store/pg_light.py); a batch of two through psycopg
        assert ("psycopg" in imported) == (backend.kind == "postgres" and "--batch" in args)
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        assert sorted(j.target for j in a.list()) == [
            "https://example.com/b", "https://example.com/c", "https://example.com/one"]


def test_a_one_shot_store_serves_a_call_made_while_it_streams(backend, home):
    """A call made while a stream holds the one connection gets a connection of its own
    (a pool would have given it a second one), not a deadlock."""
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        a.init()
        ids = [r.job.id for r in a.add_many(
            [{"target": f"https://example.com/{i}", "in": "1h"} for i in range(3)])]
    with Awty(home, clock=FixedClock(T0), env={}, one_shot=True, **backend.kw) as a:
        seen = [(j.id, a.get(j.id).id) for j in a.list()]
        assert [s[0] for s in seen] == [s[1] for s in seen] and sorted(s[0] for s in seen) \
            == sorted(ids)
        out = a.add("https://example.com/after", in_="1h")
        assert a.get(out.job.id).job.target == "https://example.com/after"
