"""Issue 10 #1 with real ``awty run-slot`` processes and a slow real receiver:

- SIGTERM and SIGINT stop gracefully: the requests in flight finish and are recorded, the
  unsent claims are given back at once (no lease to wait for), exit 143 / 130; the next run
  sends the rest, and nothing is sent twice.
- SIGKILL sends again at most what was in flight plus about 0.25 s of deliveries (decisions
  are written at least every 250 ms, not only per 1,000-job batch); with a store slower than
  the wire, sending pauses while two batches of results wait to be written.
- An unreadable signing secret stops the run before anything is claimed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta

import pytest
from helpers import T0, job_rows
from relkit import account, cli_env, fill_slot, query, run_cli, scale, spawn

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver

pytestmark = pytest.mark.reliability
CONCURRENCY = 16


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_gracefully_and_nothing_is_sent_twice(tmp_path, sig, code):
    n = scale(600, 3000)
    home = tmp_path / "home"
    with Receiver(delay=0.05, keep=False) as rx:
        ids, slot = fill_slot(home, rx.url("/stop"), n, T0)
        now = slot + timedelta(seconds=1)
        env = cli_env(home, now, concurrency=CONCURRENCY)
        p = spawn(["run-slot", slot_id(slot), "--json"], env)
        try:
            assert rx.wait_total(100, timeout=60) >= 100
            os.kill(p.pid, sig)
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
        assert p.returncode == code, err
        assert f"stopped by {signal.Signals(sig).name}" in err and "Traceback" not in err
        sent = set(rx.counts())
        recorded = {r[0] for r in query(home, "SELECT id FROM job_history")}
        assert recorded == sent  # every request sent has its result recorded
        left = [(r["status"], r["lease_owner"]) for r in job_rows(home, 30)]
        assert len(left) == n - len(sent) > 0
        assert set(left) == {("pending", None)}  # given back at once, not left leased
        again = run_cli(["run-slot", slot_id(slot), "--json"], env)
        assert again.returncode == 0, again.stderr
        delivered = rx.counts()
    figures = account(home, ids, now, delivered=delivered)
    assert figures["duplicates"] == 0
    print(f"\n[stop/{signal.Signals(sig).name}] jobs={n} sent before the stop={len(sent)} "
          f"re-sent=0")


@pytest.mark.slow
def test_a_signal_stops_a_catch_up_whose_next_slot_is_claimed_already(home, backend):
    # A catch-up opens the next slot (claims it) while a slot sends: SIGTERM in the middle
    # gives back the unsent claims of both, records every request sent, and the next catchup
    # sends the rest once. On each store (``backend``): read back through the library.
    per, n_slots = scale(200, 1000), 4
    with Receiver(delay=0.05, keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            added = a.add_many([{"target": rx.url("/cu"), "in": f"{15 * (i // per) + 5}m",
                                 "payload": {"n": i}} for i in range(per * n_slots)])
        ids = [r.job.id for r in added]
        assert len({r.job.next_check_at for r in added}) == n_slots
        later = T0 + timedelta(hours=2)
        env = {**cli_env(home, later, concurrency=CONCURRENCY), **backend.env}
        p = spawn(["catchup", "--json"], env)
        try:
            assert rx.wait_total(per + 50, timeout=60) >= per + 50  # into the second slot
            os.kill(p.pid, signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
        assert p.returncode == 143, err
        assert "stopped by SIGTERM" in err and "Traceback" not in err
        sent = set(rx.counts())
        with Awty(home, clock=FixedClock(later), env={}, **backend.kw) as a:
            recorded = {h.id for h in a.history(limit=per * n_slots + 10)}
            left = [(j.status.value, j.lease_owner) for j in a.list()]
        assert recorded == sent  # every request sent has its result recorded
        assert len(left) == per * n_slots - len(sent) > per  # the third slot was not sent
        assert set(left) == {("pending", None)}  # given back at once, not left leased
        again = run_cli(["catchup", "--json"], env)
        assert again.returncode == 0, again.stderr
        delivered = rx.counts()
    assert set(delivered) == set(ids) and set(delivered.values()) == {1}  # none lost, none twice
    with Awty(home, clock=FixedClock(later), env={}, **backend.kw) as a:
        assert a.count() == 0
        ended = a.history(limit=per * n_slots + 10)
    assert sorted(h.id for h in ended) == sorted(ids) and {h.outcome for h in ended} == {"done"}
    if backend.kind == "sqlite":  # and its slot tree: no envelope left, doctor clean
        assert account(home, ids, later, delivered=delivered)["duplicates"] == 0
    print(f"\n[stop/catchup/{backend.kind}] jobs={per * n_slots} sent before the stop="
          f"{len(sent)} re-sent=0")


@pytest.mark.slow
def test_sigkill_resends_at_most_in_flight_plus_a_quarter_second(tmp_path):
    n = scale(1500, 3000)
    home = tmp_path / "home"
    with Receiver(delay=0.05, keep=False) as rx:
        ids, slot = fill_slot(home, rx.url("/kill"), n, T0)
        now = slot + timedelta(seconds=1)
        p = spawn(["run-slot", slot_id(slot)], cli_env(home, now, concurrency=CONCURRENCY))
        try:
            assert rx.wait_total(50, timeout=60) >= 50
            t0, d0 = time.monotonic(), rx.total
            rx.wait_total(d0 + 250, timeout=60)
            rate = (rx.total - d0) / (time.monotonic() - t0)  # deliveries per second
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        finally:
            p.kill()
        at_kill = rx.total
        recorded = query(home, "SELECT count(*) FROM job_history")[0][0]
        later = cli_env(home, now + timedelta(hours=3), concurrency=CONCURRENCY)
        again = run_cli(["run-slot", slot_id(slot), "--json"], later)
        assert again.returncode == 0, again.stderr
        delivered = rx.counts()
    figures = account(home, ids, now + timedelta(hours=3), delivered=delivered)
    bound = CONCURRENCY + rate * 0.25
    print(f"\n[stop/SIGKILL] jobs={n} delivered at kill={at_kill} recorded={recorded} "
          f"re-sent={figures['duplicates']} rate={rate:.0f}/s bound={bound:.0f} "
          f"(in flight {CONCURRENCY} + 0.25 s of deliveries)")
    # A loaded machine delays a write by a scheduling quantum or two: allow 0.25 s more.
    assert figures["duplicates"] <= CONCURRENCY + rate * 0.5


def test_an_unreadable_secret_stops_the_run_before_claiming(tmp_path):
    home = tmp_path / "home"
    with Receiver() as rx:
        ids, slot = fill_slot(home, rx.url("/s"), 20, T0)
        env = cli_env(home, slot + timedelta(seconds=1),
                      signing_secret_file=str(tmp_path / "missing"))
        res = run_cli(["run-slot", slot_id(slot), "--json"], env)
        assert rx.total == 0
    assert res.returncode == 2 and "Traceback" not in res.stderr, res
    assert {(r["status"], r["lease_owner"]) for r in job_rows(home, 30)} == {("pending", None)}
    assert json.loads(res.stdout or "{}") == {}


@pytest.mark.slow
def test_a_store_slower_than_the_wire_holds_sending_back(tmp_path, monkeypatch):
    """Results a slow store has not written yet are callbacks a SIGKILL would send again, and
    memory: sending pauses while two batches of them wait (a store 0.1 s per write here)."""
    from awty.store.sqlite import SQLiteStore

    batch, conc, n = 50, 8, 600
    home = tmp_path / "home"
    exposed: list[int] = []
    written = [0]
    finish = SQLiteStore.finish

    with Receiver(keep=False) as rx:
        def slow_finish(self, decisions, **kw):
            exposed.append(rx.total - written[0])  # sent, result not yet in the store
            time.sleep(0.1)
            applied = finish(self, decisions, **kw)
            written[0] += len(decisions)
            return applied

        monkeypatch.setattr(SQLiteStore, "finish", slow_finish)
        ids, slot = fill_slot(home, rx.url("/slow-store"), n, T0)
        with Awty(home, clock=FixedClock(slot + timedelta(seconds=1)), env={},
                  batch_size=batch, concurrency=conc, store_process="off") as a:
            summary = a.run_slot(slot)
        assert summary.ran == n and rx.total == n
    assert max(exposed) <= 2 * batch + conc, exposed
    assert query(home, "SELECT count(*) FROM job_history")[0][0] == n
