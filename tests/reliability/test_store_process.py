"""Issue 12 #2: a big slot's store work runs in a process of its own (``store_process``,
``awty/run/storeproc.py``). Against a real receiver, real stores and real processes:

- a run through the store process records every job once, on SQLite and on PostgreSQL, and
  the process really did the work;
- the store process killed in the middle of a run: the run goes on with its own store, and
  once the leases are over every job is in history once;
- the runner killed (SIGKILL): the store process ends by itself, holding nothing;
- a SIGTERM to the whole process group (a terminal's Ctrl-C, systemd's stop): the store
  process outlives it long enough to record the runner's last results; nothing is sent twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0, job_rows
from relkit import account, cli_env, fill_slot, query, run_cli, scale, spawn, wait_until

import awty.run.storechild as storechild
import awty.run.storeproc as storeproc
from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.messages import Reply
from awty.testing.receiver import Receiver

pytestmark = pytest.mark.reliability


def _watch_processes(monkeypatch) -> list[storeproc.StoreProcess]:
    """Every StoreProcess made, and how many finish requests each was sent."""
    made: list[storeproc.StoreProcess] = []
    real_init, real_request = storeproc.StoreProcess.__init__, storeproc.StoreProcess.request

    def init(self, spec, loop):
        real_init(self, spec, loop)
        self.finished_calls = 0
        made.append(self)

    def request(self, op, *a, **kw):
        self.finished_calls += op == "finish"
        return real_request(self, op, *a, **kw)

    monkeypatch.setattr(storeproc.StoreProcess, "__init__", init)
    monkeypatch.setattr(storeproc.StoreProcess, "request", request)
    return made


def _slow_until_up(made: list[storeproc.StoreProcess], path_status: dict[str, int] | None = None):
    """Answers that wait 0.2 s until a store process is up, then 5 ms: the run lasts until the
    process has taken over however slowly it starts (a loaded machine took seconds), and no
    longer than it must."""
    statuses = path_status or {}

    def reply(req) -> Reply:
        up = bool(made) and made[0].up
        return Reply(status=statuses.get(req.path, 200), delay=0.005 if up else 0.2)

    return reply


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@pytest.mark.slow
def test_a_run_through_the_store_process_records_every_job_once(home, backend, monkeypatch):
    n = scale(1000, 4000)
    made = _watch_processes(monkeypatch)
    with Receiver(reply=_slow_until_up(made, {"/gone": 410}), keep=False) as rx:
        kw = dict(store_process="on", batch_size=50, concurrency=16, quick_retries=0,
                  **backend.kw)
        with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
            added = a.add_many([{"target": rx.url("/gone" if i % 4 == 0 else "/ok"),
                                 "in": "1m"} for i in range(n)])
            slot = added[0].job.next_check_at
            a.clock.set(slot + timedelta(seconds=1))
            s = a.run_slot(slot)
            history = a.history()
            left = list(a.list())
        delivered = rx.counts()
    assert s.ran == n and s.outcomes == {"done": n - n // 4, "gone": n // 4}
    assert left == [] and sorted(h.id for h in history) == sorted(r.job.id for r in added)
    assert sorted(delivered.values()) == [1] * n  # each job sent once
    assert len(made) == 1 and made[0].finished_calls >= 2  # the process recorded some


def test_auto_starts_a_store_process_only_where_it_pays(home, backend, monkeypatch):
    # "auto" on a big slot and on a catch-up of a batch or more: a store process on SQLite,
    # whose work holds the GIL; none on PostgreSQL, whose work is mostly the server's (one
    # would cost the run more CPU than it takes off: BENCHMARKS.md, pg_slot_ratio). Either
    # way every job is sent and recorded once.
    made = _watch_processes(monkeypatch)
    n = scale(200, 800)
    with Receiver(keep=False) as rx:
        kw = dict(store_process="auto", batch_size=50, concurrency=16, **backend.kw)
        with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
            added = a.add_many([{"target": rx.url("/ok"), "in": "1m" if i % 2 else "16m"}
                                for i in range(n)])
            first = min(r.job.next_check_at for r in added)
            a.clock.set(first + timedelta(seconds=1))
            s = a.run_slot(first)
            a.clock.set(first + timedelta(hours=1))
            caught = a.catchup()
            history = a.history()
        delivered = rx.counts()
    assert s.ran == n // 2 and [c.ran for c in caught.slots] == [n // 2]
    assert sorted(h.id for h in history) == sorted(r.job.id for r in added)
    assert sorted(delivered.values()) == [1] * n
    assert len(made) == (2 if backend.kind == "sqlite" else 0)


@pytest.mark.slow
def test_a_quick_retry_through_the_store_process_keeps_its_attempts(home, backend):
    # The process keeps the Jobs it claimed and is sent only the ids back; a quick retry
    # changes the runner's Job (one attempt more) after the claim. Until 2026-11-24 the process
    # wrote history from its own copy: 2,884 of 3,000 jobs that succeeded on their second
    # attempt were recorded with one.
    n = scale(600, 3000)
    with Receiver(reply=lambda r: 500 if r.attempt == 1 else 204, keep=False) as rx:
        kw = dict(store_process="on", batch_size=50, concurrency=16, quick_retries=1,
                  **backend.kw)
        with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
            added = a.add_many([{"target": rx.url("/flaky"), "in": "1m"} for _ in range(n)])
            slot = added[0].job.next_check_at
            a.clock.set(slot + timedelta(seconds=1))
            s = a.run_slot(slot)
            history = a.history()
            executions = a.executions(added[-1].job.id)
        delivered = rx.counts()
    assert s.ran == n and s.outcomes == {"done": n}
    assert sorted(delivered.values()) == [2] * n  # each job: one failure, one success
    assert {h.attempts for h in history} == {2} and len(history) == n
    assert [(e.attempt, e.status) for e in executions] == [(1, 500), (2, 204)]


def test_a_start_or_finish_that_kept_fewer_jobs_says_which(home, backend):
    """The process answers a start or finish that kept every job without their ids (the
    runner holds the batch); one that kept fewer names the kept: a job cancelled since its
    claim is not handed back to be sent, nor is a decision about it reported applied."""
    from awty.ids import new_owner
    from awty.model import Answer, End, Outcome, Result

    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        added = a.add_many([{"target": "http://127.0.0.1:9/x", "in": "1m"} for _ in range(4)])
        slot = added[0].job.next_check_at
        now, owner, store = slot + timedelta(seconds=1), new_owner(), a._store

        async def run() -> list[list[str]]:
            p = storeproc.StoreProcess(store.spec(), asyncio.get_running_loop())
            for _ in range(3000):
                if p.up:
                    break
                await asyncio.sleep(0.01)
            try:
                jobs = await p.request("claim", slot, now=now, owner=owner,
                                       lease_until=now + timedelta(minutes=5), limit=10,
                                       shard=None, kinds=None)
                ids = sorted(j.id for j in jobs)
                jobs.sort(key=lambda j: j.id)
                got = [await p.request("start", ids[:2], owner=owner, now=now)]
                assert a.cancel(ids[3]).cancelled == [ids[3]]
                got.append(await p.request("start", ids[2:], owner=owner, now=now))

                def end(j):
                    return End(j, Outcome.DONE, "http 204", Result(Answer.DONE, status=204), 1.0)

                for batch in (jobs[:1], jobs[1:]):
                    applied = await p.request("finish", [end(j) for j in batch], owner=owner,
                                              now=now, executions=[])
                    got.append([d.job.id for d in applied])
                return [ids, *got]
            finally:
                await p.aclose()

        with store.owner_session(owner):
            ids, *got = asyncio.run(run())
        assert got == [ids[:2], [ids[2]], ids[:1], ids[1:3]]
        assert sorted(h.id for h in a.history()) == ids  # three done, one cancelled


@pytest.mark.slow
def test_the_store_process_claims_by_id_and_records_what_it_claimed(home, backend):
    # What a shard's run asks for the drop-ins it imported for other shards: claim_ids, answered
    # by the process like a slot's claim (it keeps the Jobs, and takes their results by id).
    from awty.model import Answer, End, Outcome, Result

    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        added = [r.job for r in a.add_many([{"target": "https://example.com/h", "in": "1m"}
                                            for _ in range(5)])]
        now = added[0].next_check_at + timedelta(seconds=1)
        wanted = [j.id for j in added[:3]]

        async def through_the_process():
            r = storeproc.StoreProcess(a.store.spec(), asyncio.get_running_loop())
            deadline = time.monotonic() + 30
            while not r.up:
                assert r.gone is None and time.monotonic() < deadline
                await asyncio.sleep(0.01)
            try:
                jobs = await r.request("claim_ids", wanted, now=now, owner="o:1:x",
                                       lease_until=now + timedelta(minutes=5))
                done = [End(j, Outcome.DONE, "done", Result(Answer.DONE, status=204), 1.0)
                        for j in jobs]
                applied = await r.request("finish", done, owner="o:1:x", now=now)
            finally:
                await r.aclose()
            return jobs, applied

        jobs, applied = asyncio.run(through_the_process())
        history = a.history()
        left = sorted(j.id for j in a.list())
    assert sorted(j.id for j in jobs) == sorted(wanted)
    assert all(j.lease_owner == "o:1:x" for j in jobs)
    assert sorted(d.job.id for d in applied) == sorted(wanted)
    assert sorted(h.id for h in history) == sorted(wanted)
    assert left == sorted(j.id for j in added[3:])


@pytest.mark.slow
def test_a_catch_up_runs_all_its_slots_through_one_store_process(home, monkeypatch):
    # Slots of less than a batch each: a slot's own run never starts the process ("auto"
    # waits for a full claim), a catch-up of as many jobs as a batch or more starts one for
    # all its slots, and every job is still sent and recorded once, in slot order.
    made = _watch_processes(monkeypatch)
    slots, per = 8, scale(40, 120)
    with Receiver(reply=_slow_until_up(made), keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}, batch_size=per * 2, concurrency=8,
                  quick_retries=0) as a:
            added = a.add_many([{"target": rx.url(f"/s{i % slots}"),
                                 "in": f"{15 * (i % slots) + 5}m"} for i in range(slots * per)])
            a.clock.set(T0 + timedelta(hours=3))
            result = a.catchup()
            left = list(a.list())
            history = a.history()
        delivered = rx.counts()
    assert [s.ran for s in result.slots] == [per] * slots
    assert left == [] and sorted(h.id for h in history) == sorted(r.job.id for r in added)
    assert sorted(delivered.values()) == [1] * (slots * per)
    assert len(made) == 1 and made[0].finished_calls >= 2  # one process, for every slot


def test_the_store_process_killed_mid_run_loses_nothing(home, monkeypatch):
    n = scale(600, 3000)
    made = _watch_processes(monkeypatch)
    killed: list[int] = []

    def on_request(seen):
        if seen.n == n // 3 and made and made[0]._proc is not None and not killed:
            killed.append(made[0]._proc.pid)
            os.kill(made[0]._proc.pid, signal.SIGKILL)

    settings = dict(store_process="on", batch_size=50, concurrency=16, lease="60s")
    with Receiver(on_request=on_request, delay=0.002, keep=False) as rx:
        ids, slot = fill_slot(home, rx.url("/k"), n, T0)
        now = slot + timedelta(seconds=1)
        with Awty(home, clock=FixedClock(now), env={}, **settings) as a:
            s = a.run_slot(slot)
        assert killed, "the store process was never killed"
        assert made[0].gone is not None  # it was noticed, and the run went on without it
        later = now + timedelta(minutes=5)  # past every lease of the killed process's claims
        with Awty(home, clock=FixedClock(later), env={}, **settings) as a:
            a.catchup()
        delivered = rx.counts()
    figures = account(home, ids, later, delivered=delivered)
    # Re-sent: at most what the process took with it (a batch of results, a claim, a start).
    assert figures["duplicates"] <= 2 * 50, figures
    print(f"\n[store process killed] jobs={n} first run ran {s.ran}; after catch-up "
          f"duplicates={figures['duplicates']}")


@pytest.mark.slow
def test_a_killed_runner_leaves_no_store_process(tmp_path):
    n = scale(3000, 10000)
    home = tmp_path / "home"
    with Receiver(delay=0.01, keep=False) as rx:
        ids, slot = fill_slot(home, rx.url("/k"), n, T0)
        now = slot + timedelta(seconds=1)
        env = cli_env(home, now, store_process="on", concurrency=16, batch_size=100)
        p = spawn(["run-slot", slot_id(slot)], env)
        try:
            assert rx.wait_total(200, timeout=60) >= 200
            kids = _children(p.pid)
            assert kids, "no store process under the runner"
            os.kill(p.pid, signal.SIGKILL)
            p.communicate(timeout=30)
            assert wait_until(lambda: all(_ended(k) for k in kids), timeout=20), \
                "the store process outlived its runner"
        finally:
            p.kill()
        later = now + timedelta(hours=1)
        r = run_cli(["catchup"], cli_env(home, later))
        assert r.returncode == 0, r.stderr
        delivered = rx.counts()
    account(home, ids, later, delivered=delivered)


@pytest.mark.slow
def test_sigterm_to_the_process_group_still_records_through_the_store_process(tmp_path):
    n = scale(3000, 10000)
    home = tmp_path / "home"
    with Receiver(delay=0.02, keep=False) as rx:
        ids, slot = fill_slot(home, rx.url("/t"), n, T0)
        now = slot + timedelta(seconds=1)
        env = cli_env(home, now, store_process="on", concurrency=16, batch_size=100)
        p = spawn(["run-slot", slot_id(slot), "--json"], env, start_new_session=True)
        try:
            assert rx.wait_total(300, timeout=60) >= 300
            assert _children(p.pid), "no store process under the runner"
            os.killpg(p.pid, signal.SIGTERM)  # the runner and its store process alike
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
        assert p.returncode == 143, err
        assert "Traceback" not in err
        sent = set(rx.counts())
        recorded = {r[0] for r in query(home, "SELECT id FROM job_history")}
        assert recorded == sent  # every request sent had its result recorded
        assert {(r["status"], r["lease_owner"]) for r in job_rows(home, 30)} == {
            ("pending", None)}
        again = run_cli(["run-slot", slot_id(slot)], env)
        assert again.returncode == 0, again.stderr
        delivered = rx.counts()
    assert account(home, ids, now, delivered=delivered)["duplicates"] == 0


def test_a_claimed_job_crosses_to_the_runner_whole():
    """Every field of a Job but its claim (status, lease, start) travels through the process
    boundary: a field added to Job and not to job_out/job_in fails here, not in a run."""
    from datetime import UTC, datetime

    from awty.model import Job, Kind, Status

    t = datetime(2026, 11, 24, 9, 15, tzinfo=UTC)
    claim = {"status": Status.IN_FLIGHT, "lease_owner": "host:1:abc",
             "lease_until": t + timedelta(minutes=5), "started_at": None}
    values = {f: f"v-{f}" for f in Job._fields}
    values.update(kind=Kind.EXEC, headers={"x-a": "1"}, first_check_at=t,
                  next_check_at=t + timedelta(minutes=15), check_count=2, attempt=3,
                  max_checks=4, max_attempts=5, horizon=86400.0, timeout=30.0,
                  misfire_grace=60.0, created_at=t, updated_at=t, env={"A": "b"}, **claim)
    job = Job(**values)
    back = storechild.job_in(storechild.job_out(job), claim["lease_owner"], claim["lease_until"])
    assert back == job
    assert len(storechild.job_out(job)) == len(Job._fields) - len(claim)


def test_the_store_process_opens_a_sqlite_store_without_asyncio(home):
    """The child's side (``storechild``) has no event loop: asyncio (with ssl, logging and
    concurrent.futures) cost each run's start ~35 ms of CPU in the child. Its modules, as
    ``python -m awty.run.storechild`` loads them, and the store it opens."""
    import pickle
    import subprocess
    import sys

    with Awty(home, clock=FixedClock(T0), env={}) as a:
        spec = a.store.spec()
    code = ("import pickle, runpy, sys\n"
            "storechild = runpy.run_module('awty.run.storechild')\n"
            f"storechild['open_spec'](pickle.loads({pickle.dumps(spec)!r})).close()\n"
            "print(sorted(m for m in ('asyncio', 'ssl', 'concurrent.futures')"
            " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_store_process_still_opening_its_store_is_not_waited_for():
    """A run that ends (an outage run giving up) while its store process is still opening the
    store, at a server that accepts and never answers: the process was asked nothing, so it
    is ended at once, not after its connect timeout (5 s here), which the outage run's
    give-up bound does not include (tests/reliability/test_outage.py)."""
    import socket

    from awty.store.spec import StoreSpec

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nothing ever answers
    url = f"postgresql://postgres@127.0.0.1:{silent.getsockname()[1]}/postgres"

    async def run() -> tuple[float, storeproc.StoreProcess]:
        r = storeproc.StoreProcess(StoreSpec("postgres", url, connect_timeout=5),
                               asyncio.get_running_loop())
        await asyncio.sleep(0.5)  # its Python has started; it is connecting
        t0 = time.monotonic()
        await r.aclose()
        return time.monotonic() - t0, r

    try:
        took, r = asyncio.run(run())
    finally:
        silent.close()
    assert not r.up
    assert took < 2.5, f"aclose waited {took:.1f} s for a store process asked nothing"
