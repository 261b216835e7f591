"""Issue 32: a recurring schedule's occurrences, fired by real ``awty`` processes to a real
receiver on 127.0.0.1, on each store (``backend``), the clock pinned per process
(``AWTY_NOW``):

- ``*/5 * * * *`` at 1-minute slots, ``run-slot`` at every boundary for 2 hours by 2 runners
  at once: exactly 24 deliveries, each occurrence once;
- runners stopped for 3 hours, then the catch-up: ``once`` fires one and writes a ``skipped``
  history row counting the rest, ``all`` fires each, ``skip`` none (and says so).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.testing.receiver import Receiver
from relkit import cli_env, run_cli, spawn

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


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
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
