"""Issue 30 #4: a laptop that sleeps. Cron does not run the boundaries a suspended machine
slept through; the first ``awty run-slot`` after it wakes (cron's own line, no slot given)
fires its own slot, then the past slots still holding work, oldest first, each under its own
lock, each job once; bounded by ``batch_size`` jobs of late work a run (the oldest slot
whole), the rest fired by the next boundary's run. Real ``awty`` processes with a pinned
clock (``AWTY_NOW``), a real receiver, both stores.

Before: run-slot fired only the slot that had just passed; the three late slots waited for
the hourly ``catchup``."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver
from helpers import T0
from relkit import cli_env, envelopes, run_cli

pytestmark = pytest.mark.reliability


def _asleep(home, backend, rx):
    """One job in each of three slots that pass while the machine sleeps, one in the slot at
    which it wakes: (the late jobs oldest first, the job due now)."""
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        late = [a.add(rx.url(f"/late{i}"), in_=f"{5 + 15 * i}m").job for i in range(3)]
        now = a.add(rx.url("/now"), in_="65m").job
    assert len({j.next_check_at for j in late}) == 3  # three slots, an empty one after them
    return late, now


def _run_slot(home, backend, at, **settings):
    res = run_cli(["run-slot", "--json"], {**cli_env(home, at, **settings), **backend.env})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _ended(home, backend):
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        assert a.count() == 0
        return Counter(h.outcome.value for h in a.history())


@pytest.mark.slow
def test_the_first_run_after_a_sleep_fires_what_it_missed(home, backend):
    with Receiver() as rx:
        late, now = _asleep(home, backend, rx)
        wake = now.next_check_at + timedelta(seconds=3)
        doc = _run_slot(home, backend, wake)
        # its own slot first (never held up by late work), then the late ones, oldest first
        assert [line.path for line in rx.log()] == ["/now", "/late0", "/late1", "/late2"]
        assert rx.counts() == {j.id: 1 for j in (now, *late)}
        assert doc["slot"] == slot_id(now.next_check_at) and doc["ran"] == 1
        assert [s["slot"] for s in doc["late"]] == [slot_id(j.next_check_at) for j in late]
        assert [s["ran"] for s in doc["late"]] == [1, 1, 1]
        # the next boundary's run finds nothing late and sends nothing again
        again = _run_slot(home, backend, wake + timedelta(minutes=15))
        assert again["ran"] == 0 and again["late"] == []
        assert rx.total == 4
    assert _ended(home, backend) == {"done": 4}
    if backend.kind == "sqlite":
        assert envelopes(home) == []


@pytest.mark.slow
def test_late_work_is_bounded_and_the_next_run_fires_the_rest(home, backend):
    with Receiver() as rx:
        late, now = _asleep(home, backend, rx)
        wake = now.next_check_at + timedelta(seconds=3)
        doc = _run_slot(home, backend, wake, batch_size=2)
        assert [line.path for line in rx.log()] == ["/now", "/late0", "/late1"]
        assert [s["slot"] for s in doc["late"]] == [slot_id(j.next_check_at) for j in late[:2]]
        nxt = _run_slot(home, backend, wake + timedelta(minutes=15), batch_size=2)
        assert rx.counts() == {j.id: 1 for j in (now, *late)}
        assert nxt["ran"] == 0
        assert [s["slot"] for s in nxt["late"]] == [slot_id(late[2].next_check_at)]
    assert _ended(home, backend) == {"done": 4}


def test_cron_hears_of_a_late_slot_that_failed(home):
    """Under cron (no terminal, no --json) a late slot's failures go to stderr, which cron
    mails, as the current slot's do."""
    with Receiver() as rx:
        rx.script("/gone", status=404)
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            bad = a.add(rx.url("/gone"), in_="5m").job
            now = a.add(rx.url("/now"), in_="65m").job
        res = run_cli(["run-slot"], cli_env(home, now.next_check_at + timedelta(seconds=3)))
    assert res.returncode == 0 and res.stdout == ""
    assert res.stderr.startswith(f"awty: late slot {slot_id(bad.next_check_at)}: ran 1 in ")
    assert res.stderr.rstrip().endswith(": 1 failed (see `awty history --outcome failed`)")
