"""Shared fixtures: a real home in tmp_path, a FixedClock, a pinned Rich width, and freezegun
told to leave the event loop and file locks alone (PITFALLS: frozen monotonic time hangs them).
Plain helpers and the names tests share (``T0``, ``db_rows``…) are in ``helpers``."""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import freezegun
import pytest

import pgserver

from awty.api import Awty
from awty.clock import FixedClock
from helpers import FAKE_CRONTAB, T0, URL, cron_daemon, pg_url

# Hypothesis loads every installed package's hypothesis plugin when a test module first imports
# it: trio's (trio comes with schemathesis) imports trio, which no test uses. Off, for
# collection's CPU (see pyproject's addopts).
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

freezegun.configure(extend_ignore_list=["asyncio", "filelock", "uvloop", "concurrent", "psycopg",
                                       "psycopg_pool"])

PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


# The inner loop (`-m "not slow"`, README "Tests") stays about a minute while every test in it
# takes under this much, setup and teardown included (quiet machine). Slower ones carry `slow`.
INNER_LOOP_BUDGET = 2.0


def pytest_terminal_summary(terminalreporter, config):
    """In a run that leaves the slow tests out, name the tests that took longer than the inner
    loop's budget: a report, not a failure (a loaded machine makes any test slow)."""
    if "not slow" not in (config.option.markexpr or ""):
        return
    took: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if isinstance(r, pytest.TestReport):
                took[r.nodeid] = took.get(r.nodeid, 0.0) + r.duration
    over = sorted(((s, n) for n, s in took.items() if s > INNER_LOOP_BUDGET), reverse=True)
    if over:
        terminalreporter.section(f"inner loop: {len(over)} test(s) over {INNER_LOOP_BUDGET:g} s")
        terminalreporter.line("mark them @pytest.mark.slow or make them faster (if the machine "
                              "was busy, run them alone first)")
        for seconds, nodeid in over:
            terminalreporter.line(f"{seconds:6.2f}s {nodeid}")


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


@pytest.fixture
def pg_schema(pg_database):
    """A schema name of this test's own in the session database (not created: the test or its
    fixture makes it, as awty would), dropped with everything in it after the test."""
    schema = f"t_{uuid.uuid4().hex[:10]}"
    yield schema
    import psycopg

    with psycopg.connect(pg_database.url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
    PostgreSQL schema (created with `awty init` semantics, dropped afterwards). Asking for it is
    enough for both; parametrize it (indirect) only to pick one store, or to keep the store last
    in the ids of a test with parameters of its own."""
    if request.param == "sqlite":
        yield Backend("sqlite", [], {}, {})
        return
    db = request.getfixturevalue("pg_database")
    schema = request.getfixturevalue("pg_schema")
    monkeypatch.setenv("AWTY_DATABASE_SCHEMA", schema)
    from awty import store

    store.open(store.StoreSpec("postgres", db.url, schema), mode="init").close()
    url = pg_url(db.url)
    env = {"AWTY_DATABASE_URL": url, "AWTY_DATABASE_SCHEMA": schema}
    yield Backend("postgres", ["--database-url", url], {"database_url": url,
                                                        "database_schema": schema}, env)


@pytest.fixture
def a(awty):
    """A home with two jobs (doctor's tests, tests/test_doctor*.py)."""
    awty.add(URL, in_="2h")
    awty.add(URL, in_="3h", entity="order", key="42")
    return awty
