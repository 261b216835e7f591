"""SPEC 7 and 12, "a clock stepped backwards": the clock moves back and forth across slot
boundaries between runs (a FixedClock in-process, AWTY_NOW across real processes) and in the
middle of a run (the receiver moves the runner's clock at the n-th callback). No job is lost
and none fires twice: every job ends in history once, and each delivery is one recorded
execution (``job_event`` or folded into the history row: ``helpers.EXECUTIONS``)."""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from helpers import EXECUTIONS, T0
from awty.testing.receiver import Receiver
from relkit import account, cli_env, count, query, run_cli, scale

pytestmark = pytest.mark.reliability

_RECHECK = (200, {"Content-Type": "application/json"}, b'{"recheck_in": "20m"}')


def _replies():
    """/plain: 204. /re: "not yet, check again in 20m" twice, then done. /flaky: 500 on the
    first attempt of each check, then 204."""
    seen: Counter = Counter()

    def reply(r):
        seen[r.job_id] += 1
        if r.path == "/re" and seen[r.job_id] <= 2:
            return _RECHECK
        if r.path == "/flaky" and r.attempt == 1:
            return 500
        return 204

    return reply


_EXPECTED = {"/plain": 1, "/re": 3, "/flaky": 2}  # deliveries per job, by path


def _add_spread(a: Awty, rx: Receiver, n: int, rng: random.Random) -> dict[str, str]:
    """n jobs due over the next three hours; returns {id: path}."""
    specs, paths = [], []
    for i in range(n):
        path = rng.choice(["/plain", "/plain", "/re", "/flaky"])
        paths.append(path)
        specs.append({"target": rx.url(path), "in": f"{rng.randint(1, 180)}m",
                      "payload": {"i": i}, "max_attempts": 4})
    return {r.job.id: p for r, p in zip(a.add_many(specs), paths, strict=True)}


def _each_fired_as_often_as_it_should(ids: dict[str, str], delivered: dict[str, int]) -> None:
    off = {j: (p, delivered.get(j, 0)) for j, p in ids.items()
           if delivered.get(j, 0) != _EXPECTED[p]}
    assert not off, f"{len(off)} job(s) fired other than expected: {list(off.items())[:5]}"


def _executions_match_deliveries(home, delivered: dict[str, int]) -> None:
    events = dict(query(home, f"SELECT job_id, count(*) FROM {EXECUTIONS} GROUP BY job_id"))
    off = {j: (n, events.get(j)) for j, n in delivered.items() if events.get(j) != n}
    assert not off, f"deliveries != recorded executions (double fire?): {list(off.items())[:5]}"


def _drain(a: Awty, clock: FixedClock, limit: int = 20) -> None:
    """Catch up, an hour at a time, until nothing is pending (re-checks and retries land in
    later slots)."""
    for _ in range(limit):
        if not a.store.count():
            return
        clock.advance(timedelta(hours=1))
        a.catchup()
    assert a.store.count() == 0


@pytest.mark.slow
def test_clock_stepped_back_and_forth_between_runs(tmp_path):
    n = scale(400, 4000)
    steps = scale(60, 300)
    rng = random.Random(808)
    home = tmp_path / "home"
    clock = FixedClock(T0)
    started = time.monotonic()
    with Receiver(reply=_replies(), keep=False) as rx:
        a = Awty(home, clock=clock, env={}, quick_retries=0, concurrency=16)
        ids = _add_spread(a, rx, n, rng)
        back = fwd = refused = 0
        for _ in range(steps):
            # a random walk around the work, with steps across several slot boundaries
            delta = timedelta(minutes=rng.randint(-50, 60), seconds=rng.randint(0, 59))
            back += delta < timedelta(0)
            fwd += delta >= timedelta(0)
            clock.set(max(T0, min(clock.now() + delta, T0 + timedelta(hours=4))))
            what = rng.random()
            if what < 0.45:
                a.run_slot()  # "the boundary that just passed", by this clock
            elif what < 0.8:
                a.catchup()
            else:  # a slot given by name, maybe in this clock's future (refused)
                slot = a.current_slot() + timedelta(minutes=15 * rng.randint(-3, 2))
                try:
                    a.run_slot(slot)
                except Exception as e:  # InvalidInput: a slot in the future
                    assert "future" in str(e)
                    refused += 1
        _drain(a, clock)
        a.close()
        delivered = rx.counts()
    figures = account(home, ids, clock.now(), delivered=delivered)
    _executions_match_deliveries(home, delivered)
    _each_fired_as_often_as_it_should(ids, delivered)
    print(f"\n[clock/between runs] jobs={n} steps={steps} (back {back}, forward {fwd}, "
          f"future slot refused {refused}) deliveries={figures['deliveries']} "
          f"double fires=0 time={time.monotonic() - started:.1f}s")


@pytest.mark.parametrize("jump", [timedelta(hours=3), timedelta(hours=-3),
                                  timedelta(minutes=-14), timedelta(days=2)],
                         ids=["forward-3h", "back-3h", "back-14m", "forward-2d"])
def test_clock_stepped_mid_run(tmp_path, jump):
    """The clock jumps while a slot is being sent: claims made after the jump see a different
    "now" than the leases of the jobs still in flight. A runner must never take back its own
    jobs from itself (a forward jump past the lease) nor lose them."""
    n = scale(600, 5000)
    home = tmp_path / "home"
    clock = FixedClock(T0)
    moved = []

    def on_request(seen):
        if seen.n == 40 and not moved:
            clock.set(clock.now() + jump)
            moved.append(clock.now())

    with Receiver(on_request=on_request, delay=0.002, keep=False) as rx:
        a = Awty(home, clock=clock, env={}, quick_retries=0, concurrency=8, batch_size=50,
                 lease="60s", timeout="5s")
        ids = [r.job.id for r in a.add_many([{"target": rx.url("/m"), "in": "1m",
                                               "payload": {"i": i}} for i in range(n)])]
        slot = a.get(ids[0]).job.next_check_at
        clock.set(slot + timedelta(seconds=5))
        summary = a.run_slot(slot)
        assert moved
        left = a.store.count()
        if left:  # a backwards jump may leave the rest for later; catch-up takes it
            clock.set(max(clock.now(), slot) + timedelta(hours=1))
            a.catchup()
        a.close()
        delivered = rx.counts()
    figures = account(home, ids, clock.now(), delivered=delivered)
    _executions_match_deliveries(home, delivered)
    assert figures["duplicates"] == 0, f"{figures['duplicates']} double fire(s) after a " \
                                       f"{jump} step"
    print(f"\n[clock/mid-run {jump.total_seconds() / 3600:+.2f}h] jobs={n} first run ran {summary.ran}, left {left}; "
          f"duplicates=0")


@pytest.mark.slow
def test_awty_now_varied_between_processes(tmp_path):
    n = scale(300, 3000)
    runs = scale(10, 40)
    rng = random.Random(99)
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(reply=_replies(), keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            ids = _add_spread(a, rx, n, rng)
        now = T0
        codes = Counter()
        for i in range(runs):
            now = max(T0, min(now + timedelta(minutes=rng.randint(-45, 70)),
                              T0 + timedelta(hours=4)))
            env = cli_env(home, now, quick_retries=0)
            if i % 3 == 2:
                slot = now + timedelta(minutes=15 * rng.randint(-2, 1))
                slot = slot.replace(minute=slot.minute - slot.minute % 15, second=0,
                                    microsecond=0)
                p = run_cli(["run-slot", slot_id(slot)], env)
            else:
                p = run_cli(["catchup"] if i % 3 else ["run-slot"], env)
            assert "Traceback" not in p.stderr, p.stderr
            assert p.returncode in (0, 2), p.stderr  # 2: a slot in this clock's future
            codes[p.returncode] += 1
        later = T0 + timedelta(hours=6)
        for _ in range(10):
            if not count(home, "future_job"):
                break
            later += timedelta(hours=1)
            p = run_cli(["catchup"], cli_env(home, later, quick_retries=0))
            assert p.returncode == 0, p.stderr
        delivered = rx.counts()
    figures = account(home, ids, later, delivered=delivered)
    _executions_match_deliveries(home, delivered)
    _each_fired_as_often_as_it_should(ids, delivered)
    print(f"\n[clock/AWTY_NOW across processes] jobs={n} runs={runs} exit codes={dict(codes)} "
          f"deliveries={figures['deliveries']} double fires=0 "
          f"time={time.monotonic() - started:.1f}s")
