"""The command line on both stores: every command a user runs day to day, through Typer's
CliRunner, once on SQLite (home/awty.db + slot tree) and once on PostgreSQL (``backend``
fixture: a fresh schema, ``--database-url``). Only output is asserted, never a table, so the
same test holds for both. Connection trouble on PostgreSQL: one line, exit 1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from awty.cli import app
from helpers import pg_url, tree_files

runner = CliRunner()
T_ADD = "2026-11-22T10:07:12Z"
T_RUN = "2026-11-22T10:15:05Z"  # just past the slot the adds land in
SLOT = "202611221015"


def run(home, backend, *args, now=T_ADD, monkeypatch=None):
    monkeypatch.setenv("AWTY_NOW", now)
    return runner.invoke(app, [*args, "--home", str(home), *backend.args])


@pytest.fixture
def cli(home, backend, monkeypatch):
    def call(*args, now=T_ADD, ok=True):
        res = run(home, backend, *args, now=now, monkeypatch=monkeypatch)
        if ok:
            assert res.exit_code == 0, (args, res.stdout, res.stderr)
        return res
    return call


def add(cli, url, *extra) -> str:
    return json.loads(cli("add", url, "--in", "5m", "--json", *extra).stdout)["id"]


@pytest.mark.slow
def test_add_list_show_run_history_stats(cli, rx, backend, home):
    ids = [add(cli, rx.url(f"/j{i}"), "--entity", "order", "--key", str(i)) for i in range(3)]
    listed = json.loads(cli("list", "--json").stdout)
    assert sorted(j["id"] for j in listed) == sorted(ids)
    assert json.loads(cli("show", ids[0], "--json").stdout)["status"] == "pending"
    done = json.loads(cli("run-slot", SLOT, "--json", now=T_RUN).stdout)
    assert done["ran"] == 3 and done["outcomes"] == {"done": 3}
    assert sorted(rx.counts().values()) == [1, 1, 1]
    assert json.loads(cli("list", "--json").stdout) == []
    hist = json.loads(cli("history", "--json").stdout)
    assert sorted(h["id"] for h in hist) == sorted(ids)
    assert tree_files(home) == []
    assert {h["outcome"] for h in hist} == {"done"}
    shown = json.loads(cli("show", ids[1], "--json").stdout)
    assert shown["state"] == "ended" and shown["outcome"] == "done"
    assert len(shown["executions"]) == 1
    stats = json.loads(cli("stats", "--json", now=T_RUN).stdout)
    assert stats["pending"]["total"] == 0
    if backend.kind == "postgres":  # drop-ins are a single-host feature: no slot tree
        assert not (home / "slots").exists() and not (home / "awty.db").exists()


@pytest.mark.slow
def test_cancel_reschedule_retry_prune(cli, rx, backend):
    a, b, c = (add(cli, rx.url(f"/{n}"), "--max-attempts", "1") for n in "abc")
    assert a in cli("cancel", a).stdout
    moved = json.loads(cli("reschedule", b, "--in", "2h", "--json").stdout)
    assert moved["slot"] == "202611221215"
    rx.script("/c", status=500)  # one attempt allowed: the job fails
    cli("run-slot", SLOT, now=T_RUN)
    assert len(rx.requests()) == 1 and rx.requests()[0].path == "/c"  # only c was due
    outcomes = {h["id"]: h["outcome"] for h in json.loads(cli("history", "--json").stdout)}
    assert outcomes[a] == "cancelled" and outcomes[c] == "failed"
    again = json.loads(cli("retry", c, "--json", now=T_RUN).stdout)
    assert [j["id"] for j in again] == [c] and again[0]["slot"] == "202611221030"
    pending = {j["id"] for j in json.loads(cli("list", "--json").stdout)}
    assert pending == {b, c}
    res = cli("prune", "--older-than", "1h", "--json", now="2026-11-23T10:00:00Z")
    assert json.loads(res.stdout)["pruned"] == 2  # a's ending and c's first one
    assert json.loads(cli("history", "--json").stdout) == []
    assert {j["id"] for j in json.loads(cli("list", "--json").stdout)} == {b, c}


@pytest.mark.slow
def test_catchup_runs_every_past_slot(cli, rx):
    for when in ("5m", "20m", "40m"):
        cli("add", rx.url("/x"), "--in", when)
    slots = json.loads(cli("slots", "--json", now="2026-11-22T11:00:05Z").stdout)
    assert [(x["slot"], x["jobs"], x["past"]) for x in slots] == [
        ("202611221015", 1, True), ("202611221030", 1, True), ("202611221100", 1, True)]  # 11:00 has passed at 11:00:05
    res = cli("catchup", "--json", now="2026-11-22T11:00:05Z")
    doc = json.loads(res.stdout)
    assert doc["ran"] == 3 and len(doc["slots"]) >= 3
    assert len(rx.requests("/x")) == 3
    assert json.loads(cli("list", "--json").stdout) == []


@pytest.mark.slow
def test_a_job_rechecked_moves_to_a_later_slot(cli, rx):
    rx.script("/r", json={"recheck_in": "1h"})
    job = add(cli, rx.url("/r"), "--max-checks", "3")
    cli("run-slot", SLOT, now=T_RUN)
    shown = json.loads(cli("show", job, "--json").stdout)
    assert shown["status"] == "pending" and shown["check_count"] == 1
    assert shown["slot"] == "202611221130"  # 10:15:05 + 1h, on to the next boundary


@pytest.mark.slow
def test_home_is_one_line_errors_on_a_bad_server(home, monkeypatch, pg_database):
    monkeypatch.setenv("AWTY_DATABASE_SCHEMA", "nobody_made_this")
    bad = {
        "postgresql://postgres@127.0.0.1:1/test": "Connection refused",
        "postgresql://postgres@127.0.0.1:5432/no_such_db_awty": "does not exist",
        pg_url(pg_database.url): "run `awty init`",
    }
    for url, expected in bad.items():
        for args in (["list"], ["add", "https://example.com/", "--in", "1h"], ["run-slot"]):
            res = runner.invoke(app, [*args, "--home", str(home), "--database-url", url])
            assert res.exit_code == 1, (url, args, res.stdout, res.stderr)
            assert res.stderr.count("\n") == 1 and expected in res.stderr, res.stderr
            assert "Traceback" not in res.stderr


def test_a_password_the_server_refuses_is_one_line(home, pg_database):
    """A role that needs a password: trust auth lets any password in on this server, so a
    role that may not log in stands for the refusal."""
    import psycopg

    with psycopg.connect(pg_database.url, autocommit=True) as c:
        c.execute("DROP ROLE IF EXISTS awty_nologin")
        c.execute("CREATE ROLE awty_nologin NOLOGIN PASSWORD 'x'")
    try:
        url = "postgresql://awty_nologin:wrong@127.0.0.1:5432/test"
        res = runner.invoke(app, ["list", "--home", str(home), "--database-url", url])
        assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.stderr
        assert "awty_nologin" in res.stderr and "Traceback" not in res.stderr
    finally:
        with psycopg.connect(pg_database.url, autocommit=True) as c:
            c.execute("DROP ROLE IF EXISTS awty_nologin")


@pytest.mark.slow
def test_init_creates_the_schema_then_finds_it(home, monkeypatch, pg_database):
    import psycopg

    schema = "init_" + home.parent.name[-8:].lower().replace("-", "_")
    monkeypatch.setenv("AWTY_DATABASE_SCHEMA", schema)
    args = ["--home", str(home), "--database-url", pg_url(pg_database.url)]
    try:
        first = runner.invoke(app, ["init", *args])
        assert first.exit_code == 0, first.stderr
        assert f'schema "{schema}"' in first.stdout and "created PostgreSQL" in first.stdout
        again = runner.invoke(app, ["init", *args])
        assert again.exit_code == 0 and "created PostgreSQL" not in again.stdout
        assert runner.invoke(app, ["list", *args]).exit_code == 0
        assert not (home / "slots").exists() and not (home / "awty.db").exists()
    finally:
        with psycopg.connect(pg_database.url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_database_url_before_the_command_and_from_the_environment(home, backend, monkeypatch,
                                                                  rx):
    url = backend.args[1]
    res = runner.invoke(app, ["--database-url", url, "--home", str(home), "add", rx.url("/"),
                              "--in", "1h", "--json"])
    assert res.exit_code == 0, res.stderr
    job = json.loads(res.stdout)["id"]
    monkeypatch.setenv("AWTY_DATABASE_URL", url)
    shown = runner.invoke(app, ["show", job, "--json", "--home", str(home)])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["id"] == job


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.slow
def test_quick_add_path_honours_database_url(home, backend, rx):
    """A plain `awty add` skips Typer (cli/quickadd.py): the flag must still pick the store."""
    url = backend.args[1]
    awty = [sys.executable, "-m", "awty"]
    add = subprocess.run([*awty, "add", rx.url("/q"), "--in", "1h", "--json", "--home",
                          str(home), "--database-url", url],
                         capture_output=True, text=True, timeout=60)
    assert add.returncode == 0, add.stderr
    job = json.loads(add.stdout)["id"]
    assert not (home / "awty.db").exists()  # nothing went to a SQLite home
    listed = subprocess.run([*awty, "list", "--json", "--home", str(home),
                             "--database-url", url], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [j["id"] for j in json.loads(listed.stdout)] == [job]


def test_add_on_sqlite_never_imports_psycopg(home):
    code = ("import sys; from awty.cli import main; sys.argv = ['awty', 'add', "
            "'https://example.com/', '--in', '1h', '--home', %r]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert not [m for m in sys.modules if m.startswith('psycopg')], 'psycopg loaded'\n"
            "print('clean')" % str(home))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "clean" in p.stdout, p.stderr
