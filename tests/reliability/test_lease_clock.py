"""Issue 28 #2: a killed runner whose clock ran ahead strands its claims for the lease, never for
the lease and its skew, and doctor names the leases a gone runner still holds. Real ``awty``
processes, a real receiver, a real SIGKILL; the killed runner's clock an hour ahead
(``AWTY_NOW``), every other command on the right one:

- right after the kill, ``awty doctor`` reports the jobs held by the gone runner and when their
  lease ends (before: "no stale leases"), on both stores;
- PostgreSQL (several hosts, several clocks): lease times are the server's, so once the lease
  has passed on the server's clock a catch-up on the right clock takes the dead runner's claims
  over (before: they waited for the lease and the hour). The server's clock cannot be moved by
  a test: the lease's passing is written into the rows (``relkit.lease_passes``);
- SQLite (one host, one clock: a runner's clock cannot run ahead of another's there): the
  lease is the runner's own clock's, a catch-up after it takes the claims over, as before.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.run.slotrun import lease_seconds
from awty.slots import slot_id
from awty.testing.receiver import Receiver
from helpers import T0
from relkit import cli_env, fill_slot, lease_passes, run_cli, spawn

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

SETTINGS = {"concurrency": 32, "timeout": 5}


def _env(home, backend, now) -> dict[str, str]:
    return {**cli_env(home, now, **SETTINGS), **backend.env}


def _in_flight(home, backend) -> int:
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        return a.count(status="in_flight")


def test_a_killed_runner_whose_clock_ran_ahead(home, backend):
    n = 3000
    runner: list = []

    def kill_it(req) -> None:
        if req.n == n // 4 and runner and runner[0].returncode is None:
            os.kill(runner[0].pid, signal.SIGKILL)

    with Receiver(delay=0.002, keep=False, on_request=kill_it) as rx:
        ids, slot = fill_slot(home, rx.url("/k"), n, T0, **backend.kw)
        now = slot + timedelta(seconds=1)
        with Awty(home, clock=FixedClock(now), env={}, **SETTINGS, **backend.kw) as a:
            lease = timedelta(seconds=lease_seconds(a.settings))
        runner.append(spawn(["run-slot", slot_id(slot), "--json"],
                            _env(home, backend, now + timedelta(hours=1))))
        runner[0].communicate(timeout=180)
        assert runner[0].returncode == -signal.SIGKILL
        held = _in_flight(home, backend)
        assert held > 0

        doctor = run_cli(["doctor", "--json"], _env(home, backend, now))
        [leases] = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "leases"]
        print(f"\n[{backend.kind}/killed runner, clock +1h] held={held}; doctor: "
              f"{leases['detail']}")
        assert not leases["ok"], leases
        assert f"{held} job(s) held by a runner that is gone" in leases["detail"]
        assert "lease ends" in leases["detail"]

        if backend.kind == "postgres":
            # the next run on the right clock sends the rest; the dead runner's claims wait
            first = run_cli(["catchup", "--json"], _env(home, backend, now))
            assert first.returncode == 0, first.stderr
            assert _in_flight(home, backend) == held
            lease_passes(backend.kw, by=lease)  # the lease, and no more, passes on the server
            later = now
        else:
            later = now + timedelta(hours=1) + lease  # one host: the runner's clock is the one
        caught = run_cli(["catchup", "--json"], _env(home, backend, later))
        assert caught.returncode == 0, caught.stderr
        delivered = rx.counts()
    assert set(delivered) == set(ids)  # nothing stranded, nothing lost
    twice = sum(c - 1 for c in delivered.values())
    assert twice <= held, (twice, held)  # only what the dead runner had on the wire
    with Awty(home, clock=FixedClock(later), env={}, **backend.kw) as a:
        assert a.count() == 0
        hist = Counter(h.id for h in a.history(limit=n + 100))
    assert set(hist) == set(ids) and max(hist.values()) == 1
    print(f"[{backend.kind}/killed runner, clock +1h] jobs={n} sent twice={twice}")
