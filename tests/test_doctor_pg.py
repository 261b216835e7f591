"""awty doctor on a PostgreSQL home (real server, a fresh schema per test): the server and
its version, the schema version (missing: the `awty init` hint), stale leases found and
released, drop-ins reported off, file and tree checks skipped with a note."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers import T0, check_a_schedule_that_lost_its_occurrence, doctor

from awty.api import Awty
from awty.clock import FixedClock

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


@pytest.fixture
def pga(home, backend):
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        a.init()
        yield a


def test_a_sound_home_names_the_server_schema_and_drop_ins(pga):
    report = doctor(pga)
    assert report.ok, [f.to_dict() for f in report.problems]
    server = report.get("server")
    assert server.ok and "PostgreSQL 1" in server.detail
    assert report.get("schema").detail.startswith("version ")
    assert "off" in report.get("drop-ins").detail
    assert "skipped" in report.get("files").detail
    names = [f.check for f in report.findings]
    assert "database" not in names and "slot tree" not in names


@pytest.mark.slow
def test_a_schedule_that_lost_its_occurrence_is_repaired(pga):
    check_a_schedule_that_lost_its_occurrence(pga)


def test_stale_leases_found_then_released(pga):
    job = pga.add("https://example.com/hook", in_="5m").job
    now = T0 + timedelta(minutes=10)
    claimed = pga.store.claim(job.next_check_at, now=now, owner="gone:1:x",
                              lease_until=now + timedelta(seconds=30), limit=10)
    assert [j.id for j in claimed] == [job.id]
    pga.clock = FixedClock(now + timedelta(minutes=5))  # the lease is the server's: still on
    held = doctor(pga, repair=True).get("leases")
    assert not held.ok and held.repaired is None, held
    assert "held by a runner that is gone: gone:1:x (1, lease ends " in held.detail
    _lease_passes(pga, timedelta(seconds=30))
    found = doctor(pga)
    leases = found.get("leases")
    assert not leases.ok and "gone:1:x (1)" in leases.detail
    assert pga.store.get(job.id).status.value == "in_flight"
    mended = doctor(pga, repair=True).get("leases")
    assert mended.repaired and "set 1 back to pending" in mended.detail
    assert pga.store.get(job.id).status.value == "pending"
    assert doctor(pga).get("leases").ok


def _lease_passes(a: Awty, by: timedelta) -> None:
    """Lease times are the server's: move them back, as if ``by`` had passed on its clock."""
    import psycopg

    with psycopg.connect(a.settings.database_url, autocommit=True) as c:
        c.execute(f'UPDATE "{a.settings.database_schema}".future_job '
                  "SET lease_until = lease_until - %s", (by,))


def test_a_missing_schema_says_run_init(home, backend, monkeypatch):
    monkeypatch.setenv("AWTY_DATABASE_SCHEMA", "nobody_made_this")
    with Awty(home, clock=FixedClock(T0), env={}, database_url=backend.kw["database_url"],
              database_schema="nobody_made_this") as a:
        report = doctor(a)
    assert report.get("server").ok
    schema = report.get("schema")
    assert not schema.ok and "run `awty init`" in schema.detail
    assert not report.ok


def test_a_server_that_does_not_answer_is_one_finding(home, backend):
    with Awty(home, clock=FixedClock(T0), env={},
              database_url="postgresql://postgres@127.0.0.1:1/test") as a:
        report = doctor(a)
    server = report.get("server")
    assert not server.ok and "Connection refused" in server.detail
    assert "leases" not in [f.check for f in report.findings]


def test_envelope_files_left_in_a_tree_are_a_warning(pga):
    (pga.home / "slots" / "202611221015").mkdir(parents=True)
    (pga.home / "slots" / "202611221015" / "x.json").write_text("{}")
    f = doctor(pga).get("drop-ins")
    assert f.ok and f.warning and "1 envelope file" in f.detail


def test_the_command_line_doctor_reads_the_database_url(home, backend, monkeypatch):
    from typer.testing import CliRunner

    from awty.cli import app

    res = CliRunner().invoke(app, ["doctor", "--json", "--home", str(home), *backend.args])
    import json

    checks = {f["check"]: f for f in json.loads(res.stdout)["findings"]}
    assert checks["server"]["ok"] and checks["schema"]["ok"], res.stdout
    assert "database" not in checks and "drop-ins" in checks
