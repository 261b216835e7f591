"""Shared fixtures: a real home in tmp_path, a FixedClock, a pinned Rich width, and freezegun
told to leave the event loop and file locks alone (PITFALLS: frozen monotonic time hangs them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import freezegun
import pytest

import pgserver

from awty.api import Awty
from awty.clock import FixedClock

freezegun.configure(extend_ignore_list=["asyncio", "filelock", "uvloop", "concurrent", "psycopg",
                                       "psycopg_pool"])

PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
T0 = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    for name in list(os.environ):
        # a developer's proxy would carry the tests' callbacks to 127.0.0.1 through it
        if name.startswith("AWTY_") or name.lower() in PROXY_VARS:
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    # `awty systemd --install` (an example the tests run) writes under it
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


@pytest.fixture
def rx():
    """A scriptable HTTP receiver on 127.0.0.1 (awty.testing.receiver), stopped after the test."""
    from awty.testing.receiver import Receiver

    with Receiver() as r:
        yield r


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def awty(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        yield a


def db_rows(home: Path, table: str) -> list[dict]:
    import sqlite3

    path = home / "awty.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
    finally:
        conn.close()


def tree_files(home: Path) -> list[str]:
    root = home / "slots"
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def tree_jobs(home: Path) -> list[str]:
    """``<slot>/<job id>`` of every envelope in the tree: an ``<id>.json`` file, or a line of a
    batch file (``<first-id>.batch.jsonl``)."""
    out = []
    for name in tree_files(home):
        sid, _, file = name.partition("/")
        if file.endswith(".batch.jsonl"):
            lines = (home / "slots" / name).read_text().splitlines()
            out += [f"{sid}/{json.loads(line)['id']}" for line in lines]
        elif file.endswith(".json"):
            out.append(f"{sid}/{file[:-5]}")
    return sorted(out)


# A stand-in for crontab(1) on PATH: keeps the table in the file named by $FAKE_CRONTAB.
FAKE_CRONTAB = """#!/bin/sh
case "$1" in
  -l) [ -f "$FAKE_CRONTAB" ] || { echo "no crontab for $USER" >&2; exit 1; }
      cat "$FAKE_CRONTAB" ;;
  -) cat > "$FAKE_CRONTAB" ;;
  *) echo "usage: crontab [-l | -]" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def fake_crontab(tmp_path, monkeypatch):
    """FAKE_CRONTAB as ``crontab`` on PATH, HOME in tmp_path; returns the table's file."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "crontab").write_text(FAKE_CRONTAB)
    (bindir / "crontab").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CRONTAB", str(tmp_path / "crontab.txt"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    with cron_daemon(bindir):
        yield tmp_path / "crontab.txt"


@contextmanager
def cron_daemon(bindir: Path):
    """A process named ``cron`` (a copy of sleep) for as long as the block runs: doctor looks
    for the daemon a crontab needs among the real processes."""
    shutil.copy("/bin/sleep", bindir / "cron")
    daemon = subprocess.Popen([str(bindir / "cron"), "900"])
    try:
        yield daemon
    finally:
        daemon.kill()
        daemon.wait()


@pytest.fixture(scope="session")
def pg_database():
    try:
        db = pgserver.SessionDatabase()
    except Exception as e:  # noqa: BLE001 - any reason means "no server", reported below
        message = pgserver.unavailable(str(e).strip().splitlines()[0] if str(e) else repr(e))
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        print(f"\nSKIPPING PostgreSQL tests: {message}", file=sys.stderr)
        pytest.skip(message)
    yield db
    db.drop()


def pg_url(conninfo: str) -> str:
    """The session database as a ``postgresql://`` URL, the form awty's setting takes."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    host = d.get("host", "")
    netloc = f"{quote(d.get('user', ''))}@" if d.get("user") else ""
    query = ""
    if host.startswith("/"):
        query = f"?host={quote(host)}"
    else:
        netloc += f"{host}:{d.get('port', 5432)}"
    return f"postgresql://{netloc}/{d['dbname']}{query}"


@dataclass
class Backend:
    """Where a test home keeps its jobs: ``args`` go on every ``awty`` command line (and
    ``kw`` into ``Awty(...)``) to point it at the store under test."""

    kind: str  # "sqlite" | "postgres"
    args: list[str]
    kw: dict
    env: dict


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, monkeypatch):
    """Each test using it runs once on SQLite (home/awty.db + slot tree) and once on a fresh
    PostgreSQL schema (created with `awty init` semantics, dropped afterwards)."""
    if request.param == "sqlite":
        yield Backend("sqlite", [], {}, {})
        return
    db = request.getfixturevalue("pg_database")
    schema = f"c_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("AWTY_DATABASE_SCHEMA", schema)
    from awty import store

    store.open(store.StoreSpec("postgres", db.url, schema), mode="init").close()
    url = pg_url(db.url)
    env = {"AWTY_DATABASE_URL": url, "AWTY_DATABASE_SCHEMA": schema}
    yield Backend("postgres", ["--database-url", url], {"database_url": url,
                                                        "database_schema": schema}, env)
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
