"""awty doctor and the database: an old schema reported (read only) and migrated by --repair,
indexes a migration adds, a newer schema or a garbage file a finding and no crash, a missing
home reported and initialised. Real SQLite files in tmp_path; cron faked (helpers.doctor)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from helpers import URL, assert_clean, db_rows, doctor

from awty.api import Awty
from awty.slots import iso
from awty.store.migrations import SCHEMA_VERSION


def _set_user_version(db: Path, v: int) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {v}")
    conn.close()


def _undo_migration(db: Path, version: int, migration: str, *undo: str) -> None:
    """Make ``db`` as it was at schema ``version``, before ``migration`` (``undo`` reverses it)."""
    conn = sqlite3.connect(db)
    for sql in undo:
        conn.execute(sql)
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (migration,))
    conn.commit()
    conn.close()
    _set_user_version(db, version)


def test_old_schema_reported_read_only_then_migrated(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        a.add(URL, in_="1h")
    _set_user_version(home / "awty.db", 1)
    with Awty(home, clock=clock, env={}) as a:
        f = doctor(a).get("schema")
        assert not f.ok and "version 1" in f.detail
        assert db_rows(home, "future_job") and _user_version(home) == 1
    with Awty(home, clock=clock, env={}) as a:
        assert doctor(a, repair=True).get("schema").repaired is True
        assert _user_version(home) == SCHEMA_VERSION
        assert_clean(doctor(a))


def test_a_version_11_database_keeps_its_leases_and_start_marks_in_the_lease_table(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        j1, j2, j3 = (a.add(URL, in_="1h").job for _ in range(3))
    _undo_migration(home / "awty.db", 11, "0012_leases", "DROP TABLE job_lease",
                    "CREATE TABLE job_started (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                    "at TEXT NOT NULL) WITHOUT ROWID",
                    "CREATE INDEX future_job_in_flight ON future_job "
                    "(next_check_at, lease_owner, lease_until) WHERE status = 'in_flight'")
    until, claimed, started = "2026-11-22T12:30:00Z", "2026-11-22T12:20:00Z", "2026-11-22T12:21:00Z"
    conn = sqlite3.connect(home / "awty.db")
    for job, owner in ((j1, "o1"), (j2, "o2")):
        conn.execute("UPDATE future_job SET status = 'in_flight', lease_owner = ?, "
                     "lease_until = ?, updated_at = ? WHERE id = ?",
                     (owner, until, claimed, job.id))
    # j2's mark is another owner's (a claim taken over since): not j2's start
    conn.executemany("INSERT INTO job_started (id, owner, at) VALUES (?, 'o1', ?)",
                     [(j1.id, started), (j2.id, started)])
    conn.commit()
    conn.close()
    with Awty(home, clock=clock, env={}) as a:
        got = {j.id: a.store.get(j.id) for j in (j1, j2, j3)}
        assert [(g.status.value, g.lease_owner, g.started_at and iso(g.started_at))
                for g in got.values()] == [("in_flight", "o1", started),
                                           ("in_flight", "o2", None), ("pending", None, None)]
        assert iso(got[j1.id].lease_until) == until and iso(got[j1.id].updated_at) == claimed
        assert [(g.owner, g.jobs) for g in a.store.leases(clock.now())] == [("o1", 1), ("o2", 1)]
        assert a.count(status="in_flight") == 2 and a.count(status="pending") == 1
    conn = sqlite3.connect(home / "awty.db")
    try:
        assert set(conn.execute("SELECT status, lease_owner, started_at FROM future_job")) == {
            ("pending", None, None)}
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name IN ('job_started', "
                                "'future_job_in_flight')").fetchone()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_a_version_4_database_gets_the_slot_first_entity_index_on_open(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        a.add(URL, in_="1h", entity="order", key="7")
        a.add(URL, in_="2h", entity="order", key="8")
    _undo_migration(home / "awty.db", 4, "0005_slot_entity_index",
                    "DROP INDEX future_job_slot_entity",
                    "CREATE INDEX future_job_entity ON future_job (entity_name, entity_key)")
    with Awty(home, clock=clock, env={}) as a:
        res = a.cancel_entity("order", "8")
        assert [res.jobs[i].entity_key for i in res.cancelled] == ["8"]
        assert a.count(entity="order") == 1
    conn = sqlite3.connect(home / "awty.db")
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "future_job_slot_entity" in names and "future_job_entity" not in names
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def _user_version(home: Path) -> int:
    conn = sqlite3.connect(home / "awty.db")
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_newer_schema_and_garbage_database_are_findings_not_crashes(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        a.add(URL, in_="1h")
    _set_user_version(home / "awty.db", 99)
    with Awty(home, clock=clock, env={}) as a:
        f = doctor(a, repair=True).get("schema")
        assert not f.ok and "upgrade awty" in f.detail
    for p in home.glob("awty.db*"):
        p.unlink()
    (home / "awty.db").write_bytes(b"this is not a database" * 100)
    os.chmod(home / "awty.db", 0o600)
    with Awty(home, clock=clock, env={}) as a:
        report = doctor(a, repair=True)
        assert not report.get("schema").ok and "cannot read" in report.get("schema").detail
        assert "leases" not in [f.check for f in report.findings]


def test_missing_home_is_reported_then_initialised(tmp_path, clock):
    home = tmp_path / "nothere"
    with Awty(home, clock=clock, env={}) as a:
        f = doctor(a).get("home")
        assert not f.ok and "awty init" in f.detail
        assert not home.exists()
        assert doctor(a, repair=True).get("home").repaired is True
        assert oct(home.stat().st_mode & 0o777) == "0o700"
        assert_clean(doctor(a))
