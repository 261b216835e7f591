"""Issue 32: a recurring schedule's occurrences, fired by real ``awty`` processes to a real
receiver on 127.0.0.1, on each store (``backend``), the clock pinned per process
(``AWTY_NOW``):

- ``*/5 * * * *`` at 1-minute slots, ``run-slot`` at every boundary for 2 hours by 2 runners
  at once: exactly 24 deliveries, each occurrence once;
- runners stopped for 3 hours, then the catch-up: ``once`` fires one and writes a ``skipped``
  history row counting the rest, ``all`` fires each, ``skip`` none (and says so);
- a runner SIGKILLed (with its store process) inside the occurrence's claim, or right after it
  while sending: after the recovery the next occurrence exists exactly once and the killed
  one is delivered.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.testing.receiver import Receiver
from relkit import cli_env, lease_passes, run_cli, spawn, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
SETTINGS = {"resolution": 1, "timeout": 5}


def _env(home, backend, now):
    return {**cli_env(home, now, **SETTINGS), **backend.env}


def _add(home, backend, url, *extra):
    res = run_cli(["schedule", "add", "tick", url, "--cron", "*/5 * * * *", "--tz", "UTC",
                   *extra], _env(home, backend, T0 - 30 * timedelta(seconds=1)))
    assert res.returncode == 0, res.stderr


def _run_slot(home, backend, boundary, runners=1):
    """``runners`` runs of the slot that just began, started together."""
    env = _env(home, backend, boundary + timedelta(seconds=1))
    procs = [spawn(["run-slot"], env) for _ in range(runners)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def _occurrences(rx) -> Counter:
    return Counter(r.headers.get("x-awty-occurrence") for r in rx.requests("/s"))


def test_every_boundary_two_runners_two_hours_fire_each_occurrence_once(home, backend):
    with Receiver() as rx:
        _add(home, backend, rx.url("/s"))
        for i in range(120):
            _run_slot(home, backend, T0 + i * MIN, runners=2)
        got = _occurrences(rx)
    assert sum(got.values()) == 24
    assert got == Counter({f"2026-11-22T{10 + m // 60:02d}:{m % 60:02d}:00Z": 1
                           for m in range(0, 120, 5)})
    with Awty(home, clock=FixedClock(T0 + 2 * 60 * MIN), env={}, **backend.kw) as a:
        (pending,) = a.store.schedule_jobs("tick")
        assert pending.occurrence == T0 + 2 * 60 * MIN
        assert {h.schedule for h in a.history()} == {"tick"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("policy, fired, skipped", [
    ("once", 1, "34 occurrences missed 2026-11-22 10:10–12:55 (UTC), policy once"),
    ("all", 35, None),
    ("skip", 0, "35 occurrences missed 2026-11-22 10:05–12:55 (UTC), policy skip"),
])
@pytest.mark.slow
def test_runners_stopped_three_hours(home, backend, policy, fired, skipped):
    back = T0 + 3 * 60 * MIN
    with Receiver() as rx:
        _add(home, backend, rx.url("/s"), "--missed", policy)
        _run_slot(home, backend, T0)  # 10:00 fires; then no runner for 3 hours
        assert sum(_occurrences(rx).values()) == 1
        res = run_cli(["catchup"], _env(home, backend, back + timedelta(seconds=1)))
        assert res.returncode == 0, res.stderr
        _run_slot(home, backend, back + MIN)  # the missed ones made by the catch-up, 13:00
        got = _occurrences(rx)
    missed = {k: n for k, n in got.items() if "T10:00" not in k and "T13:00" not in k}
    assert sum(missed.values()) == fired and set(missed.values()) <= {1}
    assert got["2026-11-22T10:00:00Z"] == 1 and got["2026-11-22T13:00:00Z"] == 1
    with Awty(home, clock=FixedClock(back), env={}, **backend.kw) as a:
        rows = [h.reason for h in a.history(outcome="skipped")]
        assert rows == ([skipped] if skipped else [])
        assert [j.occurrence for j in a.store.schedule_jobs("tick")] == [T0 + 185 * MIN]


# --- a runner killed in the occurrence's claim -------------------------------------------------
def _killpg(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its store process, if any
    except ProcessLookupError:
        pass


def _state(home, backend, now):
    """(the schedule's next_at, its jobs as (occurrence, status)), read as any process would."""
    with Awty(home, clock=FixedClock(now), env={}, **backend.kw) as a:
        return a.get_schedule("tick").next_at, [
            (j.occurrence, j.status.value) for j in a.store.schedule_jobs("tick")]


class _WriteHeld:
    """Holds what the claim of the occurrence needs (SQLite: the write lock, so the claim
    waits at its BEGIN IMMEDIATE; PostgreSQL: the schedule's row, so the claim waits inside
    its transaction, the occurrence's row already taken) and tells when a runner waits."""

    def __init__(self, home, backend):
        self.backend = backend
        if backend.kind == "sqlite":
            self.conn = sqlite3.connect(home / "awty.db", isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
            self.locks = home / "locks"
        else:
            import psycopg

            kw = backend.kw
            self.conn = psycopg.connect(kw["database_url"])
            self.conn.execute(f'SELECT 1 FROM "{kw["database_schema"]}".schedule '
                              "WHERE name = 'tick' FOR UPDATE")
            self.watch = psycopg.connect(kw["database_url"], autocommit=True)

    def waiting(self) -> bool:
        if self.backend.kind == "sqlite":
            # The runner holds the slot's lock (its note names it): what it does next is the
            # claim, which waits for the write lock (busy_timeout 30 s).
            return any(self.locks.glob("*.lock.owner"))
        return self.watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s", (f'%{self.backend.kw["database_schema"]}%',)
        ).fetchone()[0] > 0

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()
        if self.backend.kind != "sqlite":
            self.watch.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("when", ["in the claim", "while sending"])
def test_runner_killed_in_the_claim_next_occurrence_once_killed_one_delivered(
        home, backend, when):
    at = T0 + timedelta(seconds=1)
    first, second = "2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z"
    env = {**_env(home, backend, at), "AWTY_LEASE": "60s", "AWTY_BUSY_TIMEOUT": "30s"}
    victim: dict = {}

    def on_request(req):  # on the receiver's loop: the runner dies as its request arrives
        if when == "while sending" and "proc" in victim:
            _killpg(victim.pop("proc"))

    with Receiver(on_request=on_request) as rx:
        _add(home, backend, rx.url("/s"))
        held = _WriteHeld(home, backend) if when == "in the claim" else None
        proc = spawn(["run-slot"], env, start_new_session=True)
        victim["proc"] = proc
        try:
            if held is not None:
                assert wait_until(held.waiting, timeout=60), "the runner never reached its claim"
                time.sleep(0.2)
                _killpg(victim.pop("proc"))
        finally:
            proc.communicate(timeout=120)
            if held is not None:
                held.release()
        assert proc.returncode == -signal.SIGKILL, proc.returncode
        next_at, jobs = _state(home, backend, at)
        if when == "in the claim":  # rolled back: nothing moved, nothing made
            assert rx.total == 0
            assert (next_at, jobs) == (T0, [(T0, "pending")])
        else:  # the claim committed: the killed occurrence in flight, the next one made once
            assert _occurrences(rx) == Counter({first: 1})
            assert (next_at, jobs) == (T0 + 5 * MIN, [(T0, "in_flight"),
                                                      (T0 + 5 * MIN, "pending")])
        # Recovery: the next run after the lease (a catch-up), then the next occurrence's slot.
        if backend.kind == "postgres":
            lease_passes(backend.kw)
        res = run_cli(["catchup"], {**env, "AWTY_NOW": "2026-11-22T10:03:01Z"})
        assert res.returncode == 0, res.stderr
        _run_slot(home, backend, T0 + 5 * MIN)
        got = _occurrences(rx)
    assert got[first] == (2 if when == "while sending" else 1) and got[second] == 1
    assert set(got) == {first, second}
    later = T0 + 6 * MIN
    assert _state(home, backend, later) == (T0 + 10 * MIN, [(T0 + 10 * MIN, "pending")])
    with Awty(home, clock=FixedClock(later), env={}, **backend.kw) as a:
        rows = [(h.schedule, h.outcome) for h in a.history()]
        assert rows == [("tick", "done")] * 2, rows  # each occurrence's job ended once
        assert a.store.unarmed_schedules() == []
