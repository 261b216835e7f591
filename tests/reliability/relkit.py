"""Shared helpers for the fault-injection scenarios (SPEC 12): counts that scale with
``AWTY_FULL=1``, the ``awty`` CLI as a real subprocess with a pinned clock, and the accounting
every scenario ends with (each accepted job in history exactly once, nothing pending, nothing
left in the slot tree, ``PRAGMA integrity_check`` ok, doctor clean).

Named ``relkit`` rather than ``conftest``: a second ``conftest`` module would shadow
``tests/conftest.py`` for every ``from conftest import …`` collected after it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from awty.slots import iso

FULL = os.environ.get("AWTY_FULL", "") not in ("", "0")
OUTCOMES = {"done", "gone", "cancelled", "failed", "expired"}


def fill_slot(home: Path, url: str, n: int, now: datetime,
              **settings: object) -> tuple[list[str], datetime]:
    """``n`` jobs to ``url``, all due one minute after ``now`` (one slot): their ids and slot."""
    from awty.api import Awty
    from awty.clock import FixedClock

    with Awty(home, clock=FixedClock(now), env={}, **settings) as a:
        added = a.add_many([{"target": url, "in": "1m", "payload": {"n": i}} for i in range(n)])
    return [r.job.id for r in added], added[0].job.next_check_at


def scale(ci: int, full: int) -> int:
    """``ci`` in the normal run (CI), ``full`` under AWTY_FULL=1."""
    return full if FULL else ci


def cli_env(home: Path, now: datetime, **settings: object) -> dict[str, str]:
    """The environment of an ``awty`` subprocess: this interpreter's, minus any AWTY_* the
    test process had, plus the home, the pinned clock and ``AWTY_<KEY>`` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT on a hang prints every thread's stack
    env["AWTY_HOME"] = str(home)
    env["AWTY_NOW"] = iso(now)
    for k, v in settings.items():
        env[f"AWTY_{k.upper()}"] = str(v)
    return env


def spawn(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "awty", *args], env=env,
                            stdout=kw.pop("stdout", subprocess.PIPE),
                            stderr=kw.pop("stderr", subprocess.PIPE), text=True, **kw)


def run_cli(args: list[str], env: dict[str, str], timeout: float = 120
            ) -> subprocess.CompletedProcess:
    """Run ``awty ARGS`` to the end. A hang fails the test with the process's stacks (SIGABRT
    makes faulthandler print every thread) rather than a bare timeout."""
    proc = spawn(args, env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"awty {' '.join(args)} hung for {timeout}s; stacks:\n"
                             f"{err[-6000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_until(pred, timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def query(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(home / "awty.db", timeout=30)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def count(home: Path, table: str) -> int:
    if not (home / "awty.db").exists():
        return 0
    return query(home, f"SELECT count(*) FROM {table}")[0][0]


def integrity(home: Path) -> str:
    return query(home, "PRAGMA integrity_check")[0][0]


def envelopes(home: Path) -> list[Path]:
    """The envelope files: ``<id>.json``, and batch files (``<first-id>.batch.jsonl``)."""
    root = home / "slots"
    return sorted(p for p in root.rglob("*.json*") if p.name.endswith((".json", ".batch.jsonl"))
                  ) if root.exists() else []


def envelope_ids(home: Path) -> list[str]:
    """The job id of every envelope: an ``<id>.json`` file's, or each line of a batch file's
    (every line must be whole JSON: a batch file is written atomically)."""
    out = []
    for p in envelopes(home):
        if p.name.endswith(".batch.jsonl"):
            out += [json.loads(line)["id"] for line in p.read_text().splitlines()]
        else:
            out.append(p.stem)
    return out


def doctor_problems(home: Path, now: datetime, *, repair: bool = False) -> list[str]:
    """Doctor's findings that are neither ok nor repaired, except ``cron`` (no crontab in a
    test). Returns None when awty.doctor is not there to ask (the caller says so, loudly)."""
    try:
        from awty.doctor import diagnose
    except ImportError:
        return None  # type: ignore[return-value]
    from awty.api import Awty
    from awty.clock import FixedClock

    with Awty(home, clock=FixedClock(now), env={}) as a:
        report = diagnose(a, repair=repair, env={}, which=lambda _: None)
    return [f"{f.check}: {f.detail}" for f in report.findings
            if f.check != "cron" and not f.ok and not f.repaired]


def assert_doctor_clean(home: Path, now: datetime) -> None:
    problems = doctor_problems(home, now)
    if problems is None:
        # awty.doctor is not importable in this tree: this one assertion is skipped, loudly.
        warnings.warn("awty.doctor not importable: the doctor-clean assertion was skipped",
                      stacklevel=2)
        return
    assert problems == [], problems


def account(home: Path, accepted: Iterable[str], now: datetime, *,
            outcomes: set[str] = frozenset({"done"}),
            delivered: dict[str, int] | None = None) -> dict[str, int]:
    """The end-of-scenario accounting. ``accepted``: every job id the store accepted.
    Returns figures: jobs, history rows, deliveries, duplicates."""
    accepted = list(accepted)
    want = set(accepted)
    assert len(want) == len(accepted), "accepted ids repeat"
    hist = query(home, "SELECT id, outcome FROM job_history")
    per_id = Counter(i for i, _ in hist)
    extra = set(per_id) - want
    missing = want - set(per_id)
    twice = {i: n for i, n in per_id.items() if n > 1}
    assert not missing, f"{len(missing)} accepted job(s) never ended in history (lost): " \
                        f"{sorted(missing)[:5]}"
    assert not extra, f"{len(extra)} history row(s) for jobs never accepted: {sorted(extra)[:5]}"
    assert not twice, f"{len(twice)} job(s) ended more than once: {list(twice.items())[:5]}"
    bad = Counter(o for _, o in hist if o not in outcomes)
    assert not bad, f"unexpected outcomes: {dict(bad)}"
    assert count(home, "future_job") == 0, query(home, "SELECT id, next_check_at, status "
                                                      "FROM future_job LIMIT 5")
    left = envelopes(home)
    assert left == [], f"{len(left)} envelope(s) left in the slot tree: {left[:5]}"
    assert integrity(home) == "ok"
    assert_doctor_clean(home, now)
    figures = {"jobs": len(want), "history": len(hist)}
    if delivered is not None:
        never = want - set(delivered)
        done = {i for i, o in hist if o == "done"}
        assert not (never & done), f"{len(never & done)} job(s) done but never delivered"
        figures["deliveries"] = sum(delivered.values())
        figures["duplicates"] = sum(n - 1 for n in delivered.values() if n > 1)
    return figures


def lease_passes(kw: dict, by: timedelta = timedelta(hours=1)) -> None:
    """PostgreSQL keeps lease times in the server's clock, which no ``AWTY_NOW`` moves: move
    every lease back by ``by`` (``kw``: the ``database_url`` and ``database_schema``), as if that
    long had passed on the server."""
    import psycopg

    with psycopg.connect(kw["database_url"], autocommit=True) as c:
        c.execute(f'UPDATE "{kw["database_schema"]}".future_job '
                  "SET lease_until = lease_until - %s WHERE lease_until IS NOT NULL", (by,))


def write_batch(path: Path, lines: Iterable[dict]) -> int:
    n = 0
    with open(path, "w") as f:
        for spec in lines:
            f.write(json.dumps(spec, separators=(",", ":")) + "\n")
            n += 1
    return n


def refuse_history_rows(home: Path, backend, column: str, like: str, message: str) -> None:
    """Make the store refuse the history rows whose ``column`` is LIKE ``like`` (a trigger, as a
    constraint or a value the database cannot encode would): ``message`` is the database's
    error. ``backend``: the tests' store fixture (kind, kw)."""
    if backend.kind == "sqlite":
        import sqlite3

        from awty.api import Awty

        with Awty(home, env={}) as a:
            a.count()  # the database, made if the test has not yet
        with sqlite3.connect(home / "awty.db") as c:
            c.execute(f"CREATE TRIGGER refuse_rows BEFORE INSERT ON job_history "
                      f"WHEN NEW.{column} LIKE '{like}' "
                      f"BEGIN SELECT RAISE(ABORT, '{message}'); END")
        return
    import psycopg

    s = backend.kw["database_schema"]
    with psycopg.connect(backend.kw["database_url"], autocommit=True) as c:
        c.execute(f'CREATE FUNCTION "{s}".refuse_rows() RETURNS trigger LANGUAGE plpgsql AS '
                  f"$$ BEGIN IF NEW.{column} LIKE '{like}' THEN RAISE EXCEPTION '{message}' "
                  "USING ERRCODE = '22021'; END IF; RETURN NEW; END $$")
        c.execute(f'CREATE TRIGGER refuse_rows BEFORE INSERT ON "{s}".job_history '
                  f'FOR EACH ROW EXECUTE FUNCTION "{s}".refuse_rows()')


def allow_history_rows(home: Path, backend) -> None:
    """Undo ``refuse_history_rows``."""
    if backend.kind == "sqlite":
        import sqlite3

        with sqlite3.connect(home / "awty.db") as c:
            c.execute("DROP TRIGGER refuse_rows")
        return
    import psycopg

    with psycopg.connect(backend.kw["database_url"], autocommit=True) as c:
        c.execute(f'DROP TRIGGER refuse_rows ON "{backend.kw["database_schema"]}".job_history')
