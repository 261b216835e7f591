"""SPEC 12, "two runners at once" and "a locked database", with real processes.

3. Four ``run-slot`` processes started together on one slot, four ``--shard i/4`` runners,
   and everything at once (plain + shards + ``catchup``, with envelopes dropped in by another
   program): each job delivered exactly once.
4. Another process holds ``BEGIN IMMEDIATE`` longer than the busy timeout: ``add`` fails
   with one clear line and exit 1 and writes nothing; ``run-slot`` leaves the slot for later
   without a traceback; after the lock is released, catch-up delivers everything once.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from helpers import T0
from awty.testing.receiver import Receiver
from relkit import (account, cli_env, count, envelopes, query, run_cli, scale, spawn,
                    wait_until)

pytestmark = pytest.mark.reliability


def _fill(home, url, n, now=T0):
    with Awty(home, clock=FixedClock(now), env={}) as a:
        added = a.add_many([{"target": url, "in": "1m", "payload": {"n": i}} for i in range(n)])
    assert len({r.job.next_check_at for r in added}) == 1
    return [r.job.id for r in added], added[0].job.next_check_at


def _start_all(argvs, env):
    procs = [spawn(args, env) for args in argvs]
    outs = [p.communicate(timeout=120) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


# --- 3. runners at once --------------------------------------------------------------------
@pytest.mark.slow
def test_four_runners_on_one_slot_deliver_each_job_once(tmp_path):
    n = scale(2000, 10000)
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(delay=0.004, keep=False) as rx:  # slow enough that the four overlap
        ids, slot = _fill(home, rx.url("/same"), n)
        env = cli_env(home, slot + timedelta(seconds=1), concurrency=32)
        results = _start_all([["run-slot", slot_id(slot), "--json"]] * 4, env)
        delivered = rx.counts()
    assert all(code == 0 for code, _, _ in results), results
    busy = sum(1 for _, out, _ in results if json.loads(out).get("busy"))
    ran = sorted(json.loads(out)["ran"] for _, out, _ in results)
    figures = account(home, ids, slot + timedelta(seconds=1), delivered=delivered)
    assert figures["duplicates"] == 0 and set(delivered) == set(ids)
    assert sum(ran) == n
    print(f"\n[contention/4 runners] jobs={n} busy={busy} ran per runner={ran} duplicates=0 "
          f"time={time.monotonic() - started:.1f}s")


@pytest.mark.slow
def test_four_shards_deliver_each_job_once_and_only_their_own(tmp_path):
    n = scale(2000, 10000)
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(delay=0.002, keep=False) as rx:
        ids, slot = _fill(home, rx.url("/any"), n)
        env = cli_env(home, slot + timedelta(seconds=1), concurrency=16)
        results = _start_all([["run-slot", slot_id(slot), "--shard", f"{i}/4", "--json"]
                              for i in range(1, 5)], env)
        delivered = rx.counts()
    assert all(code == 0 for code, _, _ in results), results
    ran = [json.loads(out)["ran"] for _, out, _ in results]
    want = [sum(1 for j in ids if zlib.crc32(j.encode()) % 4 == i) for i in range(4)]
    assert ran == want  # shard i/4 ran exactly the jobs hashing to it
    figures = account(home, ids, slot + timedelta(seconds=1), delivered=delivered)
    assert figures["duplicates"] == 0
    print(f"\n[contention/4 shards] jobs={n} per shard={ran} duplicates=0 "
          f"time={time.monotonic() - started:.1f}s")


@pytest.mark.slow
def test_everything_at_once_with_drop_ins(tmp_path):
    """Four plain runners, four shard runners and a catch-up on the same slot at once (the
    hourly catch-up overlapping a sharded cron), with envelopes dropped into the slot by
    another program, some named by an awty id and some not: all imported once, all delivered
    once."""
    n = scale(2000, 10000)
    drops = 20
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(delay=0.002, keep=False) as rx:
        ids, slot = _fill(home, rx.url("/all"), n)
        from awty.ids import new_id

        named = [new_id(T0) for _ in range(drops // 2)]
        sdir = home / "slots" / slot_id(slot)
        for i in range(drops):
            name = f"{named[i]}.json" if i < len(named) else f"partner-{i}.json"
            (sdir / name).write_text(json.dumps({"target": rx.url("/drop"),
                                                 "payload": {"drop": i}}))
        env = cli_env(home, slot + timedelta(seconds=1), concurrency=16)
        argvs = [["run-slot", slot_id(slot), "--json"]] * 4
        argvs += [["run-slot", slot_id(slot), "--shard", f"{i}/4", "--json"] for i in range(1, 5)]
        argvs += [["catchup", "--json"]]
        results = _start_all(argvs, env)
        delivered = rx.counts()
        drop_payloads = [(p, i) for p, i, _, _ in rx.log() if p == "/drop"]
    assert all(code == 0 for code, _, _ in results), [r for r in results if r[0]]
    imported = [r[0] for r in query(home, "SELECT id FROM job_history WHERE target = ?",
                                    (rx.url("/drop"),))]
    assert len(imported) == drops, f"{len(imported)} drop-in job(s) for {drops} files"
    assert set(named) <= set(imported)
    assert len(drop_payloads) == drops
    rejected = sorted(p.name for p in (home / "rejected").rglob("*")) \
        if (home / "rejected").exists() else []
    assert rejected == [], rejected
    figures = account(home, ids + imported, slot + timedelta(seconds=1), delivered=delivered)
    assert figures["duplicates"] == 0
    print(f"\n[contention/all at once] jobs={n}+{drops} drop-ins, 9 processes, duplicates=0 "
          f"time={time.monotonic() - started:.1f}s")


def test_two_reconcilers_never_import_a_drop_in_twice(tmp_path):
    """The interleaving the test above hits only sometimes, made certain: while an unsharded
    runner is importing a slot's drop-ins, shard 1/2 of the same slot starts (it holds another
    lock). Envelopes named by an awty id and envelopes named anyhow are each imported once."""
    home = tmp_path / "home"
    with Receiver(keep=False) as rx:
        ids, slot = _fill(home, rx.url("/r"), 10)
        sdir = home / "slots" / slot_id(slot)
        from awty.ids import new_id

        for i in range(6):
            name = f"{new_id(T0)}.json" if i % 2 else f"partner-{i}.json"
            (sdir / name).write_text(json.dumps({"target": rx.url("/drop"),
                                                 "payload": {"drop": i}}))
        clock = FixedClock(slot + timedelta(seconds=1))
        a = Awty(home, clock=clock, env={}, quick_retries=0)
        b = Awty(home, clock=clock, env={}, quick_retries=0)
        real_add = a.store.add
        interleaved = []

        def add_then_let_the_shard_in(jobs, fps):
            if not interleaved:
                interleaved.append(b.run_slot(slot, shard=(0, 2)))
            return real_add(jobs, fps)

        a.store.add = add_then_let_the_shard_in
        try:
            a.run_slot(slot)
            b.run_slot(slot, shard=(1, 2))
        finally:
            a.close()
            b.close()
        delivered = rx.counts()
    assert interleaved, "the shard never ran inside the import"
    imported = [r[0] for r in query(home, "SELECT id FROM job_history WHERE target = ?",
                                    (rx.url("/drop"),))]
    assert len(imported) == 6, f"{len(imported)} jobs from 6 dropped-in envelopes"
    figures = account(home, ids + imported, clock.now(), delivered=delivered)
    assert figures["duplicates"] == 0


def test_a_shard_runs_the_drop_ins_it_imports_for_the_other_shards(tmp_path):
    """Shard 1/n reconciles; its slot claims take its own shard's jobs only. Drop-ins it imports
    for the other shards, whose runs may be over already (cron starts them together, and
    reconciling runs beside the sending), it claims by id: they fire in its run, not at the
    slot's next run. (``test_everything_at_once_with_drop_ins`` hit this only sometimes.)"""
    home = tmp_path / "home"
    with Receiver(keep=False) as rx:
        ids, slot = _fill(home, rx.url("/r"), 10)
        sdir = home / "slots" / slot_id(slot)
        for i in range(8):
            (sdir / f"partner-{i}.json").write_text(json.dumps({"target": rx.url("/drop"),
                                                                "payload": {"drop": i}}))
        clock = FixedClock(slot + timedelta(seconds=1))
        with Awty(home, clock=clock, env={}, quick_retries=0) as b:
            second = b.run_slot(slot, shard=(1, 2))  # done first; it does not reconcile
        with Awty(home, clock=clock, env={}, quick_retries=0) as a:
            first = a.run_slot(slot, shard=(0, 2))
            left = list(a.list())
        delivered = rx.counts()
    assert first.imported == 8 and second.imported == 0
    imported = [r[0] for r in query(home, "SELECT id FROM job_history WHERE target = ?",
                                    (rx.url("/drop"),))]
    assert left == [] and len(imported) == 8
    assert first.ran + second.ran == 18
    figures = account(home, ids + imported, clock.now(), delivered=delivered)
    assert figures["duplicates"] == 0


# --- 4. a locked database ------------------------------------------------------------------
class _Holder:
    """A write transaction held by this (test) process on its own connection."""

    def __init__(self, db):
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=30,
                                    check_same_thread=False)

    def __enter__(self):
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc):
        self.conn.execute("ROLLBACK")
        self.conn.close()


@pytest.mark.slow
def test_locked_database_add_fails_cleanly_and_runner_loses_nothing(tmp_path):
    n = scale(300, 3000)
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(keep=False) as rx:
        ids, slot = _fill(home, rx.url("/locked"), n)
        files_before = len(envelopes(home))
        env = cli_env(home, slot + timedelta(seconds=1), busy_timeout="1s")
        batch = tmp_path / "b.jsonl"
        batch.write_text("".join(json.dumps({"target": rx.url("/new"), "in": "2h"}) + "\n"
                                 for _ in range(50)))
        with _Holder(home / "awty.db"):
            t0 = time.monotonic()
            p = run_cli(["add", rx.url("/new"), "--in", "2h"], env)
            waited = time.monotonic() - t0
            assert p.returncode == 1, (p.returncode, p.stderr)
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "busy" in lines[0] and "Traceback" not in p.stderr, \
                p.stderr
            assert p.stdout == ""
            p2 = run_cli(["add", "--batch", str(batch)], env)
            assert p2.returncode == 1 and len(p2.stderr.strip().splitlines()) == 1, p2.stderr
            # run-slot: cannot claim; one clear line, no traceback, nothing lost or fired
            p3 = run_cli(["run-slot", slot_id(slot)], env)
            assert "Traceback" not in p3.stderr, p3.stderr
            assert p3.returncode in (0, 1), p3
            assert len(p3.stderr.strip().splitlines()) <= 1, p3.stderr
            assert rx.total == 0
        # nothing half-written: no row, no envelope of the refused adds
        assert count(home, "future_job") == n and len(envelopes(home)) == files_before
        assert not query(home, "SELECT 1 FROM future_job WHERE target = ?", (rx.url("/new"),))
        assert {r[0] for r in query(home, "SELECT status FROM future_job")} == {"pending"}
        p = run_cli(["catchup"], env)
        assert p.returncode == 0, p.stderr
        delivered = rx.counts()
    figures = account(home, ids, slot + timedelta(seconds=1), delivered=delivered)
    assert figures["duplicates"] == 0
    print(f"\n[contention/locked db] add refused after {waited:.2f}s: {lines[0]!r}; "
          f"run-slot: exit {p3.returncode} {p3.stderr.strip()!r}; then catchup delivered "
          f"{figures['deliveries']} of {n}, duplicates=0 time={time.monotonic() - started:.1f}s")


@pytest.mark.slow
def test_lock_taken_mid_run_loses_nothing(tmp_path):
    """The lock is taken while the runner is sending (its claims and result writes then wait
    past the busy timeout): the runner ends without a traceback, the store stays consistent,
    and once the lock is gone a catch-up after the lease delivers what is left."""
    n = scale(600, 6000)
    home = tmp_path / "home"
    holder: dict = {}
    started = time.monotonic()

    def on_request(seen):
        if seen.n == 120 and "h" not in holder:
            h = _Holder(home / "awty.db")
            h.__enter__()
            holder["h"] = h

    with Receiver(on_request=on_request, delay=0.002, keep=False) as rx:
        ids, slot = _fill(home, rx.url("/mid"), n)
        settings = dict(busy_timeout="1s", batch_size=50, concurrency=8, timeout="5s")
        p = spawn(["run-slot", slot_id(slot)], cli_env(home, slot + timedelta(seconds=1),
                                                        **settings))
        assert wait_until(lambda: "h" in holder or p.poll() is not None, 60)
        time.sleep(2.5)  # longer than the busy timeout, shorter than a lease
        holder["h"].__exit__(None, None, None)
        out, err = p.communicate(timeout=60)
        first = rx.total
        assert "Traceback" not in err, err
        assert p.returncode in (0, 1), (p.returncode, err)
        assert query(home, "PRAGMA integrity_check")[0][0] == "ok"
        later = slot + timedelta(hours=1)  # past every lease the first run left
        q = run_cli(["catchup"], cli_env(home, later, **settings))
        assert q.returncode == 0, q.stderr
        delivered = rx.counts()
    figures = account(home, ids, later, delivered=delivered)
    print(f"\n[contention/lock mid-run] jobs={n} first run: exit {p.returncode} "
          f"{err.strip()[:160]!r}, delivered {first}; after catchup duplicates="
          f"{figures['duplicates']} time={time.monotonic() - started:.1f}s")
    assert figures["duplicates"] <= 2 * 50 + 8  # at most the batches the lock held back
