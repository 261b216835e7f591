"""What tests share that is not a fixture: the suite's fixed instant, readers of a home's
rows and files, a stand-in crontab, one way to build a ``Job``, doctor run with cron faked.
Imported as ``helpers`` (``tests/`` is on ``sys.path``, as for conftest); fixtures stay in
``conftest.py``."""

from __future__ import annotations

import json
import shutil
import subprocess
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awty.model import Job, Kind

if TYPE_CHECKING:
    from awty.api import Awty
    from awty.doctor import Finding, Report

T0 = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)


def make_job(target: str = "https://example.com/", *, id: str = "01JTESTJOB00000000000000001",
             kind: Kind = Kind.HTTP, at: datetime = T0, first: datetime | None = None,
             payload: Any = None, payload_json: str = "{}", headers: dict[str, str] | None = None,
             entity: str | None = None, key: str | None = None, **fields: Any) -> Job:
    """A ``Job`` as a store would hand it to an executor or a policy: due ``at`` (first checked
    ``first``, default ``at``); ``payload`` (any JSON value) or ``payload_json`` (its text);
    any other field of ``Job`` by name."""
    return Job(id=id, kind=kind, target=target,
               payload_json=payload_json if payload is None else json.dumps(payload),
               headers=headers or {}, entity_name=entity, entity_key=key,
               first_check_at=first or at, next_check_at=at, **fields)


def slow_except(values: list[Any], fast: set[Any]) -> list[Any]:
    """``values`` for ``parametrize``, each case marked ``slow`` except those in ``fast``: the
    inner loop (``-m "not slow"``) runs a sample of a long family of like cases, the whole suite
    runs them all. Test ids are unchanged."""
    import pytest

    assert fast <= set(values), fast - set(values)
    return [v if v in fast else pytest.param(v, marks=pytest.mark.slow) for v in values]


# Every execution a SQLite home recorded, as a table for ``db_rows`` or a query: the event
# log's rows and those folded into history rows (migration 11), in job_event's columns.
EXECUTIONS = ("(SELECT job_id, at, slot, check_no, attempt, answer, status, duration_ms, "
              "lateness_ms, error, host, pid FROM job_event UNION ALL SELECT id, exec_at, "
              "exec_slot, exec_check, exec_attempt, exec_answer, last_status, duration_ms, "
              "lateness_ms, error, host, pid FROM job_history WHERE exec_at IS NOT NULL)")


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


def job_rows(home: Path, timeout: float = 5.0) -> list[dict]:
    """The SQLite home's jobs as the store reads them, by column (``JOB_COLUMNS``): status,
    lease_owner, lease_until and started_at from the job's lease row (migration 12)."""
    import sqlite3

    from awty.store.sqlite_rows import JOB_COLUMNS, SELECT_JOB

    conn = sqlite3.connect(home / "awty.db", timeout=timeout)
    try:
        return [dict(zip(JOB_COLUMNS, r, strict=True)) for r in conn.execute(SELECT_JOB)]
    finally:
        conn.close()


def set_lease(conn, job_id: str, owner: str | None, until: str | None) -> None:
    """Put the SQLite job ``job_id`` in flight under ``owner`` until ``until`` (an instant's
    text), as a claim would leave it (its lease row, migration 12)."""
    conn.execute("INSERT OR REPLACE INTO job_lease (job_id, owner, until, claimed_at) "
                 "VALUES (?, ?, ?, ?)", (job_id, owner, until, until or "2000-01-01T00:00:00Z"))


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
            # bytes, as awty reads them: str.splitlines also splits at U+2028, U+0085… which
            # a JSON line may hold raw (hypothesis found one in test_batch_lines_fuzzed)
            lines = (home / "slots" / name).read_bytes().splitlines()
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


# --- doctor (tests/test_doctor*.py) ----------------------------------------------------------
URL = "https://example.com/hook"


def cron_fakes(lines: list[str] | None = None, *, binary: bool = True, rc: int = 0,
               stderr: str = ""):
    calls = []

    def which(name):
        return f"/usr/bin/{name}" if binary else None

    def run(cmd, **kw):
        calls.append(cmd)
        assert Path(cmd[0]).name == "crontab" and cmd[1:] == ["-l"], \
            "doctor only ever reads the crontab"
        out = "".join(line + "\n" for line in lines or [])
        return subprocess.CompletedProcess(cmd, rc, out if rc == 0 else "", stderr)

    run.calls = calls
    return which, run


def doctor(a: Awty, repair: bool = False, *, cron_lines=None, **fakes) -> Report:
    from awty import crontab
    from awty.doctor import diagnose

    if cron_lines is None:
        cron_lines = crontab.entries(a.home, a.settings.resolution, "awty")
    which, run = cron_fakes(cron_lines, **fakes)
    env = {"HOME": str(a.home.parent / "user")}
    return diagnose(a, repair=repair, env=env, which=which, run=run,
                    proc=fake_proc(a.home.parent, "cron"))


def fake_proc(where: Path, *daemons: str) -> Path:
    """A /proc root whose processes are ``daemons`` (by ``comm``)."""
    proc = where / "proc"
    for pid, name in enumerate(daemons, start=1):
        (proc / str(pid)).mkdir(parents=True, exist_ok=True)
        (proc / str(pid) / "comm").write_text(name + "\n")
    proc.mkdir(exist_ok=True)
    return proc


def bad(report: Report) -> dict[str, Finding]:
    return {f.check: f for f in report.findings if not f.ok}


def assert_clean(report: Report):
    assert report.ok, [f for f in report.findings if not f.ok]
    assert all(f.ok for f in report.findings), bad(report)


def check_a_schedule_that_lost_its_occurrence(a: Awty) -> None:
    """A schedule's occurrences have no envelope by design (made inside a claim): doctor is
    clean; its pending occurrence cancelled by id is a problem --repair mends, once."""
    a.schedule("hourly", URL, cron="0 * * * *", tz="UTC")
    a.schedule("paused", URL, cron="30 * * * *", tz="UTC")
    a.pause("paused")
    assert_clean(doctor(a))
    (job,) = a.store.schedule_jobs("hourly")
    a.cancel(job.id)
    found = doctor(a).get("schedules")
    assert not found.ok and found.repaired is None, found
    assert found.detail.startswith("1 live schedule(s) without a pending occurrence")
    assert "hourly" in found.detail and "paused" not in found.detail
    assert a.store.schedule_jobs("hourly") == []  # without --repair nothing changes
    mended = doctor(a, repair=True).get("schedules")
    assert mended.repaired is True, mended
    (again,) = a.store.schedule_jobs("hourly")
    assert again.occurrence == job.occurrence and again.id != job.id
    assert a.store.schedule_jobs("paused") == []
    assert doctor(a, repair=True).get("schedules").repaired is None  # nothing left to make
    assert len(a.store.schedule_jobs("hourly")) == 1
    assert_clean(doctor(a))
