"""Issue 10 #2 and #4 at the CLI, with real ``awty run-slot`` processes and a slow real receiver.

- ``cancel`` never lies: a job whose request is on the wire is not reported cancelled (exit 1,
  "being delivered now (runner pid N)"), and history keeps its real outcome; a job claimed but
  not yet sent is cancelled for real (exit 0) and never sent (lazy cancel).
- ``cancel --entity`` reports such jobs separately; ``reschedule`` refuses them.
- An unsharded run and a ``--shard 1/1`` run of one slot exclude each other even when the
  second runner's clock is an hour ahead (it would see every lease as expired): each job is
  delivered once.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from helpers import T0
from relkit import account, cli_env, query, run_cli, spawn

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver

pytestmark = pytest.mark.reliability


def _fill(home, url, n, **spec):
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        added = a.add_many([{"target": url, "in": "1m", "payload": {"n": i}, **spec}
                            for i in range(n)])
    # Firing order is id order (ids of one due millisecond differ only by their random part).
    return sorted(r.job.id for r in added), added[0].job.next_check_at


def _outcomes(home):
    return {i: (o, n) for i, o, n in query(home, "SELECT id, outcome, attempts FROM job_history")}


@pytest.mark.slow
def test_cancel_of_a_job_on_the_wire_says_so_and_history_keeps_the_real_outcome(tmp_path):
    home = tmp_path / "home"
    # 6 s per request: the three CLI calls below finish while the first one is on the wire,
    # even on a loaded machine
    with Receiver(delay=6.0) as rx:
        ids, slot = _fill(home, rx.url("/slow"), 4, entity="order", key="7")
        env = cli_env(home, slot + timedelta(seconds=1), concurrency=1)
        runner = spawn(["run-slot", slot_id(slot), "--json"], env)
        try:
            assert rx.wait_for(1, timeout=30), "the runner never sent"
            first = rx.requests()[0].job_id
            assert first == ids[0]
            res = run_cli(["cancel", first], env)
            assert res.returncode == 1, res
            assert f"job {first} is being delivered now (runner pid {runner.pid}); its " \
                   "outcome will be in history" in res.stderr
            assert "cancelled" not in res.stdout
            res = run_cli(["reschedule", first, "--in", "2h"], env)
            assert res.returncode == 1 and "being delivered now" in res.stderr, res
            # ids[1] is the runner's next chunk (already marked started); ids[2:] are claimed
            # and not started: cancelled for real, and never sent.
            res = run_cli(["cancel", "--entity", "order", "--json"], env)
            doc = json.loads(res.stdout)
            assert res.returncode == 1
            assert set(doc["cancelled"]) == set(ids[2:])
            assert {r["id"] for r in doc["running"]} == {ids[0], ids[1]}
            assert runner.wait(timeout=60) == 0
        finally:
            runner.kill()
            runner.communicate()
        sent = [r.job_id for r in rx.requests()]
    assert sent == ids[:2]  # nothing cancelled was sent, before or after cancel returned
    got = _outcomes(home)
    assert got[ids[0]] == ("done", 1) and got[ids[1]] == ("done", 1)
    assert all(got[i] == ("cancelled", 0) for i in ids[2:])
    account(home, ids, slot + timedelta(seconds=1), outcomes={"done", "cancelled"})


@pytest.mark.slow
def test_unsharded_and_shard_runs_exclude_each_other_whatever_the_clocks(tmp_path):
    n = 300
    home = tmp_path / "home"
    # 300 × 50 ms / 4 ≈ 4 s of sending: the sharded run starts well inside it even on a
    # loaded machine (at 10 ms the plain run could end before the second process began)
    with Receiver(delay=0.05, keep=False) as rx:
        ids, slot = _fill(home, rx.url("/once"), n)
        now = slot + timedelta(seconds=1)
        plain = spawn(["run-slot", slot_id(slot), "--json"], cli_env(home, now, concurrency=4))
        try:
            assert rx.wait_total(20, timeout=30) >= 20
            ahead = cli_env(home, now + timedelta(hours=1), concurrency=4)
            shard = run_cli(["run-slot", slot_id(slot), "--shard", "1/1", "--json"], ahead)
            out, err = plain.communicate(timeout=120)
        finally:
            plain.kill()
        delivered = rx.counts()
    assert plain.returncode == 0, err
    assert shard.returncode == 0, shard.stderr
    assert json.loads(shard.stdout)["busy"], shard.stdout  # it saw the slot taken
    assert json.loads(out)["ran"] == n
    figures = account(home, ids, now, delivered=delivered)
    assert figures["duplicates"] == 0
